//! SnapDeals through the daemon, as Curio's `ProveUpdateCuzk` sends it: the 2 KiB SnapDeals
//! fixture's vanilla partition proof and commitments (`SNAP_DEALS_UPDATE`, priority NORMAL,
//! request id `snap-<miner>-<sector>`, sector size 0 as proof-share jobs send it) proved by the
//! engine (CPU) behind a Unix socket, then checked with filecoin-proofs-api's
//! `verify_empty_sector_update_proof`; its retry with the sector size set attaches to the same
//! job; bad input is INVALID_ARGUMENT before it is queued.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::{temp_dir, unix_client};
use cuzk::{Backend, Engine, EngineConfig};
use cuzk_daemon::proto::await_proof_response::Status as JobStatus;
use cuzk_daemon::proto::{self, Priority, ProofKind};
use cuzk_daemon::prover::EngineProver;
use cuzk_daemon::scheduler::SchedulerConfig;
use cuzk_daemon::{Daemon, DaemonConfig};
use cuzk_dev::fixture::{run_self_with_env, ACTOR_ID, SECTOR_ID};
use cuzk_dev::snap_fixture::{default_snap_fixture_dir, ensure_snap_fixture, UPDATE_2KIB};
use tonic::Code;

const TEST: &str = "snap_deals_prove_through_the_daemon_and_bad_input_is_refused";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snap_deals_prove_through_the_daemon_and_bad_input_is_refused() {
    let _ = env_logger::builder().is_test(true).try_init();
    let f = tokio::task::spawn_blocking(|| ensure_snap_fixture(&default_snap_fixture_dir()))
        .await
        .unwrap()
        .expect("2 KiB SnapDeals fixture");
    if let Some(file) = std::env::var_os("CUZK_TEST_SNAP_PROOF") {
        // The child: filecoin-proofs-api's verifier on the parent's proof.
        let proof = std::fs::read(file).unwrap();
        assert!(
            f.verify_with_filecoin_proofs(&proof, f.comm_r_new).unwrap(),
            "filecoin-proofs rejects the daemon's proof"
        );
        println!("child verified the snap proof");
        return;
    }
    let engine = Engine::new(
        EngineConfig::default()
            .with_parameter_dir(&f.param_dir)
            .with_backend(Backend::Cpu),
    )
    .unwrap();
    let sock = temp_dir("snap").join("cuzk.sock");
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
    // The request shape of Curio's ProveUpdateCuzk.
    let snap = proto::SubmitProofRequest {
        request_id: format!("snap-{ACTOR_ID}-{SECTOR_ID}"),
        proof_kind: ProofKind::SnapDealsUpdate as i32,
        sector_size: 0,
        registered_proof: UPDATE_2KIB,
        priority: Priority::Normal as i32,
        vanilla_proofs: f.vanilla_proofs().unwrap(),
        comm_r_old: f.comm_r_old.to_vec(),
        comm_r_new: f.comm_r_new.to_vec(),
        comm_d_new: f.comm_d_new.to_vec(),
        sector_number: SECTOR_ID,
        miner_id: ACTOR_ID,
        ..Default::default()
    };
    let r = c
        .prove(proto::ProveRequest {
            submit: Some(snap.clone()),
        })
        .await
        .expect("Prove SnapDeals")
        .into_inner()
        .result
        .unwrap();
    assert_eq!(r.status, JobStatus::Completed as i32, "{r:?}");
    assert_eq!(r.proof.len(), 192);
    assert_eq!(r.job_id, snap.request_id);
    let proof = r.proof;

    // The same request with the sector size set: the same content, the same job and proof.
    let mut sized = snap.clone();
    sized.sector_size = 2048;
    let sub = c.submit_proof(sized).await.unwrap().into_inner();
    assert_eq!(sub.job_id, snap.request_id);
    let r = c
        .await_proof(proto::AwaitProofRequest {
            job_id: sub.job_id,
            timeout_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, JobStatus::Completed as i32, "{r:?}");
    assert_eq!(r.proof, proof);

    // Refused before queueing: INVALID_ARGUMENT.
    type Edit = fn(&mut proto::SubmitProofRequest);
    let edits: [(&str, Edit); 9] = [
        ("two partition proofs", |r| {
            r.vanilla_proofs.push(r.vanilla_proofs[0].clone())
        }),
        ("no vanilla proofs", |r| r.vanilla_proofs.clear()),
        ("garbage vanilla proof", |r| {
            r.vanilla_proofs = vec![b"not a vanilla proof".to_vec()]
        }),
        ("31-byte comm_r_old", |r| {
            r.comm_r_old.pop();
        }),
        ("33-byte comm_d_new", |r| r.comm_d_new.push(0)),
        ("another comm_r_new", |r| r.comm_r_new[3] ^= 1),
        ("8 MiB sector size", |r| r.sector_size = 8 << 20),
        ("32 GiB proof type", |r| r.registered_proof = 3),
        ("C1 in vanilla_proof", |r| r.vanilla_proof = b"{}".to_vec()),
    ];
    for (name, edit) in edits {
        let mut req = snap.clone();
        edit(&mut req);
        req.request_id = format!("bad-{name}");
        let e = c
            .prove(proto::ProveRequest { submit: Some(req) })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{name}: {e:?}");
    }
    let st = c
        .get_status(proto::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.total_proofs_completed, 1, "one proof: {st:?}");
    assert_eq!(st.total_proofs_failed, 0, "nothing bad was queued: {st:?}");
    d.shutdown().await;

    // filecoin-proofs-api's verdict, in a child process.
    let file: PathBuf = temp_dir("snap-proof").join("snap.proof");
    std::fs::write(&file, &proof).unwrap();
    let child = tokio::task::spawn_blocking(move || {
        run_self_with_env(
            TEST,
            &[
                ("FIL_PROOFS_PARAMETER_CACHE", f.param_dir.as_os_str()),
                ("CUZK_TEST_SNAP_PROOF", file.as_os_str()),
            ],
        )
        .unwrap()
    })
    .await
    .unwrap();
    let out = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && out.contains("child verified the snap proof"),
        "child: {out}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
}
