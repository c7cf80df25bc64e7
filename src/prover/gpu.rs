//! GPU backend (feature `cuda`): H polynomial and all MSMs on the device, epilogue on the host.
//!
//! Synthesis runs on the engine's host threads; each synthesized partition is then submitted to
//! the [`Scheduler`] (`gpu_workers_per_device` workers on each device; a partition goes to the
//! device with the fewest partitions assigned, then the most free memory). A worker asks its
//! device's [`DeviceAllocator`] for a plan (tiers: parameters resident → full staging → partial
//! → streaming), uploads a, b, c outside the device's GPU section (so its copies overlap another
//! worker's kernels), then holds the section for the NTT and the MSMs. On an out-of-memory or
//! CUDA error the scheduler retries one tier lower, then on another device; then the partition
//! fails with the typed error — or runs on the CPU if the caller allowed it (reported as tier
//! `cpu-fallback` and logged as a warning — never silent).
//!
//! Host buffers (a, b, c and the parameters) are page-locked through the process-wide
//! [`PinnedRegistry`] (one registration per range however many workers use it; pageable copies
//! if pinning fails).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar as Fr};
use group::Group;
use rayon::prelude::*;

use super::cpu::{msm as cpu_msm, CpuBackend};
use super::{Backend, MsmResults, PartitionCtx};
use crate::config::EngineConfig;
use crate::error::{Error, Result};
use crate::gpu::alloc::{
    DeviceAllocator, MemInfo, PartitionShape, Plan, PlanOptions, Reservation, Tier, TierKind,
};
use crate::gpu::device::{self, Device, DeviceBuffer};
use crate::gpu::hostmem;
use crate::gpu::msm::{MsmWorkspace, Points, Scalars};
use crate::gpu::ntt;
use crate::gpu::pinned::{HostPinner, PinnedRegistry};
use crate::progress::Stage;
use crate::progress::{Reporter, Timings};
use crate::scheduler::{Attempt, PartitionExecutor, Scheduler, SchedulerConfig};
use crate::srs::Srs;
use crate::synth::Assignment;

/// Free/total memory straight from the driver (`cuMemGetInfo`), for the allocator.
struct DriverMemInfo;

impl MemInfo for DriverMemInfo {
    fn mem_get_info(&self, device: usize) -> Result<(u64, u64)> {
        device::mem_get_info(device)
    }
}

/// `cuMemHostRegister` / `cuMemHostUnregister` for the pinned registry.
struct DriverPinner;

impl HostPinner for DriverPinner {
    fn register(&self, ptr: usize, len: usize) -> Result<()> {
        hostmem::register(ptr, len)
    }
    fn unregister(&self, ptr: usize) -> Result<()> {
        hostmem::unregister(ptr)
    }
}

/// The process-wide pinned-range registry (shared by every engine and worker).
pub fn pinned_registry() -> &'static PinnedRegistry {
    PinnedRegistry::global(|| Arc::new(DriverPinner))
}

/// Parameters uploaded once to a device and kept there for later partitions and calls.
struct Resident {
    path: PathBuf,
    h: DeviceBuffer<G1Affine>,
    l: DeviceBuffer<G1Affine>,
    a: DeviceBuffer<G1Affine>,
    b_g1: DeviceBuffer<G1Affine>,
    b_g2: DeviceBuffer<G2Affine>,
    _reservation: Reservation,
}

struct Slot {
    dev: Arc<Device>,
    alloc: DeviceAllocator,
    resident: Mutex<Option<Arc<Resident>>>,
}

/// One synthesized partition handed to the scheduler. The assignment comes back to the caller
/// afterwards (for a CPU fallback).
struct GpuJob {
    asg: Mutex<Assignment>,
    srs: Arc<Srs>,
    reporter: Reporter,
    partition: usize,
}

/// What a GPU worker returns for one partition.
struct GpuOutput {
    msm: MsmResults,
    timings: Timings,
    device: usize,
    tier: String,
}

/// Runs partitions on the device the scheduler picked.
struct GpuExecutor {
    slots: Vec<Slot>,
}

/// The GPU backend: one slot per device, and the partition scheduler over them.
pub struct GpuBackend {
    scheduler: Scheduler<GpuExecutor>,
    allow_cpu: bool,
}

