//! The engine: parameter cache, backend choice, partition workers, and the `prove_porep_c2`
//! entry point.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bellperson::groth16::{verify_proof, Proof};
use blstrs::{Bls12, Scalar as Fr};
use ff::Field;
use filecoin_proofs::types::{MerkleTreeTrait, VanillaSealProof as RawVanillaSealProof};
use filecoin_proofs::DefaultPieceHasher;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_porep::stacked::{self, StackedCompound, StackedDrg};

use crate::budget::{HostBudget, Permit};
use crate::c1;
use crate::cancel::CancelToken;
use crate::circuit::{self, CompiledCircuit};
use crate::config::{Backend as BackendChoice, EngineConfig, HAhead, ProveOptions, Synthesis};
use crate::error::{Error, Result};
use crate::gpu::memory::hostpool::HostPool;
use crate::job::{Job, ProofKind};
use crate::post::PostRequest;
use crate::snap::SnapRequest;
use crate::pipeline::{Gate, Latch, Pass};
use crate::progress::{Reporter, Stage, Timings};
use crate::prover::{self, CpuBackend, Part, PartitionCtx, ProverBackend, PROOF_BYTES};
use crate::srs::{porep_param_paths, Queries, Srs};
use crate::srs_cache::{Hold, SetCache};
use crate::synth::Assignment;

/// Message of the panic armed by [`Engine::inject_panic_for_test`] (feature `test-hooks`).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub const INJECTED_PANIC_MESSAGE: &str = "cuzk test: injected panic";

/// Where and how one partition was proved.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PartitionReport {
    /// Partition index (0-based).
    pub partition: usize,
    /// Where the partition ran: `"cpu"` or `"gpu"` (`"cpu"` also for a GPU job that fell back
    /// to the CPU; its `tier` is then `cpu-fallback`).
    pub backend: &'static str,
    /// CUDA device ordinal, for the GPU backend.
    pub device: Option<usize>,
    /// On the GPU backend, the memory tier that ran (`resident`, `full-staging`, `partial` or
    /// `streaming`: [`crate::Tier`]) followed by where a, b, c were computed on the compiled
    /// path (`+spmv`: on the device, `+cpu-spmv`: on the host), e.g. `resident+spmv`; or
    /// `cpu-fallback` for a job the CPU ran (`CUZK_ALLOW_CPU`). `None` on the CPU backend.
    /// For a partition computed in parts (`h_ahead`), the tier of its last part, or
    /// `cpu-fallback` if any part ran on the CPU.
    pub tier: Option<String>,
    /// Whether the partition's H side (a, b, c, R1CS check, H step, H MSM) ran apart from, and
    /// before, its other four MSMs ([`crate::HAhead`]: while the parameters' L, A, B sections
    /// were still loading, or always).
    pub h_ahead: bool,
    /// Backend calls that computed the partition's MSMs: 1 in one pass; with `h_ahead`, the
    /// H side's plus one per group of the L, A, B_G1, B_G2 sections decoded together (2 when
    /// the file was in by the time the H side was done, up to 5 during a slow load).
    pub parts: usize,
}

/// [`PartitionReport::tier`] of a GPU job that the CPU ran (`CUZK_ALLOW_CPU`).
pub(crate) const CPU_FALLBACK_TIER: &str = "cpu-fallback";

/// Result of one proof of any kind ([`C2Output`] is its name for PoRep C2).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProofOutput {
    /// Proof bytes: 192 per partition (compressed A ‖ B ‖ C in bellperson's format), partitions
    /// in order — byte-identical in layout to filecoin-proofs' `seal_commit_phase2` output
    /// (PoRep C2), to filecoin-proofs-api's `generate_single_window_post_with_vanilla` (one
    /// WindowPoSt partition: 192 bytes) and `generate_winning_post_with_vanilla` (192 bytes).
    pub proof: Vec<u8>,
    /// One report per partition.
    pub partitions: Vec<PartitionReport>,
    /// Per-partition, per-stage timings.
    pub timings: Timings,
    /// Whether the proof was verified before returning (true unless turned off).
    pub verified: bool,
}

/// Result of one PoRep C2 proof.
pub type C2Output = ProofOutput;

/// One slot per compiled circuit (keyed by its parameter file): loaded at most once, even by
/// concurrent callers.
type Slot<T> = Arc<Mutex<Option<Arc<T>>>>;

/// The value of `key` in `map`, made by `load` on first use. Concurrent callers of one key wait
/// for the first; a failed load is not kept (a later call tries again).
fn once_per_key<T>(
    map: &Mutex<HashMap<PathBuf, Slot<T>>>,
    key: &Path,
    what: &str,
    load: impl FnOnce() -> Result<T>,
) -> Result<Arc<T>> {
    let slot = {
        let mut map = map
            .lock()
            .map_err(|_| Error::Internal(format!("{what} cache poisoned")))?;
        map.entry(key.to_path_buf()).or_default().clone()
    };
    let mut slot = slot
        .lock()
        .map_err(|_| Error::Internal(format!("{what} slot poisoned")))?;
    if let Some(v) = slot.as_ref() {
        return Ok(v.clone());
    }
    let v = Arc::new(load()?);
    *slot = Some(v.clone());
    Ok(v)
}

/// A prover engine: keeps loaded Groth16 parameters (one set per circuit, reused by every later
/// call while it stays loaded: within the host-memory budget, the least recently used idle set
/// is evicted when another needs room, WinningPoSt's never — [`crate::srs_cache`]) and the
/// backends. Thread-safe: share it behind an `Arc` and call [`Engine::prove_porep_c2`] from
/// many threads.
pub struct Engine {
    config: EngineConfig,
    /// Loaded parameter sets, keyed by their `.params` file.
    params: SetCache<Srs>,
    /// Host memory: loaded parameters and partitions in flight, across all calls.
    budget: Arc<HostBudget>,
    /// Buffers of the compiled path's witness (aux), page-locked once and reused by every
    /// partition and call (see [`crate::gpu::memory::hostpool`]); idle bytes counted in `budget`.
    /// Declared before `gpu`: fields drop in order, so idle buffers are unregistered while the
    /// devices are still open.
    host_pool: HostPool,
    /// Partitions in flight across all calls ([`crate::pipeline`]).
    gate: Gate,
    /// Places beyond the gate's limit for partitions whose witness runs on one thread
    /// ([`Job::serial_witness`]): their witnesses made ahead number the host's cores, not
    /// [`crate::Tuning::partitions_ahead`].
    serial_ahead: usize,
    /// Compiled circuits, keyed by their parameter file (one per proof type; evicted with it).
    circuits: Mutex<HashMap<PathBuf, Slot<CompiledCircuit>>>,
    /// Layouts recorded for [`Engine::witness_c1`] (no matrices), keyed likewise.
    #[cfg(feature = "internals")]
    layouts: Mutex<HashMap<PathBuf, Slot<circuit::Layout>>>,
    cpu: CpuBackend,
    gpu: Option<Arc<dyn ProverBackend>>,
    /// One-shot switch of [`Engine::inject_panic_for_test`].
    #[cfg(feature = "test-hooks")]
    panic_next: AtomicBool,
    /// Switch of [`Engine::pace_sections_for_test`], and the backend calls of split
    /// partitions finished so far (what it waits for).
    #[cfg(feature = "test-hooks")]
    pace_sections: (AtomicBool, AtomicUsize),
}

impl Engine {
    /// Creates an engine. Parameters are loaded on first use and kept.
    ///
    /// # Errors
    /// [`Error::NoDevice`] when `config.backend` is `Gpu` and no device is usable (and CPU
    /// fallback was not allowed).
    pub fn new(config: EngineConfig) -> Result<Arc<Engine>> {
        config.validate()?;
        let gpu = match config.backend {
            BackendChoice::Cpu => None,
            BackendChoice::Gpu | BackendChoice::Auto => match gpu_backend(&config) {
                Ok(g) => Some(g),
                Err(e) if config.backend == BackendChoice::Auto => {
                    log::info!("GPU backend unavailable ({e}); proving on the CPU");
                    None
                }
                Err(e) if config.allow_cpu_fallback => {
                    log::warn!("GPU backend requested but unavailable ({e}); CPU fallback allowed: proving on the CPU");
                    None
                }
                Err(e) => return Err(e),
            },
        };
        Self::with_gpu(config, gpu)
    }

