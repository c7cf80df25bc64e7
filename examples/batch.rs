//! Scale bench of the GPU prover pipeline: COUNT synthetic proofs, at most CONCURRENCY at once,
//! each of P partitions with the *shape* of a 32 GiB PoRep partition, through the real GPU
//! backend ([`cuzk::prover::gpu::GpuBackend`]).
//!
//! ```text
//! cargo run --release --features cuda,test-hooks --example batch -- \
//!     [-c COUNT] [-j CONCURRENCY] [--partitions P] [--workers W] [--vram-limit SIZE|TIER]
//!     [--log2 N] [--check] [--pool-log2 K] [--seed S] [--reuse] [--dry-run] [--phase SPEC]...
//! ```
//!
//! * `-c COUNT` proofs (default 1), `-j CONCURRENCY` proofs in flight at once (default 1), each of
//!   `--partitions P` partitions (default 10), proved one after another inside a proof.
//! * `--workers W`: GPU workers per device (default `CUZK_GPU_WORKERS_PER_DEVICE`, else 2).
//! * `--vram-limit`: a size (`16GiB`; default `CUZK_VRAM_LIMIT`, else none) or a tier name
//!   (`resident`, `full-staging`, `partial`, `streaming`): every partition starts at that tier
//!   (`Tuning::gpu_start_tier`) under the smallest cap that holds it (512 MiB margin + the
//!   tier's bytes), to test tiers at small sizes. `none` removes a cap set in the environment.
//! * `--log2 N`: NTT domain 2^N (default 27, the 32 GiB partition). Every length scales by
//!   2^(N−27): constraints 130,278,869·s (328 of them the input constraints), aux 130,169,893·s;
//!   the 328 inputs are kept (fewer below 2^12).
//! * `--check`: every partition is also computed by the CPU backend and the five MSM results are
//!   compared (only for N ≤ 22: the CPU takes seconds per partition there already).
//! * `--pool-log2 K`: the parameters are filled by repeating 2^K random points (default 16).
//! * `--reuse`: each proving thread fills its assignment once and proves those values for every
//!   later partition (the GPU does the same work; the bench's data generation, seconds per
//!   partition at 2^27, drops out of the throughput), its a, b, c and aux registered
//!   (page-locked) once, as the engine's host pool does for the aux it synthesizes into, so the
//!   uploads run at the pinned rate without a registration each (not with `CUZK_ALLOW_CPU`: a
//!   CPU fallback frees a, b, c). Without it every partition is
//!   new data, registered for its upload.
//! * `--dry-run`: only generates the synthetic data and prints its shape (no device needed);
//!   with `--check`, also times one partition on the CPU backend.
//! * `--phase SPEC`: runs several configurations in one process over the same synthetic
//!   parameters (generated once): `SPEC` = comma-separated `w=W`, `vram=SIZE|TIER|none`, `c=COUNT`,
//!   `j=CONCURRENCY`, `p=P`, `reuse=0|1`, `name=TEXT`; unset keys take the command-line values.
//!   Repeatable.
//! * Other settings from the environment, as `cuzk::EngineConfig::from_env` reads them
//!   (`CUZK_DEVICES`, `CUZK_ALLOW_CPU`, ...). `RUST_LOG` sets the log filter (default `warn`).
//!
//! Synthetic data (the shape of the real circuit's witness, BENCHMARKS.md "The 0/1 split"): a, b, c uniformly random scalars; the
//! first input is one, the others random; aux: 3.5 % random, the rest 0/1 with 48 % ones, of the
//! values in the B query 9 % random; A density 99.2 % and B density 26.5 % of the aux variables
//! (independent per variable), of the inputs only the constant one is in B. The parameters have
//! the lengths these densities imply (H 2^N − 1, L aux, A inputs + A count, B inputs in B + B
//! count) but repeat a small pool of random points, so they are not a Groth16 key: the proofs
//! are not verified, `--check` checks the MSMs instead.
//!
//! Prints one line per partition (generation time; compute = wall time inside
//! `ProverBackend::compute`, scheduler queue and GPU-section wait included; gpu = the sum of the
//! device stages transfer + ntt + msm_*; each stage; device; tier) and
//! per proof, then per phase: throughput (partitions/s), stage statistics, the tiers and devices
//! used, and device memory: free before the phase (baseline), lowest free during it (peak use),
//! free at its end with the backend alive and after dropping it. Exit status 1 if any partition
//! failed or a check mismatched, 2 if device memory did not come back to its baseline (more than
//! 64 MiB missing after the backend was dropped), 3 for bad arguments or set-up errors, 4 if a
//! partition's device-memory high-water mark (its plan's arena,
//! `gpu::memory::alloc::arena_records`) exceeded its plan or the driver-reported use during a phase
//! exceeded its VRAM cap (each phase prints
//! `arena TIER: … peak high-water X of at most Y planned`).

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bellperson::groth16::{prepare_verifying_key, VerifyingKey};
use blstrs::{Bls12, G1Projective, G2Affine, G2Projective, Scalar as Fr};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rayon::prelude::*;

use cuzk::config::parse_bytes;
use cuzk::gpu::driver::device;
use cuzk::gpu::memory::alloc::{
    fmt_gib, DeviceAllocator, FakeMemInfo, MemInfo, PartitionShape, PlanOptions, TierKind, GIB,
    MIB, SAFETY_MARGIN,
};
use cuzk::progress::{Reporter, Timings};
use cuzk::prover::gpu::{pinned_registry, GpuBackend};
use cuzk::prover::{CpuBackend, MsmResults, PartitionCtx, ProverBackend as _};
use cuzk::srs::Srs;
use cuzk::synth::{Assignment, Density};
use cuzk::{EngineConfig, Error, Stage};

const USAGE: &str = "usage: batch [-c COUNT] [-j CONCURRENCY] [--partitions P] [--workers W] \
[--vram-limit SIZE|resident|full-staging|partial|streaming|none] [--log2 N] [--check] [--pool-log2 K] \
[--seed S] [--dry-run] [--reuse] [--phase w=W,vram=V,c=C,j=J,p=P,reuse=0|1,name=X]...";