impl GpuBackend {
    /// Opens the configured devices (`config.devices`, else every visible one), each with an
    /// allocator capped at `config.vram_limit` and `config.workers_per_device()` workers.
    ///
    /// # Errors
    /// [`Error::NoDevice`] when no device is visible or the driver is unusable;
    /// [`Error::DeviceUnsupported`] when a listed device cannot run our kernels.
    pub fn new(config: &EngineConfig) -> Result<Self> {
        let count = device::device_count()?;
        if count == 0 {
            return Err(Error::NoDevice("the CUDA driver reports no device".into()));
        }
        let ordinals: Vec<usize> = config
            .devices
            .clone()
            .unwrap_or_else(|| (0..count).collect());
        let mut slots = Vec::new();
        for &o in &ordinals {
            if o >= count {
                return Err(Error::NoDevice(format!(
                    "device {o} requested, {count} visible"
                )));
            }
            let dev = Device::get(o)?;
            let alloc = DeviceAllocator::new(o, Arc::new(DriverMemInfo), config.vram_limit);
            let (free, total) = dev.mem_get_info()?;
            log::info!(
                "GPU {o}: {} MiB free of {} MiB{}, {} workers",
                free >> 20,
                total >> 20,
                config
                    .vram_limit
                    .map(|l| format!(", capped at {} MiB", l >> 20))
                    .unwrap_or_default(),
                config.workers_per_device()
            );
            slots.push(Slot {
                dev,
                alloc,
                resident: Mutex::new(None),
            });
        }
        let executor = Arc::new(GpuExecutor { slots });
        let probe = executor.clone();
        let sched_config = SchedulerConfig {
            devices: ordinals.clone(),
            workers_per_device: config.workers_per_device(),
            gpu_section_permits: 1,
            free_memory: Some(Arc::new(move |d| {
                probe.slot(d).ok().and_then(|s| s.alloc.available().ok())
            })),
        };
        let scheduler = Scheduler::new(executor, sched_config)?;
        Ok(GpuBackend {
            scheduler,
            allow_cpu: config.allow_cpu_fallback,
        })
    }
}

impl GpuExecutor {
    fn slot(&self, ordinal: usize) -> Result<&Slot> {
        self.slots
            .iter()
            .find(|s| s.dev.ordinal() == ordinal)
            .ok_or_else(|| Error::NoDevice(format!("device {ordinal} is not open")))
    }
}

impl PartitionExecutor for GpuExecutor {
    type Job = Arc<GpuJob>;
    type Output = GpuOutput;

    fn run(&self, attempt: &Attempt<'_>, job: &Arc<GpuJob>) -> Result<GpuOutput> {
        let slot = self.slot(attempt.device)?;
        let mut asg = job
            .asg
            .lock()
            .map_err(|_| Error::internal("assignment lock poisoned"))?;
        let srs = &job.srs;
        let shape = shape_of(&asg, srs)?;
        let params_resident = slot
            .resident
            .lock()
            .map(|r| r.as_ref().is_some_and(|r| r.path == srs.path))
            .unwrap_or(false);
        let plan = plan_on(slot, &shape, &attempt.plan_options(params_resident))?;
        attempt.record_tier(plan.tier.kind());
        let tier = plan.tier;
        log::info!(
            "partition {}: GPU {} worker {}, tier {tier} (attempt {})",
            job.partition,
            attempt.device,
            attempt.worker,
            attempt.number
        );
        let mut timings = Timings::default();
        let mut ctx = PartitionCtx {
            partition: job.partition,
            reporter: &job.reporter,
            timings: &mut timings,
            device: Some(attempt.device),
            tier: Some(tier.name().to_string()),
        };
        let msm = run_on(slot, plan, &mut asg, srs, &mut ctx, attempt)?;
        Ok(GpuOutput {
            msm,
            timings,
            device: attempt.device,
            tier: tier.name().to_string(),
        })
    }
}

fn shape_of(asg: &Assignment, srs: &Srs) -> Result<PartitionShape> {
    let ni = asg.input.len() as u64;
    PartitionShape::from_counts(
        asg.num_constraints() as u64 - ni,
        ni,
        asg.aux.len() as u64,
        srs.a.len() as u64,
        srs.b_g1.len() as u64,
    )
}

