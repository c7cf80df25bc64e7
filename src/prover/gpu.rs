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
//! lives; the compiled path's aux once per buffer of the engine's host pool
//! ([`crate::gpu::memory::hostpool`], one idle buffer per worker: [`ProverBackend::host_pool_config`]), so its
//! uploads find it registered (a shared hit, no driver call); a, b, c (when computed on the
//! host) and the reference path's aux per partition. The inputs (≤ a few hundred values) are
//! copied pageable: a registration would cost more than the copy.
//!
//! When the bases are not resident (every tier below `Resident`) each MSM streams them in
//! passes through two device buffers, the next pass uploading on a copy stream while the
//! current one computes ([`crate::gpu::driver::upload`]); the scalars (h, then aux) stay on the device.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use blstrs::{G1Affine, G1Projective, G2Affine, Scalar as Fr};
use group::Group;

use super::cpu::CpuBackend;
use super::{LentAssignment, MsmResults, Part, PartitionCtx, ProverBackend, Queries};
use crate::circuit::{CompiledCircuit, Witness};
use crate::config::EngineConfig;
use crate::error::{DeviceFault, Error, Result};
use crate::gpu::memory::alloc::{
    Arena, DeviceAllocator, MemInfo, PartitionShape, Plan, PlanOptions, Reservation, TierKind,
};
use crate::gpu::driver::device::{self, Device, DeviceBuffer};
use crate::gpu::driver::fault::stage_deadline;
use crate::gpu::driver::hostmem;
use crate::gpu::memory::alloc::fmt_gib;
use crate::gpu::memory::layout::{
    gather_sink_bytes, h_step_bytes, r1cs_block_bytes, spmv_work_bytes, G2_LAYOUT,
};
use crate::gpu::kernels::msm::{
    GatherSink, MsmConfig, MsmGroup, MsmWorkspace, Points, Scalars, G1, G2,
};
use crate::gpu::kernels::ntt;
use crate::gpu::kernels::zpack::PackedAux;
use crate::gpu::memory::pinned::{HostPinner, PinnedRegistry};
use crate::gpu::kernels::spmv::{
    r1cs_check, CircuitOnDevice, DeviceCircuit, Matrix, StreamedCircuit,
};
use crate::progress::Stage;
use crate::progress::{Reporter, Timings};
use crate::scheduler::{Attempt, PartitionExecutor, Scheduler, SchedulerConfig};
use crate::srs::Srs;
use crate::synth::Assignment;

/// Test hook: 1 forces the GPU SpMV to stream the matrices (the resident circuit is not used),
/// 2 forces the H step onto two domain buffers, 3 both; 0 (default) lets the plan decide.
/// Process-wide, for the GPU == CPU tests of every SpMV path on small fixtures.
#[cfg(feature = "test-hooks")]
static FORCE_SPMV_PATH: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Forces the paths a compiled partition's H side takes on the device (test hook, process-wide;
/// see the tests of `tests/gpu_prove.rs`): `streamed` — the matrices stream from host memory
/// even where they fit resident; `two_buffers` — the H step runs on two domain buffers even
/// where three fit. Both `false`: the plan decides (the default).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn force_spmv_path(streamed: bool, two_buffers: bool) {
    FORCE_SPMV_PATH.store(
        u8::from(streamed) | (u8::from(two_buffers) << 1),
        Ordering::SeqCst,
    );
}

/// The forced paths: (streamed, two buffers).
fn forced_spmv_path() -> (bool, bool) {
    #[cfg(feature = "test-hooks")]
    {
        let f = FORCE_SPMV_PATH.load(Ordering::SeqCst);
        (f & 1 == 1, f & 2 == 2)
    }
    #[cfg(not(feature = "test-hooks"))]
    (false, false)
}

/// Test hook: the MSM pass (points) of batches sharing streamed bases; 0 (default) lets the
/// plan decide. Process-wide, so that small fixtures run several passes per batch.
#[cfg(feature = "test-hooks")]
static FORCE_SHARED_PASS: AtomicU64 = AtomicU64::new(0);

/// Forces the MSM pass of batches sharing streamed bases to `points` (test hook, process-wide;
/// see `tests/gpu_prove.rs`); 0: the plan decides (the default).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn force_shared_pass(points: u64) {
    FORCE_SHARED_PASS.store(points, Ordering::SeqCst);
}

/// The forced pass of batches sharing streamed bases, if any.
fn forced_shared_pass() -> Option<u64> {
    #[cfg(feature = "test-hooks")]
    {
        Some(FORCE_SHARED_PASS.load(Ordering::SeqCst)).filter(|&p| p > 0)
    }
    #[cfg(not(feature = "test-hooks"))]
    None
}

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

/// z's aux on the device, in `arena`: with `packed` (of the same length), its packed form
/// uploaded through `scratch` — or through a scratch buffer of its own taken from `arena` and
/// freed before this returns, the stream synchronised — and expanded on `stream`
/// ([`PackedAux::expand`]); else (no packed form, or no room for the scratch) the dense
/// values through aux's pinned registration (normally the engine's pooled buffer, registered
/// once: a shared hit). Copies are synchronous; with a lent `scratch` the expansion may still
/// be queued on `stream` when this returns.
///
/// # Errors
/// Allocation, copy and launch errors.
fn upload_aux(
    dev: &Arc<Device>,
    arena: &Arena,
    stream: &device::Stream,
    aux: &[Fr],
    packed: Option<&PackedAux>,
    scratch: Option<device::DeviceSliceMut<'_, u32>>,
) -> Result<DeviceBuffer<Fr>> {
    let mut daux = dev.alloc_in::<Fr>(Some(arena), aux.len())?;
    if let Some(p) = packed.filter(|p| p.len() == aux.len()) {
        match scratch {
            Some(words) if words.len() >= p.scratch_words() => {
                p.expand(stream, words, &mut daux.as_mut_slice())?;
                log_packed(p);
                return Ok(daux);
            }
            Some(_) => {}
            None => {
                // Only where the plan has room left for it (asked first: a refused allocation
                // is logged as a plan error); freed here, before the caller allocates its MSM
                // buffers.
                let bytes = crate::gpu::memory::layout::align_up(4 * p.scratch_words() as u64);
                if arena.capacity() - arena.used() >= bytes {
                    let mut own = dev.alloc_in::<u32>(Some(arena), p.scratch_words())?;
                    p.expand(stream, own.as_mut_slice(), &mut daux.as_mut_slice())?;
                    stream.synchronize()?;
                    log_packed(p);
                    return Ok(daux);
                }
            }
        }
    }
    let pin = pinned_registry().pin_slice(aux);
    log::debug!(
        "aux upload: {} values dense, {}",
        aux.len(),
        match pin.state() {
            crate::gpu::memory::pinned::PinState::Pinned { shared: true } => "pinned (pooled)",
            crate::gpu::memory::pinned::PinState::Pinned { shared: false } => "pinned now",
            crate::gpu::memory::pinned::PinState::Pageable(_) => "pageable",
        }
    );
    daux.copy_from_host(aux)?;
    Ok(daux)
}

fn log_packed(p: &PackedAux) {
    log::debug!(
        "aux upload: {} values packed, {:.1} MB ({} neither 0 nor 1)",
        p.len(),
        p.bytes() as f64 / 1e6,
        p.big()
    );
}

/// A compiled circuit's matrices kept on a device for the GPU SpMV (its own reservation, like
/// the resident parameters), with the circuit they are the copy of.
struct ResidentCircuit {
    cc: Arc<CompiledCircuit>,
    dc: DeviceCircuit,
    _reservation: Reservation,
}

struct Slot {
    dev: Arc<Device>,
    alloc: DeviceAllocator,
    resident: Mutex<Option<Arc<Resident>>>,
    /// The compiled circuit resident on this device, if any (one at a time).
    circuit: Mutex<Option<Arc<ResidentCircuit>>>,
    /// The domains (bit `log2`) of the partitions for which a plan had to let the resident
    /// circuit go (`plan_on`): for those the circuit is no longer reserved ahead of the plan on
    /// this device (a 64 GiB partition on an 80 GB card does not stop a 32 GiB one's).
    circuit_yielded: AtomicU64,
}

impl Slot {
    /// Bytes reserved for what stays on the device between partitions (parameters, circuit).
    fn kept_bytes(&self) -> Result<u64> {
        let params = self
            .resident
            .lock()
            .map_err(|_| Error::internal("resident lock poisoned"))?
            .as_ref()
            .map_or(0, |r| r._reservation.bytes());
        let circuit = self
            .circuit
            .lock()
            .map_err(|_| Error::internal("circuit lock poisoned"))?
            .as_ref()
            .map_or(0, |r| r._reservation.bytes());
        Ok(params + circuit)
    }

    /// Lets the resident circuit go (its memory returns when the last partition using it is
    /// done). Returns whether one was resident.
    fn drop_circuit(&self) -> Result<bool> {
        let old = self
            .circuit
            .lock()
            .map_err(|_| Error::internal("circuit lock poisoned"))?
            .take();
        Ok(old.is_some())
    }
}

/// One synthesized partition handed to the scheduler. The assignment comes back to the caller
/// afterwards (for a CPU fallback). On the compiled path (`compiled` set) the assignment holds
/// only the witness (input, aux) and the densities until a, b, c are computed — on the device,
/// or on the CPU by the worker when the circuit's matrices or z do not fit.
struct GpuJob {
    asg: Mutex<Assignment>,
    compiled: Option<Arc<CompiledCircuit>>,
    /// Whether a, b, c may be computed on the device (`Tuning::cpu_spmv_only` off).
    gpu_spmv: bool,
    /// aux packed for its upload (made before the job waits for a device, once per
    /// partition: `PartitionCtx::packed_aux`), when packing is on
    /// (`Tuning::dense_z_upload` off) and pays ([`PackedAux::pack`]).
    packed: Option<Arc<PackedAux>>,
    srs: Arc<Srs>,
    /// The MSMs to compute (`PartitionCtx::part`). Split ([`Part::HOnly`], [`Part::Rest`]),
    /// `srs` may hold only the sections a cold load has decoded so far; such an incomplete set
    /// is never made resident.
    part: Part,
    reporter: Reporter,
    partition: usize,
    /// Host memory to take if a, b, c are computed on the host (see `PartitionCtx`).
    host_top_up: Option<crate::budget::HostTopUp>,
    /// What was taken of it; held until the job is dropped (after the partition).
    host_extra: Mutex<Option<crate::budget::Extra>>,
    /// Set when an attempt failed with a stage timeout: a copy from the job's host vectors may
    /// still be running on the retired device (reported as `PartitionCtx::host_buffers_busy`).
    host_busy: AtomicBool,
}

impl GpuJob {
    /// Takes the job's host top-up (once) before a, b, c are computed in host memory.
    fn take_host_top_up(&self) -> Result<()> {
        let Some(t) = &self.host_top_up else {
            return Ok(());
        };
        let mut held = self
            .host_extra
            .lock()
            .map_err(|_| Error::internal("host top-up lock poisoned"))?;
        if held.is_none() {
            *held = Some(t.take(self.partition)?);
        }
        Ok(())
    }
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
    /// Parameter vectors pinned so far (one entry per query of each `.params` path; kept while
    /// the backend lives).
    pinned: Mutex<Vec<PinnedQuery>>,
    /// The compiled circuit whose host matrices are pinned for the streamed SpMV (one at a time,
    /// kept while the backend lives or until another circuit streams).
    pinned_circuit: Mutex<Option<PinnedCircuit>>,
    /// Longest one stage may wait for the device (`EngineConfig::stage_timeout`).
    stage_timeout: std::time::Duration,
    /// The most partitions whose L, A, B MSMs share streamed bases (`Tuning::msm_batch`).
    msm_batch: usize,
    /// Those partitions gather their Pippenger parts across passes (`Tuning::pippenger_per_pass` off).
    gather: bool,
}