    /// Testing only: an engine whose partitions run on `backend` where the GPU backend's would
    /// (its gate of partitions in flight sized by `backend`'s
    /// [`ProverBackend::parallel_partitions`]): for engine-level tests of what the GPU backend
    /// does around its devices (admission, priorities) on machines without one. Only with the
    /// feature `test-hooks`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad `config`.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn with_backend_for_test(
        config: EngineConfig,
        backend: Arc<dyn ProverBackend>,
    ) -> Result<Arc<Engine>> {
        config.validate()?;
        Self::with_gpu(config, Some(backend))
    }

    /// The engine of a checked `config` over the GPU backend `gpu` (`None`: the CPU).
    fn with_gpu(config: EngineConfig, gpu: Option<Arc<dyn ProverBackend>>) -> Result<Arc<Engine>> {
        let budget = Arc::new(HostBudget::new(config.host_memory_limit));
        // The GPU backend pins the pool's buffers and keeps one idle per worker; without a
        // device the buffers are plain `Vec`s, freed after their partition as before.
        let (registry, max_idle) = gpu.as_ref().map_or((None, 0), |g| g.host_pool_config());
        let host_pool = HostPool::new(registry, max_idle, Some(budget.clone()));
        // The GPU runs `slots` partitions at once; `ahead` more have their witness made
        // meanwhile (crate::pipeline). The CPU backend is bounded by the host budget alone.
        let gate = Gate::new(
            gpu.as_ref()
                .and_then(|g| g.parallel_partitions())
                .map(|slots| slots + config.tuning.partitions_ahead.unwrap_or(slots)),
        );
        if let Some(n) = gate.limit() {
            log::info!("at most {n} partitions in flight (CUZK_PARTITIONS_AHEAD)");
        }
        let ahead = gate
            .limit()
            .zip(gpu.as_ref().and_then(|g| g.parallel_partitions()))
            .map_or(0, |(limit, slots)| limit - slots);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let serial_ahead = cores.saturating_sub(ahead);
        Ok(Arc::new(Engine {
            params: SetCache::new(budget.clone()),
            budget,
            host_pool,
            gate,
            serial_ahead,
            config,
            circuits: Mutex::new(HashMap::new()),
            #[cfg(feature = "internals")]
            layouts: Mutex::new(HashMap::new()),
            cpu: CpuBackend,
            gpu,
            #[cfg(feature = "test-hooks")]
            panic_next: AtomicBool::new(false),
            #[cfg(feature = "test-hooks")]
            pace_sections: (AtomicBool::new(false), AtomicUsize::new(0)),
        }))
    }

    /// Testing only: makes the next [`Engine::prove_porep_c2`] call panic with the message
    /// [`INJECTED_PANIC_MESSAGE`] (once), to test the panic boundaries (C ABI, Go). Only with
    /// the feature `test-hooks`, which release builds never enable.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn inject_panic_for_test(&self) {
        self.panic_next.store(true, Ordering::SeqCst);
    }

    /// Testing only: a cold parameter load of this engine hands out each section after the
    /// first only once a split partition's backend call has finished since the one before
    /// (at most 60 s later), as a disk slower than the prover would, so that the partitions
    /// meet the sections one at a time ([`PartitionReport::parts`]). Only with the feature
    /// `test-hooks`.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn pace_sections_for_test(&self) {
        self.pace_sections.0.store(true, Ordering::SeqCst);
    }

    /// [`Engine::pace_sections_for_test`]'s count: one more split partition's backend call
    /// finished.
    fn part_done(&self) {
        #[cfg(feature = "test-hooks")]
        self.pace_sections.1.fetch_add(1, Ordering::SeqCst);
    }

    /// The configuration this engine was created with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Name of the backend partitions run on (`"gpu"` or `"cpu"`).
    pub fn backend_name(&self) -> &'static str {
        self.backend().name()
    }

    fn backend(&self) -> &dyn ProverBackend {
        match &self.gpu {
            Some(g) => g.as_ref(),
            None => &self.cpu,
        }
    }

    /// Takes `job`'s parameter set for the call (held until the call returns: never evicted
    /// meanwhile) and makes room for it before any partition starts ([`crate::srs_cache`]):
    /// the file's size while it is not loaded, beside one partition of the job and its compiled
    /// circuit when that is not loaded yet. WinningPoSt's set is pinned. May evict idle sets,
    /// and wait for a set in use to go idle.
    ///
    /// # Errors
    /// [`Error::OutOfHostMemory`] for a set larger than the caller's whole limit;
    /// [`Error::Cancelled`] while it waits.
    fn hold_params(&self, job: &dyn Job, options: &ProveOptions) -> Result<Hold<'_, Srs>> {
        let path = job.params_path();
        let cached = self.cached_circuit(path);
        let abc_on_host = self.budget.is_strict()
            || self.gpu.is_none()
            || options.synthesis == Synthesis::Reference;
        let circuit = match (options.synthesis, &cached) {
            (Synthesis::Compiled | Synthesis::Gadget, None) => {
                job.constraints_bound() * CIRCUIT_BYTES_PER_CONSTRAINT
            }
            _ => 0,
        };
        let headroom = job.partition_host_bytes(abc_on_host, cached.as_deref()) + circuit;
        let cancel = options.cancel.as_ref();
        let pinned = job.kind() == ProofKind::WinningPost;
        let set = self.params.hold(path, pinned, headroom, cancel)?;
        let file = std::fs::metadata(path).map_or(0, |m| m.len());
        set.make_room(file, cancel, &|p| self.forget_set(p))?;
        self.host_pool.trim_to_budget();
        Ok(set)
    }

    /// The held set's parameters: loaded now by this call, or by another call of the set
    /// (waited for), or found loaded — read from the `.params` file at most once while they
    /// stay loaded. The file is checked against the verifying-key file next to it (same name,
    /// extension `.vk`: the key filecoin-proofs' `verify_seal` uses), whose key then verifies
    /// every proof made with them; with [`EngineConfig::verify_production_params`], both files
    /// are first checked against the official digests ([`crate::digest::check_official`];
    /// hashed once per file and process). `on_section` is called after each section is decoded
    /// when this call is the one that reads the file ([`Srs::load_with_vk_then`]).
    ///
    /// # Errors
    /// [`Error::ParametersNotFound`] naming the missing `.params` or `.vk` file;
    /// [`Error::ParametersInvalid`] from [`Srs::load_with_vk`] (bad file; the two keys differ:
    /// names both files) or from the digest check (names the file). A failed load is not
    /// kept: a later call tries again (e.g. after the file was fetched).
    fn load_params(&self, set: &Hold<'_, Srs>, on_section: &mut dyn FnMut(&Srs)) -> Result<Arc<Srs>> {
        let srs = set.load(|| self.read_params(set.key(), on_section), Srs::size_bytes)?;
        self.host_pool.trim_to_budget();
        Ok(srs)
    }

    /// What evicting the set at `path` frees beside its points: its compiled circuit (no longer
    /// counted; a circuit being recorded right now is left, as no proof of an idle set records
    /// it) and what the backend readied for it (the GPU's page-locked registrations, which
    /// keep the points). Returns the circuit's bytes.
    fn forget_set(&self, path: &Path) -> u64 {
        let mut freed = 0;
        if let Ok(mut map) = self.circuits.lock() {
            let idle = map.get(path).is_some_and(|slot| slot.try_lock().is_ok());
            if let Some(slot) = idle.then(|| map.remove(path)).flatten() {
                if let Some(cc) = slot.lock().ok().and_then(|mut cc| cc.take()) {
                    freed = cc.matrix_bytes();
                    self.budget.sub_params(freed);
                }
            }
        }
        self.backend().forget_params(path);
        freed
    }

    /// The compiled circuit kept for the parameter file `path`, if it is recorded.
    fn cached_circuit(&self, path: &Path) -> Option<Arc<CompiledCircuit>> {
        let slot = self.circuits.lock().ok()?.get(path).cloned()?;
        let cc = slot.try_lock().ok()?.clone();
        cc
    }

    /// Loads the parameter set `set` now, as a proof would (the daemon's `PreloadSRS`,
    /// `cuzk serve --preload`): room made for the set alone (idle sets evicted as needed,
    /// [`crate::srs_cache`]; WinningPoSt's pinned), then readied for the backend (the GPU pins
    /// it). Returns whether it was loaded already.
    ///
    /// # Errors
    /// As a proof's load ([`Error::ParametersNotFound`], [`Error::ParametersInvalid`]);
    /// [`Error::OutOfHostMemory`] for a set larger than the caller's whole limit;
    /// [`Error::Internal`] when filecoin-proofs cannot name its file.
    #[cfg(feature = "internals")]
    pub fn preload_params(&self, set: crate::srs::ParamSet) -> Result<bool> {
        let path = set.params_path(&self.config.resolved_parameter_dir())?;
        let pinned = set.kind() == ProofKind::WinningPost;
        let hold = self.params.hold(&path, pinned, 0, None)?;
        let was = self.params.is_loaded(&path);
        let file = std::fs::metadata(&path).map_or(0, |m| m.len());
        hold.make_room(file, None, &|p| self.forget_set(p))?;
        let srs = self
            .load_params(&hold, &mut |_| {})
            .map_err(|e| self.with_given_dir(e))?;
        if !was {
            self.backend().prepare_params(&srs);
        }
        Ok(was)
    }

    /// Evicts the parameter set `set` (the daemon's `EvictSRS`) when it is loaded and no call
    /// holds it, WinningPoSt's too; its compiled circuit goes with it.
    ///
    /// # Errors
    /// [`Error::Internal`] when filecoin-proofs cannot name its file.
    #[cfg(feature = "internals")]
    pub fn evict_params(&self, set: crate::srs::ParamSet) -> Result<crate::srs_cache::Eviction> {
        let path = set.params_path(&self.config.resolved_parameter_dir())?;
        self.params.evict(&path, &|p| self.forget_set(p))
    }

    /// The parameter sets loaded, or being loaded, by path.
    #[cfg(feature = "internals")]
    pub fn loaded_params(&self) -> Vec<crate::srs_cache::SetState> {
        self.params.sets()
    }

    /// How many times a parameter file was read so far (a loaded set is never read again while
    /// it stays loaded).
    #[cfg(feature = "internals")]
    pub fn param_loads(&self) -> u64 {
        self.params.loads()
    }

    fn read_params(&self, path: &Path, on_section: &mut dyn FnMut(&Srs)) -> Result<Srs> {
        let t = Instant::now();
        let vk_path = path.with_extension("vk");
        if self.config.verify_production_params {
            crate::digest::check_official(path)?;
            crate::digest::check_official(&vk_path)?;
        }
        let srs = Srs::load_with_vk_then(path, &vk_path, on_section)?;
        log::info!(
            "loaded parameters {} ({:.2} GB) in {:.2} s",
            path.display(),
            srs.size_bytes() as f64 / 1e9,
            t.elapsed().as_secs_f64()
        );
        Ok(srs)
    }

    /// The compiled circuit of `job`'s proof type (keyed by its parameter file): kept by the
    /// engine after first use, read from the circuit cache
    /// ([`crate::EngineConfig::circuit_cache`]) or recorded from the circuit (and cached).
    ///
    /// # Errors
    /// [`Error::Internal`] if the circuit cannot be recorded; cache problems are warnings.
    fn load_circuit(&self, job: &dyn Job) -> Result<Arc<CompiledCircuit>> {
        once_per_key(&self.circuits, job.params_path(), "circuit", || {
            self.read_circuit(job)
        })
    }

    fn read_circuit(&self, job: &dyn Job) -> Result<CompiledCircuit> {
        let (name, key) = job.circuit_cache_name_and_key();
        let t = Instant::now();
        let dir = self.config.circuit_cache.dir();
        let (cc, outcome) = circuit::cache::load_or_build(dir.as_deref(), &name, &key, || {
            let t = Instant::now();
            let cc = job.compile()?;
            log::info!(
                "recorded the circuit of {name} in {:.2} s: {} constraints, {} inputs, {} aux, \
                 {} challenges; non-zeros A {} B {} C {}, {} coefficients, {:.1} MB",
                t.elapsed().as_secs_f64(),
                cc.layout.num_constraints(),
                cc.layout.num_inputs(),
                cc.layout.num_aux(),
                cc.layout.challenges,
                cc.a.nnz(),
                cc.b.nnz(),
                cc.c.nnz(),
                cc.coeffs.len(),
                cc.matrix_bytes() as f64 / 1e6
            );
            Ok(cc)
        })?;
        log::info!(
            "compiled circuit {name}: {outcome:?} in {:.2} s{}",
            t.elapsed().as_secs_f64(),
            dir.map(|d| format!(" (cache {})", d.display()))
                .unwrap_or_default()
        );
        // Kept while its parameter set is (~5.8 GB for a 32 GiB PoRep).
        self.budget.add_params(cc.matrix_bytes());
        self.host_pool.trim_to_budget();
        Ok(cc)
    }

    /// Proves commit phase 2 of one sector.
    ///
    /// * `c1_output` — the `SealCommitPhase1Output` JSON of filecoin-proofs(-api), or the wrapper
    ///   `{"SectorNum": n, "Phase1Out": base64(JSON), "SectorSize": bytes}`.
    /// * `sector_id` — the sector number.
    /// * `prover_id` — 32 bytes (see [`crate::c1::prover_id_from_actor_id`]).
    ///
    /// Returns 192 bytes per partition (10 partitions for 32 GiB sectors, 1 for 2 KiB … 512 MiB),
    /// verified against the verifying key unless `options.verify` is off.
    ///
    /// # Errors
    /// Input errors (1xx) before any heavy work; parameter errors (2xx); device and memory errors
    /// (3xx, 4xx); [`Error::Synthesis`] when the inputs do not satisfy the circuit;
    /// [`Error::VerificationFailed`] if a proof does not verify; [`Error::Panic`] if a worker
    /// panicked.
    pub fn prove_porep_c2(
        &self,
        c1_output: &[u8],
        sector_id: u64,
        prover_id: &[u8],
        options: &ProveOptions,
    ) -> Result<C2Output> {
        #[cfg(feature = "test-hooks")]
        if self.panic_next.swap(false, Ordering::SeqCst) {
            panic!("{INJECTED_PANIC_MESSAGE}");
        }
        let reporter = Reporter::new(options.progress.clone());
        let mut timings = Timings::default();
        let start = Instant::now();
        let prover_id = c1::prover_id(prover_id)?;
        // Parse is reported once, by `prepare`, after the vanilla proofs are checked too; the
        // JSON's share is timed here and added there.
        let parse_start = Instant::now();
        let input = c1::parse(c1_output).and_then(|input| {
            c1::validate(&input, sector_id, &prover_id)?;
            if let Some(rs) = &options.randomness {
                let want = usize::from(input.output.registered_proof.partitions());
                if rs.len() != want {
                    return Err(Error::InvalidInput(format!(
                        "{} (r, s) pairs given for {want} partitions",
                        rs.len()
                    )));
                }
            }
            Ok(input)
        });
        let input = match input {
            Ok(input) => input,
            Err(e) => {
                reporter.report(&mut timings, None, Stage::Parse, parse_start.elapsed());
                return Err(e);
            }
        };
        let parsed = parse_start.elapsed();
        CancelToken::check(options.cancel.as_ref())?;
        let proof_type = input.output.registered_proof;
        log::info!(
            "prove_porep_c2: sector {sector_id}, {proof_type:?}, {} partition(s), backend {}",
            proof_type.partitions(),
            self.backend_name()
        );
        let mut out = filecoin_proofs::with_shape!(
            u64::from(proof_type.sector_size()),
            prove_shape,
            self,
            input.output,
            sector_id,
            parsed,
            options,
            &reporter,
            &mut timings,
        )
        .map_err(|e| self.with_given_dir(e))?;
        reporter.report(&mut timings, None, Stage::Total, start.elapsed());
        out.timings = timings;
        Ok(out)
    }

    /// `e` with its missing-parameter hint naming the directory the caller gave (one that is
    /// not FIL_PROOFS_PARAMETER_CACHE's: that hint names the variable).
    fn with_given_dir(&self, e: Error) -> Error {
        let from_var = std::env::var_os("FIL_PROOFS_PARAMETER_CACHE").map(PathBuf::from);
        let given =
            (self.config.parameter_dir.as_deref()).filter(|d| from_var.as_deref() != Some(*d));
        e.with_parameter_dir(given)
    }

    /// Proves one WindowPoSt partition, as filecoin-proofs-api's
    /// `post::generate_single_window_post_with_vanilla` does (its output: 192 bytes).
    ///
    /// * `registered_proof` — the PoSt proof type in the actors' numbering: 10–14 (WindowPoSt
    ///   2 KiB … 64 GiB, V1_1; [`crate::post::registered_post_proof`]).
    /// * `vanilla_proofs` — one per sector of the partition (at most 2349 at 32 GiB), each the
    ///   bytes of `post::generate_single_vanilla_proof`.
    /// * `randomness` — 32 bytes; `prover_id` — 32 bytes
    ///   ([`crate::c1::prover_id_from_actor_id`]); `partition_index` — the partition in the
    ///   deadline.
    ///
    /// Verified against the verifying key (the `.vk` beside the `.params` file) unless
    /// `options.verify` is off.
    ///
    /// # Errors
    /// Input errors (1xx, see [`crate::post::check`]) before any heavy work; then as
    /// [`Engine::prove_porep_c2`].
    pub fn prove_window_post(
        &self,
        registered_proof: u64,
        vanilla_proofs: &[&[u8]],
        randomness: &[u8],
        prover_id: &[u8],
        partition_index: usize,
        options: &ProveOptions,
    ) -> Result<ProofOutput> {
        self.prove_post(
            &PostRequest {
                kind: ProofKind::WindowPost,
                registered_proof,
                vanilla_proofs,
                randomness,
                prover_id,
                partition_index,
            },
            options,
        )
    }

    /// Proves a WinningPoSt, as filecoin-proofs-api's `post::generate_winning_post_with_vanilla`
    /// does (its output: 192 bytes).
    ///
    /// * `registered_proof` — 0–4 (WinningPoSt 2 KiB … 64 GiB).
    /// * `vanilla_proofs` — the challenged sector's vanilla proof (one).
    /// * `randomness`, `prover_id` — 32 bytes each.
    ///
    /// # Errors
    /// As [`Engine::prove_window_post`].
    pub fn prove_winning_post(
        &self,
        registered_proof: u64,
        vanilla_proofs: &[&[u8]],
        randomness: &[u8],
        prover_id: &[u8],
        options: &ProveOptions,
    ) -> Result<ProofOutput> {
        self.prove_post(
            &PostRequest {
                kind: ProofKind::WinningPost,
                registered_proof,
                vanilla_proofs,
                randomness,
                prover_id,
                partition_index: 0,
            },
            options,
        )
    }

    /// Proves the PoSt `req` of either kind ([`Engine::prove_window_post`],
    /// [`Engine::prove_winning_post`]).
    ///
    /// # Errors
    /// As [`Engine::prove_window_post`].
    pub fn prove_post(&self, req: &PostRequest<'_>, options: &ProveOptions) -> Result<ProofOutput> {
        #[cfg(feature = "test-hooks")]
        if self.panic_next.swap(false, Ordering::SeqCst) {
            panic!("{INJECTED_PANIC_MESSAGE}");
        }
        let reporter = Reporter::new(options.progress.clone());
        let mut timings = Timings::default();
        let start = Instant::now();
        let proof = crate::post::registered_post_proof(req.kind, req.registered_proof)?;
        if let Some(rs) = &options.randomness {
            if rs.len() != 1 {
                return Err(Error::InvalidInput(format!(
                    "{} (r, s) pairs given for 1 partition",
                    rs.len()
                )));
            }
        }
        CancelToken::check(options.cancel.as_ref())?;
        log::info!(
            "prove_post: {}, {proof:?}, {} sector proof(s), backend {}",
            req.kind,
            req.vanilla_proofs.len(),
            self.backend_name()
        );
        let mut out = filecoin_proofs::with_shape!(
            u64::from(proof.sector_size()),
            prove_post_shape,
            self,
            req,
            proof,
            options,
            &reporter,
            &mut timings,
        )
        .map_err(|e| self.with_given_dir(e))?;
        reporter.report(&mut timings, None, Stage::Total, start.elapsed());
        out.timings = timings;
        Ok(out)
    }

    /// Proves a SnapDeals sector update, as filecoin-proofs-api's
    /// `update::generate_empty_sector_update_proof_with_vanilla` does (its output: 192 bytes per
    /// partition, 16 partitions at 32 GiB: 3,072 bytes; see [`crate::snap`]).
    ///
    /// Each partition is verified against the verifying key (the `.vk` beside the `.params`
    /// file), then the whole proof as `update::verify_empty_sector_update_proof` verifies it,
    /// unless `options.verify` is off.
    ///
    /// # Errors
    /// Input errors (1xx, see [`crate::snap::check`]) before any heavy work; then as
    /// [`Engine::prove_porep_c2`].
    pub fn prove_snap_deals(
        &self,
        req: &SnapRequest<'_>,
        options: &ProveOptions,
    ) -> Result<ProofOutput> {
        #[cfg(feature = "test-hooks")]
        if self.panic_next.swap(false, Ordering::SeqCst) {
            panic!("{INJECTED_PANIC_MESSAGE}");
        }
        let reporter = Reporter::new(options.progress.clone());
        let mut timings = Timings::default();
        let start = Instant::now();
        let proof = crate::snap::registered_update_proof(req.registered_proof)?;
        let partitions = crate::snap::partitions(req.registered_proof)?;
        if let Some(rs) = &options.randomness {
            if rs.len() != partitions {
                return Err(Error::InvalidInput(format!(
                    "{} (r, s) pairs given for {partitions} partitions",
                    rs.len()
                )));
            }
        }
        CancelToken::check(options.cancel.as_ref())?;
        log::info!(
            "prove_snap_deals: {proof:?}, {} vanilla proof(s), backend {}",
            req.vanilla_proofs.len(),
            self.backend_name()
        );
        let mut out = filecoin_proofs::with_shape!(
            u64::from(proof.sector_size()),
            prove_snap_shape,
            self,
            req,
            proof,
            options,
            &reporter,
            &mut timings,
        )
        .map_err(|e| self.with_given_dir(e))?;
        reporter.report(&mut timings, None, Stage::Total, start.elapsed());
        out.timings = timings;
        Ok(out)
    }

    /// The proving assignment (witness, a, b, c, densities) of one partition of a C1 output, by
    /// the given synthesis path — what [`Engine::prove_porep_c2`] computes before the H step and
    /// the MSMs. For comparing the paths and for benches; `timings` gets the stages.
    ///
    /// # Errors
    /// As [`Engine::prove_porep_c2`] for input, parameter and synthesis errors (the assignment
    /// is not checked against the R1CS here: see [`prover::check_satisfied`]).
    #[cfg(feature = "internals")]
    pub fn synthesize_c1(
        &self,
        c1_output: &[u8],
        sector_id: u64,
        prover_id: &[u8],
        partition: usize,
        synthesis: Synthesis,
        timings: &mut Timings,
    ) -> Result<Assignment> {
        let reporter = Reporter::new(None);
        let t = Instant::now();
        let output = checked_c1(c1_output, sector_id, prover_id)?;
        let parsed = t.elapsed();
        filecoin_proofs::with_shape!(
            u64::from(output.registered_proof.sector_size()),
            synthesize_shape,
            self,
            output,
            sector_id,
            parsed,
            partition,
            synthesis,
            &reporter,
            timings,
        )
    }

    /// The witness z of one partition of a C1 output — natively ([`Synthesis::Compiled`]) or
    /// by the gadgets ([`Synthesis::Gadget`]) — limited to its first `challenges` challenges
    /// when given (the prefix and those blocks: a 32 GiB partition's 18 take 4.2 GB), with the
    /// circuit's layout (from recording one challenge; no matrices are assembled). For the
    /// value-for-value comparison of the two witness paths and for benches; `timings` gets
    /// [`Stage::Witness`].
    ///
    /// # Errors
    /// As [`Engine::synthesize_c1`]; [`Error::InvalidInput`] for [`Synthesis::Reference`]
    /// (it has no witness of its own) or a partition out of range.
    #[allow(clippy::too_many_arguments)]
    #[cfg(feature = "internals")]
    pub fn witness_c1(
        &self,
        c1_output: &[u8],
        sector_id: u64,
        prover_id: &[u8],
        partition: usize,
        synthesis: Synthesis,
        challenges: Option<usize>,
        timings: &mut Timings,
    ) -> Result<(circuit::Layout, circuit::Witness)> {
        if synthesis == Synthesis::Reference {
            return Err(Error::InvalidInput(
                "the reference synthesis has no witness of its own".into(),
            ));
        }
        let reporter = Reporter::new(None);
        let t = Instant::now();
        let output = checked_c1(c1_output, sector_id, prover_id)?;
        let parsed = t.elapsed();
        filecoin_proofs::with_shape!(
            u64::from(output.registered_proof.sector_size()),
            witness_shape,
            self,
            output,
            sector_id,
            parsed,
            partition,
            synthesis == Synthesis::Compiled,
            challenges,
            &reporter,
            timings,
        )
    }

    /// The compiled circuit of a C1 output's proof type (the one the engine keeps for its
    /// parameter file), after the same input checks as [`Engine::synthesize_c1`]. For tests and
    /// benches that run the SpMV on their own (tests/gpu_spmv.rs).
    ///
    /// # Errors
    /// As [`Engine::synthesize_c1`] for input and parameter errors.
    #[cfg(feature = "internals")]
    pub fn circuit_c1(
        &self,
        c1_output: &[u8],
        sector_id: u64,
        prover_id: &[u8],
    ) -> Result<Arc<CompiledCircuit>> {
        let reporter = Reporter::new(None);
        let mut timings = Timings::default();
        let t = Instant::now();
        let output = checked_c1(c1_output, sector_id, prover_id)?;
        let parsed = t.elapsed();
        filecoin_proofs::with_shape!(
            u64::from(output.registered_proof.sector_size()),
            circuit_shape,
            self,
            output,
            sector_id,
            parsed,
            &reporter,
            &mut timings,
        )
    }

    /// The engine-wide host-memory budget (loaded parameters + partitions in flight + idle
    /// pooled buffers).
    #[cfg(feature = "internals")]
    pub fn host_budget(&self) -> &HostBudget {
        &self.budget
    }

    /// The engine's pool of witness buffers (see [`crate::gpu::memory::hostpool`]).
    #[cfg(feature = "internals")]
    pub fn host_pool(&self) -> &HostPool {
        &self.host_pool
    }

    /// The engine's gate of partitions in flight (see [`crate::pipeline`]).
    #[cfg(feature = "internals")]
    pub fn gate(&self) -> &Gate {
        &self.gate
    }
}

