//! The allocator's plans on a real device (feature `cuda`; skips without a GPU unless
//! `CUZK_REQUIRE_GPU=1`): MSM workspaces counted against an arena sized by
//! `layout::msm_workspace_bytes` stay within it for the PoRep scalar mix and for uniform scalars
//! (peak = the arena's high-water mark ≤ the plan), an arena one buffer too small fails typed
//! before any `cuMemAlloc`, and the driver-reported use (sampled by a thread with `cuMemGetInfo`)
//! never exceeds the arena plus what was in use before.
//!
//! `CUZK_TEST_ALLOC_LOG2` sets the MSM length (default 24; the H200 run uses 27). The whole
//! 2^27 partition on every tier and under `CUZK_VRAM_LIMIT=16GiB` is `examples/batch.rs`
//! (`scripts/device-run.sh alloc`), which fails with exit status 4 when a partition's arena
//! high-water mark exceeds its plan or the driver's use exceeds the cap.

#![cfg(feature = "cuda")]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use blstrs::{G1Affine, G1Projective, Scalar as Fr};
use cuzk::gpu::kernels::msm::{MsmConfig, MsmWorkspace, Points, Scalars};
use cuzk::gpu::memory::alloc::Arena;
use cuzk::gpu::memory::layout::{msm_workspace_bytes, MsmLimits, MsmShape, G1_LAYOUT};
use cuzk::Error;
use ff::Field;
use group::{Curve, Group};

fn log2() -> u32 {
    std::env::var("CUZK_TEST_ALLOC_LOG2")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.trim().parse().expect("CUZK_TEST_ALLOC_LOG2: a number"))
        .unwrap_or(24)
}

/// Lowest free memory seen by a sampling thread while `f` runs, and `f`'s result.
fn sampled<R>(dev: usize, f: impl FnOnce() -> R) -> (R, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let low = Arc::new(AtomicU64::new(u64::MAX));
    let (s, l) = (stop.clone(), low.clone());
    let t = std::thread::spawn(move || loop {
        if let Ok((free, _)) = cuzk::gpu::driver::device::mem_get_info(dev) {
            l.fetch_min(free, Ordering::Relaxed);
        }
        if s.load(Ordering::Relaxed) {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    });
    let r = f();
    stop.store(true, Ordering::Relaxed);
    t.join().unwrap();
    (r, low.load(Ordering::Relaxed))
}

#[test]
fn msm_workspace_stays_within_its_planned_arena() {
    let Some(dev) = common::gpu_device() else {
        return;
    };
    let n = 1usize << log2();
    // bases: a small pool repeated (the MSM's cost does not depend on distinct points)
    let pool: Vec<G1Affine> = (0..1024u64)
        .map(|i| (G1Projective::generator() * Fr::from(i + 2)).to_affine())
        .collect();
    let points: Vec<G1Affine> = (0..n).map(|i| pool[i % pool.len()]).collect();
    let d_points = dev.upload(&points).unwrap();
    drop(points);
    let mut rng = rand::thread_rng();
    let uniform: Vec<Fr> = (0..n).map(|_| Fr::random(&mut rng)).collect();
    // the PoRep mix: ~96.5 % zeros and ones
    let porep: Vec<Fr> = uniform
        .iter()
        .enumerate()
        .map(|(i, s)| match i % 200 {
            0..=95 => Fr::ZERO,
            96..=192 => Fr::ONE,
            _ => *s,
        })
        .collect();
    let lim = MsmLimits::defaults(dev.sm_count());
    let shape = MsmShape {
        group: &G1_LAYOUT,
        n: n as u64,
        max_m: n as u64,
        host_scalars: false,
        host_points: 0,
        density: false,
    };
    let planned = msm_workspace_bytes(&[shape], &lim).unwrap();
    for (name, scalars) in [("porep-mix", &porep), ("uniform", &uniform)] {
        let d_scalars = dev.upload(scalars).unwrap();
        let arena = Arena::new(dev.ordinal(), name, planned);
        let (free_before, _) = dev.mem_get_info().unwrap();
        let (r, low) = sampled(dev.ordinal(), || {
            let mut ws = MsmWorkspace::with_config(
                &dev,
                MsmConfig {
                    arena: Some(arena.clone()),
                    ..Default::default()
                },
            )
            .unwrap();
            let r = ws.msm_g1(
                Points::Device(d_points.as_slice()),
                Scalars::Device(d_scalars.as_slice()),
                None,
            );
            ws.release().unwrap();
            r
        });
        r.unwrap();
        let used = free_before.saturating_sub(low);
        println!(
            "2^{} {name}: arena high-water {} of {} planned; driver-reported use {} above the start",
            log2(),
            arena.high_water(),
            planned,
            used
        );
        assert!(arena.high_water() <= planned);
        assert!(arena.high_water() > 0);
        // the driver rounds allocations to 2 MiB pages: allow one page per workspace buffer
        assert!(
            used <= planned + 24 * (2 << 20),
            "{name}: driver use {used} above the {planned}-byte plan"
        );
    }
    // an arena smaller than the bound refuses the buffer that does not fit, typed, before any
    // cuMemAlloc
    let d_scalars = dev.upload(&uniform).unwrap();
    let small = Arena::new(dev.ordinal(), "too-small", planned / 4);
    let mut ws = MsmWorkspace::with_config(
        &dev,
        MsmConfig {
            arena: Some(small.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    let r = ws.msm_g1(
        Points::Device(d_points.as_slice()),
        Scalars::Device(d_scalars.as_slice()),
        None,
    );
    assert!(
        matches!(r, Err(Error::OutOfDeviceMemory { .. })),
        "expected the arena's typed error, got {r:?}"
    );
    assert!(small.high_water() <= planned / 4);
}