/// Real 32 GiB partition: constraint rows including the 328 input constraints.
const ROWS_32G: f64 = 130_278_869.0;
/// Real 32 GiB partition: aux variables.
const AUX_32G: f64 = 130_169_893.0;
/// Real 32 GiB partition: public inputs (including the constant one).
const INPUTS_32G: usize = 328;
/// Fraction of aux variables in the A query.
const A_DENSITY: f64 = 0.992;
/// Fraction of aux variables in the B query.
const B_DENSITY: f64 = 0.265;
/// Fraction of all aux values that are neither 0 nor 1.
const AUX_RANDOM: f64 = 0.035;
/// Fraction of the values in the B query that are neither 0 nor 1.
const B_RANDOM: f64 = 0.09;
/// Fraction of ones among the 0/1 values.
const ONES: f64 = 0.48;
/// Device memory (bytes) that may stay missing after a phase before it counts as a leak.
const LEAK_TOLERANCE: u64 = 64 * MIB;

// ------------------------------------------------------------------------------------------
// arguments

/// `--vram-limit` value: a byte cap, a tier to force, or no cap.
#[derive(Clone, Debug, PartialEq)]
enum Vram {
    /// Whatever the environment says (`CUZK_VRAM_LIMIT`).
    Env,
    /// No cap.
    None,
    /// A cap in bytes.
    Bytes(u64),
    /// This tier: the engine starts every partition at it (`Tuning::gpu_start_tier`) under
    /// the smallest cap that holds it.
    Tier(TierKind),
}

/// One configuration run over the shared synthetic parameters.
#[derive(Clone, Debug)]
struct Phase {
    name: String,
    workers: Option<usize>,
    vram: Vram,
    count: usize,
    concurrency: usize,
    partitions: usize,
    /// Fill each in-flight assignment once and prove the same values again (throughput of the
    /// prover without the bench's own data generation).
    reuse: bool,
}

struct Args {
    base: Phase,
    phases: Vec<String>,
    log2: u32,
    check: bool,
    pool_log2: u32,
    seed: u64,
    dry_run: bool,
}

fn bad(name: &str, value: &str, reason: &str) -> Error {
    Error::InvalidConfig {
        name: name.into(),
        value: value.into(),
        reason: format!("{reason}; {USAGE}"),
    }
}

fn parse_count(name: &str, v: &str, min: usize, max: usize) -> Result<usize, Error> {
    match v.trim().parse::<usize>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(bad(
            name,
            v,
            &format!("expected an integer in {min}..={max}"),
        )),
    }
}

fn parse_vram(name: &str, v: &str) -> Result<Vram, Error> {
    Ok(match v.trim().to_ascii_lowercase().as_str() {
        "none" | "off" => Vram::None,
        "resident" => Vram::Tier(TierKind::Resident),
        "full-staging" | "full_staging" | "full" => Vram::Tier(TierKind::FullStaging),
        "partial" => Vram::Tier(TierKind::Partial),
        "streaming" => Vram::Tier(TierKind::Streaming),
        _ => Vram::Bytes(parse_bytes(v).map_err(|r| bad(name, v, &r))?),
    })
}

fn parse_args() -> Result<Args, Error> {
    let mut a = Args {
        base: Phase {
            name: "main".into(),
            workers: None,
            vram: Vram::Env,
            count: 1,
            concurrency: 1,
            partitions: 10,
            reuse: false,
        },
        phases: Vec::new(),
        log2: 27,
        check: false,
        pool_log2: 16,
        seed: 0x5eed,
        dry_run: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| bad(name, "", "missing value"));
        match s.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "-c" | "--count" => a.base.count = parse_count("-c", &value("-c")?, 1, 100_000)?,
            "-j" | "--concurrency" => a.base.concurrency = parse_count("-j", &value("-j")?, 1, 64)?,
            "--partitions" | "-p" => {
                a.base.partitions = parse_count("--partitions", &value("--partitions")?, 1, 1000)?
            }
            "--workers" | "-w" => {
                a.base.workers = Some(parse_count("--workers", &value("--workers")?, 1, 64)?)
            }
            "--vram-limit" => a.base.vram = parse_vram("--vram-limit", &value("--vram-limit")?)?,
            "--log2" => a.log2 = parse_count("--log2", &value("--log2")?, 10, 28)? as u32,
            "--pool-log2" => {
                a.pool_log2 = parse_count("--pool-log2", &value("--pool-log2")?, 4, 24)? as u32
            }
            "--seed" => {
                let v = value("--seed")?;
                a.seed = v
                    .trim()
                    .parse()
                    .map_err(|_| bad("--seed", &v, "expected an integer"))?;
            }
            "--check" => a.check = true,
            "--reuse" => a.base.reuse = true,
            "--dry-run" => a.dry_run = true,
            "--phase" => a.phases.push(value("--phase")?),
            _ => return Err(bad("argument", &s, "unknown option")),
        }
    }
    if a.check && a.log2 > 22 {
        return Err(bad(
            "--check",
            &a.log2.to_string(),
            "--check needs --log2 <= 22 (CPU reference)",
        ));
    }
    Ok(a)
}

/// Parses one `--phase` spec on top of the command-line values.
fn parse_phase(spec: &str, base: &Phase, index: usize) -> Result<Phase, Error> {
    let mut p = base.clone();
    p.name = format!("phase{index}");
    for kv in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| bad("--phase", spec, "expected key=value pairs"))?;
        match k.trim() {
            "w" | "workers" => p.workers = Some(parse_count("--phase w", v, 1, 64)?),
            "vram" => p.vram = parse_vram("--phase vram", v)?,
            "c" | "count" => p.count = parse_count("--phase c", v, 1, 100_000)?,
            "j" | "concurrency" => p.concurrency = parse_count("--phase j", v, 1, 64)?,
            "p" | "partitions" => p.partitions = parse_count("--phase p", v, 1, 1000)?,
            "name" => p.name = v.trim().to_string(),
            "reuse" => p.reuse = parse_count("--phase reuse", v, 0, 1)? == 1,
            _ => {
                return Err(bad(
                    "--phase",
                    kv,
                    "unknown key (w, vram, c, j, p, reuse, name)",
                ))
            }
        }
    }
    Ok(p)
}