/// Estimated host bytes one partition needs while it is proved, per constraint:
/// [`HOST_BYTES_ABC`] when a, b, c are in host memory (assignment a, b, c, aux, densities and
/// the H vector), [`HOST_BYTES_WITNESS`] when only the witness z is (the compiled circuit with
/// the GPU SpMV: 32 B of z per variable, densities, the walk's temporaries). 32 GiB: ~22 GB
/// resp. ~5.2 GB; 2 KiB: ~0.46 GB resp. ~0.11 GB.
pub fn partition_host_bytes(sector_size: u64, abc_on_host: bool) -> u64 {
    porep_partition_constraints(sector_size)
        * if abc_on_host {
            HOST_BYTES_ABC
        } else {
            HOST_BYTES_WITNESS
        }
}

/// Constraints of one PoRep partition of `sector_size`-byte sectors, rounded up (130.3 M at
/// 32 GiB).
pub(crate) fn porep_partition_constraints(sector_size: u64) -> u64 {
    match sector_size {
        s if s >= 64 << 30 => 131_000_000,
        s if s >= 32 << 30 => 130_300_000,
        s if s >= 512 << 20 => 4_500_000,
        s if s >= 8 << 20 => 3_900_000,
        _ => 2_700_000,
    }
}

/// Host bytes per constraint of a partition with a, b, c in host memory.
pub const HOST_BYTES_ABC: u64 = 170;
/// Host bytes per constraint of a partition whose a, b, c are computed on the device.
pub const HOST_BYTES_WITNESS: u64 = 40;
/// Host bytes per constraint of a compiled circuit (its matrices; 5.8 GB for a 32 GiB PoRep
/// partition's 130.3 M constraints, 44.5 B each), counted in a cold proof's room before it is
/// recorded or read.
pub const CIRCUIT_BYTES_PER_CONSTRAINT: u64 = 48;

