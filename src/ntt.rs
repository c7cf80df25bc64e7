//! CPU number-theoretic transform (NTT) over the BLS12-381 scalar field, and the Groth16 H
//! polynomial built from it. This is the reference the GPU NTT is checked against.
//!
//! Radix-2 Cooley–Tukey with a bit-reversal permutation (Cooley & Tukey, "An algorithm for the
//! machine calculation of complex Fourier series", 1965), rayon-parallel per stage. Domains are
//! the multiplicative subgroups of order n = 2^k (k ≤ 32 = the 2-adicity of Fr); the coset is
//! g·⟨ω⟩ with g = 7, Fr's multiplicative generator — bellperson's choice.

use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use crate::error::{Error, Result};

/// Below this many elements, loops stay single-threaded.
const PAR_MIN: usize = 1 << 12;

/// A radix-2 evaluation domain of size `n = 2^log_n`.
#[derive(Clone, Debug)]
pub struct Domain {
    log_n: u32,
    omega: Fr,
    omega_inv: Fr,
    n_inv: Fr,
}

impl Domain {
    /// The domain of size 2^`log_n`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `log_n` exceeds Fr's 2-adicity (32).
    pub fn new(log_n: u32) -> Result<Domain> {
        if log_n > Fr::S {
            return Err(Error::InvalidInput(format!(
                "evaluation domain 2^{log_n} exceeds the field's 2-adicity 2^{}",
                Fr::S
            )));
        }
        let omega = Fr::ROOT_OF_UNITY.pow_vartime([1u64 << (Fr::S - log_n)]);
        Ok(Domain {
            log_n,
            omega,
            omega_inv: omega.invert().expect("root of unity is non-zero"),
            n_inv: Fr::from(1u64 << log_n).invert().expect("n < r"),
        })
    }

    /// Number of points, `2^log_n`.
    pub fn size(&self) -> usize {
        1 << self.log_n
    }

    /// log2 of the size.
    #[cfg(any(test, feature = "internals"))]
    pub fn log_size(&self) -> u32 {
        self.log_n
    }

    /// The generator ω of the domain (a primitive n-th root of unity).
    #[cfg(any(test, feature = "internals"))]
    pub fn omega(&self) -> Fr {
        self.omega
    }

    /// The coset shift g = 7 (Fr's multiplicative generator).
    pub fn coset_shift() -> Fr {
        Fr::MULTIPLICATIVE_GENERATOR
    }

    /// Z(x) = xⁿ − 1, the vanishing polynomial of the domain, evaluated on the coset: the
    /// constant gⁿ − 1.
    pub fn z_on_coset(&self) -> Fr {
        Self::coset_shift().pow_vartime([self.size() as u64]) - Fr::ONE
    }

    /// Forward NTT in place: coefficients (natural order) → evaluations at ωⁱ (natural order).
    ///
    /// # Panics
    /// If `values.len() != self.size()`.
    pub fn fft(&self, values: &mut [Fr]) {
        transform(values, self.log_n, self.omega);
    }

    /// Inverse NTT in place: evaluations → coefficients, scaled by 1/n.
    pub fn ifft(&self, values: &mut [Fr]) {
        transform(values, self.log_n, self.omega_inv);
        scale(values, self.n_inv);
    }

    /// Coset NTT: coefficients → evaluations at g·ωⁱ.
    pub fn coset_fft(&self, values: &mut [Fr]) {
        distribute_powers(values, Self::coset_shift());
        self.fft(values);
    }

    /// Inverse coset NTT: evaluations at g·ωⁱ → coefficients.
    pub fn icoset_fft(&self, values: &mut [Fr]) {
        self.ifft(values);
        distribute_powers(values, Self::coset_shift().invert().expect("g ≠ 0"));
    }
}

/// Multiplies `values[i]` by `c`.
fn scale(values: &mut [Fr], c: Fr) {
    values
        .par_iter_mut()
        .with_min_len(PAR_MIN)
        .for_each(|v| *v *= c);
}

/// Multiplies `values[i]` by `gⁱ`.
pub fn distribute_powers(values: &mut [Fr], g: Fr) {
    let chunk = (values.len() / rayon::current_num_threads().max(1)).max(PAR_MIN);
    values
        .par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(ci, vs)| {
            let mut u = g.pow_vartime([(ci * chunk) as u64]);
            for v in vs {
                *v *= u;
                u *= g;
            }
        });
}

fn bit_reverse(values: &mut [Fr], log_n: u32) {
    if log_n == 0 {
        return;
    }
    let n = values.len();
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - log_n);
        if i < j {
            values.swap(i, j);
        }
    }
}

