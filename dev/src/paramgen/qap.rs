//! The QAP of a compiled circuit evaluated at τ: for every variable i of z = inputs ‖ aux,
//! uᵢ(τ) = Σⱼ A[j][i]·Lⱼ(τ), vᵢ(τ) (same with B), wᵢ(τ) (same with C), where Lⱼ are the Lagrange
//! basis polynomials of the evaluation domain ⟨ω⟩ of size m = 2^⌈log₂ constraints⌉ (bellperson's
//! domain: ω = Fr's 2^32-th root of unity squared down to order m).
//!
//! Lⱼ(τ) = ωʲ·(τᵐ − 1) / (m·(τ − ωʲ)) — the same values as the inverse NTT of (1, τ, τ², …) that
//! bellperson's generator takes, computed directly with batched inversions. Each matrix is
//! transposed once (a counting sort into CSC order) so that a variable's sum is one gather.

use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Result};
use blstrs::Scalar as Fr;
use cuzk::circuit::{CompiledCircuit, Csr};
use ff::{BatchInvert, Field, PrimeField};
use rayon::prelude::*;

/// Elements per parallel task.
const CHUNK: usize = 1 << 14;

/// u(τ), v(τ), w(τ) of every variable (inputs first), and the domain's size.
pub struct QapAtTau {
    /// log₂ of the domain size m.
    pub log_m: u32,
    /// uᵢ(τ) (A).
    pub u: Vec<Fr>,
    /// vᵢ(τ) (B).
    pub v: Vec<Fr>,
    /// wᵢ(τ) (C).
    pub w: Vec<Fr>,
}

/// log₂ of the smallest power of two ≥ `n` (bellperson's domain size for `n` constraints).
///
/// # Errors
/// When the domain would exceed Fr's 2-adicity.
pub fn domain_log_size(n: usize) -> Result<u32> {
    let log_m = n.max(1).next_power_of_two().trailing_zeros();
    if log_m >= Fr::S {
        bail!("{n} constraints need a domain of 2^{log_m}, beyond Fr's 2-adicity");
    }
    Ok(log_m)
}

/// The domain generator ω of order 2^`log_m`.
pub fn omega(log_m: u32) -> Fr {
    let mut w = Fr::ROOT_OF_UNITY;
    for _ in log_m..Fr::S {
        w = w.square();
    }
    w
}

/// Lⱼ(τ) for j < 2^`log_m`.
///
/// # Errors
/// When τ lies in the domain (τᵐ = 1), which a random τ never does.
pub fn lagrange_at(tau: Fr, log_m: u32) -> Result<Vec<Fr>> {
    let m = 1usize << log_m;
    let z = tau.pow_vartime([m as u64]) - Fr::ONE;
    if bool::from(z.is_zero()) {
        bail!("τ lies in the evaluation domain");
    }
    let c = z * Fr::from(m as u64).invert().expect("m < r");
    let w = omega(log_m);
    let mut out = vec![Fr::ZERO; m];
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(k, o)| {
        let mut wj = w.pow_vartime([(k * CHUNK) as u64]);
        let mut den = Vec::with_capacity(o.len());
        for x in o.iter_mut() {
            *x = wj;
            den.push(tau - wj);
            wj *= w;
        }
        den.iter_mut().batch_invert();
        for (x, d) in o.iter_mut().zip(&den) {
            *x *= c * d;
        }
    });
    Ok(out)
}

/// y = Mᵀ·`lag`: yᵢ = Σⱼ coeff(M[j][i])·lag[j] for every column i < `vars`.
pub fn transposed_spmv(m: &Csr, coeffs: &[Fr], lag: &[Fr], vars: usize) -> Vec<Fr> {
    let rows = m.rows();
    // Column counts, then offsets.
    let counts: Vec<AtomicU32> = (0..vars).map(|_| AtomicU32::new(0)).collect();
    m.col.par_iter().with_min_len(CHUNK).for_each(|&c| {
        counts[c as usize].fetch_add(1, Ordering::Relaxed);
    });
    let mut start = Vec::with_capacity(vars + 1);
    let mut acc = 0u32;
    start.push(0);
    for c in &counts {
        acc += c.load(Ordering::Relaxed);
        start.push(acc);
    }
    let cursor: Vec<AtomicU32> = start[..vars].iter().map(|&s| AtomicU32::new(s)).collect();
    drop(counts);
    // Scatter (row, coefficient index) into column order.
    let nnz = m.nnz();
    let row_of: Vec<AtomicU32> = (0..nnz).map(|_| AtomicU32::new(0)).collect();
    let coeff_of: Vec<AtomicU32> = (0..nnz).map(|_| AtomicU32::new(0)).collect();
    (0..rows).into_par_iter().with_min_len(CHUNK).for_each(|j| {
        let (s, e) = (m.row_ptr[j] as usize, m.row_ptr[j + 1] as usize);
        for k in s..e {
            let p = cursor[m.col[k] as usize].fetch_add(1, Ordering::Relaxed) as usize;
            row_of[p].store(j as u32, Ordering::Relaxed);
            coeff_of[p].store(m.coeff[k], Ordering::Relaxed);
        }
    });
    drop(cursor);
    (0..vars)
        .into_par_iter()
        .with_min_len(CHUNK / 4)
        .map(|i| {
            let mut sum = Fr::ZERO;
            for p in start[i] as usize..start[i + 1] as usize {
                let j = row_of[p].load(Ordering::Relaxed) as usize;
                let k = coeff_of[p].load(Ordering::Relaxed) as usize;
                sum += coeffs[k] * lag[j];
            }
            sum
        })
        .collect()
}

/// The QAP of `cc` at `tau`.
///
/// # Errors
/// From [`domain_log_size`] and [`lagrange_at`].
pub fn evaluate(cc: &CompiledCircuit, tau: Fr) -> Result<QapAtTau> {
    let log_m = domain_log_size(cc.layout.num_constraints())?;
    let lag = lagrange_at(tau, log_m)?;
    let vars = cc.layout.num_inputs() + cc.layout.num_aux();
    let coeffs = cc.coeffs.values();
    let u = transposed_spmv(&cc.a, coeffs, &lag, vars);
    let v = transposed_spmv(&cc.b, coeffs, &lag, vars);
    let w = transposed_spmv(&cc.c, coeffs, &lag, vars);
    Ok(QapAtTau { log_m, u, v, w })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn lagrange_equals_the_inverse_ntt_of_the_powers_of_tau() {
        let mut rng = ChaCha20Rng::from_seed([3; 32]);
        for log_m in [0u32, 1, 3, 10, 15] {
            let tau = Fr::random(&mut rng);
            let m = 1usize << log_m;
            let mut powers = Vec::with_capacity(m);
            let mut p = Fr::ONE;
            for _ in 0..m {
                powers.push(p);
                p *= tau;
            }
            cuzk::ntt::Domain::new(log_m).unwrap().ifft(&mut powers);
            assert_eq!(lagrange_at(tau, log_m).unwrap(), powers, "2^{log_m}");
        }
        assert!(lagrange_at(omega(4), 4).is_err());
    }

    #[test]
    fn domain_sizes() {
        assert_eq!(domain_log_size(0).unwrap(), 0);
        assert_eq!(domain_log_size(1).unwrap(), 0);
        assert_eq!(domain_log_size(5).unwrap(), 3);
        assert_eq!(domain_log_size(8).unwrap(), 3);
        assert_eq!(omega(5).pow_vartime([32u64]), Fr::ONE);
        assert_ne!(omega(5).pow_vartime([16u64]), Fr::ONE);
    }
}
