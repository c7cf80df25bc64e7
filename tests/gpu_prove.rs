//! GPU backend on a real fixture (feature `cuda`; skips with a message without a GPU): the GPU
//! proof with fixed r, s equals the CPU proof byte for byte and passes `verify_seal`; 100 proofs
//! (`CUZK_TEST_PROOFS`) from 8 threads in one process leave device memory where it was; the
//! GPU proof equals the CPU proof on every path of the GPU SpMV (matrices resident or
//! streamed, the H step on three or two domain buffers, forced by a test hook).
//!
//! `CUZK_TEST_SECTOR_SIZE` picks the fixture: `2KiB` (default) or `8MiB`, case-insensitive; its
//! directory is `cuzk_dev::fixture::default_fixture_dir_for(size)` (`$CUZK_FIXTURE_DIR` overrides).

#![cfg(feature = "cuda")]

mod common;

use std::sync::Arc;

use blstrs::Scalar as Fr;
use cuzk::{Backend, Engine, EngineConfig, HAhead, ProveOptions, Tier, Tuning};
use cuzk_dev::fixture::{default_fixture_dir_for, ensure_fixture, Fixture, FixtureSize};

fn gpu_present() -> bool {
    common::gpu_device().is_some()
}

/// The tests of this file one at a time: the SpMV path hook is process-wide.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fixture_size() -> FixtureSize {
    match std::env::var("CUZK_TEST_SECTOR_SIZE") {
        Ok(v) if !v.trim().is_empty() => v.parse().unwrap_or_else(|e| {
            panic!("CUZK_TEST_SECTOR_SIZE={v:?} is not a fixture size (2KiB or 8MiB): {e}")
        }),
        _ => FixtureSize::Kib2,
    }
}

/// A test's start: `None` without a GPU; else the serial guard, the fixture size and the
/// fixture (made if missing).
fn start() -> Option<(std::sync::MutexGuard<'static, ()>, FixtureSize, Fixture)> {
    if !gpu_present() {
        return None;
    }
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _ = env_logger::builder().is_test(true).try_init();
    let size = fixture_size();
    let f = ensure_fixture(&default_fixture_dir_for(size), size).unwrap();
    Some((serial, size, f))
}

/// The environment's configuration on `f`'s parameters with `backend`.
fn config(f: &Fixture, backend: Backend) -> EngineConfig {
    EngineConfig::from_env()
        .unwrap()
        .with_parameter_dir(&f.param_dir)
        .with_backend(backend)
}

#[test]
fn gpu_proof_on_every_spmv_path_equals_cpu_proof() {
    let Some((_serial, size, f)) = start() else {
        return;
    };
    let c1 = f.read_c1().unwrap();
    let cfg = |backend| config(&f, backend);
    // One pass per partition (its H side reports the path)
    let cfg = |backend| cfg(backend).with_tuning(Tuning::default().with_h_ahead(HAhead::Off));
    let rs = vec![(Fr::from(5u64), Fr::from(99u64))];
    let opts = ProveOptions::default().with_randomness(rs);
    let cpu = Engine::new(cfg(Backend::Cpu))
        .unwrap()
        .prove_porep_c2(&c1, f.sector_id, &f.prover_id, &opts)
        .unwrap();
    for (streamed, two, path) in [
        (false, true, "+spmv+h2"),
        (true, false, "+spmv-streamed"),
        (true, true, "+spmv-streamed+h2"),
    ] {
        cuzk::prover::gpu::force_spmv_path(streamed, two);
        let g = Engine::new(cfg(Backend::Gpu)).unwrap().prove_porep_c2(
            &c1,
            f.sector_id,
            &f.prover_id,
            &opts,
        );
        cuzk::prover::gpu::force_spmv_path(false, false);
        let g = g.unwrap();
        let tier = g.partitions[0].tier.clone().unwrap_or_default();
        assert!(tier.ends_with(path), "{path}: ran {tier}");
        assert_eq!(g.proof, cpu.proof, "{path}: GPU and CPU proofs differ");
        assert!(f.verify(&g.proof).unwrap(), "{path}");
        println!("{size}: {tier} == CPU");
    }
}

