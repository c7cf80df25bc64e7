//! `PreloadSRS`, `EvictSRS` and the status's loaded sets through the daemon over the real
//! engine (`EngineProver`), with the circuit ids of every kind: small synthetic `.params` files
//! under the real names of the 2 KiB PoRep, WindowPoSt and WinningPoSt circuits, and a caller's
//! host-memory limit that holds one large set and the small one: a preload evicts the least
//! recently used idle set, never WinningPoSt's; bad ids are INVALID_ARGUMENT.

mod common;

use std::sync::Arc;

use common::{evict, metrics, preload, tcp_client, temp_dir};
use cuzk::{Backend, Engine, EngineConfig};
use cuzk_daemon::prover::EngineProver;
use cuzk_daemon::request::circuit;
use cuzk_daemon::{proto, Daemon, DaemonConfig};
use cuzk_dev::fixture::write_fake_params;
use tonic::Code;

/// Decoded bytes of the PoRep and WindowPoSt fake sets (H, L, A, B_G1, B_G2 points below).
const LARGE: u64 = 950 * 96 + 50 * 192;
/// Decoded bytes of the WinningPoSt fake set.
const SMALL: u64 = 190 * 96 + 10 * 192;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preload_and_evict_manage_the_sets_of_every_kind_within_the_budget() {
    let _ = env_logger::builder().is_test(true).try_init();
    let dir = temp_dir("param-sets");
    for (id, sizes) in [
        ("porep-2k", [400, 300, 200, 50, 50]),
        ("wpost-2k", [400, 300, 200, 50, 50]),
        ("winning-2k", [100, 50, 30, 10, 10]),
    ] {
        let path = circuit(id).unwrap().params_path(&dir).unwrap();
        write_fake_params(&path, 2, sizes).unwrap();
    }
    let engine = Engine::new(
        EngineConfig::default()
            .with_parameter_dir(&dir)
            .with_backend(Backend::Cpu)
            .with_host_memory_limit(150_000),
    )
    .unwrap();
    let d = Daemon::start(
        DaemonConfig {
            listen: vec!["127.0.0.1:0".into()],
            ..DaemonConfig::default()
        },
        Arc::new(EngineProver::new(engine.clone(), true)),
    )
    .await
    .unwrap();
    let mut c = tcp_client(&d.addrs()[0]).await;
    let load = {
        let c = c.clone();
        move |id: &'static str| {
            let mut c = c.clone();
            async move {
                c.preload_srs(preload(id))
                    .await
                    .map(|r| r.into_inner().already_loaded)
            }
        }
    };
    let status = {
        let c = c.clone();
        move || {
            let mut c = c.clone();
            async move {
                let st = c
                    .get_status(proto::GetStatusRequest {})
                    .await
                    .unwrap()
                    .into_inner();
                st.loaded_srs
                    .into_iter()
                    .map(|l| (l.circuit_id, l.size_bytes))
                    .collect::<Vec<_>>()
            }
        }
    };
    assert!(!load("porep-2k").await.unwrap());
    assert!(load("porep-2k").await.unwrap());
    // WindowPoSt: PoRep goes (they do not fit together); WinningPoSt fits beside it.
    assert!(!load("wpost-2k").await.unwrap());
    assert!(!load("winning-2k").await.unwrap());
    assert_eq!(
        status().await,
        [("winning-2k".into(), SMALL), ("wpost-2k".into(), LARGE)]
    );
    // PoRep again: read again, WindowPoSt goes, WinningPoSt (the older) stays.
    assert!(!load("PoRep-2KiB").await.unwrap());
    assert_eq!(
        status().await,
        [("porep-2k".into(), LARGE), ("winning-2k".into(), SMALL)]
    );
    assert_eq!(engine.param_loads(), 4);
    let m = metrics(&mut c).await;
    assert!(
        m.contains(&format!(
            "cuzk_srs_loaded_bytes{{circuit_id=\"winning-2k\"}} {SMALL}"
        )),
        "{m}"
    );

    let r = c.evict_srs(evict("winning-2k")).await.unwrap().into_inner();
    assert!(r.was_loaded);
    assert_eq!(r.freed_bytes, SMALL);
    let r = c.evict_srs(evict("wpost-2k")).await.unwrap().into_inner();
    assert!(!r.was_loaded);
    assert_eq!(r.freed_bytes, 0);
    assert_eq!(status().await, [("porep-2k".into(), LARGE)]);

    // Bad ids: INVALID_ARGUMENT; a good id without its file: FAILED_PRECONDITION naming it
    // (cuzk error 200).
    for (id, code) in [
        ("wpost-3g", Code::InvalidArgument),
        ("windowpost-2k", Code::InvalidArgument),
        ("winning", Code::InvalidArgument),
        ("snap-3g", Code::InvalidArgument),
        ("wpost-32g", Code::FailedPrecondition),
        ("snap-32g", Code::FailedPrecondition),
    ] {
        let e = load(id).await.unwrap_err();
        assert_eq!(e.code(), code, "{id}: {e:?}");
        if code == Code::FailedPrecondition {
            assert!(e.message().starts_with("cuzk error 200"), "{}", e.message());
        } else {
            assert_eq!(c.evict_srs(evict(id)).await.unwrap_err().code(), code);
        }
    }
    assert_eq!(status().await, [("porep-2k".into(), LARGE)]);
    d.shutdown().await;
}
