//! What the daemon proves with: the [`Prover`] trait, and [`EngineProver`], its implementation
//! over one long-lived [`cuzk::Engine`] (parameter sets stay loaded while they fit the host
//! budget: the engine evicts the least recently used idle set when another needs room,
//! WinningPoSt's never; see `cuzk::srs_cache`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuzk::srs::ParamSet;
use cuzk::srs_cache::Eviction;
use cuzk::{Engine, ProveOptions, Stage, Timings};

use crate::request::{circuit_id, PorepJob, PostJob, ProofJob, SnapJob};

/// A finished proof and the engine's stage timings.
#[derive(Clone, Debug)]
pub struct ProofOutput {
    /// Proof bytes (192 per partition), verified by the engine.
    pub proof: Vec<u8>,
    /// The engine's per-partition, per-stage timings.
    pub timings: Timings,
}

/// Parameters the prover holds loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedSrs {
    /// Circuit id (`porep-32g`, `wpost-32g`, `winning-32g`, ...).
    pub circuit_id: String,
    /// Host bytes of the loaded parameters.
    pub size_bytes: u64,
}

/// Host memory the prover accounts for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryState {
    /// Bytes in use: parameters, partitions in flight, pooled (pinned) buffers.
    pub used_bytes: u64,
    /// The limit, if one is set.
    pub limit_bytes: Option<u64>,
}

/// One device, as the status reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceState {
    /// CUDA ordinal.
    pub ordinal: u32,
    /// Device name.
    pub name: String,
    /// Device memory, bytes.
    pub total_bytes: u64,
    /// Free device memory, bytes.
    pub free_bytes: u64,
}

/// What proves the daemon's jobs. Called from the daemon's worker threads (blocking calls,
/// several at once with `--jobs` > 1); must be thread-safe. Tests use a fake one.
pub trait Prover: Send + Sync + 'static {
    /// Proves one PoRep C2 job; returns [`cuzk::Error::Cancelled`] soon after `cancel` is set
    /// (the engine's checkpoints, see [`cuzk::CancelToken`]).
    ///
    /// # Errors
    /// The engine's error, unchanged.
    fn prove_porep(
        &self,
        job: &PorepJob,
        cancel: &cuzk::CancelToken,
    ) -> Result<ProofOutput, cuzk::Error>;

    /// Proves one WindowPoSt partition or WinningPoSt job, cancelled as
    /// [`Prover::prove_porep`]. The default: [`cuzk::Error::UnsupportedProof`] (a prover of
    /// PoRep only).
    ///
    /// # Errors
    /// The engine's error, unchanged.
    fn prove_post(
        &self,
        job: &PostJob,
        cancel: &cuzk::CancelToken,
    ) -> Result<ProofOutput, cuzk::Error> {
        let _ = cancel;
        Err(cuzk::Error::UnsupportedProof(format!(
            "{}: this prover proves PoRep only",
            job.kind
        )))
    }

    /// Checks a PoSt job's vanilla proofs before it is queued. The default is the engine's
    /// check ([`cuzk::post::check`]: decoded and verified against the randomness and prover
    /// id); a test prover may accept its own fake vanilla proofs.
    ///
    /// # Errors
    /// The engine's input error (1xx).
    fn check_post(&self, job: &PostJob) -> Result<(), cuzk::Error> {
        job.with_request(cuzk::post::check)
    }

    /// Proves one SnapDeals job, cancelled as [`Prover::prove_porep`]. The default:
    /// [`cuzk::Error::UnsupportedProof`] (a prover of PoRep only).
    ///
    /// # Errors
    /// The engine's error, unchanged.
    fn prove_snap(
        &self,
        job: &SnapJob,
        cancel: &cuzk::CancelToken,
    ) -> Result<ProofOutput, cuzk::Error> {
        let _ = (job, cancel);
        Err(cuzk::Error::UnsupportedProof(
            "snap-deals: this prover proves PoRep only".into(),
        ))
    }

    /// Checks a SnapDeals job's vanilla proofs and commitments before it is queued. The
    /// default is the engine's check ([`cuzk::snap::check`]: one vanilla proof per partition,
    /// 32-byte commitments, each vanilla proof decoded and verified against them).
    ///
    /// # Errors
    /// The engine's input error (1xx).
    fn check_snap(&self, job: &SnapJob) -> Result<(), cuzk::Error> {
        job.with_request(cuzk::snap::check)
    }

    /// Proves `job` of any kind ([`Prover::prove_porep`], [`Prover::prove_post`],
    /// [`Prover::prove_snap`]).
    ///
    /// # Errors
    /// Theirs.
    fn prove(
        &self,
        job: &ProofJob,
        cancel: &cuzk::CancelToken,
    ) -> Result<ProofOutput, cuzk::Error> {
        match job {
            ProofJob::Porep(j) => self.prove_porep(j, cancel),
            ProofJob::Post(j) => self.prove_post(j, cancel),
            ProofJob::Snap(j) => self.prove_snap(j, cancel),
        }
    }

    /// Loads the parameter set `set` (read once while it stays loaded; may evict idle sets
    /// to make room); returns whether it was loaded already.
    ///
    /// # Errors
    /// The engine's error (e.g. parameters not found, a set larger than the host-memory
    /// limit).
    fn preload(&self, set: ParamSet) -> Result<bool, cuzk::Error>;

    /// Evicts the parameter set `set` if it is loaded and no proof uses it
    /// ([`Eviction::InUse`] otherwise: nothing done).
    ///
    /// # Errors
    /// The engine's error.
    fn evict(&self, set: ParamSet) -> Result<Eviction, cuzk::Error>;

    /// Parameters held loaded.
    fn loaded(&self) -> Vec<LoadedSrs>;

    /// Host memory in use.
    fn memory(&self) -> MemoryState;

    /// Devices in use (empty on the CPU backend).
    fn devices(&self) -> Vec<DeviceState>;

    /// `"gpu"` or `"cpu"` (or a test name).
    fn backend(&self) -> &'static str;
}

