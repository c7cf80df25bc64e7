//! Groth16 proving: the MSM results of a backend (CPU or GPU, one trait) are assembled into the
//! proof (A, B, C), serialized in bellperson's format, and verified.
//!
//! Construction: Groth, "On the Size of Pairing-based Non-interactive Arguments" (EUROCRYPT
//! 2016), with bellperson's query layout and blinding:
//!
//! - A = α + Σ aᵢ·Aᵢ + r·δ  (G1)
//! - B = β + Σ bᵢ·Bᵢ + s·δ  (G2; also in G1 for C)
//! - C = s·A_Σ + r·B1_Σ + r·s·δ + s·α + r·β + Σ hᵢ·Hᵢ + Σ auxᵢ·Lᵢ  (G1)
//!
//! where A_Σ, B1_Σ are the query sums, so that C = s·A + r·B₁ − r·s·δ + H + L.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod gpu;

pub use cpu::CpuBackend;

use bellperson::groth16::{Proof, VerifyingKey};
use std::sync::Arc;

use blstrs::{Bls12, G1Projective, G2Projective, Scalar as Fr};
use group::prime::PrimeCurveAffine;
use group::Curve;

use crate::error::{Error, Result};
use crate::progress::{Reporter, Timings};
use crate::srs::Srs;
use crate::synth::Assignment;

/// Bytes of one serialized partition proof (compressed A ‖ B ‖ C: 48 + 96 + 48).
pub const PROOF_BYTES: usize = 192;

/// The five multi-scalar multiplications of one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmResults {
    /// Σ hᵢ·Hᵢ over the n − 1 coefficients of the quotient polynomial.
    pub h: G1Projective,
    /// Σ auxᵢ·Lᵢ over all aux variables.
    pub l: G1Projective,
    /// A query sum (inputs, and aux of the A density).
    pub a: G1Projective,
    /// B query sum in G1.
    pub b_g1: G1Projective,
    /// B query sum in G2.
    pub b_g2: G2Projective,
}

/// Per-partition context a backend reports into.
pub struct PartitionCtx<'a> {
    /// Partition index.
    pub partition: usize,
    /// Progress reporter (log + callback).
    pub reporter: &'a Reporter,
    /// Where stage timings are recorded.
    pub timings: &'a mut Timings,
    /// CUDA device that ran the partition (GPU backend).
    pub device: Option<usize>,
    /// Allocator tier that ran (GPU backend).
    pub tier: Option<String>,
}

/// A prover backend: computes the H polynomial and the MSMs of one partition.
pub trait Backend: Send + Sync {
    /// `"cpu"` or `"gpu"`.
    fn name(&self) -> &'static str;

    /// Computes the MSM results of `asg` against `srs`. The backend may take `a`, `b`, `c` out of
    /// the assignment (they are not needed afterwards).
    ///
    /// # Errors
    /// Device and memory errors (GPU); [`Error::InvalidInput`] for inconsistent sizes.
    fn compute(
        &self,
        asg: &mut Assignment,
        srs: &Arc<Srs>,
        ctx: &mut PartitionCtx<'_>,
    ) -> Result<MsmResults>;
}

/// Assembles the Groth16 proof from the MSM results and the blinding factors `r`, `s`.
///
/// # Errors
/// [`Error::ParametersInvalid`]-like internal error if δ is the identity (broken parameters).
pub fn assemble(vk: &VerifyingKey<Bls12>, m: &MsmResults, r: Fr, s: Fr) -> Result<Proof<Bls12>> {
    if bool::from(vk.delta_g1.is_identity()) || bool::from(vk.delta_g2.is_identity()) {
        return Err(Error::Internal("verifying key has δ at infinity".into()));
    }
    let delta_g1 = G1Projective::from(vk.delta_g1);
    let g_a = delta_g1 * r + vk.alpha_g1 + m.a;
    let g_b = G2Projective::from(vk.delta_g2) * s + vk.beta_g2 + m.b_g2;
    let g_c = delta_g1 * (r * s)
        + G1Projective::from(vk.alpha_g1) * s
        + G1Projective::from(vk.beta_g1) * r
        + m.a * s
        + m.b_g1 * r
        + m.h
        + m.l;
    Ok(Proof {
        a: g_a.to_affine(),
        b: g_b.to_affine(),
        c: g_c.to_affine(),
    })
}

/// Serializes a proof in bellperson's format (192 bytes).
pub fn proof_to_bytes(p: &Proof<Bls12>) -> [u8; PROOF_BYTES] {
    let mut out = [0u8; PROOF_BYTES];
    let mut v = Vec::with_capacity(PROOF_BYTES);
    p.write(&mut v).expect("writing to a Vec cannot fail");
    out.copy_from_slice(&v);
    out
}

/// Checks that the assignment satisfies every constraint (aⱼ·bⱼ = cⱼ), in parallel.
/// Cheap next to the MSMs; catches an inconsistent C1 output before the heavy work.
///
/// # Errors
/// [`Error::Synthesis`] naming the first unsatisfied constraint.
pub fn check_satisfied(asg: &Assignment, partition: usize) -> Result<()> {
    use rayon::prelude::*;
    let bad = asg
        .a
        .par_iter()
        .zip(asg.b.par_iter())
        .zip(asg.c.par_iter())
        .with_min_len(1 << 14)
        .position_first(|((a, b), c)| *a * b != *c);
    match bad {
        None => Ok(()),
        Some(j) => Err(Error::Synthesis {
            partition,
            message: format!(
                "the C1 output does not satisfy the circuit (constraint {j} of {})",
                asg.a.len()
            ),
        }),
    }
}
