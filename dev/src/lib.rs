//! # cuzk-dev — test and bench tooling of cuzk, never part of a release build
//!
//! - [`c1gen`]: real-shape C1 outputs (`SealCommitPhase1Output`) without sealing a sector.
//! - [`cputime`]: the process's CPU seconds (core-seconds in the examples).
//! - [`fixture`]: the deterministic 2 KiB / 8 MiB PoRep fixtures (a sealed sector's C1 output
//!   and Groth16 test parameters) that the examples and tests prove.
//! - [`post_fixture`]: the deterministic 2 KiB PoSt fixture (a sealed sector with its cache,
//!   for vanilla proofs of any randomness, and the WinningPoSt and WindowPoSt test parameters).
//! - [`postgen`]: real-shape WindowPoSt and WinningPoSt inputs (vanilla proofs as Curio sends
//!   them) for any sector size, without sealing.
//! - [`snapgen`]: real-shape SnapDeals inputs (commitments, vanilla partition proofs) for any
//!   sector size, without sealing.
//! - [`snap_fixture`]: the deterministic 2 KiB SnapDeals fixture (a sealed sector updated with
//!   new data, its vanilla partition proofs, the update circuit's test parameters).
//! - [`paramgen`]: Groth16 test parameters (`.params`, `.vk`) for a compiled circuit, on the CPU
//!   or (feature `cuda`) the GPU.
#![deny(missing_docs)]

pub mod c1gen;
pub mod cputime;
pub mod fixture;
pub mod paramgen;
pub mod post_fixture;
pub mod postgen;
pub mod snap_fixture;
pub mod snapgen;
