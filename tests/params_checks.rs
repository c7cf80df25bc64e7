//! The engine's parameter checks on the real 2 KiB fixture (CPU backend, nothing is proved):
//! a `.vk` file that does not match its `.params` file is 201 naming both, a missing `.vk` file
//! is 200 naming it, and with `FIL_PROOFS_VERIFY_PRODUCTION_PARAMS` the fixture's (test, not
//! official) files are 201 naming the file.
//!
//! The large `.params` file is never copied: each test directory links to the fixture's.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cuzk::{Backend, Engine, EngineConfig, Error, ProveOptions};
use cuzk_dev::fixture::{default_fixture_dir, ensure_2kib_fixture, run_self_with_env, Fixture};

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let _ = env_logger::builder().is_test(true).try_init();
        ensure_2kib_fixture(&default_fixture_dir()).expect("2 KiB fixture")
    })
}

/// A fresh directory holding a link to the fixture's `.params` file (same name).
fn dir_with_params(name: &str) -> (PathBuf, PathBuf) {
    let f = fixture();
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("params-checks-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let params = d.join(f.params_file.file_name().unwrap());
    std::os::unix::fs::symlink(&f.params_file, &params).unwrap();
    (d, params)
}

/// Proves the fixture's C1 output with an engine on `config`; returns the error.
fn prove_err(config: EngineConfig) -> Error {
    let f = fixture();
    let engine = Engine::new(config.with_backend(Backend::Cpu)).unwrap();
    let c1 = f.read_c1().unwrap();
    engine
        .prove_porep_c2(&c1, f.sector_id, &f.prover_id, &ProveOptions::default())
        .map(|_| ())
        .expect_err("the parameters must be refused")
}

fn in_dir(d: &Path) -> EngineConfig {
    EngineConfig::default().with_parameter_dir(d)
}

#[test]
fn a_vk_file_that_does_not_match_its_params_is_201_naming_both() {
    let f = fixture();
    let (d, params) = dir_with_params("vk-mismatch");
    let mut vk = cuzk::srs::read_vk_file(&f.vk_file).unwrap();
    vk.alpha_g1 = vk.beta_g1; // another key of the right shape
    let vk_path = params.with_extension("vk");
    let mut bytes = Vec::new();
    vk.write(&mut bytes).unwrap();
    std::fs::write(&vk_path, bytes).unwrap();

    let e = prove_err(in_dir(&d));
    eprintln!("mismatching .vk: error {}: {e}", e.code());
    assert_eq!(e.code(), 201, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&params.display().to_string()) && msg.contains(&vk_path.display().to_string()),
        "the message names both files: {msg}"
    );
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn a_missing_vk_file_is_200_naming_it() {
    let (d, params) = dir_with_params("vk-missing");
    let e = prove_err(in_dir(&d));
    eprintln!("missing .vk: error {}: {e}", e.code());
    let vk_path = params.with_extension("vk");
    assert!(
        matches!(e, Error::ParametersNotFound { ref path, .. } if *path == vk_path),
        "{e}"
    );
    assert_eq!(e.code(), 200);
    assert!(
        e.to_string().contains(&vk_path.display().to_string()),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn production_check_refuses_the_test_parameters_with_201_naming_the_file() {
    let f = fixture();
    let e = prove_err(in_dir(&f.param_dir).with_verify_production_params(true));
    eprintln!("production check: error {}: {e}", e.code());
    assert_eq!(e.code(), 201, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&f.params_file.display().to_string()) && msg.contains("official"),
        "{msg}"
    );
    // The outcome is cached by (path, size, mtime): a second engine does not hash again and
    // gets the same error.
    let t = std::time::Instant::now();
    let again = prove_err(in_dir(&f.param_dir).with_verify_production_params(true));
    assert_eq!(again.to_string(), msg);
    eprintln!(
        "second check (cached) in {:.3} s",
        t.elapsed().as_secs_f64()
    );
}

const ENV_TEST: &str = "fil_proofs_verify_production_params_from_the_environment";

/// `FIL_PROOFS_VERIFY_PRODUCTION_PARAMS=1` in the environment turns the check on through
/// `EngineConfig::from_env`. The variable is given to a child run of this test (the test
/// harness is multithreaded: the environment is not changed in-process).
#[test]
fn fil_proofs_verify_production_params_from_the_environment() {
    let f = fixture();
    if std::env::var_os("CUZK_TEST_CHILD").is_none() {
        let out = run_self_with_env(
            ENV_TEST,
            &[
                ("FIL_PROOFS_VERIFY_PRODUCTION_PARAMS", "1".as_ref()),
                ("CUZK_TEST_CHILD", "1".as_ref()),
            ],
        )
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        eprintln!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "child run failed: {}", out.status);
        assert!(stdout.contains("1 passed"), "the child ran no test");
        return;
    }
    let config = EngineConfig::from_env().unwrap();
    assert!(config.verify_production_params);
    let e = prove_err(config.with_parameter_dir(&f.param_dir));
    assert_eq!(e.code(), 201, "{e}");
    assert!(
        e.to_string().contains(&f.params_file.display().to_string()),
        "{e}"
    );
}
