//! The compiled circuit on the real 2 KiB fixture (CPU): the compiled path's witness, a, b, c
//! and densities equal the reference synthesis exactly; its proof passes filecoin-proofs'
//! `verify_seal` (and, with `CUZK_TEST_BOTH_PATHS=1`, equals the reference path's proof for the
//! same r, s); a damaged or stale cache file is rebuilt, and an unwritable cache directory still
//! proves.
//!
//! Sizes: set `CUZK_TEST_SECTOR_SIZE=8MiB` (and `CUZK_FIXTURE_DIR`) for the 8 MiB fixture.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use blstrs::Scalar as Fr;
use cuzk::circuit::cache;
use cuzk::progress::Timings;
use cuzk::{Backend, CircuitCache, Engine, EngineConfig, ProveOptions, Synthesis};
use cuzk_dev::fixture::{default_fixture_dir_for, ensure_fixture, Fixture, FixtureSize};

fn size() -> FixtureSize {
    std::env::var("CUZK_TEST_SECTOR_SIZE")
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| v.parse().expect("CUZK_TEST_SECTOR_SIZE"))
        .unwrap_or(FixtureSize::Kib2)
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let _ = env_logger::builder().is_test(true).try_init();
        ensure_fixture(&default_fixture_dir_for(size()), size()).expect("fixture")
    })
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cuzk-cc-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn engine(cache: CircuitCache) -> std::sync::Arc<Engine> {
    Engine::new(
        EngineConfig::default()
            .with_parameter_dir(&fixture().param_dir)
            .with_backend(Backend::Cpu)
            .with_circuit_cache(cache),
    )
    .unwrap()
}

fn synth(e: &Engine, path: Synthesis) -> (cuzk::synth::Assignment, Timings) {
    let f = fixture();
    let mut t = Timings::default();
    let asg = e
        .synthesize_c1(
            &f.read_c1().unwrap(),
            f.sector_id,
            &f.prover_id,
            0,
            path,
            &mut t,
        )
        .unwrap();
    (asg, t)
}

fn cache_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "r1cs"))
        .collect();
    v.sort();
    v
}

#[test]
fn compiled_path_equals_the_reference_exactly() {
    let dir = temp_dir("equal");
    let e = engine(CircuitCache::Dir(dir.clone()));
    let t0 = Instant::now();
    let (reference, _) = synth(&e, Synthesis::Reference);
    let t_ref = t0.elapsed();
    let (compiled, t) = synth(&e, Synthesis::Compiled);
    let cc = {
        let files = cache_files(&dir);
        assert_eq!(files.len(), 1, "one cache file written: {files:?}");
        std::fs::metadata(&files[0]).unwrap().len()
    };
    assert_eq!(compiled.input, reference.input, "inputs");
    assert_eq!(compiled.aux.len(), reference.aux.len());
    let first_aux = compiled
        .aux
        .iter()
        .zip(&reference.aux)
        .position(|(a, b)| a != b);
    assert_eq!(first_aux, None, "first differing aux variable");
    assert!(compiled.a == reference.a, "a = A·z");
    assert!(compiled.b == reference.b, "b = B·z");
    assert!(compiled.c == reference.c, "c = C·z");
    assert_eq!(compiled.a_aux_density, reference.a_aux_density);
    assert_eq!(compiled.b_input_density, reference.b_input_density);
    assert_eq!(compiled.b_aux_density, reference.b_aux_density);
    cuzk::prover::check_satisfied(&compiled, 0).unwrap();
    eprintln!(
        "{}: {} constraints, {} inputs, {} aux; reference synthesis {:.2} s; compiled: {:?}; cache file {} bytes",
        size(),
        compiled.a.len(),
        compiled.input.len(),
        compiled.aux.len(),
        t_ref.as_secs_f64(),
        t.entries,
        cc
    );
}

#[test]
fn native_witness_equals_the_gadget_witness() {
    let e = engine(CircuitCache::Off);
    let f = fixture();
    let c1 = f.read_c1().unwrap();
    let mut t = Timings::default();
    let mut run = |s| {
        e.witness_c1(&c1, f.sector_id, &f.prover_id, 0, s, None, &mut t)
            .unwrap()
    };
    let (layout, native) = run(Synthesis::Compiled);
    let (_, gadget) = run(Synthesis::Gadget);
    assert_eq!(native.input, gadget.input, "inputs");
    assert_eq!(native.aux.len(), layout.num_aux());
    assert_eq!(native.aux.len(), gadget.aux.len());
    let first = native.aux.iter().zip(&gadget.aux).position(|(a, b)| a != b);
    assert_eq!(first, None, "first differing aux value");
    eprintln!(
        "{}: native == gadget over {} aux values; {:?}",
        size(),
        native.aux.len(),
        t.entries
    );
}

