//! Parameter sets of several circuits in one engine (`cuzk::srs_cache`), on small synthetic
//! `.params` files under the real names of the 2 KiB PoRep, WindowPoSt and WinningPoSt circuits
//! and a caller's host-memory limit that holds two of them, not three: loaded on demand and
//! read once while loaded, the least recently used set evicted for another, WinningPoSt's
//! never, eviction by name, a set larger than the limit and a missing file as typed errors.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cuzk::srs::ParamSet;
use cuzk::srs_cache::Eviction;
use cuzk::{Backend, Engine, EngineConfig};
use cuzk_dev::fixture::write_fake_params;
use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof};

const POREP: ParamSet = ParamSet::Porep(RegisteredSealProof::StackedDrg2KiBV1_1);
const WINDOW: ParamSet = ParamSet::Post(RegisteredPoStProof::StackedDrgWindow2KiBV1_2);
const WINNING: ParamSet = ParamSet::Post(RegisteredPoStProof::StackedDrgWinning2KiBV1);

/// Points of the PoRep and WindowPoSt fake sets (H, L, A, B_G1, B_G2): 100,800 bytes decoded.
const LARGE: [usize; 5] = [400, 300, 200, 50, 50];
/// Points of the WinningPoSt fake set: 20,160 bytes decoded.
const SMALL: [usize; 5] = [100, 50, 30, 10, 10];
/// The caller's limit: one large set and the small one fit, two large ones do not.
const LIMIT: u64 = 150_000;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cuzk-param-sets-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn path(set: ParamSet, dir: &Path) -> PathBuf {
    set.params_path(dir).unwrap()
}

/// An engine over `dir` with the fake sets written and a caller's limit of [`LIMIT`].
fn engine(dir: &Path) -> Arc<Engine> {
    let _ = env_logger::builder().is_test(true).try_init();
    for (set, sizes) in [(POREP, LARGE), (WINDOW, LARGE), (WINNING, SMALL)] {
        write_fake_params(&path(set, dir), 2, sizes).unwrap();
    }
    Engine::new(
        EngineConfig::default()
            .with_parameter_dir(dir)
            .with_backend(Backend::Cpu)
            .with_host_memory_limit(LIMIT),
    )
    .unwrap()
}

/// The loaded sets, in the order of `[POREP, WINDOW, WINNING]`, with their pinned flags.
fn loaded(e: &Engine, dir: &Path) -> Vec<(&'static str, bool)> {
    let sets = e.loaded_params();
    [(POREP, "porep"), (WINDOW, "window"), (WINNING, "winning")]
        .into_iter()
        .filter_map(|(set, name)| {
            let p = path(set, dir);
            sets.iter()
                .find(|s| s.path == p && s.loaded)
                .map(|s| (name, s.pinned))
        })
        .collect()
}

#[test]
fn sets_load_on_demand_and_the_least_recently_used_goes_for_another() {
    let d = dir("lru");
    let e = engine(&d);
    assert!(!e.preload_params(POREP).unwrap());
    assert!(e.preload_params(POREP).unwrap(), "loaded already");
    assert_eq!(e.param_loads(), 1, "a loaded set is not read again");
    assert_eq!(e.host_budget().used().0, 100_800);
    // PoRep then WindowPoSt: they do not fit together, PoRep goes.
    assert!(!e.preload_params(WINDOW).unwrap());
    assert_eq!(loaded(&e, &d), [("window", false)]);
    // PoRep again: read again, WindowPoSt goes.
    assert!(!e.preload_params(POREP).unwrap());
    assert_eq!(loaded(&e, &d), [("porep", false)]);
    assert_eq!(e.param_loads(), 3);
    // WinningPoSt fits beside it, pinned; WindowPoSt then evicts PoRep, never WinningPoSt,
    // though it was used before PoRep.
    assert!(!e.preload_params(WINNING).unwrap());
    assert!(e.preload_params(POREP).unwrap());
    assert!(!e.preload_params(WINDOW).unwrap());
    assert_eq!(loaded(&e, &d), [("window", false), ("winning", true)]);
    assert_eq!(e.host_budget().used().0, 100_800 + 20_160);
    assert_eq!(e.param_loads(), 5);

    // By name (EvictSRS): idle sets go, the pinned one too; a set not loaded is said so.
    assert_eq!(
        e.evict_params(WINDOW).unwrap(),
        Eviction::Evicted { bytes: 100_800 }
    );
    assert_eq!(e.evict_params(WINDOW).unwrap(), Eviction::NotLoaded);
    assert_eq!(e.evict_params(POREP).unwrap(), Eviction::NotLoaded);
    assert_eq!(
        e.evict_params(WINNING).unwrap(),
        Eviction::Evicted { bytes: 20_160 }
    );
    assert!(loaded(&e, &d).is_empty());
    assert_eq!(e.host_budget().used(), (0, 0));
}

#[test]
fn a_set_beyond_the_limit_and_a_missing_file_are_typed_errors_that_keep_the_others() {
    let d = dir("errors");
    let e = engine(&d);
    e.preload_params(WINNING).unwrap();
    e.preload_params(POREP).unwrap();
    // 8 MiB PoRep parameters larger than the whole limit: 401, nothing evicted or loaded.
    let huge = ParamSet::Porep(RegisteredSealProof::StackedDrg8MiBV1_1);
    write_fake_params(&path(huge, &d), 2, [1000, 600, 100, 10, 10]).unwrap();
    let err = e.preload_params(huge).unwrap_err();
    assert!(
        matches!(err, cuzk::Error::OutOfHostMemory { budget: LIMIT, needed } if needed > LIMIT),
        "{err}"
    );
    // No file: 200 naming it; its room is not kept.
    let missing = ParamSet::Porep(RegisteredSealProof::StackedDrg512MiBV1_1);
    let err = e.preload_params(missing).unwrap_err();
    assert_eq!(err.code(), 200, "{err}");
    assert!(err
        .to_string()
        .contains(&path(missing, &d).display().to_string()));
    assert_eq!(loaded(&e, &d), [("porep", false), ("winning", true)]);
    assert_eq!(e.host_budget().used().0, 100_800 + 20_160);
    assert_eq!(e.param_loads(), 3, "the missing file's load ran and failed");
    assert!(e.loaded_params().iter().all(|s| s.loaded && s.calls == 0));
}
