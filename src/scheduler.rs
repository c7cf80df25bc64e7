//! Partition scheduler: partitions of one or many concurrent proof calls → W workers per device
//! × D devices, with retries and typed failures.
//!
//! - [`Scheduler::submit`] takes one call's partitions (any `Job` type) and returns a
//!   [`CallHandle`]; its results come back in partition order, whatever order they ran in.
//!   Many threads may submit at once; their partitions share one queue.
//! - **Priorities**: [`Scheduler::submit_with_priority`] gives a call's partitions a
//!   [`Priority`] ([`Scheduler::submit`]: [`Priority::Normal`]). The queue is ordered by
//!   priority, then by arrival (first come, first served within a priority): a partition of a
//!   higher priority is dispatched before every queued partition of a lower one, at the next
//!   free worker (running partitions are never interrupted); a worker handed a partition while
//!   a higher-priority one was queued meanwhile runs that one instead. Jobs that go back to the
//!   queue (left out of a batch, a lone batchable job that yields, a retry, a retired device's)
//!   go to the front of their own priority, behind every queued job of a higher one.
//! - Each device has `workers_per_device` worker threads, so at most that many partitions run on
//!   a device at a time. A queued partition goes to the device with the fewest partitions
//!   assigned, ties broken by the most free memory ([`SchedulerConfig::free_memory`]), then the
//!   lowest index.
//! - **Batches**: a worker that takes a partition's first try also takes the queued first tries
//!   with the same [`PartitionExecutor::batch_key`] (routed to its device or anywhere), up to
//!   [`PartitionExecutor::max_batch`], and runs them in one [`PartitionExecutor::run_batch`]
//!   call — the GPU backend's partitions whose L, A and B MSMs read the same streamed bases, so
//!   one upload of the bases serves them all. A job the executor leaves out goes back to the
//!   front of the queue (one that led its batch then runs alone); failed tries are retried
//!   one by one. A batchable first try with no partner yields to a queued job of its priority
//!   or higher that batches with nothing (the GPU backend: an H side), so partners can queue
//!   up meanwhile; with nothing to yield to, it waits up to [`PartitionExecutor::batch_linger`]
//!   for a partner to be submitted. A batch holds jobs of one priority only (its leader's): a lower-priority
//!   partner would add its work to a higher-priority leader's wait for the batch, and a
//!   higher-priority job always leads a batch of its own (the queue gives it to a worker first).
//! - Only the GPU region is limited (to [`SchedulerConfig::gpu_section_permits`] holders, 1 by
//!   default): the executor takes its device's [`GpuSection`] ([`Attempt::enter_gpu`]) around
//!   kernel launches, so one worker's host work (synthesis, uploads, epilogue) overlaps another's
//!   kernels. Time spent waiting for it is measured. A waiter of a higher priority enters before
//!   every waiter of a lower one (a partition of lower priority that leaves the section between
//!   two of its kernels does not get it back while one waits).
//! - Failures (see [`retry_class`]): [`Error::OutOfDeviceMemory`] and [`Error::Cuda`] are retried
//!   on the same device one tier lower than the tier the attempt recorded
//!   ([`Attempt::record_tier`]), then — when no lower tier is left, or the attempt recorded none
//!   (nothing fitted) — on another device that this partition has not exhausted, from the top
//!   tier; [`Error::NoDevice`] / [`Error::DeviceUnsupported`] move to another device at once;
//!   anything else fails the partition at once. A partition fails with its last typed error only
//!   when every device is exhausted; the other partitions of the call are unaffected.
//! - A device fault ([`Error::Cuda`] with `fault: Some(_)`: a sticky CUDA error such as an
//!   illegal address, launch failure or uncorrectable ECC, or a stage past its timeout, see
//!   [`crate::gpu::driver::fault`]) **retires** the device: logged as an error, reported in
//!   [`DeviceStats::retired`] and [`Scheduler::retired_devices`], its queued partitions go back
//!   to the shared queue, and no partition is sent to it again (never retried on that context).
//!   The failed partition moves to another device; when none is left, it and every partition
//!   that can no longer run fail with a typed error (the fault, or [`Error::NoDevice`] naming
//!   the retired devices).
//! - A panic inside the executor is caught and becomes [`Error::Panic`] for that partition; the
//!   worker thread lives on.
//! - Dropping a [`CallHandle`] before it is done cancels the call's partitions that have not
//!   started; dropping the [`Scheduler`] fails the queued partitions with [`Error::Internal`] and
//!   waits for the running ones.

use std::collections::VecDeque;
use std::fmt;
#[cfg(any(test, feature = "internals"))]
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::Priority;
use crate::error::{Error, Result};
use crate::gpu::memory::alloc::{PlanOptions, TierKind};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs one partition on one device. Implemented by the GPU prover (and by fakes in tests).
pub trait PartitionExecutor: Send + Sync + 'static {
    /// One partition's input (e.g. its synthesized assignment and the parameter handle).
    type Job: Send + 'static;
    /// One partition's result (e.g. the Groth16 proof and its report).
    type Output: Send + 'static;

    /// Proves `job` on `attempt.device`. Should plan with `attempt.plan_options(..)` (so a retry
    /// starts one tier lower), call [`Attempt::record_tier`] with the tier it planned, and hold
    /// [`Attempt::enter_gpu`] only around device work.
    ///
    /// # Errors
    /// Any [`Error`]; [`retry_class`] decides what the scheduler does with it. A panic is caught
    /// and treated as [`Error::Panic`] (not retried).
    fn run(&self, attempt: &Attempt<'_>, job: &Self::Job) -> Result<Self::Output>;

    /// The batch `job` may join on `device`: jobs with the same key may run together in one
    /// [`Self::run_batch`] call (the GPU backend: partitions whose remaining MSMs read the same
    /// streamed bases). `None` (the default): it runs alone. Only a job's first try is batched.
    fn batch_key(&self, _device: usize, _job: &Self::Job) -> Option<u64> {
        None
    }

    /// The most jobs one batch holds (default 1: never batch).
    fn max_batch(&self) -> usize {
        1
    }

    /// How long a batchable first try that finds no partner and no other work to yield to
    /// waits for a partner to be submitted before it runs alone (default zero: it runs at
    /// once). The GPU backend's partners are submitted by the engine right after their H side
    /// ends, a moment after the worker that ran it is back for work: without the wait, two
    /// partitions whose H sides ran back to back each stream the L, A, B bases alone.
    fn batch_linger(&self) -> Duration {
        Duration::ZERO
    }

    /// Runs `jobs` (2 to [`Self::max_batch`] of them, one key) together on `attempt.device`
    /// (`attempt` is the first job's try). Returns one entry per job, in order: its result, or
    /// `None` for a job the executor left out, which goes back to the front of the queue (the
    /// first job, if left out, then runs alone, so every batch makes progress). The default
    /// runs the first job alone and leaves the others out.
    fn run_batch(
        &self,
        attempt: &Attempt<'_>,
        jobs: &[&Self::Job],
    ) -> Vec<Option<Result<Self::Output>>> {
        let mut out: Vec<_> = jobs.iter().map(|_| None).collect();
        if let (Some(first), Some(job)) = (out.first_mut(), jobs.first()) {
            *first = Some(self.run(attempt, job));
        }
        out
    }
}

/// A [`PartitionExecutor`] from a closure: `FnExecutor::new(|attempt, job| ...)`.
#[cfg(any(test, feature = "internals"))]
pub struct FnExecutor<J, O, F> {
    f: F,
    _types: PhantomData<fn(J) -> O>,
}

#[cfg(any(test, feature = "internals"))]
impl<J, O, F> FnExecutor<J, O, F>
where
    F: Fn(&Attempt<'_>, &J) -> Result<O> + Send + Sync + 'static,
{
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        FnExecutor {
            f,
            _types: PhantomData,
        }
    }
}

#[cfg(any(test, feature = "internals"))]
impl<J, O, F> PartitionExecutor for FnExecutor<J, O, F>
where
    J: Send + 'static,
    O: Send + 'static,
    F: Fn(&Attempt<'_>, &J) -> Result<O> + Send + Sync + 'static,
{
    type Job = J;
    type Output = O;

    fn run(&self, attempt: &Attempt<'_>, job: &J) -> Result<O> {
        (self.f)(attempt, job)
    }
}

/// What the scheduler does after an attempt failed with an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryClass {
    /// Out of device memory or a CUDA error: a lower tier on the same device, then other devices.
    Resource,
    /// The device cannot be used for this partition: other devices only.
    Device,
    /// The device's context is poisoned or hung (a fault): the device is retired for every
    /// partition; other devices only.
    Retire,
    /// Not retried (input, synthesis, verification, panic, internal errors).
    Fatal,
}

/// Classifies an executor error (see the module documentation).
pub fn retry_class(error: &Error) -> RetryClass {
    match error {
        Error::Cuda { fault: Some(_), .. } => RetryClass::Retire,
        Error::OutOfDeviceMemory { .. } | Error::Cuda { .. } => RetryClass::Resource,
        Error::NoDevice(_) | Error::DeviceUnsupported { .. } => RetryClass::Device,
        _ => RetryClass::Fatal,
    }
}

/// Counters of a [`GpuSection`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuSectionStats {
    /// Holders allowed at once.
    pub permits: usize,
    /// Times the section was entered.
    pub entries: u64,
    /// Total time spent waiting to enter.
    pub total_wait: Duration,
    /// Most holders seen at once (≤ `permits`).
    pub max_inside: usize,
}

/// A counting semaphore around one device's GPU region (kernels and transfers), so workers of
/// the device overlap host work with each other's device work. Entering is measured; a waiter
/// of a higher [`Priority`] enters before every waiter of a lower one.
#[derive(Debug)]
pub struct GpuSection {
    permits: usize,
    inside: Mutex<SectionState>,
    freed: Condvar,
    entries: AtomicU64,
    wait_ns: AtomicU64,
    max_inside: AtomicUsize,
}

impl GpuSection {
    /// A section that `permits` holders (at least 1) may be in at once.
    pub fn new(permits: usize) -> Self {
        GpuSection {
            permits: permits.max(1),
            inside: Mutex::new(SectionState::default()),
            freed: Condvar::new(),
            entries: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            max_inside: AtomicUsize::new(0),
        }
    }

    /// Blocks until a permit is free and no waiter of a higher priority than `priority` is
    /// left, then takes it; the guard gives it back on drop (also when unwinding).
    pub fn enter(&self, priority: Priority) -> GpuSectionGuard<'_> {
        let t0 = Instant::now();
        let mut st = lock(&self.inside);
        if !st.admits(self.permits, priority) {
            st.waiting[priority.index()] += 1;
            while !st.admits(self.permits, priority) {
                st = self.freed.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
            st.waiting[priority.index()] -= 1;
        }
        st.inside += 1;
        self.max_inside.fetch_max(st.inside, Ordering::Relaxed);
        drop(st);
        let waited = t0.elapsed();
        self.entries.fetch_add(1, Ordering::Relaxed);
        self.wait_ns
            .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
        GpuSectionGuard {
            section: self,
            waited,
        }
    }

    /// Counters since creation.
    #[cfg(any(test, feature = "internals"))]
    pub fn stats(&self) -> GpuSectionStats {
        GpuSectionStats {
            permits: self.permits,
            entries: self.entries.load(Ordering::Relaxed),
            total_wait: Duration::from_nanos(self.wait_ns.load(Ordering::Relaxed)),
            max_inside: self.max_inside.load(Ordering::Relaxed),
        }
    }
}

