//! `cuzk prove-post`: WindowPoSt or WinningPoSt proofs of a `post.json` (`cuzk gen-post`'s
//! output: the proof type, randomness, prover id, sectors and vanilla proofs as Curio sends
//! them), each checked with filecoin-proofs' `verify_window_post` / `verify_winning_post`;
//! `--repeat` / `--jobs` as `cuzk prove` (the first proof alone, the cold one).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use cuzk::{Engine, EngineConfig, Error, ProofKind, ProveOptions};
use cuzk_dev::postgen::{self, GeneratedPost, PostFile};

use super::{out, parameter_dir, report_and_write, run_repeated, BackendArg, Failure, Finished};

#[derive(Args)]
pub(crate) struct ProvePostArgs {
    /// The inputs: `post.json` as `cuzk gen-post` writes it.
    input: PathBuf,
    /// Directory of the PoSt circuit's .params / .vk files (default: $FIL_PROOFS_PARAMETER_CACHE,
    /// else /var/tmp/filecoin-proof-parameters).
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
    /// Write the first proof (192 bytes) to this file (default: print it in hex on stdout).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub(crate) fn prove_post(a: ProvePostArgs) -> Result<(), Failure> {
    let dir = parameter_dir(a.params.as_deref())?;
    let bytes = std::fs::read(&a.input).map_err(|e| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("reading {}: {e}", a.input.display()),
        ))
    })?;
    let malformed =
        |e: &dyn std::fmt::Display| Error::MalformedInput(format!("{}: {e:#}", a.input.display()));
    let g = serde_json::from_slice::<PostFile>(&bytes)
        .map_err(|e| malformed(&e))
        .and_then(|f| GeneratedPost::from_file(&f).map_err(|e| malformed(&e)))?;
    let number = g
        .registered_proof_number()
        .map_err(|e| Error::InvalidInput(format!("{e:#}")))?;
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
    let kind = g.kind();
    say!(
        "proving {:?} ({} sector(s), {} vanilla proof bytes) on {}{}",
        g.spec.registered_proof,
        g.sectors.len(),
        g.vanilla_proofs.iter().map(Vec::len).sum::<usize>(),
        engine.backend_name(),
        if repeat > 1 {
            format!(", {repeat} proofs, {jobs} in flight")
        } else {
            String::new()
        }
    );
    let vanilla: Vec<&[u8]> = g.vanilla_proofs.iter().map(Vec::as_slice).collect();
    let options = ProveOptions::from_env()?;
    let start = Instant::now();
    let one = |i: usize| -> Result<Finished, Failure> {
        let t0 = start.elapsed().as_secs_f64();
        let proof = match kind {
            ProofKind::WinningPost => engine.prove_winning_post(
                number,
                &vanilla,
                &g.randomness,
                &g.spec.prover_id,
                &options,
            )?,
            _ => engine.prove_window_post(
                number,
                &vanilla,
                &g.randomness,
                &g.spec.prover_id,
                0,
                &options,
            )?,
        }
        .proof;
        let t1 = start.elapsed().as_secs_f64();
        let tv = Instant::now();
        match postgen::verify_with_filecoin_proofs(&g, &proof) {
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
            "proof {i}: {} bytes in {:.3} s; filecoin-proofs verifier OK ({:.3} s)",
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
