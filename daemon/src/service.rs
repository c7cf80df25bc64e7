//! The `cuzk.v1.ProvingEngine` service over a [`Scheduler`].

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk::srs_cache::Eviction;
use tonic::{Request, Response, Status};

use crate::error::DaemonError;
use crate::proto::{self, await_proof_response::Status as WireStatus};
use crate::prover::{JobTimings, Prover};
use crate::request::{self, ContentKey, PorepJob, Priority};
use crate::scheduler::{ms, Job, Outcome, Scheduler};

/// The gRPC service.
#[derive(Clone)]
pub struct ProvingService {
    scheduler: Scheduler,
    /// Vanilla-proof checks of PoSt and SnapDeals requests running at once
    /// ([`MAX_POST_CHECKS`]).
    post_checks: Arc<tokio::sync::Semaphore>,
}

/// PoSt and SnapDeals requests whose vanilla proofs are checked at once; later ones wait for a
/// turn. A 32 GiB WindowPoSt partition's check takes about a second of the host's cores and its
/// vanilla proofs' memory, outside the engine's host budget.
pub const MAX_POST_CHECKS: usize = 2;

impl ProvingService {
    /// The service of `scheduler`.
    pub fn new(scheduler: Scheduler) -> Self {
        ProvingService {
            scheduler,
            post_checks: Arc::new(tokio::sync::Semaphore::new(MAX_POST_CHECKS)),
        }
    }

    /// Checks `req` and queues it (see [`Scheduler::submit`]).
    async fn accept(
        &self,
        req: proto::SubmitProofRequest,
        cancel_with_caller: bool,
    ) -> Result<(Arc<Job>, u32), DaemonError> {
        if let Some(kind) = request::post_kind(&req) {
            return self.accept_post(req, kind, cancel_with_caller).await;
        }
        if request::is_snap(&req) {
            return self.accept_snap(req, cancel_with_caller).await;
        }
        let (priority, proof) = request::check_fields(&req)?;
        // Reading and hashing ~50 MB is blocking work: not on the runtime's threads.
        let (key, req) = tokio::task::spawn_blocking(move || {
            request::check_c1(&req.vanilla_proof, req.sector_number, proof)
                .map(|()| (ContentKey::of(&req, u64::from(proof.sector_size())), req))
        })
        .await
        .map_err(|e| DaemonError::Internal(format!("C1 check task: {e}")))??;
        let proto::SubmitProofRequest {
            request_id,
            vanilla_proof,
            sector_number,
            miner_id,
            ..
        } = req;
        let job = PorepJob {
            c1: vanilla_proof,
            sector_number,
            miner_id,
            prover_id: cuzk::c1::prover_id_from_actor_id(miner_id),
            registered_proof: proof,
            priority,
        };
        let (job, pos) = self
            .scheduler
            .submit(&request_id, key, job, cancel_with_caller)?;
        log::info!(
            "job {}: accepted ({proof:?}, sector {sector_number}, miner f0{miner_id}, {:?}, \
             content {key:?}, position {pos})",
            job.id,
            priority
        );
        Ok((job, pos))
    }

    /// [`ProvingService::accept`] of a PoSt request of `kind`: checked and keyed
    /// ([`request::check_post`]), its vanilla proofs checked by the prover
    /// ([`crate::prover::Prover::check_post`]) as [`ProvingService::checked`] does; then queued.
    async fn accept_post(
        &self,
        req: proto::SubmitProofRequest,
        kind: cuzk::ProofKind,
        cancel_with_caller: bool,
    ) -> Result<(Arc<Job>, u32), DaemonError> {
        let request_id = req.request_id.clone();
        let (job, key) = match self
            .checked(
                "PoSt",
                &request_id,
                move || request::check_post(req, kind),
                |p, job| p.check_post(job),
            )
            .await?
        {
            Checked::Attached(found) => return Ok(found),
            Checked::New(job, key) => (job, key),
        };
        let (sectors, miner_id, partition, priority) = (
            job.vanilla_proofs.len(),
            job.miner_id,
            job.partition_index,
            job.priority,
        );
        let (job, pos) = self
            .scheduler
            .submit(&request_id, key, job, cancel_with_caller)?;
        log::info!(
            "job {}: accepted ({kind} {}, partition {partition}, {sectors} sector(s), miner \
             f0{miner_id}, {:?}, content {key:?}, position {pos})",
            job.id,
            job.circuit,
            priority
        );
        Ok((job, pos))
    }