/// Unscaled radix-2 DIT transform with root `omega` of order `2^log_n`.
fn transform(values: &mut [Fr], log_n: u32, omega: Fr) {
    let n = values.len();
    assert_eq!(
        n,
        1usize << log_n,
        "NTT input length must equal the domain size"
    );
    bit_reverse(values, log_n);
    // twiddles[j] = omega^j for j < n/2; stage with half-size m uses twiddles[j * n/(2m)].
    let half = n / 2;
    let mut twiddles = vec![Fr::ONE; half.max(1)];
    if half > 1 {
        let chunk = (half / rayon::current_num_threads().max(1)).max(PAR_MIN);
        twiddles
            .par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(ci, ts)| {
                let mut w = omega.pow_vartime([(ci * chunk) as u64]);
                for t in ts {
                    *t = w;
                    w *= omega;
                }
            });
    }
    let mut m = 1;
    while m < n {
        let stride = n / (2 * m);
        let butterfly = |lo: &mut Fr, hi: &mut Fr, w: &Fr| {
            let t = *hi * w;
            *hi = *lo - t;
            *lo += t;
        };
        if n / (2 * m) >= rayon::current_num_threads() * 4 || n < PAR_MIN {
            // many small blocks: one block per task
            values
                .par_chunks_mut(2 * m)
                .with_min_len((PAR_MIN / (2 * m)).max(1))
                .for_each(|blk| {
                    let (lo, hi) = blk.split_at_mut(m);
                    for (j, (l, h)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                        butterfly(l, h, &twiddles[j * stride]);
                    }
                });
        } else {
            // few large blocks: parallelize inside each block
            for blk in values.chunks_mut(2 * m) {
                let (lo, hi) = blk.split_at_mut(m);
                lo.par_iter_mut()
                    .zip(hi.par_iter_mut())
                    .enumerate()
                    .with_min_len(PAR_MIN)
                    .for_each(|(j, (l, h))| butterfly(l, h, &twiddles[j * stride]));
            }
        }
        m *= 2;
    }
}