#[test]
fn gpu_proof_equals_cpu_proof_and_verifies_and_memory_returns_to_baseline() {
    let Some((_serial, size, f)) = start() else {
        return;
    };
    println!(
        "fixture size {size} ({:?}) in {}",
        f.registered_proof,
        f.dir.display()
    );
    let c1 = f.read_c1().unwrap();
    let cfg = |backend| config(&f, backend);
    let gpu = Engine::new(cfg(Backend::Gpu)).unwrap();
    let cpu = Engine::new(cfg(Backend::Cpu)).unwrap();
    let rs = vec![(Fr::from(77u64), Fr::from(1234567u64))];
    let opts = ProveOptions::default().with_randomness(rs);
    let g = gpu
        .prove_porep_c2(&c1, f.sector_id, &f.prover_id, &opts)
        .unwrap();
    assert_eq!(g.partitions[0].backend, "gpu");
    assert!(g.partitions[0].tier.is_some());
    let c = cpu
        .prove_porep_c2(&c1, f.sector_id, &f.prover_id, &opts)
        .unwrap();
    assert_eq!(
        g.proof, c.proof,
        "GPU and CPU proofs differ for the same r, s"
    );
    assert!(f.verify(&g.proof).unwrap());
    for (stage, d) in g.timings.of_partition(0) {
        println!("gpu {:>10}: {:8.1} ms", stage.name(), d.as_secs_f64() * 1e3);
    }

    // Baseline after the first proof: module loaded, parameters resident.
    let (base, _) = cuzk::gpu::driver::device::mem_get_info(0).unwrap();
    let count: usize = std::env::var("CUZK_TEST_PROOFS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let gpu = Arc::new(gpu);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let t = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..8 {
            let (gpu, next, c1) = (gpu.clone(), next.clone(), &c1);
            let f = &f;
            s.spawn(move || {
                while next.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < count {
                    let out = gpu
                        .prove_porep_c2(c1, f.sector_id, &f.prover_id, &ProveOptions::default())
                        .unwrap();
                    assert!(out.verified);
                }
            });
        }
    });
    let (after, _) = cuzk::gpu::driver::device::mem_get_info(0).unwrap();
    println!(
        "{count} GPU proofs from 8 threads in {:.1} s; free device memory {} MiB before, {} MiB after",
        t.elapsed().as_secs_f64(),
        base >> 20,
        after >> 20
    );
    assert_eq!(after, base, "device memory did not return to its baseline");
}

/// Eight proofs at once (distinct r, s) on a GPU engine whose partitions start below the
/// resident tier, so every partition runs its H side first and the L, A, B MSMs of the
/// partitions queued together run in batches over one streamed upload of the bases (passes
/// of 2^18 points, forced, so each MSM runs several: a 2 KiB partition has 1.34 M aux
/// variables; much smaller passes make thousands of blocking MSMs per batch, minutes of
/// launches), half of them with the Pippenger parts gathered across passes: each proof equals
/// the CPU's with the same r, s and verifies, and at least one batch of two or more ran each way.
#[test]
fn gpu_proofs_sharing_streamed_bases_equal_cpu_proofs() {
    let Some((_serial, size, f)) = start() else {
        return;
    };
    let c1 = f.read_c1().unwrap();
    let cfg = |backend| config(&f, backend);
    // Even proofs on an engine that sums each pass's Pippenger part, odd ones on one that
    // gathers them across passes (`Tuning::pippenger_per_pass` off).
    let engine = |gather: bool| {
        Engine::new(
            cfg(Backend::Gpu).with_tuning(
                Tuning::default()
                    .with_gpu_start_tier(Tier::FullStaging)
                    .with_msm_batch(4)
                    .with_pippenger_per_pass(!gather)
                    .with_partitions_ahead(8),
            ),
        )
        .unwrap()
    };
    let gpus = [engine(false), engine(true)];
    let cpu = Engine::new(cfg(Backend::Cpu)).unwrap();
    // The fixtures have one partition: one r, s per proof.
    let opts = |i: u64| {
        ProveOptions::default().with_randomness(vec![(Fr::from(1000 + i), Fr::from(7 * i))])
    };
    cuzk::prover::gpu::force_shared_pass(1 << 18);
    let tiers = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8u64)
            .map(|i| {
                let (gpu, cpu, f, c1) = (&gpus[i as usize % 2], &cpu, &f, &c1);
                s.spawn(move || {
                    let g = gpu
                        .prove_porep_c2(c1, f.sector_id, &f.prover_id, &opts(i))
                        .unwrap();
                    let c = cpu
                        .prove_porep_c2(c1, f.sector_id, &f.prover_id, &opts(i))
                        .unwrap();
                    assert_eq!(g.proof, c.proof, "proof {i}: GPU and CPU differ");
                    assert!(f.verify(&g.proof).unwrap(), "proof {i}");
                    g.partitions
                        .iter()
                        .map(|p| p.tier.clone().unwrap_or_default())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    cuzk::prover::gpu::force_shared_pass(0);
    println!("{size}: tiers {tiers:?}");
    assert!(
        tiers
            .iter()
            .any(|t| t.contains("shared-bases-") && !t.contains("+gathered")),
        "no batch over shared bases ran: {tiers:?}"
    );
    assert!(
        tiers
            .iter()
            .any(|t| t.contains("shared-bases-") && t.contains("+gathered")),
        "no batch gathered its Pippenger parts: {tiers:?}"
    );
}