    /// [`ProvingService::accept`] of a SnapDeals request, as [`ProvingService::accept_post`]:
    /// checked and keyed ([`request::check_snap`]), its vanilla proofs and commitments checked
    /// by the prover ([`crate::prover::Prover::check_snap`]); then queued.
    async fn accept_snap(
        &self,
        req: proto::SubmitProofRequest,
        cancel_with_caller: bool,
    ) -> Result<(Arc<Job>, u32), DaemonError> {
        let request_id = req.request_id.clone();
        let (job, key) = match self
            .checked(
                "SnapDeals",
                &request_id,
                move || request::check_snap(req),
                |p, job| p.check_snap(job),
            )
            .await?
        {
            Checked::Attached(found) => return Ok(found),
            Checked::New(job, key) => (job, key),
        };
        let (partitions, sector, miner_id, priority) = (
            job.vanilla_proofs.len(),
            job.sector_number,
            job.miner_id,
            job.priority,
        );
        let (job, pos) = self
            .scheduler
            .submit(&request_id, key, job, cancel_with_caller)?;
        log::info!(
            "job {}: accepted (snap-deals {}, sector {sector}, {partitions} partition(s), miner \
             f0{miner_id}, {:?}, content {key:?}, position {pos})",
            job.id,
            job.circuit,
            priority
        );
        Ok((job, pos))
    }

    /// What [`ProvingService::accept_post`] and [`ProvingService::accept_snap`] share: the
    /// request's own fields checked and keyed by `fields`; the job of the same request id and
    /// content when one answers (a retry of a queued, running or completed job, a full queue
    /// or a stopping daemon: answered without checking the vanilla proofs again); else the
    /// vanilla proofs checked by the prover with `check`, taking a turn among the
    /// [`MAX_POST_CHECKS`] at once. Both checks run on a blocking thread; `what` names the kind
    /// in internal errors.
    async fn checked<J: Send + 'static>(
        &self,
        what: &'static str,
        request_id: &str,
        fields: impl FnOnce() -> Result<(J, ContentKey), DaemonError> + Send + 'static,
        check: impl FnOnce(&dyn Prover, &J) -> Result<(), cuzk::Error> + Send + 'static,
    ) -> Result<Checked<J>, DaemonError> {
        let task = move |e: tokio::task::JoinError| {
            DaemonError::Internal(format!("{what} check task: {e}"))
        };
        let (job, key) = tokio::task::spawn_blocking(fields).await.map_err(task)??;
        if let Some(found) = self.scheduler.would_attach(request_id, key)? {
            return Ok(Checked::Attached(found));
        }
        let turn = self
            .post_checks
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| DaemonError::Internal(format!("{what} check turn: {e}")))?;
        let prover = self.scheduler.prover().clone();
        let job = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            check(prover.as_ref(), &job).map(|()| job)
        })
        .await
        .map_err(task)??;
        Ok(Checked::New(job, key))
    }
}

/// What [`ProvingService::checked`] found.
enum Checked<J> {
    /// The job of the same request id and content, and its queue position.
    Attached((Arc<Job>, u32)),
    /// A new job, checked, and its content key.
    New(J, ContentKey),
}

/// The wire answer of a job's outcome.
fn response(job_id: &str, outcome: &Outcome) -> proto::AwaitProofResponse {
    let mut r = proto::AwaitProofResponse {
        job_id: job_id.to_string(),
        ..Default::default()
    };
    let set_times = |r: &mut proto::AwaitProofResponse, t: &JobTimings| {
        r.queue_wait_ms = ms(t.queue_wait);
        r.srs_load_ms = ms(t.srs_load);
        r.synthesis_ms = ms(t.synthesis);
        r.gpu_compute_ms = ms(t.gpu_compute);
        r.total_ms = ms(t.total);
    };
    match outcome {
        Outcome::Completed { proof, timings } => {
            r.status = WireStatus::Completed as i32;
            r.proof = proof.clone();
            set_times(&mut r, timings);
        }
        Outcome::Failed {
            message, timings, ..
        } => {
            r.status = WireStatus::Failed as i32;
            r.error_message = message.clone();
            set_times(&mut r, timings);
        }
        Outcome::Cancelled { reason } => {
            r.status = WireStatus::Cancelled as i32;
            r.error_message = format!("cancelled: {reason}");
        }
        Outcome::TimedOut { after } => {
            r.status = WireStatus::Timeout as i32;
            r.error_message = format!(
                "the job ran past the daemon's job timeout ({:.0} s)",
                after.as_secs_f64()
            );
        }
    }
    r
}

