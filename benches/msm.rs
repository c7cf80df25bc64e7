//! GPU MSM throughput (src/gpu/kernels/msm.rs): G1 with random scalars and with the PoRep witness
//! mix of zeros and ones, G2 with random scalars. Points and scalars are resident on the device
//! (the prover's case: parameters uploaded once, H scalars produced by the NTT); the time is one
//! full `MsmWorkspace::msm_g1` / `msm_g2` call (classification, read-back of the counts, Pippenger,
//! host-side window combination).
//!
//! Sizes (log2 n, comma separated) from the environment:
//! - `CUZK_BENCH_MSM_G1` (default `20,21,22,23,24,25,26,27`)
//! - `CUZK_BENCH_MSM_G2` (default `20,21,22,23,24,25`)
//! - `CUZK_BENCH_MSM_POREP` (default `24,26,27`): G1, 96.5 % zeros/ones (48 % of them ones)
//! - `CUZK_BENCH_MSM_PROFILE=1`: also print the GPU time per stage of one run per size.
//! - `CUZK_BENCH_MSM_SWEEP` (default empty): log2 sizes at which every occupancy variant of the
//!   XYZZ and the batch-affine accumulation kernels and window sizes c-2..=c+3 around the chosen
//!   c are timed (G1 and G2).
//! - `CUZK_BENCH_MSM_AFFINE` (default empty; feature `test-hooks`): batch sizes k at which one
//!   G1 addition is timed as the accumulation's XYZZ mixed addition and as an affine addition
//!   batched k per inversion (Montgomery's trick), first of all.
//!
//! - `CUZK_BENCH_MSM_ACCUMULATION` (default `affine`): the bucket accumulation of every run (G1, G2),
//!   `affine` or `xyzz`; `both`: the criterion runs use the default and each size's printed runs
//!   are made with both (same call, same data: the A/B of BENCHMARKS.md), batch-affine then at
//!   every size (below each group's threshold too: `layout::AFFINE_MIN_LIST`,
//!   `layout::AFFINE_MIN_LIST_G2`).
//! - `CUZK_BENCH_MSM_TWO_PASS_MIN_LIST` (default `layout::TWO_PASS_MIN_LIST`): shortest list
//!   scattered in two passes in every run (`18446744073709551615`: the one-pass scatter only,
//!   the A/B of BENCHMARKS.md).
//! - `CUZK_BENCH_MSM_TWO_PASS_WINDOWS` (default `layout::TWO_PASS_GROUP_WINDOWS`): windows per
//!   group of the two-pass scatter in every run.
//! - `CUZK_BENCH_MSM_AFFINE_CHAINS` (default empty): batch-affine chains per thread (additions
//!   per inversion) of extra printed runs at every G1 size, e.g. `128,512`.
//! - `CUZK_BENCH_MSM_AFFINE_MIN_BLOCKS` (default and empty: each group's): the batch-affine
//!   kernel's occupancy variant (blocks per multiprocessor) of every run.
//!
//! An empty value skips that group.
//!
//! Bases: generating 2^27 random points on the host takes minutes, so `2^22` (G1) / `2^20` (G2)
//! distinct points are made (random starts walked by random steps, in parallel) and tiled over
//! the device buffer. The gathers then re-read a 384 MiB (G1) / 192 MiB (G2) working set, larger
//! than the 50 MiB L2, so the memory behaviour is close to that of distinct points.
//! Scalars are distinct (uniform in [0, r)).
//!
//! Run: `CUZK_CUDA_ARCHS=sm_90 cargo bench --features cuda --bench msm`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use criterion::{BenchmarkId, Criterion, SamplingMode};
use cuzk::gpu::driver::device::{device_count, Device, DeviceBuffer, DeviceRepr};
use cuzk::gpu::kernels::msm::{
    window_bits_for, Accumulation, MsmConfig, MsmGroup, MsmWorkspace, Points, Scalars, G1, G2,
};
use ff::Field;
use group::{Curve, Group};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

fn sizes(var: &str, default: &str) -> Vec<u32> {
    let v = std::env::var(var).unwrap_or_else(|_| default.to_string());
    v.split(',')
        .filter(|t| !t.trim().is_empty())
        .map(|t| {
            t.trim()
                .parse::<u32>()
                .unwrap_or_else(|_| panic!("{var}={v:?}: {t:?} is not a number"))
        })
        .collect()
}

