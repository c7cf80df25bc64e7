//! The job queue and its workers.
//!
//! Accepted jobs wait in one priority queue (CRITICAL first, first come first served within a
//! priority) and are proved by dedicated worker threads (the engine's calls block; they never
//! run on the async runtime). A job starts when fewer than `jobs` jobs of its priority or higher
//! are running: lower-priority jobs never hold a higher-priority one back (a CRITICAL
//! WinningPoSt starts at once beside two running PoRep jobs, and the engine puts its partitions
//! ahead of theirs, [`cuzk::ProveOptions::priority`]), while jobs of a lower priority wait for
//! those of a higher one to leave room. At most `jobs` × 4 (one `jobs` per priority) engine
//! calls run at once; the engine's gate and host budget bound what they hold. Every accepted job ends in exactly one outcome — completed,
//! failed, cancelled or timed out — which its waiters see through a `watch` channel; a finished
//! job is kept for `retain` so a late `AwaitProof` (or a resubmission of its request) still
//! gets it.
//!
//! Request ids are not unique per input (Curio's `porep-<miner>-<sector>` repeats when a sector is
//! sealed again; every partition of a WindowPoSt deadline shares one id), so a request attaches to
//! an earlier job of its request id only when their [`ContentKey`]s are equal; otherwise it is a
//! new job with an id of its own (see [`Scheduler::submit`]). Job ids are unique among the jobs
//! kept: `AwaitProof` and `CancelProof` look a job up by its id, never by its request id.
//!
//! Cancellation: a queued job is removed and never starts. A running job is reported CANCELLED
//! (or TIMEOUT, or UNAVAILABLE at the end of a shutdown's grace period) at once, and its engine
//! call is told through the job's [`cuzk::CancelToken`]: the engine stops it at its next
//! checkpoint (at 32 GiB within about one partition's GPU section, ~2 s on an H200) and its
//! partitions not yet started never start. The worker is busy, and the status counts the job as
//! in progress, until the call has returned; its result (if it finished anyway) is discarded.

use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::error::DaemonError;
use crate::proto;
use crate::prover::{JobTimings, Prover};
use crate::request::{ContentKey, Priority, ProofJob};

/// Settings of the queue.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// Jobs of one priority or higher proved at once (see the module docs).
    pub jobs: usize,
    /// Most jobs waiting in the queue; more are refused with RESOURCE_EXHAUSTED.
    pub max_queue: usize,
    /// A job not finished this long after its acceptance is ended with TIMEOUT (`None`: never).
    pub job_timeout: Option<Duration>,
    /// How long finished jobs are kept for `AwaitProof`.
    pub retain: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            jobs: 2,
            max_queue: 64,
            job_timeout: None,
            retain: Duration::from_secs(600),
        }
    }
}

/// How a job ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The proof, verified by the engine.
    Completed {
        /// Proof bytes.
        proof: Vec<u8>,
        /// Timings.
        timings: JobTimings,
    },
    /// The engine (or the daemon) failed it.
    Failed {
        /// gRPC code of the error.
        code: tonic::Code,
        /// `cuzk error N: ...` or the daemon's message.
        message: String,
        /// Timings known at the end (queue wait, total).
        timings: JobTimings,
    },
    /// Cancelled before it ended.
    Cancelled {
        /// Why (CancelProof, caller gone, ...).
        reason: String,
    },
    /// Ran past the job timeout.
    TimedOut {
        /// The configured timeout.
        after: Duration,
    },
}

/// Where a job is.
#[derive(Clone, Debug)]
pub enum JobState {
    /// Waiting in the queue.
    Queued,
    /// Being proved since the instant.
    Running(Instant),
    /// Ended.
    Done(Arc<Outcome>),
}