/// Holders of a [`GpuSection`] and its waiters by priority.
#[derive(Debug, Default)]
struct SectionState {
    inside: usize,
    /// Waiters per [`Priority::index`].
    waiting: [usize; Priority::ALL.len()],
}

impl SectionState {
    /// Whether a waiter of `priority` may enter now: a permit is free and no waiter of a higher
    /// priority is there.
    fn admits(&self, permits: usize, priority: Priority) -> bool {
        self.inside < permits && self.waiting[priority.index() + 1..].iter().all(|&n| n == 0)
    }
}

/// A held permit of a [`GpuSection`].
#[derive(Debug)]
pub struct GpuSectionGuard<'a> {
    section: &'a GpuSection,
    waited: Duration,
}

impl GpuSectionGuard<'_> {
    /// How long entering took.
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

impl Drop for GpuSectionGuard<'_> {
    fn drop(&mut self) {
        lock(&self.section.inside).inside -= 1;
        // Every waiter: the one to enter is the first of the highest priority waiting.
        self.section.freed.notify_all();
    }
}

/// One try of one partition on one device, handed to [`PartitionExecutor::run`].
pub struct Attempt<'a> {
    /// CUDA device ordinal to run on.
    pub device: usize,
    /// Worker index on that device, `0..workers_per_device`.
    pub worker: usize,
    /// Call id ([`CallHandle::id`]).
    pub call: u64,
    /// Partition index within the call.
    pub partition: usize,
    /// 0 for the first try of this partition, then 1, 2, … across devices.
    pub number: u32,
    /// Best tier this try may use: [`SchedulerConfig::start_tier`] (default `Resident`) on a
    /// fresh device, one below the tier of the previous failed try on the same device.
    pub start_tier: TierKind,
    /// Error of the previous try, if any.
    // Read by the scheduler's tests; the GPU backend's executor does not need it.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub previous_error: Option<&'a Error>,
    /// The call's priority ([`Scheduler::submit_with_priority`]; a batch's: its leader's).
    pub priority: Priority,
    gpu: &'a GpuSection,
    tier: AtomicU8,
    gpu_wait_ns: AtomicU64,
}

impl fmt::Debug for Attempt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attempt")
            .field("device", &self.device)
            .field("worker", &self.worker)
            .field("call", &self.call)
            .field("partition", &self.partition)
            .field("number", &self.number)
            .field("priority", &self.priority)
            .field("start_tier", &self.start_tier)
            .field("tier", &self.tier())
            .finish()
    }
}

/// A tier as a small number for an atomic (0 = none), by its place in [`TierKind::ALL`].
fn tier_code(t: TierKind) -> u8 {
    TierKind::ALL
        .iter()
        .position(|&k| k == t)
        .map_or(0, |i| i as u8 + 1)
}

fn tier_from_code(c: u8) -> Option<TierKind> {
    TierKind::ALL.get(usize::from(c).checked_sub(1)?).copied()
}

impl<'a> Attempt<'a> {
    /// Planner options for this try: [`Self::start_tier`] and the caller's `params_resident`.
    pub fn plan_options(&self, params_resident: bool) -> PlanOptions {
        PlanOptions {
            start: self.start_tier,
            params_resident,
            ..PlanOptions::default()
        }
    }

    /// Records the tier this try planned, so a failure is retried one tier lower on this device.
    pub fn record_tier(&self, tier: TierKind) {
        self.tier.store(tier_code(tier), Ordering::SeqCst);
    }

    /// The tier recorded so far, if any.
    pub fn tier(&self) -> Option<TierKind> {
        tier_from_code(self.tier.load(Ordering::SeqCst))
    }

    /// Enters this device's GPU section (blocks while other workers hold it, or wait for it with
    /// a higher priority than [`Self::priority`]); the wait is added to [`Self::gpu_wait`] and
    /// to the partition's report.
    pub fn enter_gpu(&self) -> GpuSectionGuard<'a> {
        let g = self.gpu.enter(self.priority);
        self.gpu_wait_ns
            .fetch_add(g.waited().as_nanos() as u64, Ordering::Relaxed);
        g
    }

    /// This try, finished (its `error` if it failed, its wall time `elapsed`): its GPU-section
    /// wait and its record.
    fn finished(&self, error: Option<String>, elapsed: Duration) -> (Duration, AttemptRecord) {
        let record = AttemptRecord {
            device: self.device,
            worker: self.worker,
            start_tier: self.start_tier,
            tier: self.tier(),
            error,
            elapsed,
        };
        (self.gpu_wait(), record)
    }

    /// Total time this try waited for the GPU section.
    pub fn gpu_wait(&self) -> Duration {
        Duration::from_nanos(self.gpu_wait_ns.load(Ordering::Relaxed))
    }
}

/// Returns the free device memory of a CUDA ordinal in bytes (`None`: unknown), used to break
/// ties between equally loaded devices. E.g. `move |d| allocators[d].available().ok()`.
pub type FreeMemoryFn = Arc<dyn Fn(usize) -> Option<u64> + Send + Sync>;

/// Scheduler settings.
#[derive(Clone)]
pub struct SchedulerConfig {
    /// CUDA device ordinals to run on (distinct, at least one).
    pub devices: Vec<usize>,
    /// Worker threads per device = partitions running at once on a device (≥ 1).
    pub workers_per_device: usize,
    /// Holders of a device's [`GpuSection`] at once (default 1).
    pub gpu_section_permits: usize,
    /// Free-memory probe for device choice; `None`: ties go to the lowest index.
    pub free_memory: Option<FreeMemoryFn>,
    /// The tier every partition tries first ([`Attempt::start_tier`] of its first try, and
    /// again after a move to another device); default [`TierKind::Resident`].
    pub start_tier: TierKind,
}

impl fmt::Debug for SchedulerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerConfig")
            .field("devices", &self.devices)
            .field("workers_per_device", &self.workers_per_device)
            .field("gpu_section_permits", &self.gpu_section_permits)
            .field("free_memory", &self.free_memory.is_some())
            .field("start_tier", &self.start_tier)
            .finish()
    }
}

impl SchedulerConfig {
    /// `workers_per_device` workers on each of `devices`, one GPU-section permit, no probe.
    #[cfg(any(test, feature = "internals"))]
    pub fn new(devices: Vec<usize>, workers_per_device: usize) -> Self {
        SchedulerConfig {
            devices,
            workers_per_device,
            gpu_section_permits: 1,
            free_memory: None,
            start_tier: TierKind::Resident,
        }
    }
}

/// One finished (failed or retried) try, for reports and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptRecord {
    /// CUDA device ordinal.
    pub device: usize,
    /// Worker index.
    pub worker: usize,
    /// The try's start tier.
    pub start_tier: TierKind,
    /// The tier it recorded.
    pub tier: Option<TierKind>,
    /// Its error message, `None` when it succeeded.
    pub error: Option<String>,
    /// Wall time of the executor call.
    pub elapsed: Duration,
}

/// The result of one partition with where and how it ran.
#[derive(Debug)]
pub struct PartitionOutcome<O> {
    /// Partition index within the call.
    pub partition: usize,
    /// The executor's output, or the typed error of the last try.
    pub result: Result<O>,
    /// CUDA ordinal of the last try (`None` if it never ran).
    // `device`, `tier` and `gpu_wait`: read by tests and the batch example (`Scheduler::run`).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub device: Option<usize>,
    /// Tier recorded by the last try.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub tier: Option<TierKind>,
    /// Number of tries.
    pub attempts: u32,
    /// Time spent waiting for GPU sections, all tries.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub gpu_wait: Duration,
    /// Every try in order.
    pub history: Vec<AttemptRecord>,
}

struct CallState<O> {
    outcomes: Vec<Option<PartitionOutcome<O>>>,
    remaining: usize,
}

struct CallShared<O> {
    id: u64,
    state: Mutex<CallState<O>>,
    done: Condvar,
    cancelled: AtomicBool,
}

impl<O> CallShared<O> {
    fn deliver(&self, outcome: PartitionOutcome<O>) {
        let mut st = lock(&self.state);
        let i = outcome.partition;
        if st.outcomes[i].is_none() {
            st.remaining -= 1;
        }
        st.outcomes[i] = Some(outcome);
        if st.remaining == 0 {
            self.done.notify_all();
        }
    }
}

/// One call's results, in partition order. Dropping it before completion cancels the call's
/// partitions that have not started.
pub struct CallHandle<O> {
    shared: Arc<CallShared<O>>,
}

impl<O> fmt::Debug for CallHandle<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallHandle")
            .field("id", &self.shared.id)
            .field("len", &self.len())
            .field("completed", &self.completed())
            .finish()
    }
}

impl<O> CallHandle<O> {
    /// Call id (also [`Attempt::call`]).
    #[cfg(any(test, feature = "internals"))]
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// Number of partitions.
    pub fn len(&self) -> usize {
        lock(&self.shared.state).outcomes.len()
    }

    /// Whether the call has no partitions.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Partitions finished so far (succeeded or failed).
    pub fn completed(&self) -> usize {
        let st = lock(&self.shared.state);
        st.outcomes.len() - st.remaining
    }

    /// Whether every partition has finished.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_done(&self) -> bool {
        lock(&self.shared.state).remaining == 0
    }

    /// Waits up to `timeout` for the call to finish; `true` when done.
    #[cfg(any(test, feature = "internals"))]
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let st = lock(&self.shared.state);
        let (st, _) = self
            .shared
            .done
            .wait_timeout_while(st, timeout, |s| s.remaining > 0)
            .unwrap_or_else(PoisonError::into_inner);
        st.remaining == 0
    }

    /// Cancels the partitions that have not started: they finish with [`Error::Internal`]
    /// ("cancelled") without running. Running ones complete.
    pub fn cancel(&self) {
        self.shared.cancelled.store(true, Ordering::SeqCst);
    }

    /// Waits for every partition and returns the outcomes in partition order.
    pub fn wait_outcomes(self) -> Vec<PartitionOutcome<O>> {
        let st = lock(&self.shared.state);
        let mut st = self
            .shared
            .done
            .wait_while(st, |s| s.remaining > 0)
            .unwrap_or_else(PoisonError::into_inner);
        st.outcomes
            .iter_mut()
            .map(|o| o.take().expect("every partition delivered"))
            .collect()
    }

    /// Waits for every partition and returns the results in partition order.
    #[cfg(any(test, feature = "internals"))]
    pub fn wait(self) -> Vec<Result<O>> {
        self.wait_outcomes().into_iter().map(|o| o.result).collect()
    }

    /// Waits for every partition: all outputs in order, or the error of the first failed
    /// partition (by index).
    ///
    /// # Errors
    /// The first failed partition's typed error.
    #[cfg(any(test, feature = "internals"))]
    pub fn join(self) -> Result<Vec<O>> {
        self.wait().into_iter().collect()
    }
}