// ------------------------------------------------------------------------------------------
// synthetic data

/// SplitMix64 (Steele, Lea, Flood: "Fast splittable pseudorandom number generators", 2014):
/// a 64-bit counter-based generator, here seeded per chunk so that filling is parallel and
/// deterministic.
#[derive(Clone, Copy)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A generator for item `index` of stream `seed` (independent streams for all practical
    /// purposes).
    fn at(seed: u64, index: u64) -> Self {
        let mut g = SplitMix(seed ^ index.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        g.next();
        g
    }

    /// A uniformly random scalar below 2^254 (< r), through the canonical → Montgomery
    /// conversion (one field multiplication).
    fn scalar(&mut self) -> Fr {
        let limbs = [self.next(), self.next(), self.next(), self.next() >> 2];
        Option::from(Fr::from_u64s_le(&limbs)).expect("a value below 2^254 is canonical")
    }

    /// True with probability `p` (32-bit resolution).
    fn chance(x: u32, p: f64) -> bool {
        (x as f64) < p * 4_294_967_296.0
    }
}

/// Elements filled per parallel task.
const FILL_CHUNK: usize = 1 << 14;

/// Lengths of the synthetic partition at domain 2^`log2`.
#[derive(Clone, Copy, Debug)]
struct Dims {
    log2: u32,
    /// Constraint rows including one per input (= length of a, b, c).
    rows: usize,
    /// Public inputs including the constant one.
    inputs: usize,
    /// Aux variables.
    aux: usize,
}

impl Dims {
    fn new(log2: u32) -> Dims {
        let s = (log2 as f64 - 27.0).exp2();
        let rows = ((ROWS_32G * s).round() as usize).clamp(4, 1 << log2);
        let inputs = INPUTS_32G.min(rows / 8).max(2);
        let aux = ((AUX_32G * s).round() as usize).max(1);
        Dims {
            log2,
            rows,
            inputs,
            aux,
        }
    }
}

/// The fixed part of every partition: the densities (so the parameters' lengths match).
struct Template {
    dims: Dims,
    a_aux: Density,
    b_input: Density,
    b_aux: Density,
}

fn density_from_bits(len: usize, bit: impl Fn(usize) -> bool + Sync) -> Density {
    let words: Vec<u64> = (0..len.div_ceil(64))
        .into_par_iter()
        .map(|w| {
            let mut x = 0u64;
            for b in 0..64 {
                let i = w * 64 + b;
                if i < len && bit(i) {
                    x |= 1 << b;
                }
            }
            x
        })
        .collect();
    let mut d = Density::default();
    for _ in 0..len {
        d.push();
    }
    for (w, &x) in words.iter().enumerate() {
        let mut x = x;
        while x != 0 {
            d.set(w * 64 + x.trailing_zeros() as usize);
            x &= x - 1;
        }
    }
    d
}

impl Template {
    fn new(dims: Dims, seed: u64) -> Template {
        let sa = seed ^ 0xA;
        let sb = seed ^ 0xB;
        let a_aux = density_from_bits(dims.aux, |i| {
            SplitMix::chance(SplitMix::at(sa, i as u64).next() as u32, A_DENSITY)
        });
        let b_aux = density_from_bits(dims.aux, |i| {
            SplitMix::chance(SplitMix::at(sb, i as u64).next() as u32, B_DENSITY)
        });
        let b_input = density_from_bits(dims.inputs, |i| i == 0);
        Template {
            dims,
            a_aux,
            b_input,
            b_aux,
        }
    }

    /// An empty assignment of the template's shape (values all zero; densities set).
    fn assignment(&self) -> Assignment {
        let d = self.dims;
        Assignment {
            a: vec![Fr::ZERO; d.rows],
            b: vec![Fr::ZERO; d.rows],
            c: vec![Fr::ZERO; d.rows],
            input: vec![Fr::ZERO; d.inputs],
            aux: vec![Fr::ZERO; d.aux],
            a_aux_density: self.a_aux.clone(),
            b_input_density: self.b_input.clone(),
            b_aux_density: self.b_aux.clone(),
        }
    }

    /// Refills the values of `asg` (re-creating the vectors a backend took) for stream `seed`.
    fn fill(&self, asg: &mut Assignment, seed: u64) {
        let d = self.dims;
        for v in [&mut asg.a, &mut asg.b, &mut asg.c] {
            if v.len() != d.rows {
                *v = vec![Fr::ZERO; d.rows];
            }
        }
        let fill_random = |v: &mut [Fr], s: u64| {
            v.par_chunks_mut(FILL_CHUNK)
                .enumerate()
                .for_each(|(k, ch)| {
                    let mut g = SplitMix::at(s, k as u64);
                    ch.iter_mut().for_each(|x| *x = g.scalar());
                })
        };
        fill_random(&mut asg.a, seed ^ 1);
        fill_random(&mut asg.b, seed ^ 2);
        fill_random(&mut asg.c, seed ^ 3);
        fill_random(&mut asg.input, seed ^ 4);
        asg.input[0] = Fr::ONE;
        // Of the aux values outside B a fraction p_out is random, so that the total is AUX_RANDOM.
        let p_out = ((AUX_RANDOM - B_DENSITY * B_RANDOM) / (1.0 - B_DENSITY)).max(0.0);
        let b_aux = &self.b_aux;
        asg.aux
            .par_chunks_mut(FILL_CHUNK)
            .enumerate()
            .for_each(|(k, ch)| {
                let mut g = SplitMix::at(seed ^ 5, k as u64);
                for (j, x) in ch.iter_mut().enumerate() {
                    let i = k * FILL_CHUNK + j;
                    let u = g.next();
                    let p = if b_aux.get(i) { B_RANDOM } else { p_out };
                    *x = if SplitMix::chance((u >> 32) as u32, p) {
                        g.scalar()
                    } else if SplitMix::chance(u as u32, ONES) {
                        Fr::ONE
                    } else {
                        Fr::ZERO
                    };
                }
            });
    }