/// The accumulations of `CUZK_BENCH_MSM_ACCUMULATION`: the one of every run, then (with `both`)
/// the other one for the printed A/B runs.
fn accumulations() -> Vec<Accumulation> {
    match std::env::var("CUZK_BENCH_MSM_ACCUMULATION") {
        Err(_) => vec![Accumulation::BatchAffine],
        Ok(v) if v.trim() == "both" => vec![Accumulation::BatchAffine, Accumulation::Xyzz],
        Ok(v) => vec![Accumulation::parse(&v).unwrap_or_else(|| {
            panic!("CUZK_BENCH_MSM_ACCUMULATION={v:?}: expected affine, xyzz or both")
        })],
    }
}

/// The default configuration with the bench's accumulation; with `both`, batch-affine at every
/// list length (`affine_min_list: Some(0)`), so that the A/B also shows where it loses.
fn base_config() -> MsmConfig {
    let accs = accumulations();
    MsmConfig {
        accumulation: accs[0],
        affine_min_list: if accs.len() > 1 {
            Some(0)
        } else {
            MsmConfig::default().affine_min_list
        },
        two_pass_min_list: match std::env::var("CUZK_BENCH_MSM_TWO_PASS_MIN_LIST") {
            Ok(v) => v.trim().parse().unwrap_or_else(|_| {
                panic!("CUZK_BENCH_MSM_TWO_PASS_MIN_LIST={v:?}: expected a number of entries")
            }),
            Err(_) => MsmConfig::default().two_pass_min_list,
        },
        affine_min_blocks: match std::env::var("CUZK_BENCH_MSM_AFFINE_MIN_BLOCKS") {
            Ok(v) if !v.trim().is_empty() => Some(v.trim().parse().unwrap_or_else(|_| {
                panic!("CUZK_BENCH_MSM_AFFINE_MIN_BLOCKS={v:?}: expected a number of blocks")
            })),
            _ => None,
        },
        two_pass_group_windows: match std::env::var("CUZK_BENCH_MSM_TWO_PASS_WINDOWS") {
            Ok(v) => v.trim().parse().unwrap_or_else(|_| {
                panic!("CUZK_BENCH_MSM_TWO_PASS_WINDOWS={v:?}: expected a number of windows")
            }),
            Err(_) => MsmConfig::default().two_pass_group_windows,
        },
        ..MsmConfig::default()
    }
}

fn profile_on() -> bool {
    match std::env::var("CUZK_BENCH_MSM_PROFILE") {
        Ok(v) => v.trim() == "1",
        Err(_) => false,
    }
}

/// `distinct` points (chunks of 4096 walk R + i S), affine.
fn base_points<P: Group + Curve + Send + Sync>(distinct: usize, seed: u64) -> Vec<P::AffineRepr>
where
    P::AffineRepr: Send + Sync + Default + Copy,
{
    let mut out = vec![P::AffineRepr::default(); distinct];
    out.par_chunks_mut(4096).enumerate().for_each(|(c, a)| {
        let mut rng = ChaCha20Rng::seed_from_u64(seed + c as u64);
        let step = P::random(&mut rng);
        let mut cur = P::random(&mut rng);
        let mut proj = Vec::with_capacity(a.len());
        for _ in 0..a.len() {
            proj.push(cur);
            cur += step;
        }
        P::batch_normalize(&proj, a);
    });
    out
}

/// A device buffer of n points, `base` tiled.
fn tiled<A: DeviceRepr>(dev: &Arc<Device>, base: &[A], n: usize) -> DeviceBuffer<A> {
    let mut buf = dev.alloc::<A>(n).expect("alloc points");
    let mut off = 0;
    while off < n {
        let len = base.len().min(n - off);
        buf.slice_mut(off..off + len)
            .unwrap()
            .copy_from_host(&base[..len])
            .unwrap();
        off += len;
    }
    buf
}