/// The [`Prover`] of `cuzk serve`: one [`cuzk::Engine`], kept for the daemon's life.
pub struct EngineProver {
    engine: Arc<Engine>,
    /// The parameter sets named so far (by a job, a preload or an eviction): their `.params`
    /// path and circuit id, which the status gives the engine's loaded sets.
    sets: Mutex<Vec<(ParamSet, PathBuf, String)>>,
    /// Last `nvidia-smi` answer and when it was read (GetStatus is polled by Curio).
    devices: Mutex<Option<(Instant, Vec<DeviceState>)>>,
    verify: bool,
}

impl EngineProver {
    /// A prover over `engine`; `verify` is [`ProveOptions::verify`] (on unless the operator set
    /// `CUZK_VERIFY=0`).
    pub fn new(engine: Arc<Engine>, verify: bool) -> Self {
        EngineProver {
            engine,
            sets: Mutex::new(Vec::new()),
            devices: Mutex::new(None),
            verify,
        }
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Records the `.params` path and circuit id of `set` (once per set) for the status.
    fn name(&self, set: ParamSet) -> Result<(), cuzk::Error> {
        let Ok(mut sets) = self.sets.lock() else {
            return Ok(());
        };
        if !sets.iter().any(|(s, _, _)| *s == set) {
            let dir = self.engine.config().resolved_parameter_dir();
            sets.push((set, set.params_path(&dir)?, circuit_id(set)));
        }
        Ok(())
    }

    /// [`EngineProver::name`] of a job's set; a failure is logged only (the job's proof
    /// reports its own).
    fn name_job(&self, set: Result<ParamSet, cuzk::Error>) {
        if let Err(e) = set.and_then(|set| self.name(set)) {
            log::warn!("naming a job's parameter set: {e}");
        }
    }

    /// The options of a job's proof: this prover's self-verification, `cancel`, `priority`.
    fn options(&self, cancel: &cuzk::CancelToken, priority: cuzk::Priority) -> ProveOptions {
        ProveOptions::default()
            .with_verify(self.verify)
            .with_cancel(cancel.clone())
            .with_priority(priority)
    }
}

impl From<cuzk::ProofOutput> for ProofOutput {
    fn from(out: cuzk::ProofOutput) -> Self {
        ProofOutput {
            proof: out.proof,
            timings: out.timings,
        }
    }
}

impl Prover for EngineProver {
    fn prove_porep(
        &self,
        job: &PorepJob,
        cancel: &cuzk::CancelToken,
    ) -> Result<ProofOutput, cuzk::Error> {
        let options = self.options(cancel, job.priority);
        self.name_job(Ok(ParamSet::Porep(job.registered_proof)));
        Ok(self
            .engine
            .prove_porep_c2(&job.c1, job.sector_number, &job.prover_id, &options)?
            .into())
    }

    fn prove_post(
        &self,
        job: &PostJob,
        cancel: &cuzk::CancelToken,
    ) -> Result<ProofOutput, cuzk::Error> {
        let options = self.options(cancel, job.priority);
        self.name_job(job.param_set());
        Ok(job
            .with_request(|req| self.engine.prove_post(req, &options))?
            .into())
    }

    fn prove_snap(
        &self,
        job: &SnapJob,
        cancel: &cuzk::CancelToken,
    ) -> Result<ProofOutput, cuzk::Error> {
        let options = self.options(cancel, job.priority);
        self.name_job(job.param_set());
        Ok(job
            .with_request(|req| self.engine.prove_snap_deals(req, &options))?
            .into())
    }

    fn preload(&self, set: ParamSet) -> Result<bool, cuzk::Error> {
        self.name(set)?;
        self.engine.preload_params(set)
    }

    fn evict(&self, set: ParamSet) -> Result<Eviction, cuzk::Error> {
        self.name(set)?;
        self.engine.evict_params(set)
    }