    /// The allocator's view of this shape (as the GPU backend computes it).
    fn shape(&self) -> Result<PartitionShape, Error> {
        let d = self.dims;
        PartitionShape::from_counts(
            (d.rows - d.inputs) as u64,
            d.inputs as u64,
            d.aux as u64,
            (d.inputs + self.a_aux.count()) as u64,
            (self.b_input.count() + self.b_aux.count()) as u64,
        )
    }
}

/// `2^pool_log2` random points of a group, as an arithmetic progression R + i·S from a few
/// random starts (cheap: one addition per point).
fn pool<P: Group + Curve + Send + Sync>(pool_log2: u32, seed: u64) -> Vec<P::AffineRepr>
where
    P::AffineRepr: Send + Default + Copy,
{
    let n = 1usize << pool_log2;
    let per = 1usize << pool_log2.min(10);
    let proj: Vec<P> = (0..n / per)
        .into_par_iter()
        .flat_map_iter(|k| {
            let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(
                seed ^ (k as u64) << 20,
            );
            let step = P::random(&mut rng);
            let mut acc = P::random(&mut rng);
            (0..per).map(move |_| {
                acc += step;
                acc
            })
        })
        .collect();
    let mut out = vec![P::AffineRepr::default(); n];
    P::batch_normalize(&proj, &mut out);
    out
}

/// A vector of `len` points repeating `pool` (parallel memcpy speed).
fn repeat<T: Copy + Send + Sync>(pool: &[T], len: usize) -> Arc<Vec<T>> {
    let mask = pool.len() - 1;
    Arc::new((0..len).into_par_iter().map(|i| pool[i & mask]).collect())
}

/// Synthetic parameters of the template's lengths (not a Groth16 key; see the module docs).
fn fake_srs(t: &Template, pool_log2: u32, seed: u64) -> Srs {
    let d = t.dims;
    let g1 = pool::<G1Projective>(pool_log2, seed ^ 0x61);
    let g2 = pool::<G2Projective>(pool_log2, seed ^ 0x62);
    let b_len = t.b_input.count() + t.b_aux.count();
    let vk = VerifyingKey::<Bls12> {
        alpha_g1: g1[1],
        beta_g1: g1[2],
        beta_g2: g2[1],
        gamma_g2: g2[2],
        delta_g1: g1[3],
        delta_g2: g2[3],
        ic: (0..d.inputs)
            .map(|i| g1[(i + 5) & (g1.len() - 1)])
            .collect(),
    };
    let pvk = Arc::new(prepare_verifying_key(&vk));
    Srs {
        path: format!("synthetic-2^{}-pool-2^{pool_log2}-seed-{seed}", d.log2).into(),
        vk,
        pvk,
        h: repeat(&g1, (1usize << d.log2) - 1),
        l: repeat(&g1, d.aux),
        a: repeat(&g1, d.inputs + t.a_aux.count()),
        b_g1: repeat(&g1, b_len),
        b_g2: repeat::<G2Affine>(&g2, b_len),
    }
}

// ------------------------------------------------------------------------------------------
// memory monitor

