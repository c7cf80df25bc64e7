//! Fixed-base scalar multiplication on the CPU: s·G for many scalars s and one point G, with a
//! table of 2^16-ary windows of G (`table[k][d−1] = d·2^(16k)·G`, affine): s·G is then the sum of
//! at most 16 table points (one mixed addition per non-zero 16-bit digit of s), and a chunk of
//! results is normalized to affine with one inversion (blstrs' batch normalization).
//!
//! Results come as uncompressed point encodings (96 bytes for G1, 192 for G2) — what the
//! `.params` writer needs.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar as Fr};
use ff::PrimeField;
use group::{prime::PrimeCurveAffine, Curve};
use rayon::prelude::*;

/// Bits per window.
pub const WINDOW_BITS: usize = 16;
/// Windows per 256-bit scalar.
pub const WINDOWS: usize = 256 / WINDOW_BITS;
/// Non-zero digits per window.
const DIGITS: usize = (1 << WINDOW_BITS) - 1;
/// Results per parallel task (one batch normalization each).
const CHUNK: usize = 1 << 12;

/// The window table of one fixed base, in affine form.
pub struct FixedBaseTable<G: Curve> {
    table: Vec<G::AffineRepr>,
}

impl<G> FixedBaseTable<G>
where
    G: Curve + Send + Sync,
    G::AffineRepr: Send + Sync + Copy,
{
    /// Builds the table of `base` (16 windows × 65,535 points: 100 MB for G1, 200 MB for G2).
    pub fn new(base: G) -> Self {
        let mut projective = Vec::new();
        projective.resize(WINDOWS * DIGITS, G::identity());
        // Window bases 2^(16k)·G, then each window's multiples in parallel.
        let mut bases = Vec::with_capacity(WINDOWS);
        let mut b = base;
        for _ in 0..WINDOWS {
            bases.push(b);
            for _ in 0..WINDOW_BITS {
                b = b.double();
            }
        }
        projective
            .par_chunks_mut(DIGITS)
            .zip(bases.par_iter())
            .for_each(|(w, &b)| {
                let mut acc = b;
                for p in w.iter_mut() {
                    *p = acc;
                    acc += b;
                }
            });
        let mut table = vec![G::identity().to_affine(); WINDOWS * DIGITS];
        table
            .par_chunks_mut(CHUNK)
            .zip(projective.par_chunks(CHUNK))
            .for_each(|(a, p)| G::batch_normalize(p, a));
        FixedBaseTable { table }
    }

    /// The table's points: window k's multiples d·2^(16k)·G for d = 1 … 65,535 at
    /// `k·65535 + d − 1`.
    pub fn points(&self) -> &[G::AffineRepr] {
        &self.table
    }

    /// s·G (projective).
    pub fn mul(&self, s: &Fr) -> G {
        let repr = s.to_repr();
        let bytes = repr.as_ref();
        let mut acc = G::identity();
        for k in 0..WINDOWS {
            let d = u16::from_le_bytes([bytes[2 * k], bytes[2 * k + 1]]) as usize;
            if d != 0 {
                acc += self.table[k * DIGITS + d - 1];
            }
        }
        acc
    }
}

/// Uncompressed encodings of s·G for every scalar, into `out` (`scalars.len()` × 96 bytes).
///
/// # Panics
/// If `out` has the wrong length.
pub fn g1_encoded(t: &FixedBaseTable<G1Projective>, scalars: &[Fr], out: &mut [u8]) {
    encoded::<G1Projective, 96>(t, scalars, out, |p: &G1Affine| p.to_uncompressed())
}

/// Uncompressed encodings of s·G for every scalar (G2, 192 bytes each).
///
/// # Panics
/// If `out` has the wrong length.
pub fn g2_encoded(t: &FixedBaseTable<G2Projective>, scalars: &[Fr], out: &mut [u8]) {
    encoded::<G2Projective, 192>(t, scalars, out, |p: &G2Affine| p.to_uncompressed())
}

fn encoded<G, const N: usize>(
    t: &FixedBaseTable<G>,
    scalars: &[Fr],
    out: &mut [u8],
    enc: impl Fn(&G::AffineRepr) -> [u8; N] + Sync,
) where
    G: Curve + Send + Sync,
    G::AffineRepr: Send + Sync + Copy + PrimeCurveAffine,
{
    assert_eq!(out.len(), scalars.len() * N, "output length");
    out.par_chunks_mut(CHUNK * N)
        .zip(scalars.par_chunks(CHUNK))
        .for_each(|(o, s)| {
            let proj: Vec<G> = s.iter().map(|s| t.mul(s)).collect();
            let mut aff = vec![G::identity().to_affine(); s.len()];
            G::batch_normalize(&proj, &mut aff);
            for (o, a) in o.chunks_exact_mut(N).zip(&aff) {
                o.copy_from_slice(&enc(a));
            }
        });
}

/// Uncompressed encodings of affine points already normalized (the GPU path's results).
pub fn encode_g1_affine(points: &[G1Affine], out: &mut [u8]) {
    out.par_chunks_exact_mut(96)
        .zip(points.par_iter())
        .for_each(|(o, p)| o.copy_from_slice(&p.to_uncompressed()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use group::Group;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn table_multiplication_equals_blstrs() {
        let mut rng = ChaCha20Rng::from_seed([9; 32]);
        let g1 = G1Projective::random(&mut rng);
        let g2 = G2Projective::random(&mut rng);
        let t1 = FixedBaseTable::new(g1);
        let t2 = FixedBaseTable::new(g2);
        let mut scalars: Vec<Fr> = (0..100).map(|_| Fr::random(&mut rng)).collect();
        scalars.extend([
            Fr::ZERO,
            Fr::ONE,
            -Fr::ONE,
            Fr::from(65535),
            Fr::from(65536),
        ]);
        let mut o1 = vec![0u8; scalars.len() * 96];
        let mut o2 = vec![0u8; scalars.len() * 192];
        g1_encoded(&t1, &scalars, &mut o1);
        g2_encoded(&t2, &scalars, &mut o2);
        for (i, s) in scalars.iter().enumerate() {
            assert_eq!(
                o1[96 * i..96 * (i + 1)],
                (g1 * s).to_affine().to_uncompressed(),
                "G1 {i}"
            );
            assert_eq!(
                o2[192 * i..192 * (i + 1)],
                (g2 * s).to_affine().to_uncompressed(),
                "G2 {i}"
            );
        }
    }
}