#[cfg(feature = "cuda")]
fn gpu_backend(config: &EngineConfig) -> Result<Arc<dyn ProverBackend>> {
    crate::prover::gpu::GpuBackend::new(config).map(|b| Arc::new(b) as Arc<dyn ProverBackend>)
}

#[cfg(not(feature = "cuda"))]
fn gpu_backend(_config: &EngineConfig) -> Result<Arc<dyn ProverBackend>> {
    Err(Error::NoDevice(
        "cuzk was built without the `cuda` feature".into(),
    ))
}

/// The PoSt proof of one tree shape: the request checked ([`crate::post::prepare`], reported
/// as [`Stage::Parse`]), then proved as any job.
fn prove_post_shape<Tree: 'static + MerkleTreeTrait>(
    engine: &Engine,
    req: &PostRequest<'_>,
    proof: filecoin_proofs_api::RegisteredPoStProof,
    options: &ProveOptions,
    reporter: &Reporter,
    timings: &mut Timings,
) -> Result<ProofOutput> {
    let job = reporter.time(timings, None, Stage::Parse, || {
        crate::post::prepare::<Tree>(req, proof, &engine.config.resolved_parameter_dir())
    })?;
    prove_job(engine, &job, options, reporter, timings)
}

/// The SnapDeals proof of one tree shape: the request checked ([`crate::snap::prepare`],
/// reported as [`Stage::Parse`]), then proved as any job.
fn prove_snap_shape<
    Tree: 'static + MerkleTreeTrait<Hasher = storage_proofs_update::constants::TreeRHasher>,
>(
    engine: &Engine,
    req: &SnapRequest<'_>,
    proof: filecoin_proofs_api::RegisteredUpdateProof,
    options: &ProveOptions,
    reporter: &Reporter,
    timings: &mut Timings,
) -> Result<ProofOutput> {
    let job = reporter.time(timings, None, Stage::Parse, || {
        crate::snap::prepare::<Tree>(req, proof, &engine.config.resolved_parameter_dir())
    })?;
    prove_job(engine, &job, options, reporter, timings)
}

/// A C1 output made ready for proving: its vanilla proofs (checked), public inputs and
/// public parameters, and the path of its parameter file.
struct Sector<Tree: 'static + MerkleTreeTrait> {
    proof_type: filecoin_proofs_api::RegisteredSealProof,
    sector_id: u64,
    vanilla: Vec<Vec<RawVanillaSealProof<Tree>>>,
    public_inputs: stacked::PublicInputs<
        <Tree::Hasher as filecoin_hashers::Hasher>::Domain,
        filecoin_proofs::DefaultPieceDomain,
    >,
    pub_params:
        compound_proof::PublicParams<'static, StackedDrg<'static, Tree, DefaultPieceHasher>>,
    params_path: PathBuf,
}

/// Parses the vanilla proofs of `c1`, checks them against its commitments, and sets up the
/// proof type's public parameters. Reports [`Stage::Parse`] once, on success and failure alike:
/// `parsed` (the time the caller spent on the C1 JSON) plus this step's.
fn prepare<Tree: 'static + MerkleTreeTrait>(
    engine: &Engine,
    c1: filecoin_proofs_api::seal::SealCommitPhase1Output,
    sector_id: u64,
    parsed: Duration,
    reporter: &Reporter,
    timings: &mut Timings,
) -> Result<Sector<Tree>> {
    let t = Instant::now();
    let sector = check_vanilla(engine, c1, sector_id);
    reporter.report(timings, None, Stage::Parse, parsed + t.elapsed());
    sector
}

/// The work of [`prepare`], unreported.
fn check_vanilla<Tree: 'static + MerkleTreeTrait>(
    engine: &Engine,
    c1: filecoin_proofs_api::seal::SealCommitPhase1Output,
    sector_id: u64,
) -> Result<Sector<Tree>> {
    let proof_type = c1.registered_proof;
    let config = proof_type.as_v1_config();
    let vanilla: Vec<Vec<RawVanillaSealProof<Tree>>> = c1
        .vanilla_proofs
        .try_into()
        .map_err(|e: anyhow::Error| Error::InvalidInput(format!("vanilla proofs: {e:#}")))?;
    let comm_r: <Tree::Hasher as filecoin_hashers::Hasher>::Domain =
        filecoin_proofs::as_safe_commitment(&c1.comm_r, "comm_r")
            .map_err(|e| Error::InvalidInput(format!("{e:#}")))?;
    let comm_d: filecoin_proofs::DefaultPieceDomain =
        filecoin_proofs::as_safe_commitment(&c1.comm_d, "comm_d")
            .map_err(|e| Error::InvalidInput(format!("{e:#}")))?;
    let public_inputs = stacked::PublicInputs {
        replica_id: Fr::from(c1.replica_id).into(),
        tau: Some(stacked::Tau { comm_d, comm_r }),
        k: None,
        seed: Some(c1.seed),
    };
    let setup = compound_proof::SetupParams {
        vanilla_params: filecoin_proofs::parameters::setup_params(&config)
            .map_err(Error::internal)?,
        partitions: Some(usize::from(config.partitions)),
        priority: false,
    };
    let pub_params = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        _,
    >>::setup(&setup)
    .map_err(Error::internal)?;
    let vanilla_params = &pub_params.vanilla_params;

    // The vanilla proofs are checked before any heavy work (cheap next to proving): a damaged
    // C1 output is an input error here, not a parameter-shape mismatch or a panic deep in the
    // circuit later. Malformed values (e.g. a hash that is not a field element) make the
    // dependency panic: that panic is an input error too.
    let vanilla_ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        <StackedDrg<'_, Tree, DefaultPieceHasher> as storage_proofs_core::proof::ProofScheme<
            '_,
        >>::verify_all_partitions(vanilla_params, &public_inputs, &vanilla)
    }));
    match vanilla_ok {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => {
            return Err(Error::InvalidInput(
                "the C1 output's vanilla proofs do not verify against its comm_r, comm_d, replica id and seed".into(),
            ))
        }
        Ok(Err(e)) => return Err(Error::InvalidInput(format!("the C1 output's vanilla proofs are malformed: {e:#}"))),
        Err(panic) => {
            let msg = match Error::from_panic(panic) {
                Error::Panic(m) => m,
                e => e.to_string(),
            };
            return Err(Error::InvalidInput(format!("the C1 output's vanilla proofs are malformed: {msg}")));
        }
    }

    let (params_path, _) =
        porep_param_paths::<Tree>(&engine.config.resolved_parameter_dir(), vanilla_params);
    Ok(Sector {
        proof_type,
        sector_id,
        vanilla,
        public_inputs,
        params_path,
        pub_params,
    })
}