#[tonic::async_trait]
impl proto::proving_engine_server::ProvingEngine for ProvingService {
    async fn submit_proof(
        &self,
        request: Request<proto::SubmitProofRequest>,
    ) -> Result<Response<proto::SubmitProofResponse>, Status> {
        let (job, pos) = self.accept(request.into_inner(), false).await?;
        Ok(Response::new(proto::SubmitProofResponse {
            job_id: job.id.clone(),
            queue_position: pos,
            assigned_gpu: String::new(),
        }))
    }

    async fn await_proof(
        &self,
        request: Request<proto::AwaitProofRequest>,
    ) -> Result<Response<proto::AwaitProofResponse>, Status> {
        let req = request.into_inner();
        let job = self.scheduler.job(&req.job_id)?;
        let outcome = if req.timeout_ms == 0 {
            Some(job.done().await)
        } else {
            tokio::time::timeout(Duration::from_millis(req.timeout_ms), job.done())
                .await
                .ok()
        };
        Ok(Response::new(match outcome {
            Some(o) => response(&job.id, &o),
            None => proto::AwaitProofResponse {
                job_id: job.id.clone(),
                status: WireStatus::Timeout as i32,
                error_message: format!(
                    "the job did not end within the {} ms of AwaitProof (it goes on)",
                    req.timeout_ms
                ),
                ..Default::default()
            },
        }))
    }

    async fn prove(
        &self,
        request: Request<proto::ProveRequest>,
    ) -> Result<Response<proto::ProveResponse>, Status> {
        let submit = request
            .into_inner()
            .submit
            .ok_or_else(|| DaemonError::InvalidArgument("ProveRequest.submit is missing".into()))?;
        let (job, _) = self.accept(submit, true).await?;
        // Dropped with this future when the caller goes away: then the job is cancelled.
        let _guard = self.scheduler.attach(&job);
        let outcome = job.done().await;
        if let Outcome::Failed { code, message, .. } = &*outcome {
            return Err(Status::new(*code, message.clone()));
        }
        Ok(Response::new(proto::ProveResponse {
            result: Some(response(&job.id, &outcome)),
        }))
    }

    async fn cancel_proof(
        &self,
        request: Request<proto::CancelProofRequest>,
    ) -> Result<Response<proto::CancelProofResponse>, Status> {
        let id = request.into_inner().job_id;
        let was_running = self.scheduler.cancel(&id, "CancelProof")?;
        log::info!("job {id}: CancelProof (was running: {was_running})");
        Ok(Response::new(proto::CancelProofResponse { was_running }))
    }

    async fn get_status(
        &self,
        _request: Request<proto::GetStatusRequest>,
    ) -> Result<Response<proto::GetStatusResponse>, Status> {
        let s = self.scheduler.clone();
        let status = tokio::task::spawn_blocking(move || status(&s))
            .await
            .map_err(|e| DaemonError::Internal(format!("status task: {e}")))?;
        Ok(Response::new(status))
    }

    async fn get_metrics(
        &self,
        _request: Request<proto::GetMetricsRequest>,
    ) -> Result<Response<proto::GetMetricsResponse>, Status> {
        let s = self.scheduler.clone();
        let text = tokio::task::spawn_blocking(move || metrics(&s))
            .await
            .map_err(|e| DaemonError::Internal(format!("metrics task: {e}")))?;
        Ok(Response::new(proto::GetMetricsResponse {
            prometheus_text: text,
        }))
    }