/// Uploads the parameters to the device if this plan reserved them, or returns those already
/// resident.
fn resident_for(slot: &Slot, srs: &Srs, plan: &mut Plan) -> Result<Option<Arc<Resident>>> {
    let mut cur = slot
        .resident
        .lock()
        .map_err(|_| Error::internal("resident lock poisoned"))?;
    if let Some(r) = cur.as_ref() {
        if r.path == srs.path {
            return Ok(Some(r.clone()));
        }
    }
    let Some(res) = plan.params.take() else {
        return Ok(None);
    };
    *cur = None; // other parameters: free them first
    let t = Instant::now();
    let reg = pinned_registry();
    let up_g1 = |v: &[G1Affine]| -> Result<DeviceBuffer<G1Affine>> {
        let _pin = reg.pin_slice(v);
        slot.dev.upload(v)
    };
    let r = Arc::new(Resident {
        path: srs.path.clone(),
        h: up_g1(&srs.h)?,
        l: up_g1(&srs.l)?,
        a: up_g1(&srs.a)?,
        b_g1: up_g1(&srs.b_g1)?,
        b_g2: {
            let _pin = reg.pin_slice(&srs.b_g2[..]);
            slot.dev.upload(&srs.b_g2)?
        },
        _reservation: res,
    });
    r._reservation.note_allocated(srs.size_bytes());
    log::info!(
        "GPU {}: parameters resident ({:.2} GB uploaded in {:.2} s)",
        slot.dev.ordinal(),
        srs.size_bytes() as f64 / 1e9,
        t.elapsed().as_secs_f64()
    );
    *cur = Some(r.clone());
    Ok(Some(r))
}

/// Copies `src` into the first `src.len()` elements of `dst` and zeroes the rest.
fn stage(stream: &device::Stream, dst: &mut DeviceBuffer<Fr>, src: &[Fr]) -> Result<()> {
    let _pin = pinned_registry().pin_slice(src);
    dst.slice_mut(..src.len())?.copy_from_host(src)?;
    if src.len() < dst.len() {
        dst.slice_mut(src.len()..)?.zero(stream)?;
    }
    Ok(())
}

/// Plans one partition on `slot` ([`DeviceAllocator::plan`]). While other partitions of this
/// process hold working memory on the device (it comes back when they finish), "no tier fits"
/// means "not now": wait for their reservations to drop (re-planning on every release, at
/// least every 200 ms) instead of failing the partition. Fails with
/// [`Error::OutOfDeviceMemory`] only when nothing but the resident parameters is reserved.
/// (Two workers under a 16 GiB cap at 2^27: the first holds the partial tier's 14.95 GiB, the
/// second waits for it instead of failing.)
fn plan_on(slot: &Slot, shape: &PartitionShape, opts: &PlanOptions) -> Result<Plan> {
    loop {
        let resident = slot
            .resident
            .lock()
            .map_err(|_| Error::internal("resident lock poisoned"))?
            .as_ref()
            .map_or(0, |r| r._reservation.bytes());
        if slot.alloc.reserved_bytes() <= resident {
            return slot.alloc.plan(shape, opts);
        }
        match slot
            .alloc
            .plan_wait(shape, opts, std::time::Duration::from_millis(200))
        {
            Err(Error::OutOfDeviceMemory { .. }) => continue,
            other => return other,
        }
    }
}

/// Σ over `scalars` in passes of about `chunk` scalars (a multiple of 64, so density words split
/// cleanly): each pass gets its scalars, its density words and exactly the points its set bits
/// use (`points[k]` pairs with the k-th set bit, as in bellperson's layout).
fn chunked<A, P: std::ops::Add<Output = P> + Group>(
    points: &[A],
    scalars: &[Fr],
    density: Option<&crate::synth::Density>,
    chunk: usize,
    mut msm: impl FnMut(&[A], &[Fr], Option<&[u64]>) -> Result<P>,
) -> Result<P> {
    let chunk = chunk.div_ceil(64).max(1) * 64;
    let mut sum = P::identity();
    let mut used = 0usize;
    for s in (0..scalars.len()).step_by(chunk) {
        let e = (s + chunk).min(scalars.len());
        match density {
            None => sum = sum + msm(&points[s..e], &scalars[s..e], None)?,
            Some(d) => {
                let words = &d.words()[s / 64..e.div_ceil(64)];
                let ones: usize = words.iter().map(|w| w.count_ones() as usize).sum();
                if ones > 0 {
                    sum = sum + msm(&points[used..used + ones], &scalars[s..e], Some(words))?;
                }
                used += ones;
            }
        }
    }
    Ok(sum)
}

