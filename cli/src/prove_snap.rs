//! `cuzk prove-snap`: SnapDeals proofs of a `snap.json` (`cuzk gen-snap`'s output: the update
//! proof type, the three commitments and the vanilla partition proofs as Curio sends them), each
//! checked with filecoin-proofs-api's `verify_empty_sector_update_proof`; `--repeat` / `--jobs`
//! as `cuzk prove` (the first proof alone, the cold one).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use cuzk::snap::SnapRequest;
use cuzk::{Engine, EngineConfig, Error, ProveOptions};
use cuzk_dev::snapgen::{GeneratedSnap, SnapFile};

use super::{out, parameter_dir, report_and_write, run_repeated, BackendArg, Failure, Finished};

#[derive(Args)]
pub(crate) struct ProveSnapArgs {
    /// The inputs: `snap.json` as `cuzk gen-snap` writes it.
    input: PathBuf,
    /// Directory of the SnapDeals circuit's .params / .vk files (default:
    /// $FIL_PROOFS_PARAMETER_CACHE, else /var/tmp/filecoin-proof-parameters).
    #[arg(long, value_name = "DIR")]
    pub(crate) params: Option<PathBuf>,
    /// Where partitions run: auto, cpu or gpu (default: $CUZK_BACKEND, else auto).
    #[arg(long, value_enum)]
    backend: Option<BackendArg>,
    /// Prove the inputs this many times on one engine, each proof checked with filecoin-proofs'
    /// verifier: the first proof alone (the cold one), then the rest --jobs at a time.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Proofs in flight at once after the first with --repeat (at most --repeat − 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: u32,
    /// Write the first proof (192 bytes per partition) to this file (default: print it in hex
    /// on stdout).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub(crate) fn prove_snap(a: ProveSnapArgs) -> Result<(), Failure> {
    let dir = parameter_dir(a.params.as_deref())?;
    let bytes = std::fs::read(&a.input).map_err(|e| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("reading {}: {e}", a.input.display()),
        ))
    })?;
    let malformed =
        |e: &dyn std::fmt::Display| Error::MalformedInput(format!("{}: {e:#}", a.input.display()));
    let g = serde_json::from_slice::<SnapFile>(&bytes)
        .map_err(|e| malformed(&e))
        .and_then(|f| GeneratedSnap::from_file(&f).map_err(|e| malformed(&e)))?;
    let mut config = EngineConfig::from_env()?.with_parameter_dir(dir);
    if let Some(b) = a.backend {
        config.backend = b.into();
    }
    let out = a
        .out
        .as_deref()
        .map(|p| out::ProofFile::check(p, &a.input))
        .transpose()?;
    let engine = Engine::new(config)?;
    let repeat = a.repeat as usize;
    let jobs = (a.jobs as usize).min(repeat - 1).max(1);
    say!(
        "proving {:?} ({} partition(s), {} vanilla proof bytes) on {}{}",
        g.registered_proof,
        g.vanilla_proofs.len(),
        g.vanilla_proofs.iter().map(Vec::len).sum::<usize>(),
        engine.backend_name(),
        if repeat > 1 {
            format!(", {repeat} proofs, {jobs} in flight")
        } else {
            String::new()
        }
    );
    let vanilla: Vec<&[u8]> = g.vanilla_proofs.iter().map(Vec::as_slice).collect();
    let req = SnapRequest {
        registered_proof: g.to_file().registered_proof,
        vanilla_proofs: &vanilla,
        comm_r_old: &g.comm_r_old,
        comm_r_new: &g.comm_r_new,
        comm_d_new: &g.comm_d_new,
        sector_size: None,
    };
    let options = ProveOptions::from_env()?;
    let start = Instant::now();
    let one = |i: usize| -> Result<Finished, Failure> {
        let t0 = start.elapsed().as_secs_f64();
        let proof = engine.prove_snap_deals(&req, &options)?.proof;
        let t1 = start.elapsed().as_secs_f64();
        let tv = Instant::now();
        match g.verify_with_filecoin_proofs(&proof) {
            Ok(true) => {}
            Ok(false) => {
                return Err(Failure::Rejected(format!(
                    "proof {i}: filecoin-proofs REJECTED it (the proof does not verify)"
                )))
            }
            Err(e) => {
                return Err(Failure::Rejected(format!(
                    "proof {i}: filecoin-proofs cannot check it: {e:#}"
                )))
            }
        }
        say!(
            "proof {i}: {} bytes in {:.3} s; verify_empty_sector_update_proof OK ({:.3} s)",
            proof.len(),
            t1 - t0,
            tv.elapsed().as_secs_f64()
        );
        Ok(Finished {
            start: t0,
            end: t1,
            proof,
        })
    };
    let done = run_repeated(repeat, jobs, one)?;
    report_and_write(&done, jobs, out.as_ref())
}
