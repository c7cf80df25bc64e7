//! # cuzk — Filecoin PoRep commit-phase-2 (C2), PoSt and SnapDeals prover
//!
//! Produces the Groth16 (BLS12-381) proofs of a sealed sector from its commit-phase-1 (C1)
//! output, on NVIDIA GPUs (feature `cuda`) or on the CPU, and verifies them before returning.
//!
//! Main entry points:
//! - [`Engine`]: holds loaded parameters and devices; reuse one for many calls.
//! - [`Engine::prove_porep_c2`] / [`prove_porep_c2`]: C1 JSON in, proof bytes out
//!   (192 bytes per partition, the format of filecoin-proofs' `seal_commit_phase2`).
//! - [`Engine::prove_window_post`] / [`Engine::prove_winning_post`]: PoSt vanilla proofs in
//!   (what Curio sends, [`post`]), the 192-byte proof of filecoin-proofs-api's
//!   `generate_single_window_post_with_vanilla` / `generate_winning_post_with_vanilla` out.
//! - [`Engine::prove_snap_deals`]: SnapDeals vanilla partition proofs and commitments in
//!   ([`snap`]), the bytes of filecoin-proofs-api's
//!   `update::generate_empty_sector_update_proof_with_vanilla` out (192 per partition).
//! - [`c1::prover_id_from_actor_id`]: the 32-byte prover id of a miner actor id.
//!
//! The data flow (parse → parameters → synthesis → H polynomial and MSMs → Groth16 epilogue →
//! verification) is the design card's; the Groth16 construction is Groth, "On the Size of
//! Pairing-based Non-interactive Arguments", EUROCRYPT 2016, as laid out by bellperson.
//!
//! # Public API
//!
//! Everything a caller needs is at the crate root ([`Engine`], [`EngineConfig`] and its
//! [`Tuning`], [`ProveOptions`] and its [`Priority`], [`C2Output`], [`Error`], progress and
//! cancellation types), plus
//! [`c1::prover_id_from_actor_id`] and the C ABI in [`ffi`]. Settings are built from
//! `Default` (or `from_env`) with `with_*` setters; the structs and enums are
//! `#[non_exhaustive]`, so later versions can add fields and variants without breaking callers.
//!
//! The crate's other modules (circuit, GPU, scheduler, parameter files, …) are public only with
//! the cargo feature `internals`, which exists for cuzk's own tools (the `dev/` crate, the
//! `cuzk` command, the daemon, tests, benches and examples) and carries no stability promise.
#![deny(missing_docs)]

/// Declares modules that are `pub` with the feature `internals` (cuzk's own tools: no stability
/// promise) and crate-private without it.
macro_rules! internal_modules {
    ($($(#[$attr:meta])* $name:ident;)*) => {$(
        $(#[$attr])*
        #[cfg(feature = "internals")]
        pub mod $name;
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        pub(crate) mod $name;
    )*};
}

pub mod c1;
pub mod ffi;
pub mod post;
pub mod snap;

internal_modules! {
    budget;
    cancel;
    circuit;
    config;
    digest;
    engine;
    error;
    // Without `cuda` only the witness buffer pool (`hostpool`, `pinned`) serves the library;
    // the GPU backend's planning code (allocator tiers, layouts, faults) is compiled for its
    // unit tests and cuzk's tools.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    gpu;
    job;
    ntt;
    pipeline;
    progress;
    prover;
    // The GPU backend's scheduler: without `cuda`, compiled for its unit tests only.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    scheduler;
    srs;
    srs_cache;
    synth;
}

pub use cancel::CancelToken;
pub use config::{
    Backend, CircuitCache, EngineConfig, HAhead, MsmAccumulation, Priority, ProveOptions,
    Synthesis, Tier, Tuning, DEFAULT_MSM_BATCH, MAX_MSM_BATCH,
};
pub use engine::{prove_porep_c2, C2Output, Engine, PartitionReport, ProofOutput};
pub use error::{DeviceFault, Error, Result};
pub use job::ProofKind;
pub use progress::{ProgressEvent, ProgressFn, Stage, Timings};