/// Polls free device memory every 5 ms and keeps the lowest value per device.
struct Monitor {
    stop: Arc<AtomicBool>,
    min_free: Arc<Vec<AtomicU64>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Monitor {
    fn start(devices: &[usize]) -> Monitor {
        let stop = Arc::new(AtomicBool::new(false));
        let min_free = Arc::new(
            devices
                .iter()
                .map(|_| AtomicU64::new(u64::MAX))
                .collect::<Vec<_>>(),
        );
        let (s, m, devs) = (stop.clone(), min_free.clone(), devices.to_vec());
        let thread = std::thread::spawn(move || loop {
            for (k, &d) in devs.iter().enumerate() {
                if let Ok((free, _)) = device::mem_get_info(d) {
                    m[k].fetch_min(free, Ordering::Relaxed);
                }
            }
            if s.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        });
        Monitor {
            stop,
            min_free,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.min_free
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .collect()
    }
}

/// Launches the NTT and both MSM kernels once on tiny inputs (a 2^12 NTT, 1024-point G1 and
/// G2 MSMs): the CUDA context reserves local memory for the largest kernel at its first launch
/// and keeps it, which would otherwise show up as memory "missing" after the first phase.
fn warm_up(dev: &Arc<device::Device>) -> Result<(), Error> {
    use cuzk::gpu::kernels::msm::{msm_g1, msm_g2, Points, Scalars};
    let mut data: Vec<Fr> = (1..=4096u64).map(Fr::from).collect();
    cuzk::gpu::kernels::ntt::ntt_host(
        dev,
        &mut data,
        cuzk::gpu::kernels::ntt::Direction::Forward,
        false,
    )?;
    let g1 = vec![blstrs::G1Affine::generator(); 1024];
    let g2 = vec![G2Affine::generator(); 1024];
    msm_g1(dev, Points::Host(&g1), Scalars::Host(&data[..1024]))?;
    msm_g2(dev, Points::Host(&g2), Scalars::Host(&data[..1024]))?;
    Ok(())
}

fn free_now(devices: &[usize]) -> Result<Vec<u64>, Error> {
    devices
        .iter()
        .map(|&d| device::mem_get_info(d).map(|(f, _)| f))
        .collect()
}

// ------------------------------------------------------------------------------------------
// one phase

/// Stages printed per partition, in this order.
const STAGES: [Stage; 8] = [
    Stage::Wait,
    Stage::Transfer,
    Stage::Ntt,
    Stage::MsmH,
    Stage::MsmL,
    Stage::MsmA,
    Stage::MsmBG1,
    Stage::MsmBG2,
];

/// What one partition did.
struct PartRec {
    proof: usize,
    part: usize,
    /// Seconds to generate the synthetic assignment (stands in for synthesis).
    gen_s: f64,
    /// Seconds inside `ProverBackend::compute` (GPU-section wait included).
    compute_s: f64,
    /// Seconds per stage in [`STAGES`] order, summed over attempts.
    stages: [f64; STAGES.len()],
    device: Option<usize>,
    tier: Option<String>,
    error: Option<String>,
    /// `Some(false)`: the CPU reference differed.
    check: Option<bool>,
    /// Seconds from the phase's start to the end of this partition.
    end_s: f64,
}

impl PartRec {
    /// GPU time of the partition: the sum of its device stages (transfers, NTT+H, the MSMs),
    /// i.e. the compute time without the waits (scheduler queue, GPU section).
    fn gpu_s(&self) -> f64 {
        self.stages[1..].iter().sum()
    }
}

fn compare(gpu: &MsmResults, cpu: &MsmResults) -> Vec<&'static str> {
    let mut bad = Vec::new();
    if gpu.h != cpu.h {
        bad.push("h");
    }
    if gpu.l != cpu.l {
        bad.push("l");
    }
    if gpu.a != cpu.a {
        bad.push("a");
    }
    if gpu.b_g1 != cpu.b_g1 {
        bad.push("b_g1");
    }
    if gpu.b_g2 != cpu.b_g2 {
        bad.push("b_g2");
    }
    bad
}

/// Runs partition `part` of `proof` on `asg` (already filled).
#[allow(clippy::too_many_arguments)]
fn run_partition(
    backend: &GpuBackend,
    srs: &Arc<Srs>,
    asg: &mut Assignment,
    proof: usize,
    part: usize,
    parts: usize,
    gen_s: f64,
    check: bool,
) -> PartRec {
    let reporter = Reporter::default();
    let global = proof * parts + part;
    let reference = check.then(|| {
        let mut copy = asg.clone();
        let mut t = Timings::default();
        let mut ctx = PartitionCtx::new(global, &reporter, &mut t);
        CpuBackend.compute(&mut copy, srs, &mut ctx)
    });
    let mut timings = Timings::default();
    let mut ctx = PartitionCtx::new(global, &reporter, &mut timings);
    let t = Instant::now();
    let r = backend.compute(asg, srs, &mut ctx);
    let compute_s = t.elapsed().as_secs_f64();
    let (device, tier) = (ctx.device, ctx.tier.take());
    let mut stages = [0.0; STAGES.len()];
    for (k, s) in STAGES.iter().enumerate() {
        stages[k] = timings.total(*s).as_secs_f64();
    }
    let (error, check) = match (&r, reference) {
        (Err(e), _) => (Some(format!("error {}: {e}", e.code())), None),
        (Ok(_), None) => (None, None),
        (Ok(_), Some(Err(e))) => (Some(format!("CPU reference failed: {e}")), Some(false)),
        (Ok(g), Some(Ok(c))) => {
            let bad = compare(g, &c);
            if bad.is_empty() {
                (None, Some(true))
            } else {
                (
                    Some(format!("GPU != CPU in MSM {}", bad.join(", "))),
                    Some(false),
                )
            }
        }
    };
    PartRec {
        proof,
        part,
        gen_s,
        compute_s,
        stages,
        device,
        tier,
        error,
        check,
        end_s: 0.0,
    }
}

fn print_part(r: &PartRec) {
    let st: Vec<String> = STAGES
        .iter()
        .zip(r.stages)
        .map(|(s, v)| format!("{} {v:.3}", s.name()))
        .collect();
    println!(
        "proof {:>3} part {:>3}: {} gen {:.2} s | compute {:.3} s, gpu {:.3} s | {} | device {} tier {}{}",
        r.proof,
        r.part,
        if r.error.is_none() { "ok  " } else { "FAIL" },
        r.gen_s,
        r.compute_s,
        r.gpu_s(),
        st.join(" "),
        r.device.map_or("-".into(), |d| d.to_string()),
        r.tier.as_deref().unwrap_or("-"),
        match (&r.error, r.check) {
            (Some(e), _) => format!(" | {e}"),
            (None, Some(true)) => " | check ok (GPU == CPU)".into(),
            _ => String::new(),
        }
    );
}

/// min / median / mean / max of `v` (seconds), formatted.
fn stats(v: &mut [f64]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.sort_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    format!(
        "min {:.3} med {:.3} mean {:.3} max {:.3}",
        v[0],
        v[v.len() / 2],
        mean,
        v[v.len() - 1]
    )
}

/// Outcome of a phase for the exit status.
struct PhaseOutcome {
    failed: usize,
    leaked: bool,
    /// A partition's device-memory high-water mark above its plan, or the driver-reported use
    /// above the cap.
    over: bool,
}

/// An allocator of device 0 planning with the accumulation settings of `env` (what the engine's
/// allocators use).
fn env_allocator(env: &EngineConfig, mem: Arc<dyn MemInfo>, cap: Option<u64>) -> DeviceAllocator {
    DeviceAllocator::new(0, mem, cap).with_accumulation(
        env.tuning.msm_accumulation.into(),
        env.tuning.msm_affine_min_list,
    )
}

/// Device bytes of tier `kind` (streaming: its smallest chunk) with the MSM limits of `env`.
fn tier_bytes_env(env: &EngineConfig, shape: &PartitionShape, kind: TierKind) -> u64 {
    let mem = Arc::new(FakeMemInfo::new(&[(1, 1)]));
    let lim = env_allocator(env, mem, None).msm_limits();
    match kind {
        TierKind::Streaming => shape.streaming_min_bytes_with(&lim),
        k => shape.tier_bytes_with(k, false, &lim),
    }
}

fn resolve_limit(
    vram: &Vram,
    env: &EngineConfig,
    env_limit: Option<u64>,
    shape: &PartitionShape,
) -> Result<Option<u64>, Error> {
    Ok(match vram {
        Vram::Env => env_limit,
        Vram::None => None,
        Vram::Bytes(b) => Some(*b),
        Vram::Tier(kind) => {
            let bytes = tier_bytes_env(env, shape, *kind);
            let cap = SAFETY_MARGIN + bytes + MIB;
            // Check on a fake card that the planner, starting at this tier (`run_phase` sets
            // `Tuning::gpu_start_tier`: on small shapes `Resident` needs less than
            // `Partial`, so a cap alone cannot force it), really picks it at this cap.
            let mem = Arc::new(FakeMemInfo::new(&[(cap * 4, cap * 4)]));
            let alloc = env_allocator(env, mem, Some(cap));
            let start = PlanOptions {
                start: *kind,
                ..PlanOptions::default()
            };
            let plan = alloc.plan(shape, &start)?;
            if plan.tier.kind() != *kind {
                return Err(Error::InvalidConfig {
                    name: "--vram-limit".into(),
                    value: kind.name().into(),
                    reason: format!(
                        "at 2^{} the planner picks {} at the smallest cap that fits {} ({}): pick another --log2",
                        shape.domain_log2,
                        plan.tier,
                        kind.name(),
                        fmt_gib(cap)
                    ),
                });
            }
            Some(cap)
        }
    })
}

fn run_phase(
    phase: &Phase,
    env: &EngineConfig,
    tpl: &Template,
    srs: &Arc<Srs>,
    check: bool,
) -> Result<PhaseOutcome, Error> {
    let shape = tpl.shape()?;
    let mut cfg = env.clone();
    if let Some(w) = phase.workers {
        cfg.gpu_workers_per_device = w;
    }
    cfg.vram_limit = resolve_limit(&phase.vram, env, env.vram_limit, &shape)?;
    if let Vram::Tier(kind) = &phase.vram {
        cfg.tuning.gpu_start_tier = Some((*kind).into());
    }
    let devices: Vec<usize> = match &cfg.devices {
        Some(d) => d.clone(),
        None => (0..device::device_count()?).collect(),
    };
    println!(
        "\n=== phase {}: {} proofs x {} partitions, concurrency {}, {} workers/device, vram limit {}, devices {:?}{}",
        phase.name,
        phase.count,
        phase.partitions,
        phase.concurrency,
        cfg.workers_per_device(),
        cfg.vram_limit.map_or("none".into(), fmt_gib),
        devices,
        if phase.reuse { ", data reused" } else { "" }
    );
    for &d in &devices {
        // Context, module and the context's local-memory reservation (made at the first launch
        // of a kernel and kept) first, so that the baseline includes them.
        warm_up(&device::Device::get(d)?)?;
    }
    let baseline = free_now(&devices)?;
    let monitor = Monitor::start(&devices);
    let arenas_before = cuzk::gpu::memory::alloc::arena_records().len();
    let backend = GpuBackend::new(&cfg)?;
    let pins_before = pinned_registry().stats();

    let next = AtomicUsize::new(0);
    let records: Mutex<Vec<PartRec>> = Mutex::new(Vec::new());
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..phase.concurrency.min(phase.count) {
            s.spawn(|| {
                let mut asg: Option<Assignment> = None;
                // With reuse, the thread's a, b, c and aux are registered once (as the engine's
                // host pool registers the aux it synthesizes into), so every partition's uploads
                // find them pinned; declared after `asg`, so they unregister before it is freed.
                let mut pins: Vec<cuzk::gpu::memory::pinned::PinGuard> = Vec::new();
                let mut filled = false;
                loop {
                    let proof = next.fetch_add(1, Ordering::SeqCst);
                    if proof >= phase.count {
                        break;
                    }
                    let tp = Instant::now();
                    let mut ok = 0;
                    let mut gpu = 0.0;
                    for part in 0..phase.partitions {
                        let tg = Instant::now();
                        let a = asg.get_or_insert_with(|| tpl.assignment());
                        if !(phase.reuse && filled && a.a.len() == tpl.dims.rows) {
                            // A refill may reallocate (after a CPU fallback took a, b, c):
                            // the old registrations go first.
                            pins.clear();
                            tpl.fill(a, ((proof as u64) << 32 | part as u64).wrapping_mul(0x9E37_79B9));
                            filled = true;
                            // Not with a CPU fallback allowed: it takes a, b, c out of the
                            // assignment and frees them, which must not happen while registered.
                            if phase.reuse && !cfg.allow_cpu_fallback {
                                let reg = pinned_registry();
                                pins = vec![
                                    reg.pin_slice(&a.a),
                                    reg.pin_slice(&a.b),
                                    reg.pin_slice(&a.c),
                                    reg.pin_slice(&a.aux),
                                ];
                            }
                        }
                        let gen_s = tg.elapsed().as_secs_f64();
                        let mut r = run_partition(&backend, srs, a, proof, part, phase.partitions, gen_s, check);
                        r.end_s = t0.elapsed().as_secs_f64();
                        print_part(&r);
                        ok += r.error.is_none() as usize;
                        gpu += r.gpu_s();
                        records.lock().unwrap_or_else(|e| e.into_inner()).push(r);
                    }
                    println!(
                        "proof {proof:>3} done: {ok}/{} partitions ok, wall {:.2} s, GPU {gpu:.2} s, at t = {:.2} s",
                        phase.partitions,
                        tp.elapsed().as_secs_f64(),
                        t0.elapsed().as_secs_f64()
                    );
                }
            });
        }
    });
    let wall = t0.elapsed().as_secs_f64();
    let free_alive = free_now(&devices)?;
    drop(backend);
    let free_dropped = free_now(&devices)?;
    let min_free = monitor.finish();
    let pins = pinned_registry().stats();

    let recs = records.into_inner().unwrap_or_else(|e| e.into_inner());
    let failed = recs.iter().filter(|r| r.error.is_some()).count();
    let okn = recs.len() - failed;
    println!("--- phase {} summary", phase.name);
    println!(
        "partitions: {okn} ok, {failed} failed of {}; wall {wall:.2} s; throughput {:.3} partitions/s ({:.2} s per partition)",
        recs.len(),
        okn as f64 / wall,
        wall / okn.max(1) as f64
    );
    let mut ends: Vec<f64> = recs
        .iter()
        .filter(|r| r.error.is_none())
        .map(|r| r.end_s)
        .collect();
    ends.sort_by(f64::total_cmp);
    if ends.len() >= 2 {
        let span = ends[ends.len() - 1] - ends[0];
        println!(
            "steady state (after the first partition, which also pays warm-up such as the parameter upload): {} partitions in {span:.2} s = {:.3} partitions/s",
            ends.len() - 1,
            (ends.len() - 1) as f64 / span
        );
    }
    if check {
        let checked = recs.iter().filter(|r| r.check == Some(true)).count();
        println!(
            "check: {checked}/{} partitions GPU == CPU backend (all five MSMs)",
            recs.len()
        );
    }
    let ok: Vec<&PartRec> = recs.iter().filter(|r| r.error.is_none()).collect();
    println!(
        "  {:<9} {}",
        "gen",
        stats(&mut ok.iter().map(|r| r.gen_s).collect::<Vec<_>>())
    );
    println!(
        "  {:<9} {}",
        "compute",
        stats(&mut ok.iter().map(|r| r.compute_s).collect::<Vec<_>>())
    );
    println!(
        "  {:<9} {}",
        "gpu",
        stats(&mut ok.iter().map(|r| r.gpu_s()).collect::<Vec<_>>())
    );
    for (k, s) in STAGES.iter().enumerate() {
        println!(
            "  {:<9} {}",
            s.name(),
            stats(&mut ok.iter().map(|r| r.stages[k]).collect::<Vec<_>>())
        );
    }
    let mut tiers: Vec<(String, usize)> = Vec::new();
    for r in &recs {
        let key = format!(
            "device {} tier {}",
            r.device.map_or("-".into(), |d| d.to_string()),
            r.tier.as_deref().unwrap_or("-")
        );
        match tiers.iter_mut().find(|t| t.0 == key) {
            Some(t) => t.1 += 1,
            None => tiers.push((key, 1)),
        }
    }
    for (k, n) in &tiers {
        println!("  {k}: {n} partitions");
    }
    for r in recs.iter().filter(|r| r.error.is_some()) {
        println!(
            "  FAILED proof {} part {}: {}",
            r.proof,
            r.part,
            r.error.as_deref().unwrap_or("")
        );
    }
    println!(
        "pinned registry (this phase): {} registrations, {} shared, {} pageable fallbacks, {} unregistrations",
        pins.registrations - pins_before.registrations,
        pins.shared - pins_before.shared,
        pins.fallbacks - pins_before.fallbacks,
        pins.unregistrations - pins_before.unregistrations
    );
    // The allocator's arenas of this phase: each partition's high-water mark vs its plan.
    let arenas: Vec<_> = cuzk::gpu::memory::alloc::arena_records()
        .into_iter()
        .skip(arenas_before)
        .collect();
    let mut over = false;
    let mut by_label: Vec<(String, usize, u64, u64)> = Vec::new();
    for r in &arenas {
        over |= r.high_water > r.capacity;
        match by_label.iter_mut().find(|x| x.0 == r.label) {
            Some(x) => {
                x.1 += 1;
                x.2 = x.2.max(r.high_water);
                x.3 = x.3.max(r.capacity);
            }
            None => by_label.push((r.label.clone(), 1, r.high_water, r.capacity)),
        }
    }
    for (label, n, peak, cap) in &by_label {
        println!(
            "arena {label}: {n} arenas, peak high-water {} of at most {} planned{}",
            fmt_gib(*peak),
            fmt_gib(*cap),
            if peak > cap {
                "  <-- ABOVE the plan"
            } else {
                ""
            }
        );
    }
    let mut leaked = false;
    for (k, &d) in devices.iter().enumerate() {
        let used_peak = baseline[k].saturating_sub(min_free[k]);
        let missing = baseline[k].saturating_sub(free_dropped[k]);
        leaked |= missing > LEAK_TOLERANCE;
        over |= cfg.vram_limit.is_some_and(|l| used_peak > l);
        println!(
            "device {d} memory: baseline free {} | lowest free {} (peak use {}{}) | end, backend alive: free {} ({} below baseline) | backend dropped: free {} ({} below baseline){}",
            fmt_gib(baseline[k]),
            fmt_gib(min_free[k]),
            fmt_gib(used_peak),
            match cfg.vram_limit {
                Some(l) if used_peak > l => format!(", ABOVE the {} cap", fmt_gib(l)),
                Some(l) => format!(", within the {} cap", fmt_gib(l)),
                None => String::new(),
            },
            fmt_gib(free_alive[k]),
            fmt_gib(baseline[k].saturating_sub(free_alive[k])),
            fmt_gib(free_dropped[k]),
            fmt_gib(missing),
            if missing > LEAK_TOLERANCE { "  <-- NOT back at baseline" } else { "" }
        );
    }
    Ok(PhaseOutcome {
        failed,
        leaked,
        over,
    })
}

