//! A real proof through the daemon: the 2 KiB fixture's C1 output, wrapped as Curio wraps it,
//! proved by the engine (CPU) behind a Unix socket, checked with filecoin-proofs' verifier.

mod common;

use std::sync::Arc;

use base64::Engine as _;
use common::{temp_dir, unix_client};
use cuzk::{Backend, Engine, EngineConfig};
use cuzk_daemon::proto::await_proof_response::Status as JobStatus;
use cuzk_daemon::proto::{self, Priority, ProofKind};
use cuzk_daemon::prover::EngineProver;
use cuzk_daemon::scheduler::SchedulerConfig;
use cuzk_daemon::{Daemon, DaemonConfig};
use cuzk_dev::fixture::{default_fixture_dir, ensure_2kib_fixture};
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2kib_fixture_proves_through_the_daemon_and_verifies() {
    let _ = env_logger::builder().is_test(true).try_init();
    let f = tokio::task::spawn_blocking(|| ensure_2kib_fixture(&default_fixture_dir()))
        .await
        .unwrap()
        .expect("2 KiB fixture");
    let engine = Engine::new(
        EngineConfig::default()
            .with_parameter_dir(&f.param_dir)
            .with_backend(Backend::Cpu),
    )
    .unwrap();
    let sock = temp_dir("prove").join("cuzk.sock");
    let d = Daemon::start(
        DaemonConfig {
            listen: vec![format!("unix://{}", sock.display())],
            scheduler: SchedulerConfig {
                jobs: 1,
                ..SchedulerConfig::default()
            },
            ..DaemonConfig::default()
        },
        Arc::new(EngineProver::new(engine, true)),
    )
    .await
    .unwrap();
    let mut c = unix_client(sock).await;
    // Curio's wrapC1Output: {"SectorNum", "Phase1Out": base64(C1 JSON), "SectorSize"}.
    let c1 = f.read_c1().unwrap();
    let wrapped = serde_json::to_vec(&serde_json::json!({
        "SectorNum": f.sector_id,
        "Phase1Out": base64::engine::general_purpose::STANDARD.encode(&c1),
        "SectorSize": 2048,
    }))
    .unwrap();
    let req = proto::SubmitProofRequest {
        request_id: format!("porep-{}-{}", f.actor_id, f.sector_id),
        proof_kind: ProofKind::PorepSealCommit as i32,
        sector_size: 2048,
        registered_proof: 5, // StackedDrg2KiBV1_1
        priority: Priority::Normal as i32,
        vanilla_proof: wrapped,
        sector_number: f.sector_id,
        miner_id: f.actor_id,
        ..Default::default()
    };
    let r = c
        .prove(proto::ProveRequest {
            submit: Some(req.clone()),
        })
        .await
        .expect("Prove")
        .into_inner()
        .result
        .unwrap();
    assert_eq!(r.status, JobStatus::Completed as i32, "{r:?}");
    assert_eq!(r.proof.len(), 192);
    assert!(
        f.verify(&r.proof).unwrap(),
        "filecoin-proofs rejects the proof"
    );
    let mut flipped = r.proof.clone();
    flipped[100] ^= 1;
    assert!(
        !f.verify(&flipped).unwrap_or(false),
        "a flipped byte verifies"
    );
    assert!(
        r.srs_load_ms > 0 && r.synthesis_ms > 0 && r.gpu_compute_ms > 0,
        "{r:?}"
    );
    assert!(r.total_ms >= r.srs_load_ms + r.queue_wait_ms, "{r:?}");
    let st = c
        .get_status(proto::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.total_proofs_completed, 1);
    assert_eq!(st.loaded_srs.len(), 1, "{st:?}");
    assert_eq!(st.loaded_srs[0].circuit_id, "porep-2k");
    assert!(st.loaded_srs[0].size_bytes > 0);
    assert!(
        st.pinned_memory_bytes >= st.loaded_srs[0].size_bytes,
        "{st:?}"
    );
    let pre = c
        .preload_srs(proto::PreloadSrsRequest {
            circuit_id: "porep-2k".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(pre.already_loaded);
    // The engine's own checks: another miner's prover id does not fit the C1 output's replica
    // id (INVALID_ARGUMENT, cuzk error 101), found after the job was queued.
    let mut wrong = req;
    wrong.request_id = "wrong-miner".into();
    wrong.miner_id += 1;
    let e = c
        .prove(proto::ProveRequest {
            submit: Some(wrong),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().starts_with("cuzk error 101"), "{}", e.message());
    d.shutdown().await;
}