/// The C1 output after the input checks of [`Engine::prove_porep_c2`] (prover id, JSON,
/// sector and proof type), for the calls that stop before proving.
#[cfg(feature = "internals")]
fn checked_c1(
    c1_output: &[u8],
    sector_id: u64,
    prover_id: &[u8],
) -> Result<filecoin_proofs_api::seal::SealCommitPhase1Output> {
    let prover_id = c1::prover_id(prover_id)?;
    let input = c1::parse(c1_output)?;
    c1::validate(&input, sector_id, &prover_id)?;
    Ok(input.output)
}

#[allow(clippy::too_many_arguments)]
#[cfg(feature = "internals")]
fn synthesize_shape<Tree: 'static + MerkleTreeTrait>(
    engine: &Engine,
    c1: filecoin_proofs_api::seal::SealCommitPhase1Output,
    sector_id: u64,
    parsed: Duration,
    partition: usize,
    synthesis: Synthesis,
    reporter: &Reporter,
    timings: &mut Timings,
) -> Result<Assignment> {
    let sector = prepare::<Tree>(engine, c1, sector_id, parsed, reporter, timings)?;
    let compiled = match synthesis {
        Synthesis::Compiled | Synthesis::Gadget => {
            Some(reporter.time(timings, None, Stage::Compile, || {
                engine.load_circuit(&sector)
            })?)
        }
        Synthesis::Reference => None,
    };
    let native = synthesis == Synthesis::Compiled;
    synthesize_partition(
        &sector,
        compiled.as_deref(),
        partition,
        native,
        reporter,
        timings,
    )
}

#[allow(clippy::too_many_arguments)]
#[cfg(feature = "internals")]
fn witness_shape<Tree: 'static + MerkleTreeTrait>(
    engine: &Engine,
    c1: filecoin_proofs_api::seal::SealCommitPhase1Output,
    sector_id: u64,
    parsed: Duration,
    partition: usize,
    native: bool,
    challenges: Option<usize>,
    reporter: &Reporter,
    timings: &mut Timings,
) -> Result<(circuit::Layout, circuit::Witness)> {
    let s = prepare::<Tree>(engine, c1, sector_id, parsed, reporter, timings)?;
    let pp = &s.pub_params.vanilla_params;
    let mut layout = *reporter.time(timings, None, Stage::Compile, || {
        once_per_key(&engine.layouts, &s.params_path, "layout", || {
            circuit::porep::layout(pp)
        })
    })?;
    let vanilla = s.vanilla.get(partition).ok_or_else(|| {
        Error::InvalidInput(format!("partition {partition} of {}", s.vanilla.len()))
    })?;
    let n = challenges.map_or(layout.challenges, |n| n.clamp(1, layout.challenges));
    layout.challenges = n;
    let w = reporter.time(timings, Some(partition), Stage::Witness, || {
        circuit::porep::witness(
            &layout,
            &s.public_inputs,
            &vanilla[..n],
            pp,
            partition,
            native,
        )
    })?;
    Ok((layout, w))
}

#[cfg(feature = "internals")]
fn circuit_shape<Tree: 'static + MerkleTreeTrait>(
    engine: &Engine,
    c1: filecoin_proofs_api::seal::SealCommitPhase1Output,
    sector_id: u64,
    parsed: Duration,
    reporter: &Reporter,
    timings: &mut Timings,
) -> Result<Arc<CompiledCircuit>> {
    let sector = prepare::<Tree>(engine, c1, sector_id, parsed, reporter, timings)?;
    engine.load_circuit(&sector)
}

/// The proving assignment of partition `k` of `job`: by the compiled circuit when given (its
/// witness native or from the gadgets), else by the reference synthesis. Not yet checked (see
/// [`prover::check_satisfied`]).
fn synthesize_partition(
    job: &dyn Job,
    compiled: Option<&CompiledCircuit>,
    k: usize,
    native: bool,
    reporter: &Reporter,
    t: &mut Timings,
) -> Result<Assignment> {
    let p = Some(k);
    match compiled {
        None => reporter.time(t, p, Stage::Synthesis, || job.synthesize(k)),
        Some(cc) => {
            let t0 = Instant::now();
            let w = reporter.time(t, p, Stage::Witness, || {
                let mut w = circuit::Witness::default();
                job.witness_into(&cc.layout, k, native, &mut w).map(|()| w)
            })?;
            let asg = reporter.time(t, p, Stage::Spmv, || cc.evaluate(w))?;
            reporter.report(t, p, Stage::Synthesis, t0.elapsed());
            Ok(asg)
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait> Job for Sector<Tree> {
    fn label(&self) -> String {
        format!("sector {}", self.sector_id)
    }

    fn partitions(&self) -> usize {
        self.vanilla.len()
    }

    fn kind(&self) -> ProofKind {
        ProofKind::PorepC2
    }

    fn params_path(&self) -> &Path {
        &self.params_path
    }

    fn constraints_bound(&self) -> u64 {
        porep_partition_constraints(u64::from(self.proof_type.sector_size()))
    }

    fn partition_host_bytes(&self, abc_on_host: bool, _: Option<&CompiledCircuit>) -> u64 {
        partition_host_bytes(u64::from(self.proof_type.sector_size()), abc_on_host)
    }

    fn circuit_cache_name_and_key(&self) -> (String, [u8; 32]) {
        let file = crate::job::file_name(&self.params_path);
        circuit::porep::cache_name_and_key(&file, &self.pub_params.vanilla_params)
    }

    fn compile(&self) -> Result<CompiledCircuit> {
        circuit::porep::compile(&self.pub_params.vanilla_params)
    }

    fn public_inputs(&self, k: usize) -> Result<Vec<Fr>> {
        <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<_, _>>::generate_public_inputs(
            &self.public_inputs,
            &self.pub_params.vanilla_params,
            Some(k),
        )
        .map_err(Error::internal)
    }

    fn witness_into(
        &self,
        layout: &circuit::Layout,
        k: usize,
        native: bool,
        w: &mut circuit::Witness,
    ) -> Result<()> {
        let vanilla = self
            .vanilla
            .get(k)
            .ok_or_else(|| Error::InvalidInput(format!("partition {k} of {}", self.vanilla.len())))?;
        circuit::porep::witness_into(
            layout,
            &self.public_inputs,
            vanilla,
            &self.pub_params.vanilla_params,
            k,
            native,
            w,
        )
    }

    fn synthesize(&self, k: usize) -> Result<Assignment> {
        let vanilla = self
            .vanilla
            .get(k)
            .ok_or_else(|| Error::InvalidInput(format!("partition {k} of {}", self.vanilla.len())))?;
        let circuit = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<_, _>>::circuit(
            &self.public_inputs,
            (),
            vanilla,
            &self.pub_params.vanilla_params,
            Some(k),
        )
        .map_err(|e| Error::InvalidInput(format!("partition {k}: {e:#}")))?;
        Assignment::synthesize(circuit).map_err(|e| Error::Synthesis {
            partition: k,
            message: e.to_string(),
        })
    }
}

/// The parameter file's sections as a cold load decodes them (H, L, A, B_G1, B_G2, in file
/// order): latch `i` is set to the parameters so far once the first `i + 1` sections are in
/// (the last: the whole set), to the whole set when the load ends first (a warm proof, or
/// [`HAhead::Off`]), to `None` if it fails. A partition split by [`ProofRun::h_ahead`] runs
/// each of its MSMs as soon as its section's latch is set ([`ProofRun::rest_by_section`]).
struct Sections([Latch<Arc<Srs>>; 5]);

impl Sections {
    fn new() -> Self {
        Sections(std::array::from_fn(|_| Latch::new()))
    }

    /// Sets every latch not yet set (a latch keeps its first value).
    fn set_all(&self, v: Option<Arc<Srs>>) {
        for latch in &self.0 {
            latch.set(v.clone());
        }
    }

    /// The parameters decoded so far and which queries they hold at least (the highest latch
    /// set); `None` before the first section, and `Some(None)` when the load failed.
    fn now(&self) -> Option<Option<(Arc<Srs>, Queries)>> {
        (0..5).rev().find_map(|i| {
            self.0[i]
                .peek()
                .map(|v| v.map(|srs| (srs, Queries::first(i + 1))))
        })
    }
}

/// Sets its latches to `None` when dropped (a latch keeps its first value, so after a load
/// that set them this does nothing): the guard of the parameter load, so that a panic in it
/// fails the partitions waiting for the parameters instead of leaving them waiting.
struct ReleaseOnDrop<'a>(&'a Latch<Arc<Srs>>, &'a Sections);

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.set(None);
        self.1.set_all(None);
    }
}

/// The proof of one sector shape (`Tree` = the sector's Merkle tree shape).
fn prove_shape<Tree: 'static + MerkleTreeTrait>(
    engine: &Engine,
    c1: filecoin_proofs_api::seal::SealCommitPhase1Output,
    sector_id: u64,
    parsed: Duration,
    options: &ProveOptions,
    reporter: &Reporter,
    timings: &mut Timings,
) -> Result<C2Output> {
    let sector = prepare::<Tree>(engine, c1, sector_id, parsed, reporter, timings)?;
    prove_job(engine, &sector, options, reporter, timings)
}