/// The Groth16 quotient polynomial h(x) = (A(x)·B(x) − C(x)) / Z(x).
///
/// Input: the R1CS evaluations `a, b, c` (one value per constraint; they are zero-padded to the
/// domain size n = 2^k ≥ len). Output: the n − 1 coefficients of h (the degree of h is at most
/// n − 2, so the top coefficient is zero and dropped), which pair with the n − 1 points of the
/// H query. Steps: iNTT(a, b) → coset NTT → a·b/Z(g) → coset iNTT → minus iNTT(c)/Z(g)
/// (bellperson's iNTT(a, b, c) → coset NTT → (a·b − c)/Z(g) → coset iNTT, in six transforms).
///
/// # Errors
/// [`Error::InvalidInput`] if the lengths differ or the domain is too large.
pub fn compute_h(mut a: Vec<Fr>, mut b: Vec<Fr>, mut c: Vec<Fr>) -> Result<Vec<Fr>> {
    if a.len() != b.len() || a.len() != c.len() {
        return Err(Error::InvalidInput(format!(
            "a, b, c lengths differ: {}, {}, {}",
            a.len(),
            b.len(),
            c.len()
        )));
    }
    let n = a.len().max(1).next_power_of_two();
    let domain = Domain::new(n.trailing_zeros())?;
    for v in [&mut a, &mut b, &mut c] {
        v.resize(n, Fr::ZERO);
    }
    // C's coset evaluations are not needed: the coset interpolation is linear and C has degree
    // < n, so icoset((A·B − C)/Z) = icoset(A·B)/Z − C/Z with C = ifft(c) (six transforms, not
    // bellperson's seven; the result is the same element for element). The transforms of a, b
    // and c are independent: run them side by side.
    let to_coset = |v: &mut Vec<Fr>| {
        domain.ifft(v);
        domain.coset_fft(v);
    };
    rayon::join(
        || to_coset(&mut a),
        || rayon::join(|| to_coset(&mut b), || domain.ifft(&mut c)),
    );
    let z_inv = domain
        .z_on_coset()
        .invert()
        .expect("Z is non-zero on the coset");
    a.par_iter_mut()
        .zip(b.par_iter())
        .with_min_len(PAR_MIN)
        .for_each(|(x, y)| *x *= y * z_inv);
    drop(b);
    domain.icoset_fft(&mut a);
    a.par_iter_mut()
        .zip(c.par_iter())
        .with_min_len(PAR_MIN)
        .for_each(|(x, z)| *x -= *z * z_inv);
    drop(c);
    a.truncate(n - 1);
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rand_vec(n: usize, seed: u64) -> Vec<Fr> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        (0..n).map(|_| Fr::random(&mut rng)).collect()
    }

    fn naive_dft(coeffs: &[Fr], root: Fr) -> Vec<Fr> {
        (0..coeffs.len())
            .map(|i| {
                let x = root.pow_vartime([i as u64]);
                coeffs.iter().rev().fold(Fr::ZERO, |acc, c| acc * x + c)
            })
            .collect()
    }

    #[test]
    fn fft_equals_naive_dft() {
        for log_n in 0..=6 {
            let d = Domain::new(log_n).unwrap();
            let v = rand_vec(d.size(), log_n as u64);
            let mut fast = v.clone();
            d.fft(&mut fast);
            assert_eq!(fast, naive_dft(&v, d.omega()), "2^{log_n}");
            // coset: evaluations at g·ω^i
            let mut coset = v.clone();
            d.coset_fft(&mut coset);
            let g = Domain::coset_shift();
            let shifted: Vec<Fr> = v
                .iter()
                .enumerate()
                .map(|(i, c)| *c * g.pow_vartime([i as u64]))
                .collect();
            assert_eq!(coset, naive_dft(&shifted, d.omega()));
        }
    }

    #[test]
    fn omega_has_exact_order() {
        let d = Domain::new(10).unwrap();
        assert_eq!(d.omega().pow_vartime([1024]), Fr::ONE);
        assert_ne!(d.omega().pow_vartime([512]), Fr::ONE);
        assert!(Domain::new(33).is_err());
    }

    #[test]
    fn round_trips() {
        for log_n in [1, 2, 5, 11, 13, 16] {
            let d = Domain::new(log_n).unwrap();
            let v = rand_vec(d.size(), 100 + log_n as u64);
            let mut w = v.clone();
            d.fft(&mut w);
            assert_ne!(w, v);
            d.ifft(&mut w);
            assert_eq!(w, v, "fft/ifft 2^{log_n}");
            d.coset_fft(&mut w);
            d.icoset_fft(&mut w);
            assert_eq!(w, v, "coset 2^{log_n}");
        }
    }

    #[test]
    fn h_equals_the_seven_transform_sequence_on_any_input() {
        // The six-transform route relies on linearity only, so it must equal bellperson's
        // sequence (ifft and coset_fft of a, b, c; (a·b − c)/Z; icoset_fft) element for element
        // also when c ≠ a·b (h then has a nonzero top coefficient, which compute_h drops).
        for log_n in [0u32, 1, 2, 5, 10] {
            let n = 1usize << log_n;
            let (a, b, c) = (
                rand_vec(n, 10 + log_n as u64),
                rand_vec(n, 20 + log_n as u64),
                rand_vec(n, 30 + log_n as u64),
            );
            let d = Domain::new(log_n).unwrap();
            let mut want = [a.clone(), b.clone(), c.clone()];
            for v in want.iter_mut() {
                d.ifft(v);
                d.coset_fft(v);
            }
            let z_inv = d.z_on_coset().invert().unwrap();
            let [mut wa, wb, wc] = want;
            for i in 0..n {
                wa[i] = (wa[i] * wb[i] - wc[i]) * z_inv;
            }
            d.icoset_fft(&mut wa);
            wa.truncate(n - 1);
            let got = compute_h(a, b, c).unwrap();
            assert_eq!(got, wa, "2^{log_n}");
        }
    }

    #[test]
    fn h_divides_a_satisfied_r1cs() {
        // Choose polynomials with A·B − C = h·Z exactly: pick a, b evaluations at random, set
        // c = a·b pointwise (a satisfied R1CS); then h·Z must interpolate A·B − C, which we check
        // at a random point τ outside the domain.
        let n = 1 << 8;
        let a = rand_vec(n - 3, 1);
        let b = rand_vec(n - 3, 2);
        let c: Vec<Fr> = a.iter().zip(&b).map(|(x, y)| *x * y).collect();
        let h = compute_h(a.clone(), b.clone(), c.clone()).unwrap();
        assert_eq!(h.len(), n - 1);
        let d = Domain::new(8).unwrap();
        let interp = |mut v: Vec<Fr>| {
            v.resize(n, Fr::ZERO);
            d.ifft(&mut v);
            v
        };
        let (pa, pb, pc) = (interp(a), interp(b), interp(c));
        let eval = |p: &[Fr], x: Fr| p.iter().rev().fold(Fr::ZERO, |acc, c| acc * x + c);
        let tau = Fr::from(123456789u64);
        let lhs = eval(&pa, tau) * eval(&pb, tau) - eval(&pc, tau);
        let rhs = eval(&h, tau) * (tau.pow_vartime([n as u64]) - Fr::ONE);
        assert_eq!(lhs, rhs);
    }
}
