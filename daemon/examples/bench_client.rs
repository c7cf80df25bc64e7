//! Throughput of a running `cuzk serve` from concurrent gRPC clients, measured as `cuzk prove
//! --repeat R --jobs J` measures it: proof 0 alone (the cold one), then proofs 1 … R − 1 from
//! `--clients` concurrent clients (each its own connection, each looping `Prove`); the steady
//! state is (last end − first start) / (R − 1) over those.
//!
//! ```text
//! cargo run --release -p cuzk-daemon --example bench_client -- --addr 127.0.0.1:9820 \
//!     --c1 /tmp/c32/c1-wrapper.json --miner-id 1000 --proofs 9 --clients 3
//! ```
//!
//! The C1 output may be plain or wrapped; the sector number comes from `--sector-num`, else the
//! wrapper's `SectorNum`; the proof type from the C1 output. Every request gets its own
//! request id (the daemon would otherwise attach resubmissions to one job).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use base64::Engine as _;
use clap::Parser;
use cuzk_daemon::proto::proving_engine_client::ProvingEngineClient;
use cuzk_daemon::proto::{self, await_proof_response::Status as JobStatus};
use tonic::transport::Endpoint;

/// One finished proof: index, start and end (seconds since the first start), total_ms.
type Done = (usize, f64, f64, u64);

#[derive(Parser)]
struct Args {
    /// The daemon: host:port.
    #[arg(long, default_value = "127.0.0.1:9820")]
    addr: String,
    /// The C1 output (SealCommitPhase1Output JSON or Curio's wrapper).
    #[arg(long)]
    c1: std::path::PathBuf,
    /// Sector number (default: the wrapper's SectorNum).
    #[arg(long)]
    sector_num: Option<u64>,
    /// Miner actor id (the number of f0NNNN).
    #[arg(long)]
    miner_id: u64,
    /// Proofs in all (the first alone).
    #[arg(long, default_value_t = 9)]
    proofs: usize,
    /// Concurrent clients after the first proof.
    #[arg(long, default_value_t = 2)]
    clients: usize,
}

#[derive(serde::Deserialize)]
struct Probe {
    #[serde(rename = "SectorNum")]
    sector_num: Option<u64>,
    #[serde(rename = "Phase1Out")]
    phase1_out: Option<String>,
    registered_proof: Option<filecoin_proofs_api::RegisteredSealProof>,
}

/// The numeric (actors') value of a proof type.
fn numeric(p: filecoin_proofs_api::RegisteredSealProof) -> Option<u64> {
    (0..20).find(|&v| cuzk_daemon::request::registered_seal_proof(v) == Some(p))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Args::parse();
    let c1 = std::fs::read(&a.c1)?;
    let outer: Probe = serde_json::from_slice(&c1)?;
    let proof_type = match &outer.phase1_out {
        Some(b) => {
            let inner: Probe =
                serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(b)?)?;
            inner.registered_proof
        }
        None => outer.registered_proof,
    }
    .ok_or("the C1 output has no registered_proof")?;
    let sector = a
        .sector_num
        .or(outer.sector_num)
        .ok_or("no --sector-num and no wrapper SectorNum")?;
    let base = proto::SubmitProofRequest {
        proof_kind: proto::ProofKind::PorepSealCommit as i32,
        sector_size: u64::from(proof_type.sector_size()),
        registered_proof: numeric(proof_type).ok_or("unknown proof type")?,
        priority: proto::Priority::Normal as i32,
        vanilla_proof: c1,
        sector_number: sector,
        miner_id: a.miner_id,
        ..Default::default()
    };
    let connect = || async {
        let ch = Endpoint::try_from(format!("http://{}", a.addr))?
            .connect()
            .await?;
        Ok::<_, Box<dyn std::error::Error>>(
            ProvingEngineClient::new(ch)
                .max_encoding_message_size(256 << 20)
                .max_decoding_message_size(256 << 20),
        )
    };
    let t0 = Instant::now();
    let done: Arc<Mutex<Vec<Done>>> = Arc::default();
    let results = done.clone();
    let base = Arc::new(base);
    let prove = move |mut c: ProvingEngineClient<tonic::transport::Channel>, i: usize| {
        let mut req = (*base).clone();
        req.request_id = format!("bench-{}-{i}", std::process::id());
        let done = done.clone();
        async move {
            let s = t0.elapsed().as_secs_f64();
            let r = c
                .prove(proto::ProveRequest { submit: Some(req) })
                .await?
                .into_inner()
                .result
                .ok_or("no result")?;
            let e = t0.elapsed().as_secs_f64();
            if r.status != JobStatus::Completed as i32 {
                return Err(format!("proof {i}: {:?} {}", r.status, r.error_message).into());
            }
            eprintln!(
                "proof {i}: {:.2} s (queue {} ms, srs {} ms, synthesis {} ms, gpu {} ms, total {} ms)",
                e - s,
                r.queue_wait_ms,
                r.srs_load_ms,
                r.synthesis_ms,
                r.gpu_compute_ms,
                r.total_ms
            );
            done.lock().unwrap().push((i, s, e, r.total_ms));
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(c)
        }
    };
    prove(connect().await?, 0)
        .await
        .map_err(|e| e.to_string())?;
    let next = Arc::new(AtomicUsize::new(1));
    let mut tasks = Vec::new();
    for _ in 0..a.clients {
        let mut c = connect().await?;
        let next = next.clone();
        let prove = prove.clone();
        let n = a.proofs;
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    return Ok::<_, String>(());
                }
                c = prove(c, i).await.map_err(|e| e.to_string())?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let done = results.lock().unwrap().clone();
    let rest: Vec<_> = done.iter().filter(|d| d.0 > 0).collect();
    if !rest.is_empty() {
        let first = rest.iter().map(|d| d.1).fold(f64::INFINITY, f64::min);
        let last = rest.iter().map(|d| d.2).fold(0.0, f64::max);
        println!(
            "{} proofs, {} clients: {last:.2} s in all; steady state (proofs 1 to {}) {:.2} s per proof",
            a.proofs,
            a.clients,
            a.proofs - 1,
            (last - first) / rest.len() as f64
        );
    }
    Ok(())
}
