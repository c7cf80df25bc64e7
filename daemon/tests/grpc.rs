//! The daemon through a real gRPC client (tonic), with a scripted fake prover: priority order,
//! cancellation, a caller that goes away, timeouts, bad input, a full queue, error codes,
//! request ids (attached to only by the same content), status, metrics and graceful shutdown.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use cuzk_daemon::proto::await_proof_response::Status as JobStatus;
use cuzk_daemon::proto::{self, Priority};
use cuzk_daemon::scheduler::SchedulerConfig;
use cuzk_daemon::{Daemon, DaemonConfig};
use tonic::Code;

async fn daemon(prover: &Arc<FakeProver>, cfg: SchedulerConfig) -> Daemon {
    daemon_with(prover, cfg, |_| {}).await
}

async fn daemon_with(
    prover: &Arc<FakeProver>,
    cfg: SchedulerConfig,
    edit: impl FnOnce(&mut DaemonConfig),
) -> Daemon {
    let _ = env_logger::builder().is_test(true).try_init();
    let mut c = DaemonConfig {
        listen: vec!["127.0.0.1:0".into()],
        scheduler: cfg,
        ..DaemonConfig::default()
    };
    edit(&mut c);
    Daemon::start(c, prover.clone()).await.expect("daemon")
}

fn one_job() -> SchedulerConfig {
    SchedulerConfig {
        jobs: 1,
        ..SchedulerConfig::default()
    }
}

