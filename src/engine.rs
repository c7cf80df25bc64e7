//! The engine: parameter cache, backend choice, and the `prove_porep_c2` entry point.

use std::sync::Arc;

use crate::config::{EngineConfig, ProveOptions};
use crate::error::{Error, Result};
use crate::progress::Timings;

/// Where and how one partition was proved.
#[derive(Clone, Debug)]
pub struct PartitionReport {
    /// Partition index (0-based).
    pub partition: usize,
    /// `"cpu"` or `"gpu"`.
    pub backend: &'static str,
    /// CUDA device ordinal, for the GPU backend.
    pub device: Option<usize>,
    /// Allocator tier that ran on the GPU (see `gpu::alloc::Tier`), `None` on the CPU.
    pub tier: Option<String>,
}

/// Result of one C2 proof.
#[derive(Clone, Debug)]
pub struct C2Output {
    /// Proof bytes: 192 per partition (compressed A ‖ B ‖ C in bellperson's format), partitions
    /// in order — byte-identical in layout to filecoin-proofs' `seal_commit_phase2` output.
    pub proof: Vec<u8>,
    /// One report per partition.
    pub partitions: Vec<PartitionReport>,
    /// Per-partition, per-stage timings.
    pub timings: Timings,
    /// Whether the proof was verified before returning (true unless turned off).
    pub verified: bool,
}

/// A prover engine: keeps loaded Groth16 parameters (one handle per proof type, reused by every
/// later call) and the GPU workers. Thread-safe: share it behind an `Arc` and call
/// [`Engine::prove_porep_c2`] from many threads.
pub struct Engine {
    config: EngineConfig,
}

impl Engine {
    /// Creates an engine. Loads nothing yet: parameters are loaded on first use.
    ///
    /// # Errors
    /// [`Error::NoDevice`] when `config.backend` is `Gpu` and no device is usable.
    pub fn new(config: EngineConfig) -> Result<Arc<Engine>> {
        Ok(Arc::new(Engine { config }))
    }

    /// The configuration this engine was created with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Proves commit phase 2 of one sector.
    ///
    /// * `c1_output` — the `SealCommitPhase1Output` JSON of filecoin-proofs(-api), or the wrapper
    ///   `{"SectorNum": n, "Phase1Out": base64(JSON), "SectorSize": bytes}`.
    /// * `sector_id` — the sector number.
    /// * `prover_id` — 32 bytes (see [`crate::c1::prover_id_from_actor_id`]).
    ///
    /// Returns 192 bytes per partition (10 partitions for 32 GiB sectors, 1 for 2 KiB … 512 MiB).
    ///
    /// # Errors
    /// Input errors (1xx) before any heavy work; parameter errors (2xx); device and memory errors
    /// (3xx, 4xx); [`Error::VerificationFailed`] if a proof does not verify.
    pub fn prove_porep_c2(
        &self,
        c1_output: &[u8],
        sector_id: u64,
        prover_id: &[u8],
        options: &ProveOptions,
    ) -> Result<C2Output> {
        let _ = (c1_output, sector_id, prover_id, options);
        Err(Error::Internal("not implemented yet".into()))
    }
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
