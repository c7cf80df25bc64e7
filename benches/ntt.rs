//! GPU NTT and H-step benchmarks (device time, measured with CUDA events).
//!
//! `cargo bench --features cuda --bench ntt`. Sizes: `CUZK_BENCH_NTT_LOGS` (comma-separated
//! log2 sizes, default 20..=27, sizes that do not fit in device memory are skipped). Data stays
//! on the device; each sample is the event-timed device time of one operation (upload and
//! download excluded). A plain table of medians is printed at the end (and per size to stderr).
#![cfg(feature = "cuda")]

use std::sync::Arc;
use std::time::Duration;

use blstrs::Scalar;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use cuzk::gpu::driver::device::{device_count, Device, DeviceBuffer, Event, Stream};
use cuzk::gpu::kernels::ntt::{self, Direction, PassProduct};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

fn logs() -> Vec<u32> {
    match std::env::var("CUZK_BENCH_NTT_LOGS") {
        Ok(s) => s.split(',').filter_map(|t| t.trim().parse().ok()).collect(),
        Err(_) => (20..=27).collect(),
    }
}

fn random_buf(dev: &Arc<Device>, n: usize, seed: u64) -> DeviceBuffer<Scalar> {
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(1 << 14).enumerate().for_each(|(i, c)| {
        let mut r = ChaCha20Rng::seed_from_u64(seed ^ ((i as u64) << 24));
        for x in c {
            *x = Scalar::random(&mut r);
        }
    });
    dev.upload(&v).expect("upload")
}

