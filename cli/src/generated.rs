//! What `prove-post` and `prove-snap` share: the inputs of `cuzk gen-post` / `cuzk gen-snap`
//! read from their JSON file, one engine over a parameter directory, and the proofs repeated
//! (`--repeat` / `--jobs` as `cuzk prove`: the first proof alone, the cold one), each checked
//! with filecoin-proofs' verifier of its kind before it counts.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use cuzk::{Engine, EngineConfig, Error, ProveOptions};
use serde::de::DeserializeOwned;

use super::{
    jobs_in_flight, out, parameter_dir, report_and_write, run_repeated, BackendArg, Failure,
    Finished,
};

/// The arguments of a command that proves a generated input file.
#[derive(Args)]
pub(crate) struct RunArgs {
    /// The inputs: the JSON file of this command's generator (prove-post: the `post.json` of
    /// `cuzk gen-post`; prove-snap: the `snap.json` of `cuzk gen-snap`).
    input: PathBuf,
    /// Directory of the circuit's .params / .vk files (default: $FIL_PROOFS_PARAMETER_CACHE,
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
    /// Proofs in flight at once after the first with --repeat. At most --repeat − 1 can be: a
    /// larger value is lowered to that (1 with --repeat 1) with a note on stderr.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: u32,
    /// Write the first proof (192 bytes per partition) to this file (default: print it in hex
    /// on stdout).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// An engine ready for a command's proofs, with its run's settings.
pub(crate) struct Run {
    pub(crate) engine: std::sync::Arc<Engine>,
    pub(crate) options: ProveOptions,
    repeat: usize,
    jobs: usize,
    out: Option<out::ProofFile>,
}

impl RunArgs {
    /// The input file read as `F`.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file when it cannot be read; [`Error::MalformedInput`] naming
    /// it when it is no `F`.
    pub(crate) fn read<F: DeserializeOwned>(&self) -> Result<F, Failure> {
        let bytes = std::fs::read(&self.input).map_err(|e| {
            Error::Io(std::io::Error::new(
                e.kind(),
                format!("reading {}: {e}", self.input.display()),
            ))
        })?;
        Ok(serde_json::from_slice::<F>(&bytes).map_err(|e| self.malformed(&e))?)
    }

    /// The [`Error::MalformedInput`] of the input file, for `e`.
    pub(crate) fn malformed(&self, e: &dyn std::fmt::Display) -> Error {
        Error::MalformedInput(format!("{}: {e:#}", self.input.display()))
    }

    /// Checks the parameter files of `set` in the parameter directory before any heavy work
    /// ([`cuzk::srs::check_files`]: both there, the `.params` file's headers and length, the
    /// two verifying keys equal; a few kilobytes read), as the engine's load would find them.
    ///
    /// # Errors
    /// The parameter directory's errors; [`Error::ParametersNotFound`] (exit 20) or
    /// [`Error::ParametersInvalid`] (exit 21) naming the file.
    pub(crate) fn check_params(&self, set: cuzk::srs::ParamSet) -> Result<(), Failure> {
        let dir = parameter_dir(self.params.as_deref())?;
        let params = set.params_path(&dir)?;
        cuzk::srs::check_files(&params, &params.with_extension("vk"))?;
        Ok(())
    }

    /// The engine (the environment's configuration over the parameter directory and
    /// `--backend`), the environment's prove options, and `--out` checked before any proving.
    ///
    /// # Errors
    /// The parameter directory's, the configuration's, `--out`'s and the engine's errors.
    pub(crate) fn start(&self) -> Result<Run, Failure> {
        let dir = parameter_dir(self.params.as_deref())?;
        let mut config = EngineConfig::from_env()?.with_parameter_dir(dir);
        if let Some(b) = self.backend {
            config.backend = b.into();
        }
        let out = self
            .out
            .as_deref()
            .map(|p| out::ProofFile::check(p, &self.input))
            .transpose()?;
        let jobs = jobs_in_flight(self.repeat, self.jobs);
        Ok(Run {
            engine: Engine::new(config)?,
            options: ProveOptions::from_env()?,
            repeat: self.repeat as usize,
            jobs,
            out,
        })
    }
}

impl Run {
    /// ` on BACKEND` and, with `--repeat`, `, N proofs, J in flight`: the end of the line a
    /// command prints before it proves.
    pub(crate) fn describe(&self) -> String {
        format!(
            " on {}{}",
            self.engine.backend_name(),
            if self.repeat > 1 {
                format!(", {} proofs, {} in flight", self.repeat, self.jobs)
            } else {
                String::new()
            }
        )
    }

    /// Proves `--repeat` times with `prove`, `--jobs` at a time after the first, each proof
    /// checked with `verify` (filecoin-proofs' verifier, named `verifier` in the proof's line);
    /// then the summary line, and proof 0 written to `--out` (or in hex to stdout).
    ///
    /// # Errors
    /// `prove`'s error; [`Failure::Rejected`] for a proof `verify` refuses or cannot check.
    pub(crate) fn repeat<E: std::fmt::Display>(
        &self,
        verifier: &str,
        prove: impl Fn() -> Result<Vec<u8>, Failure> + Sync,
        verify: impl Fn(&[u8]) -> Result<bool, E> + Sync,
    ) -> Result<(), Failure> {
        let start = Instant::now();
        let one = |i: usize| -> Result<Finished, Failure> {
            let t0 = start.elapsed().as_secs_f64();
            let proof = prove()?;
            let t1 = start.elapsed().as_secs_f64();
            let tv = Instant::now();
            match verify(&proof) {
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
                "proof {i}: {} bytes in {:.3} s; {verifier} OK ({:.3} s)",
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
        let done = run_repeated(self.repeat, self.jobs, one)?;
        report_and_write(&done, self.jobs, self.out.as_ref())
    }
}
