//! GPU backend on the 2 KiB PoSt fixture (feature `cuda`; skips with a message without a GPU):
//! the WinningPoSt and WindowPoSt proofs with fixed r, s equal the CPU proofs byte for byte
//! (which `tests/post_cpu.rs` checks with filecoin-proofs' verifiers), each verified by the
//! engine before it is returned.

#![cfg(feature = "cuda")]

mod common;

use blstrs::Scalar as Fr;
use cuzk::{Backend, Engine, EngineConfig, ProofKind, ProveOptions};
use cuzk_dev::post_fixture::{
    default_post_fixture_dir, ensure_post_fixture, number_2kib, RANDOMNESS,
};

#[test]
fn gpu_post_proofs_equal_cpu_post_proofs() {
    if common::gpu_device().is_none() {
        return;
    }
    let _ = env_logger::builder().is_test(true).try_init();
    let f = ensure_post_fixture(&default_post_fixture_dir()).unwrap();
    let cfg = |backend| {
        EngineConfig::from_env()
            .unwrap()
            .with_parameter_dir(&f.param_dir)
            .with_backend(backend)
    };
    let gpu = Engine::new(cfg(Backend::Gpu)).unwrap();
    let cpu = Engine::new(cfg(Backend::Cpu)).unwrap();
    let opts = ProveOptions::default().with_randomness(vec![(Fr::from(91u64), Fr::from(4_242u64))]);
    for kind in [ProofKind::WinningPost, ProofKind::WindowPost] {
        let vanilla = f.vanilla_proofs(kind, &RANDOMNESS).unwrap();
        let v: Vec<&[u8]> = vanilla.iter().map(Vec::as_slice).collect();
        let n = number_2kib(kind);
        let prove = |e: &Engine| match kind {
            ProofKind::WinningPost => e.prove_winning_post(n, &v, &RANDOMNESS, &f.prover_id, &opts),
            _ => e.prove_window_post(n, &v, &RANDOMNESS, &f.prover_id, 0, &opts),
        };
        let g = prove(&gpu).unwrap();
        let c = prove(&cpu).unwrap();
        assert_eq!(g.partitions[0].backend, "gpu", "{kind}");
        assert!(g.verified && c.verified);
        assert_eq!(g.proof, c.proof, "{kind}: GPU and CPU proofs differ");
        println!("{kind}: GPU == CPU ({} bytes)", g.proof.len());
    }
}