/// The GPU backend: one slot per device, and the partition scheduler over them.
pub struct GpuBackend {
    scheduler: Scheduler<GpuExecutor>,
    allow_cpu: bool,
    gpu_spmv: bool,
    /// aux uploaded packed (`Tuning::dense_z_upload` off).
    pack_z: bool,
    /// Bytes each device may use: its memory, or the configured cap when lower.
    capacities: Vec<u64>,
    /// Workers per device.
    workers_per_device: u64,
    /// `Tuning::msm_batch`.
    msm_batch: usize,
    /// Partitions start below the resident tier (`Tuning::gpu_start_tier`).
    below_resident: bool,
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
        let mut capacities = Vec::new();
        for &o in &ordinals {
            if o >= count {
                return Err(Error::NoDevice(format!(
                    "device {o} requested, {count} visible"
                )));
            }
            let dev = Device::get(o)?;
            let alloc = DeviceAllocator::new(o, Arc::new(DriverMemInfo), config.vram_limit)
                .with_sm_count(dev.sm_count())
                .with_accumulation(
                    config.tuning.msm_accumulation.into(),
                    config.tuning.msm_affine_min_list,
                );
            let (free, total) = dev.mem_get_info()?;
            capacities.push(config.vram_limit.map_or(total, |l| l.min(total)));
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
                circuit: Mutex::new(None),
                circuit_yielded: AtomicU64::new(0),
            });
        }
        let executor = Arc::new(GpuExecutor {
            slots,
            pinned: Mutex::new(Vec::new()),
            pinned_circuit: Mutex::new(None),
            stage_timeout: config.stage_timeout(),
            msm_batch: config.tuning.msm_batch(),
            gather: !config.tuning.pippenger_per_pass,
        });
        let probe = executor.clone();
        let sched_config = SchedulerConfig {
            devices: ordinals.clone(),
            workers_per_device: config.workers_per_device(),
            gpu_section_permits: config.sections_per_device(),
            free_memory: Some(Arc::new(move |d| {
                probe.slot(d).ok().and_then(|s| s.alloc.available().ok())
            })),
            start_tier: config.tuning.gpu_start_tier.map_or(TierKind::Resident, Into::into),
        };
        let scheduler = Scheduler::new(executor, sched_config)?;
        Ok(GpuBackend {
            scheduler,
            allow_cpu: config.allow_cpu_fallback,
            gpu_spmv: !config.tuning.cpu_spmv_only,
            pack_z: !config.tuning.dense_z_upload,
            capacities,
            workers_per_device: config.workers_per_device() as u64,
            msm_batch: config.tuning.msm_batch(),
            below_resident: config
                .tuning
                .gpu_start_tier
                .is_some_and(|t| TierKind::from(t) > TierKind::Resident),
        })
    }
}

impl GpuExecutor {
    /// Pins `srs`'s bases the first time they are used, query by query: a cold load's
    /// sections as they are decoded (`ProverBackend::prepare_params`), or the first partition's.
    /// Empty queries (not decoded yet) are skipped. The registrations run outside the lock
    /// (12.9 GB of H take ~0.7 s), so a partition whose queries are pinned does not wait for
    /// another query's; two threads pinning the same vector share one registration (the
    /// registry's), and only one keeps its entry.
    fn pin_params(&self, srs: &Srs) {
        let lock = || self.pinned.lock().unwrap_or_else(PoisonError::into_inner);
        let missing: Vec<(usize, HeldQuery)> = {
            let pinned = lock();
            HeldQuery::of(srs)
                .into_iter()
                .enumerate()
                .filter(|(q, v)| {
                    v.bytes > 0
                        && !pinned
                            .iter()
                            .any(|p| p.path == srs.path && p.query == *q && p.held.ptr == v.ptr)
                })
                .collect()
        };
        if missing.is_empty() {
            return;
        }
        let t = Instant::now();
        let reg = pinned_registry();
        let fresh: Vec<PinnedQuery> = missing
            .into_iter()
            .map(|(query, held)| PinnedQuery {
                path: srs.path.clone(),
                query,
                _guard: reg.pin(held.ptr, held.bytes),
                held,
            })
            .collect();
        log::info!(
            "parameters {}: {}/{} queries pinned ({:.2} GB) in {:.2} s",
            srs.path.display(),
            fresh.iter().filter(|p| p._guard.is_pinned()).count(),
            fresh.len(),
            fresh.iter().map(|p| p.held.bytes).sum::<usize>() as f64 / 1e9,
            t.elapsed().as_secs_f64()
        );
        let mut pinned = lock();
        for f in fresh {
            // Parameters reloaded from the same path replace the old query's entry (whose pin
            // goes, and with it the last hold on the old vector).
            pinned.retain(|p| !(p.path == f.path && p.query == f.query));
            pinned.push(f);
        }
    }

    /// Pins `cc`'s host matrices (A, B, C: row offsets, columns, coefficient indices; 6.8 GB
    /// at 32 GiB) once, so that a streamed SpMV's block copies run at the link's pinned rate
    /// and overlap the kernels; a circuit pinned before is let go. Ranges that cannot be
    /// pinned are copied pageable (synchronously).
    fn pin_circuit(&self, cc: &Arc<CompiledCircuit>) {
        let mut cur = self
            .pinned_circuit
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if cur.as_ref().is_some_and(|p| Arc::ptr_eq(&p.cc, cc)) {
            return;
        }
        *cur = None;
        let t = Instant::now();
        let reg = pinned_registry();
        let guards: Vec<_> = [&cc.a, &cc.b, &cc.c]
            .into_iter()
            .flat_map(|m| [&m.row_ptr, &m.col, &m.coeff])
            .filter(|v| !v.is_empty())
            .map(|v| reg.pin_slice(v))
            .collect();
        log::info!(
            "compiled circuit: {}/{} matrix arrays pinned for the streamed SpMV in {:.2} s",
            guards.iter().filter(|g| g.is_pinned()).count(),
            guards.len(),
            t.elapsed().as_secs_f64()
        );
        *cur = Some(PinnedCircuit {
            _guards: guards,
            cc: cc.clone(),
        });
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
        self.pin_params(srs);
        // The circuit's rows: the compiled path before a, b, c exist (or without them at all,
        // `Part::Rest`), else the assignment's.
        let rows = job
            .compiled
            .as_ref()
            .filter(|_| asg.a.is_empty())
            .map_or(asg.num_constraints(), |cc| cc.layout.num_constraints());
        // a, b, c still to compute (compiled path, first attempt or after a failed GPU SpMV;
        // not for the MSMs after H, which need only z).
        let pending = job
            .compiled
            .as_ref()
            .filter(|_| asg.a.is_empty() && job.part.h_side());
        // The plan holds what this part runs: a split partition's H side plans no aux (nor
        // L, A, B workspaces) beside its H MSM, so that MSM gets larger passes.
        let shape = shape_of(&asg, rows)?.with_queries(job.part.queries());
        // An incomplete parameter set (a split partition during a cold load: the sections
        // decoded so far) is never made resident.
        let partial = !srs.is_complete();
        let params_resident = !partial
            && slot
                .resident
                .lock()
                .map(|r| r.as_ref().is_some_and(|r| r.path == srs.path))
                .unwrap_or(false);
        let mut opts = attempt.plan_options(params_resident);
        if partial {
            opts.start = opts.start.max(TierKind::FullStaging);
        }
        // The circuit's matrices before the plan: a plan made first could take their room for
        // resident parameters (47.4 GB at 32 GiB), which on an 80 GB card leaves them out for
        // good, and every later partition then runs its SpMV on the CPU (3.5 s of 16 cores and
        // 17 GB of host memory per 32 GiB partition, measured on an H100, BENCHMARKS.md *L2*)
        // to save only the streaming of the bases. Reserved first, the plan fits beside them
        // (a lower tier where both do not fit); `plan_on` still lets them go when no useful
        // plan fits beside. For every compiled job, the L, A, B parts of a split partition
        // included (they need no SpMV, but a resident plan of theirs would crowd the circuit
        // out for the partitions after them). Not where a plan for this domain had to let the
        // circuit go before (a small card, a cap): there it would be uploaded and let go again
        // for every partition.
        let yielded =
            (slot.circuit_yielded.load(Ordering::Relaxed) >> shape.domain_log2.min(63)) & 1 == 1;
        if let Some(cc) = job
            .compiled
            .as_ref()
            .filter(|_| job.gpu_spmv && !params_resident && !yielded)
        {
            // Not held here: the slot keeps it, and `plan_on` may let it go.
            drop(circuit_on(slot, cc)?);
        }
        let plan = plan_on(slot, &shape, &opts)?;
        attempt.record_tier(plan.tier.kind());
        let tier = plan.tier;
        let mut timings = Timings::default();
        // The compiled path: a, b, c by the GPU SpMV when the plan's working memory holds z and
        // the H step's buffers — three, or two (b's shared with c) on a plan too small for
        // three — with the circuit's matrices resident (or made so) or, where they do not fit,
        // streamed from host memory in row blocks; else on the CPU here, before any device work.
        let mut spmv = None;
        let mut resident_circuit = None;
        let mut path = "";
        if let Some(cc) = pending {
            let work = plan.work.bytes();
            let z = spmv_work_bytes(asg.input.len() as u64, asg.aux.len() as u64);
            let three = h_step_bytes(shape.domain_log2, 3) + z;
            let two = h_step_bytes(shape.domain_log2, 2)
                + z
                + r1cs_block_bytes(cc.layout.num_constraints() as u64);
            let (force_streamed, force_two) = forced_spmv_path();
            let layout_for = |extra: u64| {
                if three + extra <= work && !force_two {
                    Some(HLayout::Three)
                } else if two + extra <= work {
                    Some(HLayout::Two)
                } else {
                    None
                }
            };
            let why = if !job.gpu_spmv {
                "CUZK_GPU_SPMV=0".to_string()
            } else if layout_for(0).is_none() {
                format!(
                    "z and the H step need {} of the plan's {}",
                    fmt_gib(two),
                    fmt_gib(work)
                )
            } else if let Some(rc) = (!force_streamed)
                .then(|| circuit_on(slot, cc))
                .transpose()?
                .flatten()
            {
                resident_circuit = Some(rc);
                String::new()
            } else if let Some(layout) = layout_for(StreamedCircuit::bytes_for(cc)) {
                self.pin_circuit(cc);
                spmv = Some(DeviceSpmv {
                    matrices: Matrices::Streamed(cc),
                    layout,
                });
                String::new()
            } else {
                format!(
                    "its matrices ({}) do not fit beside the plan, and z, the H step and the \
                     streamed blocks need {} of the plan's {}",
                    fmt_gib(DeviceCircuit::bytes_for(cc)),
                    fmt_gib(two + StreamedCircuit::bytes_for(cc)),
                    fmt_gib(work)
                )
            };
            if let Some(rc) = &resident_circuit {
                spmv = layout_for(0).map(|layout| DeviceSpmv {
                    matrices: Matrices::Resident(&rc.dc),
                    layout,
                });
            }
            path = match spmv {
                Some(DeviceSpmv {
                    matrices: Matrices::Resident(_),
                    layout: HLayout::Three,
                }) => "+spmv",
                Some(DeviceSpmv {
                    matrices: Matrices::Resident(_),
                    layout: HLayout::Two,
                }) => "+spmv+h2",
                Some(DeviceSpmv {
                    matrices: Matrices::Streamed(_),
                    layout: HLayout::Three,
                }) => "+spmv-streamed",
                Some(DeviceSpmv {
                    matrices: Matrices::Streamed(_),
                    layout: HLayout::Two,
                }) => "+spmv-streamed+h2",
                None => "+cpu-spmv",
            };
            if spmv.is_none() {
                log::info!("partition {}: SpMV on the CPU: {why}", job.partition);
                job.take_host_top_up()?;
                // In place: z (possibly a pooled, page-locked buffer) stays in the job's
                // assignment whatever happens.
                job.reporter
                    .time(&mut timings, Some(job.partition), Stage::Spmv, || {
                        cc.evaluate_in_place(&mut asg)
                    })?;
                super::check_satisfied(&asg, job.partition)?;
            }
        }
        let tier_name = format!("{}{path}", tier.name());
        log::info!(
            "partition {}: GPU {} worker {}, tier {tier}{path}{} (attempt {})",
            job.partition,
            attempt.device,
            attempt.worker,
            match job.part {
                Part::All => "",
                Part::HOnly => ", H side ahead of the parameters",
                Part::Rest(_) => ", MSMs after H",
            },
            attempt.number
        );
        let mut ctx = PartitionCtx {
            partition: job.partition,
            part: job.part,
            priority: attempt.priority,
            reporter: &job.reporter,
            timings: &mut timings,
            device: Some(attempt.device),
            tier: Some(tier_name.clone()),
            host_top_up: None,
            host_buffers_busy: false,
            packed_aux: None,
        };
        let msm = run_on(
            slot,
            plan,
            &shape,
            &mut asg,
            spmv,
            job.packed.as_deref(),
            srs,
            job.part,
            &mut ctx,
            attempt,
            Some(self.stage_timeout),
        )
        .inspect_err(|e| {
            // A wait that timed out left the device's work (a copy from asg's vectors among
            // it, possibly) running: they must not be reused or freed.
            if matches!(
                e,
                Error::Cuda {
                    fault: Some(DeviceFault::Timeout),
                    ..
                }
            ) {
                job.host_busy.store(true, Ordering::SeqCst);
            }
        })?;
        Ok(GpuOutput {
            msm,
            timings,
            device: attempt.device,
            tier: tier_name,
        })
    }