    async fn preload_srs(
        &self,
        request: Request<proto::PreloadSrsRequest>,
    ) -> Result<Response<proto::PreloadSrsResponse>, Status> {
        let id = request.into_inner().circuit_id;
        let set = request::circuit(&id)?;
        let prover = self.scheduler.prover().clone();
        let t = Instant::now();
        let already_loaded = tokio::task::spawn_blocking(move || prover.preload(set))
            .await
            .map_err(|e| DaemonError::Internal(format!("preload task: {e}")))?
            .map_err(DaemonError::Engine)?;
        log::info!(
            "PreloadSRS {id}: {} in {:.2} s",
            if already_loaded {
                "already loaded"
            } else {
                "loaded"
            },
            t.elapsed().as_secs_f64()
        );
        Ok(Response::new(proto::PreloadSrsResponse {
            already_loaded,
            load_time_ms: ms(t.elapsed()),
        }))
    }

    async fn evict_srs(
        &self,
        request: Request<proto::EvictSrsRequest>,
    ) -> Result<Response<proto::EvictSrsResponse>, Status> {
        let id = request.into_inner().circuit_id;
        let set = request::circuit(&id)?;
        let prover = self.scheduler.prover().clone();
        let evicted = tokio::task::spawn_blocking(move || prover.evict(set))
            .await
            .map_err(|e| DaemonError::Internal(format!("evict task: {e}")))?
            .map_err(DaemonError::Engine)?;
        let (was_loaded, freed_bytes) = match evicted {
            Eviction::Evicted { bytes } => (true, bytes),
            Eviction::NotLoaded => (false, 0),
            Eviction::InUse { calls } => {
                return Err(DaemonError::FailedPrecondition(format!(
                    "EvictSRS {id}: the parameters are in use by {calls} proof(s) or load(s); \
                     they can be evicted once idle"
                ))
                .into())
            }
        };
        log::info!(
            "EvictSRS {id}: {}",
            if was_loaded {
                format!("{:.2} GB freed", freed_bytes as f64 / 1e9)
            } else {
                "not loaded".into()
            }
        );
        Ok(Response::new(proto::EvictSrsResponse {
            was_loaded,
            freed_bytes,
        }))
    }
}

/// The `GetStatus` answer.
fn status(s: &Scheduler) -> proto::GetStatusResponse {
    let snap = s.snapshot();
    let prover = s.prover();
    let mem = prover.memory();
    let c = s.counters();
    let running = snap.running_jobs.join(",");
    let kinds = snap
        .running_kinds
        .iter()
        .map(|k| k.as_str_name())
        .collect::<Vec<_>>()
        .join(",");
    let gpus = prover
        .devices()
        .into_iter()
        .map(|d| proto::GpuStatus {
            ordinal: d.ordinal,
            name: d.name,
            vram_total_bytes: d.total_bytes,
            vram_free_bytes: d.free_bytes,
            current_job_id: running.clone(),
            current_proof_kind: kinds.clone(),
        })
        .collect();
    let loaded_srs = prover
        .loaded()
        .into_iter()
        .map(|l| proto::SrsStatus {
            ref_count: snap
                .running_by_circuit
                .get(&l.circuit_id)
                .copied()
                .unwrap_or(0),
            circuit_id: l.circuit_id,
            tier: proto::srs_status::Tier::Hot as i32,
            size_bytes: l.size_bytes,
        })
        .collect();
    // PoRep's entry always (what an idle daemon answers), then one per other kind with jobs.
    // PoRep's running count is the engine calls in progress less the other kinds' jobs.
    let porep = proto::ProofKind::PorepSealCommit;
    let others_running: usize = snap
        .by_kind
        .iter()
        .filter(|(k, _)| **k != porep)
        .map(|(_, (_, r))| r)
        .sum();
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let mut queues = vec![proto::QueueStatus {
        proof_kind: porep.as_str_name().to_string(),
        pending: count(snap.by_kind.get(&porep).map_or(0, |c| c.0)),
        in_progress: count(snap.running.saturating_sub(others_running)),
    }];
    queues.extend(
        snap.by_kind
            .iter()
            .filter(|(k, _)| **k != porep)
            .map(|(k, (p, r))| proto::QueueStatus {
                proof_kind: k.as_str_name().to_string(),
                pending: count(*p),
                in_progress: count(*r),
            }),
    );
    proto::GetStatusResponse {
        gpus,
        loaded_srs,
        queues,
        total_proofs_completed: c.completed.load(Ordering::Relaxed),
        total_proofs_failed: c.failed.load(Ordering::Relaxed),
        uptime_seconds: s.uptime().as_secs(),
        pinned_memory_bytes: mem.used_bytes,
        pinned_memory_limit_bytes: mem.limit_bytes.unwrap_or(0),
    }
}