async fn await_job(
    c: &mut proto::proving_engine_client::ProvingEngineClient<tonic::transport::Channel>,
    id: &str,
) -> proto::AwaitProofResponse {
    c.await_proof(proto::AwaitProofRequest {
        job_id: id.into(),
        timeout_ms: 10_000,
    })
    .await
    .expect("await")
    .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_start_by_priority_then_in_arrival_order() {
    let p = FakeProver::new();
    let d = daemon(&p, one_job()).await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    // CRITICAL: every later job waits for it (a job of a lower priority would not hold them).
    let blocker = c
        .submit_proof(request(1, Priority::Critical, "blocker"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(blocker.job_id, "blocker");
    assert_eq!(p.wait_started(1), vec![1]);
    // Queued behind the blocker, in this order: positions count the jobs that start earlier.
    let mut ids = Vec::new();
    for (sector, prio, want_pos) in [
        (2, Priority::Low, 0),
        (3, Priority::Normal, 0),
        (4, Priority::High, 0),
        (5, Priority::Critical, 0),
        (6, Priority::Normal, 3), // after CRITICAL 5, HIGH 4 and the earlier NORMAL 3
        (7, Priority::Unspecified, 4), // PoRep's default: NORMAL
    ] {
        let r = c
            .submit_proof(request(sector, prio, ""))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.queue_position, want_pos, "sector {sector}");
        assert!(r.job_id.starts_with("cuzk-job-"), "{}", r.job_id);
        ids.push((sector, r.job_id));
    }
    let st = c
        .get_status(proto::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.queues.len(), 1);
    assert_eq!(st.queues[0].proof_kind, "POREP_SEAL_COMMIT");
    assert_eq!((st.queues[0].pending, st.queues[0].in_progress), (6, 1));
    assert_eq!(
        (st.pinned_memory_bytes, st.pinned_memory_limit_bytes),
        (123, 456)
    );
    p.release_all();
    for (sector, id) in &ids {
        let r = await_job(&mut c, id).await;
        assert_eq!(r.status, JobStatus::Completed as i32, "{r:?}");
        assert_eq!(r.proof, fake_proof(*sector));
        assert_eq!((r.synthesis_ms, r.gpu_compute_ms), (40, 30));
        assert!(r.total_ms >= r.queue_wait_ms, "{r:?}");
    }
    assert_eq!(p.started(), vec![1, 5, 4, 3, 6, 7, 2]);
    let st = c
        .get_status(proto::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.total_proofs_completed, 7);
    assert_eq!((st.queues[0].pending, st.queues[0].in_progress), (0, 0));
    d.shutdown().await;
}

/// With `--jobs 2` taken by two NORMAL PoRep jobs, a CRITICAL and a HIGH job start at once
/// beside them (the engine gets each job's priority and orders their partitions); a job waits
/// only for `--jobs` jobs of its priority or higher.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_job_starts_beside_running_lower_ones() {
    let p = FakeProver::new();
    let two = SchedulerConfig {
        jobs: 2,
        ..SchedulerConfig::default()
    };
    let d = daemon(&p, two).await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    let submit = |sector, prio| {
        let mut c = c.clone();
        async move {
            c.submit_proof(request(sector, prio, ""))
                .await
                .unwrap()
                .into_inner()
                .queue_position
        }
    };
    submit(1, Priority::Normal).await;
    submit(2, Priority::Normal).await;
    assert_eq!(p.wait_started(2), vec![1, 2]);
    // Both --jobs are NORMAL: another NORMAL job and a LOW one wait.
    assert_eq!(submit(3, Priority::Normal).await, 0);
    assert_eq!(submit(4, Priority::Low).await, 1);
    // CRITICAL and HIGH do not.
    assert_eq!(submit(5, Priority::Critical).await, 0);
    assert_eq!(p.wait_started(3), vec![1, 2, 5]);
    submit(6, Priority::High).await;
    assert_eq!(p.wait_started(4), vec![1, 2, 5, 6]);
    // Two of HIGH or higher run: a second HIGH waits for one of them, ahead of NORMAL 3.
    assert_eq!(submit(7, Priority::High).await, 0);
    let st = c
        .get_status(proto::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!((st.queues[0].pending, st.queues[0].in_progress), (3, 4));
    p.release(5);
    assert_eq!(p.wait_started(5), vec![1, 2, 5, 6, 7]);
    p.release_all();
    p.wait_finished(4);
    assert_eq!(p.started(), vec![1, 2, 5, 6, 7, 3, 4]);
    use cuzk::Priority as P;
    let mut given = p.priorities();
    given.sort_unstable();
    assert_eq!(
        given,
        vec![
            (1, P::Normal),
            (2, P::Normal),
            (3, P::Normal),
            (4, P::Low),
            (5, P::Critical),
            (6, P::High),
            (7, P::High),
        ],
        "the engine calls got their requests' priorities"
    );
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_and_running_jobs_cancel() {
    let p = FakeProver::new();
    let d = daemon(&p, one_job()).await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    // CRITICAL, so that the next CRITICAL job waits for it.
    c.submit_proof(request(1, Priority::Critical, "run"))
        .await
        .unwrap();
    p.wait_started(1);
    c.submit_proof(request(2, Priority::Critical, "queued"))
        .await
        .unwrap();
    let r = c
        .cancel_proof(proto::CancelProofRequest {
            job_id: "queued".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!r.was_running);
    let r = await_job(&mut c, "queued").await;
    assert_eq!(r.status, JobStatus::Cancelled as i32, "{r:?}");
    assert!(r.proof.is_empty());
    // The running one: CANCELLED at once, and its engine call stops at its next checkpoint
    // (the fake's is a poll of the token): the worker is free without the call being released.
    let r = c
        .cancel_proof(proto::CancelProofRequest {
            job_id: "run".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.was_running);
    let r = await_job(&mut c, "run").await;
    assert_eq!(r.status, JobStatus::Cancelled as i32, "{r:?}");
    p.wait_finished(1);
    assert_eq!(
        p.cancelled(),
        vec![1],
        "the engine call saw its cancel token"
    );
    // The worker is back: nothing in progress (polled: the worker records the return after the
    // call came back).
    let mut idle = false;
    for _ in 0..200 {
        let st = c
            .get_status(proto::GetStatusRequest {})
            .await
            .unwrap()
            .into_inner();
        if (st.queues[0].pending, st.queues[0].in_progress) == (0, 0) {
            idle = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(idle, "the cancelled job's worker is free again");
    // Cancelling again, or a finished job: no change, no error.
    assert!(
        !c.cancel_proof(proto::CancelProofRequest {
            job_id: "queued".into()
        })
        .await
        .unwrap()
        .into_inner()
        .was_running
    );
    let e = c
        .cancel_proof(proto::CancelProofRequest {
            job_id: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // The daemon goes on: the cancelled job stays cancelled, the next job proves.
    assert_eq!(
        await_job(&mut c, "run").await.status,
        JobStatus::Cancelled as i32
    );
    p.release(3);
    let r = c
        .prove(proto::ProveRequest {
            submit: Some(request(3, Priority::Normal, "after")),
        })
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert_eq!(r.status, JobStatus::Completed as i32);
    assert_eq!(r.proof, fake_proof(3));
    assert_eq!(
        p.started(),
        vec![1, 3],
        "the cancelled queued job never started"
    );
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prove_caller_that_goes_away_cancels_its_job() {
    let p = FakeProver::new();
    let d = daemon(&p, one_job()).await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    c.submit_proof(request(1, Priority::Normal, "blocker"))
        .await
        .unwrap();
    p.wait_started(1);
    // A deadline: the client gives up after 300 ms.
    let mut req = tonic::Request::new(proto::ProveRequest {
        submit: Some(request(2, Priority::Normal, "deadline")),
    });
    req.set_timeout(Duration::from_millis(300));
    let e = c.prove(req).await.unwrap_err();
    assert!(
        matches!(e.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{e:?}"
    );
    // The daemon sees the caller go (RST_STREAM, or its own grpc-timeout) and cancels the job,
    // which never starts.
    let r = await_job(&mut c, "deadline").await;
    assert_eq!(r.status, JobStatus::Cancelled as i32, "{r:?}");
    // A disconnect mid-proof: the client task (with its own connection) is killed while its
    // job runs.
    let addr = d.addrs()[0].clone();
    let task = tokio::spawn(async move {
        let mut c2 = tcp_client(&addr).await;
        c2.prove(proto::ProveRequest {
            submit: Some(request(3, Priority::Critical, "disconnect")),
        })
        .await
    });
    p.release(1);
    assert_eq!(
        p.wait_started(2),
        vec![1, 3],
        "the cancelled job never started"
    );
    task.abort();
    let _ = task.await;
    for id in ["deadline", "disconnect"] {
        let r = await_job(&mut c, id).await;
        assert_eq!(r.status, JobStatus::Cancelled as i32, "{id}: {r:?}");
        assert!(r.error_message.contains("went away"), "{r:?}");
    }
    // A SubmitProof job is not tied to its callers: awaiting it with a short wait is TIMEOUT
    // of that wait only.
    let r = c
        .await_proof(proto::AwaitProofRequest {
            job_id: "blocker".into(),
            timeout_ms: 1,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, JobStatus::Completed as i32);
    p.release_all();
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn await_and_job_timeouts() {
    let p = FakeProver::new();
    let cfg = SchedulerConfig {
        jobs: 1,
        job_timeout: Some(Duration::from_millis(500)),
        ..SchedulerConfig::default()
    };
    let d = daemon(&p, cfg).await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    c.submit_proof(request(1, Priority::Normal, "slow"))
        .await
        .unwrap();
    c.submit_proof(request(2, Priority::Normal, "waiting"))
        .await
        .unwrap();
    p.wait_started(1);
    // AwaitProof's own wait runs out first: TIMEOUT, and the job goes on.
    let r = c
        .await_proof(proto::AwaitProofRequest {
            job_id: "slow".into(),
            timeout_ms: 50,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, JobStatus::Timeout as i32);
    assert!(r.error_message.contains("goes on"), "{r:?}");
    // Then the job timeout ends both (the running one and the queued one).
    for id in ["slow", "waiting"] {
        let r = await_job(&mut c, id).await;
        assert_eq!(r.status, JobStatus::Timeout as i32, "{id}");
        assert!(r.error_message.contains("job timeout"), "{r:?}");
    }
    // The running job's engine call saw its cancel token (it was not released). The queued one
    // never started, or — when the worker came free in the instant before its own deadline —
    // started and was cancelled by its timeout the same way.
    p.wait_finished(1);
    let started = p.started();
    assert!(started == [1] || started == [1, 2], "{started:?}");
    if started.len() == 2 {
        p.wait_finished(2);
    }
    assert_eq!(
        p.cancelled(),
        started,
        "every started call was stopped by its timeout"
    );
    p.release_all();
    let m = metrics(&mut c).await;
    assert!(m.contains("\ncuzk_proofs_timed_out_total 2\n"), "{m}");
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_codes_and_start_nothing() {
    let p = FakeProver::new();
    let d = daemon_with(&p, one_job(), |c| c.max_message_bytes = 64 << 10).await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    type Edit = fn(&mut proto::SubmitProofRequest);
    let cases: Vec<(&str, Edit, Code, &str)> = vec![
        (
            "kind unspecified",
            |r| r.proof_kind = 0,
            Code::InvalidArgument,
            "unspecified",
        ),
        // A PoRep request (proof type 5, a C1 output) sent as PoSt: the number is a WindowPoSt
        // V1 type, which no network accepts any more.
        (
            "winning post",
            |r| r.proof_kind = 4,
            Code::InvalidArgument,
            "not a winning-post proof type",
        ),
        (
            "window post",
            |r| r.proof_kind = 3,
            Code::Unimplemented,
            "WindowPoSt V1",
        ),
        (
            // A SnapDeals request with a PoRep request's proof type (checked before the rest).
            "snap",
            |r| r.proof_kind = 2,
            Code::InvalidArgument,
            "registered update proof 5",
        ),
        (
            "kind 99",
            |r| r.proof_kind = 99,
            Code::InvalidArgument,
            "proof_kind 99",
        ),
        (
            "priority 9",
            |r| r.priority = 9,
            Code::InvalidArgument,
            "priority 9",
        ),
        (
            "ni-porep",
            |r| r.registered_proof = 18,
            Code::Unimplemented,
            "NonInteractive",
        ),
        (
            "proof 77",
            |r| r.registered_proof = 77,
            Code::InvalidArgument,
            "registered_proof 77",
        ),
        (
            "size",
            |r| r.sector_size = 4096,
            Code::InvalidArgument,
            "sector_size 4096",
        ),
        (
            "proof type",
            |r| r.registered_proof = 0,
            Code::InvalidArgument,
            "StackedDrg2KiBV1_1",
        ),
        (
            "empty",
            |r| r.vanilla_proof.clear(),
            Code::InvalidArgument,
            "empty",
        ),
        (
            "not json",
            |r| r.vanilla_proof = b"{not json".to_vec(),
            Code::InvalidArgument,
            "not C1 JSON",
        ),
        (
            "truncated",
            |r| r.vanilla_proof.truncate(30),
            Code::InvalidArgument,
            "not C1 JSON",
        ),
        (
            "sector number",
            |r| r.sector_number = 8,
            Code::InvalidArgument,
            "SectorNum 1",
        ),
        (
            "vanilla_proofs",
            |r| r.vanilla_proofs = vec![vec![1]],
            Code::InvalidArgument,
            "vanilla_proofs",
        ),
        (
            "oversize",
            |r| r.vanilla_proof = vec![b' '; 100 << 10],
            Code::OutOfRange,
            "too large",
        ),
    ];
    for (name, edit, code, needle) in cases {
        let mut r = request(1, Priority::Normal, name);
        edit(&mut r);
        let e = c.submit_proof(r.clone()).await.unwrap_err();
        assert_eq!(e.code(), code, "{name}: {e:?}");
        assert!(e.message().contains(needle), "{name}: {}", e.message());
        let e = c
            .prove(proto::ProveRequest { submit: Some(r) })
            .await
            .unwrap_err();
        assert_eq!(e.code(), code, "{name} (Prove): {e:?}");
    }
    let e = c
        .prove(proto::ProveRequest { submit: None })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let e = c
        .await_proof(proto::AwaitProofRequest {
            job_id: "never".into(),
            timeout_ms: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    for (id, code) in [
        ("snap-3g", Code::InvalidArgument),
        ("porep-3g", Code::InvalidArgument),
        ("wpost", Code::InvalidArgument),
        ("bogus", Code::InvalidArgument),
    ] {
        let e = c.preload_srs(preload(id)).await.unwrap_err();
        assert_eq!(e.code(), code, "{id}");
        let e = c.evict_srs(evict(id)).await.unwrap_err();
        assert_eq!(e.code(), code, "{id}");
    }
    assert!(p.started().is_empty(), "{:?}", p.started());
    // Still serving.
    p.release_all();
    let r = c
        .prove(proto::ProveRequest {
            submit: Some(request(5, Priority::Normal, "good")),
        })
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert_eq!(r.proof, fake_proof(5));
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preload_and_evict_take_the_circuit_ids_of_every_kind() {
    let p = FakeProver::new();
    let d = daemon(&p, one_job()).await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    let ids = ["porep-2k", "wpost-32g", "winning-32g", "snap-32g"];
    for already in [false, true] {
        for id in ids {
            let r = c.preload_srs(preload(id)).await.unwrap().into_inner();
            assert_eq!(r.already_loaded, already, "{id}");
        }
    }
    let loaded = |st: proto::GetStatusResponse| {
        st.loaded_srs
            .into_iter()
            .map(|l| l.circuit_id)
            .collect::<Vec<_>>()
    };
    let st = c.get_status(proto::GetStatusRequest {}).await.unwrap();
    assert_eq!(loaded(st.into_inner()), ids);
    // Ids as Curio or an operator may write them.
    let r = c
        .evict_srs(evict("WPoSt-32GiB"))
        .await
        .unwrap()
        .into_inner();
    assert!(r.was_loaded);
    assert_eq!(r.freed_bytes, FAKE_SET_BYTES);
    let r = c.evict_srs(evict("wpost-32g")).await.unwrap().into_inner();
    assert!(!r.was_loaded);
    assert_eq!(r.freed_bytes, 0);
    // A set in use: FAILED_PRECONDITION, nothing evicted; once idle it goes.
    c.submit_proof(request(7, Priority::Normal, "running"))
        .await
        .unwrap();
    p.wait_started(1);
    let e = c.evict_srs(evict("porep-2k")).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("in use by 1 proof"), "{}", e.message());
    p.release(7);
    p.wait_finished(7);
    let r = c.evict_srs(evict("porep-2k")).await.unwrap().into_inner();
    assert!(r.was_loaded);
    let st = c.get_status(proto::GetStatusRequest {}).await.unwrap();
    assert_eq!(loaded(st.into_inner()), ["winning-32g", "snap-32g"]);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_errors_answer_their_grpc_codes() {
    let p = FakeProver::new();
    p.release_all();
    let d = daemon(&p, one_job()).await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    for (sector, code, msg) in [
        (
            SECTOR_OOM,
            Code::ResourceExhausted,
            "cuzk error 401: out of host memory",
        ),
        (
            SECTOR_BAD_INPUT,
            Code::InvalidArgument,
            "cuzk error 101: invalid input",
        ),
        (
            SECTOR_PANIC,
            Code::Internal,
            "cuzk error 901: internal panic: fake prover panic",
        ),
    ] {
        let e = c
            .prove(proto::ProveRequest {
                submit: Some(request(sector, Priority::Normal, "")),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), code, "{e:?}");
        assert!(e.message().starts_with(msg), "{}", e.message());
    }
    // In-band for AwaitProof.
    let id = c
        .submit_proof(request(SECTOR_OOM, Priority::High, "oom"))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    let r = await_job(&mut c, &id).await;
    assert_eq!(r.status, JobStatus::Failed as i32);
    assert!(r.error_message.starts_with("cuzk error 401"), "{r:?}");
    // After a panic and failures the daemon proves on.
    let r = c
        .prove(proto::ProveRequest {
            submit: Some(request(4, Priority::Normal, "")),
        })
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert_eq!(r.proof, fake_proof(4));
    let st = c
        .get_status(proto::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!((st.total_proofs_completed, st.total_proofs_failed), (1, 4));
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_refuses_and_request_ids_are_idempotent() {
    let p = FakeProver::new();
    let cfg = SchedulerConfig {
        jobs: 1,
        max_queue: 2,
        ..SchedulerConfig::default()
    };
    let d = daemon(&p, cfg).await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    c.submit_proof(request(1, Priority::Normal, "a"))
        .await
        .unwrap();
    p.wait_started(1);
    c.submit_proof(request(2, Priority::Normal, "b"))
        .await
        .unwrap();
    c.submit_proof(request(3, Priority::Normal, "c"))
        .await
        .unwrap();
    let e = c
        .submit_proof(request(4, Priority::Normal, "d"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert!(e.message().contains("2 jobs pending"), "{}", e.message());
    // Resubmitting a queued or running request attaches to its job (no new job, no error
    // though the queue is full).
    for (sector, id, pos) in [(1, "a", 0), (3, "c", 1)] {
        let r = c
            .submit_proof(request(sector, Priority::Normal, id))
            .await
            .unwrap()
            .into_inner();
        assert_eq!((r.job_id.as_str(), r.queue_position), (id, pos));
    }
    // The same request id with other content is a new job: refused by the full queue.
    let e = c
        .submit_proof(request(9, Priority::Normal, "c"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    p.release_all();
    for id in ["a", "b", "c"] {
        assert_eq!(
            await_job(&mut c, id).await.status,
            JobStatus::Completed as i32
        );
    }
    // A completed job is found again by its request id: its proof, not a new proof.
    let r = c
        .prove(proto::ProveRequest {
            submit: Some(request(1, Priority::Normal, "a")),
        })
        .await
        .unwrap()
        .into_inner()
        .result
        .unwrap();
    assert_eq!(r.proof, fake_proof(1));
    assert_eq!(p.started(), vec![1, 2, 3]);
    d.shutdown().await;
}

/// `Prove` through the client, expecting an answer (not a gRPC error).
async fn prove_ok(
    c: &mut proto::proving_engine_client::ProvingEngineClient<tonic::transport::Channel>,
    r: proto::SubmitProofRequest,
) -> proto::AwaitProofResponse {
    c.prove(proto::ProveRequest { submit: Some(r) })
        .await
        .expect("prove")
        .into_inner()
        .result
        .expect("result")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_attaches_only_to_a_job_of_the_same_content() {
    let p = FakeProver::new();
    let d = daemon(&p, one_job()).await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    const ID: &str = "porep-1000-1";
    let base = request(1, Priority::Normal, ID);
    let first = c.submit_proof(base.clone()).await.unwrap().into_inner();
    assert_eq!(first.job_id, ID);
    assert_eq!(p.wait_started(1), vec![1]);
    // The same content (priority and an implied sector size are not content): the same job.
    let mut same = base.clone();
    same.priority = Priority::Critical as i32;
    same.sector_size = 0;
    for r in [base.clone(), same] {
        let a = c.submit_proof(r).await.unwrap().into_inner();
        assert_eq!((a.job_id.as_str(), a.queue_position), (ID, 0));
    }
    // Other content under the same request id: each is a new job, with an id of its own.
    let edit = |f: fn(&mut proto::SubmitProofRequest)| {
        let mut r = base.clone();
        f(&mut r);
        r
    };
    let others = [
        ("miner", edit(|r| r.miner_id = MINER + 1)),
        ("sector", request(2, Priority::Normal, ID)),
        // Still the C1 output of sector 1 (JSON allows the space), but other bytes.
        ("c1", edit(|r| r.vanilla_proof.push(b' '))),
        ("randomness", edit(|r| r.randomness = vec![7; 32])),
    ];
    let mut jobs = vec![(ID.to_string(), base.clone())];
    for (name, r) in others {
        let a = c.submit_proof(r.clone()).await.unwrap().into_inner();
        assert!(
            a.job_id.starts_with(&format!("{ID}#")),
            "{name}: {}",
            a.job_id
        );
        assert!(
            jobs.iter().all(|(id, _)| *id != a.job_id),
            "{name}: {} twice",
            a.job_id
        );
        jobs.push((a.job_id, r));
    }
    // Each is found again by its own content.
    for (id, r) in &jobs {
        let a = c.submit_proof(r.clone()).await.unwrap().into_inner();
        assert_eq!(&a.job_id, id);
    }
    // Several live jobs of one request id: CancelProof by a job id ends that job only.
    let (cancelled, _) = jobs.pop().unwrap();
    let r = c
        .cancel_proof(proto::CancelProofRequest {
            job_id: cancelled.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!r.was_running);
    let a = await_job(&mut c, &cancelled).await;
    assert_eq!(a.status, JobStatus::Cancelled as i32, "{a:?}");
    p.release_all();
    // AwaitProof by job id: each job's own proof; the bare request id is the first job's id.
    let mut proofs = Vec::new();
    for (id, r) in &jobs {
        let a = await_job(&mut c, id).await;
        assert_eq!(a.status, JobStatus::Completed as i32, "{id}: {a:?}");
        assert_eq!(&a.job_id, id);
        let want = fake_proof_of(r.sector_number, r.miner_id, &r.vanilla_proof);
        assert_eq!(a.proof, want, "{id}");
        assert!(!proofs.contains(&a.proof), "{id}: another job's proof");
        proofs.push(a.proof);
    }
    assert_eq!(proofs[0], fake_proof(1));
    // One engine call per job that was not cancelled: the attached requests started nothing.
    assert_eq!(p.started(), vec![1, 1, 2, 1]);
    d.shutdown().await;
}

/// The case of issue 45: a completed request id, then the same id with another miner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_request_id_with_another_miner_is_proved_again() {
    let p = FakeProver::new();
    p.release_all();
    let d = daemon(&p, one_job()).await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    let first = prove_ok(&mut c, request(1, Priority::Normal, "porep-x")).await;
    assert_eq!(first.status, JobStatus::Completed as i32);
    assert_eq!(first.job_id, "porep-x");
    assert_eq!(first.proof, fake_proof(1));
    let mut other = request(1, Priority::Normal, "porep-x");
    other.miner_id = 1001;
    let second = prove_ok(&mut c, other.clone()).await;
    assert_eq!(second.status, JobStatus::Completed as i32);
    assert!(
        second.job_id.starts_with("porep-x#"),
        "{}: not a new job",
        second.job_id
    );
    assert_eq!(second.proof, fake_proof_of(1, 1001, &other.vanilla_proof));
    assert_ne!(second.proof, first.proof);
    // Retrying either request: its own completed job, not a third proof.
    let again = prove_ok(&mut c, other).await;
    assert_eq!(
        (&again.job_id, &again.proof),
        (&second.job_id, &second.proof)
    );
    let again = prove_ok(&mut c, request(1, Priority::Normal, "porep-x")).await;
    assert_eq!(
        (again.job_id.as_str(), &again.proof),
        ("porep-x", &first.proof)
    );
    assert_eq!(p.started(), vec![1, 1]);
    assert_eq!(await_job(&mut c, "porep-x").await.proof, first.proof);
    assert_eq!(await_job(&mut c, &second.job_id).await.proof, second.proof);
    d.shutdown().await;
}

/// A failed job's id goes to the next job of its request id, which is then kept for a whole
/// `retain` of its own (not pruned with the failed one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_job_s_id_is_never_given_to_another_job() {
    let p = FakeProver::new();
    p.release_all();
    let cfg = SchedulerConfig {
        jobs: 1,
        retain: Duration::from_millis(1500),
        ..SchedulerConfig::default()
    };
    let d = daemon(&p, cfg).await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    let id = c
        .submit_proof(request(SECTOR_OOM, Priority::Normal, "f"))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    assert_eq!(id, "f");
    assert_eq!(
        await_job(&mut c, "f").await.status,
        JobStatus::Failed as i32
    );
    tokio::time::sleep(Duration::from_millis(900)).await;
    let r = prove_ok(&mut c, request(5, Priority::Normal, "f")).await;
    // A job id names one job only: the retry is a new job with an id of its own
    let retry = r.job_id.clone();
    assert!(retry.starts_with("f#"), "{retry}");
    assert_eq!(r.proof, fake_proof(5));
    assert_eq!(
        await_job(&mut c, "f").await.status,
        JobStatus::Failed as i32
    );
    // Past the failed job's retain, within the new one's.
    tokio::time::sleep(Duration::from_millis(900)).await;
    let r = await_job(&mut c, &retry).await;
    assert_eq!(r.proof, fake_proof(5), "{r:?}");
    // a client request id equal to that derived id is not given it again
    let r = prove_ok(&mut c, request(6, Priority::Normal, &retry)).await;
    assert_ne!(r.job_id, retry);
    assert_eq!(r.proof, fake_proof(6));
    d.shutdown().await;
}

/// Every partition of a WindowPoSt deadline comes with one request id
/// (`wdpost-<miner>-0-<randomness[:8]>`): each partition (and other vanilla proofs under the same
/// partition index) is a job of its own with its own proof; only the same content attaches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_post_partitions_of_one_request_id_get_their_own_jobs() {
    let p = FakeProver::new();
    let d = daemon(&p, one_job()).await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    let randomness = [9u8; 32];
    let id = format!("wdpost-{MINER}-0-{}", "09".repeat(8));
    let v0 = vec![vec![1u8; 64], vec![2; 64]];
    let reqs = [
        post_request(&id, 0, randomness, v0.clone()),
        post_request(&id, 1, randomness, vec![vec![3u8; 64]]),
        // The same partition index with other vanilla proofs, and the same vanilla proofs
        // under another partition index.
        post_request(&id, 0, randomness, vec![vec![1u8; 64], vec![2; 65]]),
        post_request(&id, 1, randomness, v0.clone()),
    ];
    let first = c.submit_proof(reqs[0].clone()).await.unwrap().into_inner();
    assert_eq!(first.job_id, id);
    assert_eq!(p.wait_started(1), vec![POST_GATE]);
    let mut ids = vec![first.job_id];
    for (i, r) in reqs.iter().enumerate().skip(1) {
        let a = c.submit_proof(r.clone()).await.unwrap().into_inner();
        assert!(a.job_id.starts_with(&format!("{id}#")), "{i}: {}", a.job_id);
        assert!(!ids.contains(&a.job_id), "{i}: {} twice", a.job_id);
        // Behind the jobs queued before it (the running one is not counted).
        assert_eq!(a.queue_position, i as u32 - 1, "{i}");
        ids.push(a.job_id);
    }
    // GetStatus counts them under their kind (PoRep's entry stays, empty).
    let st = c
        .get_status(proto::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    let queues: Vec<_> = st
        .queues
        .iter()
        .map(|q| (q.proof_kind.as_str(), q.pending, q.in_progress))
        .collect();
    assert_eq!(
        queues,
        [("POREP_SEAL_COMMIT", 0, 0), ("WINDOW_POST_PARTITION", 3, 1)]
    );
    // The same content (priority is not content) attaches to its job, running or queued.
    let mut same = reqs[0].clone();
    same.priority = Priority::Critical as i32;
    same.sector_size = 0;
    for (r, want) in [(same, &ids[0]), (reqs[1].clone(), &ids[1])] {
        let a = c.submit_proof(r).await.unwrap().into_inner();
        assert_eq!(&a.job_id, want);
    }
    // Their vanilla proofs were not checked again: one check per job.
    assert_eq!(p.post_checks(), reqs.len());
    p.release_all();
    let mut proofs = Vec::new();
    for (jid, r) in ids.iter().zip(&reqs) {
        let a = await_job(&mut c, jid).await;
        assert_eq!(a.status, JobStatus::Completed as i32, "{jid}: {a:?}");
        assert_eq!(&a.job_id, jid);
        let want = fake_post_proof(
            r.partition_index.into(),
            MINER,
            &r.randomness,
            &r.vanilla_proofs,
        );
        assert_eq!(a.proof, want, "{jid}");
        assert!(!proofs.contains(&a.proof), "{jid}: another job's proof");
        proofs.push(a.proof);
    }
    // A retry after completion: its completed job, no new engine call, no new check.
    let again = prove_ok(&mut c, reqs[1].clone()).await;
    assert_eq!((&again.job_id, &again.proof), (&ids[1], &proofs[1]));
    assert_eq!(p.post_checks(), reqs.len());
    assert_eq!(
        p.started(),
        vec![POST_GATE, POST_GATE + 1, POST_GATE, POST_GATE + 1]
    );
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_running_jobs_and_fails_queued_ones() {
    let p = FakeProver::new();
    let dir = temp_dir("shutdown");
    let sock = dir.join("cuzk.sock");
    let d = daemon_with(&p, one_job(), |c| {
        c.listen.push(format!("unix://{}", sock.display()))
    })
    .await;
    assert_eq!(d.addrs()[1], format!("unix://{}", sock.display()));
    let mut c = unix_client(sock.clone()).await;
    let mut running = c.clone();
    let running = tokio::spawn(async move {
        running
            .prove(proto::ProveRequest {
                submit: Some(request(1, Priority::Normal, "running")),
            })
            .await
    });
    p.wait_started(1);
    let mut queued = c.clone();
    let queued = tokio::spawn(async move {
        queued
            .prove(proto::ProveRequest {
                submit: Some(request(2, Priority::Normal, "queued")),
            })
            .await
    });
    // Wait until the queued one is accepted.
    for _ in 0..100 {
        let st = c
            .get_status(proto::GetStatusRequest {})
            .await
            .unwrap()
            .into_inner();
        if st.queues[0].pending == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stopping = tokio::spawn(d.shutdown());
    let e = queued.await.unwrap().unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    assert!(e.message().contains("had not started"), "{}", e.message());
    let e = c
        .submit_proof(request(3, Priority::Critical, "late"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    assert!(!running.is_finished());
    p.release(1);
    let r = running.await.unwrap().unwrap().into_inner().result.unwrap();
    assert_eq!(r.status, JobStatus::Completed as i32);
    assert_eq!(r.proof, fake_proof(1));
    let report = stopping.await.unwrap();
    assert_eq!((report.queued_failed, report.running_failed), (1, 0));
    assert!(!sock.exists(), "socket file removed");
    assert_eq!(p.started(), vec![1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_fails_jobs_still_running_after_the_grace_period() {
    let p = FakeProver::new();
    let d = daemon_with(&p, one_job(), |c| {
        c.shutdown_grace = Duration::from_millis(300)
    })
    .await;
    let mut c = tcp_client(&d.addrs()[0]).await;
    let running = tokio::spawn(async move {
        c.prove(proto::ProveRequest {
            submit: Some(request(1, Priority::Normal, "stuck")),
        })
        .await
    });
    p.wait_started(1);
    let report = d.shutdown().await;
    assert_eq!((report.queued_failed, report.running_failed), (0, 1));
    let e = running.await.unwrap().unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    assert!(e.message().contains("grace period"), "{}", e.message());
    p.release_all();
}