    /// Partitions' L, A, B MSMs ([`Part::Rest`] of a compiled partition, the whole parameter
    /// set loaded) share a batch when the set is not resident on `device`: their key is the
    /// parameter set, the circuit and the queries.
    fn batch_key(&self, device: usize, job: &Arc<GpuJob>) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let Part::Rest(queries) = job.part else {
            return None;
        };
        let cc = job.compiled.as_ref()?;
        if self.msm_batch < 2 || !job.srs.is_complete() {
            return None;
        }
        let slot = self.slot(device).ok()?;
        // Called under the scheduler's lock: a parameter set being made resident (its lock
        // held for the upload) means no batch, not a wait.
        let resident = slot
            .resident
            .try_lock()
            .ok()?
            .as_ref()
            .is_some_and(|r| r.path == job.srs.path);
        if resident {
            return None;
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (Arc::as_ptr(&job.srs) as usize, Arc::as_ptr(cc) as usize, queries).hash(&mut h);
        Some(h.finish())
    }

    fn max_batch(&self) -> usize {
        self.msm_batch
    }

    /// [`BATCH_LINGER`]: the engine submits a partition's L, A, B part right after its H side
    /// ends, a moment after the worker that ran it asks for work.
    fn batch_linger(&self) -> std::time::Duration {
        BATCH_LINGER
    }

    /// The batch's L, A, B MSMs together ([`Self::shared_bases`]); when the device cannot hold
    /// two partitions' aux even with the others' memory back, the first job runs alone and the
    /// others go back to the queue, as do those a smaller batch left out. An error is the
    /// first job's (retried alone); the others go back to the queue.
    fn run_batch(
        &self,
        attempt: &Attempt<'_>,
        jobs: &[&Arc<GpuJob>],
    ) -> Vec<Option<Result<GpuOutput>>> {
        let mut out: Vec<Option<Result<GpuOutput>>> = jobs.iter().map(|_| None).collect();
        match self.shared_bases(attempt, jobs) {
            Ok(Some(done)) => {
                for (o, r) in out.iter_mut().zip(done) {
                    *o = Some(Ok(r));
                }
            }
            Ok(None) => out[0] = Some(self.run(attempt, jobs[0])),
            Err(e) => out[0] = Some(Err(e)),
        }
        out
    }
}

/// Smallest MSM pass a batch of [`GpuExecutor::shared_bases`] uses: below it the passes' bucket
/// reductions cost more than the shared uploads save.
const SHARED_PASS_MIN_POINTS: u64 = 1 << 23;

/// How long a partition's L, A, B part with no partner waits for one before it streams the
/// bases alone ([`PartitionExecutor::batch_linger`]). A device that can hold one partition's
/// work at a time runs two H sides back to back, and the second one's L, A, B part is
/// submitted a moment after its worker asks for work (the engine's thread turns the H side's
/// result into the part): milliseconds. A batch of two saves one upload of the L, A and B
/// bases (34.5 GB at 32 GiB, about 1 s of the link), so the wait's cost when no partner comes
/// (the last partition of the last proof) is small beside it.
const BATCH_LINGER: std::time::Duration = std::time::Duration::from_millis(50);

impl GpuExecutor {
    /// The L, A, B MSMs ([`Part::Rest`]) of the leading `k` of `jobs` (same parameter set,
    /// circuit and queries: [`PartitionExecutor::batch_key`]) on one device, every streamed
    /// pass of bases uploaded once and used by each partition's scalars in turn
    /// ([`streamed_msm`]): the bases cross the bus once per batch instead of once per
    /// partition (34.6 GiB of L, A, B_G1 and B_G2 at 32 GiB).
    ///
    /// `k` and the pass are the most partitions, then the largest pass (from the default down
    /// to [`SHARED_PASS_MIN_POINTS`]), whose aux and MSM part
    /// ([`PartitionShape::shared_bases_bytes`]) fit the device now, waiting for other workers'
    /// memory as [`plan_on`] does. Each partition's aux is uploaded (pinned), then the MSMs run
    /// in the GPU section; the inputs' parts are summed on the CPU. Each job's report gets its
    /// transfer, its wait for the section and a `k`-th of each shared MSM.
    ///
    /// Returns the first `k` jobs' outputs, or `None` when not two fit even with nothing but
    /// what stays on the device reserved (the first job then runs alone).
    ///
    /// # Errors
    /// Driver errors; [`Error::Internal`] for jobs that do not share a shape.
    fn shared_bases(
        &self,
        attempt: &Attempt<'_>,
        jobs: &[&Arc<GpuJob>],
    ) -> Result<Option<Vec<GpuOutput>>> {
        let slot = self.slot(attempt.device)?;
        let first = jobs[0];
        let (srs, part) = (&first.srs, first.part);
        let Some(cc) = first.compiled.as_ref() else {
            return Ok(None);
        };
        self.pin_params(srs);
        let mut asgs = Vec::with_capacity(jobs.len());
        for j in jobs {
            asgs.push(
                j.asg
                    .lock()
                    .map_err(|_| Error::internal("assignment lock poisoned"))?,
            );
        }
        let a0: &Assignment = &asgs[0];
        let same = |a: &Assignment| {
            a.input.len() == a0.input.len()
                && a.aux.len() == a0.aux.len()
                && a.a_aux_density == a0.a_aux_density
                && a.b_input_density == a0.b_input_density
                && a.b_aux_density == a0.b_aux_density
        };
        if let Some(j) = asgs.iter().position(|a| !same(a)) {
            return Err(Error::internal(format!(
                "partition {} does not share partition {}'s shape",
                jobs[j].partition, first.partition
            )));
        }
        let shape = shape_of(a0, cc.layout.num_constraints())?.with_queries(part.queries());
        // Each partition's aux values that are neither 0 nor 1 (when gathering): no query has
        // more Pippenger scalars, so a gather sink of this many entries holds a query's part.
        let big: Vec<usize> = if self.gather {
            jobs.iter()
                .zip(&asgs)
                .map(|(j, a)| match j.packed.as_deref().filter(|p| p.len() == a.aux.len()) {
                    Some(p) => p.big(),
                    None => count_big(&a.aux),
                })
                .collect()
        } else {
            Vec::new()
        };
        // ---- The plan: the most partitions, then passes with the Pippenger parts gathered
        // (largest pass first), then passes without, that fit now.
        let lim = slot.alloc.msm_limits();
        let mut cands = Vec::new();
        for k in (2..=jobs.len()).rev() {
            let mut passes = Vec::new();
            let mut pass = shape.pass_points();
            if let Some(p) = forced_shared_pass() {
                passes.push(p);
            } else {
                loop {
                    passes.push(pass);
                    if pass / 2 < SHARED_PASS_MIN_POINTS.max(shape.min_chunk_points()) {
                        break;
                    }
                    pass /= 2;
                }
            }
            // A partition without such values needs no sink; one with more than half a pass
            // would fill its sink in a few passes: no gathering for the batch then.
            let sinks = |pass: u64| -> Option<u64> {
                let big = big.get(..k)?;
                let fits = big.iter().all(|&b| b as u64 <= pass / 2);
                (fits && big.iter().any(|&b| b > 0)).then(|| {
                    big.iter()
                        .filter(|&&b| b > 0)
                        .map(|&b| gather_sink_bytes(b as u64, &G2_LAYOUT))
                        .sum()
                })
            };
            for &p in &passes {
                if let Some(extra) = sinks(p) {
                    let b = shape.shared_bases_bytes(k as u64, p, &lim);
                    cands.push((k, p, true, b.saturating_add(extra)));
                }
            }
            for &p in &passes {
                cands.push((k, p, false, shape.shared_bases_bytes(k as u64, p, &lim)));
            }
        }
        let bytes: Vec<u64> = cands.iter().map(|c| c.3).collect();
        let (reservation, k, pass, gather) = loop {
            let idle = slot.alloc.reserved_bytes() <= slot.kept_bytes()?;
            let wait = if idle {
                std::time::Duration::ZERO
            } else {
                std::time::Duration::from_millis(200)
            };
            match slot.alloc.reserve_first(&bytes, "shared bases", wait)? {
                Some((i, r)) => break (r, cands[i].0, cands[i].1 as usize, cands[i].2),
                None if idle => return Ok(None),
                None => continue,
            }
        };
        let tier = if pass as u64 >= shape.pass_points() {
            TierKind::FullStaging
        } else {
            TierKind::Partial
        }
        .max(attempt.start_tier);
        attempt.record_tier(tier);
        let (jobs, asgs) = (&jobs[..k], &asgs[..k]);
        let tier_name = format!(
            "{}+shared-bases-{k}{}",
            tier.name(),
            if gather { "+gathered" } else { "" }
        );
        let big = if gather { &big[..k] } else { &[] };
        log::info!(
            "partitions {:?}: GPU {} worker {}, tier {tier_name} (L, A, B over one streamed \
             upload of the bases, passes of {pass} points, Pippenger parts {}, {} reserved)",
            jobs.iter().map(|j| j.partition).collect::<Vec<_>>(),
            attempt.device,
            attempt.worker,
            if gather {
                format!("gathered ({big:?} values neither 0 nor 1)")
            } else {
                "per pass".to_string()
            },
            fmt_gib(reservation.bytes()),
        );
        let dev = &slot.dev;
        let arena = Arena::over(&reservation);
        let timeout = Some(self.stage_timeout);
        let mut timings: Vec<Timings> = jobs.iter().map(|_| Timings::default()).collect();
        let report = |timings: &mut [Timings], stage: Stage, each: std::time::Duration| {
            for (j, t) in jobs.iter().zip(timings.iter_mut()) {
                j.reporter.report(t, Some(j.partition), stage, each);
            }
        };
        // ---- Each partition's aux, uploaded outside the GPU section.
        let _deadline = stage_deadline("upload", timeout);
        let mut dauxs = Vec::with_capacity(k);
        let upload_stream = dev.stream()?;
        for ((j, asg), t) in jobs.iter().zip(asgs).zip(timings.iter_mut()) {
            let t0 = Instant::now();
            let d = upload_aux(dev, &arena, &upload_stream, &asg.aux, j.packed.as_deref(), None)?;
            j.reporter
                .report(t, Some(j.partition), Stage::Transfer, t0.elapsed());
            dauxs.push(d);
        }
        let section = attempt.enter_gpu();
        report(&mut timings, Stage::Wait, section.waited());
        let _deadline = stage_deadline("msm", timeout);
        let mut ws = msm_workspace(slot, &arena)?;
        let sets: Vec<device::DeviceSlice<'_, Fr>> = dauxs.iter().map(|d| d.as_slice()).collect();
        let want = part.queries();
        let (ni, bi) = (a0.input.len(), a0.b_input_density.count());
        let share = |t: std::time::Duration| t / k as u32;
        // ---- L, A, B_G1 (G1): the same pass buffers for the three.
        let mut g1 = vec![[G1Projective::identity(); 3]; k];
        {
            let mut bufs = [
                dev.alloc_in::<G1Affine>(Some(&arena), pass)?,
                dev.alloc_in::<G1Affine>(Some(&arena), pass)?,
            ];
            let mut sinks = sinks_for::<G1>(dev, &arena, big)?;
            type G1Query<'q> = (Queries, &'q Query<G1Affine>, usize, Option<&'q crate::synth::Density>);
            let aux_g1: [G1Query<'_>; 3] = [
                (Queries::L, &QUERY_L, 0, None),
                (Queries::A, &QUERY_A, ni, Some(&a0.a_aux_density)),
                (Queries::B_G1, &QUERY_B_G1, bi, Some(&a0.b_aux_density)),
            ];
            for (q, &(which, query, offset, density)) in aux_g1.iter().enumerate() {
                if !want.contains(which) {
                    continue;
                }
                let t0 = Instant::now();
                let (sums, _) = streamed_msm(
                    dev,
                    &mut bufs,
                    &(query.host)(srs)[offset..],
                    &sets,
                    density,
                    pass,
                    |i, pt, sc, d| match sinks.get_mut(i).and_then(Option::as_mut) {
                        Some(sink) => ws.msm_gathering::<G1>(pt, sc, d, sink),
                        None => ws.msm::<G1>(pt, sc, d),
                    },
                )?;
                for (i, (g, sum)) in g1.iter_mut().zip(sums).enumerate() {
                    g[q] = sum + drain(&mut sinks, i, &mut ws)?;
                }
                report(&mut timings, query.stage, share(t0.elapsed()));
            }
        }
        // ---- B_G2 (G2).
        let mut g2 = vec![blstrs::G2Projective::identity(); k];
        if want.contains(Queries::B_G2) {
            let mut bufs = [
                dev.alloc_in::<G2Affine>(Some(&arena), pass)?,
                dev.alloc_in::<G2Affine>(Some(&arena), pass)?,
            ];
            let mut sinks = sinks_for::<G2>(dev, &arena, big)?;
            let t0 = Instant::now();
            let (sums, _) = streamed_msm(
                dev,
                &mut bufs,
                &(QUERY_B_G2.host)(srs)[bi..],
                &sets,
                Some(&a0.b_aux_density),
                pass,
                |i, pt, sc, d| match sinks.get_mut(i).and_then(Option::as_mut) {
                    Some(sink) => ws.msm_gathering::<G2>(pt, sc, d, sink),
                    None => ws.msm::<G2>(pt, sc, d),
                },
            )?;
            for (i, (g, sum)) in g2.iter_mut().zip(sums).enumerate() {
                *g = sum + drain(&mut sinks, i, &mut ws)?;
            }
            report(&mut timings, Stage::MsmBG2, share(t0.elapsed()));
        }
        ws.release()?;
        drop(section);
        log::info!(
            "partitions {:?}: device {} shared bases: device-memory high-water {} of {} planned",
            jobs.iter().map(|j| j.partition).collect::<Vec<_>>(),
            dev.ordinal(),
            fmt_gib(arena.high_water()),
            fmt_gib(arena.capacity()),
        );
        // ---- The inputs' parts on the CPU, then each partition's sums.
        let mut out = Vec::with_capacity(k);
        for (i, (asg, timings)) in asgs.iter().zip(timings).enumerate() {
            let (a_in, b1_in, b2_in) = super::cpu::input_msms(asg, srs, want);
            out.push(GpuOutput {
                msm: MsmResults {
                    h: G1Projective::identity(),
                    l: g1[i][0],
                    a: a_in + g1[i][1],
                    b_g1: b1_in + g1[i][2],
                    b_g2: b2_in + g2[i],
                },
                timings,
                device: attempt.device,
                tier: tier_name.clone(),
            });
        }
        Ok(Some(out))
    }
}