/// Runs one partition on one device under `plan`.
fn run_on(
    slot: &Slot,
    mut plan: Plan,
    asg: &mut Assignment,
    srs: &Srs,
    ctx: &mut PartitionCtx<'_>,
    attempt: &Attempt<'_>,
) -> Result<MsmResults> {
    let dev = &slot.dev;
    let p = Some(ctx.partition);
    let shape = shape_of(asg, srs)?;
    let resident = if plan.tier.kind() == TierKind::Resident {
        resident_for(slot, srs, &mut plan)?
    } else {
        None
    };
    let n = 1usize << asg.domain_log2();
    let stream = dev.stream()?;

    // ---- H polynomial. When the plan's working memory holds three domain buffers (3·n·32 B;
    // resident and full staging always, partial too: its 2·n·32 B staging plus the MSM pass it
    // has not started yet), a, b, c are staged and the seven NTTs and the pointwise pass run on
    // the device, and the MSMs run after two buffers are freed. Otherwise (streaming) h comes
    // from the CPU NTT and only h (n·32 B) is uploaded.
    let t = Instant::now();
    let section;
    let chunk: usize;
    let mut dh = dev.alloc::<Fr>(n)?;
    let gpu_ntt = 3 * 32 * n as u64 <= plan.work.bytes();
    match gpu_ntt {
        true => {
            let mut db = dev.alloc::<Fr>(n)?;
            let mut dc = dev.alloc::<Fr>(n)?;
            plan.work.note_allocated(3 * 32 * n as u64);
            stage(&stream, &mut dh, &asg.a)?;
            stage(&stream, &mut db, &asg.b)?;
            stage(&stream, &mut dc, &asg.c)?;
            ctx.reporter
                .report(ctx.timings, p, Stage::Transfer, t.elapsed());
            // The GPU section: kernels only (the uploads above overlap other workers' kernels).
            let guard = attempt.enter_gpu();
            ctx.reporter
                .report(ctx.timings, p, Stage::Wait, guard.waited());
            section = guard;
            let t = Instant::now();
            ntt::h_step(
                &stream,
                &mut dh.as_mut_slice(),
                &mut db.as_mut_slice(),
                &mut dc.as_mut_slice(),
            )?;
            stream.synchronize()?;
            ctx.reporter.report(ctx.timings, p, Stage::Ntt, t.elapsed());
            plan.work.note_freed(2 * 32 * n as u64);
            chunk = match plan.tier {
                Tier::Streaming { chunk_points, .. } => chunk_points as usize,
                _ => shape.pass_points() as usize,
            };
        }
        false => {
            plan.work.note_allocated(32 * n as u64);
            let h = crate::ntt::compute_h(asg.a.clone(), asg.b.clone(), asg.c.clone())?;
            ctx.reporter.report(ctx.timings, p, Stage::Ntt, t.elapsed());
            let t = Instant::now();
            stage(&stream, &mut dh, &h)?;
            ctx.reporter
                .report(ctx.timings, p, Stage::Transfer, t.elapsed());
            let guard = attempt.enter_gpu();
            ctx.reporter
                .report(ctx.timings, p, Stage::Wait, guard.waited());
            section = guard;
            chunk = match plan.tier {
                Tier::Streaming { chunk_points, .. } => chunk_points as usize,
                _ => shape.pass_points() as usize,
            };
        }
    }
    // a, b, c stay on the host until the partition succeeds: a retry (lower tier, other
    // device, CPU fallback) needs them.

    // ---- MSMs. Resident: bases on the device, aux uploaded once. Otherwise bases and scalars
    // stream from host memory in passes of `chunk` points (the plan's MSM pass), so the MSM
    // buffers stay within the plan.
    let mut ws = MsmWorkspace::new(dev)?;
    let ni = asg.input.len();
    let bi = asg.b_input_density.count();
    let rep = ctx.reporter;
    let tm = &mut *ctx.timings;
    let in_idx: Vec<usize> = (0..ni).filter(|&i| asg.b_input_density.get(i)).collect();
    // The input parts (≤ a few hundred points) are summed on the CPU.
    let a_in: G1Projective = cpu_msm(srs.a[..ni].par_iter().zip(asg.input.par_iter()));
    let b1_in: G1Projective = cpu_msm(
        in_idx
            .par_iter()
            .enumerate()
            .map(|(k, &i)| (&srs.b_g1[k], &asg.input[i])),
    );
    let b2_in: G2Projective = cpu_msm(
        in_idx
            .par_iter()
            .enumerate()
            .map(|(k, &i)| (&srs.b_g2[k], &asg.input[i])),
    );
    let (h, l, a, b_g1, b_g2);
    if let Some(r) = &resident {
        let daux = dev.upload(&asg.aux)?;
        let aux = || Scalars::Device(daux.as_slice());
        let t = Instant::now();
        h = ws.msm_g1(
            Points::Device(r.h.slice(0..n - 1)?),
            Scalars::Device(dh.slice(0..n - 1)?),
            None,
        )?;
        rep.report(tm, p, Stage::MsmH, t.elapsed());
        drop(dh);
        let t = Instant::now();
        l = ws.msm_g1(Points::Device(r.l.as_slice()), aux(), None)?;
        rep.report(tm, p, Stage::MsmL, t.elapsed());
        let t = Instant::now();
        a = a_in
            + ws.msm_g1(
                Points::Device(r.a.slice(ni..)?),
                aux(),
                Some(asg.a_aux_density.words()),
            )?;
        rep.report(tm, p, Stage::MsmA, t.elapsed());
        let t = Instant::now();
        b_g1 = b1_in
            + ws.msm_g1(
                Points::Device(r.b_g1.slice(bi..)?),
                aux(),
                Some(asg.b_aux_density.words()),
            )?;
        rep.report(tm, p, Stage::MsmBG1, t.elapsed());
        let t = Instant::now();
        b_g2 = b2_in
            + ws.msm_g2(
                Points::Device(r.b_g2.slice(bi..)?),
                aux(),
                Some(asg.b_aux_density.words()),
            )?;
        rep.report(tm, p, Stage::MsmBG2, t.elapsed());
    } else {
        let t = Instant::now();
        let mut hsum = G1Projective::identity();
        for s in (0..n - 1).step_by(chunk) {
            let e = (s + chunk).min(n - 1);
            hsum += ws.msm_g1(
                Points::Host(&srs.h[s..e]),
                Scalars::Device(dh.slice(s..e)?),
                None,
            )?;
            ws.release()?;
        }
        h = hsum;
        rep.report(tm, p, Stage::MsmH, t.elapsed());
        drop(dh);
        let t = Instant::now();
        l = chunked(&srs.l, &asg.aux, None, chunk, |pt, sc, d| {
            ws.msm_g1(Points::Host(pt), Scalars::Host(sc), d)
        })?;
        rep.report(tm, p, Stage::MsmL, t.elapsed());
        let t = Instant::now();
        a = a_in
            + chunked(
                &srs.a[ni..],
                &asg.aux,
                Some(&asg.a_aux_density),
                chunk,
                |pt, sc, d| ws.msm_g1(Points::Host(pt), Scalars::Host(sc), d),
            )?;
        rep.report(tm, p, Stage::MsmA, t.elapsed());
        let t = Instant::now();
        b_g1 = b1_in
            + chunked(
                &srs.b_g1[bi..],
                &asg.aux,
                Some(&asg.b_aux_density),
                chunk,
                |pt, sc, d| ws.msm_g1(Points::Host(pt), Scalars::Host(sc), d),
            )?;
        rep.report(tm, p, Stage::MsmBG1, t.elapsed());
        let t = Instant::now();
        b_g2 = b2_in
            + chunked(
                &srs.b_g2[bi..],
                &asg.aux,
                Some(&asg.b_aux_density),
                chunk,
                |pt, sc, d| ws.msm_g2(Points::Host(pt), Scalars::Host(sc), d),
            )?;
        rep.report(tm, p, Stage::MsmBG2, t.elapsed());
    }
    ws.release()?;
    drop(section);
    Ok(MsmResults {
        h,
        l,
        a,
        b_g1,
        b_g2,
    })
}