/// The `GetMetrics` answer (Prometheus text format 0.0.4).
fn metrics(s: &Scheduler) -> String {
    let snap = s.snapshot();
    let prover = s.prover();
    let c = s.counters();
    let mut t = String::with_capacity(4096);
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        let _ = writeln!(t, "# HELP {name} {help}");
        let _ = writeln!(t, "# TYPE {name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(t, "{name}{labels} {v}");
        }
    };
    let one = |v: f64| vec![(String::new(), v)];
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    metric(
        "cuzk_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
        &one(s.uptime().as_secs_f64()),
    );
    metric(
        "cuzk_proofs_completed_total",
        "counter",
        "Proofs completed.",
        &one(load(&c.completed)),
    );
    metric(
        "cuzk_proofs_failed_total",
        "counter",
        "Proof jobs failed.",
        &one(load(&c.failed)),
    );
    metric(
        "cuzk_proofs_cancelled_total",
        "counter",
        "Proof jobs cancelled (CancelProof, or the Prove caller went away).",
        &one(load(&c.cancelled)),
    );
    metric(
        "cuzk_proofs_timed_out_total",
        "counter",
        "Proof jobs ended by the job timeout.",
        &one(load(&c.timed_out)),
    );
    metric(
        "cuzk_queue_depth",
        "gauge",
        "Jobs waiting in the queue, by priority.",
        &Priority::ALL
            .iter()
            .map(|p| {
                (
                    format!("{{priority=\"{}\"}}", p.name()),
                    snap.pending[p.index()] as f64,
                )
            })
            .collect::<Vec<_>>(),
    );
    metric(
        "cuzk_running_jobs",
        "gauge",
        "Engine calls in progress.",
        &one(snap.running as f64),
    );
    metric(
        "cuzk_job_workers",
        "gauge",
        "Jobs of one priority or higher proved at once at most (--jobs).",
        &one(s.config().jobs as f64),
    );
    let names = [
        "queue_wait",
        "srs_load",
        "synthesis",
        "gpu_compute",
        "total",
    ];
    metric(
        "cuzk_proof_phase_seconds_sum",
        "counter",
        "Sum over completed proofs of each timing of AwaitProofResponse (synthesis and \
         gpu_compute summed over partitions).",
        &names
            .iter()
            .zip(&c.sums_ms)
            .map(|(n, v)| (format!("{{phase=\"{n}\"}}"), load(v) / 1000.0))
            .collect::<Vec<_>>(),
    );
    let mem = prover.memory();
    metric(
        "cuzk_host_memory_bytes",
        "gauge",
        "Host memory the engine accounts for (parameters, partitions, pooled buffers).",
        &one(mem.used_bytes as f64),
    );
    metric(
        "cuzk_host_memory_limit_bytes",
        "gauge",
        "The engine's host-memory limit (0: none).",
        &one(mem.limit_bytes.unwrap_or(0) as f64),
    );
    metric(
        "cuzk_srs_loaded_bytes",
        "gauge",
        "Loaded Groth16 parameters, by circuit.",
        &prover
            .loaded()
            .into_iter()
            .map(|l| {
                (
                    format!("{{circuit_id=\"{}\"}}", l.circuit_id),
                    l.size_bytes as f64,
                )
            })
            .collect::<Vec<_>>(),
    );
    let devs = prover.devices();
    metric(
        "cuzk_gpu_memory_free_bytes",
        "gauge",
        "Free device memory, by device.",
        &devs
            .iter()
            .map(|d| (format!("{{gpu=\"{}\"}}", d.ordinal), d.free_bytes as f64))
            .collect::<Vec<_>>(),
    );
    t
}