/// One accepted job.
pub struct Job {
    /// Job id: the request id, `<request id>#<n>` when that id was given to a job before, or
    /// `cuzk-job-<n>` for a request without one. Never given to another job.
    pub id: String,
    /// The request id it was submitted under (empty: none given).
    pub request_id: String,
    /// What its proof depends on; a request attaches to it only with an equal key.
    pub key: ContentKey,
    /// Priority.
    pub priority: Priority,
    /// Circuit id of its proof type (`porep-32g`, ...).
    pub circuit: String,
    /// Its proof kind.
    pub kind: proto::ProofKind,
    /// When it was accepted.
    pub accepted: Instant,
    /// Cancel it when its last `Prove` caller goes away (submitted by `Prove`, not `SubmitProof`).
    pub cancel_with_caller: bool,
    seq: u64,
    input: Mutex<Option<ProofJob>>,
    state: watch::Sender<JobState>,
    /// `Prove` calls waiting on the job.
    callers: Mutex<usize>,
    /// Set when the job ends early while running: its engine call stops at a checkpoint.
    cancel: cuzk::CancelToken,
}

impl Job {
    /// Whether a new request may attach to it: it is queued or running, or it completed (a
    /// failed, cancelled or timed-out job is proved again by a new job).
    fn answers(&self) -> bool {
        match self.state() {
            JobState::Queued | JobState::Running(_) => true,
            JobState::Done(o) => matches!(*o, Outcome::Completed { .. }),
        }
    }

    /// The job's state now.
    pub fn state(&self) -> JobState {
        self.state.borrow().clone()
    }

    /// A receiver of the job's state changes.
    pub fn subscribe(&self) -> watch::Receiver<JobState> {
        self.state.subscribe()
    }

    /// Waits until the job ends.
    pub async fn done(&self) -> Arc<Outcome> {
        let mut rx = self.subscribe();
        loop {
            if let JobState::Done(o) = &*rx.borrow_and_update() {
                return o.clone();
            }
            if rx.changed().await.is_err() {
                // The sender lives in the job itself: unreachable while `self` is borrowed.
                return Arc::new(Outcome::Cancelled {
                    reason: "job dropped".into(),
                });
            }
        }
    }
}

/// Queue entry: the highest priority first, then the oldest.
#[derive(PartialEq, Eq)]
struct Entry {
    priority: Priority,
    seq: u64,
    id: String,
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.priority
            .cmp(&other.priority)
            .then(other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Default)]
struct State {
    /// Jobs by job id (unique): queued, running, and finished ones not yet pruned.
    jobs: HashMap<String, Arc<Job>>,
    /// Every job id handed out in the daemon's life: an id names one job only, so a late
    /// `AwaitProof` never gets the proof of a later job that took a finished job's id.
    issued: HashSet<String>,
    /// Queued jobs (a cancelled one stays until popped and is skipped then).
    queue: BinaryHeap<Entry>,
    /// Jobs queued and not cancelled.
    pending: usize,
    /// Engine calls in progress (cancelled jobs' calls included).
    running: usize,
    /// `running` by [`Priority::index`].
    running_by_priority: [usize; Priority::ALL.len()],
    /// Running jobs (not yet ended) by id.
    running_jobs: Vec<String>,
    /// Finished jobs (id, sequence number) in the order they ended, for pruning.
    finished: VecDeque<(Instant, String, u64)>,
    next_seq: u64,
    /// Numbers of the ids the daemon makes (`cuzk-job-<n>`, `<request id>#<n>`).
    next_auto: u64,
    accepting: bool,
    stopping: bool,
}

/// Counters since start.
#[derive(Default)]
pub struct Counters {
    /// Jobs completed.
    pub completed: AtomicU64,
    /// Jobs failed.
    pub failed: AtomicU64,
    /// Jobs cancelled.
    pub cancelled: AtomicU64,
    /// Jobs timed out.
    pub timed_out: AtomicU64,
    /// Sums over completed jobs, milliseconds: queue wait, srs load, synthesis, gpu, total.
    pub sums_ms: [AtomicU64; 5],
}

struct Inner {
    cfg: SchedulerConfig,
    prover: Arc<dyn Prover>,
    state: Mutex<State>,
    /// Workers wait here for work; shutdown waits here for the workers.
    wake: Condvar,
    counters: Counters,
    started: Instant,
}