#[test]
fn compiled_proof_verifies_and_a_damaged_cache_is_rebuilt() {
    let f = fixture();
    let c1 = f.read_c1().unwrap();
    let dir = temp_dir("damage");
    let e = engine(CircuitCache::Dir(dir.clone()));
    let rs = vec![(Fr::from(3u64), Fr::from(5u64))];
    let opts = |synthesis| {
        ProveOptions::default()
            .with_randomness(rs.clone())
            .with_synthesis(synthesis)
    };
    // (tests/prove_cpu.rs checks the default path's bytes against bellperson's own prover.)
    let compiled = e
        .prove_porep_c2(&c1, f.sector_id, &f.prover_id, &opts(Synthesis::Compiled))
        .unwrap();
    let reference = if std::env::var_os("CUZK_TEST_BOTH_PATHS").is_some() {
        let r = e
            .prove_porep_c2(&c1, f.sector_id, &f.prover_id, &opts(Synthesis::Reference))
            .unwrap();
        assert_eq!(compiled.proof, r.proof, "same r, s: same bytes");
        r
    } else {
        compiled.clone()
    };
    assert!(f.verify(&compiled.proof).unwrap(), "verify_seal");
    let files = cache_files(&dir);
    assert_eq!(files.len(), 1);
    let good = std::fs::read(&files[0]).unwrap();

    // Flipped byte (corrupted), truncated, another format version (stale): a fresh engine
    // rebuilds the file (same bytes as before) and proves the same proof.
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x40;
    let mut stale = good.clone();
    stale[8] = stale[8].wrapping_add(1);
    let damaged = [
        ("corrupted", flipped),
        ("truncated", good[..good.len() / 3].to_vec()),
        ("stale", stale),
    ];
    for (i, (what, bytes)) in damaged.into_iter().enumerate() {
        std::fs::write(&files[0], &bytes).unwrap();
        assert!(cache::load(&files[0], &[0; 32]).is_err());
        let e = engine(CircuitCache::Dir(dir.clone()));
        if i == 0 {
            let out = e
                .prove_porep_c2(&c1, f.sector_id, &f.prover_id, &opts(Synthesis::Compiled))
                .unwrap();
            assert_eq!(
                out.proof, reference.proof,
                "{what}: proof after the rebuild"
            );
        } else {
            let (asg, _) = synth(&e, Synthesis::Compiled);
            cuzk::prover::check_satisfied(&asg, 0).unwrap();
        }
        assert_eq!(
            std::fs::read(&files[0]).unwrap(),
            good,
            "{what}: rebuilt file"
        );
    }
}

#[test]
fn an_unwritable_cache_directory_still_proves() {
    let f = fixture();
    // A regular file where the directory should be: nothing can be created below it.
    let base = temp_dir("unwritable");
    let not_a_dir = base.join("file");
    std::fs::write(&not_a_dir, b"not a directory").unwrap();
    for cache in [
        CircuitCache::Dir(not_a_dir.join("circuits")),
        CircuitCache::Off,
    ] {
        let e = engine(cache.clone());
        let (asg, _) = synth(&e, Synthesis::Compiled);
        cuzk::prover::check_satisfied(&asg, 0).unwrap();
        assert!(asg.input.len() > 1 && !asg.aux.is_empty(), "{cache:?}");
    }
    // And a whole proof with it.
    let e = engine(CircuitCache::Dir(not_a_dir.join("circuits")));
    let out = e
        .prove_porep_c2(
            &f.read_c1().unwrap(),
            f.sector_id,
            &f.prover_id,
            &ProveOptions::default(),
        )
        .unwrap();
    assert!(f.verify(&out.proof).unwrap());
}

#[test]
fn a_host_memory_limit_that_cannot_hold_one_partition_is_a_typed_error() {
    let f = fixture();
    let e = Engine::new(
        EngineConfig::default()
            .with_parameter_dir(&f.param_dir)
            .with_backend(Backend::Cpu)
            .with_host_memory_limit(1 << 30), // below the 1.1 GB of parameters alone
    )
    .unwrap();
    let err = e
        .prove_porep_c2(
            &f.read_c1().unwrap(),
            f.sector_id,
            &f.prover_id,
            &ProveOptions::default(),
        )
        .unwrap_err();
    assert!(
        matches!(err, cuzk::Error::OutOfHostMemory { budget, .. } if budget == 1 << 30),
        "{err}"
    );
    // The set is refused before it is read: nothing loaded, nothing left in flight.
    let (params, partitions) = e.host_budget().used();
    assert_eq!(params, 0, "parameters counted: {params}");
    assert_eq!(partitions, 0, "nothing left in flight");
}