/// Dry run: what the allocator's planner gives W workers at once on a card of the H200's size
/// (139 GiB free) under the configured cap — the first plans are held while the next ones plan,
/// as in W concurrent GPU sections. No device needed.
fn planner_simulation(
    args: &Args,
    env: &EngineConfig,
    shape: &PartitionShape,
) -> Result<(), Error> {
    let limit = resolve_limit(&args.base.vram, env, env.vram_limit, shape)?;
    let workers = args
        .base
        .workers
        .unwrap_or_else(|| env.workers_per_device());
    let card = 139 * GIB;
    let alloc = env_allocator(env, Arc::new(FakeMemInfo::new(&[(card, card)])), limit);
    println!(
        "planner simulation: {workers} workers at once, {} card, cap {}",
        fmt_gib(card),
        limit.map_or("none".into(), fmt_gib)
    );
    let mut held = Vec::new();
    let mut failed = 0;
    for w in 0..workers {
        match alloc.plan(shape, &PlanOptions::default()) {
            Ok(p) => {
                println!(
                    "  worker {w}: plan {} ({}), {} reserved in all",
                    p.tier,
                    fmt_gib(p.needed),
                    fmt_gib(alloc.reserved_bytes())
                );
                held.push(p);
            }
            Err(e) => {
                println!("  worker {w}: plan -> error {}: {e}", e.code());
                failed += 1;
            }
        }
    }
    if failed > 0 && !held.is_empty() {
        let first = held.remove(0);
        let t = Instant::now();
        let waiter = std::thread::scope(|s| {
            let h =
                s.spawn(|| alloc.plan_wait(shape, &PlanOptions::default(), Duration::from_secs(5)));
            std::thread::sleep(Duration::from_millis(300));
            drop(first);
            h.join()
        });
        match waiter {
            Ok(Ok(p)) => println!(
                "  a waiting worker (plan_wait) got {} {:.2} s later, when worker 0's plan dropped",
                p.tier,
                t.elapsed().as_secs_f64()
            ),
            Ok(Err(e)) => println!("  a waiting worker (plan_wait) still failed: {e}"),
            Err(_) => println!("  plan_wait panicked"),
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error {}: {e}", e.code());
            ExitCode::from(3)
        }
    }
}

