//! # cuzk-dev — test and bench tooling of cuzk, never part of a release build
//!
//! - [`c1gen`]: real-shape C1 outputs (`SealCommitPhase1Output`) without sealing a sector.
#![deny(missing_docs)]

pub mod c1gen;