/// The proof of one checked input of any kind: its parameter load beside its partitions
/// ([`prove_partitions`]).
pub(crate) fn prove_job(
    engine: &Engine,
    job: &dyn Job,
    options: &ProveOptions,
    reporter: &Reporter,
    timings: &mut Timings,
) -> Result<C2Output> {
    let params_path = job.params_path();
    // A cold proof reads its parameters (44 GiB at 32 GiB: the disk's time) while the circuit
    // loads and the first witnesses are made, which need only the circuit; each partition runs
    // its H side as soon as the file's first section (H) is decoded, then each other MSM as
    // soon as its own section is ([`ProofRun::h_ahead`], [`ProofRun::rest_by_section`]). The
    // call holds its set until it returns, and its room is made before any partition starts:
    // while the set loads, the host budget counts the file's size, so the partitions admitted
    // meanwhile leave room for it ([`Engine::hold_params`]).
    let set = engine.hold_params(job, options)?;
    let set = &set;
    let params: Latch<Arc<Srs>> = Latch::new();
    // The parameters so far for the split partitions ([`HAhead`]).
    let sections = Sections::new();
    let params_error: Mutex<Option<Error>> = Mutex::new(None);
    let mut load_timings = Timings::default();
    // Each decoded section goes to the backend (the GPU pins it) on a thread of its own, so
    // that the decoding does not wait for the registration.
    let (tx, prepare) = std::sync::mpsc::channel::<Srs>();
    std::thread::scope(|scope| -> Result<C2Output> {
        let (params, sections) = (&params, &sections);
        let (load_timings, params_error) = (&mut load_timings, &params_error);
        scope.spawn(move || {
            for so_far in prepare {
                engine.backend().prepare_params(&so_far);
            }
            // A failed load's sections were readied for nothing: the backend lets them go
            // (the GPU's pins would otherwise hold them, unaccounted, while it lives).
            if params.wait().is_none() {
                engine.backend().forget_params(params_path);
            }
        });
        // The sender moves in: it is dropped when the load ends, which ends the thread above.
        scope.spawn(move || {
            // Whatever happens here — a panic included —, the partitions waiting for the
            // parameters are released (a latch keeps its first value: no effect after a set).
            let _release = ReleaseOnDrop(params, sections);
            let mut decoded = 0;
            let split = engine.config.tuning.h_ahead != HAhead::Off;
            let mut on_section = |so_far: &Srs| {
                // (Read before the section is handed out: a part may finish at once.)
                #[cfg(feature = "test-hooks")]
                let parts_before = engine.pace_sections.1.load(Ordering::SeqCst);
                if split && decoded < 5 {
                    if decoded == 0 {
                        log::info!(
                            "parameters: H section decoded ({:.2} GB): partitions may run their H side",
                            so_far.size_bytes() as f64 / 1e9
                        );
                    }
                    sections.0[decoded].set(Some(Arc::new(so_far.clone())));
                }
                decoded += 1;
                let _ = tx.send(so_far.clone());
                #[cfg(feature = "test-hooks")]
                if decoded < 5 && engine.pace_sections.0.load(Ordering::SeqCst) {
                    let (done, t) = (&engine.pace_sections.1, Instant::now());
                    while done.load(Ordering::SeqCst) == parts_before && t.elapsed().as_secs() < 60
                    {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            };
            let r = reporter.time(load_timings, None, Stage::LoadParams, || {
                engine.load_params(set, &mut on_section)
            });
            drop(tx);
            match r {
                Ok(srs) => {
                    params.set(Some(srs.clone()));
                    sections.set_all(Some(srs));
                }
                Err(e) => {
                    // Said when it happens; the call returns the error itself (its hint
                    // completed with the caller's directory) once its partitions stop.
                    // Names the file at fault: the `.params` or its `.vk`.
                    let at_fault = match &e {
                        Error::ParametersNotFound { path, .. }
                        | Error::ParametersInvalid { path, .. } => path.as_path(),
                        _ => params_path,
                    };
                    log::error!(
                        "parameters {}: the load failed (error {}); the proof stops",
                        at_fault.display(),
                        e.code()
                    );
                    if let Ok(mut g) = params_error.lock() {
                        *g = Some(e);
                    }
                    params.set(None);
                    sections.set_all(None);
                }
            }
        });
        let out = prove_partitions(
            engine,
            job,
            options,
            reporter,
            timings,
            (params, sections),
        );
        // A failed parameter load is the call's error (the partitions only saw it missing).
        let load_error = params.wait().is_none();
        if load_error {
            if let Some(e) = params_error.lock().ok().and_then(|mut g| g.take()) {
                return Err(e);
            }
        }
        out
    })
    .inspect(|_| timings.entries.extend(load_timings.entries))
}

/// The partitions of one proof (see [`prove_shape`]): the circuit, then every partition's
/// stages ([`ProofRun::prove_partition`]: admit, witness or synthesis, backend, epilogue,
/// verify) on `workers` threads behind the engine's gate ([`crate::pipeline`]); `params` is
/// set by the parameter load running beside, `sections` section by section ([`Sections`]).
fn prove_partitions(
    engine: &Engine,
    job: &dyn Job,
    options: &ProveOptions,
    reporter: &Reporter,
    timings: &mut Timings,
    (params, sections): (&Latch<Arc<Srs>>, &Sections),
) -> Result<C2Output> {
    // The checkpoints of `options.cancel` (see [`crate::cancel`]).
    CancelToken::check(options.cancel.as_ref())?;
    let compiled = match options.synthesis {
        Synthesis::Compiled | Synthesis::Gadget => {
            Some(reporter.time(timings, None, Stage::Compile, || {
                engine.load_circuit(job)
            })?)
        }
        Synthesis::Reference => None,
    };

    let partitions = job.partitions();
    // The permit of a partition counts a, b, c only where they will be in host memory; if the
    // GPU SpMV cannot run after all, its worker takes the difference (`HostTopUp`). Under a
    // caller's limit, which nothing may exceed, the permit counts them always.
    let abc_on_host = engine.budget.is_strict()
        || compiled
            .as_ref()
            .map_or(true, |cc| engine.backend().abc_on_host(cc));
    let need = job.partition_host_bytes(abc_on_host, compiled.as_deref());
    let host_top_up = (!abc_on_host).then(|| crate::budget::HostTopUp {
        budget: engine.budget.clone(),
        bytes: job.partition_host_bytes(true, compiled.as_deref()) - need,
    });
    let workers = engine.budget.fits(need)?.clamp(1, partitions);
    let run = ProofRun {
        engine,
        job,
        options,
        reporter,
        params,
        sections,
        compiled,
        need,
        host_top_up,
    };
    let next = AtomicUsize::new(0);
    type Slot = Option<Result<PartitionOut>>;
    let results: Vec<Mutex<Slot>> = (0..partitions).map(|_| Mutex::new(None)).collect();
    let failed = AtomicBool::new(false);

    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::SeqCst);
                if k >= partitions || failed.load(Ordering::SeqCst) {
                    break;
                }
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run.prove_partition(k)
                }))
                .unwrap_or_else(|p| Err(Error::from_panic(p)));
                if r.is_err() {
                    failed.store(true, Ordering::SeqCst);
                }
                if let Ok(mut slot) = results[k].lock() {
                    *slot = Some(r);
                }
            });
        }
    });

    let mut proof = Vec::with_capacity(partitions * PROOF_BYTES);
    let mut reports = Vec::with_capacity(partitions);
    for (k, slot) in results.into_iter().enumerate() {
        let slot = slot
            .into_inner()
            .map_err(|_| Error::internal("result slot poisoned"))?;
        match slot {
            Some(Ok((bytes, report, t))) => {
                proof.extend_from_slice(&bytes);
                reports.push(report);
                timings.entries.extend(t.entries);
            }
            Some(Err(e)) => return Err(e),
            None => {
                // Skipped because another partition failed first: report that failure.
                if !failed.load(Ordering::SeqCst) {
                    return Err(Error::Internal(format!("partition {k} was not proved")));
                }
            }
        }
    }
    if reports.len() != partitions {
        return Err(Error::Internal(
            "a partition failed without an error".into(),
        ));
    }
    if options.verify {
        let srs = params
            .wait()
            .ok_or_else(|| Error::internal("the parameters are gone after the partitions"))?;
        job.check_proof(&proof, &srs.pvk)?;
    }
    Ok(C2Output {
        proof,
        partitions: reports,
        timings: Timings::default(),
        verified: options.verify,
    })
}

/// One proved partition: its proof bytes, its report and its stage timings.
type PartitionOut = ([u8; PROOF_BYTES], PartitionReport, Timings);

/// The partitions of one proof in flight: what they share, and the stages of one partition as
/// methods, in the order [`ProofRun::prove_partition`] runs them: admit → witness (compiled
/// or gadget) or reference synthesis → backend compute → epilogue → verify. Shared by the
/// partition workers of [`prove_partitions`].
struct ProofRun<'a> {
    engine: &'a Engine,
    job: &'a dyn Job,
    options: &'a ProveOptions,
    reporter: &'a Reporter,
    /// The parameters, set by the load running beside ([`prove_shape`]).
    params: &'a Latch<Arc<Srs>>,
    /// The parameters so far, section by section, for the split partitions ([`Sections`]).
    sections: &'a Sections,
    /// The recorded circuit (compiled and gadget witness); `None` for reference synthesis.
    compiled: Option<Arc<CompiledCircuit>>,
    /// Host bytes of one partition's permit ([`partition_host_bytes`]: 22.15 GB at 32 GiB with
    /// a, b, c, 5.21 GB for the witness alone).
    need: u64,
    /// What a partition takes beyond its permit if its a, b, c end up in host memory after all
    /// (the permit counted only the witness); `None` when the permit counts them.
    host_top_up: Option<crate::budget::HostTopUp>,
}

/// What the backend stage gives back: the partition's five MSM sums and where they were
/// computed.
struct Computed {
    msm: prover::MsmResults,
    /// CUDA device (GPU backend).
    device: Option<usize>,
    /// Allocator tier (GPU backend), e.g. `full-staging+spmv` or `cpu-fallback`.
    tier: Option<String>,
    /// Whether the H side ran ahead of the other MSMs ([`ProofRun::h_ahead`]).
    h_ahead: bool,
    /// Backend calls that computed the MSMs ([`PartitionReport::parts`]).
    parts: usize,
}

/// The error of a circuit whose public inputs are not the expected ones (partition `k`).
fn inputs_differ(k: usize) -> Error {
    Error::Synthesis {
        partition: k,
        message: "the circuit's public inputs differ from the expected ones".into(),
    }
}

impl<'a> ProofRun<'a> {
    /// A checkpoint of `options.cancel` (see [`crate::cancel`]).
    fn cancelled(&self) -> Result<()> {
        CancelToken::check(self.options.cancel.as_ref())
    }

    /// The parameters, once loaded ([`Error::Internal`] if their load failed: the caller
    /// returns the load's own error); a checkpoint too, as every use of them starts heavy work.
    fn wait_params(&self) -> Result<Arc<Srs>> {
        self.cancelled()?;
        self.params
            .wait()
            .ok_or_else(|| Error::Internal("the parameters did not load".into()))
    }

