//! # cuzk — Filecoin PoRep commit-phase-2 (C2) prover
//!
//! Produces the Groth16 (BLS12-381) proofs of a sealed sector from its commit-phase-1 (C1)
//! output, on NVIDIA GPUs (feature `cuda`) or on the CPU, and verifies them before returning.
//!
//! Main entry points:
//! - [`Engine`]: holds loaded parameters and devices; reuse one for many calls.
//! - [`Engine::prove_porep_c2`] / [`prove_porep_c2`]: C1 JSON in, proof bytes out
//!   (192 bytes per partition, the format of filecoin-proofs' `seal_commit_phase2`).
//! - [`c1::prover_id_from_actor_id`]: the 32-byte prover id of a miner actor id.
//!
//! The data flow (parse → parameters → synthesis → H polynomial and MSMs → Groth16 epilogue →
//! verification) is the design card's; the Groth16 construction is Groth, "On the Size of
//! Pairing-based Non-interactive Arguments", EUROCRYPT 2016, as laid out by bellperson.
#![deny(missing_docs)]

pub mod budget;
pub mod c1;
pub mod cancel;
pub mod circuit;
pub mod config;
pub mod digest;
pub mod engine;
pub mod error;
pub mod ffi;
pub mod gpu;
pub mod ntt;
pub mod pipeline;
pub mod progress;
pub mod prover;
pub mod scheduler;
pub mod srs;
pub mod synth;

pub use cancel::CancelToken;
pub use config::{Backend, CircuitCache, EngineConfig, ProveOptions, Synthesis};
pub use engine::{prove_porep_c2, C2Output, Engine, PartitionReport};
pub use error::{Error, Result};
pub use progress::{ProgressEvent, ProgressFn, Stage, Timings};
