//! Shared helpers of the daemon's tests: a scripted fake prover, requests, clients.
#![allow(dead_code)]

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use cuzk::srs::ParamSet;
use cuzk::srs_cache::Eviction;
use cuzk_daemon::proto::proving_engine_client::ProvingEngineClient;
use cuzk_daemon::proto::{self, SubmitProofRequest};
use cuzk_daemon::prover::{DeviceState, LoadedSrs, MemoryState, ProofOutput, Prover};
use cuzk_daemon::request::{circuit_id, PorepJob, PostJob};
use tonic::transport::{Channel, Endpoint};

/// Sector numbers whose fake proofs fail (or panic) in a known way.
pub const SECTOR_OOM: u64 = 900;
pub const SECTOR_BAD_INPUT: u64 = 901;
pub const SECTOR_PANIC: u64 = 902;
/// A fake PoSt job waits for the release of `POST_GATE + partition index` (and is recorded
/// under it in [`FakeProver::started`]).
pub const POST_GATE: u64 = 10_000;

/// A prover whose jobs block until the test releases their sector number, and record the
/// order they start in. Its "proof" ([`fake_proof_of`]) tells sector, miner and C1 output apart.
#[derive(Default)]
pub struct FakeProver {
    state: Mutex<FakeState>,
    cv: Condvar,
}

#[derive(Default)]
struct FakeState {
    started: Vec<u64>,
    /// The priority each call was given (by sector, or `POST_GATE` + partition), in call order.
    priorities: Vec<(u64, cuzk::Priority)>,
    finished: Vec<u64>,
    released: HashSet<u64>,
    release_all: bool,
    cancelled: Vec<u64>,
    /// PoSt vanilla checks run.
    post_checks: usize,
    /// Circuit ids of the fake parameter sets loaded (by preloads), in load order.
    loaded: Vec<String>,
}

/// Bytes of one fake parameter set.
pub const FAKE_SET_BYTES: u64 = 1000;

impl FakeProver {
    pub fn new() -> Arc<FakeProver> {
        Arc::new(FakeProver::default())
    }

    /// PoSt vanilla checks run so far.
    pub fn post_checks(&self) -> usize {
        self.state.lock().unwrap().post_checks
    }

    /// Lets the job of `sector` finish (now or when it starts).
    pub fn release(&self, sector: u64) {
        self.state.lock().unwrap().released.insert(sector);
        self.cv.notify_all();
    }

    /// Lets every job finish, from now on.
    pub fn release_all(&self) {
        self.state.lock().unwrap().release_all = true;
        self.cv.notify_all();
    }

    /// Sectors in the order their proofs started.
    pub fn started(&self) -> Vec<u64> {
        self.state.lock().unwrap().started.clone()
    }

    /// The priority each engine call was given (sector, or `POST_GATE` + partition), in the
    /// order of the calls.
    pub fn priorities(&self) -> Vec<(u64, cuzk::Priority)> {
        self.state.lock().unwrap().priorities.clone()
    }

    /// Sectors whose engine calls returned.
    pub fn finished(&self) -> Vec<u64> {
        self.state.lock().unwrap().finished.clone()
    }

    /// Sectors whose engine calls returned because their cancel token was set.
    pub fn cancelled(&self) -> Vec<u64> {
        self.state.lock().unwrap().cancelled.clone()
    }

    /// Waits (up to 10 s) until `n` proofs have started.
    pub fn wait_started(&self, n: usize) -> Vec<u64> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut st = self.state.lock().unwrap();
        while st.started.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "only {:?} started, waited for {n}",
                st.started
            );
            st = self.cv.wait_timeout(st, left).unwrap().0;
        }
        st.started.clone()
    }

    /// Records the start of `s`'s call (given `priority`) and blocks until `s` is released, or
    /// until `cancel` is set (polled, as the engine's checkpoints are): then
    /// [`cuzk::Error::Cancelled`].
    fn gate(
        &self,
        s: u64,
        priority: cuzk::Priority,
        cancel: &cuzk::CancelToken,
    ) -> Result<(), cuzk::Error> {
        let mut st = self.state.lock().unwrap();
        st.started.push(s);
        st.priorities.push((s, priority));
        self.cv.notify_all();
        while !st.release_all && !st.released.contains(&s) {
            if cancel.is_cancelled() {
                st.finished.push(s);
                st.cancelled.push(s);
                self.cv.notify_all();
                return Err(cuzk::Error::Cancelled);
            }
            st = self
                .cv
                .wait_timeout(st, Duration::from_millis(5))
                .unwrap()
                .0;
        }
        st.finished.push(s);
        self.cv.notify_all();
        Ok(())
    }

    /// Waits (up to 10 s) until the engine call of `sector` returned.
    pub fn wait_finished(&self, sector: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut st = self.state.lock().unwrap();
        while !st.finished.contains(&sector) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "sector {sector} did not finish");
            st = self.cv.wait_timeout(st, left).unwrap().0;
        }
    }
}