impl<O> Drop for CallHandle<O> {
    fn drop(&mut self) {
        if lock(&self.shared.state).remaining > 0 {
            self.cancel();
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Any,
    Device(usize),
}

struct Task<J, O> {
    job: J,
    call: Arc<CallShared<O>>,
    partition: usize,
    priority: Priority,
    route: Route,
    start_tier: TierKind,
    exhausted: Vec<bool>,
    last_error: Option<Error>,
    history: Vec<AttemptRecord>,
    gpu_wait: Duration,
    /// Left out of a batch it led: runs alone.
    alone: bool,
}

impl<J, O> Task<J, O> {
    fn finish(self, result: Result<O>, device: Option<usize>, tier: Option<TierKind>) {
        let outcome = PartitionOutcome {
            partition: self.partition,
            result,
            device,
            tier,
            attempts: self.history.len() as u32,
            gpu_wait: self.gpu_wait,
            history: self.history,
        };
        self.call.deliver(outcome);
    }

    fn cancelled(&self) -> bool {
        self.call.cancelled.load(Ordering::SeqCst)
    }

    /// Appends a finished try to the history and adds its GPU-section wait.
    fn record(&mut self, (gpu_wait, record): (Duration, AttemptRecord)) {
        self.gpu_wait += gpu_wait;
        self.history.push(record);
    }

    /// Whether this task may run on device index `di` now: routed there or anywhere, the
    /// device not exhausted for it, the call not cancelled.
    fn runs_on(&self, di: usize) -> bool {
        (self.route == Route::Any || self.route == Route::Device(di))
            && !self.exhausted[di]
            && !self.cancelled()
    }
}

/// The queue of tasks waiting for a worker: by priority (highest first), then in arrival
/// order. Reads go through `Deref`; every insertion keeps that order.
struct Queue<J, O>(VecDeque<Task<J, O>>);

impl<J, O> std::ops::Deref for Queue<J, O> {
    type Target = VecDeque<Task<J, O>>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<J, O> Queue<J, O> {
    fn new() -> Self {
        Queue(VecDeque::new())
    }

    /// Queues a new task: behind every task of its priority or higher.
    fn push_back(&mut self, task: Task<J, O>) {
        let i = self.0.partition_point(|t| t.priority >= task.priority);
        self.0.insert(i, task);
    }

    /// Queues a task again (left out of a batch, yielding, retried, moved off a device): ahead
    /// of every task of its priority or lower, behind those of a higher one.
    fn push_front(&mut self, task: Task<J, O>) {
        let i = self.0.partition_point(|t| t.priority > task.priority);
        self.0.insert(i, task);
    }

    fn remove(&mut self, i: usize) -> Option<Task<J, O>> {
        self.0.remove(i)
    }

    /// The index of the first task of a higher priority than `than` that may run on device
    /// index `di`.
    fn first_above(&self, than: Priority, di: usize) -> Option<usize> {
        self.0
            .iter()
            .take_while(|t| t.priority > than)
            .position(|t| t.runs_on(di))
    }

    /// Routes the tasks bound to device index `di` anywhere, from `start` (the device retired).
    fn unroute(&mut self, di: usize, start: TierKind) {
        for t in self.0.iter_mut() {
            if t.route == Route::Device(di) {
                t.route = Route::Any;
                t.start_tier = start;
            }
        }
    }

    fn drain(&mut self) -> std::collections::vec_deque::Drain<'_, Task<J, O>> {
        self.0.drain(..)
    }
}

/// Per-device counters of a [`Scheduler`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// CUDA ordinal.
    pub device: usize,
    /// Worker threads.
    pub workers: usize,
    /// Partitions that succeeded here.
    pub completed: u64,
    /// Partitions that failed here for good.
    pub failed: u64,
    /// Tries that failed here and were retried (here or elsewhere).
    pub retried: u64,
    /// Partitions running now.
    pub running: usize,
    /// Most partitions seen running at once (≤ `workers` × the executor's
    /// [`PartitionExecutor::max_batch`]: a batch counts each of its partitions).
    pub max_concurrent: usize,
    /// The device's GPU-section counters.
    pub gpu: GpuSectionStats,
    /// The device was retired after a fault (see [`Scheduler::retired_devices`] for why).
    pub retired: bool,
}

/// Counters of a [`Scheduler`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg(any(test, feature = "internals"))]
pub struct SchedulerStats {
    /// Partitions waiting for a worker.
    pub queued: usize,
    /// One entry per device, in [`SchedulerConfig::devices`] order.
    pub devices: Vec<DeviceStats>,
}

struct State<J, O> {
    pending: Queue<J, O>,
    inbox: Vec<VecDeque<Task<J, O>>>,
    /// Assigned (in inbox) + running, per device index.
    load: Vec<usize>,
    stats: Vec<DeviceStats>,
    /// Per device index: why it was retired (the fault's message), `None` while in service.
    retired: Vec<Option<String>>,
    shutdown: bool,
}

struct Shared<E: PartitionExecutor> {
    exec: Arc<E>,
    devices: Vec<usize>,
    workers: usize,
    free_memory: Option<FreeMemoryFn>,
    start_tier: TierKind,
    state: Mutex<State<E::Job, E::Output>>,
    wake: Vec<Condvar>,
    /// Notified when calls submit tasks (a lone batchable try waiting for a partner).
    submitted: Condvar,
    sections: Vec<GpuSection>,
    next_call: AtomicU64,
}

/// One entry per job of a batch: its result, `None` when the executor left it out.
type BatchResults<O> = Vec<Option<Result<O>>>;

/// Tasks to finish with an error outside the lock (see `Shared::dispatch`).
type Doomed<J, O> = Vec<(Task<J, O>, Error)>;

enum Step {
    Retry { route: Route, start: TierKind },
    Fail,
}

/// Decides what follows a failed try on device index `di` that recorded `tier`; `retired` marks
/// the devices out of service; a move to another device starts again at `first` (the
/// scheduler's [`SchedulerConfig::start_tier`]).
fn next_step(
    exhausted: &mut [bool],
    retired: &[Option<String>],
    di: usize,
    error: &Error,
    tier: Option<TierKind>,
    first: TierKind,
) -> Step {
    match retry_class(error) {
        RetryClass::Fatal => return Step::Fail,
        RetryClass::Retire => {}
        RetryClass::Resource if retired[di].is_none() => {
            if let Some(lower) = tier.and_then(TierKind::lower) {
                return Step::Retry {
                    route: Route::Device(di),
                    start: lower,
                };
            }
        }
        RetryClass::Resource | RetryClass::Device => {}
    }
    exhausted[di] = true;
    if exhausted
        .iter()
        .zip(retired)
        .all(|(&x, r)| x || r.is_some())
    {
        Step::Fail
    } else {
        Step::Retry {
            route: Route::Any,
            start: first,
        }
    }
}

impl<E: PartitionExecutor> Shared<E> {
    /// Moves queued tasks to devices with a free worker. Returns the tasks to finish outside
    /// the lock with their error: cancelled ones, and those no device in service can run.
    fn dispatch(&self, st: &mut State<E::Job, E::Output>) -> Doomed<E::Job, E::Output> {
        let mut cancelled = Vec::new();
        let mut free: Vec<Option<Option<u64>>> = vec![None; self.devices.len()];
        let mut i = 0;
        while i < st.pending.len() {
            if st.load.iter().all(|&l| l >= self.workers) {
                break;
            }
            if st.pending[i].cancelled() {
                cancelled.extend(st.pending.remove(i).map(|t| (t, cancelled_error())));
                continue;
            }
            let task = &st.pending[i];
            let runnable = |d: usize| !task.exhausted[d] && st.retired[d].is_none();
            if !(0..self.devices.len()).any(runnable) {
                let mut task = st.pending.remove(i).expect("index in range");
                let e = task.last_error.take().unwrap_or_else(|| {
                    Error::NoDevice(format!(
                        "every device that could run partition {} is retired: {}",
                        task.partition,
                        retired_list(&self.devices, &st.retired)
                    ))
                });
                cancelled.push((task, e));
                continue;
            }
            let candidates: Vec<usize> = (0..self.devices.len())
                .filter(|&d| st.load[d] < self.workers && runnable(d))
                .filter(|&d| task.route == Route::Any || task.route == Route::Device(d))
                .collect();
            let best = if candidates.len() <= 1 {
                candidates.first().copied()
            } else {
                let min_load = candidates.iter().map(|&d| st.load[d]).min().unwrap_or(0);
                let tied: Vec<usize> = candidates
                    .into_iter()
                    .filter(|&d| st.load[d] == min_load)
                    .collect();
                if tied.len() > 1 {
                    if let Some(probe) = &self.free_memory {
                        for &d in &tied {
                            if free[d].is_none() {
                                free[d] = Some(probe(self.devices[d]));
                            }
                        }
                    }
                }
                // most free memory first, then the lowest index
                tied.into_iter()
                    .max_by_key(|&d| (free[d].flatten().unwrap_or(0), std::cmp::Reverse(d)))
            };
            match best {
                Some(d) => {
                    let task = st.pending.remove(i).expect("index in range");
                    st.load[d] += 1;
                    st.inbox[d].push_back(task);
                    self.wake[d].notify_one();
                }
                None => i += 1,
            }
        }
        cancelled
    }

    /// Blocks until the device's inbox has a task (counted as running), `None` at shutdown.
    /// A task of a higher priority queued since the inbox's was assigned (and able to run
    /// here) takes its place: the inbox's goes back to the queue.
    fn next_task(&self, di: usize) -> Option<Task<E::Job, E::Output>> {
        let mut st = lock(&self.state);
        loop {
            if let Some(mut t) = st.inbox[di].pop_front() {
                if let Some(i) = st.pending.first_above(t.priority, di) {
                    let higher = st.pending.remove(i).expect("index in range");
                    st.pending.push_front(std::mem::replace(&mut t, higher));
                }
                let s = &mut st.stats[di];
                s.running += 1;
                s.max_concurrent = s.max_concurrent.max(s.running);
                return Some(t);
            }
            if st.shutdown {
                return None;
            }
            st = self.wake[di]
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// One try of `task` on device index `di`, panics caught; appends to its history.
    fn attempt(
        &self,
        di: usize,
        worker: usize,
        task: &mut Task<E::Job, E::Output>,
    ) -> (Result<E::Output>, Option<TierKind>) {
        let device = self.devices[di];
        let attempt = Attempt {
            device,
            worker,
            call: task.call.id,
            partition: task.partition,
            number: task.history.len() as u32,
            start_tier: task.start_tier,
            previous_error: task.last_error.as_ref(),
            priority: task.priority,
            gpu: &self.sections[di],
            tier: AtomicU8::new(0),
            gpu_wait_ns: AtomicU64::new(0),
        };
        let t0 = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| self.exec.run(&attempt, &task.job)))
            .unwrap_or_else(|p| Err(Error::from_panic(p)));
        let tier = attempt.tier();
        let done = attempt.finished(result.as_ref().err().map(|e| e.to_string()), t0.elapsed());
        task.record(done);
        (result, tier)
    }

