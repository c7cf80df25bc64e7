//! SupraSeal C2 anchor: proves a C1 output with filecoin-proofs' `seal_commit_phase2` built with
//! the `cuda-supraseal` feature (SupraSeal's Groth16 prover on the GPU, bellperson's synthesis),
//! `--repeat` times in one process, checks every proof with `verify_seal`, and prints the wall
//! time of each (the first includes loading the parameters).
//!
//! Usage: supraseal-anchor C1.json --sector-num N --prover-id f0NNNN --params DIR [--repeat R]
//! (C1.json: the plain SealCommitPhase1Output JSON, as `cuzk gen-c1` writes c1.json).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use filecoin_proofs_api::seal::{seal_commit_phase2, verify_seal, SealCommitPhase1Output};
use filecoin_proofs_api::SectorId;

/// The 32-byte prover id of actor `id`: its unsigned LEB128 bytes, zero-padded (filecoin-ffi's
/// form of an f0 address's payload).
fn prover_id(s: &str) -> Result<[u8; 32]> {
    let digits = s.trim_start_matches("f0").trim_start_matches("t0");
    let mut id: u64 = digits.parse().context("--prover-id: expected f0NNNN")?;
    let mut out = [0u8; 32];
    let mut i = 0;
    loop {
        let b = (id & 0x7f) as u8;
        id >>= 7;
        if id == 0 {
            out[i] = b;
            break;
        }
        out[i] = b | 0x80;
        i += 1;
    }
    Ok(out)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| supraseal_anchor::flag(&args, name);
    let Some(c1_path) = args.first().filter(|a| !a.starts_with("--")) else {
        bail!("usage: supraseal-anchor C1.json --sector-num N --prover-id f0NNNN --params DIR [--repeat R]");
    };
    let sector: u64 = flag("--sector-num").context("--sector-num")?.parse()?;
    let prover = prover_id(&flag("--prover-id").unwrap_or_else(|| "f01000".into()))?;
    let params = flag("--params").context("--params")?;
    let repeat: usize = flag("--repeat").map_or(Ok(1), |r| r.parse())?;
    // filecoin-proofs reads the parameter directory once, from the environment; one thread here.
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &params);
    let c1: SealCommitPhase1Output = serde_json::from_slice(
        &std::fs::read(c1_path).with_context(|| format!("reading {c1_path}"))?,
    )
    .context("parsing the C1 output")?;
    let start = Instant::now();
    let mut times = Vec::with_capacity(repeat);
    for i in 0..repeat {
        let t = Instant::now();
        let out = seal_commit_phase2(c1.clone(), prover, SectorId::from(sector))?;
        let secs = t.elapsed().as_secs_f64();
        let ok = verify_seal(
            c1.registered_proof,
            c1.comm_r,
            c1.comm_d,
            prover,
            SectorId::from(sector),
            c1.ticket,
            c1.seed,
            &out.proof,
        )?;
        eprintln!(
            "supraseal proof {i}: {} bytes in {secs:.3} s, verify_seal {}",
            out.proof.len(),
            if ok { "OK" } else { "REJECTED" }
        );
        if !ok {
            bail!("verify_seal rejected SupraSeal's proof {i}");
        }
        times.push(secs);
    }
    let warm = &times[1.min(times.len() - 1)..];
    eprintln!(
        "supraseal {:?}: {repeat} proofs in {:.2} s; first {:.3} s, warm mean {:.3} s",
        c1.registered_proof,
        start.elapsed().as_secs_f64(),
        times[0],
        warm.iter().sum::<f64>() / warm.len() as f64
    );
    Ok(())
}