/// The allocator's shape of a partition of compiled circuit `cc` (its counts and densities).
fn circuit_shape(cc: &CompiledCircuit) -> Result<PartitionShape> {
    let l = &cc.layout;
    let ni = l.num_inputs() as u64;
    PartitionShape::from_counts(
        (l.num_constraints() as u64).saturating_sub(ni),
        ni,
        l.num_aux() as u64,
        ni + cc.a_aux_density.count() as u64,
        (cc.b_input_density.count() + cc.b_aux_density.count()) as u64,
    )
}

/// The allocator's shape of a partition of `rows` constraints (the input constraints
/// included) with `asg`'s witness and densities (the A query's points: inputs and the aux of
/// the A density; the B query's: the inputs and aux of the B densities — the sizes
/// `Srs::check_counts` checked the parameters against).
fn shape_of(asg: &Assignment, rows: usize) -> Result<PartitionShape> {
    let ni = asg.input.len() as u64;
    PartitionShape::from_counts(
        (rows as u64).saturating_sub(ni),
        ni,
        asg.aux.len() as u64,
        ni + asg.a_aux_density.count() as u64,
        (asg.b_input_density.count() + asg.b_aux_density.count()) as u64,
    )
}

/// The device copy of `cc` on `slot`: the one already resident, or a new upload when its
/// bytes ([`DeviceCircuit::bytes_for`]) can be reserved beside the plans now (another circuit
/// resident is let go first). `None` when it does not fit (the caller runs the SpMV on the
/// CPU); the device keeps one circuit at a time.
///
/// # Errors
/// Driver errors other than out-of-memory.
fn circuit_on(slot: &Slot, cc: &Arc<CompiledCircuit>) -> Result<Option<Arc<ResidentCircuit>>> {
    let mut cur = slot
        .circuit
        .lock()
        .map_err(|_| Error::internal("circuit lock poisoned"))?;
    if let Some(r) = cur.as_ref() {
        if Arc::ptr_eq(&r.cc, cc) {
            return Ok(Some(r.clone()));
        }
    }
    *cur = None;
    let bytes = DeviceCircuit::bytes_for(cc);
    let res = match slot.alloc.reserve(bytes, "circuit") {
        Ok(r) => r,
        Err(Error::OutOfDeviceMemory { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let t = Instant::now();
    let dc = match DeviceCircuit::upload(&slot.dev, cc, Some(&Arena::over(&res))) {
        Ok(dc) => dc,
        Err(Error::OutOfDeviceMemory { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    res.note_allocated(bytes);
    log::info!(
        "GPU {}: compiled circuit resident ({:.2} GB: {} rows, non-zeros A {} B {} C {}) in {:.2} s",
        slot.dev.ordinal(),
        bytes as f64 / 1e9,
        cc.layout.num_constraints(),
        cc.a.nnz(),
        cc.b.nnz(),
        cc.c.nnz(),
        t.elapsed().as_secs_f64()
    );
    let r = Arc::new(ResidentCircuit {
        cc: cc.clone(),
        dc,
        _reservation: res,
    });
    *cur = Some(r.clone());
    Ok(Some(r))
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
    stage_slice(stream, &mut dst.as_mut_slice(), src)
}

/// [`stage`] into a device slice.
fn stage_slice(
    stream: &device::Stream,
    dst: &mut device::DeviceSliceMut<'_, Fr>,
    src: &[Fr],
) -> Result<()> {
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
/// process hold working memory on the device (it comes back when they finish), a tier below
/// the one the device would give once that memory is back is no option, nor one whose H step
/// would run on the CPU, and "nothing fits" means "not now": the partition waits for their
/// reservations to drop (re-planning on every release, at least every 200 ms) — on a small
/// card two workers take turns for the memory-heavy stages instead of each falling to a tier
/// that runs the H step on the CPU (tens of seconds at 2^27), and on an 80 GB card for the
/// resident parameters instead of both streaming their bases (the device's kernels run one
/// partition at a time anyway, `CUZK_GPU_SECTIONS`). Only with
/// nothing but what stays on the device reserved (the resident parameters and circuit) may the
/// plan be `Streaming` (the card can never hold more; logged as a warning), or fail with
/// [`Error::OutOfDeviceMemory`].
///
/// A resident compiled circuit yields to the partition: when, with nothing else reserved, no
/// tier fits or only `Partial` or `Streaming` does, the circuit is let go and the partition
/// planned again (its SpMV then streams the matrices from host memory, which costs less than
/// the smaller MSM passes or the CPU H step it would otherwise get).
fn plan_on(slot: &Slot, shape: &PartitionShape, opts: &PlanOptions) -> Result<Plan> {
    loop {
        if slot.alloc.reserved_bytes() <= slot.kept_bytes()? {
            let r = slot.alloc.plan(shape, opts);
            let poor = match &r {
                Err(Error::OutOfDeviceMemory { .. }) => true,
                Ok(p) => p.tier.kind() >= TierKind::Partial,
                Err(_) => false,
            };
            if poor && slot.drop_circuit()? {
                slot.circuit_yielded
                    .fetch_or(1 << shape.domain_log2.min(63), Ordering::Relaxed);
                log::info!(
                    "GPU {}: resident circuit let go to plan a 2^{} partition",
                    slot.dev.ordinal(),
                    shape.domain_log2
                );
                drop(r);
                continue;
            }
            if let Ok(p) = &r {
                if p.tier.kind() == TierKind::Streaming {
                    log::warn!(
                        "GPU {}: a 2^{} partition's H step runs on the CPU: the device can \
                         hold no more than {} ({})",
                        slot.dev.ordinal(),
                        shape.domain_log2,
                        fmt_gib(p.available),
                        p.tier
                    );
                }
            }
            return r;
        }
        let mut waiting = PlanOptions {
            gpu_h_step: true,
            ..*opts
        };
        // No tier below what the device gives once the others' working memory is back.
        let held = slot
            .alloc
            .reserved_bytes()
            .saturating_sub(slot.kept_bytes()?);
        if let Some(best) = slot.alloc.tier_if_freed(shape, &waiting, held)? {
            waiting.worst = best;
        }
        match slot
            .alloc
            .plan_wait(shape, &waiting, std::time::Duration::from_millis(200))
        {
            Err(Error::OutOfDeviceMemory { .. }) => continue,
            other => return other,
        }
    }
}

/// Aux values that are neither 0 nor 1 (the Pippenger scalars of every query over aux).
fn count_big(aux: &[Fr]) -> usize {
    use ff::Field;
    use rayon::prelude::*;
    aux.par_iter()
        .filter(|v| !bool::from(v.is_zero()) && **v != Fr::ONE)
        .count()
}

/// A gather sink of `big[i]` entries for each partition i with such values (the batch's
/// partitions sharing streamed bases gather their Pippenger parts when `big` is given: each
/// has at most half a pass of them, so that the drain's MSM stays within the pass workspace,
/// `layout` test `a_drain_of_half_a_pass_fits_the_pass_workspace`).
fn sinks_for<G: MsmGroup>(
    dev: &Arc<Device>,
    arena: &Arena,
    big: &[usize],
) -> Result<Vec<Option<GatherSink<G>>>> {
    big.iter()
        .map(|&b| (b > 0).then(|| GatherSink::<G>::new(dev, Some(arena), b)).transpose())
        .collect()
}

/// Set i's gathered Pippenger part, summed ([`GatherSink::drain`]); the identity without a
/// sink.
fn drain<G: MsmGroup>(
    sinks: &mut [Option<GatherSink<G>>],
    i: usize,
    ws: &mut MsmWorkspace,
) -> Result<G::Projective> {
    match sinks.get_mut(i).and_then(Option::as_mut) {
        Some(sink) => sink.drain(ws),
        None => Ok(G::Projective::identity()),
    }
}

/// Σ over the passes of MSMs whose bases stream from host memory (`points`) into the two
/// device buffers `bufs` (double-buffered: the next pass uploads while this one computes):
/// one MSM per scalar set of `sets` (each on the device, all of one length `n`), every pass of
/// bases uploaded once and used by each set in turn (the batched MSM of issue 44: k scalar
/// sets against shared points, as icicle's batch MSM takes them). `density` (when given) is
/// the sets' common density; `msm(i, points, scalars, density)` runs set i's part of a pass.
/// Returns one sum per set, in order, and the time spent waiting for uploads.
///
/// # Errors
/// [`Error::Internal`] for sets of different lengths or none; the uploads' and `msm`'s errors.
fn streamed_msm<A: device::DeviceRepr, P: Group>(
    dev: &Arc<Device>,
    bufs: &mut [DeviceBuffer<A>; 2],
    points: &[A],
    sets: &[device::DeviceSlice<'_, Fr>],
    density: Option<&crate::synth::Density>,
    chunk: usize,
    mut msm: impl FnMut(usize, Points<'_, A>, Scalars<'_>, Option<&[u64]>) -> Result<P>,
) -> Result<(Vec<P>, std::time::Duration)> {
    let n = sets
        .first()
        .ok_or_else(|| Error::internal("a streamed MSM without scalars"))?
        .len();
    if sets.iter().any(|s| s.len() != n) {
        return Err(Error::internal("streamed MSM scalar sets of different lengths"));
    }
    let passes = super::msm_passes(n, density, chunk);
    let host: Vec<[&[A]; 1]> = passes.iter().map(|p| [&points[p.points.clone()]]).collect();
    let [b0, b1] = bufs;
    let bufs = [std::array::from_mut(b0), std::array::from_mut(b1)];
    let (sums, stats) =
        crate::gpu::driver::upload::for_each_pass(dev, pinned_registry(), bufs, &host, |k, [pts]| {
            let p = &passes[k];
            let words = match (&p.words, density) {
                (Some(w), Some(d)) => Some(&d.words()[w.clone()]),
                _ => None,
            };
            sets.iter()
                .enumerate()
                .map(|(i, s)| {
                    msm(i, Points::Device(pts), Scalars::Device(s.slice(p.s..p.e)?), words)
                })
                .collect::<Result<Vec<P>>>()
        })?;
    let mut total = vec![P::identity(); sets.len()];
    for pass in sums {
        for (t, x) in total.iter_mut().zip(pass) {
            *t += x;
        }
    }
    Ok((total, stats.waited))
}

/// One query's vector of a parameter set (H, L, A, B_G1: G1; B_G2: G2): where its points
/// are, and a hold on the `Arc` that owns them.
#[derive(Clone)]
struct HeldQuery {
    ptr: usize,
    bytes: usize,
    _owner: Arc<dyn std::any::Any + Send + Sync>,
}

impl HeldQuery {
    fn new<A: Send + Sync + 'static>(v: &Arc<Vec<A>>) -> HeldQuery {
        HeldQuery {
            ptr: v.as_ptr() as usize,
            bytes: std::mem::size_of_val(&v[..]),
            _owner: v.clone(),
        }
    }

    /// `srs`'s five queries in file order: H, L, A, B_G1, B_G2.
    fn of(srs: &Srs) -> [HeldQuery; 5] {
        [
            HeldQuery::new(&srs.h),
            HeldQuery::new(&srs.l),
            HeldQuery::new(&srs.a),
            HeldQuery::new(&srs.b_g1),
            HeldQuery::new(&srs.b_g2),
        ]
    }
}

/// One query of a parameter set pinned once (one registration, kept while the backend lives)
/// so streamed passes and the resident upload copy at the link's pinned rate. The guard is
/// declared before the vector it pins, so it unregisters before the memory can go.
struct PinnedQuery {
    path: PathBuf,
    /// 0 ..= 4: H, L, A, B_G1, B_G2.
    query: usize,
    _guard: crate::gpu::memory::pinned::PinGuard,
    held: HeldQuery,
}

/// A compiled circuit's host matrices pinned once for the streamed SpMV. The guards are
/// declared before the circuit they pin, so they unregister before its memory can go.
struct PinnedCircuit {
    _guards: Vec<crate::gpu::memory::pinned::PinGuard>,
    cc: Arc<CompiledCircuit>,
}

/// How many domain buffers (n × 32 B each, 4 GiB at 2^27) the H step of a partition has on the
/// device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HLayout {
    /// a, b, c each in its own buffer ([`ntt::h_step`]).
    Three,
    /// a in one, b then c in the other ([`ntt::h_step_shared`]): for a plan that cannot hold
    /// three beside z (a 16 GiB card at 2^27). The R1CS check then computes c block by block.
    Two,
}

/// Where the GPU SpMV of a compiled partition reads the circuit's matrices.
#[derive(Clone, Copy)]
enum Matrices<'c> {
    /// Resident on the device (the slot's [`ResidentCircuit`]).
    Resident(&'c DeviceCircuit),
    /// Streamed from the (pinned) host copy in row blocks ([`StreamedCircuit`]).
    Streamed(&'c CompiledCircuit),
}

/// The GPU SpMV of one compiled partition: its matrices and its H step's buffers.
#[derive(Clone, Copy)]
struct DeviceSpmv<'c> {
    matrices: Matrices<'c>,
    layout: HLayout,
}

/// Runs one partition of `shape` on one device under `plan`, in stages:
///
/// 1. **bases**: with the resident tier, the parameters are made resident ([`resident_for`]:
///    uploaded once per device, 44.1 GiB at 32 GiB);
/// 2. **upload** ([`DeviceRun::upload`], outside the GPU section so its copies overlap another
///    worker's kernels): z, or a, b, c, or h, into the domain buffers;
/// 3. **SpMV** ([`DeviceRun::spmv`], compiled path only): a, b, c = A·z, B·z, C·z on the device
///    and the check a∘b = c ([`Error::Synthesis`] for a failing constraint, before any MSM);
/// 4. **H** ([`DeviceRun::h_step`]): the H step's NTTs on the device, h left in `dh`; with
///    two domain buffers ([`HLayout::Two`]) steps 3 and 4 are [`DeviceRun::spmv_h_shared`] or
///    [`DeviceRun::h_step_shared`];
/// 5. **MSMs** ([`DeviceRun::msms`]): H, L, A, B_G1, B_G2 on the device, one sequence for
///    resident and streamed bases ([`Bases`]); the input parts are summed here on the CPU;
/// 6. **read-back**: the five sums go back to the caller, whose epilogue assembles the proof.
///
/// `part` ([`Part`]) leaves out steps 2 to 4 and the H MSM (`Rest`: z's aux is uploaded for
/// the set's MSMs, the others skipped), or the MSMs after H (`HOnly`). An incomplete parameter
/// set (a cold load's sections so far) is never made resident.
///
/// Steps 3 to 5 run inside the device's GPU section. With `spmv` (the compiled path, a, b, c
/// not yet computed) only z is uploaded and aux then stays on the device for the MSMs; the
/// caller checked that the plan's working memory holds the layout's domain buffers,
/// [`spmv_work_bytes`] and, for streamed matrices, [`StreamedCircuit::bytes_for`]. Every device buffer comes out of the plan's reservation (an [`Arena`]),
/// and is freed here, in this function's order (which is why the stages borrow them).
#[allow(clippy::too_many_arguments)]
fn run_on(
    slot: &Slot,
    mut plan: Plan,
    shape: &PartitionShape,
    asg: &mut Assignment,
    spmv: Option<DeviceSpmv<'_>>,
    packed: Option<&PackedAux>,
    srs: &Srs,
    part: Part,
    ctx: &mut PartitionCtx<'_>,
    attempt: &Attempt<'_>,
    timeout: Option<std::time::Duration>,
) -> Result<MsmResults> {
    let dev = &slot.dev;
    // Every device buffer of this partition comes out of the plan's reservation.
    let arena = Arena::over(&plan.work);
    let _deadline = stage_deadline("upload", timeout);
    // ---- 1. Bases.
    let resident = if plan.tier.kind() == TierKind::Resident {
        resident_for(slot, srs, &mut plan)?
    } else {
        None
    };
    let n = 1usize << shape.domain_log2;
    let stream = dev.stream()?;
    // The plan's pass: a partial tier that fitted only with a smaller pass (2^23 at 2^27 on a
    // 16 GiB card) must not run the default one (its G2 base slots alone would exceed the plan).
    let chunk = plan.tier.msm_pass_points(shape) as usize;
    let mut run = DeviceRun {
        dev,
        arena: &arena,
        work: &plan.work,
        stream: &stream,
        n,
        partition: ctx.partition,
        reporter: ctx.reporter,
        timings: &mut *ctx.timings,
        timeout,
        packed,
    };

    // ---- 2. Upload. `dh`: a (or h) now, h after the H step, freed after the H MSM.
    let mut dh = None;
    let Uploaded { bc: dbc, z: dz } = if part.h_side() {
        let h_buf = dh.insert(dev.alloc_in::<Fr>(Some(&arena), n)?);
        run.upload(h_buf, asg, spmv.map(|s| s.layout))?
    } else {
        Uploaded { bc: None, z: None }
    };
    // The GPU section: the kernels (the uploads above, with the packed aux's expansion,
    // overlap other workers' kernels).
    let section = attempt.enter_gpu();
    run.report(Stage::Wait, section.waited());
    // ---- 3. SpMV and the R1CS check (compiled path), 4. H.
    match (dbc, dh.as_mut(), spmv, &dz) {
        (Some(HBuffers::Three(mut db, mut dc)), Some(h_buf), sp, z) => {
            if let (Some(sp), Some((din, daux))) = (sp, z) {
                run.spmv(sp.matrices, (din, daux), [&mut *h_buf, &mut db, &mut dc])?;
            }
            run.h_step(h_buf, &mut db, &mut dc)?;
        }
        (Some(HBuffers::Two(mut dbc)), Some(h_buf), Some(sp), Some((din, daux))) => {
            run.spmv_h_shared(sp.matrices, (din, daux), h_buf, &mut dbc)?;
        }
        (Some(HBuffers::Two(mut dbc)), Some(h_buf), _, _) => {
            let c = &asg.c;
            run.h_step_shared(h_buf, &mut dbc, |bc| stage_slice(&stream, bc, c))?;
        }
        _ => {}
    }
    // a, b, c stay on the host until the partition succeeds: a retry (lower tier, other
    // device, CPU fallback) needs them.

    // z's aux from the GPU SpMV, when it ran, is already the scalars of L, A and B; an H side
    // alone (`Part::HOnly`) frees it before its H MSM, whose plan has no room for it.
    let daux_kept = match dz {
        Some((din, daux)) => {
            let freed = if part.rest() { din.len() } else { din.len() + daux.len() };
            plan.work.note_freed(32 * freed as u64);
            drop(din);
            part.rest().then_some(daux)
        }
        None => None,
    };
    // ---- 5. MSMs.
    let _deadline = stage_deadline("msm", timeout);
    let mut ws = msm_workspace(slot, &arena)?;
    // The input parts (≤ a few hundred points) are summed on the CPU.
    let (a_in, b1_in, b2_in) = if part.rest() {
        super::cpu::input_msms(asg, srs, part.queries())
    } else {
        (
            G1Projective::identity(),
            G1Projective::identity(),
            blstrs::G2Projective::identity(),
        )
    };
    let bases = match &resident {
        Some(r) => Bases::Resident(r),
        None => Bases::Streamed { srs, chunk },
    };
    let sums = run.msms(&mut ws, &bases, &mut dh, daux_kept, asg, part)?;
    ws.release()?;
    drop(section);
    log::info!(
        "partition {}: device {} tier {}: device-memory high-water {} of {} planned",
        run.partition,
        dev.ordinal(),
        plan.tier,
        fmt_gib(arena.high_water()),
        fmt_gib(arena.capacity()),
    );
    // ---- 6. Read-back: the device's sums (already on the host) plus the input parts.
    Ok(MsmResults {
        h: sums.h,
        l: sums.l,
        a: a_in + sums.a,
        b_g1: b1_in + sums.b_g1,
        b_g2: b2_in + sums.b_g2,
    })
}

/// What the stages of one partition's run on a device share. [`run_on`] owns the device
/// buffers, the stream and the GPU section and lends them to the stages, so the order in which
/// they are freed is written in one place.
struct DeviceRun<'a> {
    dev: &'a Arc<Device>,
    /// The plan's working memory, handed out as the device buffers.
    arena: &'a Arena,
    /// The plan's reservation (what the stages allocate and free is noted in it).
    work: &'a Reservation,
    /// The stream of the upload's zeroing, the SpMV, the R1CS check and the H step.
    stream: &'a device::Stream,
    /// The NTT domain: 2^27 at 32 GiB (a domain buffer of `Fr` is then 4 GiB).
    n: usize,
    partition: usize,
    reporter: &'a Reporter,
    timings: &'a mut Timings,
    /// Longest one stage may wait for the device (`EngineConfig::stage_timeout`).
    timeout: Option<std::time::Duration>,
    /// aux's packed form, when the job has one ([`upload_aux`]).
    packed: Option<&'a PackedAux>,
}

/// The H step's domain buffers besides `dh` (n scalars each, 4 GiB at 32 GiB).
enum HBuffers {
    /// b's and c's ([`HLayout::Three`]).
    Three(DeviceBuffer<Fr>, DeviceBuffer<Fr>),
    /// b's, then c's ([`HLayout::Two`]).
    Two(DeviceBuffer<Fr>),
}

/// What [`DeviceRun::upload`] leaves on the device besides `dh`.
struct Uploaded {
    /// The H step's other buffers when it runs on the device.
    bc: Option<HBuffers>,
    /// z's device copy (input, aux) for the GPU SpMV; aux is kept for the MSMs.
    z: Option<(DeviceBuffer<Fr>, DeviceBuffer<Fr>)>,
}

impl DeviceRun<'_> {
    /// Reports `elapsed` for `stage` of this partition.
    fn report(&mut self, stage: Stage, elapsed: std::time::Duration) {
        self.reporter
            .report(self.timings, Some(self.partition), stage, elapsed);
    }

    /// The upload stage: puts what the H step needs on the device, before the GPU section.
    ///
    /// The H step runs on the device with `layout` ([`HLayout`]): given (the GPU SpMV's, which
    /// the caller fitted in the plan beside z), or the most the plan's working memory holds —
    /// three domain buffers (3·n·32 B, 12 GiB at 32 GiB: resident and full staging always,
    /// partial too: its MSM pass is not allocated yet), else two (2·n·32 B, b's shared with c).
    /// `dh` and the others are allocated; then with the GPU SpMV z (input pageable, aux
    /// packed, 103 MB at 32 GiB, expanded on the device, `dh` lending the scratch — else dense,
    /// 3.88 GiB: [`upload_aux`]) is uploaded, else a and b are staged into
    /// `dh` and the next buffer, and c into the third (with two buffers c is staged later,
    /// [`Self::h_step_shared`]), the rest zeroed. When not even two fit (a small streaming
    /// plan) h comes from the CPU NTT (reported as [`Stage::Ntt`]) and only h (n·32 B) is
    /// staged into `dh`. The copies are reported as [`Stage::Transfer`]; all are synchronous
    /// except the zeroing and the packed aux's expansion on the stream (a few milliseconds of
    /// kernel outside the GPU section: it writes only this partition's buffers).
    ///
    /// # Errors
    /// Driver errors.
    fn upload(
        &mut self,
        dh: &mut DeviceBuffer<Fr>,
        asg: &Assignment,
        spmv: Option<HLayout>,
    ) -> Result<Uploaded> {
        let (dev, arena, n) = (self.dev, self.arena, self.n);
        let buf = 32 * n as u64;
        let layout = spmv.or(if 3 * buf <= self.work.bytes() {
            Some(HLayout::Three)
        } else if 2 * buf <= self.work.bytes() {
            Some(HLayout::Two)
        } else {
            None
        });
        let mut t = Instant::now();
        let Some(layout) = layout else {
            self.work.note_allocated(buf);
            let h = crate::ntt::compute_h(asg.a.clone(), asg.b.clone(), asg.c.clone())?;
            self.report(Stage::Ntt, t.elapsed());
            t = Instant::now();
            stage(self.stream, dh, &h)?;
            self.report(Stage::Transfer, t.elapsed());
            return Ok(Uploaded { bc: None, z: None });
        };
        let mut bc = match layout {
            HLayout::Three => {
                self.work.note_allocated(3 * buf);
                HBuffers::Three(dev.alloc_in::<Fr>(Some(arena), n)?, dev.alloc_in(Some(arena), n)?)
            }
            HLayout::Two => {
                self.work.note_allocated(2 * buf);
                HBuffers::Two(dev.alloc_in(Some(arena), n)?)
            }
        };
        // The compiled path's z on the device: (input, aux); aux is kept for the MSMs.
        let mut dz = None;
        if spmv.is_some() {
            // The inputs (a few hundred values) are copied pageable; aux packed through `dh`,
            // which the SpMV overwrites next on this stream, else dense (`upload_aux`).
            let din = upload_in(dev, arena, &asg.input)?;
            let daux = upload_aux(
                dev,
                arena,
                self.stream,
                &asg.aux,
                self.packed,
                Some(dh.as_mut_slice().into_scratch_words()),
            )?;
            self.work
                .note_allocated(32 * (din.len() + daux.len()) as u64);
            dz = Some((din, daux));
        } else {
            stage(self.stream, dh, &asg.a)?;
            match &mut bc {
                HBuffers::Three(db, dc) => {
                    stage(self.stream, db, &asg.b)?;
                    stage(self.stream, dc, &asg.c)?;
                }
                HBuffers::Two(dbc) => stage(self.stream, dbc, &asg.b)?,
            }
        }
        self.report(Stage::Transfer, t.elapsed());
        Ok(Uploaded {
            bc: Some(bc),
            z: dz,
        })
    }

    /// The device side of the compiled circuit's `matrices`: the resident copy, or a streamed
    /// one whose two block slots are allocated in the plan's arena now; with the bytes noted
    /// allocated in the plan (to note freed when it is dropped, [`Self::drop_circuit`]).
    fn circuit<'c>(&self, matrices: Matrices<'c>) -> Result<(CircuitOnDevice<'c>, u64)> {
        Ok(match matrices {
            Matrices::Resident(dc) => (CircuitOnDevice::Resident(dc), 0),
            Matrices::Streamed(cc) => {
                let sc = StreamedCircuit::new(self.dev, cc, Some(self.arena), pinned_registry())?;
                let bytes = StreamedCircuit::bytes_for(cc);
                self.work.note_allocated(bytes);
                (CircuitOnDevice::Streamed(Box::new(sc)), bytes)
            }
        })
    }

    /// Frees a streamed circuit's slots (their bytes noted freed in the plan).
    fn drop_circuit(&self, (circuit, noted): (CircuitOnDevice<'_>, u64)) {
        drop(circuit);
        self.work.note_freed(noted);
    }

    /// The SpMV stage (compiled path, in the GPU section, [`HLayout::Three`]): a, b, c = A·z,
    /// B·z, C·z from the circuit's `matrices` (resident, or streamed in row blocks) and z's
    /// device copy `(input, aux)` into the first rows of `abc` (the H step's three domain
    /// buffers; 130.3 M rows of 2^27 at 32 GiB, whose matrices hold A 309 M, B 130 M, C 283 M
    /// non-zeros), then the R1CS check a∘b = c over those rows; reported together as
    /// [`Stage::Spmv`].
    ///
    /// # Errors
    /// [`Error::Synthesis`] naming the first failing constraint (before any MSM); driver
    /// errors; a stage timeout (`"spmv"`).
    fn spmv(
        &mut self,
        matrices: Matrices<'_>,
        (din, daux): (&DeviceBuffer<Fr>, &DeviceBuffer<Fr>),
        abc: [&mut DeviceBuffer<Fr>; 3],
    ) -> Result<()> {
        let _deadline = stage_deadline("spmv", self.timeout);
        let t = Instant::now();
        let (mut circuit, noted) = self.circuit(matrices)?;
        let [da, db, dc] = abc;
        for (m, y) in [Matrix::A, Matrix::B, Matrix::C]
            .into_iter()
            .zip([&mut *da, &mut *db, &mut *dc])
        {
            circuit.evaluate(
                self.stream,
                m,
                din.as_slice(),
                daux.as_slice(),
                &mut y.as_mut_slice(),
            )?;
        }
        let rows = circuit.rows();
        self.drop_circuit((circuit, noted));
        let bad = r1cs_check(
            self.stream,
            Some(self.arena),
            da.slice(..rows)?,
            db.slice(..rows)?,
            dc.slice(..rows)?,
        )?;
        self.report(Stage::Spmv, t.elapsed());
        if let Some(j) = bad {
            return Err(super::unsatisfied(self.partition, j, rows));
        }
        Ok(())
    }

    /// The SpMV and H stages on two domain buffers (compiled path, in the GPU section,
    /// [`HLayout::Two`]): a = A·z into `dh`, b = B·z into `dbc`, the R1CS check with c = C·z
    /// computed block by block ([`CircuitOnDevice::check_blockwise`]; reported with the SpMV as
    /// [`Stage::Spmv`]), then the H step with c = C·z computed again into `dbc` once b is
    /// consumed ([`Self::h_step_shared`]).
    ///
    /// # Errors
    /// As [`Self::spmv`] and [`Self::h_step`].
    fn spmv_h_shared(
        &mut self,
        matrices: Matrices<'_>,
        (din, daux): (&DeviceBuffer<Fr>, &DeviceBuffer<Fr>),
        dh: &mut DeviceBuffer<Fr>,
        dbc: &mut DeviceBuffer<Fr>,
    ) -> Result<()> {
        let deadline = stage_deadline("spmv", self.timeout);
        let t = Instant::now();
        let (mut circuit, noted) = self.circuit(matrices)?;
        let (input, aux) = (din.as_slice(), daux.as_slice());
        circuit.evaluate(self.stream, Matrix::A, input, aux, &mut dh.as_mut_slice())?;
        circuit.evaluate(self.stream, Matrix::B, input, aux, &mut dbc.as_mut_slice())?;
        let rows = circuit.rows();
        let bad = {
            let mut scratch = self.dev.alloc_in::<Fr>(
                Some(self.arena),
                rows.min(crate::gpu::memory::layout::SPMV_BLOCK_ROWS as usize),
            )?;
            circuit.check_blockwise(
                self.stream,
                Some(self.arena),
                input,
                aux,
                dh.slice(..rows)?,
                dbc.slice(..rows)?,
                &mut scratch,
            )?
        };
        self.report(Stage::Spmv, t.elapsed());
        if let Some(j) = bad {
            return Err(super::unsatisfied(self.partition, j, rows));
        }
        drop(deadline);
        let stream = self.stream;
        self.h_step_shared(dh, dbc, |bc| {
            circuit.evaluate(stream, Matrix::C, input, aux, bc)
        })?;
        self.drop_circuit((circuit, noted));
        Ok(())
    }

    /// The H stage on two domain buffers (in the GPU section, [`HLayout::Two`]): a in `dh` and
    /// b in `dbc`, then `fill_c` writes c into `dbc` once b is consumed (the GPU SpMV's C·z, or
    /// c staged from the host; [`ntt::h_step_shared`]). h's n coefficients end in `dh`; `dbc`'s
    /// bytes are noted freed; reported as [`Stage::Ntt`].
    ///
    /// # Errors
    /// Driver errors; a stage timeout (`"ntt"`); `fill_c`'s errors.
    fn h_step_shared(
        &mut self,
        dh: &mut DeviceBuffer<Fr>,
        dbc: &mut DeviceBuffer<Fr>,
        fill_c: impl FnOnce(&mut device::DeviceSliceMut<'_, Fr>) -> Result<()>,
    ) -> Result<()> {
        let _deadline = stage_deadline("ntt", self.timeout);
        let t = Instant::now();
        let stream = self.stream;
        ntt::h_step_shared(
            stream,
            &mut dh.as_mut_slice(),
            &mut dbc.as_mut_slice(),
            fill_c,
        )?;
        stream.synchronize()?;
        self.report(Stage::Ntt, t.elapsed());
        self.work.note_freed(32 * self.n as u64);
        Ok(())
    }

    /// The H stage (in the GPU section): iNTT of a, b, c → coset NTT → h = (a·b − c)/Z →
    /// coset iNTT ([`ntt::h_step`], six transforms of n = 2^27 at 32 GiB), in place: h's n
    /// coefficients end in `dh`, `db` and `dc` are left for the caller to free (their 8 GiB
    /// are noted freed in the plan now). Waits for the stream; reported as [`Stage::Ntt`].
    ///
    /// # Errors
    /// Driver errors; a stage timeout (`"ntt"`).
    fn h_step(
        &mut self,
        dh: &mut DeviceBuffer<Fr>,
        db: &mut DeviceBuffer<Fr>,
        dc: &mut DeviceBuffer<Fr>,
    ) -> Result<()> {
        let _deadline = stage_deadline("ntt", self.timeout);
        let t = Instant::now();
        ntt::h_step(
            self.stream,
            &mut dh.as_mut_slice(),
            &mut db.as_mut_slice(),
            &mut dc.as_mut_slice(),
        )?;
        self.stream.synchronize()?;
        self.report(Stage::Ntt, t.elapsed());
        self.work.note_freed(2 * 32 * self.n as u64);
        Ok(())
    }

    /// The MSM stage (in the GPU section; the caller holds the `"msm"` deadline): the five
    /// MSMs of the partition, in this order, wherever the bases are ([`Bases`]):
    ///
    /// 1. H (G1) over h's first n − 1 coefficients in `dh` (2^27 − 1 at 32 GiB); `dh` is then
    ///    freed (taken), so that aux can take its room;
    /// 2. L, A and B_G1 (G1) over aux (130.2 M scalars at 32 GiB: 3.88 GiB on the device, from
    ///    the GPU SpMV's `daux_kept` or uploaded once), A and B over their densities' aux only
    ///    (A 129.8 M, B 33.1 M points);
    /// 3. B_G2 (G2) over aux in the B density.
    ///
    /// With resident bases aux goes up before the H MSM (the plan holds it beside h); with
    /// streamed bases after it, into the room h leaves (checked: aux.len() ≤ n), and the
    /// streamed MSMs' pass buffers (two per group, the plan's pass each) are allocated for the
    /// G1 MSMs, freed, then allocated for B_G2.
    ///
    /// `part` ([`Part`]): `HOnly` stops after the H MSM; `Rest` skips it (no `dh`), uploads
    /// aux and computes only its set's MSMs (the identity for the others).
    ///
    /// Returns the sums of the aux parts (A, B_G1 and B_G2 without their inputs, which the
    /// caller adds). On an error `dh` is left to the caller when the H MSM did not finish.
    ///
    /// # Errors
    /// Driver errors; [`Error::OutOfDeviceMemory`] for an allocation beyond the plan;
    /// [`Error::Internal`] for more aux variables than the domain with streamed bases.
    fn msms(
        &mut self,
        ws: &mut MsmWorkspace,
        bases: &Bases<'_>,
        dh: &mut Option<DeviceBuffer<Fr>>,
        mut daux_kept: Option<DeviceBuffer<Fr>>,
        asg: &Assignment,
        part: Part,
    ) -> Result<MsmResults> {
        let (dev, n) = (self.dev, self.n);
        let ni = asg.input.len();
        let bi = asg.b_input_density.count();
        let mut waited = std::time::Duration::ZERO;
        let beside_h = if bases.aux_beside_h() && part.rest() {
            Some(self.aux_scalars(daux_kept.take(), asg)?)
        } else {
            None
        };
        let mut g1_pass = bases.pass_buffers::<G1Affine>(dev, self.arena)?;
        let want = part.queries();
        let h = match part {
            Part::Rest(_) => G1Projective::identity(),
            Part::All | Part::HOnly => {
                let t = Instant::now();
                let h_scalars = dh
                    .as_ref()
                    .ok_or_else(|| Error::internal("no h on the device for the H MSM"))?
                    .slice(0..n - 1)?;
                let (h, w) = bases.msm::<G1, _>(
                    ws,
                    dev,
                    &mut g1_pass,
                    &QUERY_H,
                    0..n - 1,
                    h_scalars,
                    None,
                )?;
                waited += w;
                self.report(Stage::MsmH, t.elapsed());
                drop(dh.take());
                h
            }
        };
        if !part.rest() {
            return Ok(MsmResults::h_only(h));
        }
        let daux = match beside_h {
            Some(d) => d,
            None => {
                // aux takes the room h leaves (or, uploaded for the GPU SpMV, the room of the
                // freed b/c buffers): a whole partition's plan has no other bytes for it (a
                // split partition's L, A, B part plans aux itself).
                if asg.aux.len() > n {
                    return Err(Error::internal(format!(
                        "{} aux variables exceed the {n}-point domain the plan budgeted them in",
                        asg.aux.len()
                    )));
                }
                self.aux_scalars(daux_kept.take(), asg)?
            }
        };
        // L, A and B_G1: the same G1 MSM over aux, each over its query from the aux part on
        // (the inputs' points come first in A and B) and, for A and B, only the aux variables
        // in the query's density.
        type G1Query<'q> = (Queries, &'q Query<G1Affine>, usize, Option<&'q crate::synth::Density>);
        let aux_g1: [G1Query<'_>; 3] = [
            (Queries::L, &QUERY_L, 0, None),
            (Queries::A, &QUERY_A, ni, Some(&asg.a_aux_density)),
            (Queries::B_G1, &QUERY_B_G1, bi, Some(&asg.b_aux_density)),
        ];
        let mut g1 = [G1Projective::identity(); 3];
        for (k, &(q, query, offset, density)) in aux_g1.iter().enumerate() {
            if !want.contains(q) {
                continue;
            }
            let t = Instant::now();
            let (sum, w) = bases.msm::<G1, _>(
                ws,
                dev,
                &mut g1_pass,
                query,
                offset..,
                daux.as_slice(),
                density,
            )?;
            g1[k] = sum;
            waited += w;
            self.report(query.stage, t.elapsed());
        }
        drop(g1_pass);
        let mut b_g2 = blstrs::G2Projective::identity();
        if want.contains(Queries::B_G2) {
            let mut g2_pass = bases.pass_buffers::<G2Affine>(dev, self.arena)?;
            let t = Instant::now();
            let (sum, w) = bases.msm::<G2, _>(
                ws,
                dev,
                &mut g2_pass,
                &QUERY_B_G2,
                bi..,
                daux.as_slice(),
                Some(&asg.b_aux_density),
            )?;
            b_g2 = sum;
            waited += w;
            self.report(Stage::MsmBG2, t.elapsed());
        }
        if let Bases::Streamed { .. } = bases {
            log::debug!(
                "partition {}: {:.3} s waiting for streamed bases",
                self.partition,
                waited.as_secs_f64()
            );
        }
        Ok(MsmResults {
            h,
            l: g1[0],
            a: g1[1],
            b_g1: g1[2],
            b_g2,
        })
    }

    /// aux's scalars on the device: `kept` (z's aux from the GPU SpMV) when given, else
    /// uploaded now ([`upload_aux`]: packed when the job has the form and the plan room for
    /// its scratch, else dense, 3.88 GiB at 32 GiB; reported as [`Stage::Transfer`]).
    fn aux_scalars(
        &mut self,
        kept: Option<DeviceBuffer<Fr>>,
        asg: &Assignment,
    ) -> Result<DeviceBuffer<Fr>> {
        match kept {
            Some(d) => Ok(d),
            None => {
                let t = Instant::now();
                let d =
                    upload_aux(self.dev, self.arena, self.stream, &asg.aux, self.packed, None)?;
                self.report(Stage::Transfer, t.elapsed());
                Ok(d)
            }
        }
    }
}

/// The MSM workspace of one partition: its buffers in the plan's `arena`, with the
/// accumulation the plan was sized for.
fn msm_workspace(slot: &Slot, arena: &Arena) -> Result<MsmWorkspace> {
    MsmWorkspace::with_config(
        &slot.dev,
        MsmConfig {
            arena: Some(arena.clone()),
            // the accumulation the plan was sized for
            accumulation: slot.alloc.msm_limits().accumulation,
            affine_min_list: slot.alloc.msm_limits().affine_min_list,
            ..Default::default()
        },
    )
}

/// Where the bases of a partition's MSMs come from: the one thing [`DeviceRun::msms`] does
/// differently for the resident tier and the others.
enum Bases<'a> {
    /// The parameters uploaded once and kept on the device ([`resident_for`]; 44.1 GiB at
    /// 32 GiB): each MSM reads its query in place.
    Resident(&'a Resident),
    /// The parameters in host memory (pinned once per file, [`PinnedParams`]): each MSM
    /// streams its query through two device buffers of `chunk` points (the plan's MSM pass),
    /// the next pass uploading while the current one computes ([`streamed_msm`]).
    Streamed { srs: &'a Srs, chunk: usize },
}

/// One query of the parameters (the bases of one MSM) where [`Bases`] finds it, and the stage
/// its MSM is reported as.
struct Query<A: device::DeviceRepr + 'static> {
    stage: Stage,
    /// Its copy among the resident parameters.
    resident: fn(&Resident) -> &DeviceBuffer<A>,
    /// Its vector in host memory.
    host: fn(&Srs) -> &[A],
}

const QUERY_H: Query<G1Affine> = Query {
    stage: Stage::MsmH,
    resident: |r| &r.h,
    host: |s| &s.h[..],
};
const QUERY_L: Query<G1Affine> = Query {
    stage: Stage::MsmL,
    resident: |r| &r.l,
    host: |s| &s.l[..],
};
const QUERY_A: Query<G1Affine> = Query {
    stage: Stage::MsmA,
    resident: |r| &r.a,
    host: |s| &s.a[..],
};
const QUERY_B_G1: Query<G1Affine> = Query {
    stage: Stage::MsmBG1,
    resident: |r| &r.b_g1,
    host: |s| &s.b_g1[..],
};
const QUERY_B_G2: Query<G2Affine> = Query {
    stage: Stage::MsmBG2,
    resident: |r| &r.b_g2,
    host: |s| &s.b_g2[..],
};

impl Bases<'_> {
    /// Whether aux's scalars go to the device before the H MSM: a resident plan holds them
    /// beside h; the others put them in the room h leaves, after it.
    fn aux_beside_h(&self) -> bool {
        matches!(self, Bases::Resident(_))
    }

    /// The two device buffers the passes of a streamed MSM over `A` points upload into
    /// (`chunk` points each: the plan's `msm_point_bytes(Streamed)` budget); `None` for
    /// resident bases.
    fn pass_buffers<A: device::DeviceRepr>(
        &self,
        dev: &Arc<Device>,
        arena: &Arena,
    ) -> Result<Option<[DeviceBuffer<A>; 2]>> {
        match self {
            Bases::Resident(_) => Ok(None),
            Bases::Streamed { chunk, .. } => Ok(Some([
                dev.alloc_in::<A>(Some(arena), *chunk)?,
                dev.alloc_in::<A>(Some(arena), *chunk)?,
            ])),
        }
    }

    /// One MSM in `G` on `ws`: Σ `scalars`ⱼ · `query[range]`'s points (only the scalars in
    /// `density` have one, when given), the points read in place (resident) or streamed
    /// through `pass` ([`Self::pass_buffers`]). Returns the sum and the time spent waiting for
    /// streamed uploads (zero when resident).
    #[allow(clippy::too_many_arguments)]
    fn msm<G: MsmGroup, R>(
        &self,
        ws: &mut MsmWorkspace,
        dev: &Arc<Device>,
        pass: &mut Option<[DeviceBuffer<G::Affine>; 2]>,
        query: &Query<G::Affine>,
        range: R,
        scalars: device::DeviceSlice<'_, Fr>,
        density: Option<&crate::synth::Density>,
    ) -> Result<(G::Projective, std::time::Duration)>
    where
        R: std::ops::RangeBounds<usize> + std::slice::SliceIndex<[G::Affine], Output = [G::Affine]>,
    {
        match self {
            Bases::Resident(r) => {
                let sum = ws.msm::<G>(
                    Points::Device((query.resident)(r).slice(range)?),
                    Scalars::Device(scalars),
                    density.map(|d| d.words()),
                )?;
                Ok((sum, std::time::Duration::ZERO))
            }
            Bases::Streamed { srs, chunk } => {
                let bufs = pass
                    .as_mut()
                    .ok_or_else(|| Error::internal("a streamed MSM without its pass buffers"))?;
                let (sums, waited) = streamed_msm(
                    dev,
                    bufs,
                    &(query.host)(srs)[range],
                    &[scalars],
                    density,
                    *chunk,
                    |_, pt, sc, d| ws.msm::<G>(pt, sc, d),
                )?;
                Ok((sums.into_iter().sum(), waited))
            }
        }
    }
}

impl GpuBackend {
    /// Runs one partition through the scheduler; `asg` comes back whatever happened. With
    /// `compiled`, `asg` may hold only the witness (see [`GpuJob`]).
    fn submit(
        &self,
        asg: &mut Assignment,
        compiled: Option<Arc<CompiledCircuit>>,
        srs: &Arc<Srs>,
        ctx: &mut PartitionCtx<'_>,
    ) -> Result<MsmResults> {
        // Packed here, before the job waits for a device (off the GPU's path), once per
        // partition: a part after the H side reuses the H side's form, so that it is queued
        // at once (a batch over shared bases waits only `BATCH_LINGER` for its partners). Not
        // for an H side that uploads a, b, c rather than z.
        let uploads_aux = ctx.part != Part::HOnly || (compiled.is_some() && self.gpu_spmv);
        let packed = if self.pack_z && uploads_aux {
            match ctx.packed_aux.clone().filter(|p| p.len() == asg.aux.len()) {
                Some(p) => Some(p),
                None => {
                    ctx.packed_aux = PackedAux::pack(&asg.aux).map(Arc::new);
                    ctx.packed_aux.clone()
                }
            }
        } else {
            None
        };
        let job = Arc::new(GpuJob {
            asg: Mutex::new(std::mem::take(asg)),
            compiled: compiled.clone(),
            gpu_spmv: self.gpu_spmv,
            packed,
            srs: srs.clone(),
            part: ctx.part,
            reporter: ctx.reporter.clone(),
            partition: ctx.partition,
            host_top_up: ctx.host_top_up.clone(),
            host_extra: Mutex::new(None),
            host_busy: AtomicBool::new(false),
        });
        let mut outcomes = self
            .scheduler
            .submit_with_priority(ctx.priority, vec![job.clone()])
            .wait_outcomes();
        // The assignment comes back whatever happened (a CPU fallback needs it, and its
        // vectors may be a pooled buffer the caller lent), even from a poisoned lock.
        *asg = std::mem::take(&mut *job.asg.lock().unwrap_or_else(PoisonError::into_inner));
        if job.host_busy.load(Ordering::SeqCst) {
            ctx.host_buffers_busy = true;
        }
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
            // An unsatisfied witness is not the device's fault: no fallback.
            Err(err) if self.allow_cpu && !matches!(err, Error::Synthesis { .. }) => {
                log::warn!(
                    "partition {}: GPU failed ({err}); CPU fallback allowed: proving on the CPU",
                    ctx.partition
                );
                // The CPU backend computes the same part ([`Part::Rest`] needs no a, b, c).
                if let Some(cc) = compiled.filter(|_| asg.a.is_empty() && ctx.part.h_side()) {
                    job.take_host_top_up()?;
                    // In place: z stays in `asg` (the caller's, possibly a pooled buffer).
                    ctx.reporter
                        .time(ctx.timings, Some(ctx.partition), Stage::Spmv, || {
                            cc.evaluate_in_place(asg)
                        })?;
                    super::check_satisfied(asg, ctx.partition)?;
                }
                let r = CpuBackend.compute(asg, srs, ctx)?;
                ctx.tier = Some(crate::engine::CPU_FALLBACK_TIER.into());
                Ok(r)
            }
            Err(err) => Err(err),
        }
    }
}

impl ProverBackend for GpuBackend {
    fn name(&self) -> &'static str {
        "gpu"
    }

    /// The process-wide registry, and one idle buffer per worker (devices × workers per
    /// device): as many as can upload at once.
    fn host_pool_config(&self) -> (Option<PinnedRegistry>, usize) {
        (
            Some(pinned_registry().clone()),
            self.capacities.len() * self.workers_per_device as usize,
        )
    }

    fn prepare_params(&self, srs: &Srs) {
        self.scheduler.executor().pin_params(srs);
    }

    fn forget_params(&self, path: &std::path::Path) {
        let mut pinned = self
            .scheduler
            .executor()
            .pinned
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let before = pinned.len();
        pinned.retain(|p| p.path != path);
        if pinned.len() < before {
            log::info!(
                "parameters {}: {} pinned queries let go (load failed, or evicted)",
                path.display(),
                before - pinned.len()
            );
        }
    }

    fn parallel_partitions(&self) -> Option<usize> {
        Some(self.capacities.len() * self.workers_per_device as usize)
    }

    fn split_for_shared_bases(&self, cc: &CompiledCircuit) -> bool {
        if self.msm_batch < 2 {
            return false;
        }
        if self.below_resident {
            return true;
        }
        let Ok(shape) = circuit_shape(cc) else {
            return false;
        };
        // No device can hold the resident tier (parameters and working memory) beside the
        // safety margin.
        let slots = &self.scheduler.executor().slots;
        !slots.iter().zip(&self.capacities).any(|(slot, &cap)| {
            let need = shape.tier_bytes_with(TierKind::Resident, false, &slot.alloc.msm_limits());
            need.saturating_add(crate::gpu::memory::alloc::SAFETY_MARGIN) <= cap
        })
    }

    fn abc_on_host(&self, cc: &CompiledCircuit) -> bool {
        // The least a partition's GPU SpMV runs in (its workers take turns for it): z, the H
        // step on two domain buffers, the blockwise check's block of c and the streamed
        // matrices' block slots, beside the safety margin.
        let l = &cc.layout;
        let rows = l.num_constraints().max(1) as u64;
        let domain_log2 = rows.next_power_of_two().trailing_zeros();
        let need = h_step_bytes(domain_log2, 2)
            + spmv_work_bytes(l.num_inputs() as u64, l.num_aux() as u64)
            + r1cs_block_bytes(rows)
            + StreamedCircuit::bytes_for(cc).min(DeviceCircuit::bytes_for(cc))
            + crate::gpu::memory::alloc::SAFETY_MARGIN;
        !self.gpu_spmv || self.capacities.iter().any(|&c| c < need)
    }

    fn compute(
        &self,
        asg: &mut Assignment,
        srs: &Arc<Srs>,
        ctx: &mut PartitionCtx<'_>,
    ) -> Result<MsmResults> {
        self.submit(asg, None, srs, ctx)
    }

    /// The compiled path on the device: only z (inputs ‖ aux) is uploaded; a, b, c = A·z, B·z,
    /// C·z are computed by the GPU SpMV into the H step's buffers from the circuit's matrices,
    /// kept resident on the device while they fit beside the plans, and checked there
    /// (a∘b = c) before any MSM. When the matrices or z do not fit, the worker runs the CPU
    /// SpMV and check instead (logged; tier reported as `<tier>+cpu-spmv`, else
    /// `<tier>+spmv`). `w`'s vectors come back into it on return (see the trait); a stage
    /// timeout on any attempt sets `ctx.host_buffers_busy`.
    ///
    /// # Errors
    /// As [`ProverBackend::compute`]; [`Error::Synthesis`] naming the first failing constraint;
    /// [`Error::Internal`] for a witness of the wrong size.
    fn compute_compiled(
        &self,
        w: &mut Witness,
        cc: &Arc<CompiledCircuit>,
        srs: &Arc<Srs>,
        ctx: &mut PartitionCtx<'_>,
    ) -> Result<MsmResults> {
        cc.check_witness(w)?;
        if cc.layout.num_constraints() == 0 {
            return Err(Error::InvalidInput("a circuit without constraints".into()));
        }
        let asg = Assignment {
            input: std::mem::take(&mut w.input),
            aux: std::mem::take(&mut w.aux),
            a_aux_density: cc.a_aux_density.clone(),
            b_input_density: cc.b_input_density.clone(),
            b_aux_density: cc.b_aux_density.clone(),
            ..Default::default()
        };
        let mut lent = LentAssignment { w, asg };
        self.submit(&mut lent.asg, Some(cc.clone()), srs, ctx)
    }
}