    /// Moves queued first tries that may join `task`'s batch on device index `di` (same
    /// [`PartitionExecutor::batch_key`] and priority, routed here or anywhere) into a batch
    /// behind it, up to [`PartitionExecutor::max_batch`]; each counts as running here (the
    /// device's load counts the batch once, so its other workers still get work). When none may
    /// join, a queued job of `task`'s priority or higher that batches with nothing (routed here
    /// or anywhere) runs instead and `task` goes back to the front of its priority in the
    /// queue: it waits for partners while other work of its rank is there, never while only
    /// lower-priority work is.
    fn gather(&self, di: usize, task: Task<E::Job, E::Output>) -> Vec<Task<E::Job, E::Output>> {
        let device = self.devices[di];
        let max = self.exec.max_batch();
        let first_try = |t: &Task<E::Job, E::Output>| {
            t.history.is_empty() && !t.alone && !t.cancelled() && !t.exhausted[di]
        };
        if max < 2 || !first_try(&task) {
            return vec![task];
        }
        let Some(key) = self.exec.batch_key(device, &task.job) else {
            return vec![task];
        };
        let mut batch = vec![task];
        let priority = batch[0].priority;
        let mut st = lock(&self.state);
        let join = |st: &mut State<E::Job, E::Output>, batch: &mut Vec<Task<E::Job, E::Output>>| {
            let mut i = 0;
            while i < st.pending.len() && batch.len() < max {
                let t = &st.pending[i];
                if t.runs_on(di)
                    && t.priority == priority
                    && first_try(t)
                    && self.exec.batch_key(device, &t.job) == Some(key)
                {
                    batch.push(st.pending.remove(i).expect("index in range"));
                } else {
                    i += 1;
                }
            }
        };
        join(&mut st, &mut batch);
        if batch.len() == 1 {
            // A lone batchable first try: a queued job of its priority or higher that batches
            // with nothing (an H side, another proof kind, a retry) runs first, so that partners
            // can queue up meanwhile.
            let other = st.pending.iter().position(|t| {
                t.runs_on(di)
                    && t.priority >= priority
                    && (!first_try(t) || self.exec.batch_key(device, &t.job).is_none())
            });
            if let Some(i) = other {
                let other = st.pending.remove(i).expect("index in range");
                let lone = batch.pop().expect("one task");
                st.pending.push_front(lone);
                return vec![other];
            }
            // Nothing to yield to: wait a moment for a partner about to be submitted.
            let deadline = Instant::now() + self.exec.batch_linger();
            while batch.len() == 1 && !st.shutdown && !batch[0].cancelled() {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                st = self
                    .submitted
                    .wait_timeout(st, deadline - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                join(&mut st, &mut batch);
            }
        }
        let extra = batch.len() - 1;
        let s = &mut st.stats[di];
        s.running += extra;
        s.max_concurrent = s.max_concurrent.max(s.running);
        batch
    }

    /// One try of the batch `tasks` (at least two) on device index `di`, panics caught (the
    /// first task gets the panic, the others run alone). Returns each task's result (`None`:
    /// left out) and the tier the try recorded; appends to the histories of those that ran.
    fn attempt_batch(
        &self,
        di: usize,
        worker: usize,
        tasks: &mut [Task<E::Job, E::Output>],
    ) -> (BatchResults<E::Output>, Option<TierKind>) {
        let device = self.devices[di];
        let first = &tasks[0];
        let attempt = Attempt {
            device,
            worker,
            call: first.call.id,
            partition: first.partition,
            number: 0,
            start_tier: first.start_tier,
            previous_error: None,
            priority: first.priority,
            gpu: &self.sections[di],
            tier: AtomicU8::new(0),
            gpu_wait_ns: AtomicU64::new(0),
        };
        let jobs: Vec<&E::Job> = tasks.iter().map(|t| &t.job).collect();
        let t0 = Instant::now();
        let mut results = catch_unwind(AssertUnwindSafe(|| self.exec.run_batch(&attempt, &jobs)))
            .unwrap_or_else(|p| {
                let mut v: Vec<_> = jobs.iter().map(|_| None).collect();
                v[0] = Some(Err(Error::from_panic(p)));
                v
            });
        let elapsed = t0.elapsed();
        results.resize_with(tasks.len(), || None);
        for (task, result) in tasks.iter_mut().zip(&results) {
            if let Some(result) = result {
                let error = result.as_ref().err().map(|e| e.to_string());
                task.record(attempt.finished(error, elapsed));
            }
        }
        (results, attempt.tier())
    }

    fn worker_loop(&self, di: usize, worker: usize) {
        while let Some(task) = self.next_task(di) {
            let mut batch = self.gather(di, task);
            if batch.len() == 1 {
                let mut task = batch.pop().expect("one task");
                let (result, tier) = if task.cancelled() {
                    (Err(cancelled_error()), None)
                } else {
                    self.attempt(di, worker, &mut task)
                };
                self.settle(di, task, Some(result), tier, true);
            } else {
                let (results, tier) = self.attempt_batch(di, worker, &mut batch);
                let settled: Vec<_> = batch.into_iter().zip(results).enumerate().collect();
                // in reverse: left-out tasks go back to the front of the queue in their order
                for (i, (mut task, result)) in settled.into_iter().rev() {
                    task.alone |= i == 0 && result.is_none();
                    self.settle(di, task, result, tier, i == 0);
                }
            }
        }
    }

    /// After a try of `task` on device index `di` that recorded `tier`: delivers its result,
    /// retries it (see the module documentation) or — `result` `None`, left out of a batch —
    /// puts it back at the front of the queue; then dispatches.
    fn settle(
        &self,
        di: usize,
        mut task: Task<E::Job, E::Output>,
        result: Option<Result<E::Output>>,
        tier: Option<TierKind>,
        lead: bool,
    ) {
        let device = self.devices[di];
        let ran = !task.history.is_empty();
        let mut st = lock(&self.state);
        st.stats[di].running -= 1;
        if lead {
            st.load[di] -= 1;
        }
        // the task to deliver now, if it is not retried
        let done = match result {
            None if st.shutdown => Some((
                task,
                Err(Error::Internal(
                    "scheduler dropped before the partition ran".into(),
                )),
            )),
            None => {
                st.pending.push_front(task);
                None
            }
            Some(Ok(o)) => {
                st.stats[di].completed += 1;
                Some((task, Ok(o)))
            }
            Some(Err(e)) => {
                if retry_class(&e) == RetryClass::Retire && st.retired[di].is_none() {
                    self.retire(&mut st, di, &e);
                }
                let step = if st.shutdown || task.cancelled() {
                    Step::Fail
                } else {
                    next_step(
                        &mut task.exhausted,
                        &st.retired,
                        di,
                        &e,
                        tier,
                        self.start_tier,
                    )
                };
                match step {
                    Step::Retry { route, start } => {
                        st.stats[di].retried += 1;
                        log::warn!(
                            "partition {} of call {} failed on device {device} at tier {}: {e}; retrying {}",
                            task.partition,
                            task.call.id,
                            tier.map_or("none", TierKind::name),
                            match route {
                                Route::Device(_) => format!("on device {device} from tier {start}"),
                                Route::Any => "on another device".to_string(),
                            }
                        );
                        task.route = route;
                        task.start_tier = start;
                        task.last_error = Some(e);
                        st.pending.push_front(task);
                        None
                    }
                    Step::Fail => {
                        if ran {
                            st.stats[di].failed += 1;
                        }
                        Some((task, Err(e)))
                    }
                }
            }
        };
        let cancelled = self.dispatch(&mut st);
        drop(st);
        if let Some((task, result)) = done {
            let dev = ran.then_some(device);
            task.finish(result, dev, tier);
        }
        for (task, e) in cancelled {
            task.finish(Err(e), None, None);
        }
    }

    /// Takes device index `di` out of service after `fault`: logged as an error, its queued
    /// partitions back to the shared queue (dispatched elsewhere by the caller's `dispatch`).
    fn retire(&self, st: &mut State<E::Job, E::Output>, di: usize, fault: &Error) {
        log::error!(
            "device {} retired: {fault}; its partitions move to other devices and it gets no more work",
            self.devices[di]
        );
        st.retired[di] = Some(fault.to_string());
        st.stats[di].retired = true;
        let queued: Vec<_> = st.inbox[di].drain(..).collect();
        st.load[di] -= queued.len();
        // in reverse: they go back to the front of their priority in their order
        for mut t in queued.into_iter().rev() {
            t.route = Route::Any;
            t.start_tier = self.start_tier;
            st.pending.push_front(t);
        }
        st.pending.unroute(di, self.start_tier);
    }
}

/// `device 0 (why), device 2 (why)` for the retired devices.
fn retired_list(devices: &[usize], retired: &[Option<String>]) -> String {
    let v: Vec<String> = devices
        .iter()
        .zip(retired)
        .filter_map(|(d, r)| r.as_ref().map(|r| format!("device {d} ({r})")))
        .collect();
    v.join(", ")
}

fn cancelled_error() -> Error {
    Error::Internal("call cancelled before the partition ran".into())
}

/// The partition scheduler: worker threads over a [`PartitionExecutor`]. Thread-safe; share it
/// (e.g. in an `Arc`) between calling threads.
pub struct Scheduler<E: PartitionExecutor> {
    shared: Arc<Shared<E>>,
    threads: Vec<JoinHandle<()>>,
}

impl<E: PartitionExecutor> fmt::Debug for Scheduler<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("devices", &self.shared.devices)
            .field("workers_per_device", &self.shared.workers)
            .finish()
    }
}

impl<E: PartitionExecutor> Scheduler<E> {
    /// Starts `workers_per_device × devices.len()` worker threads (named `cuzk-dev{D}-w{W}`).
    ///
    /// # Errors
    /// [`Error::NoDevice`] when `devices` is empty; [`Error::InvalidConfig`] for zero workers,
    /// zero permits or a repeated ordinal; [`Error::Io`] when a thread cannot be spawned.
    pub fn new(executor: Arc<E>, config: SchedulerConfig) -> Result<Self> {
        let SchedulerConfig {
            devices,
            workers_per_device,
            gpu_section_permits,
            free_memory,
            start_tier,
        } = config;
        if devices.is_empty() {
            return Err(Error::NoDevice("the scheduler was given no devices".into()));
        }
        let bad = |name: &str, value: String, reason: &str| Error::InvalidConfig {
            name: name.into(),
            value,
            reason: reason.into(),
        };
        if workers_per_device == 0 {
            return Err(bad("workers_per_device", "0".into(), "at least 1"));
        }
        if gpu_section_permits == 0 {
            return Err(bad("gpu_section_permits", "0".into(), "at least 1"));
        }
        let mut sorted = devices.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != devices.len() {
            return Err(bad("devices", format!("{devices:?}"), "distinct ordinals"));
        }
        let n = devices.len();
        let shared = Arc::new(Shared {
            exec: executor,
            workers: workers_per_device,
            free_memory,
            start_tier,
            state: Mutex::new(State {
                pending: Queue::new(),
                inbox: (0..n).map(|_| VecDeque::new()).collect(),
                load: vec![0; n],
                stats: devices
                    .iter()
                    .map(|&device| DeviceStats {
                        device,
                        workers: workers_per_device,
                        ..Default::default()
                    })
                    .collect(),
                retired: vec![None; n],
                shutdown: false,
            }),
            wake: (0..n).map(|_| Condvar::new()).collect(),
            submitted: Condvar::new(),
            sections: (0..n)
                .map(|_| GpuSection::new(gpu_section_permits))
                .collect(),
            devices,
            next_call: AtomicU64::new(1),
        });
        let mut sched = Scheduler {
            shared,
            threads: Vec::with_capacity(n * workers_per_device),
        };
        for di in 0..n {
            for w in 0..workers_per_device {
                let s = Arc::clone(&sched.shared);
                let name = format!("cuzk-dev{}-w{w}", s.devices[di]);
                // on error, `sched` drops here and joins the threads already started
                let h = std::thread::Builder::new()
                    .name(name)
                    .spawn(move || s.worker_loop(di, w))?;
                sched.threads.push(h);
            }
        }
        Ok(sched)
    }