impl Backend for GpuBackend {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn compute(
        &self,
        asg: &mut Assignment,
        srs: &Arc<Srs>,
        ctx: &mut PartitionCtx<'_>,
    ) -> Result<MsmResults> {
        let job = Arc::new(GpuJob {
            asg: Mutex::new(std::mem::take(asg)),
            srs: srs.clone(),
            reporter: ctx.reporter.clone(),
            partition: ctx.partition,
        });
        let mut outcomes = self.scheduler.submit(vec![job.clone()]).wait_outcomes();
        // The assignment comes back whatever happened (a CPU fallback needs it).
        *asg = std::mem::take(
            &mut *job
                .asg
                .lock()
                .map_err(|_| Error::internal("assignment lock poisoned"))?,
        );
        let outcome = outcomes
            .pop()
            .ok_or_else(|| Error::internal("scheduler returned no outcome"))?;
        if outcome.attempts > 1 {
            log::warn!(
                "partition {}: {} GPU attempts: {:?}",
                ctx.partition,
                outcome.attempts,
                outcome
                    .history
                    .iter()
                    .map(|h| (h.device, h.tier, h.error.clone()))
                    .collect::<Vec<_>>()
            );
        }
        match outcome.result {
            Ok(out) => {
                ctx.timings.entries.extend(out.timings.entries);
                ctx.device = Some(out.device);
                ctx.tier = Some(out.tier);
                Ok(out.msm)
            }
            Err(err) if self.allow_cpu => {
                log::warn!(
                    "partition {}: GPU failed ({err}); CPU fallback allowed: proving on the CPU",
                    ctx.partition
                );
                let r = CpuBackend.compute(asg, srs, ctx)?;
                ctx.tier = Some("cpu-fallback".into());
                Ok(r)
            }
            Err(err) => Err(err),
        }
    }
}
