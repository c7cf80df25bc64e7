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
//! Host buffers are page-locked through the process-wide [`PinnedRegistry`] (one registration
//! per range however many workers use it; pageable copies if pinning fails): the parameters'
//! bases once per parameter file, the first time a partition uses them, kept while the backend
//! lives; a, b, c and aux per partition. When the bases are not resident (every tier below
//! `Resident`) each MSM streams them in passes through two device buffers, the next pass
//! uploading on a copy stream while the current one computes ([`crate::gpu::upload`]); the
//! scalars (h, then aux) stay on the device.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use blstrs::{G1Affine, G1Projective, G2Affine, Scalar as Fr};
use group::Group;

use super::cpu::CpuBackend;
use super::{Backend, MsmResults, PartitionCtx};
use crate::config::EngineConfig;
use crate::error::{Error, Result};
use crate::gpu::alloc::{
    Arena, DeviceAllocator, MemInfo, PartitionShape, Plan, PlanOptions, Reservation, Tier, TierKind,
};
use crate::gpu::device::{self, Device, DeviceBuffer};
use crate::gpu::fault::stage_deadline;
use crate::gpu::hostmem;
use crate::gpu::msm::{MsmConfig, MsmWorkspace, Points, Scalars};
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

/// Allocates `len` elements in `arena` and copies `data` in (synchronously).
fn upload_in<T: device::DeviceRepr>(
    dev: &Arc<Device>,
    arena: &Arena,
    data: &[T],
) -> Result<DeviceBuffer<T>> {
    let mut b = dev.alloc_in(Some(arena), data.len())?;
    b.copy_from_host(data)?;
    Ok(b)
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
    /// Parameter sets pinned so far (one entry per `.params` path; kept while the backend lives).
    pinned: Mutex<Vec<PinnedParams>>,
    /// Longest one stage may wait for the device (`EngineConfig::stage_timeout`).
    stage_timeout: std::time::Duration,
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
            let alloc = DeviceAllocator::new(o, Arc::new(DriverMemInfo), config.vram_limit)
                .with_sm_count(dev.sm_count());
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
        let executor = Arc::new(GpuExecutor {
            slots,
            pinned: Mutex::new(Vec::new()),
            stage_timeout: config.stage_timeout(),
        });
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
    /// Pins `srs`'s bases the first time a partition uses them (other workers wait for it).
    fn pin_params(&self, srs: &Srs) -> Result<()> {
        let mut pinned = self
            .pinned
            .lock()
            .map_err(|_| Error::internal("pinned-parameters lock poisoned"))?;
        // Keyed by the vectors themselves: parameters reloaded from the same path replace the
        // old entry (whose pins go, and with them the last hold on the old vectors).
        if !pinned.iter().any(|p| p.pins(srs)) {
            pinned.retain(|p| p.path != srs.path);
            pinned.push(PinnedParams::new(srs));
        }
        Ok(())
    }

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
        self.pin_params(srs)?;
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
        let msm = run_on(
            slot,
            plan,
            &mut asg,
            srs,
            &mut ctx,
            attempt,
            Some(self.stage_timeout),
        )?;
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
    let arena = Arena::over(&res);
    let up_g1 = |v: &[G1Affine]| -> Result<DeviceBuffer<G1Affine>> {
        let _pin = reg.pin_slice(v);
        upload_in(&slot.dev, &arena, v)
    };
    let r = Arc::new(Resident {
        path: srs.path.clone(),
        h: up_g1(&srs.h)?,
        l: up_g1(&srs.l)?,
        a: up_g1(&srs.a)?,
        b_g1: up_g1(&srs.b_g1)?,
        b_g2: {
            let _pin = reg.pin_slice(&srs.b_g2[..]);
            upload_in(&slot.dev, &arena, &srs.b_g2)?
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
    let t = Instant::now();
    let _pin = pinned_registry().pin_slice(src);
    let pinned_s = t.elapsed().as_secs_f64();
    dst.slice_mut(..src.len())?.copy_from_host(src)?;
    log::debug!(
        "staged {:.2} GB: pin {pinned_s:.3} s, copy {:.3} s ({})",
        std::mem::size_of_val(src) as f64 / 1e9,
        t.elapsed().as_secs_f64() - pinned_s,
        if _pin.is_pinned() {
            "pinned"
        } else {
            "pageable"
        }
    );
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

/// Σ over the passes of an MSM whose bases stream from host memory (`points`) into the two
/// device buffers `bufs` (double-buffered: the next pass uploads while this one computes) and
/// whose scalars are on the device (`scalars`, all `n` of them). Returns the sum and the time
/// spent waiting for uploads.
fn streamed_msm<A: device::DeviceRepr, P: Group>(
    dev: &Arc<Device>,
    bufs: &mut [DeviceBuffer<A>; 2],
    points: &[A],
    scalars: device::DeviceSlice<'_, Fr>,
    density: Option<&crate::synth::Density>,
    chunk: usize,
    mut msm: impl FnMut(Points<'_, A>, Scalars<'_>, Option<&[u64]>) -> Result<P>,
) -> Result<(P, std::time::Duration)> {
    let passes = super::msm_passes(scalars.len(), density, chunk);
    let host: Vec<&[A]> = passes.iter().map(|p| &points[p.points.clone()]).collect();
    let (sums, stats) =
        crate::gpu::upload::for_each_pass(dev, pinned_registry(), bufs, &host, |k, pts| {
            let p = &passes[k];
            let words = match (&p.words, density) {
                (Some(w), Some(d)) => Some(&d.words()[w.clone()]),
                _ => None,
            };
            msm(
                Points::Device(pts),
                Scalars::Device(scalars.slice(p.s..p.e)?),
                words,
            )
        })?;
    Ok((
        sums.into_iter().fold(P::identity(), |a, b| a + b),
        stats.waited,
    ))
}

/// Pins the parameters' MSM bases once (one registration per vector, kept while the backend
/// lives) so streamed passes and the resident upload copy at the link's pinned rate. The guards
/// are declared before the vectors they pin, so they unregister before the memory can go.
struct PinnedParams {
    path: PathBuf,
    _guards: Vec<crate::gpu::pinned::PinGuard>,
    g1: [Arc<Vec<G1Affine>>; 4],
    g2: Arc<Vec<G2Affine>>,
}

impl PinnedParams {
    /// Whether these are `srs`'s vectors (same allocations).
    fn pins(&self, srs: &Srs) -> bool {
        self.g1
            .iter()
            .zip([&srs.h, &srs.l, &srs.a, &srs.b_g1])
            .all(|(a, b)| Arc::ptr_eq(a, b))
            && Arc::ptr_eq(&self.g2, &srs.b_g2)
    }

    fn new(srs: &Srs) -> PinnedParams {
        let t = Instant::now();
        let reg = pinned_registry();
        let g1 = [
            srs.h.clone(),
            srs.l.clone(),
            srs.a.clone(),
            srs.b_g1.clone(),
        ];
        let mut guards: Vec<_> = g1.iter().map(|v| reg.pin_slice(&v[..])).collect();
        guards.push(reg.pin_slice(&srs.b_g2[..]));
        let pinned = guards.iter().filter(|g| g.is_pinned()).count();
        log::info!(
            "parameters {}: {pinned}/5 base vectors pinned ({:.2} GB) in {:.2} s",
            srs.path.display(),
            srs.size_bytes() as f64 / 1e9,
            t.elapsed().as_secs_f64()
        );
        PinnedParams {
            path: srs.path.clone(),
            _guards: guards,
            g1,
            g2: srs.b_g2.clone(),
        }
    }
}

/// Runs one partition on one device under `plan`.
fn run_on(
    slot: &Slot,
    mut plan: Plan,
    asg: &mut Assignment,
    srs: &Srs,
    ctx: &mut PartitionCtx<'_>,
    attempt: &Attempt<'_>,
    timeout: Option<std::time::Duration>,
) -> Result<MsmResults> {
    let dev = &slot.dev;
    // Every device buffer of this partition comes out of the plan's reservation.
    let arena = Arena::over(&plan.work);
    let _deadline = stage_deadline("upload", timeout);
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
    let chunk = match plan.tier {
        Tier::Streaming { chunk_points, .. } => chunk_points as usize,
        _ => shape.pass_points() as usize,
    };
    let mut dh = dev.alloc_in::<Fr>(Some(&arena), n)?;
    let gpu_ntt = 3 * 32 * n as u64 <= plan.work.bytes();
    let mut dbc = None;
    let mut t = Instant::now();
    if gpu_ntt {
        let mut db = dev.alloc_in::<Fr>(Some(&arena), n)?;
        let mut dc = dev.alloc_in::<Fr>(Some(&arena), n)?;
        plan.work.note_allocated(3 * 32 * n as u64);
        stage(&stream, &mut dh, &asg.a)?;
        stage(&stream, &mut db, &asg.b)?;
        stage(&stream, &mut dc, &asg.c)?;
        dbc = Some((db, dc));
    } else {
        plan.work.note_allocated(32 * n as u64);
        let h = crate::ntt::compute_h(asg.a.clone(), asg.b.clone(), asg.c.clone())?;
        ctx.reporter.report(ctx.timings, p, Stage::Ntt, t.elapsed());
        t = Instant::now();
        stage(&stream, &mut dh, &h)?;
    }
    ctx.reporter
        .report(ctx.timings, p, Stage::Transfer, t.elapsed());
    // The GPU section: kernels only (the uploads above overlap other workers' kernels).
    let section = attempt.enter_gpu();
    ctx.reporter
        .report(ctx.timings, p, Stage::Wait, section.waited());
    if let Some((mut db, mut dc)) = dbc {
        let _deadline = stage_deadline("ntt", timeout);
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
    }
    // a, b, c stay on the host until the partition succeeds: a retry (lower tier, other
    // device, CPU fallback) needs them.

    // ---- MSMs. Resident: bases on the device, aux uploaded once. Otherwise bases and scalars
    // stream from host memory in passes of `chunk` points (the plan's MSM pass), so the MSM
    // buffers stay within the plan.
    let _deadline = stage_deadline("msm", timeout);
    let mut ws = MsmWorkspace::with_config(
        dev,
        MsmConfig {
            arena: Some(arena.clone()),
            ..Default::default()
        },
    )?;
    let ni = asg.input.len();
    let bi = asg.b_input_density.count();
    let job_partition = ctx.partition;
    let rep = ctx.reporter;
    let tm = &mut *ctx.timings;
    // The input parts (≤ a few hundred points) are summed on the CPU.
    let (a_in, b1_in, b2_in) = super::cpu::input_msms(asg, srs);
    // L, A and B_G1 are the same G1 MSM over aux: (offset of the aux part in the query, density,
    // stage) each, over the bases `aux_g1_bases` (host) or the resident copies.
    let aux_g1: [(usize, Option<&crate::synth::Density>, Stage); 3] = [
        (0, None, Stage::MsmL),
        (ni, Some(&asg.a_aux_density), Stage::MsmA),
        (bi, Some(&asg.b_aux_density), Stage::MsmBG1),
    ];
    let aux_g1_bases: [&[G1Affine]; 3] = [&srs.l, &srs.a, &srs.b_g1];
    let mut g1 = [G1Projective::identity(); 3];
    let (h, b_g2);
    if let Some(r) = &resident {
        let t = Instant::now();
        let daux = {
            let _pin = pinned_registry().pin_slice(&asg.aux);
            upload_in(dev, &arena, &asg.aux)?
        };
        rep.report(tm, p, Stage::Transfer, t.elapsed());
        let t = Instant::now();
        h = ws.msm_g1(
            Points::Device(r.h.slice(0..n - 1)?),
            Scalars::Device(dh.slice(0..n - 1)?),
            None,
        )?;
        rep.report(tm, p, Stage::MsmH, t.elapsed());
        drop(dh);
        let resident_g1 = [&r.l, &r.a, &r.b_g1];
        for (k, &(offset, density, stage)) in aux_g1.iter().enumerate() {
            let t = Instant::now();
            g1[k] = ws.msm_g1(
                Points::Device(resident_g1[k].slice(offset..)?),
                Scalars::Device(daux.as_slice()),
                density.map(|d| d.words()),
            )?;
            rep.report(tm, p, stage, t.elapsed());
        }
        let t = Instant::now();
        b_g2 = ws.msm_g2(
            Points::Device(r.b_g2.slice(bi..)?),
            Scalars::Device(daux.as_slice()),
            Some(asg.b_aux_density.words()),
        )?;
        rep.report(tm, p, Stage::MsmBG2, t.elapsed());
    } else {
        // Bases stream through two device buffers per group (sized for one pass each: the
        // plan's msm_point_bytes(Streamed) budget); the scalars are on the device: h already,
        // aux uploaded once into the room h leaves (aux.len() ≤ n).
        let mut waited = std::time::Duration::ZERO;
        let mut g1_bufs = [
            dev.alloc_in::<G1Affine>(Some(&arena), chunk)?,
            dev.alloc_in::<G1Affine>(Some(&arena), chunk)?,
        ];
        let t = Instant::now();
        let (sum, w) = streamed_msm(
            dev,
            &mut g1_bufs,
            &srs.h,
            dh.slice(0..n - 1)?,
            None,
            chunk,
            |pt, sc, d| ws.msm_g1(pt, sc, d),
        )?;
        h = sum;
        waited += w;
        rep.report(tm, p, Stage::MsmH, t.elapsed());
        drop(dh);
        // aux takes the room h leaves: the plan has no other bytes for it.
        if asg.aux.len() > n {
            return Err(Error::internal(format!(
                "{} aux variables exceed the {n}-point domain the plan budgeted them in",
                asg.aux.len()
            )));
        }
        let t = Instant::now();
        let daux = {
            let _pin = pinned_registry().pin_slice(&asg.aux);
            upload_in(dev, &arena, &asg.aux)?
        };
        rep.report(tm, p, Stage::Transfer, t.elapsed());
        for (k, &(offset, density, stage)) in aux_g1.iter().enumerate() {
            let t = Instant::now();
            let (sum, w) = streamed_msm(
                dev,
                &mut g1_bufs,
                &aux_g1_bases[k][offset..],
                daux.as_slice(),
                density,
                chunk,
                |pt, sc, d| ws.msm_g1(pt, sc, d),
            )?;
            g1[k] = sum;
            waited += w;
            rep.report(tm, p, stage, t.elapsed());
        }
        drop(g1_bufs);
        let mut g2_bufs = [
            dev.alloc_in::<G2Affine>(Some(&arena), chunk)?,
            dev.alloc_in::<G2Affine>(Some(&arena), chunk)?,
        ];
        let t = Instant::now();
        let (sum, w) = streamed_msm(
            dev,
            &mut g2_bufs,
            &srs.b_g2[bi..],
            daux.as_slice(),
            Some(&asg.b_aux_density),
            chunk,
            |pt, sc, d| ws.msm_g2(pt, sc, d),
        )?;
        b_g2 = sum;
        waited += w;
        rep.report(tm, p, Stage::MsmBG2, t.elapsed());
        log::debug!(
            "partition {}: {:.3} s waiting for streamed bases",
            job_partition,
            waited.as_secs_f64()
        );
    }
    ws.release()?;
    drop(section);
    log::info!(
        "partition {}: device {} tier {}: device-memory high-water {} of {} planned",
        job_partition,
        dev.ordinal(),
        plan.tier,
        crate::gpu::alloc::fmt_gib(arena.high_water()),
        crate::gpu::alloc::fmt_gib(arena.capacity()),
    );
    Ok(MsmResults {
        h,
        l: g1[0],
        a: a_in + g1[1],
        b_g1: b1_in + g1[2],
        b_g2: b2_in + b_g2,
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