    /// Queues one call's partitions (index = position in `jobs`) at [`Priority::Normal`] and
    /// returns its handle. Never blocks on the work itself.
    // Used by the tests and cuzk's own tools.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    pub fn submit(&self, jobs: Vec<E::Job>) -> CallHandle<E::Output> {
        self.submit_with_priority(Priority::Normal, jobs)
    }

    /// [`Self::submit`] at `priority`: the partitions queue behind those of their priority or
    /// higher and ahead of every queued partition of a lower one (see the module docs).
    pub fn submit_with_priority(
        &self,
        priority: Priority,
        jobs: Vec<E::Job>,
    ) -> CallHandle<E::Output> {
        let id = self.shared.next_call.fetch_add(1, Ordering::Relaxed);
        let n = jobs.len();
        let call = Arc::new(CallShared {
            id,
            state: Mutex::new(CallState {
                outcomes: (0..n).map(|_| None).collect(),
                remaining: n,
            }),
            done: Condvar::new(),
            cancelled: AtomicBool::new(false),
        });
        let nd = self.shared.devices.len();
        let tasks = jobs.into_iter().enumerate().map(|(partition, job)| Task {
            job,
            call: Arc::clone(&call),
            partition,
            priority,
            route: Route::Any,
            start_tier: self.shared.start_tier,
            exhausted: vec![false; nd],
            last_error: None,
            history: Vec::new(),
            gpu_wait: Duration::ZERO,
            alone: false,
        });
        let mut st = lock(&self.shared.state);
        let rejected: Vec<_> = if st.shutdown {
            tasks.collect()
        } else {
            for t in tasks {
                st.pending.push_back(t);
            }
            Vec::new()
        };
        let cancelled = self.shared.dispatch(&mut st);
        drop(st);
        self.shared.submitted.notify_all();
        for t in rejected {
            t.finish(
                Err(Error::Internal("scheduler is shutting down".into())),
                None,
                None,
            );
        }
        for (t, e) in cancelled {
            t.finish(Err(e), None, None);
        }
        CallHandle { shared: call }
    }

    /// [`Self::submit`] and wait: results in partition order.
    #[cfg(any(test, feature = "internals"))]
    pub fn run(&self, jobs: Vec<E::Job>) -> Vec<Result<E::Output>> {
        self.submit(jobs).wait()
    }

    /// CUDA ordinals, in configuration order.
    #[cfg(any(test, feature = "internals"))]
    pub fn devices(&self) -> &[usize] {
        &self.shared.devices
    }

    /// The executor.
    pub fn executor(&self) -> &Arc<E> {
        &self.shared.exec
    }

    /// The devices retired after a fault, with the fault's message, in configuration order.
    #[cfg(any(test, feature = "internals"))]
    pub fn retired_devices(&self) -> Vec<(usize, String)> {
        let st = lock(&self.shared.state);
        self.shared
            .devices
            .iter()
            .zip(&st.retired)
            .filter_map(|(&d, r)| r.clone().map(|r| (d, r)))
            .collect()
    }

    /// Counters now.
    #[cfg(any(test, feature = "internals"))]
    pub fn stats(&self) -> SchedulerStats {
        let st = lock(&self.shared.state);
        SchedulerStats {
            queued: st.pending.len() + st.inbox.iter().map(VecDeque::len).sum::<usize>(),
            devices: st
                .stats
                .iter()
                .zip(&self.shared.sections)
                .map(|(s, g)| DeviceStats {
                    gpu: g.stats(),
                    ..*s
                })
                .collect(),
        }
    }
}

impl<E: PartitionExecutor> Drop for Scheduler<E> {
    fn drop(&mut self) {
        let mut st = lock(&self.shared.state);
        st.shutdown = true;
        let State {
            pending,
            inbox,
            load,
            ..
        } = &mut *st;
        let mut queued: Vec<_> = pending.drain().collect();
        for (d, inbox) in inbox.iter_mut().enumerate() {
            load[d] -= inbox.len();
            queued.extend(inbox.drain(..));
        }
        drop(st);
        for c in &self.shared.wake {
            c.notify_all();
        }
        for t in queued {
            t.finish(
                Err(Error::Internal(
                    "scheduler dropped before the partition ran".into(),
                )),
                None,
                None,
            );
        }
        let me = std::thread::current().id();
        for h in self.threads.drain(..) {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::memory::alloc::{DeviceAllocator, FakeMemInfo, PartitionShape, GIB};
    use std::sync::atomic::AtomicUsize;

    type ExecFn<J, O> = Box<dyn Fn(&Attempt<'_>, &J) -> Result<O> + Send + Sync>;
    type Exec<J, O> = FnExecutor<J, O, ExecFn<J, O>>;

    fn sched<J: Send + 'static, O: Send + 'static>(
        devices: Vec<usize>,
        workers: usize,
        f: impl Fn(&Attempt<'_>, &J) -> Result<O> + Send + Sync + 'static,
    ) -> Scheduler<Exec<J, O>> {
        Scheduler::new(
            Arc::new(FnExecutor::new(Box::new(f) as Box<_>)),
            SchedulerConfig::new(devices, workers),
        )
        .unwrap()
    }

    /// A gate the test opens; jobs block on it.
    #[derive(Default)]
    struct Gate(Mutex<bool>, Condvar);
    impl Gate {
        fn wait(&self) {
            let g = lock(&self.0);
            let _g = self.1.wait_while(g, |open| !*open).unwrap();
        }
        fn open(&self) {
            *lock(&self.0) = true;
            self.1.notify_all();
        }
    }

    fn oom(device: usize) -> Error {
        Error::OutOfDeviceMemory {
            device,
            needed: 10,
            free: 1,
        }
    }

    /// Batches jobs by parity (at most three); job 4 is left out of a batch it does not lead,
    /// job 6 fails its batched try with an out-of-memory error, job 7 has no key. Records
    /// every batch and every lone run.
    #[derive(Default)]
    struct Batcher {
        batches: Mutex<Vec<Vec<u64>>>,
        alone: Mutex<Vec<(u64, u32)>>,
    }

    impl PartitionExecutor for Batcher {
        type Job = u64;
        type Output = u64;

        fn run(&self, a: &Attempt<'_>, job: &u64) -> Result<u64> {
            lock(&self.alone).push((*job, a.number));
            Ok(job * 10)
        }

        fn batch_key(&self, _device: usize, job: &u64) -> Option<u64> {
            (*job != 7).then_some(job % 2)
        }

        fn max_batch(&self) -> usize {
            3
        }

        fn run_batch(&self, a: &Attempt<'_>, jobs: &[&u64]) -> Vec<Option<Result<u64>>> {
            a.record_tier(TierKind::Partial);
            lock(&self.batches).push(jobs.iter().map(|&&j| j).collect());
            jobs.iter()
                .map(|&&j| match j {
                    4 if *jobs[0] != 4 => None,
                    6 => Some(Err(oom(a.device))),
                    _ => Some(Ok(j * 10)),
                })
                .collect()
        }
    }

    #[test]
    fn batches_share_a_key_and_left_out_or_failed_jobs_run_alone() {
        let exec = Arc::new(Batcher::default());
        let s = Scheduler::new(exec.clone(), SchedulerConfig::new(vec![0], 1)).unwrap();
        let outcomes = s.submit((0..10).collect()).wait_outcomes();
        for (j, o) in outcomes.iter().enumerate() {
            assert_eq!(*o.result.as_ref().unwrap(), j as u64 * 10, "job {j}");
        }
        let batches = lock(&exec.batches).clone();
        // one worker, every job queued at once: the first takes the next two even jobs.
        assert_eq!(batches[0], vec![0, 2, 4], "{batches:?}");
        for b in &batches {
            assert!((2..=3).contains(&b.len()), "{batches:?}");
            assert!(b.iter().all(|j| j % 2 == b[0] % 2 && *j != 7), "{batches:?}");
        }
        let mut alone = lock(&exec.alone).clone();
        alone.sort_unstable();
        // 4, left out, leads the next even batch; 6 is retried alone after its batch failed;
        // 7 has no key and 9 no odd first try left to join.
        assert_eq!(batches, vec![vec![0, 2, 4], vec![4, 6, 8], vec![1, 3, 5]]);
        assert_eq!(alone, vec![(6, 1), (7, 0), (9, 0)], "{batches:?}");
        assert_eq!(outcomes[6].attempts, 2);
        assert_eq!(outcomes[6].history[0].tier, Some(TierKind::Partial));
        assert_eq!(outcomes[4].attempts, 1);
        let st = s.stats();
        assert_eq!(st.devices[0].completed, 10);
        assert_eq!(st.devices[0].retried, 1);
        assert_eq!(st.devices[0].running, 0);
        assert!(st.devices[0].max_concurrent >= 3, "{st:?}");
    }

    #[test]
    fn results_in_partition_order_across_three_callers() {
        let s = Arc::new(sched(vec![0, 1], 2, |a: &Attempt<'_>, job: &(u64, u64)| {
            // later partitions finish first
            std::thread::sleep(Duration::from_millis((12 - job.1) % 5));
            let _g = a.enter_gpu();
            Ok(job.0 * 1000 + job.1)
        }));
        let callers: Vec<_> = (0..3u64)
            .map(|c| {
                let s = s.clone();
                std::thread::spawn(move || {
                    let jobs: Vec<_> = (0..12u64).map(|p| (c, p)).collect();
                    s.submit(jobs).join().unwrap()
                })
            })
            .collect();
        for (c, h) in callers.into_iter().enumerate() {
            let want: Vec<u64> = (0..12).map(|p| c as u64 * 1000 + p).collect();
            assert_eq!(h.join().unwrap(), want);
        }
        let stats = s.stats();
        assert_eq!(stats.devices.iter().map(|d| d.completed).sum::<u64>(), 36);
        assert_eq!(stats.queued, 0);
        assert_eq!(stats.devices.iter().map(|d| d.gpu.entries).sum::<u64>(), 36);
    }

    #[test]
    fn empty_call_and_bad_configs() {
        let s = sched(vec![0], 1, |_: &Attempt<'_>, j: &u32| Ok(*j));
        let h = s.submit(vec![]);
        assert!(h.is_empty() && h.is_done());
        assert!(h.wait().is_empty());
        let exec = Arc::new(FnExecutor::new(|_: &Attempt<'_>, j: &u32| Ok(*j)));
        assert!(matches!(
            Scheduler::new(exec.clone(), SchedulerConfig::new(vec![], 1)),
            Err(Error::NoDevice(_))
        ));
        assert!(matches!(
            Scheduler::new(exec.clone(), SchedulerConfig::new(vec![0], 0)),
            Err(Error::InvalidConfig { .. })
        ));
        assert!(matches!(
            Scheduler::new(exec, SchedulerConfig::new(vec![1, 1], 1)),
            Err(Error::InvalidConfig { .. })
        ));
    }

    #[test]
    fn device_that_always_ooms_moves_work_to_the_other_device() {
        // real planner over fake memory: device 0 is a 4 GiB card (2^27 never fits), device 1
        // a 32 GiB card (room for two workers' plans at once)
        let mem = Arc::new(FakeMemInfo::new(&[
            (4 * GIB, 4 * GIB),
            (32 * GIB, 32 * GIB),
        ]));
        let allocs: Arc<Vec<DeviceAllocator>> = Arc::new(
            (0..2)
                .map(|d| DeviceAllocator::new(d, mem.clone(), None))
                .collect(),
        );
        let a2 = allocs.clone();
        let s = sched(vec![0, 1], 2, move |a: &Attempt<'_>, _job: &u32| {
            let plan = a2[a.device].plan(&PartitionShape::porep_32gib(), &a.plan_options(false))?;
            a.record_tier(plan.tier.kind());
            std::thread::sleep(Duration::from_millis(5));
            Ok(plan.tier.kind())
        });
        let outcomes = s.submit((0..8).collect()).wait_outcomes();
        for o in &outcomes {
            let tier = *o.result.as_ref().unwrap();
            assert_eq!(o.device, Some(1));
            assert!(
                matches!(
                    tier,
                    TierKind::FullStaging | TierKind::Partial | TierKind::Streaming
                ),
                "{tier:?}"
            );
            assert_eq!(o.tier, Some(tier));
        }
        // ties go to device 0 first, so some partitions tried it, failed once, and moved
        let moved: Vec<_> = outcomes.iter().filter(|o| o.attempts == 2).collect();
        assert!(!moved.is_empty());
        for o in moved {
            assert_eq!(o.history[0].device, 0);
            assert_eq!(o.history[0].tier, None);
            assert!(o.history[0]
                .error
                .as_ref()
                .unwrap()
                .contains("out of device memory on device 0"));
            assert_eq!(o.history[1].start_tier, TierKind::Resident);
        }
        let st = s.stats();
        assert_eq!((st.devices[0].completed, st.devices[1].completed), (0, 8));
        assert!(st.devices[0].retried >= 1);
        assert_eq!(allocs[0].reserved_bytes() + allocs[1].reserved_bytes(), 0);
    }

    /// A configured start tier is every partition's first try (the tier tests of the batch
    /// example start at `Partial` or `Streaming`).
    #[test]
    fn partitions_start_at_the_configured_tier() {
        let f = |a: &Attempt<'_>, _job: &u32| -> Result<TierKind> {
            a.record_tier(a.start_tier);
            Ok(a.start_tier)
        };
        for start in TierKind::ALL {
            let s = Scheduler::new(
                Arc::new(FnExecutor::new(Box::new(f) as ExecFn<u32, TierKind>)),
                SchedulerConfig {
                    start_tier: start,
                    ..SchedulerConfig::new(vec![0], 2)
                },
            )
            .unwrap();
            for o in s.submit((0..4u32).collect()).wait_outcomes() {
                assert_eq!((o.attempts, o.tier), (1, Some(start)));
                assert_eq!(o.result.unwrap(), start);
            }
        }
        // a move to another device starts there at the configured tier too
        let g = |a: &Attempt<'_>, _job: &u32| -> Result<TierKind> {
            a.record_tier(a.start_tier);
            if a.device == 0 {
                return Err(oom(a.device));
            }
            Ok(a.start_tier)
        };
        let s = Scheduler::new(
            Arc::new(FnExecutor::new(Box::new(g) as ExecFn<u32, TierKind>)),
            SchedulerConfig {
                start_tier: TierKind::Streaming,
                ..SchedulerConfig::new(vec![0, 1], 1)
            },
        )
        .unwrap();
        let outcomes = s.submit((0..4u32).collect()).wait_outcomes();
        assert!(outcomes.iter().any(|o| o.history.len() > 1), "none moved");
        for o in outcomes {
            assert_eq!(o.result.unwrap(), TierKind::Streaming);
            assert!(o
                .history
                .iter()
                .all(|h| h.start_tier == TierKind::Streaming));
        }
    }

    #[test]
    fn partition_that_ooms_everywhere_fails_typed_and_others_complete() {
        let s = sched(vec![3, 5], 2, |a: &Attempt<'_>, job: &u32| {
            if *job == 3 {
                a.record_tier(a.start_tier);
                return Err(oom(a.device));
            }
            std::thread::sleep(Duration::from_millis(2));
            Ok(*job * 2)
        });
        let outcomes = s.submit((0..8).collect()).wait_outcomes();
        for o in &outcomes {
            if o.partition == 3 {
                assert!(matches!(o.result, Err(Error::OutOfDeviceMemory { .. })));
                assert_eq!(o.attempts, 8);
                let first = o.history[0].device;
                let other = if first == 3 { 5 } else { 3 };
                let seq: Vec<_> = o.history.iter().map(|h| (h.device, h.start_tier)).collect();
                let mut want = Vec::new();
                for d in [first, other] {
                    for t in TierKind::ALL {
                        want.push((d, t));
                    }
                }
                assert_eq!(seq, want);
                assert_eq!(o.device, Some(other));
            } else {
                assert_eq!(*o.result.as_ref().unwrap(), o.partition as u32 * 2);
                assert_eq!(o.attempts, 1);
            }
        }
        let st = s.stats();
        assert_eq!(st.devices.iter().map(|d| d.failed).sum::<u64>(), 1);
        assert_eq!(st.devices.iter().map(|d| d.retried).sum::<u64>(), 7);
    }

    #[test]
    fn cuda_error_without_tier_and_unsupported_device_move_on() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c2 = calls.clone();
        let s = sched(
            vec![0, 1],
            1,
            move |a: &Attempt<'_>, _j: &u32| -> Result<()> {
                c2.fetch_add(1, Ordering::SeqCst);
                if a.device == 0 {
                    Err(Error::DeviceUnsupported {
                        device: 0,
                        reason: "sm_52".into(),
                    })
                } else {
                    Err(Error::Cuda {
                        device: 1,
                        call: "cuLaunchKernel".into(),
                        message: "CUDA_ERROR_OUT_OF_RESOURCES (701)".into(),
                        fault: None,
                    })
                }
            },
        );
        let out = s.submit(vec![1]).wait_outcomes();
        // one try per device: no tier recorded, so no lower tier to try
        assert_eq!(out[0].attempts, 2);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(matches!(
            out[0].result,
            Err(Error::Cuda { .. }) | Err(Error::DeviceUnsupported { .. })
        ));
    }