/// The fake proof of [`request`]`(sector, ..)`.
pub fn fake_proof(sector: u64) -> Vec<u8> {
    fake_proof_of(sector, MINER, &fake_c1(sector))
}

/// The fake proof of a sector, miner and C1 output: 192 bytes of the sector number's low byte,
/// the first 8 replaced by the miner id and the next 8 by a hash of the C1 output.
pub fn fake_proof_of(sector: u64, miner: u64, c1: &[u8]) -> Vec<u8> {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same on every run.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    c1.hash(&mut h);
    let mut p = vec![sector as u8; 192];
    p[..8].copy_from_slice(&miner.to_le_bytes());
    p[8..16].copy_from_slice(&h.finish().to_le_bytes());
    p
}

/// The fake proof of a PoSt job: 192 bytes of the partition index's low byte, the first 8
/// replaced by the miner id and the next 8 by a hash of the randomness and vanilla proofs.
pub fn fake_post_proof(
    partition: u64,
    miner: u64,
    randomness: &[u8],
    vanilla: &[Vec<u8>],
) -> Vec<u8> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    randomness.hash(&mut h);
    vanilla.hash(&mut h);
    let mut p = vec![partition as u8; 192];
    p[..8].copy_from_slice(&miner.to_le_bytes());
    p[8..16].copy_from_slice(&h.finish().to_le_bytes());
    p
}

impl Prover for FakeProver {
    fn prove_porep(
        &self,
        job: &PorepJob,
        cancel: &cuzk::CancelToken,
    ) -> Result<ProofOutput, cuzk::Error> {
        let s = job.sector_number;
        self.gate(s, job.priority, cancel)?;
        match s {
            SECTOR_OOM => Err(cuzk::Error::OutOfHostMemory {
                needed: 2,
                budget: 1,
            }),
            SECTOR_BAD_INPUT => Err(cuzk::Error::InvalidInput("replica id mismatch".into())),
            SECTOR_PANIC => panic!("fake prover panic"),
            _ => {
                let mut timings = cuzk::Timings::default();
                timings
                    .entries
                    .push((Some(0), cuzk::Stage::Synthesis, Duration::from_millis(40)));
                timings
                    .entries
                    .push((Some(0), cuzk::Stage::MsmH, Duration::from_millis(30)));
                Ok(ProofOutput {
                    proof: fake_proof_of(s, job.miner_id, &job.c1),
                    timings,
                })
            }
        }
    }

    /// Fake vanilla proofs pass: the engine's check is `post_fixture`'s to test.
    fn check_post(&self, job: &PostJob) -> Result<(), cuzk::Error> {
        self.state.lock().unwrap().post_checks += 1;
        if job.vanilla_proofs.is_empty() {
            return Err(cuzk::Error::InvalidInput("no vanilla proofs".into()));
        }
        Ok(())
    }

    fn prove_post(
        &self,
        job: &PostJob,
        cancel: &cuzk::CancelToken,
    ) -> Result<ProofOutput, cuzk::Error> {
        self.gate(POST_GATE + job.partition_index as u64, job.priority, cancel)?;
        Ok(ProofOutput {
            proof: fake_post_proof(
                job.partition_index as u64,
                job.miner_id,
                &job.randomness,
                &job.vanilla_proofs,
            ),
            timings: cuzk::Timings::default(),
        })
    }

    fn preload(&self, set: ParamSet) -> Result<bool, cuzk::Error> {
        let id = circuit_id(set);
        let mut st = self.state.lock().unwrap();
        let was = st.loaded.contains(&id);
        if !was {
            st.loaded.push(id);
        }
        Ok(was)
    }

    /// `porep-2k` (every fake PoRep job's) is in use while a fake PoRep job runs.
    fn evict(&self, set: ParamSet) -> Result<Eviction, cuzk::Error> {
        let id = circuit_id(set);
        let mut st = self.state.lock().unwrap();
        let running = st
            .started
            .iter()
            .filter(|s| **s < POST_GATE && !st.finished.contains(s))
            .count();
        if id == "porep-2k" && running > 0 {
            return Ok(Eviction::InUse { calls: running });
        }
        Ok(match st.loaded.iter().position(|l| *l == id) {
            Some(i) => {
                st.loaded.remove(i);
                Eviction::Evicted {
                    bytes: FAKE_SET_BYTES,
                }
            }
            None => Eviction::NotLoaded,
        })
    }