    /// Partition `k`, stage by stage. The gate's pass and the memory permit are held until
    /// it is done (the permit dropped first), except that a partition whose H side ran ahead
    /// of a loading parameter file gives its pass up for its other parts, which follow the
    /// file's sections ([`Self::h_ahead`], [`Self::rest_by_section`]); a, b, c (reference path) are dropped after the
    /// backend stage, before the epilogue.
    ///
    /// # Errors
    /// Any stage's error (the first); [`Error::Cancelled`] at a checkpoint.
    fn prove_partition(&self, k: usize) -> Result<PartitionOut> {
        let (pass, mut memory) = self.admit(k)?;
        let mut pass = Some(pass);
        let mut t = Timings::default();
        let inputs = self.public_inputs(k)?;
        let done = match &self.compiled {
            None => {
                let (mut asg, srs) = self.synthesize(k, &inputs, &mut t)?;
                self.compute(k, &mut asg, &srs, &mut t)?
            }
            Some(cc) => {
                self.witness_and_compute(k, cc, &inputs, &mut pass, &mut memory, &mut t)?
            }
        };
        let (proof, srs) = self.epilogue(k, &done.msm, &mut t)?;
        self.verify(k, &srs, &proof, &inputs, &mut t)?;
        // A GPU partition that fell back to the CPU (`CUZK_ALLOW_CPU`) ran on the CPU: its
        // report says so, and its tier says why.
        let fell_back = done.tier.as_deref() == Some(CPU_FALLBACK_TIER);
        let report = PartitionReport {
            partition: k,
            backend: if fell_back {
                "cpu"
            } else {
                self.engine.backend().name()
            },
            device: done.device,
            tier: done.tier,
            h_ahead: done.h_ahead,
            parts: done.parts,
        };
        Ok((prover::proof_to_bytes(&proof), report, t))
    }

    /// Admit stage: a place among the engine's partitions in flight ([`Gate`]), then host
    /// memory for the partition (a permit of `need` bytes from the engine's [`HostBudget`];
    /// waits while it is short): both to be held while the partition is synthesized and
    /// proved; shared with concurrent calls. A cancellation checkpoint before each of the two
    /// waits.
    ///
    /// # Errors
    /// [`Error::Cancelled`]; [`Error::OutOfHostMemory`] from the budget.
    fn admit(&self, k: usize) -> Result<(Pass<'a>, Permit<'a>)> {
        self.cancelled()?;
        let native = self.options.synthesis == Synthesis::Compiled;
        let extra = if self.job.serial_witness(native) {
            self.engine.serial_ahead
        } else {
            0
        };
        let pass = self.engine.gate.enter_ahead(self.options.priority, extra);
        self.cancelled()?;
        let memory = self.engine.budget.acquire_with(
            self.need,
            &format!("{} partition {k}", self.job.label()),
            self.options.priority,
        )?;
        Ok((pass, memory))
    }

    /// The public inputs of partition `k` (328 at a 32 GiB PoRep, less the leading one): what
    /// the circuit's inputs must equal and the proof is verified against.
    fn public_inputs(&self, k: usize) -> Result<Vec<Fr>> {
        self.job.public_inputs(k)
    }

    /// Reference synthesis stage: bellpepper synthesis of partition `k` into an [`Assignment`]
    /// (witness, a, b, c and the densities, all in host memory), then, with the parameters
    /// (waited for here), the checks before any heavy work: the parameters' shape, a∘b = c
    /// and the public inputs. Returns the assignment and the parameters.
    ///
    /// # Errors
    /// [`Error::Synthesis`] (synthesis failed, an unsatisfied constraint, other public
    /// inputs); [`Error::ParametersInvalid`] for parameters of another circuit.
    fn synthesize(
        &self,
        k: usize,
        inputs: &[Fr],
        t: &mut Timings,
    ) -> Result<(Assignment, Arc<Srs>)> {
        // Idle pooled buffers do not hold an admission back: this partition takes none
        // (the compiled path's take moves one into its permit, or trims), so they give
        // way here.
        self.engine.host_pool.trim_to_budget();
        let asg = synthesize_partition(self.job, None, k, false, self.reporter, t)?;
        let srs = self.wait_params()?;
        srs.check_shape(&asg)?;
        prover::check_satisfied(&asg, k)?;
        if asg.input[1..] != inputs[..] {
            return Err(inputs_differ(k));
        }
        Ok((asg, srs))
    }

    /// Backend stage (reference path): the H polynomial and the five MSMs of `asg` on the
    /// engine's backend ([`ProverBackend::compute`]: the GPU's scheduler, or the CPU).
    fn compute(
        &self,
        k: usize,
        asg: &mut Assignment,
        srs: &Arc<Srs>,
        t: &mut Timings,
    ) -> Result<Computed> {
        let mut ctx = PartitionCtx {
            host_top_up: self.host_top_up.clone(),
            priority: self.options.priority,
            ..PartitionCtx::new(k, self.reporter, t)
        };
        let msm = self.engine.backend().compute(asg, srs, &mut ctx)?;
        Ok(Computed {
            msm,
            device: ctx.device,
            tier: ctx.tier.take(),
            h_ahead: false,
            parts: 1,
        })
    }

    /// The compiled path of partition `k`: the witness stage, then the backend stage, with
    /// the pooled buffer aux is written into. Witness here; a, b, c, the R1CS check and the
    /// MSMs in the backend (on the device when it can): only z travels. The parameters are
    /// needed from the backend on.
    ///
    /// aux (130.2 M values at 32 GiB, 3.88 GiB) is written into a buffer of the engine's pool
    /// (page-locked once, reused by later partitions: the GPU upload finds it registered) lent
    /// to the witness; the backend gives it back in the witness, then it returns to the pool
    /// — out of `memory` first — or, when a device copy from it may still be running, is
    /// retired. The synthesis time (witness and SpMV) is reported as [`Stage::Synthesis`].
    fn witness_and_compute(
        &self,
        k: usize,
        cc: &Arc<CompiledCircuit>,
        inputs: &[Fr],
        pass: &mut Option<Pass<'_>>,
        memory: &mut Permit<'_>,
        t: &mut Timings,
    ) -> Result<Computed> {
        // `w` is declared before the buffer so that the buffer drops first on every path,
        // unwinding included: its registration goes before the memory can.
        let mut w = circuit::Witness::default();
        let mut aux_buf = self.engine.host_pool.take(cc.layout.num_aux())?;
        w.aux = aux_buf.lend();
        let made = self.witness(k, cc, &mut w, t);
        let (r, busy) = match made {
            Ok(()) => self.compute_compiled(k, cc, inputs, pass, &mut w, t),
            Err(e) => (Err(e), false),
        };
        aux_buf.restore(std::mem::take(&mut w.aux));
        if busy {
            aux_buf.retire();
        } else {
            // Out of the permit first, so that the pool's check does not count z twice.
            memory.release((cc.layout.num_aux() * std::mem::size_of::<Fr>()) as u64);
            drop(aux_buf); // back to the pool: no copy from it is running
        }
        let done = r?;
        self.report_synthesis(k, t);
        Ok(done)
    }

    /// Witness stage (compiled path): z = (input, aux) of partition `k` into `w`, by the
    /// native witness ([`Synthesis::Compiled`]) or the gadgets' ([`Synthesis::Gadget`]),
    /// reported as [`Stage::Witness`].
    fn witness(
        &self,
        k: usize,
        cc: &CompiledCircuit,
        w: &mut circuit::Witness,
        t: &mut Timings,
    ) -> Result<()> {
        self.reporter.time(t, Some(k), Stage::Witness, || {
            self.job.witness_into(
                &cc.layout,
                k,
                self.options.synthesis == Synthesis::Compiled,
                w,
            )
        })
    }

    /// Backend stage (compiled path): the witness's public inputs checked, the parameters
    /// waited for and checked against the circuit, then a, b, c, the R1CS check and the MSMs
    /// from z on the engine's backend ([`ProverBackend::compute_compiled`]; `w`'s vectors come
    /// back into it) — in parts when the H side runs ahead ([`Self::h_ahead`],
    /// [`Self::rest_by_section`]). Also
    /// returns, error or not, whether a device copy from `w`'s buffers may still be running
    /// (`PartitionCtx::host_buffers_busy`): they must then be neither reused nor freed.
    fn compute_compiled(
        &self,
        k: usize,
        cc: &Arc<CompiledCircuit>,
        inputs: &[Fr],
        pass: &mut Option<Pass<'_>>,
        w: &mut circuit::Witness,
        t: &mut Timings,
    ) -> (Result<Computed>, bool) {
        let mut ctx = PartitionCtx {
            host_top_up: self.host_top_up.clone(),
            priority: self.options.priority,
            ..PartitionCtx::new(k, self.reporter, t)
        };
        let (mut ahead, mut parts) = (false, 1);
        let r = if w.input.get(1..) != Some(inputs) {
            Err(inputs_differ(k))
        } else {
            self.h_ahead(k, cc, pass, w, &mut ctx).and_then(|h| match h {
                Some(h) => {
                    ahead = true;
                    self.rest_by_section(k, cc, w, &mut ctx, h, &mut parts)
                }
                None => {
                    let srs = self.wait_params()?;
                    srs.check_counts(&cc.shape_counts())?;
                    self.engine
                        .backend()
                        .compute_compiled(w, cc, &srs, &mut ctx)
                }
            })
        };
        let (device, tier) = (ctx.device, ctx.tier.take());
        let busy = ctx.host_buffers_busy;
        let computed = |msm| Computed {
            msm,
            device,
            tier,
            h_ahead: ahead,
            parts,
        };
        (r.map(computed), busy)
    }

    /// The L, A, B MSMs of partition `k` after its H side ran ahead (sum `h`): each as soon
    /// as its section of the parameter file is decoded ([`Sections`]), those decoded by then
    /// together in one backend call ([`Part::Rest`]; each call uploads z's aux again: on the
    /// GPU packed where the plan has room, 103 MB at 32 GiB, else 3.88 GiB), each call's queries checked against the circuit first. On a load that is done
    /// (or a warm proof, [`HAhead::Always`]) that is one call for all four. Returns the five
    /// sums (the parts added up: the one-pass results); `parts` counts the calls, the H side's
    /// included. A cancellation checkpoint before each call.
    ///
    /// # Errors
    /// The backend's; [`Error::ParametersInvalid`] for a section of the wrong size;
    /// [`Error::Internal`] when the load failed (the caller returns the load's own error);
    /// [`Error::Cancelled`].
    fn rest_by_section(
        &self,
        k: usize,
        cc: &Arc<CompiledCircuit>,
        w: &mut circuit::Witness,
        ctx: &mut PartitionCtx<'_>,
        h: blstrs::G1Projective,
        parts: &mut usize,
    ) -> Result<prover::MsmResults> {
        *parts = 1;
        let counts = cc.shape_counts();
        let mut sums = prover::MsmResults::h_only(h);
        // A part that fell back to the CPU marks the whole partition so (the report shows one
        // tier: the last part's otherwise).
        let fell_back = |ctx: &PartitionCtx<'_>| ctx.tier.as_deref() == Some(CPU_FALLBACK_TIER);
        let mut any_fallback = fell_back(ctx);
        let mut left = Queries::REST;
        while let Some(next) = left.first_index() {
            self.cancelled()?;
            // The next query's section, then every query decoded by now.
            self.sections.0[next].wait();
            let Some(Some((srs, decoded))) = self.sections.now() else {
                return Err(Error::Internal("the parameters did not load".into()));
            };
            let ready = left.and(decoded);
            if ready.is_empty() {
                return Err(Error::internal("a parameter section was set without its queries"));
            }
            srs.check_counts_of(&counts, ready)?;
            self.cancelled()?;
            if ready != left {
                log::debug!("partition {k}: MSMs of {ready} while the parameters load");
            }
            ctx.part = Part::Rest(ready);
            let r = self.engine.backend().compute_compiled(w, cc, &srs, ctx);
            ctx.part = Part::All;
            sums = sums.add(&r?);
            any_fallback |= fell_back(ctx);
            self.engine.part_done();
            *parts += 1;
            left = left.without(ready);
        }
        if any_fallback {
            ctx.tier = Some(CPU_FALLBACK_TIER.into());
        }
        Ok(sums)
    }

