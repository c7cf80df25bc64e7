//! The `cuzk` binary end to end: help, gen-c1, gen-params (the fixture's files byte for byte), and
//! a CPU proof of a generated 2 KiB C1 output with the 2 KiB fixture's parameters, checked by
//! verify_seal.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cuzk(args: &[&str]) -> Output {
    cuzk_with_params_var(args, None)
}

/// `cuzk args`, with `FIL_PROOFS_PARAMETER_CACHE` set to `params_var` (`None`: unset).
fn cuzk_with_params_var(args: &[&str], params_var: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cuzk"));
    cmd.args(args).env_remove("FIL_PROOFS_PARAMETER_CACHE");
    if let Some(d) = params_var {
        cmd.env("FIL_PROOFS_PARAMETER_CACHE", d);
    }
    let out = cmd.output().expect("run cuzk");
    eprintln!(
        "$ cuzk {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cuzk-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `cuzk gen-c1 --sector-size 2KiB --seed <seed>` into `<d>/c1`; returns its wrapper JSON.
fn gen_c1_2kib(d: &Path, seed: &str) -> PathBuf {
    assert!(cuzk(&[
        "gen-c1",
        "--sector-size",
        "2KiB",
        "--seed",
        seed,
        s(&d.join("c1"))
    ])
    .status
    .success());
    d.join("c1").join("c1-wrapper.json")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn help_of_every_command() {
    for args in [
        &["--help"][..],
        &["prove", "--help"],
        &["verify", "--help"],
        &["verify-post", "--help"],
        &["verify-snap", "--help"],
        &["prove-post", "--help"],
        &["gen-c1", "--help"],
        &["gen-post", "--help"],
        &["gen-snap", "--help"],
        &["prove-snap", "--help"],
        &["gen-params", "--help"],
    ] {
        let out = cuzk(args);
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).contains("Exit codes"));
    }
    assert_eq!(cuzk(&["prove"]).status.code(), Some(2));
}

#[test]
fn gen_params_rejects_unknown_sizes() {
    let d = tmp_dir("params");
    let out = cuzk(&["gen-params", "--sector-size", "3KiB", "--seed", "1", s(&d)]);
    assert_eq!(out.status.code(), Some(14));
    let out = cuzk(&[
        "gen-params",
        "--kind",
        "snap-deals",
        "--sector-size",
        "3KiB",
        "--seed",
        "1",
        s(&d),
    ]);
    assert_eq!(out.status.code(), Some(14));
    let help = cuzk(&["gen-params", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("snap-deals"));
    let out = cuzk(&[
        "gen-params",
        "--sector-size",
        "2KiB",
        "--seed",
        "1",
        "--device",
        "tpu",
        s(&d),
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// The 2 KiB fixture's parameter seed (`cuzk_dev::fixture::PARAMS_RNG_SEED`) in hex.
fn fixture_seed_hex() -> String {
    cuzk_dev::fixture::PARAMS_RNG_SEED
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `cuzk gen-params` with the fixture's seed writes the fixture's (bellperson-generated)
/// `.params`, `.vk` and `.meta` files byte for byte. `CUZK_GEN_PARAMS_DEVICE=gpu` runs the
/// fixed-base multiplications on the GPU (a `--features cuda` build). Ignored by default: about
/// 5 minutes on 2 cores (1.1 GB written); the fixture is built first when missing.
#[test]
#[ignore = "about 5 minutes on 2 cores; run with --ignored"]
fn gen_params_2kib_equals_the_fixture() {
    let params = fixture_params();
    let device = std::env::var("CUZK_GEN_PARAMS_DEVICE").unwrap_or_else(|_| "cpu".into());
    let d = tmp_dir("gen-params-2kib");
    let out = cuzk(&[
        "gen-params",
        "--sector-size",
        "2KiB",
        "--seed",
        &fixture_seed_hex(),
        "--device",
        &device,
        s(&d),
    ]);
    assert!(out.status.success());
    let mut compared = 0;
    for e in std::fs::read_dir(&params).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if !(name.ends_with(".params") || name.ends_with(".vk") || name.ends_with(".meta")) {
            continue;
        }
        let ours = d.join(&name);
        let (a, b) = (std::fs::read(&p).unwrap(), std::fs::read(&ours).unwrap());
        assert_eq!(a.len(), b.len(), "{name}: length");
        if let Some(i) = a.iter().zip(&b).position(|(x, y)| x != y) {
            panic!("{name}: first difference at byte {i}");
        }
        compared += 1;
    }
    assert_eq!(compared, 3, "the fixture's .params, .vk and .meta");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn gen_c1_writes_three_files() {
    let d = tmp_dir("gen");
    let out = cuzk(&[
        "gen-c1",
        "--sector-size",
        "8MiB",
        "--seed",
        "x",
        "--sector-num",
        "9",
        "--prover-id",
        "f0777",
        s(&d),
    ]);
    assert!(out.status.success());
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["sector_id"], 9);
    assert_eq!(meta["registered_proof"], "StackedDrg8MiBV1_1");
    let prover_id = cuzk::c1::prover_id_from_actor_id(777);
    for f in ["c1.json", "c1-wrapper.json"] {
        let c1 = cuzk::c1::parse(&std::fs::read(d.join(f)).unwrap()).unwrap();
        cuzk::c1::validate(&c1, 9, &prover_id).unwrap();
        assert_eq!(
            cuzk::c1::hex(&c1.output.comm_r),
            meta["comm_r"].as_str().unwrap()
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// Problems with paths fail before any proving, with their own codes: an `--out` that cannot be
/// created (90, and no file left behind), a parameter directory without the verifying key
/// (`verify`: 20, not a rejected proof; nothing written there), an unreadable verifying key (21).
#[test]
fn bad_paths_fail_before_any_work() {
    let d = tmp_dir("paths");
    let c1 = gen_c1_2kib(&d, "p");
    let empty = d.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let t = std::time::Instant::now();
    let out = cuzk(&[
        "prove",
        s(&c1),
        "--prover-id",
        "f01000",
        "--params",
        s(&empty),
        "--backend",
        "cpu",
        "--out",
        s(&d.join("no-such-dir").join("proof.bin")),
    ]);
    assert_eq!(out.status.code(), Some(90));
    assert!(String::from_utf8_lossy(&out.stderr).contains("opening --out"));
    assert!(t.elapsed().as_secs() < 60, "failed only after proving");
    let proof = d.join("proof.bin");
    std::fs::write(&proof, [0u8; 192]).unwrap();
    let verify = |params: &Path| {
        cuzk(&[
            "verify",
            s(&c1),
            "--prover-id",
            "f01000",
            "--params",
            s(params),
            "--proof",
            s(&proof),
        ])
    };
    assert_eq!(verify(&empty).status.code(), Some(20));
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "verify wrote into --params"
    );
    // A truncated verifying key under the right name.
    let out = verify(&empty);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let vk = stderr
        .split_whitespace()
        .find(|w| w.ends_with(".vk"))
        .expect("the missing .vk is named");
    std::fs::write(vk, [1u8; 100]).unwrap();
    assert_eq!(verify(&empty).status.code(), Some(21));
    std::fs::remove_dir_all(&d).unwrap();
}

/// Bad per-device counts in the environment (`CUZK_GPU_SECTIONS`, `CUZK_GPU_WORKERS_PER_DEVICE`)
/// and bad `CUZK_MSM_ACCUMULATION` / `CUZK_MSM_AFFINE_MIN_LIST` / `CUZK_H_AHEAD` /
/// `CUZK_MSM_BATCH` values
/// are the configuration error (104, exit status 14) naming the variable, before any proving.
#[test]
fn bad_per_device_counts_exit_14() {
    let d = tmp_dir("counts");
    let c1 = gen_c1_2kib(&d, "q");
    for (var, value, why) in [
        ("CUZK_GPU_SECTIONS", "0", "1..=64"),
        ("CUZK_GPU_SECTIONS", "two", "1..=64"),
        ("CUZK_GPU_SECTIONS", "65", "1..=64"),
        ("CUZK_GPU_WORKERS_PER_DEVICE", "0", "1..=64"),
        ("CUZK_MSM_ACCUMULATION", "fast", "affine or xyzz"),
        ("CUZK_MSM_AFFINE_MIN_LIST", "2^28", "number of list entries"),
        ("CUZK_H_AHEAD", "sometimes", "while-loading, always or off"),
        ("CUZK_MSM_BATCH", "0", "1 to 16 partitions"),
        ("CUZK_MSM_BATCH", "17", "1 to 16 partitions"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
            .args([
                "prove",
                s(&c1),
                "--prover-id",
                "f01000",
                "--params",
                s(&d),
                "--backend",
                "cpu",
            ])
            .env_remove("FIL_PROOFS_PARAMETER_CACHE")
            .env(var, value)
            .output()
            .expect("run cuzk");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(14), "{var}={value}: {stderr}");
        assert!(
            stderr.contains("error 104") && stderr.contains(var) && stderr.contains(why),
            "{var}={value}: {stderr}"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// A malformed `--prover-id` is the prover-id error (102, exit status 12) naming the value and
/// the accepted forms, before anything is read (the C1 path does not exist).
#[test]
fn malformed_prover_ids_exit_12() {
    let hex62 = "ab".repeat(31);
    for bad in ["zz", "f0abc", hex62.as_str()] {
        for cmd in ["prove", "verify"] {
            let mut args = vec![
                cmd,
                "/nonexistent/cuzk-cli-test/c1.json",
                "--prover-id",
                bad,
            ];
            if cmd == "verify" {
                args.extend(["--proof", "/nonexistent/cuzk-cli-test/proof.bin"]);
            }
            let out = cuzk(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(12), "{stderr}");
            assert!(
                stderr.contains(&format!("error 102: invalid prover id {bad:?}")),
                "{stderr}"
            );
            assert!(
                stderr.contains("f01000") && stderr.contains("64 hex digits"),
                "{stderr}"
            );
        }
    }
    let out = cuzk(&[
        "gen-c1",
        "--sector-size",
        "2KiB",
        "--seed",
        "x",
        "--prover-id",
        "zz",
        "/nonexistent/cuzk-cli-test/out",
    ]);
    assert_eq!(out.status.code(), Some(12));
}

/// `verify-post` refuses what it cannot check before reading the proof (the path does not
/// exist): a proof type that is no PoSt type (11) or WindowPoSt V1 (13), a WinningPoSt of two
/// sectors (11), a bad prover id (12), a missing verifying key (20, naming the directory), a
/// malformed randomness or sector (2). Its verdicts on real proofs: daemon/go.
#[test]
fn verify_post_refuses_what_it_cannot_check() {
    let d = tmp_dir("verify-post");
    let comm_r = "11".repeat(32);
    let (one, two) = (format!("1:{comm_r}"), format!("2:{comm_r}"));
    let r = "00".repeat(32);
    let base = |proof: &str, sectors: &[&str]| {
        let mut a = vec![
            "verify-post",
            "--registered-proof",
            proof,
            "--randomness",
            &r,
            "--prover-id",
            "f01000",
            "--params",
            s(&d),
            "--proof",
            "/nonexistent/cuzk-cli-test/proof.bin",
        ];
        for x in sectors {
            a.extend(["--sector", x]);
        }
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = cuzk(&a);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for (args, code, needle) in [
        (base("15", &[&one]), 11, "not a PoSt proof type"),
        (base("7", &[&one]), 13, "WindowPoSt V1"),
        (base("0", &[&one, &two]), 11, "one challenged sector"),
        (base("10", &[&one, &one]), 11, "given twice"),
        (base("10", &[&one]), 20, s(&d)),
        (base("3", &[&one]), 20, s(&d)),
        (base("10", &["1:abc"]), 2, "64 hex digits"),
        (base("10", &["x:00"]), 2, "not a sector number"),
    ] {
        let (c, stderr) = run(args.clone());
        assert_eq!(c, Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    let mut bad_id = base("10", &[&one]);
    bad_id[6] = "zz".into();
    assert_eq!(run(bad_id).0, Some(12));
    let mut bad_r = base("10", &[&one]);
    bad_r[4] = "00".into();
    assert_eq!(run(bad_r).0, Some(2));
}

/// `verify-snap` with a commitment that is not a canonical field element (filecoin-proofs
/// panics on one): invalid input (exit 11) naming it, before the parameters are read, and no
/// panic.
#[test]
fn verify_snap_refuses_commitments_that_are_no_field_elements() {
    let d = tmp_dir("verify-snap");
    let (ok, bad) = ("00".repeat(32), "ff".repeat(32));
    for name in ["--comm-r-old", "--comm-r-new", "--comm-d-new"] {
        let mut a = vec![
            "verify-snap",
            "--registered-proof",
            "0",
            "--params",
            s(&d),
            "--proof",
            "/nonexistent/cuzk-cli-test/proof.bin",
        ];
        for c in ["--comm-r-old", "--comm-r-new", "--comm-d-new"] {
            a.extend([c, if c == name { &bad } else { &ok }]);
        }
        let out = cuzk(&a);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(11), "{name}: {stderr}");
        assert!(
            stderr.contains(name) && stderr.contains("canonical"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// Missing parameters (exit 20): the hint names the `--params` directory when it was given, and
/// `FIL_PROOFS_PARAMETER_CACHE` only when it was not. `prove` gets that far after parsing and
/// checking the C1 output, reported as one `parse` stage.
#[test]
fn missing_parameters_name_the_given_directory() {
    let d = tmp_dir("missing-params");
    assert!(
        cuzk(&["gen-c1", "--sector-size", "2KiB", "--seed", "m", s(&d)])
            .status
            .success()
    );
    let c1 = d.join("c1-wrapper.json");
    let empty = d.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let hint = format!(
        "(the parameter directory given is {}: put the .params and .vk files there",
        empty.display()
    );
    let prove = |params: Option<&Path>, var: Option<&Path>| {
        let mut a = vec!["prove", s(&c1), "--prover-id", "f01000", "--backend", "cpu"];
        if let Some(p) = params {
            a.extend(["--params", s(p)]);
        }
        cuzk_with_params_var(&a, var)
    };
    let verify = |params: Option<&Path>, var: Option<&Path>| {
        let proof = d.join("proof.bin");
        let mut a = vec![
            "verify",
            s(&c1),
            "--prover-id",
            "f01000",
            "--proof",
            s(&proof),
        ];
        if let Some(p) = params {
            a.extend(["--params", s(p)]);
        }
        cuzk_with_params_var(&a, var)
    };
    for out in [prove(Some(&empty), None), verify(Some(&empty), None)] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(20), "{stderr}");
        assert!(stderr.contains(&hint), "{stderr}");
        assert!(!stderr.contains("FIL_PROOFS_PARAMETER_CACHE"), "{stderr}");
    }
    // A file instead of a directory: a configuration error saying so, for both commands.
    for out in [prove(Some(&c1), None), verify(Some(&c1), None)] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(14), "{stderr}");
        assert!(stderr.contains("error 104"), "{stderr}");
        assert!(
            stderr.contains("--params") && stderr.contains("not a directory"),
            "{stderr}"
        );
    }
    // The parse stage once per proof, as the progress lines show.
    let out = prove(Some(&empty), None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("call: parse ").count(), 1, "{stderr}");
    // The directory from the variable: the hint suggests the variable, not a given directory.
    for out in [prove(None, Some(&empty)), verify(None, Some(&empty))] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(20), "{stderr}");
        assert!(
            stderr.contains(&format!("not found at {}", empty.display())),
            "{stderr}"
        );
        assert!(
            stderr.contains("(set FIL_PROOFS_PARAMETER_CACHE or pass a parameter directory)"),
            "{stderr}"
        );
        assert!(!stderr.contains("directory given"), "{stderr}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// The 2 KiB fixture's parameters (built by the fixture code, not here): `None` when absent.
fn fixture_params() -> PathBuf {
    let size = cuzk_dev::fixture::FixtureSize::Kib2;
    cuzk_dev::fixture::ensure_fixture(&cuzk_dev::fixture::default_fixture_dir_for(size), size)
        .expect("2 KiB fixture")
        .param_dir
}

/// A `cuzk prove` killed while proving (as by Ctrl-C) leaves no `--out` file behind: the path
/// is checked before proving without creating anything, and the proof is written at the end.
#[test]
fn an_interrupted_prove_leaves_no_out_file() {
    use std::io::BufRead;
    let params = fixture_params();
    let d = tmp_dir("interrupted");
    let c1 = gen_c1_2kib(&d, "interrupted");
    let proof = d.join("proof.bin");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["prove", s(&c1), "--prover-id", "f01000", "--params"])
        .args([s(&params), "--backend", "cpu", "--out", s(&proof)])
        .env_remove("FIL_PROOFS_PARAMETER_CACHE")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run cuzk");
    // The first progress line of the proof comes after the --out check.
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    for line in stderr.lines() {
        let line = line.unwrap();
        seen.push(line.clone());
        if line.contains("call: parse") {
            break;
        }
    }
    assert!(
        seen.iter().any(|l| l.contains("call: parse")),
        "no progress line: {seen:?}"
    );
    assert!(!proof.exists(), "--out created before the proof exists");
    child.kill().unwrap();
    assert!(!child.wait().unwrap().success());
    assert!(!proof.exists(), "the killed run left {}", proof.display());
    std::fs::remove_dir_all(&d).unwrap();
}

/// Standard error and standard output on a full device (`/dev/full`): the progress lines that
/// cannot be written do not stop the proof, and the proof that cannot be printed is a typed
/// error (exit 90), not a panic (exit 101).
#[test]
fn a_full_stderr_and_stdout_are_errors_not_panics() {
    let params = fixture_params();
    let d = tmp_dir("full");
    let c1 = gen_c1_2kib(&d, "full");
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let status = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["prove", s(&c1), "--prover-id", "f01000", "--params"])
        .args([s(&params), "--backend", "cpu"])
        .env_remove("FIL_PROOFS_PARAMETER_CACHE")
        .stdout(full())
        .stderr(full())
        .status()
        .expect("run cuzk");
    assert_eq!(status.code(), Some(90), "{status}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// A generated 2 KiB C1 output proves on the CPU with the 2 KiB fixture's parameters (the same
/// circuit), three times on one engine (`--repeat 3 --jobs 2`: the first alone, then two in
/// flight), verify_seal accepts every proof, and rejects it with one byte flipped (exit 51);
/// `--out` through a symbolic link. The fixture is built on first use (cuzk_dev::fixture).
#[test]
fn prove_generated_2kib_on_the_cpu() {
    let params = fixture_params();
    let d = tmp_dir("prove");
    assert!(cuzk(&[
        "gen-c1",
        "--sector-size",
        "2KiB",
        "--seed",
        "cli",
        "--sector-num",
        "5",
        s(&d)
    ])
    .status
    .success());
    // --out is a link to a file not yet there: the proof goes to the file, the link stays.
    let proof = d.join("proof.bin");
    std::fs::create_dir(d.join("proofs")).unwrap();
    std::os::unix::fs::symlink("proofs/p.bin", &proof).unwrap();
    let c1 = d.join("c1.json");
    let out = cuzk(&[
        "prove",
        s(&c1),
        "--sector-num",
        "5",
        "--prover-id",
        "f01000",
        "--params",
        s(&params),
        "--backend",
        "cpu",
        "--repeat",
        "3",
        "--jobs",
        "2",
        "--out",
        s(&proof),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("proof 2 partition 0: synthesis"),
        "{stderr}"
    );
    // One parse stage per proof.
    for i in 0..3 {
        let line = format!("proof {i} call: parse ");
        assert_eq!(stderr.matches(&line).count(), 1, "{line}: {stderr}");
    }
    // All three proofs of the engine checked by verify_seal, then the steady-state summary.
    assert_eq!(stderr.matches("verify_seal: OK").count(), 3, "{stderr}");
    assert!(stderr.contains("3 proofs, 2 in flight:"), "{stderr}");
    assert_eq!(std::fs::read(d.join("proofs/p.bin")).unwrap().len(), 192);
    assert!(std::fs::symlink_metadata(&proof)
        .unwrap()
        .file_type()
        .is_symlink());
    // The wrapper form, its SectorNum standing in for --sector-num.
    let out = cuzk(&[
        "verify",
        s(&d.join("c1-wrapper.json")),
        "--prover-id",
        "f01000",
        "--params",
        s(&params),
        "--proof",
        s(&proof),
    ]);
    assert!(out.status.success());
    let verify = |proof: &Path| {
        cuzk(&[
            "verify",
            s(&d.join("c1.json")),
            "--sector-num",
            "5",
            "--prover-id",
            "f01000",
            "--params",
            s(&params),
            "--proof",
            s(proof),
        ])
    };
    assert!(verify(&proof).status.success());
    let mut bytes = std::fs::read(&proof).unwrap();
    bytes[100] ^= 1;
    let bad = d.join("bad.bin");
    std::fs::write(&bad, &bytes).unwrap();
    let out = verify(&bad);
    assert!(!out.status.success());
    assert!(
        matches!(out.status.code(), Some(51) | Some(92)),
        "{:?}",
        out.status
    );
    // Wrong sector number: the replica id does not match (invalid input, 11).
    let out = cuzk(&[
        "verify",
        s(&d.join("c1.json")),
        "--sector-num",
        "6",
        "--prover-id",
        "f01000",
        "--params",
        s(&params),
        "--proof",
        s(&proof),
    ]);
    assert_eq!(out.status.code(), Some(11));
    std::fs::remove_dir_all(&d).unwrap();
}

/// `cuzk gen-post` writes post.json: the proof type in the actors' numbering, the sectors and
/// their vanilla proofs, which filecoin-proofs' vanilla verification accepts; the same seed gives
/// the same bytes, another seed other ones; bad options exit 14 before any work.
#[test]
fn gen_post_writes_post_json() {
    use cuzk_dev::postgen::{self, GeneratedPost};
    let d = tmp_dir("gen-post");
    // `extra`, then --sector-size 2KiB and --seed g unless `extra` has them.
    let gen = |dir: &str, extra: &[&str]| {
        let out_dir = d.join(dir);
        let mut args = vec!["gen-post"];
        args.extend_from_slice(extra);
        for (flag, value) in [("--sector-size", "2KiB"), ("--seed", "g")] {
            if !extra.contains(&flag) {
                args.extend([flag, value]);
            }
        }
        args.push(s(&out_dir));
        let out = cuzk(&args);
        (out, out_dir.join(postgen::POST_JSON))
    };
    let (out, a) = gen("a", &["--sector-num", "7", "--prover-id", "f0777"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("StackedDrgWindow2KiBV1_2 (registered proof 10), 2 sector(s) × 10"),
        "{stderr}"
    );
    let g = GeneratedPost::read(&a).unwrap();
    assert_eq!(g.registered_proof_number().unwrap(), 10);
    assert_eq!(
        g.sectors.iter().map(|s| s.sector_id).collect::<Vec<_>>(),
        [7, 8]
    );
    assert_eq!(g.spec.prover_id, cuzk::c1::prover_id_from_actor_id(777));
    assert!(postgen::verify_vanilla(&g).unwrap());
    let (out, b) = gen("b", &["--sector-num", "7", "--prover-id", "f0777"]);
    assert!(out.status.success());
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let (out, c) = gen("c", &["--sector-num", "7", "--seed", "h"]);
    assert!(out.status.success());
    assert_ne!(std::fs::read(&a).unwrap(), std::fs::read(&c).unwrap());
    // WinningPoSt with a given randomness.
    let r = "22".repeat(32);
    let (out, w) = gen("w", &["--kind", "winning", "--randomness", &r]);
    assert!(out.status.success());
    let g = GeneratedPost::read(&w).unwrap();
    assert_eq!(g.registered_proof_number().unwrap(), 0);
    assert_eq!((g.sectors.len(), g.sectors[0].challenges.len()), (1, 66));
    assert_eq!(g.randomness, [0x22; 32]);
    assert!(postgen::verify_vanilla(&g).unwrap());
    for bad in [
        &["--sectors", "3"][..],
        &["--sectors", "0"],
        &["--kind", "winning", "--sectors", "2"],
        &["--randomness", "1234"],
        &["--randomness", &"ff".repeat(32)],
        &["--sector-size", "3KiB"],
    ] {
        let (out, p) = gen("bad", bad);
        assert_eq!(out.status.code(), Some(14), "{bad:?}");
        assert!(!p.exists());
    }
    let (out, _) = gen("bad", &["--prover-id", "f1abc"]);
    assert_eq!(out.status.code(), Some(12));
    std::fs::remove_dir_all(&d).unwrap();
}

/// The PoSt end to end through the commands, on the CPU: `gen-params --kind window-post` and
/// `--kind winning-post` make the parameters, `gen-post` the inputs; `cuzk::Engine` proves
/// them and filecoin-proofs-api's `verify_window_post` / `verify_winning_post` accept the
/// proofs (in a child process whose `FIL_PROOFS_PARAMETER_CACHE` is the generated directory)
/// and reject them with a byte flipped; a vanilla proof with a byte flipped is refused before
/// proving (typed error). `fixture_seeds`: the parameters use the 2 KiB PoSt fixture's seeds and
/// must equal its (bellperson-generated) files byte for byte.
fn post_end_to_end(test: &str, size: &str, fixture_seeds: bool) {
    use cuzk::{Backend, CircuitCache, Engine, EngineConfig, ProofKind, ProveOptions};
    use cuzk_dev::postgen::{self, GeneratedPost};
    const KINDS: [(&str, &str); 2] = [("window", "window-post"), ("winning", "winning-post")];
    if let Some(d) = std::env::var_os("CUZK_TEST_POST_E2E") {
        // The child: filecoin-proofs-api's verifiers on the parent's proofs.
        let d = PathBuf::from(d);
        for (kind, _) in KINDS {
            let g = GeneratedPost::read(&d.join(kind).join(postgen::POST_JSON)).unwrap();
            let proof = std::fs::read(d.join(kind).join("proof.bin")).unwrap();
            assert!(
                postgen::verify_with_filecoin_proofs(&g, &proof).unwrap(),
                "{size} {kind}: filecoin-proofs rejects the proof"
            );
            for i in [0, 95, 96, 191] {
                let mut bad = proof.clone();
                bad[i] ^= 1;
                assert!(
                    !matches!(postgen::verify_with_filecoin_proofs(&g, &bad), Ok(true)),
                    "{size} {kind}: byte {i} flipped still verifies"
                );
            }
        }
        println!("child verified both kinds");
        return;
    }
    let d = tmp_dir(&format!("post-e2e-{size}"));
    let params = d.join("params");
    let hex = |b: &[u8; 32]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    for (kind, params_kind) in KINDS {
        let seed = match (fixture_seeds, kind) {
            (true, "window") => hex(&cuzk_dev::post_fixture::WINDOW_PARAMS_RNG_SEED),
            (true, _) => hex(&cuzk_dev::post_fixture::WINNING_PARAMS_RNG_SEED),
            (false, _) => format!("cli {size}"),
        };
        let out = cuzk(&[
            "gen-params",
            "--kind",
            params_kind,
            "--sector-size",
            size,
            "--seed",
            &seed,
            s(&params),
        ]);
        assert!(out.status.success());
        let out = cuzk(&[
            "gen-post",
            "--kind",
            kind,
            "--sector-size",
            size,
            "--seed",
            "e2e",
            s(&d.join(kind)),
        ]);
        assert!(out.status.success());
    }
    if fixture_seeds {
        let fixture = cuzk_dev::post_fixture::ensure_post_fixture(
            &cuzk_dev::post_fixture::default_post_fixture_dir(),
        )
        .expect("2 KiB PoSt fixture");
        let mut compared = 0;
        for e in std::fs::read_dir(&params).unwrap() {
            let ours = e.unwrap().path();
            let name = ours.file_name().unwrap();
            let theirs = std::fs::read(fixture.param_dir.join(name)).unwrap();
            assert!(std::fs::read(&ours).unwrap() == theirs, "{name:?} differs");
            compared += 1;
        }
        assert_eq!(compared, 6, "the .params, .vk and .meta of both circuits");
    }
    let engine = Engine::new(
        EngineConfig::default()
            .with_parameter_dir(&params)
            .with_backend(Backend::Cpu)
            .with_circuit_cache(CircuitCache::Off),
    )
    .unwrap();
    let options = ProveOptions::default();
    let prove = |g: &GeneratedPost, vanilla: &[Vec<u8>]| {
        let v: Vec<&[u8]> = vanilla.iter().map(Vec::as_slice).collect();
        let n = g.registered_proof_number().unwrap();
        let (r, id) = (&g.randomness, &g.spec.prover_id);
        match g.kind() {
            ProofKind::WinningPost => engine.prove_winning_post(n, &v, r, id, &options),
            _ => engine.prove_window_post(n, &v, r, id, 0, &options),
        }
    };
    for (kind, _) in KINDS {
        let g = GeneratedPost::read(&d.join(kind).join(postgen::POST_JSON)).unwrap();
        let out = prove(&g, &g.vanilla_proofs).unwrap();
        assert_eq!(out.proof.len(), 192);
        assert!(out.verified);
        std::fs::write(d.join(kind).join("proof.bin"), &out.proof).unwrap();
        // comm_r (byte 8), the first sibling of the first path (byte 140) and the sector
        // proof's comm_r_last copy (its last 32 bytes; the vanilla verification reads the root
        // from the paths, the job checks the copy against it) of sector 0: refused before
        // proving.
        let last = g.vanilla_proofs[0].len() - 32;
        for (at, codes) in [(8, &[100, 101][..]), (140, &[100, 101]), (last, &[101])] {
            let mut bad = g.vanilla_proofs.clone();
            bad[0][at] ^= 1;
            let e = prove(&g, &bad).expect_err("a changed vanilla proof proved");
            assert!(codes.contains(&e.code()), "{size} {kind} byte {at}: {e}");
        }
    }
    if fixture_seeds {
        // `cuzk prove-post` on the same inputs: its own filecoin-proofs check passes (exit 0),
        // the proof goes to --out; a post.json that is not JSON is malformed input (10).
        let w = d.join("window");
        let out = cuzk(&[
            "prove-post",
            s(&w.join(postgen::POST_JSON)),
            "--params",
            s(&params),
            "--backend",
            "cpu",
            "--repeat",
            "2",
            "--out",
            s(&w.join("cli.proof")),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "prove-post: {err}");
        assert_eq!(
            err.matches("filecoin-proofs verifier OK").count(),
            2,
            "{err}"
        );
        assert_eq!(std::fs::read(w.join("cli.proof")).unwrap().len(), 192);
        std::fs::write(w.join("not.json"), b"{\"kind\": ").unwrap();
        let out = cuzk(&["prove-post", s(&w.join("not.json")), "--params", s(&params)]);
        assert_eq!(
            out.status.code(),
            Some(10),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let child = cuzk_dev::fixture::run_self_with_env(
        test,
        &[
            ("FIL_PROOFS_PARAMETER_CACHE", params.as_os_str()),
            ("CUZK_TEST_POST_E2E", d.as_os_str()),
        ],
    )
    .unwrap();
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && stdout.contains("child verified both kinds"),
        "child: {stdout}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// [`post_end_to_end`] at 2 KiB, the parameters equal to the PoSt fixture's (~40 s on 2 cores;
/// the fixture is built on first use, cuzk_dev::post_fixture).
#[test]
fn post_2kib_end_to_end_on_the_cpu() {
    post_end_to_end("post_2kib_end_to_end_on_the_cpu", "2KiB", true);
}

/// [`post_end_to_end`] at 8 MiB (WinningPoSt: 233 k aux variables; ~1 min on 2 cores).
#[test]
fn post_8mib_end_to_end_on_the_cpu() {
    post_end_to_end("post_8mib_end_to_end_on_the_cpu", "8MiB", false);
}

/// `cuzk prove-post` takes post.json's `partition_index`: a WindowPoSt file of partition 1 proves
/// (the index goes to `Engine::prove_window_post`, as Curio's does; from V1_1 on the challenges
/// do not depend on it) and filecoin-proofs' `verify_window_post` accepts the proof (exit 0); a
/// WinningPoSt file with a partition index other than 0 is invalid input (101, exit 11) before
/// any parameters are read. The 2 KiB PoSt fixture's parameters (built on first use).
#[test]
fn prove_post_takes_the_partition_index() {
    use cuzk_dev::postgen::POST_JSON;
    let d = tmp_dir("post-partition");
    let with_partition = |kind: &str, partition: u64| {
        let dir = d.join(kind);
        let out = cuzk(&[
            "gen-post",
            "--kind",
            kind,
            "--sector-size",
            "2KiB",
            "--seed",
            "partition",
            s(&dir),
        ]);
        assert!(out.status.success());
        let path = dir.join(POST_JSON);
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(json["partition_index"], 0);
        json["partition_index"] = partition.into();
        std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
        path
    };
    // Refused before the parameter directory is looked at (it does not exist).
    let winning = with_partition("winning", 1);
    let out = cuzk(&["prove-post", s(&winning), "--params", s(&d.join("none"))]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(11), "{err}");
    assert!(err.contains("partition_index 1"), "{err}");
    // A WindowPoSt partition index past the most partitions a deadline holds (3000), up to
    // u64::MAX: the library's invalid input (101, exit 11), before the parameters too, no panic.
    for index in [3000, u64::MAX] {
        let window = with_partition("window", index);
        let out = cuzk(&["prove-post", s(&window), "--params", s(&d.join("none"))]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(11), "{err}");
        assert_eq!(
            err,
            format!(
                "cuzk: error 101: invalid input: window-post: partition_index {index} is out of \
                 range: a deadline holds at most 3000 partitions (0 to 2999)\n"
            )
        );
    }
    let window = with_partition("window", 1);
    let params = cuzk_dev::post_fixture::ensure_post_fixture(
        &cuzk_dev::post_fixture::default_post_fixture_dir(),
    )
    .expect("2 KiB PoSt fixture")
    .param_dir;
    let out = cuzk(&[
        "prove-post",
        s(&window),
        "--params",
        s(&params),
        "--backend",
        "cpu",
        "--out",
        s(&d.join("proof.bin")),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("partition 1"), "{err}");
    assert!(err.contains("filecoin-proofs verifier OK"), "{err}");
    assert_eq!(std::fs::read(d.join("proof.bin")).unwrap().len(), 192);
    std::fs::remove_dir_all(&d).unwrap();
}

/// SnapDeals through the commands, on the CPU: `gen-snap` makes 2 KiB inputs without sealing,
/// `prove-snap` proves them with the 2 KiB SnapDeals fixture's parameters (of the sector size,
/// not of its data) and checks the proof with verify_empty_sector_update_proof (exit 0); the
/// same seed gives the same file; inputs with a vanilla proof cut short are refused before
/// proving (100 → exit 10); an unknown size is exit 14.
#[test]
fn gen_snap_inputs_prove_with_prove_snap() {
    let f = cuzk_dev::snap_fixture::ensure_snap_fixture(
        &cuzk_dev::snap_fixture::default_snap_fixture_dir(),
    )
    .unwrap();
    let d = tmp_dir("snap");
    let gen = |dir: &Path| cuzk(&["gen-snap", "--sector-size", "2KiB", "--seed", "s", s(dir)]);
    assert!(gen(&d.join("a")).status.success());
    assert!(gen(&d.join("b")).status.success());
    let json = d.join("a").join(cuzk_dev::snapgen::SNAP_JSON);
    let bytes = std::fs::read(&json).unwrap();
    assert_eq!(
        bytes,
        std::fs::read(d.join("b").join(cuzk_dev::snapgen::SNAP_JSON)).unwrap()
    );
    let proof = d.join("proof.bin");
    let out = cuzk(&[
        "prove-snap",
        s(&json),
        "--params",
        s(&f.param_dir),
        "--backend",
        "cpu",
        "--out",
        s(&proof),
    ]);
    assert!(out.status.success());
    assert_eq!(std::fs::read(&proof).unwrap().len(), 192);
    let mut file: cuzk_dev::snapgen::SnapFile = serde_json::from_slice(&bytes).unwrap();
    file.vanilla_proofs[0].truncate(100);
    let cut = d.join("cut.json");
    std::fs::write(&cut, serde_json::to_vec(&file).unwrap()).unwrap();
    let out = cuzk(&[
        "prove-snap",
        s(&cut),
        "--params",
        s(&f.param_dir),
        "--backend",
        "cpu",
    ]);
    assert_eq!(out.status.code(), Some(10));
    let out = cuzk(&[
        "gen-snap",
        "--sector-size",
        "3KiB",
        "--seed",
        "s",
        s(&d.join("c")),
    ]);
    assert_eq!(out.status.code(), Some(14));
    std::fs::remove_dir_all(&d).unwrap();
}

/// A proof type number that is no PoSt proof type, or not the one the file's name says, is the
/// library's invalid input (101, exit 11), as README's status table has it and as the engine and
/// the daemon answer it, not malformed input (100, exit 10); WindowPoSt V1 (5) is unsupported
/// (103, exit 13). Both before the parameter directory is looked at (it does not exist).
#[test]
fn unknown_registered_proofs_exit_11() {
    let d = tmp_dir("registered-proof");
    assert!(cuzk(&[
        "gen-post",
        "--sector-size",
        "2KiB",
        "--seed",
        "r",
        s(&d.join("post"))
    ])
    .status
    .success());
    assert!(cuzk(&[
        "gen-snap",
        "--sector-size",
        "2KiB",
        "--seed",
        "r",
        s(&d.join("snap"))
    ])
    .status
    .success());
    let with_number = |file: PathBuf, n: u64| {
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        json["registered_proof"] = n.into();
        let path = d.join(format!(
            "{n}-{}",
            file.file_name().unwrap().to_str().unwrap()
        ));
        std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
        path
    };
    let none = d.join("none");
    let post = d.join("post").join(cuzk_dev::postgen::POST_JSON);
    let snap = d.join("snap").join(cuzk_dev::snapgen::SNAP_JSON);
    for (command, file, n, code, says) in [
        (
            "prove-post",
            &post,
            99,
            11,
            "cuzk: error 101: invalid input: registered PoSt proof 99 is not a PoSt proof type\n",
        ),
        (
            "prove-post",
            &post,
            u64::MAX,
            11,
            "is not a PoSt proof type\n",
        ),
        (
            "prove-post",
            &post,
            0,
            11,
            "cuzk: error 101: invalid input: registered_proof 0 is StackedDrgWinning2KiBV1, but \
             registered_proof_name says StackedDrgWindow2KiBV1_2\n",
        ),
        ("prove-post", &post, 5, 13, "cuzk: error 103: "),
        (
            "prove-snap",
            &snap,
            99,
            11,
            "cuzk: error 101: invalid input: registered update proof 99 is not an update proof \
             type (0-4)\n",
        ),
    ] {
        let file = with_number(file.clone(), n);
        let out = cuzk(&[command, s(&file), "--params", s(&none)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{command} {n}: {err}");
        assert!(err.contains(says), "{command} {n}: {err}");
        assert_eq!(err.lines().count(), 1, "{command} {n}: {err}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// `--jobs` above `--repeat − 1` is lowered to it with a note on stderr (as `--help` says), for
/// `prove` (printed before the engine starts: here the parameters are missing, exit 20) and for
/// `prove-post` (which proves: one proof with `--repeat 1`, two one at a time with
/// `--repeat 2`); a `--jobs` that fits gets no note.
#[test]
fn jobs_above_repeat_are_lowered_with_a_note() {
    let d = tmp_dir("jobs");
    let c1 = gen_c1_2kib(&d, "jobs");
    let empty = d.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let help = String::from_utf8_lossy(&cuzk(&["prove", "--help"]).stdout).into_owned();
    assert!(help.contains("a larger value is lowered to that"), "{help}");
    let help = String::from_utf8_lossy(&cuzk(&["prove-post", "--help"]).stdout).into_owned();
    assert!(help.contains("a larger value is lowered to that"), "{help}");
    let prove = |repeat: &str, jobs: &str| {
        cuzk(&[
            "prove",
            s(&c1),
            "--prover-id",
            "f01000",
            "--params",
            s(&empty),
            "--backend",
            "cpu",
            "--repeat",
            repeat,
            "--jobs",
            jobs,
        ])
    };
    let out = prove("1", "3");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(20), "{err}");
    assert_eq!(
        err.lines().next(),
        Some("note: --jobs 3 has no effect with --repeat 1: one proof, alone"),
        "{err}"
    );
    let out = prove("3", "5");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(
            "note: --jobs 5 lowered to 2: with --repeat 3 the first proof runs alone, then 2 at \
             a time\n"
        ),
        "{err}"
    );
    let out = prove("3", "2");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("note:"));
    // prove-post, on the 2 KiB PoSt fixture's parameters.
    let params = cuzk_dev::post_fixture::ensure_post_fixture(
        &cuzk_dev::post_fixture::default_post_fixture_dir(),
    )
    .expect("2 KiB PoSt fixture")
    .param_dir;
    assert!(cuzk(&[
        "gen-post",
        "--sector-size",
        "2KiB",
        "--seed",
        "j",
        s(&d.join("post"))
    ])
    .status
    .success());
    let post = d.join("post").join(cuzk_dev::postgen::POST_JSON);
    let prove_post = |repeat: &str, jobs: &str| {
        cuzk(&[
            "prove-post",
            s(&post),
            "--params",
            s(&params),
            "--backend",
            "cpu",
            "--repeat",
            repeat,
            "--jobs",
            jobs,
        ])
    };
    let out = prove_post("1", "3");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("note: --jobs 3 has no effect with --repeat 1: one proof, alone\n"),
        "{err}"
    );
    assert_eq!(
        err.matches("filecoin-proofs verifier OK").count(),
        1,
        "{err}"
    );
    let out = prove_post("2", "3");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("note: --jobs 3 lowered to 1: with --repeat 2"),
        "{err}"
    );
    assert!(err.contains("2 proofs, 1 in flight:"), "{err}");
    assert_eq!(
        err.matches("filecoin-proofs verifier OK").count(),
        2,
        "{err}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// `prove-snap` checks the parameter files before it decodes and checks the vanilla proofs or
/// starts an engine (no "proving" line, nothing logged by the engine): a missing `.params` file
/// is error 200 (exit 20), a cut one 201 (exit 21), naming the file; a missing `.vk` 200.
#[test]
fn prove_snap_checks_the_parameter_files_first() {
    let f = cuzk_dev::snap_fixture::ensure_snap_fixture(
        &cuzk_dev::snap_fixture::default_snap_fixture_dir(),
    )
    .unwrap();
    let d = tmp_dir("snap-params");
    assert!(cuzk(&[
        "gen-snap",
        "--sector-size",
        "2KiB",
        "--seed",
        "p",
        s(&d.join("in"))
    ])
    .status
    .success());
    let json = d.join("in").join(cuzk_dev::snapgen::SNAP_JSON);
    let name = std::fs::read_dir(&f.param_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.ends_with(".params"))
        .unwrap();
    let vk_name = name.replace(".params", ".vk");
    let prove_snap = |dir: &Path| {
        let t = std::time::Instant::now();
        let out = cuzk(&[
            "prove-snap",
            s(&json),
            "--params",
            s(dir),
            "--backend",
            "cpu",
        ]);
        (out, t.elapsed())
    };
    // Missing .params (the .vk there).
    let missing = d.join("missing");
    std::fs::create_dir_all(&missing).unwrap();
    std::fs::copy(f.param_dir.join(&vk_name), missing.join(&vk_name)).unwrap();
    // A .params file cut after its first MiB, with its .vk.
    let cut = d.join("cut");
    std::fs::create_dir_all(&cut).unwrap();
    std::fs::copy(f.param_dir.join(&vk_name), cut.join(&vk_name)).unwrap();
    let mut head = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(
            std::fs::File::open(f.param_dir.join(&name)).unwrap(),
            1 << 20,
        ),
        &mut head,
    )
    .unwrap();
    std::fs::write(cut.join(&name), &head).unwrap();
    // The .params file there (a link to the fixture's), no .vk.
    let no_vk = d.join("no-vk");
    std::fs::create_dir_all(&no_vk).unwrap();
    std::os::unix::fs::symlink(f.param_dir.join(&name), no_vk.join(&name)).unwrap();
    for (dir, code, says) in [
        (
            &missing,
            20,
            format!(
                "cuzk: error 200: Groth16 parameters not found at {}",
                s(&missing.join(&name))
            ),
        ),
        (&cut, 21, "cuzk: error 201: ".to_string()),
        (
            &no_vk,
            20,
            format!(
                "cuzk: error 200: Groth16 parameters not found at {}",
                s(&no_vk.join(&vk_name))
            ),
        ),
    ] {
        let (out, took) = prove_snap(dir);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{err}");
        assert!(err.starts_with(&says), "{err}");
        assert_eq!(
            err.lines().count(),
            1,
            "one line, before any proving: {err}"
        );
        assert!(took.as_secs_f64() < 5.0, "{took:?}");
    }
    let (out, _) = prove_snap(&cut);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(s(&cut.join(&name))) && err.contains("truncated"),
        "{err}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// `gen-post --kind <kind> --sector-size 2KiB --seed <seed>` into `<d>/<name>`; returns its
/// post.json read as JSON and its path.
fn gen_post_2kib(d: &Path, name: &str, kind: &str, seed: &str) -> (serde_json::Value, PathBuf) {
    let dir = d.join(name);
    let out = cuzk(&[
        "gen-post",
        "--kind",
        kind,
        "--sector-size",
        "2KiB",
        "--seed",
        seed,
        s(&dir),
    ]);
    assert!(out.status.success());
    let path = dir.join(cuzk_dev::postgen::POST_JSON);
    let json = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    (json, path)
}

/// `prove-post` takes the proof type from post.json's `registered_proof` (what the engine
/// proves): a `registered_proof_name`, `kind` or `sector_size` that is not the number's is
/// invalid input (101, exit 11) naming the field, before the parameter directory is looked at
/// (it does not exist), not a complaint about the number.
#[test]
fn prove_post_takes_the_proof_type_from_the_number() {
    let d = tmp_dir("post-proof-type");
    let (window, _) = gen_post_2kib(&d, "window", "window", "n");
    let (winning, _) = gen_post_2kib(&d, "winning", "winning", "n");
    let n = std::cell::Cell::new(0);
    let with = |base: &serde_json::Value, field: &str, value: serde_json::Value| {
        let mut json = base.clone();
        json[field] = value;
        n.set(n.get() + 1);
        let path = d.join(format!("{}-{field}.json", n.get()));
        std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
        path
    };
    let cases = [
        (
            with(
                &window,
                "registered_proof_name",
                "StackedDrgWinning2KiBV1".into(),
            ),
            "registered_proof 10 is StackedDrgWindow2KiBV1_2, but registered_proof_name says \
             StackedDrgWinning2KiBV1",
        ),
        (
            with(
                &window,
                "registered_proof_name",
                "StackedDrgWindow8MiBV1_2".into(),
            ),
            "registered_proof 10 is StackedDrgWindow2KiBV1_2, but registered_proof_name says \
             StackedDrgWindow8MiBV1_2",
        ),
        (
            with(
                &winning,
                "registered_proof_name",
                "StackedDrgWindow2KiBV1_2".into(),
            ),
            "registered_proof 0 is StackedDrgWinning2KiBV1, but registered_proof_name says \
             StackedDrgWindow2KiBV1_2",
        ),
        (
            with(&window, "kind", "winning-post".into()),
            "registered_proof 10 is StackedDrgWindow2KiBV1_2, a window-post proof type, but kind \
             says \"winning-post\"",
        ),
        (
            with(&winning, "kind", "window-post".into()),
            "registered_proof 0 is StackedDrgWinning2KiBV1, a winning-post proof type, but kind \
             says \"window-post\"",
        ),
        (
            with(&window, "sector_size", 8_388_608.into()),
            "registered_proof 10 is StackedDrgWindow2KiBV1_2, of 2048-byte sectors, but \
             sector_size says 8388608",
        ),
    ];
    for (file, says) in cases {
        let out = cuzk(&["prove-post", s(&file), "--params", s(&d.join("none"))]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(11), "{err}");
        assert_eq!(err, format!("cuzk: error 101: invalid input: {says}\n"));
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// `prove-post` checks post.json's `sectors` (the sector numbers and comm_r that filecoin-proofs'
/// verifier checks the proof against) against the vanilla proofs before proving: a repeated
/// sector, a sector number that is not the vanilla proof's or a comm_r that is not the one the
/// vanilla proof carries is invalid input (101, exit 11) naming the sector and the field, not a
/// proof that filecoin-proofs rejects (exit 51). The 2 KiB PoSt fixture's parameters (built on
/// first use).
#[test]
fn prove_post_checks_the_sectors_against_the_vanilla_proofs() {
    let d = tmp_dir("post-sectors");
    let params = cuzk_dev::post_fixture::ensure_post_fixture(
        &cuzk_dev::post_fixture::default_post_fixture_dir(),
    )
    .expect("2 KiB PoSt fixture")
    .param_dir;
    let (window, _) = gen_post_2kib(&d, "window", "window", "sectors");
    let (winning, _) = gen_post_2kib(&d, "winning", "winning", "sectors");
    let (id0, id1) = (
        window["sectors"][0]["sector_id"].clone(),
        window["sectors"][1]["sector_id"].clone(),
    );
    let comm_r0 = window["sectors"][0]["comm_r"].as_str().unwrap().to_owned();
    let comm_r1 = window["sectors"][1]["comm_r"].as_str().unwrap().to_owned();
    let win_id = winning["sectors"][0]["sector_id"].as_u64().unwrap();
    let edit = |base: &serde_json::Value, name: &str, f: &dyn Fn(&mut serde_json::Value)| {
        let mut json = base.clone();
        f(&mut json["sectors"]);
        let path = d.join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
        path
    };
    let cases = [
        (
            edit(&window, "commr", &|s| {
                s[1]["comm_r"] = comm_r0.clone().into()
            }),
            format!(
                "sectors[1].comm_r (sector {id1}) is {comm_r0}, but vanilla proof 1 carries \
                 {comm_r1}"
            ),
        ),
        (
            edit(&window, "repeated", &|s| s[1]["sector_id"] = id0.clone()),
            format!("sectors[1].sector_id {id0} repeats sectors[0]'s: each sector is listed once"),
        ),
        (
            edit(&window, "swapped", &|s| {
                s[0]["sector_id"] = id1.clone();
                s[1]["sector_id"] = id0.clone();
            }),
            format!(
                "sectors[0].sector_id {id1}, but vanilla proof 0 is of sector {id0}: the sectors \
                 are the vanilla proofs', in their order"
            ),
        ),
        (
            edit(&winning, "winning-id", &|s| {
                s[0]["sector_id"] = (win_id + 1000).into()
            }),
            format!(
                "sectors[0].sector_id {}, but vanilla proof 0 is of sector {win_id}: the sectors \
                 are the vanilla proofs', in their order",
                win_id + 1000
            ),
        ),
    ];
    for (file, says) in cases {
        let out = cuzk(&[
            "prove-post",
            s(&file),
            "--params",
            s(&params),
            "--backend",
            "cpu",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(11), "{err}");
        assert_eq!(err, format!("cuzk: error 101: invalid input: {says}\n"));
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// `CUZK_HOST_MEM_LIMIT=0` is the configuration error (104, exit 14) in the words of
/// `CUZK_VRAM_LIMIT`'s, before any proving.
#[test]
fn a_zero_host_memory_limit_exit_14() {
    let d = tmp_dir("host-mem-zero");
    let c1 = gen_c1_2kib(&d, "h");
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args([
            "prove",
            s(&c1),
            "--prover-id",
            "f01000",
            "--params",
            s(&d),
            "--backend",
            "cpu",
        ])
        .env_remove("FIL_PROOFS_PARAMETER_CACHE")
        .env("CUZK_HOST_MEM_LIMIT", "0")
        .output()
        .expect("run cuzk");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(14), "{err}");
    assert_eq!(
        err,
        "cuzk: error 104: invalid configuration CUZK_HOST_MEM_LIMIT=\"0\": a limit of 0 bytes \
         leaves no host memory; unset it for the machine's available memory\n"
    );
    std::fs::remove_dir_all(&d).unwrap();
}