    fn loaded(&self) -> Vec<LoadedSrs> {
        self.state
            .lock()
            .unwrap()
            .loaded
            .iter()
            .map(|id| LoadedSrs {
                circuit_id: id.clone(),
                size_bytes: FAKE_SET_BYTES,
            })
            .collect()
    }

    fn memory(&self) -> MemoryState {
        MemoryState {
            used_bytes: 123,
            limit_bytes: Some(456),
        }
    }

    fn devices(&self) -> Vec<DeviceState> {
        Vec::new()
    }

    fn backend(&self) -> &'static str {
        "fake"
    }
}

/// A C1 wrapper as Curio sends it, for the fake prover (only its proof type and sizes are read
/// before the prover).
pub fn fake_c1(sector: u64) -> Vec<u8> {
    let inner =
        r#"{"registered_proof":"StackedDrg2KiBV1_1","vanilla_proofs":{"StackedDrg2KiBV1":[]}}"#;
    let b64 = base64::engine::general_purpose::STANDARD.encode(inner);
    format!(r#"{{"SectorNum":{sector},"Phase1Out":"{b64}","SectorSize":2048}}"#).into_bytes()
}

/// The miner id of [`request`].
pub const MINER: u64 = 1000;

/// A 2 KiB PoRep request as Curio builds it.
pub fn request(sector: u64, priority: proto::Priority, request_id: &str) -> SubmitProofRequest {
    SubmitProofRequest {
        request_id: request_id.to_string(),
        proof_kind: proto::ProofKind::PorepSealCommit as i32,
        sector_size: 2048,
        registered_proof: 5, // StackedDrg2KiBV1_1
        priority: priority as i32,
        vanilla_proof: fake_c1(sector),
        sector_number: sector,
        miner_id: MINER,
        ..Default::default()
    }
}

/// WindowPoSt 2 KiB (V1_1) in the actors' numbering.
pub const WINDOW_POST_2KIB: u64 = 10;

/// A 2 KiB WindowPoSt partition request as Curio builds it (fake vanilla proofs: only the
/// [`FakeProver`] takes them).
pub fn post_request(
    request_id: &str,
    partition: u32,
    randomness: [u8; 32],
    vanilla: Vec<Vec<u8>>,
) -> SubmitProofRequest {
    SubmitProofRequest {
        request_id: request_id.to_string(),
        proof_kind: proto::ProofKind::WindowPostPartition as i32,
        sector_size: 2048,
        registered_proof: WINDOW_POST_2KIB,
        priority: proto::Priority::High as i32,
        vanilla_proofs: vanilla,
        randomness: randomness.to_vec(),
        partition_index: partition,
        miner_id: MINER,
        ..Default::default()
    }
}

/// A `PreloadSRS` request of the circuit `id`.
pub fn preload(id: &str) -> proto::PreloadSrsRequest {
    proto::PreloadSrsRequest {
        circuit_id: id.into(),
    }
}

/// An `EvictSRS` request of the circuit `id`.
pub fn evict(id: &str) -> proto::EvictSrsRequest {
    proto::EvictSrsRequest {
        circuit_id: id.into(),
    }
}

/// The `GetMetrics` text of the daemon behind `c`.
pub async fn metrics(c: &mut ProvingEngineClient<Channel>) -> String {
    c.get_metrics(proto::GetMetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .prometheus_text
}

/// A client of a TCP address `ip:port`.
pub async fn tcp_client(addr: &str) -> ProvingEngineClient<Channel> {
    let ch = Endpoint::try_from(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connect");
    ProvingEngineClient::new(ch).max_decoding_message_size(256 << 20)
}

/// A client of a Unix socket.
pub async fn unix_client(path: PathBuf) -> ProvingEngineClient<Channel> {
    let ch = Endpoint::try_from("http://[::]:50051")
        .unwrap()
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let p = path.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::connect(p).await?,
                ))
            }
        }))
        .await
        .expect("connect unix");
    ProvingEngineClient::new(ch).max_decoding_message_size(256 << 20)
}

/// A fresh temporary directory (removed by the test harness's tmp cleanup, not by us).
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cuzk-daemon-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