    /// The engine's loaded sets by circuit id (a set no job or request named: its file name).
    fn loaded(&self) -> Vec<LoadedSrs> {
        let sets = self.sets.lock().map(|s| s.clone()).unwrap_or_default();
        let mut loaded: Vec<LoadedSrs> = self
            .engine
            .loaded_params()
            .into_iter()
            .filter(|s| s.loaded)
            .map(|s| LoadedSrs {
                circuit_id: sets
                    .iter()
                    .find(|(_, path, _)| *path == s.path)
                    .map_or_else(
                        || {
                            s.path
                                .file_name()
                                .unwrap_or_default()
                                .to_string_lossy()
                                .into_owned()
                        },
                        |(_, _, id)| id.clone(),
                    ),
                size_bytes: s.bytes,
            })
            .collect();
        loaded.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        loaded
    }

    fn memory(&self) -> MemoryState {
        let b = self.engine.host_budget();
        let (params, partitions) = b.used();
        MemoryState {
            used_bytes: params + partitions + b.pooled(),
            limit_bytes: b.limit(),
        }
    }

    fn devices(&self) -> Vec<DeviceState> {
        if self.engine.backend_name() != "gpu" {
            return Vec::new();
        }
        let Ok(mut cache) = self.devices.lock() else {
            return Vec::new();
        };
        if let Some((at, d)) = cache.as_ref() {
            if at.elapsed() < Duration::from_secs(5) {
                return d.clone();
            }
        }
        let d = nvidia_smi();
        *cache = Some((Instant::now(), d.clone()));
        d
    }

    fn backend(&self) -> &'static str {
        self.engine.backend_name()
    }
}

/// The devices as `nvidia-smi` lists them (empty when it is missing or fails). The engine has
/// no public device query yet; this is what the status shows meanwhile.
fn nvidia_smi() -> Vec<DeviceState> {
    let out = std::process::Command::new("nvidia-smi")
        .args([
            "--query-gpu=index,name,memory.total,memory.free",
            "--format=csv,noheader,nounits",
        ])
        .output();
    let Ok(out) = out else { return Vec::new() };
    if !out.status.success() {
        return Vec::new();
    }
    parse_nvidia_smi(&String::from_utf8_lossy(&out.stdout))
}

/// Parses `index, name, memory.total, memory.free` lines (MiB).
fn parse_nvidia_smi(text: &str) -> Vec<DeviceState> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            if f.len() < 4 {
                return None;
            }
            Some(DeviceState {
                ordinal: f[0].parse().ok()?,
                name: f[1].to_string(),
                total_bytes: f[2].parse::<u64>().ok()? << 20,
                free_bytes: f[3].parse::<u64>().ok()? << 20,
            })
        })
        .collect()
}

/// Timings of one job, as the wire reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobTimings {
    /// Acceptance to start.
    pub queue_wait: Duration,
    /// Parameter and compiled-circuit loading.
    pub srs_load: Duration,
    /// Synthesis, summed over partitions.
    pub synthesis: Duration,
    /// NTTs, MSMs, transfers and the epilogue, summed over partitions.
    pub gpu_compute: Duration,
    /// Acceptance to end.
    pub total: Duration,
}

impl JobTimings {
    /// The engine stages of `t` in the wire's groups (queue wait and total are the daemon's).
    pub fn from_engine(t: &Timings) -> JobTimings {
        let sum = |stages: &[Stage]| stages.iter().map(|&s| t.total(s)).sum::<Duration>();
        JobTimings {
            srs_load: sum(&[Stage::LoadParams, Stage::Compile]),
            synthesis: sum(&[Stage::Synthesis]),
            gpu_compute: sum(&[
                Stage::Ntt,
                Stage::MsmH,
                Stage::MsmL,
                Stage::MsmA,
                Stage::MsmBG1,
                Stage::MsmBG2,
                Stage::Transfer,
                Stage::Epilogue,
            ]),
            ..JobTimings::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_lines_parse() {
        let d = parse_nvidia_smi("0, NVIDIA H200, 143771, 140000\nbad line\n");
        assert_eq!(
            d,
            vec![DeviceState {
                ordinal: 0,
                name: "NVIDIA H200".into(),
                total_bytes: 143771 << 20,
                free_bytes: 140000 << 20,
            }]
        );
    }

    #[test]
    fn engine_stages_are_grouped() {
        let mut t = Timings::default();
        let ms = Duration::from_millis;
        t.entries.push((None, Stage::LoadParams, ms(7)));
        t.entries.push((Some(0), Stage::Synthesis, ms(10)));
        t.entries.push((Some(1), Stage::Synthesis, ms(11)));
        t.entries.push((Some(0), Stage::Witness, ms(5))); // part of synthesis: not added again
        t.entries.push((Some(0), Stage::Ntt, ms(3)));
        t.entries.push((Some(0), Stage::MsmH, ms(4)));
        t.entries.push((Some(0), Stage::Verify, ms(100)));
        let j = JobTimings::from_engine(&t);
        assert_eq!(j.srs_load, ms(7));
        assert_eq!(j.synthesis, ms(21));
        assert_eq!(j.gpu_compute, ms(7));
    }
}