fn real_main() -> Result<ExitCode, Error> {
    let args = parse_args()?;
    let env = EngineConfig::from_env()?;
    let phases: Vec<Phase> = if args.phases.is_empty() {
        vec![args.base.clone()]
    } else {
        args.phases
            .iter()
            .enumerate()
            .map(|(i, s)| parse_phase(s, &args.base, i))
            .collect::<Result<_, _>>()?
    };
    if !args.dry_run {
        let count = device::device_count()?;
        if count == 0 {
            return Err(Error::NoDevice("the CUDA driver reports no device".into()));
        }
        let d0 = device::Device::get(0)?;
        let (free, total) = d0.mem_get_info()?;
        println!(
            "device 0: {} ({} devices), {} free of {}",
            d0.name(),
            count,
            fmt_gib(free),
            fmt_gib(total)
        );
    }
    println!("host: {} rayon threads", rayon::current_num_threads());

    let t = Instant::now();
    let dims = Dims::new(args.log2);
    let tpl = Template::new(dims, args.seed);
    let shape = tpl.shape()?;
    println!(
        "shape 2^{}: {} constraint rows ({} inputs), {} aux; A {} points ({:.1} % of aux), B {} points ({:.1} %), H {}; densities in {:.2} s",
        dims.log2,
        dims.rows,
        dims.inputs,
        dims.aux,
        shape.a_len,
        100.0 * tpl.a_aux.count() as f64 / dims.aux as f64,
        shape.b_g1_len,
        100.0 * tpl.b_aux.count() as f64 / dims.aux as f64,
        shape.h_len,
        t.elapsed().as_secs_f64()
    );
    for k in TierKind::ALL {
        let b = tier_bytes_env(&env, &shape, k);
        let forced = match resolve_limit(&Vram::Tier(k), &env, None, &shape) {
            Ok(Some(cap)) => format!(
                "forced by --vram-limit {} (start tier, cap {})",
                k.name(),
                fmt_gib(cap)
            ),
            Ok(None) => String::new(),
            Err(_) => "cannot be forced by a cap at this size".into(),
        };
        println!(
            "  planner: tier {:<12} needs {} (+ {} margin); {forced}",
            k.name(),
            fmt_gib(b),
            fmt_gib(SAFETY_MARGIN)
        );
    }
    if args.dry_run {
        planner_simulation(&args, &env, &shape)?;
        if !args.check {
            return Ok(ExitCode::SUCCESS);
        }
    }
    let t = Instant::now();
    let srs = Arc::new(fake_srs(&tpl, args.pool_log2, args.seed));
    println!(
        "synthetic parameters: {} in {:.2} s (pool of 2^{} points)",
        fmt_gib(srs.size_bytes()),
        t.elapsed().as_secs_f64(),
        args.pool_log2
    );
    {
        // Split of one generated assignment, as a sanity check of the witness shape.
        let t = Instant::now();
        let mut a = tpl.assignment();
        tpl.fill(&mut a, 1);
        let gen = t.elapsed().as_secs_f64();
        let (z, o, r) = a.aux_split(None);
        let (bz, bo, br) = a.aux_split(Some(&a.b_aux_density));
        println!(
            "witness: aux {:.2} % random, {:.2} % ones of 0/1; B query {:.2} % random; {} of assignment generated in {:.2} s (first fill)",
            100.0 * r as f64 / (z + o + r) as f64,
            100.0 * o as f64 / (z + o).max(1) as f64,
            100.0 * br as f64 / (bz + bo + br).max(1) as f64,
            fmt_gib(((3 * dims.rows + dims.aux) * 32) as u64),
            gen
        );
    }

    if args.dry_run {
        if args.check {
            let mut a = tpl.assignment();
            tpl.fill(&mut a, 2);
            let reporter = Reporter::default();
            let mut t = Timings::default();
            let mut ctx = PartitionCtx::new(0, &reporter, &mut t);
            let t0 = Instant::now();
            CpuBackend.compute(&mut a, &srs, &mut ctx)?;
            let st: Vec<String> = t
                .entries
                .iter()
                .map(|e| format!("{} {:.3}", e.1.name(), e.2.as_secs_f64()))
                .collect();
            println!(
                "CPU backend, one partition: {:.3} s ({})",
                t0.elapsed().as_secs_f64(),
                st.join(" ")
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut failed = 0;
    let mut leaked = false;
    let mut over = false;
    for p in &phases {
        match run_phase(p, &env, &tpl, &srs, args.check) {
            Ok(o) => {
                failed += o.failed;
                leaked |= o.leaked;
                over |= o.over;
            }
            Err(e) => {
                println!("phase {} could not run: error {}: {e}", p.name, e.code());
                failed += 1;
            }
        }
    }
    println!(
        "\nresult: {}",
        if failed == 0 && !leaked && !over {
            "PASS"
        } else {
            "FAIL"
        }
    );
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else if over {
        // a high-water mark above its plan, or driver-reported use above the cap
        ExitCode::from(4)
    } else if leaked {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