    /// A fake device whose context is poisoned: planning on it returns the driver's sticky error.
    fn poisoned_allocators(n: usize, sick: usize) -> Arc<Vec<DeviceAllocator>> {
        let mem = Arc::new(FakeMemInfo::new(&vec![(24 * GIB, 24 * GIB); n]));
        mem.set_sticky_failure(
            sick,
            "CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access",
        );
        Arc::new(
            (0..n)
                .map(|d| DeviceAllocator::new(d, mem.clone(), None))
                .collect(),
        )
    }

    #[test]
    fn sticky_error_retires_the_device_and_partitions_finish_elsewhere() {
        let allocs = poisoned_allocators(2, 0);
        let tries = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let (a2, t2) = (allocs.clone(), tries.clone());
        let s = sched(vec![0, 1], 1, move |a: &Attempt<'_>, j: &u32| {
            t2[a.device].fetch_add(1, Ordering::SeqCst);
            let plan = a2[a.device].plan(&PartitionShape::porep_32gib(), &a.plan_options(false))?;
            a.record_tier(plan.tier.kind());
            std::thread::sleep(Duration::from_millis(2));
            Ok((*j, a.device))
        });
        let out = s.submit((0..8).collect()).wait_outcomes();
        for (i, o) in out.iter().enumerate() {
            assert_eq!(o.result.as_ref().unwrap(), &(i as u32, 1));
            assert_eq!(o.device, Some(1));
        }
        // the poisoned context was tried once, never again
        assert_eq!(tries[0].load(Ordering::SeqCst), 1);
        assert_eq!(tries[1].load(Ordering::SeqCst), 8);
        let retired = s.retired_devices();
        assert_eq!(retired.len(), 1);
        assert_eq!(retired[0].0, 0);
        assert!(retired[0].1.contains("ILLEGAL_ADDRESS"), "{retired:?}");
        let st = s.stats();
        assert!(st.devices[0].retired && !st.devices[1].retired);
        // later calls never go to device 0 either
        assert!(s.run(vec![9]).into_iter().all(|r| r.unwrap().1 == 1));
        assert_eq!(tries[0].load(Ordering::SeqCst), 1);
    }

    #[test]
    fn sticky_error_on_the_only_device_fails_every_partition_typed() {
        let allocs = poisoned_allocators(1, 0);
        let tries = Arc::new(AtomicUsize::new(0));
        let (a2, t2) = (allocs.clone(), tries.clone());
        let s = sched(vec![0], 2, move |a: &Attempt<'_>, _j: &u32| {
            t2.fetch_add(1, Ordering::SeqCst);
            a2[0].plan(&PartitionShape::porep_32gib(), &a.plan_options(false))?;
            Ok(())
        });
        let out = s.submit((0..5).collect()).wait_outcomes();
        let faults = out
            .iter()
            .filter(|o| {
                matches!(
                    o.result,
                    Err(Error::Cuda {
                        fault: Some(crate::error::DeviceFault::Sticky),
                        ..
                    })
                )
            })
            .count();
        let no_device = out
            .iter()
            .filter(|o| matches!(&o.result, Err(Error::NoDevice(m)) if m.contains("retired")))
            .count();
        // the tries that ran (one, or two when both workers started at once) fail with the
        // fault; the rest never run and fail with NoDevice naming the retired device
        assert_eq!(faults, tries.load(Ordering::SeqCst));
        assert!((1..=2).contains(&faults), "{faults}");
        assert_eq!(faults + no_device, 5);
        // and a new call fails at once, without a try
        let r = s.run(vec![7]);
        assert!(matches!(&r[0], Err(Error::NoDevice(_))));
        assert_eq!(tries.load(Ordering::SeqCst), faults);
    }

    #[test]
    fn hung_stage_times_out_retires_the_device_and_the_partition_moves() {
        let s = sched(vec![0, 1], 1, |a: &Attempt<'_>, _j: &u32| {
            let _d =
                crate::gpu::driver::fault::stage_deadline("msm-h", Some(Duration::from_millis(50)));
            if a.device == 0 {
                // a kernel that never completes: cuEventQuery keeps answering NOT_READY
                let d = crate::gpu::driver::fault::current_deadline().expect("deadline set");
                crate::gpu::driver::fault::wait_until(0, "cuEventQuery", d, || Ok(false))?;
            }
            Ok(a.device)
        });
        let t0 = Instant::now();
        let out = s.submit(vec![1, 2, 3]).wait_outcomes();
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert!(out.iter().all(|o| *o.result.as_ref().unwrap() == 1));
        let hung = out
            .iter()
            .find(|o| o.attempts == 2)
            .expect("one partition hung");
        assert!(hung.history[0].error.as_ref().unwrap().contains("timeout"));
        assert_eq!(s.retired_devices()[0].0, 0);
    }

    #[test]
    fn fatal_errors_are_not_retried() {
        let s = sched(vec![0, 1], 1, |_: &Attempt<'_>, j: &u32| {
            if *j == 1 {
                Err(Error::Synthesis {
                    partition: 1,
                    message: "unsatisfied".into(),
                })
            } else {
                Ok(*j)
            }
        });
        let out = s.submit(vec![0, 1, 2]).wait_outcomes();
        assert_eq!(out[1].attempts, 1);
        assert!(matches!(
            out[1].result,
            Err(Error::Synthesis { partition: 1, .. })
        ));
        assert_eq!(*out[2].result.as_ref().unwrap(), 2);
        assert_eq!(retry_class(&Error::Panic("x".into())), RetryClass::Fatal);
        assert_eq!(retry_class(&oom(0)), RetryClass::Resource);
        assert_eq!(
            retry_class(&Error::NoDevice("x".into())),
            RetryClass::Device
        );
    }

    #[test]
    fn worker_counts_and_gpu_section_are_respected() {
        let cur: Arc<Vec<AtomicUsize>> = Arc::new((0..2).map(|_| AtomicUsize::new(0)).collect());
        let max: Arc<Vec<AtomicUsize>> = Arc::new((0..2).map(|_| AtomicUsize::new(0)).collect());
        let in_gpu: Arc<Vec<AtomicUsize>> = Arc::new((0..2).map(|_| AtomicUsize::new(0)).collect());
        let (c, m, g) = (cur.clone(), max.clone(), in_gpu.clone());
        let s = sched(vec![0, 1], 3, move |a: &Attempt<'_>, _j: &u32| {
            let d = a.device;
            let now = c[d].fetch_add(1, Ordering::SeqCst) + 1;
            m[d].fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(4)); // host work, overlaps
            {
                let _gpu = a.enter_gpu();
                assert_eq!(
                    g[d].fetch_add(1, Ordering::SeqCst),
                    0,
                    "two workers in the GPU section"
                );
                std::thread::sleep(Duration::from_millis(2));
                g[d].fetch_sub(1, Ordering::SeqCst);
            }
            c[d].fetch_sub(1, Ordering::SeqCst);
            Ok(a.gpu_wait())
        });
        let out = s.submit((0..36).collect()).wait_outcomes();
        assert!(out.iter().all(|o| o.result.is_ok()));
        for d in 0..2 {
            assert_eq!(max[d].load(Ordering::SeqCst), 3, "device {d}");
        }
        let st = s.stats();
        for d in &st.devices {
            assert_eq!(d.max_concurrent, 3);
            assert_eq!(d.running, 0);
            assert_eq!(d.gpu.max_inside, 1);
            assert_eq!(d.gpu.permits, 1);
            assert!(d.completed >= 6, "{st:?}");
        }
        assert_eq!(st.devices[0].completed + st.devices[1].completed, 36);
        // three workers per device contend for one GPU section: some waited
        let waited: Duration = out.iter().map(|o| o.gpu_wait).sum();
        assert!(waited > Duration::ZERO);
        assert_eq!(
            waited,
            out.iter().map(|o| *o.result.as_ref().unwrap()).sum()
        );
    }

    #[test]
    fn panicking_job_becomes_an_error_and_workers_survive() {
        let s = sched(vec![0], 2, |_: &Attempt<'_>, j: &u32| {
            if *j == 2 {
                panic!("boom {j}");
            }
            Ok(*j + 10)
        });
        let out = s.submit((0..5).collect()).wait_outcomes();
        match &out[2].result {
            Err(Error::Panic(m)) => assert_eq!(m, "boom 2"),
            other => panic!("expected Panic, got {other:?}"),
        }
        assert_eq!(out[2].attempts, 1);
        for i in [0, 1, 3, 4] {
            assert_eq!(*out[i].result.as_ref().unwrap(), i as u32 + 10);
        }
        // both workers still serve
        assert_eq!(
            s.submit((5..9).collect()).join().unwrap(),
            vec![15, 16, 17, 18]
        );
    }

    #[test]
    fn least_loaded_then_most_free_device() {
        let gate = Arc::new(Gate::default());
        let g2 = gate.clone();
        let exec = Arc::new(FnExecutor::new(move |a: &Attempt<'_>, _j: &u32| {
            g2.wait();
            Ok(a.device)
        }));
        let mut cfg = SchedulerConfig::new(vec![4, 7, 9], 2);
        cfg.free_memory = Some(Arc::new(|d| match d {
            4 => Some(10 * GIB),
            7 => Some(30 * GIB),
            _ => Some(20 * GIB),
        }));
        let s = Scheduler::new(exec, cfg).unwrap();
        // one at a time so the order of assignment is known
        let h1 = s.submit(vec![0]);
        let h2 = s.submit(vec![0]);
        let h3 = s.submit(vec![0]);
        let h4 = s.submit(vec![0]);
        gate.open();
        let got: Vec<usize> = [h1, h2, h3, h4]
            .into_iter()
            .map(|h| h.join().unwrap()[0])
            .collect();
        // 7 (most free), then the idle ones by free memory: 9, 4; then 7 again (all at load 1)
        assert_eq!(got, vec![7, 9, 4, 7]);
    }

    #[test]
    fn dropping_a_handle_cancels_partitions_not_started() {
        let gate = Arc::new(Gate::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let (g2, r2) = (gate.clone(), runs.clone());
        let s = sched(vec![0], 1, move |_: &Attempt<'_>, j: &u32| {
            r2.fetch_add(1, Ordering::SeqCst);
            if *j == 0 {
                g2.wait();
            }
            Ok(*j)
        });
        let h = s.submit((0..5).collect());
        while s.stats().devices[0].running == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(h);
        gate.open();
        assert_eq!(s.submit(vec![7, 8]).join().unwrap(), vec![7, 8]);
        // partition 0 ran, 1..5 were cancelled, then the second call's two
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn dropping_the_scheduler_fails_queued_partitions() {
        let gate = Arc::new(Gate::default());
        let g2 = gate.clone();
        let s = sched(vec![0], 1, move |_: &Attempt<'_>, j: &u32| {
            g2.wait();
            Ok(*j)
        });
        let h = s.submit((0..4).collect());
        while s.stats().devices[0].running == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let opener = {
            let gate = gate.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                gate.open();
            })
        };
        drop(s); // waits for partition 0
        opener.join().unwrap();
        let r = h.wait();
        assert_eq!(*r[0].as_ref().unwrap(), 0);
        for x in &r[1..] {
            assert!(matches!(x, Err(Error::Internal(m)) if m.contains("dropped")));
        }
    }

    #[test]
    fn wait_timeout_reports_progress() {
        let gate = Arc::new(Gate::default());
        let g2 = gate.clone();
        let s = sched(vec![0], 1, move |_: &Attempt<'_>, j: &u32| {
            g2.wait();
            Ok(*j)
        });
        let h = s.submit(vec![1, 2]);
        assert!(!h.wait_timeout(Duration::from_millis(20)));
        assert_eq!(h.completed(), 0);
        gate.open();
        assert!(h.wait_timeout(Duration::from_secs(10)));
        assert_eq!(h.completed(), 2);
        assert_eq!(h.join().unwrap(), vec![1, 2]);
    }

    /// Every job has key 0; a batch runs only its leader (the trait's default `run_batch`,
    /// what the GPU backend does when two partitions' aux do not fit) and leaves the rest out.
    /// Records what runs; with `hold_first`, the first run tells `started` and waits on `go`.
    #[derive(Default)]
    struct LeaderOnly {
        order: Mutex<Vec<u64>>,
        hold_first: bool,
        started: Gate,
        go: Gate,
    }
    impl PartitionExecutor for LeaderOnly {
        type Job = u64;
        type Output = u64;
        fn run(&self, _a: &Attempt<'_>, job: &u64) -> Result<u64> {
            if self.hold_first && lock(&self.order).is_empty() {
                self.started.open();
                self.go.wait();
            }
            lock(&self.order).push(*job);
            Ok(*job)
        }
        fn batch_key(&self, _device: usize, _job: &u64) -> Option<u64> {
            Some(0)
        }
        fn max_batch(&self) -> usize {
            4
        }
    }

    #[test]
    fn left_out_jobs_keep_their_place() {
        let exec = Arc::new(LeaderOnly::default());
        let s = Scheduler::new(exec.clone(), SchedulerConfig::new(vec![0], 1)).unwrap();
        s.submit((0..12).collect()).join().unwrap();
        let order = lock(&exec.order).clone();
        let pos1 = order.iter().position(|&j| j == 1).unwrap();
        // FIFO would run job 1 second; left-out jobs are pushed back reversed and re-gathered
        // behind each new leader, so they run last.
        assert!(pos1 <= 3, "job 1 ran at position {pos1}: order {order:?}");
    }

    /// Every job has key 0 and batches of up to two run together; records each run (the jobs
    /// of one batch, or one alone). Lone first tries wait `linger` for a partner.
    struct Lingering {
        runs: Mutex<Vec<Vec<u64>>>,
        linger: Duration,
    }
    impl PartitionExecutor for Lingering {
        type Job = u64;
        type Output = u64;
        fn run(&self, _a: &Attempt<'_>, job: &u64) -> Result<u64> {
            lock(&self.runs).push(vec![*job]);
            Ok(*job)
        }
        fn batch_key(&self, _device: usize, _job: &u64) -> Option<u64> {
            Some(0)
        }
        fn max_batch(&self) -> usize {
            2
        }
        fn batch_linger(&self) -> Duration {
            self.linger
        }
        fn run_batch(&self, _a: &Attempt<'_>, jobs: &[&u64]) -> Vec<Option<Result<u64>>> {
            lock(&self.runs).push(jobs.iter().map(|&&j| j).collect());
            jobs.iter().map(|&&j| Some(Ok(j))).collect()
        }
    }

    /// Two calls of one job each, the second submitted 100 ms after the first (as the engine
    /// submits a partition's L, A, B part after its H side): with a linger of 5 s the first
    /// waits for the second and both run as one batch, long before the linger ends; with none
    /// each runs alone.
    #[test]
    fn a_lone_batchable_try_waits_for_a_partner_submitted_soon_after() {
        for (linger, expected) in [
            (Duration::from_secs(5), vec![vec![10, 11]]),
            (Duration::ZERO, vec![vec![10], vec![11]]),
        ] {
            let exec = Arc::new(Lingering {
                runs: Mutex::default(),
                linger,
            });
            let s = Scheduler::new(exec.clone(), SchedulerConfig::new(vec![0], 1)).unwrap();
            let t0 = Instant::now();
            let first = s.submit(vec![10]);
            std::thread::sleep(Duration::from_millis(100));
            let second = s.submit(vec![11]);
            assert_eq!(first.join().unwrap(), vec![10]);
            assert_eq!(second.join().unwrap(), vec![11]);
            assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
            assert_eq!(*lock(&exec.runs), expected, "linger {linger:?}");
        }
    }

    /// Key 0 for even jobs, none for odd ones. A batch waits (up to 3 s) for job 7 to run
    /// on the device's other worker; job 1 waits for the batch to start.
    #[derive(Default)]
    struct NeedsOther {
        batch_started: Gate,
        seven_ran: Gate,
        timed_out: AtomicBool,
    }
    impl PartitionExecutor for NeedsOther {
        type Job = u64;
        type Output = u64;
        fn run(&self, _a: &Attempt<'_>, job: &u64) -> Result<u64> {
            match job {
                1 => self.batch_started.wait(),
                7 => self.seven_ran.open(),
                _ => {}
            }
            Ok(*job)
        }
        fn batch_key(&self, _device: usize, job: &u64) -> Option<u64> {
            (job % 2 == 0).then_some(0)
        }
        fn max_batch(&self) -> usize {
            4
        }
        fn run_batch(&self, _a: &Attempt<'_>, jobs: &[&u64]) -> Vec<Option<Result<u64>>> {
            self.batch_started.open();
            let g = lock(&self.seven_ran.0);
            let (_g, r) = self
                .seven_ran
                .1
                .wait_timeout_while(g, Duration::from_secs(3), |open| !*open)
                .unwrap();
            if r.timed_out() {
                self.timed_out.store(true, Ordering::SeqCst);
            }
            jobs.iter().map(|&&j| Some(Ok(j))).collect()
        }
    }

    #[test]
    fn a_batch_does_not_idle_the_other_worker() {
        let exec = Arc::new(NeedsOther::default());
        let s = Scheduler::new(exec.clone(), SchedulerConfig::new(vec![0], 2)).unwrap();
        // 1 and 0 go to the two workers; 0 gathers 2 and 4; 7 stays queued.
        assert_eq!(s.submit(vec![1, 0, 2, 4, 7]).join().unwrap(), vec![1, 0, 2, 4, 7]);
        assert!(
            !exec.timed_out.load(Ordering::SeqCst),
            "job 7 did not run on the idle second worker while the batch ran"
        );
    }

    /// Jobs >= 10 have key 0 (job 11 is left out of its batch); job 100 waits on `z`. The
    /// batch waits on `go` after telling `started`.
    #[derive(Default)]
    struct ShutdownBatch {
        z: Gate,
        started: Gate,
        go: Gate,
    }
    impl PartitionExecutor for ShutdownBatch {
        type Job = u64;
        type Output = u64;
        fn run(&self, _a: &Attempt<'_>, job: &u64) -> Result<u64> {
            if *job == 100 {
                self.z.wait();
            }
            Ok(*job)
        }
        fn batch_key(&self, _device: usize, job: &u64) -> Option<u64> {
            (*job >= 10 && *job < 100).then_some(0)
        }
        fn max_batch(&self) -> usize {
            4
        }
        fn run_batch(&self, _a: &Attempt<'_>, jobs: &[&u64]) -> Vec<Option<Result<u64>>> {
            self.started.open();
            self.go.wait();
            jobs.iter()
                .map(|&&j| (j != 11).then_some(Ok(j)))
                .collect()
        }
    }

    #[test]
    fn shutdown_while_batching_finishes_every_partition() {
        let exec = Arc::new(ShutdownBatch::default());
        let s = Scheduler::new(exec.clone(), SchedulerConfig::new(vec![0, 1], 1)).unwrap();
        // 1 → device 0 (done at once), 100 → device 1 (held on z).
        let h1 = s.submit(vec![1, 100]);
        while h1.completed() < 1 {
            std::thread::sleep(Duration::from_millis(5));
        }
        // 10 → device 0, which gathers 11 and 12 (device 1 is busy).
        let h2 = s.submit(vec![10, 11, 12]);
        exec.started.wait();
        exec.z.open();
        assert!(h1.wait_timeout(Duration::from_secs(10)));
        // device 1 is idle now; drop the scheduler while the batch runs
        let dropper = std::thread::spawn(move || drop(s));
        std::thread::sleep(Duration::from_millis(300));
        exec.go.open();
        dropper.join().unwrap();
        assert!(
            h2.wait_timeout(Duration::from_secs(3)),
            "job 11, left out of a batch during shutdown, was never finished ({} of 3 done)",
            h2.completed()
        );
    }


    /// Jobs ≥ 10 batch together; job 1 (no key) opens `started`, then waits on `gate`.
    /// Records lone runs and batches.
    #[derive(Default)]
    struct Defer {
        started: Gate,
        gate: Gate,
        order: Mutex<Vec<Vec<u64>>>,
    }
    impl PartitionExecutor for Defer {
        type Job = u64;
        type Output = u64;
        fn run(&self, _a: &Attempt<'_>, job: &u64) -> Result<u64> {
            if *job == 1 {
                self.started.open();
                self.gate.wait();
            }
            lock(&self.order).push(vec![*job]);
            Ok(*job)
        }
        fn batch_key(&self, _device: usize, job: &u64) -> Option<u64> {
            (*job >= 10).then_some(0)
        }
        fn max_batch(&self) -> usize {
            4
        }
        fn run_batch(&self, _a: &Attempt<'_>, jobs: &[&u64]) -> Vec<Option<Result<u64>>> {
            lock(&self.order).push(jobs.iter().map(|&&j| j).collect());
            jobs.iter().map(|&&j| Some(Ok(j))).collect()
        }
    }

    #[test]
    fn a_lone_batchable_job_yields_to_other_work_and_gains_a_partner() {
        let exec = Arc::new(Defer::default());
        let s = Scheduler::new(exec.clone(), SchedulerConfig::new(vec![0], 1)).unwrap();
        // 10 has no partner: job 1 (no key) runs first, and 11 arrives meanwhile.
        let h1 = s.submit(vec![10, 1]);
        exec.started.wait();
        let h2 = s.submit(vec![11]);
        exec.gate.open();
        assert_eq!(h1.join().unwrap(), vec![10, 1]);
        assert_eq!(h2.join().unwrap(), vec![11]);
        assert_eq!(*lock(&exec.order), vec![vec![1], vec![10, 11]]);
    }

    /// Every try, in the order they ran: (job, priority, try number).
    type Tries = Arc<Mutex<Vec<(u32, Priority, u32)>>>;

    /// A scheduler of one device with one worker, busy with job 0 ([`held_worker`]).
    struct Held {
        s: Scheduler<Exec<u32, u32>>,
        /// Job 0's call.
        first: CallHandle<u32>,
        /// Lets job 0's first try go on.
        gate: Arc<Gate>,
        tries: Tries,
    }

    /// One device with one worker that records every try; the first try of job 0 holds the
    /// worker until the gate opens, then fails with out of device memory when `fail` is set.
    /// Submits job 0 (NORMAL) and returns once it runs.
    fn held_worker(fail: bool) -> Held {
        let gate = Arc::new(Gate::default());
        let tries = Tries::default();
        let (g2, t2) = (gate.clone(), tries.clone());
        let s = sched(vec![0], 1, move |a: &Attempt<'_>, j: &u32| {
            let held = *j == 0 && a.number == 0;
            if held {
                g2.wait();
            }
            lock(&t2).push((*j, a.priority, a.number));
            if held && fail {
                a.record_tier(a.start_tier);
                return Err(oom(a.device));
            }
            Ok(*j)
        });
        let first = s.submit(vec![0]);
        while s.stats().devices[0].running < 1 {
            std::thread::sleep(Duration::from_millis(1));
        }
        Held {
            s,
            first,
            gate,
            tries,
        }
    }

    #[test]
    fn higher_priorities_run_first_and_each_priority_in_arrival_order() {
        use Priority::{Critical, High, Low, Normal};
        // The worker is busy with job 0 until the gate opens: every call below is queued.
        let Held {
            s,
            first,
            gate,
            tries,
        } = held_worker(false);
        let calls: Vec<(Priority, Vec<u32>)> = vec![
            (Low, vec![40]),
            (Normal, vec![1, 2, 3]),
            (High, vec![20, 21]),
            (Normal, vec![4]),
            (Critical, vec![30]),
            (High, vec![22]),
        ];
        let handles: Vec<_> = calls
            .into_iter()
            .map(|(p, jobs)| s.submit_with_priority(p, jobs))
            .collect();
        assert_eq!(s.stats().queued, 9);
        gate.open();
        assert_eq!(first.join().unwrap(), vec![0]);
        for h in handles {
            h.join().unwrap();
        }
        let order: Vec<u32> = lock(&tries).iter().map(|t| t.0).collect();
        assert_eq!(
            order,
            vec![0, 30, 20, 21, 22, 1, 2, 3, 4, 40],
            "CRITICAL, HIGH, NORMAL, LOW; each in arrival order"
        );
    }

    #[test]
    fn retries_and_left_out_jobs_go_back_behind_higher_priorities() {
        // Job 0's first try fails: retried at the front of NORMAL (ahead of job 1, queued
        // before the failure), behind a HIGH job queued meanwhile.
        let Held {
            s,
            first,
            gate,
            tries,
        } = held_worker(true);
        let normal = s.submit(vec![1]);
        let high = s.submit_with_priority(Priority::High, vec![9]);
        gate.open();
        assert_eq!(first.join().unwrap(), vec![0]);
        assert_eq!(normal.join().unwrap(), vec![1]);
        assert_eq!(high.join().unwrap(), vec![9]);
        assert_eq!(
            *lock(&tries),
            vec![
                (0, Priority::Normal, 0),
                (9, Priority::High, 0),
                (0, Priority::Normal, 1),
                (1, Priority::Normal, 0),
            ]
        );

        // Jobs left out of a NORMAL batch go back behind a CRITICAL job queued while it ran.
        let exec = Arc::new(LeaderOnly {
            hold_first: true,
            ..LeaderOnly::default()
        });
        let s = Scheduler::new(exec.clone(), SchedulerConfig::new(vec![0], 1)).unwrap();
        let normal = s.submit(vec![0, 1, 2, 3]);
        exec.started.wait();
        let critical = s.submit_with_priority(Priority::Critical, vec![100]);
        exec.go.open();
        assert_eq!(normal.join().unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(critical.join().unwrap(), vec![100]);
        let order = lock(&exec.order).clone();
        assert_eq!(order[..2], [0, 100], "{order:?}");
    }

    /// What [`Defer`] runs (lone runs and batches, in order) when `calls` are submitted while
    /// job 1 (no key) holds the only worker.
    fn deferred_order(calls: Vec<(Priority, Vec<u64>)>) -> Vec<Vec<u64>> {
        let exec = Arc::new(Defer::default());
        let s = Scheduler::new(exec.clone(), SchedulerConfig::new(vec![0], 1)).unwrap();
        let hold = s.submit(vec![1]);
        exec.started.wait();
        let handles: Vec<_> = calls
            .into_iter()
            .map(|(p, jobs)| s.submit_with_priority(p, jobs))
            .collect();
        exec.gate.open();
        hold.join().unwrap();
        for h in handles {
            h.join().unwrap();
        }
        let order = lock(&exec.order).clone();
        order
    }

    #[test]
    fn batches_hold_one_priority_and_never_delay_a_higher_one() {
        // Jobs >= 10 batch together: the CRITICAL pair leads its own batch (no NORMAL
        // partner), then NORMAL, then LOW.
        let order = deferred_order(vec![
            (Priority::Normal, vec![10, 11, 12]),
            (Priority::Critical, vec![20, 21]),
            (Priority::Low, vec![30, 31]),
        ]);
        assert_eq!(
            order,
            vec![vec![1], vec![20, 21], vec![10, 11, 12], vec![30, 31]]
        );
    }

    #[test]
    fn a_lone_batchable_job_never_yields_to_a_lower_priority() {
        // A lone CRITICAL batchable job (20) runs at once, though a NORMAL job that batches
        // with nothing (2) is queued: it would yield to that job at its own priority.
        let order = deferred_order(vec![
            (Priority::Normal, vec![2]),
            (Priority::Critical, vec![20]),
        ]);
        assert_eq!(order, vec![vec![1], vec![20], vec![2]]);
    }

    #[test]
    fn the_gpu_section_goes_to_the_highest_priority_waiting() {
        let section = GpuSection::new(1);
        let held = section.enter(Priority::Normal);
        let order = Mutex::new(Vec::new());
        let waiting = |n: usize| {
            while lock(&section.inside).waiting.iter().sum::<usize>() < n {
                std::thread::yield_now();
            }
        };
        std::thread::scope(|s| {
            for (i, (name, p)) in [("normal", Priority::Normal), ("critical", Priority::Critical)]
                .into_iter()
                .enumerate()
            {
                let (section, order) = (&section, &order);
                s.spawn(move || {
                    let _g = section.enter(p);
                    lock(order).push(name);
                    std::thread::sleep(Duration::from_millis(20));
                });
                waiting(i + 1);
            }
            // The holder leaves between two kernels and asks again at once: the CRITICAL
            // waiter goes first, and the holder waits its turn with the other NORMAL one.
            drop(held);
            let _again = section.enter(Priority::Normal);
            lock(&order).push("holder");
        });
        let order = lock(&order).clone();
        assert_eq!(order[0], "critical", "{order:?}");
        assert_eq!(order.len(), 3);
        let st = section.stats();
        assert_eq!((st.entries, st.max_inside), (4, 1));
    }
}
