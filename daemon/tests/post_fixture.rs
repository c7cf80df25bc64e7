//! WindowPoSt and WinningPoSt through the daemon, as Curio sends them: the 2 KiB PoSt fixture's
//! vanilla proofs proved by the engine (CPU) behind a Unix socket — `Prove` for WinningPoSt
//! (CRITICAL), `SubmitProof` + `AwaitProof` for a WindowPoSt partition (HIGH) — and checked with
//! filecoin-proofs-api's verifiers; bad input is INVALID_ARGUMENT before it is queued.

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
use cuzk_dev::fixture::{run_self_with_env, ACTOR_ID};
use cuzk_dev::post_fixture::{
    default_post_fixture_dir, ensure_post_fixture, PostFixture, RANDOMNESS, WINDOW_2KIB,
    WINNING_2KIB,
};
use tonic::Code;

const TEST: &str = "post_kinds_prove_through_the_daemon_and_bad_input_is_refused";

fn proof_file(dir: &std::path::Path, kind: cuzk::ProofKind) -> PathBuf {
    dir.join(format!("{kind}.proof"))
}

/// The child run: filecoin-proofs-api's verifiers on the parent's proofs (its
/// `FIL_PROOFS_PARAMETER_CACHE` is the fixture's parameter directory from the start).
fn verify_in_child(f: &PostFixture, dir: &std::path::Path) {
    for kind in [cuzk::ProofKind::WinningPost, cuzk::ProofKind::WindowPost] {
        let proof = std::fs::read(proof_file(dir, kind)).unwrap();
        assert!(
            f.verify_with_filecoin_proofs(kind, &RANDOMNESS, &proof)
                .unwrap(),
            "{kind}: filecoin-proofs rejects the daemon's proof"
        );
    }
    println!("child verified both kinds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_kinds_prove_through_the_daemon_and_bad_input_is_refused() {
    let _ = env_logger::builder().is_test(true).try_init();
    let f = tokio::task::spawn_blocking(|| ensure_post_fixture(&default_post_fixture_dir()))
        .await
        .unwrap()
        .expect("2 KiB PoSt fixture");
    if let Some(dir) = std::env::var_os("CUZK_TEST_POST_PROOFS") {
        verify_in_child(&f, &PathBuf::from(dir));
        return;
    }
    let engine = Engine::new(
        EngineConfig::default()
            .with_parameter_dir(&f.param_dir)
            .with_backend(Backend::Cpu),
    )
    .unwrap();
    let sock = temp_dir("post").join("cuzk.sock");
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
    let vanilla = |kind| {
        let f = f.clone();
        async move {
            tokio::task::spawn_blocking(move || f.vanilla_proofs(kind, &RANDOMNESS).unwrap())
                .await
                .unwrap()
        }
    };
    // The request shapes of Curio's cuzk client.
    let winning = proto::SubmitProofRequest {
        request_id: format!("winpost-{ACTOR_ID}-{}", f.sector_id),
        proof_kind: ProofKind::WinningPost as i32,
        sector_size: 2048,
        registered_proof: WINNING_2KIB,
        priority: Priority::Critical as i32,
        vanilla_proofs: vanilla(cuzk::ProofKind::WinningPost).await,
        miner_id: ACTOR_ID,
        randomness: RANDOMNESS.to_vec(),
        ..Default::default()
    };
    let window = proto::SubmitProofRequest {
        request_id: format!("wdpost-{ACTOR_ID}-0-{:02x}", RANDOMNESS[0]),
        proof_kind: ProofKind::WindowPostPartition as i32,
        registered_proof: WINDOW_2KIB,
        priority: Priority::High as i32,
        vanilla_proofs: vanilla(cuzk::ProofKind::WindowPost).await,
        partition_index: 0,
        ..winning.clone()
    };

    let r = c
        .prove(proto::ProveRequest {
            submit: Some(winning.clone()),
        })
        .await
        .expect("Prove WinningPoSt")
        .into_inner()
        .result
        .unwrap();
    assert_eq!(r.status, JobStatus::Completed as i32, "{r:?}");
    assert_eq!(r.proof.len(), 192);
    let winning_proof = r.proof;

    let sub = c.submit_proof(window.clone()).await.unwrap().into_inner();
    let r = c
        .await_proof(proto::AwaitProofRequest {
            job_id: sub.job_id,
            timeout_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status, JobStatus::Completed as i32, "{r:?}");
    assert_eq!(r.proof.len(), 192);
    let window_proof = r.proof;

    let st = c
        .get_status(proto::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.total_proofs_completed, 2, "{st:?}");

    // Refused before queueing: INVALID_ARGUMENT (UNIMPLEMENTED for WindowPoSt V1).
    let mut short_randomness = window.clone();
    short_randomness.randomness.pop();
    let mut other_randomness = window.clone();
    other_randomness.randomness[5] ^= 1;
    let mut garbage = window.clone();
    garbage.vanilla_proofs = vec![b"not a vanilla proof".to_vec()];
    let mut wrong_type = window.clone();
    wrong_type.registered_proof = WINNING_2KIB;
    let mut wrong_size = window.clone();
    wrong_size.sector_size = 8 << 20;
    let mut none = window.clone();
    none.vanilla_proofs.clear();
    let mut kinds_swapped = winning.clone();
    kinds_swapped.vanilla_proofs = window.vanilla_proofs.clone();
    let mut v1 = window.clone();
    v1.registered_proof = 5;
    for (name, mut req, code) in [
        ("short randomness", short_randomness, Code::InvalidArgument),
        ("other randomness", other_randomness, Code::InvalidArgument),
        ("garbage vanilla proof", garbage, Code::InvalidArgument),
        ("winning proof type", wrong_type, Code::InvalidArgument),
        ("sector size", wrong_size, Code::InvalidArgument),
        ("no vanilla proofs", none, Code::InvalidArgument),
        (
            "window vanilla as winning",
            kinds_swapped,
            Code::InvalidArgument,
        ),
        ("WindowPoSt V1", v1, Code::Unimplemented),
    ] {
        req.request_id = format!("bad-{name}");
        let e = c
            .prove(proto::ProveRequest { submit: Some(req) })
            .await
            .unwrap_err();
        assert_eq!(e.code(), code, "{name}: {e:?}");
    }
    let st = c
        .get_status(proto::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        st.total_proofs_completed, 2,
        "nothing bad was proved: {st:?}"
    );
    assert_eq!(st.total_proofs_failed, 0, "nothing bad was queued: {st:?}");
    d.shutdown().await;

    // filecoin-proofs-api's verdict, in a child process.
    let dir = temp_dir("post-proofs");
    std::fs::write(
        proof_file(&dir, cuzk::ProofKind::WinningPost),
        &winning_proof,
    )
    .unwrap();
    std::fs::write(proof_file(&dir, cuzk::ProofKind::WindowPost), &window_proof).unwrap();
    let child = tokio::task::spawn_blocking(move || {
        run_self_with_env(
            TEST,
            &[
                ("FIL_PROOFS_PARAMETER_CACHE", f.param_dir.as_os_str()),
                ("CUZK_TEST_POST_PROOFS", dir.as_os_str()),
            ],
        )
        .unwrap()
    })
    .await
    .unwrap();
    let out = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && out.contains("child verified both kinds"),
        "child: {out}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
}
