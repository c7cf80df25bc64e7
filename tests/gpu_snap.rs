//! GPU backend on the 2 KiB SnapDeals fixture (feature `cuda`; skips with a message without a
//! GPU, fails under `CUZK_REQUIRE_GPU=1`): the SnapDeals proof with fixed r, s equals the CPU
//! proof byte for byte (which `tests/snap_cpu.rs` checks with filecoin-proofs-api's
//! `verify_empty_sector_update_proof`), both verified by the engine before they are returned;
//! with the default random r, s the GPU proof is verified too.

#![cfg(feature = "cuda")]

mod common;

use blstrs::Scalar as Fr;
use cuzk::snap::SnapRequest;
use cuzk::{Backend, Engine, EngineConfig, ProveOptions};
use cuzk_dev::snap_fixture::{default_snap_fixture_dir, ensure_snap_fixture, UPDATE_2KIB};

#[test]
fn gpu_snap_proof_equals_the_cpu_snap_proof() {
    if common::gpu_device().is_none() {
        return;
    }
    let _ = env_logger::builder().is_test(true).try_init();
    let f = ensure_snap_fixture(&default_snap_fixture_dir()).unwrap();
    let cfg = |backend| {
        EngineConfig::from_env()
            .unwrap()
            .with_parameter_dir(&f.param_dir)
            .with_backend(backend)
    };
    let gpu = Engine::new(cfg(Backend::Gpu)).unwrap();
    let cpu = Engine::new(cfg(Backend::Cpu)).unwrap();
    let vanilla = f.vanilla_proofs().unwrap();
    let v: Vec<&[u8]> = vanilla.iter().map(Vec::as_slice).collect();
    let req = SnapRequest {
        registered_proof: UPDATE_2KIB,
        vanilla_proofs: &v,
        comm_r_old: &f.comm_r_old,
        comm_r_new: &f.comm_r_new,
        comm_d_new: &f.comm_d_new,
        sector_size: None,
    };
    let opts = ProveOptions::default().with_randomness(vec![(Fr::from(91u64), Fr::from(4_242u64))]);
    let g = gpu.prove_snap_deals(&req, &opts).unwrap();
    let c = cpu.prove_snap_deals(&req, &opts).unwrap();
    assert_eq!(g.partitions[0].backend, "gpu");
    assert!(g.verified && c.verified);
    assert_eq!(g.proof.len(), 192);
    assert_eq!(g.proof, c.proof, "GPU and CPU proofs differ");
    let random = gpu
        .prove_snap_deals(&req, &ProveOptions::default())
        .unwrap();
    assert!(random.verified);
    assert_ne!(random.proof, g.proof, "random r, s: another proof");
    println!("snap-deals: GPU == CPU ({} bytes)", g.proof.len());
}