/// Device milliseconds of `f` queued on `stream`.
fn timed(dev: &Arc<Device>, stream: &Stream, f: &mut dyn FnMut()) -> f64 {
    let (e0, e1) = (
        Event::new(dev, true).unwrap(),
        Event::new(dev, true).unwrap(),
    );
    e0.record(stream).unwrap();
    f();
    e1.record(stream).unwrap();
    e1.synchronize().unwrap();
    e1.elapsed_ms(&e0).unwrap() as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Median device time (ms) of `runs` runs of `f`.
fn median_ms(dev: &Arc<Device>, stream: &Stream, runs: usize, f: &mut dyn FnMut()) -> f64 {
    median((0..runs).map(|_| timed(dev, stream, f)).collect())
}

/// Criterion `iter_custom` body: `iters` runs of `f`, their device times summed.
fn device_time(dev: &Arc<Device>, stream: &Stream, iters: u64, f: &mut dyn FnMut()) -> Duration {
    Duration::from_secs_f64((0..iters).map(|_| timed(dev, stream, f)).sum::<f64>() / 1e3)
}

/// Forward NTT, natural order in and out, with the chosen pass product.
fn forward(stream: &Stream, a: &mut DeviceBuffer<Scalar>, product: PassProduct) {
    ntt::ntt_with(
        stream,
        &mut a.as_mut_slice(),
        Direction::Forward,
        false,
        product,
    )
    .unwrap()
}

fn bench(c: &mut Criterion) {
    match device_count() {
        Ok(0) => {
            eprintln!("SKIPPED: no CUDA device visible");
            return;
        }
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            return;
        }
        Ok(_) => {}
    }
    let dev = Device::get(0).expect("device 0");
    let stream = dev.stream().unwrap();
    let (free, total) = dev.mem_get_info().unwrap();
    eprintln!(
        "device 0: {} ({} SMs), {:.1} GiB free of {:.1}",
        dev.name(),
        dev.sm_count(),
        free as f64 / 1073741824.0,
        total as f64 / 1073741824.0
    );

    // Fr multiplication throughput probe (cuda/test_kernels.cu: feature `test-hooks`), every
    // product
    #[cfg(feature = "test-hooks")]
    for product in PassProduct::ALL {
        let n = (dev.sm_count() as usize) * 2048 * 4;
        let mut buf = random_buf(&dev, n, 9);
        let iters = 256u32;
        let mut run =
            || cuzk::gpu::testing::fr_mul_chain(&stream, &mut buf, iters, product).unwrap();
        run();
        let ms = median_ms(&dev, &stream, 5, &mut run);
        let muls = (n as f64) * 2.0 * iters as f64;
        println!(
            "Fr mul throughput ({}): {:.1} Gmul/s ({ms:.3} ms for {muls:.3e} muls)",
            product.name(),
            muls / ms / 1e6
        );
    }
    // pass-kernel tuning sweep: (tile_log, threads)
    let tune_logs: Vec<u32> = std::env::var("CUZK_BENCH_NTT_TUNE_LOGS")
        .map(|s| s.split(',').filter_map(|t| t.trim().parse().ok()).collect())
        .unwrap_or_else(|_| vec![24, 27]);
    for log_n in tune_logs {
        let n = 1usize << log_n;
        let (free, _) = dev.mem_get_info().unwrap();
        if (n * 32) as u64 + (1u64 << 30) > free {
            continue;
        }
        let mut a = random_buf(&dev, n, 5);
        for (tl, th) in [(10, 256), (10, 128), (11, 256)] {
            ntt::tune(tl, th);
            for product in PassProduct::ALL {
                let mut fwd = || forward(&stream, &mut a, product);
                fwd();
                stream.synchronize().unwrap();
                let ms = median_ms(&dev, &stream, 5, &mut fwd);
                println!(
                    "tune 2^{log_n}: tile 2^{tl}, {th} threads, {}: ntt {ms:.3} ms",
                    product.name()
                );
            }
        }
        ntt::tune(0, 0);
    }

    let mut table = Vec::new();
    let mut g = c.benchmark_group("gpu_ntt");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for log_n in logs() {
        let n = 1usize << log_n;
        let (free, _) = dev.mem_get_info().unwrap();
        if (3 * n * 32) as u64 + (1u64 << 30) > free {
            eprintln!(
                "2^{log_n}: skipped, needs {} bytes for the H step, {free} free",
                3 * n * 32
            );
            continue;
        }
        let mut a = random_buf(&dev, n, 1);
        let mut b = random_buf(&dev, n, 2);
        let mut cc = random_buf(&dev, n, 3);
        for product in PassProduct::ALL {
            let mut fwd = || forward(&stream, &mut a, product);
            fwd(); // warm-up (tables, module)
            stream.synchronize().unwrap();
            let ms_fwd = median_ms(&dev, &stream, 7, &mut fwd);
            let mut inv = || {
                ntt::ntt_with(
                    &stream,
                    &mut a.as_mut_slice(),
                    Direction::Inverse,
                    true,
                    product,
                )
                .unwrap()
            };
            let ms_icoset = median_ms(&dev, &stream, 7, &mut inv);
            let mut h = || {
                ntt::h_step_with(
                    &stream,
                    &mut a.as_mut_slice(),
                    &mut b.as_mut_slice(),
                    &mut cc.as_mut_slice(),
                    product,
                )
                .unwrap()
            };
            let ms_h = median_ms(&dev, &stream, 5, &mut h);
            eprintln!(
                "2^{log_n} ({}): ntt {ms_fwd:.3} ms, icoset {ms_icoset:.3} ms, h_step {ms_h:.3} ms",
                product.name()
            );
            table.push((log_n, product, ms_fwd, ms_icoset, ms_h));
        }

        g.bench_with_input(
            BenchmarkId::new("ntt_forward", format!("2^{log_n}")),
            &log_n,
            |bch, _| {
                bch.iter_custom(|iters| {
                    device_time(&dev, &stream, iters, &mut || {
                        ntt::ntt(&stream, &mut a.as_mut_slice(), Direction::Forward, false).unwrap()
                    })
                })
            },
        );
        g.bench_with_input(
            BenchmarkId::new("h_step", format!("2^{log_n}")),
            &log_n,
            |bch, _| {
                bch.iter_custom(|iters| {
                    device_time(&dev, &stream, iters, &mut || {
                        ntt::h_step(
                            &stream,
                            &mut a.as_mut_slice(),
                            &mut b.as_mut_slice(),
                            &mut cc.as_mut_slice(),
                        )
                        .unwrap()
                    })
                })
            },
        );
    }
    g.finish();
    println!("\n| log2 n | multiplication | ntt (natural→natural) ms | icoset ms | H step ms |");
    println!("|---|---|---|---|---|");
    for (l, w, f, i, h) in table {
        println!("| {l} | {} | {f:.3} | {i:.3} | {h:.3} |", w.name());
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