/// A device buffer of n scalars, generated in chunks (uniform, or the PoRep mix).
fn device_scalars(dev: &Arc<Device>, n: usize, porep: bool, seed: u64) -> DeviceBuffer<Scalar> {
    let mut buf = dev.alloc::<Scalar>(n).expect("alloc scalars");
    let chunk = 1 << 22;
    let mut off = 0;
    while off < n {
        let len = chunk.min(n - off);
        let host: Vec<Scalar> = (0..len.div_ceil(4096))
            .into_par_iter()
            .flat_map_iter(|c| {
                let mut rng = ChaCha20Rng::seed_from_u64(seed ^ ((off / 4096 + c) as u64) << 20);
                let k = 4096.min(len - c * 4096);
                (0..k)
                    .map(|_| {
                        if !porep {
                            return Scalar::random(&mut rng);
                        }
                        let u: f64 = rng.gen();
                        if u < 0.965 * 0.52 {
                            Scalar::ZERO
                        } else if u < 0.965 {
                            Scalar::ONE
                        } else {
                            Scalar::random(&mut rng)
                        }
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        buf.slice_mut(off..off + len)
            .unwrap()
            .copy_from_host(&host)
            .unwrap();
        off += len;
    }
    buf
}

fn print_stats(label: &str, ws: &MsmWorkspace, ms: f64) {
    let s = ws.stats();
    let stages: Vec<String> = s
        .stage_ms
        .iter()
        .map(|(n, t)| format!("{n} {t:.2}"))
        .collect();
    println!(
        "[msm] {label}: {ms:.2} ms  (m={} ones={} c={} W={} mb={} chunks={} {}){}{}",
        s.m,
        s.ones,
        s.window_bits,
        s.windows,
        s.min_blocks,
        s.chunks,
        match s.affine {
            Some(a) => format!(
                "affine S={} CH={} L={}",
                a.threads, a.chains_per_thread, a.steps
            ),
            None => "xyzz".to_string(),
        },
        if stages.is_empty() {
            ""
        } else {
            "  stages ms: "
        },
        stages.join(", ")
    );
}

/// Times one configuration (second of two runs, with stage profile) and prints it.
fn sweep_one(
    label: &str,
    run: &mut dyn FnMut(&mut MsmWorkspace),
    dev: &Arc<Device>,
    cfg: MsmConfig,
) {
    let mut ws = MsmWorkspace::with_config(
        dev,
        MsmConfig {
            profile: true,
            ..cfg
        },
    )
    .unwrap();
    run(&mut ws);
    let t = Instant::now();
    run(&mut ws);
    print_stats(label, &ws, t.elapsed().as_secs_f64() * 1e3);
}

/// Occupancy variants (of the XYZZ kernel with the XYZZ accumulation, then of the batch-affine
/// one, which changes the kernel only where it runs at that size) and window sizes at 2^k.
fn sweep<G: MsmGroup>(dev: &Arc<Device>, k: u32, run: &mut dyn FnMut(&mut MsmWorkspace)) {
    for &mb in G::MIN_BLOCKS {
        let cfg = MsmConfig {
            accumulate_min_blocks: Some(mb),
            accumulation: Accumulation::Xyzz,
            ..base_config()
        };
        sweep_one(&format!("sweep {} 2^{k} mb={mb}", G::SUFFIX), run, dev, cfg);
    }
    for &mb in G::LAYOUT.affine_min_blocks {
        let cfg = MsmConfig {
            affine_min_blocks: Some(mb),
            ..base_config()
        };
        sweep_one(
            &format!("sweep {} 2^{k} affine mb={mb}", G::SUFFIX),
            run,
            dev,
            cfg,
        );
    }
    let c0 = window_bits_for(1 << k, G::LAYOUT);
    // Up to c0 + 3: past the automatic choice's cap (MAX_AUTO_WINDOW_BITS), where fewer windows
    // (255 / c + 1) may pay for the larger bucket sets.
    for c in c0 - 2..=(c0 + 3).min(24) {
        let cfg = MsmConfig {
            window_bits: Some(c),
            ..base_config()
        };
        sweep_one(&format!("sweep {} 2^{k} c={c}", G::SUFFIX), run, dev, cfg);
    }
}

fn bench_g1(c: &mut Criterion, dev: &Arc<Device>, logs: &[u32], porep: bool) {
    let Some(&max) = logs.iter().max() else {
        return;
    };
    let t = Instant::now();
    let base = base_points::<G1Projective>(1 << 22.min(max), 1);
    let points = tiled::<G1Affine>(dev, &base, 1 << max);
    drop(base);
    let scalars = device_scalars(dev, 1 << max, porep, 2);
    println!(
        "[msm] G1 setup (2^{max} points tiled from 2^{}, scalars) {:.1} s",
        22.min(max),
        t.elapsed().as_secs_f64()
    );
    let name = if porep {
        "msm_g1_porep"
    } else {
        "msm_g1_random"
    };
    measure::<G1>(c, dev, name, &points, &scalars, logs, !porep);
}

fn bench_g2(c: &mut Criterion, dev: &Arc<Device>, logs: &[u32]) {
    let Some(&max) = logs.iter().max() else {
        return;
    };
    let t = Instant::now();
    let base = base_points::<G2Projective>(1 << 20.min(max), 3);
    let points = tiled::<G2Affine>(dev, &base, 1 << max);
    drop(base);
    let scalars = device_scalars(dev, 1 << max, false, 4);
    println!(
        "[msm] G2 setup (2^{max} points tiled from 2^{}, scalars) {:.1} s",
        20.min(max),
        t.elapsed().as_secs_f64()
    );
    measure::<G2>(c, dev, "msm_g2_random", &points, &scalars, logs, true);
}

/// The criterion group `name` over the sizes `logs` (prefixes of `points` / `scalars`), each
/// preceded by a printed stage profile (with `CUZK_BENCH_MSM_PROFILE`) and one printed timed
/// run; with `sweep`, first the occupancy / window sweep at the sizes in `CUZK_BENCH_MSM_SWEEP`.
fn measure<G: MsmGroup>(
    c: &mut Criterion,
    dev: &Arc<Device>,
    name: &str,
    points: &DeviceBuffer<G::Affine>,
    scalars: &DeviceBuffer<Scalar>,
    logs: &[u32],
    sweep_on: bool,
) {
    let max = logs.iter().copied().max().unwrap_or(0);
    let mut g = c.benchmark_group(name);
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let mut ws = MsmWorkspace::with_config(dev, base_config()).unwrap();
    if sweep_on {
        for k in sizes("CUZK_BENCH_MSM_SWEEP", "")
            .into_iter()
            .filter(|k| *k <= max)
        {
            let n = 1usize << k;
            let (p, s) = (points.slice(0..n).unwrap(), scalars.slice(0..n).unwrap());
            sweep::<G>(dev, k, &mut |w: &mut MsmWorkspace| {
                w.msm::<G>(Points::Device(p), Scalars::Device(s), None)
                    .unwrap();
            });
        }
    }
    // Second of two runs, printed with the workspace's statistics.
    let timed = |ws: &mut MsmWorkspace, label: String, p, s| {
        let _ = ws
            .msm::<G>(Points::Device(p), Scalars::Device(s), None)
            .unwrap();
        let t = Instant::now();
        let _ = ws
            .msm::<G>(Points::Device(p), Scalars::Device(s), None)
            .unwrap();
        print_stats(&label, ws, t.elapsed().as_secs_f64() * 1e3);
    };
    for &k in logs {
        let n = 1usize << k;
        let (p, s) = (points.slice(0..n).unwrap(), scalars.slice(0..n).unwrap());
        let accs = accumulations();
        for (i, &acc) in accs.iter().enumerate() {
            let tag = if accs.len() > 1 {
                format!(" [{acc:?}]")
            } else {
                String::new()
            };
            if profile_on() {
                let mut wp = MsmWorkspace::with_config(
                    dev,
                    MsmConfig {
                        profile: true,
                        accumulation: acc,
                        ..base_config()
                    },
                )
                .unwrap();
                timed(&mut wp, format!("{name} 2^{k}{tag} (profiled)"), p, s);
            }
            if acc == Accumulation::BatchAffine {
                for ch in sizes("CUZK_BENCH_MSM_AFFINE_CHAINS", "") {
                    let mut wc = MsmWorkspace::with_config(
                        dev,
                        MsmConfig {
                            affine_chains_per_thread: ch,
                            profile: profile_on(),
                            ..base_config()
                        },
                    )
                    .unwrap();
                    timed(&mut wc, format!("{name} 2^{k}{tag} CH={ch}"), p, s);
                }
            }
            if i == 0 {
                timed(&mut ws, format!("{name} 2^{k}{tag}"), p, s);
            } else {
                let mut wo = MsmWorkspace::with_config(
                    dev,
                    MsmConfig {
                        accumulation: acc,
                        ..base_config()
                    },
                )
                .unwrap();
                timed(&mut wo, format!("{name} 2^{k}{tag}"), p, s);
            }
        }
        g.bench_with_input(BenchmarkId::from_parameter(format!("2^{k}")), &n, |b, _| {
            b.iter(|| {
                ws.msm::<G>(Points::Device(p), Scalars::Device(s), None)
                    .unwrap()
            })
        });
    }
    g.finish();
}

fn main() {
    let dev = match device_count() {
        Ok(0) => {
            println!("msm bench skipped: no CUDA device");
            return;
        }
        Err(e) => {
            println!("msm bench skipped: CUDA driver unusable: {e}");
            return;
        }
        Ok(_) => Device::get(0).expect("device 0"),
    };
    println!("[msm] device: {} ({} SMs)", dev.name(), dev.sm_count());
    #[cfg(feature = "test-hooks")]
    affine_probe(&dev);
    let mut c = Criterion::default().configure_from_args();
    bench_g1(
        &mut c,
        &dev,
        &sizes("CUZK_BENCH_MSM_G1", "20,21,22,23,24,25,26,27"),
        false,
    );
    bench_g1(
        &mut c,
        &dev,
        &sizes("CUZK_BENCH_MSM_POREP", "24,26,27"),
        true,
    );
    bench_g2(
        &mut c,
        &dev,
        &sizes("CUZK_BENCH_MSM_G2", "20,21,22,23,24,25"),
    );
    c.final_summary();
}

/// `CUZK_BENCH_MSM_AFFINE=k,...`: the cost of one G1 point addition, the accumulation's XYZZ
/// mixed addition against affine additions batched k per inversion (Montgomery's trick), at
/// the accumulation kernel's occupancy (cuda/test_kernels.cu `add_probe`); the affine sums are
/// checked against blstrs on a sample.
#[cfg(feature = "test-hooks")]
fn affine_probe(dev: &Arc<Device>) {
    use cuzk::gpu::testing::g1_add_probe;
    let ks = sizes("CUZK_BENCH_MSM_AFFINE", "");
    if ks.is_empty() {
        return;
    }
    let t = dev.sm_count() * 5 * 128;
    let kmax = *ks.iter().max().unwrap();
    let n = t as usize * kmax as usize;
    let bp = base_points::<G1Projective>(1 << 20, 11);
    let bq = base_points::<G1Projective>(1 << 20, 12);
    let p = tiled::<G1Affine>(dev, &bp, n);
    let q = tiled::<G1Affine>(dev, &bq, n);
    let mut acc = dev.alloc::<u8>(192 * t as usize).unwrap();
    let mut out = dev.alloc::<G1Affine>(n).unwrap();
    let mut scratch = dev.alloc::<u8>(48 * n).unwrap();
    let stream = dev.stream().unwrap();
    acc.as_mut_slice().zero(&stream).unwrap();
    for &k in &ks {
        let mut ms = [0.0f64; 2];
        for (mode, m) in ms.iter_mut().enumerate() {
            let mut run = || {
                g1_add_probe(
                    &stream,
                    mode == 1,
                    &p,
                    &q,
                    &mut acc,
                    &mut out,
                    &mut scratch,
                    t,
                    k,
                )
                .unwrap();
                stream.synchronize().unwrap();
            };
            run();
            let t0 = Instant::now();
            run();
            run();
            *m = t0.elapsed().as_secs_f64() * 1e3 / 2.0;
        }
        // the affine sums of the last run: a sample against blstrs
        let got = out.to_vec().unwrap();
        for j in (0..t as usize * k as usize).step_by(999_983).take(16) {
            let want = (G1Projective::from(bp[j % bp.len()]) + bq[j % bq.len()]).to_affine();
            assert_eq!(got[j], want, "affine probe: sum {j} differs from blstrs");
        }
        let adds = t as f64 * k as f64;
        println!(
            "[msm] add probe k={k}: xyzz madd {:.3} ns, batch affine {:.3} ns per addition ({:.2}x), {} additions",
            ms[0] * 1e6 / adds,
            ms[1] * 1e6 / adds,
            ms[0] / ms[1],
            adds
        );
    }
}