    /// The H side of partition `k` ahead of the other MSMs ([`HAhead`]): when the proof's
    /// parameters are still loading (or always, with [`HAhead::Always`]), waits for their H
    /// section, then runs a, b, c, the R1CS check, the H step and the H MSM on the backend
    /// ([`Part::HOnly`]) and, when the parameters are still loading, gives up the partition's
    /// place among those in flight (`pass`: it waits for the other sections now
    /// ([`Self::rest_by_section`]), its witness kept, and another partition may make its
    /// witness meanwhile; the host budget still counts it). Returns H's sum, or `None` when the partition runs in one pass (parameters
    /// loaded under [`HAhead::WhileLoading`], the load failed, an H section of the wrong size —
    /// the one pass reports it — or the H side failed on the device: logged, and the one pass
    /// tries again). Cancellation checkpoints before and after the wait for the H section.
    ///
    /// # Errors
    /// [`Error::Synthesis`] (an unsatisfied witness); [`Error::Cancelled`]; any error after
    /// which `w`'s buffers may still be in a device copy.
    fn h_ahead(
        &self,
        k: usize,
        cc: &Arc<CompiledCircuit>,
        pass: &mut Option<Pass<'_>>,
        w: &mut circuit::Witness,
        ctx: &mut PartitionCtx<'_>,
    ) -> Result<Option<blstrs::G1Projective>> {
        // Where the backend batches the L, A, B MSMs of several partitions over shared
        // streamed bases, every partition is split so that those parts exist.
        let mode = match self.engine.config.tuning.h_ahead {
            HAhead::WhileLoading if self.engine.backend().split_for_shared_bases(cc) => {
                HAhead::Always
            }
            m => m,
        };
        let loaded = self.params.peek();
        // A failed load (`Some(None)`) goes to the one pass, which reports it at once.
        if mode == HAhead::Off
            || matches!(loaded, Some(None))
            || (mode == HAhead::WhileLoading && loaded.is_some())
        {
            return Ok(None);
        }
        self.cancelled()?;
        // `Always`: the whole set once it is there, else (still loading) its H section.
        let so_far = match loaded {
            Some(Some(srs)) => Some(srs),
            _ => self.sections.0[0].wait(),
        };
        self.cancelled()?;
        let Some(so_far) = so_far else {
            return Ok(None);
        };
        // The load may have failed since the H section was handed out: no H side for nothing.
        if matches!(self.params.peek(), Some(None)) {
            return Ok(None);
        }
        // The whole set arrived first: one pass, unless every partition is split.
        if mode == HAhead::WhileLoading && so_far.is_complete() {
            return Ok(None);
        }
        let domain = cc.layout.num_constraints().max(1).next_power_of_two();
        if so_far.h.len() != domain - 1 {
            return Ok(None);
        }
        ctx.part = Part::HOnly;
        let r = self
            .engine
            .backend()
            .compute_compiled(w, cc, &so_far, ctx);
        ctx.part = Part::All;
        match r {
            Ok(m) => {
                self.engine.part_done();
                // Waiting for the other sections, the partition lets the next one in; with
                // the parameters loaded (`Always`) it goes on at once and keeps its place.
                if self.params.peek().is_none() {
                    log::info!("partition {k}: H side done ahead of the parameters' L, A, B");
                    drop(pass.take());
                }
                Ok(Some(m.h))
            }
            Err(e) if matches!(e, Error::Synthesis { .. } | Error::Cancelled) => Err(e),
            Err(e) if ctx.host_buffers_busy => Err(e),
            Err(e) => {
                log::warn!(
                    "partition {k}: the H side ahead of the parameters failed ({e}); one pass \
                     after the load instead"
                );
                Ok(None)
            }
        }
    }

    /// Reports the compiled path's synthesis: its witness and SpMV stages (on the CPU or the
    /// device) together, as [`Stage::Synthesis`].
    fn report_synthesis(&self, k: usize, t: &mut Timings) {
        let synth = [Stage::Witness, Stage::Spmv]
            .iter()
            .map(|&s| {
                t.of_partition(k)
                    .filter(|e| e.0 == s)
                    .map(|e| e.1)
                    .sum::<std::time::Duration>()
            })
            .sum();
        self.reporter.report(t, Some(k), Stage::Synthesis, synth);
    }

    /// Epilogue stage: the Groth16 proof of partition `k` from its MSM sums with random r, s
    /// (or the caller's, [`ProveOptions::randomness`]) and the verifying key of the parameters
    /// (waited for here: a checkpoint), reported as [`Stage::Epilogue`]. Returns the proof and
    /// the parameters.
    fn epilogue(
        &self,
        k: usize,
        msm: &prover::MsmResults,
        t: &mut Timings,
    ) -> Result<(Proof<Bls12>, Arc<Srs>)> {
        let (r, s) = match &self.options.randomness {
            Some(rs) => rs[k],
            None => (Fr::random(rand::rngs::OsRng), Fr::random(rand::rngs::OsRng)),
        };
        let srs = self.wait_params()?;
        let proof = self.reporter.time(t, Some(k), Stage::Epilogue, || {
            prover::assemble(&srs.vk, msm, r, s)
        })?;
        Ok((proof, srs))
    }

    /// Verify stage: the proof's points in their prime-order subgroups (always: three subgroup
    /// checks, [`in_subgroups`]), then (unless [`ProveOptions::verify`] is off) `proof` against
    /// `inputs` with the parameters' prepared verifying key, reported as [`Stage::Verify`].
    ///
    /// # Errors
    /// [`Error::VerificationFailed`]: the proof is not returned.
    fn verify(
        &self,
        k: usize,
        srs: &Srs,
        proof: &Proof<Bls12>,
        inputs: &[Fr],
        t: &mut Timings,
    ) -> Result<()> {
        if !in_subgroups(proof) {
            log::error!(
                "partition {k}: a proof point is outside its prime-order subgroup (a parameter \
                 point outside it? the loader does not check subgroups)"
            );
            return Err(Error::VerificationFailed { partition: k });
        }
        if self.options.verify {
            let ok = self.reporter.time(t, Some(k), Stage::Verify, || {
                verify_proof(&srs.pvk, proof, inputs)
            });
            if !matches!(ok, Ok(true)) {
                return Err(Error::VerificationFailed { partition: k });
            }
        }
        Ok(())
    }
}

/// Whether the points of `proof` lie in their prime-order subgroups (A and C in G1, B in G2).
/// The Groth16 pairing check (`verify_proof`) does not see a torsion component — the pairing
/// kills it — so a parameter file with a point outside the subgroup (decoded without subgroup
/// checks, as filecoin-proofs reads cached parameters) would give a proof that passes it, while
/// `verify_seal` reads the proof bytes with subgroup checks and rejects them.
fn in_subgroups(proof: &Proof<Bls12>) -> bool {
    bool::from(proof.a.is_torsion_free() & proof.b.is_torsion_free() & proof.c.is_torsion_free())
}

/// Proves with a process-wide engine configured from the environment
/// ([`EngineConfig::from_env`]), created on first use and reused (parameters stay loaded).
///
/// # Errors
/// As [`Engine::prove_porep_c2`], plus [`Error::InvalidConfig`] for bad environment values.
pub fn prove_porep_c2(
    c1_output: &[u8],
    sector_id: u64,
    prover_id: &[u8],
    options: &ProveOptions,
) -> Result<C2Output> {
    static GLOBAL: std::sync::OnceLock<Arc<Engine>> = std::sync::OnceLock::new();
    let engine = match GLOBAL.get() {
        Some(e) => e.clone(),
        None => {
            let e = Engine::new(EngineConfig::from_env()?)?;
            GLOBAL.get_or_init(|| e).clone()
        }
    };
    engine.prove_porep_c2(c1_output, sector_id, prover_id, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A proof of subgroup points passes [`in_subgroups`]; one whose A or C is the curve point
    /// with x = 4 (on y² = x³ + 4, outside the order-r subgroup, as all but a 2^-126 share of
    /// the curve's points) does not, though bellperson's `verify_proof` cannot tell (the pairing
    /// removes the torsion component).
    #[test]
    fn proof_points_outside_their_subgroups_are_refused() {
        use group::prime::PrimeCurveAffine;
        let good = Proof::<Bls12> {
            a: blstrs::G1Affine::generator(),
            b: blstrs::G2Affine::generator(),
            c: blstrs::G1Affine::generator(),
        };
        assert!(in_subgroups(&good));
        use ff::Field;
        let x = blstrs::Fp::from(4u64);
        let y = (x.square() * x + blstrs::Fp::from(4u64)).sqrt().unwrap();
        let mut bytes = [0u8; 96];
        bytes[..48].copy_from_slice(&x.to_bytes_be());
        bytes[48..].copy_from_slice(&y.to_bytes_be());
        let t = blstrs::G1Affine::from_uncompressed_unchecked(&bytes).unwrap();
        assert!(bool::from(t.is_on_curve()) && !bool::from(t.is_identity()));
        assert!(!bool::from(t.is_torsion_free()));
        assert!(!in_subgroups(&Proof { a: t, ..good.clone() }));
        assert!(!in_subgroups(&Proof { c: t, ..good }));
    }

    #[test]
    fn partition_estimates_count_a_b_c_only_when_they_are_on_the_host() {
        let gib32 = 32u64 << 30;
        assert_eq!(partition_host_bytes(gib32, true), 130_300_000 * 170);
        assert_eq!(partition_host_bytes(gib32, false), 130_300_000 * 40);
        // z alone (32 B per variable, 130.17 M aux at 32 GiB) fits the witness-only figure.
        assert!(partition_host_bytes(gib32, false) > 130_169_893 * 32 + (512 << 20));
    }
}