/// A snapshot of the queue.
#[derive(Clone, Debug, Default)]
pub struct QueueSnapshot {
    /// Queued jobs by priority (index: `Priority as usize - 1`).
    pub pending: [usize; 4],
    /// Engine calls in progress.
    pub running: usize,
    /// Ids of running jobs (not ended), in start order.
    pub running_jobs: Vec<String>,
    /// Running jobs per circuit id.
    pub running_by_circuit: HashMap<String, u32>,
    /// (queued, running) jobs per proof kind, for the kinds that have any.
    pub by_kind: BTreeMap<proto::ProofKind, (usize, usize)>,
    /// The proof kinds of `running_jobs`, in the same order.
    pub running_kinds: Vec<proto::ProofKind>,
}

/// The queue and its workers. Cheap to clone (shared).
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

/// The worker threads of a [`Scheduler`]; joined by [`Workers::join`].
pub struct Workers(Vec<JoinHandle<()>>);

impl Workers {
    /// Waits for every worker to exit (after [`Scheduler::stop`]).
    pub fn join(self) {
        for h in self.0 {
            let _ = h.join();
        }
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while holding the lock cannot leave the state half-updated in a way that matters
    // more than stopping the daemon: keep serving.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Scheduler {
    /// A scheduler proving with `prover`, and its worker threads (started): `cfg.jobs` per
    /// priority, the most engine calls that may run at once.
    pub fn start(cfg: SchedulerConfig, prover: Arc<dyn Prover>) -> (Scheduler, Workers) {
        let threads = cfg.jobs.max(1) * Priority::ALL.len();
        let s = Scheduler {
            inner: Arc::new(Inner {
                cfg,
                prover,
                state: Mutex::new(State {
                    accepting: true,
                    ..State::default()
                }),
                wake: Condvar::new(),
                counters: Counters::default(),
                started: Instant::now(),
            }),
        };
        let workers = (0..threads)
            .map(|i| {
                let s = s.clone();
                std::thread::Builder::new()
                    .name(format!("cuzk-job-{i}"))
                    .spawn(move || s.worker())
                    .expect("spawning a worker thread")
            })
            .collect();
        (s, Workers(workers))
    }

    /// The prover.
    pub fn prover(&self) -> &Arc<dyn Prover> {
        &self.inner.prover
    }

    /// The configuration.
    pub fn config(&self) -> &SchedulerConfig {
        &self.inner.cfg
    }

    /// Counters since start.
    pub fn counters(&self) -> &Counters {
        &self.inner.counters
    }

    /// Time since start.
    pub fn uptime(&self) -> Duration {
        self.inner.started.elapsed()
    }

    /// What [`Self::submit`] would do with a request of `request_id` and `key` before its job
    /// is built: `Some` job (and its queue position) that it attaches to, `None` when it would
    /// queue a new one. For checks too costly to run for a request that attaches or that the
    /// queue refuses (a 32 GiB WindowPoSt's vanilla proofs); [`Self::submit`] decides again.
    ///
    /// # Errors
    /// As [`Self::submit`].
    pub fn would_attach(
        &self,
        request_id: &str,
        key: ContentKey,
    ) -> Result<Option<(Arc<Job>, u32)>, DaemonError> {
        let mut st = lock(&self.inner.state);
        self.attach_or_room(&mut st, request_id, key)
    }

    /// The job a request of `request_id` and `key` attaches to, or `None` when a new job may be
    /// queued (the state lock held).
    fn attach_or_room(
        &self,
        st: &mut State,
        request_id: &str,
        key: ContentKey,
    ) -> Result<Option<(Arc<Job>, u32)>, DaemonError> {
        if !st.accepting {
            return Err(DaemonError::ShuttingDown("no new jobs are accepted".into()));
        }
        self.prune(st);
        if !request_id.is_empty() {
            // At most one job of a request id and key answers: a request attaches to it, or
            // (when none does) becomes one.
            let same = st
                .jobs
                .values()
                .find(|j| j.request_id == request_id && j.key == key && j.answers())
                .cloned();
            if let Some(j) = same {
                let pos = position(st, &j);
                return Ok(Some((j, pos)));
            }
        }
        if st.pending >= self.inner.cfg.max_queue {
            return Err(DaemonError::QueueFull {
                pending: st.pending,
                limit: self.inner.cfg.max_queue,
            });
        }
        Ok(None)
    }

    /// Accepts a job (queued at its priority, [`ProofJob::priority`]), or attaches to an earlier
    /// job of the same request id and an equal content `key` (a retry of the same request) when
    /// that job is queued, running or completed. Returns the job and its queue position.
    ///
    /// A request id with other content is a new job, never the earlier job's result. Its id is
    /// the request id, unless that id was given to a job before: then it is `<request id>#<n>`,
    /// so that a job id names one job in the daemon's life (a late `AwaitProof` never gets a
    /// later job's proof).
    ///
    /// # Errors
    /// [`DaemonError::ShuttingDown`] once [`Scheduler::shutdown`] began;
    /// [`DaemonError::QueueFull`] when `max_queue` jobs are pending.
    pub fn submit(
        &self,
        request_id: &str,
        key: ContentKey,
        job: impl Into<ProofJob>,
        cancel_with_caller: bool,
    ) -> Result<(Arc<Job>, u32), DaemonError> {
        let job: ProofJob = job.into();
        let priority = job.priority();
        let mut st = lock(&self.inner.state);
        if let Some(found) = self.attach_or_room(&mut st, request_id, key)? {
            return Ok(found);
        }
        let id = if request_id.is_empty() {
            self.new_id(&mut st, "cuzk-job-")
        } else if st.issued.contains(request_id) {
            let id = self.new_id(&mut st, &format!("{request_id}#"));
            log::info!(
                "request {request_id}: other content ({key:?}) than job {request_id}: a new job, \
                 {id}"
            );
            id
        } else {
            request_id.to_string()
        };
        st.issued.insert(id.clone());
        let seq = st.next_seq;
        st.next_seq += 1;
        let (tx, _) = watch::channel(JobState::Queued);
        let job = Arc::new(Job {
            id: id.clone(),
            request_id: request_id.to_string(),
            key,
            priority,
            circuit: job.circuit_id(),
            kind: job.proof_kind(),
            accepted: Instant::now(),
            cancel_with_caller,
            seq,
            input: Mutex::new(Some(job)),
            state: tx,
            callers: Mutex::new(0),
            cancel: cuzk::CancelToken::new(),
        });
        st.jobs.insert(id.clone(), job.clone());
        st.queue.push(Entry { priority, seq, id });
        st.pending += 1;
        let pos = position(&st, &job);
        drop(st);
        self.inner.wake.notify_all();
        if let Some(t) = self.inner.cfg.job_timeout {
            self.arm_timeout(&job, t);
        }
        Ok((job, pos))
    }

    /// A job id `<prefix><n>` that no kept job has, `n` counting up over the daemon's life.
    fn new_id(&self, st: &mut State, prefix: &str) -> String {
        loop {
            st.next_auto += 1;
            let id = format!("{prefix}{}", st.next_auto);
            if !st.issued.contains(&id) {
                return id;
            }
        }
    }

    /// Ends `job` with TIMEOUT `t` after its acceptance, unless it ended before.
    fn arm_timeout(&self, job: &Arc<Job>, t: Duration) {
        let s = self.clone();
        let id = job.id.clone();
        let weak = Arc::downgrade(job);
        let run = async move {
            tokio::time::sleep(t).await;
            if let Some(job) = weak.upgrade() {
                s.end_early(&job, Outcome::TimedOut { after: t });
                log::warn!("job {id}: timed out after {t:?}");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(run);
            }
            Err(_) => log::error!("job {}: no runtime for its timeout", job.id),
        }
    }

    /// The job `id`.
    ///
    /// # Errors
    /// [`DaemonError::JobNotFound`].
    pub fn job(&self, id: &str) -> Result<Arc<Job>, DaemonError> {
        let mut st = lock(&self.inner.state);
        self.prune(&mut st);
        st.jobs
            .get(id)
            .cloned()
            .ok_or_else(|| DaemonError::JobNotFound(id.to_string()))
    }

    /// Cancels the job `id`; returns whether it was running. A job that ended is left as it is.
    ///
    /// # Errors
    /// [`DaemonError::JobNotFound`].
    pub fn cancel(&self, id: &str, reason: &str) -> Result<bool, DaemonError> {
        let job = self.job(id)?;
        let was_running = matches!(job.state(), JobState::Running(_));
        self.end_early(
            &job,
            Outcome::Cancelled {
                reason: reason.to_string(),
            },
        );
        Ok(was_running)
    }

    /// Registers a `Prove` caller of `job`; the returned guard cancels the job when the last
    /// caller is dropped before the job ended (and the job was made by `Prove`).
    pub fn attach(&self, job: &Arc<Job>) -> CallerGuard {
        if let Ok(mut n) = job.callers.lock() {
            *n += 1;
        }
        CallerGuard {
            scheduler: self.clone(),
            job: job.clone(),
        }
    }

    /// Ends a queued or running job with `outcome` (a no-op for a job that ended).
    fn end_early(&self, job: &Arc<Job>, outcome: Outcome) {
        let mut st = lock(&self.inner.state);
        match job.state() {
            JobState::Done(_) => return,
            JobState::Queued => return self.end_queued(&mut st, job, outcome),
            JobState::Running(_) => {
                st.running_jobs.retain(|r| r != &job.id);
                job.cancel.cancel();
            }
        }
        self.finish(&mut st, job, outcome);
    }

    /// Ends a queued `job` with `outcome` (the state lock held): out of the pending count, its
    /// C1 output freed now; it never starts.
    fn end_queued(&self, st: &mut State, job: &Arc<Job>, outcome: Outcome) {
        st.pending = st.pending.saturating_sub(1);
        if let Ok(mut i) = job.input.lock() {
            i.take();
        }
        self.finish(st, job, outcome);
    }

    /// Records `outcome` as the end of `job` (the state lock held).
    fn finish(&self, st: &mut State, job: &Arc<Job>, outcome: Outcome) {
        let c = &self.inner.counters;
        match &outcome {
            Outcome::Completed { timings, .. } => {
                c.completed.fetch_add(1, Ordering::Relaxed);
                let t = timings;
                for (sum, d) in c.sums_ms.iter().zip([
                    t.queue_wait,
                    t.srs_load,
                    t.synthesis,
                    t.gpu_compute,
                    t.total,
                ]) {
                    sum.fetch_add(ms(d), Ordering::Relaxed);
                }
            }
            Outcome::Failed { .. } => {
                c.failed.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Cancelled { .. } => {
                c.cancelled.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::TimedOut { .. } => {
                c.timed_out.fetch_add(1, Ordering::Relaxed);
            }
        }
        job.state.send_replace(JobState::Done(Arc::new(outcome)));
        st.finished
            .push_back((Instant::now(), job.id.clone(), job.seq));
        self.inner.wake.notify_all();
    }

    /// Forgets finished jobs older than `retain`.
    fn prune(&self, st: &mut State) {
        let retain = self.inner.cfg.retain;
        while let Some((at, _, _)) = st.finished.front() {
            if at.elapsed() < retain {
                break;
            }
            let Some((_, id, seq)) = st.finished.pop_front() else {
                break;
            };
            // Only if the map still names this job: a newer job may have taken its id (after it
            // failed), and is kept for its own `retain`.
            if st.jobs.get(&id).is_some_and(|j| j.seq == seq) {
                st.jobs.remove(&id);
            }
        }
    }

    /// The queue now.
    pub fn snapshot(&self) -> QueueSnapshot {
        let st = lock(&self.inner.state);
        let mut snap = QueueSnapshot {
            running: st.running,
            running_jobs: st.running_jobs.clone(),
            ..QueueSnapshot::default()
        };
        for e in st.queue.iter() {
            if let Some(j) = st.jobs.get(&e.id) {
                if j.seq == e.seq && matches!(j.state(), JobState::Queued) {
                    snap.pending[e.priority.index()] += 1;
                    snap.by_kind.entry(j.kind).or_default().0 += 1;
                }
            }
        }
        for id in &st.running_jobs {
            if let Some(j) = st.jobs.get(id) {
                *snap
                    .running_by_circuit
                    .entry(j.circuit.clone())
                    .or_default() += 1;
                snap.by_kind.entry(j.kind).or_default().1 += 1;
                snap.running_kinds.push(j.kind);
            }
        }
        snap
    }

    /// Begins a shutdown: no new jobs are accepted, and every queued job fails with
    /// UNAVAILABLE ("not started"); running jobs go on. Returns how many queued jobs failed.
    pub fn shutdown(&self) -> usize {
        let mut st = lock(&self.inner.state);
        st.accepting = false;
        let mut failed = 0;
        while let Some(e) = st.queue.pop() {
            let Some(job) = st.jobs.get(&e.id).cloned() else {
                continue;
            };
            if job.seq != e.seq || !matches!(job.state(), JobState::Queued) {
                continue;
            }
            let timings = JobTimings {
                total: job.accepted.elapsed(),
                queue_wait: job.accepted.elapsed(),
                ..JobTimings::default()
            };
            self.end_queued(
                &mut st,
                &job,
                Outcome::Failed {
                    code: tonic::Code::Unavailable,
                    message: DaemonError::ShuttingDown(
                        "the job had not started; submit it again (to this daemon once restarted, \
                         or to another)"
                            .into(),
                    )
                    .to_string(),
                    timings,
                },
            );
            failed += 1;
        }
        failed
    }

    /// Waits up to `grace` for the running engine calls to return; returns how many are left.
    pub fn wait_idle(&self, grace: Duration) -> usize {
        let deadline = Instant::now() + grace;
        let mut st = lock(&self.inner.state);
        while st.running > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = self
                .inner
                .wake
                .wait_timeout(st, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        st.running
    }

    /// Fails every job still running with UNAVAILABLE (after [`Scheduler::wait_idle`] ran out),
    /// and stops the workers (they exit when their call returns, or at once when idle).
    pub fn stop(&self) {
        let mut st = lock(&self.inner.state);
        st.accepting = false;
        st.stopping = true;
        let running: Vec<String> = std::mem::take(&mut st.running_jobs);
        for id in running {
            if let Some(job) = st.jobs.get(&id).cloned() {
                if matches!(job.state(), JobState::Running(_)) {
                    job.cancel.cancel();
                    let timings = JobTimings {
                        total: job.accepted.elapsed(),
                        ..JobTimings::default()
                    };
                    self.finish(
                        &mut st,
                        &job,
                        Outcome::Failed {
                            code: tonic::Code::Unavailable,
                            message: DaemonError::ShuttingDown(
                                "the job was still running when the shutdown grace period ended"
                                    .into(),
                            )
                            .to_string(),
                            timings,
                        },
                    );
                }
            }
        }
        drop(st);
        self.inner.wake.notify_all();
    }

    /// A worker thread: takes the next job, proves it, records the outcome; until stopped.
    fn worker(&self) {
        loop {
            let (job, input, started) = {
                let mut st = lock(&self.inner.state);
                loop {
                    if st.stopping {
                        return;
                    }
                    if let Some(next) = self.pop(&mut st) {
                        break next;
                    }
                    st = self.inner.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            };
            let result = catch_unwind(AssertUnwindSafe(|| {
                self.inner.prover.prove(&input, &job.cancel)
            }))
            .unwrap_or_else(|p| Err(cuzk::Error::from_panic(p)));
            drop(input);
            let end = Instant::now();
            let mut st = lock(&self.inner.state);
            st.running = st.running.saturating_sub(1);
            let n = &mut st.running_by_priority[job.priority.index()];
            *n = n.saturating_sub(1);
            if matches!(job.state(), JobState::Running(_)) {
                st.running_jobs.retain(|r| r != &job.id);
                let queue_wait = started.saturating_duration_since(job.accepted);
                let total = end.saturating_duration_since(job.accepted);
                let outcome = match result {
                    Ok(out) => {
                        let timings = JobTimings {
                            queue_wait,
                            total,
                            ..JobTimings::from_engine(&out.timings)
                        };
                        log::info!(
                            "job {}: completed in {:.2} s (queue {:.2} s)",
                            job.id,
                            total.as_secs_f64(),
                            queue_wait.as_secs_f64()
                        );
                        Outcome::Completed {
                            proof: out.proof,
                            timings,
                        }
                    }
                    Err(e) => {
                        let e = DaemonError::Engine(e);
                        log::warn!("job {}: failed: {e}", job.id);
                        Outcome::Failed {
                            code: e.code(),
                            message: e.to_string(),
                            timings: JobTimings {
                                queue_wait,
                                total,
                                ..JobTimings::default()
                            },
                        }
                    }
                };
                self.finish(&mut st, &job, outcome);
            } else {
                log::info!(
                    "job {}: engine call returned after the job ended ({}); result discarded",
                    job.id,
                    if result.is_ok() {
                        "proof made"
                    } else {
                        "failed"
                    }
                );
                self.inner.wake.notify_all();
            }
        }
    }

    /// Takes the next queued job and marks it running (the state lock held): the first of the
    /// queue, when fewer than `jobs` jobs of its priority or higher run (else none: no later
    /// job has a higher priority).
    fn pop(&self, st: &mut State) -> Option<(Arc<Job>, ProofJob, Instant)> {
        while let Some(e) = st.queue.peek() {
            let Some(job) = st.jobs.get(&e.id).cloned() else {
                st.queue.pop();
                continue;
            };
            if job.seq != e.seq || !matches!(job.state(), JobState::Queued) {
                st.queue.pop();
                continue;
            }
            let at_or_above: usize = st.running_by_priority[job.priority.index()..].iter().sum();
            if at_or_above >= self.inner.cfg.jobs.max(1) {
                return None;
            }
            st.queue.pop();
            // Past its job timeout (its timer not yet run): it ends as TIMEOUT, never starts.
            if let Some(t) = self.inner.cfg.job_timeout {
                if job.accepted.elapsed() >= t {
                    self.end_queued(st, &job, Outcome::TimedOut { after: t });
                    log::warn!("job {}: timed out after {t:?} (before it started)", job.id);
                    continue;
                }
            }
            let Some(input) = job.input.lock().ok().and_then(|mut i| i.take()) else {
                continue;
            };
            st.pending = st.pending.saturating_sub(1);
            st.running += 1;
            st.running_by_priority[job.priority.index()] += 1;
            st.running_jobs.push(job.id.clone());
            let now = Instant::now();
            job.state.send_replace(JobState::Running(now));
            log::info!(
                "job {}: started ({:?}, waited {:.2} s)",
                job.id,
                job.priority,
                now.saturating_duration_since(job.accepted).as_secs_f64()
            );
            return Some((job, input, now));
        }
        None
    }
}

/// Queued jobs that start before `job` (0 for a job that is not queued).
fn position(st: &State, job: &Job) -> u32 {
    if !matches!(job.state(), JobState::Queued) {
        return 0;
    }
    let key = Entry {
        priority: job.priority,
        seq: job.seq,
        id: String::new(),
    };
    let ahead = st
        .queue
        .iter()
        .filter(|e| {
            Ord::cmp(*e, &key) == std::cmp::Ordering::Greater
                && st
                    .jobs
                    .get(&e.id)
                    .is_some_and(|j| j.seq == e.seq && matches!(j.state(), JobState::Queued))
        })
        .count();
    u32::try_from(ahead).unwrap_or(u32::MAX)
}

/// Whole milliseconds of `d` (saturating).
pub fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Held by a `Prove` call while it waits; see [`Scheduler::attach`].
pub struct CallerGuard {
    scheduler: Scheduler,
    job: Arc<Job>,
}

impl Drop for CallerGuard {
    fn drop(&mut self) {
        let last = match self.job.callers.lock() {
            Ok(mut n) => {
                *n = n.saturating_sub(1);
                *n == 0
            }
            Err(_) => false,
        };
        if last && self.job.cancel_with_caller && !matches!(self.job.state(), JobState::Done(_)) {
            log::warn!(
                "job {}: its Prove caller went away (deadline, cancel or disconnect): cancelling",
                self.job.id
            );
            self.scheduler.end_early(
                &self.job,
                Outcome::Cancelled {
                    reason: "the Prove caller went away (deadline, cancel or disconnect)".into(),
                },
            );
        }
    }
}
