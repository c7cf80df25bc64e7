//! CPU backend: H polynomial through our rayon NTT ([`crate::ntt`]), MSMs through blst's
//! Pippenger multi-exponentiation (via `blstrs`), with the PoRep witness's zeros skipped and its
//! ones summed by plain point additions (≈ 96 % of aux values are 0 or 1).

use std::time::Instant;

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar as Fr};
use ff::Field;
use group::Group;
use rayon::prelude::*;

use super::{MsmResults, PartitionCtx, ProverBackend, Queries};
use crate::error::{Error, Result};
use crate::progress::Stage;
use crate::srs::Srs;
use crate::synth::{Assignment, Density};

/// Points per blst multi-exponentiation call (bounds the projective copies to ~0.6 GB for G1).
const CHUNK: usize = 1 << 22;

/// A curve group the CPU MSM runs over.
pub trait MsmCurve: Copy + Send + Sync {
    /// Projective form.
    type Proj: Group<Scalar = Fr>
        + Send
        + Sync
        + From<Self>
        + for<'a> std::ops::Add<&'a Self, Output = Self::Proj>;
    /// blst's Pippenger directly on affine points (no conversion to projective and back).
    fn multi_exp(points: &[Self], scalars: &[Fr]) -> Self::Proj;
}

/// Scalars as blst wants them: 32 little-endian bytes each (canonical form).
fn scalar_bytes(scalars: &[Fr]) -> Vec<u8> {
    let mut out = vec![0u8; scalars.len() * 32];
    out.par_chunks_mut(32)
        .zip(scalars.par_iter())
        .for_each(|(o, s)| o.copy_from_slice(&s.to_bytes_le()));
    out
}

impl MsmCurve for G1Affine {
    type Proj = G1Projective;
    fn multi_exp(points: &[G1Affine], scalars: &[Fr]) -> G1Projective {
        use blst::MultiPoint;
        if points.is_empty() {
            return G1Projective::identity();
        }
        // SAFETY: blstrs::G1Affine is #[repr(transparent)] over blst_p1_affine, so the slice has
        // the same length, layout and alignment as a slice of blst_p1_affine.
        let raw: &[blst::blst_p1_affine] =
            unsafe { std::slice::from_raw_parts(points.as_ptr().cast(), points.len()) };
        let p: blst::blst_p1 = raw.mult(&scalar_bytes(scalars), 255);
        // SAFETY: blstrs::G1Projective is #[repr(transparent)] over blst_p1, and `p` is a valid
        // point blst computed.
        unsafe { std::mem::transmute::<blst::blst_p1, G1Projective>(p) }
    }
}

impl MsmCurve for G2Affine {
    type Proj = G2Projective;
    fn multi_exp(points: &[G2Affine], scalars: &[Fr]) -> G2Projective {
        use blst::MultiPoint;
        if points.is_empty() {
            return G2Projective::identity();
        }
        // SAFETY: blstrs::G2Affine is #[repr(transparent)] over blst_p2_affine (see above).
        let raw: &[blst::blst_p2_affine] =
            unsafe { std::slice::from_raw_parts(points.as_ptr().cast(), points.len()) };
        let p: blst::blst_p2 = raw.mult(&scalar_bytes(scalars), 255);
        // SAFETY: blstrs::G2Projective is #[repr(transparent)] over blst_p2, and `p` is a valid
        // point blst computed.
        unsafe { std::mem::transmute::<blst::blst_p2, G2Projective>(p) }
    }
}

/// Σ scalarᵢ·pointᵢ over the pairs: zeros skipped, ones added directly, the rest through blst.
///
/// `pairs` yields `(point, scalar)`; order does not matter.
pub fn msm<'a, C: MsmCurve + 'a>(pairs: impl ParallelIterator<Item = (&'a C, &'a Fr)>) -> C::Proj {
    let one = Fr::ONE;
    // Split: ones are summed on the fly, others collected for Pippenger.
    let (ones, others): (C::Proj, Vec<(C, Fr)>) = pairs
        .filter(|(_, s)| !bool::from(s.is_zero()))
        .fold(
            || (C::Proj::identity(), Vec::new()),
            |(mut acc, mut rest), (p, s)| {
                if *s == one {
                    acc = acc + p;
                } else {
                    rest.push((*p, *s));
                }
                (acc, rest)
            },
        )
        .reduce(
            || (C::Proj::identity(), Vec::new()),
            |(a1, mut r1), (a2, r2)| {
                r1.extend(r2);
                (a1 + a2, r1)
            },
        );
    let mut total = ones;
    for chunk in others.chunks(CHUNK) {
        let (pts, scs): (Vec<C>, Vec<Fr>) = chunk.iter().copied().unzip();
        total += C::multi_exp(&pts, &scs);
    }
    total
}

/// Pairs each used variable (set density bit) with the next point of a query section.
fn dense_pairs<'a, C: Sync>(
    points: &'a [C],
    values: &'a [Fr],
    density: &'a Density,
) -> impl ParallelIterator<Item = (&'a C, &'a Fr)> + 'a {
    let idx: Vec<usize> = (0..values.len()).filter(|&i| density.get(i)).collect();
    idx.into_par_iter()
        .enumerate()
        .map(move |(k, i)| (&points[k], &values[i]))
}

/// The input (public) parts of the A, B_G1 and B_G2 MSMs: Σ inputᵢ·Aᵢ over every input, and
/// Σ inputᵢ·Bᵢ over the inputs in the B density (the first `b_input_density.count()` points of
/// the B sections). At most a few hundred points: always on the CPU, for both backends.
pub(crate) fn input_msms(
    asg: &Assignment,
    srs: &Srs,
    want: Queries,
) -> (G1Projective, G1Projective, G2Projective) {
    let ni = asg.input.len();
    let bi = asg.b_input_density.count();
    let a = if want.contains(Queries::A) {
        msm(srs.a[..ni].par_iter().zip(asg.input.par_iter()))
    } else {
        G1Projective::identity()
    };
    let b1 = if want.contains(Queries::B_G1) {
        msm(dense_pairs(
            &srs.b_g1[..bi],
            &asg.input,
            &asg.b_input_density,
        ))
    } else {
        G1Projective::identity()
    };
    let b2 = if want.contains(Queries::B_G2) {
        msm(dense_pairs(
            &srs.b_g2[..bi],
            &asg.input,
            &asg.b_input_density,
        ))
    } else {
        G2Projective::identity()
    };
    (a, b1, b2)
}

/// The CPU backend (rayon + blst). Always available.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl ProverBackend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn compute(
        &self,
        asg: &mut Assignment,
        srs: &Arc<Srs>,
        ctx: &mut PartitionCtx<'_>,
    ) -> Result<MsmResults> {
        let p = Some(ctx.partition);
        let part = ctx.part;
        let (a, b, c) = (
            std::mem::take(&mut asg.a),
            std::mem::take(&mut asg.b),
            std::mem::take(&mut asg.c),
        );
        let rep = ctx.reporter;
        let tm = &mut *ctx.timings;
        let want = part.queries();
        let mut out = MsmResults::identity();
        if want.contains(Queries::H) {
            let t = Instant::now();
            let h = crate::ntt::compute_h(a, b, c)?;
            rep.report(tm, p, Stage::Ntt, t.elapsed());
            if h.len() != srs.h.len() {
                return Err(Error::ParametersInvalid {
                    path: srs.path.clone(),
                    reason: format!(
                        "H query has {} points, the circuit needs {}",
                        srs.h.len(),
                        h.len()
                    ),
                });
            }
            out.h = rep.time(tm, p, Stage::MsmH, || {
                msm(srs.h.par_iter().zip(h.par_iter()))
            });
        }
        if !part.rest() {
            return Ok(out);
        }
        let ni = asg.input.len();
        if want.contains(Queries::L) {
            out.l = rep.time(tm, p, Stage::MsmL, || {
                msm(srs.l.par_iter().zip(asg.aux.par_iter()))
            });
        }
        let (a_in, b1_in, b2_in) = input_msms(asg, srs, want);
        if want.contains(Queries::A) {
            out.a = rep.time(tm, p, Stage::MsmA, || {
                a_in + msm(dense_pairs(&srs.a[ni..], &asg.aux, &asg.a_aux_density))
            });
        }
        let bi = asg.b_input_density.count();
        if want.contains(Queries::B_G1) {
            out.b_g1 = rep.time(tm, p, Stage::MsmBG1, || {
                b1_in + msm(dense_pairs(&srs.b_g1[bi..], &asg.aux, &asg.b_aux_density))
            });
        }
        if want.contains(Queries::B_G2) {
            out.b_g2 = rep.time(tm, p, Stage::MsmBG2, || {
                b2_in + msm(dense_pairs(&srs.b_g2[bi..], &asg.aux, &asg.b_aux_density))
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::Curve;
    use rand::SeedableRng;

    #[test]
    fn msm_matches_naive_with_zeros_ones_and_repeats() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for n in [0usize, 1, 2, 3, 17, 300] {
            let base = G1Projective::random(&mut rng).to_affine();
            let pts: Vec<G1Affine> = (0..n)
                .map(|i| {
                    if i % 5 == 4 {
                        base
                    } else {
                        G1Projective::random(&mut rng).to_affine()
                    }
                })
                .collect();
            let scs: Vec<Fr> = (0..n)
                .map(|i| match i % 4 {
                    0 => Fr::ZERO,
                    1 => Fr::ONE,
                    2 => -Fr::ONE,
                    _ => Fr::random(&mut rng),
                })
                .collect();
            let naive: G1Projective = pts.iter().zip(&scs).map(|(p, s)| *p * s).sum();
            assert_eq!(msm(pts.par_iter().zip(scs.par_iter())), naive, "n = {n}");
            let pts2: Vec<G2Affine> = (0..n.min(40))
                .map(|_| G2Projective::random(&mut rng).to_affine())
                .collect();
            let naive2: G2Projective = pts2.iter().zip(&scs).map(|(p, s)| *p * s).sum();
            assert_eq!(
                msm(pts2.par_iter().zip(scs.par_iter())),
                naive2,
                "G2 n = {n}"
            );
        }
    }

    #[test]
    fn density_pairs_follow_set_bits() {
        let mut d = Density::default();
        for _ in 0..5 {
            d.push();
        }
        d.set(1);
        d.set(4);
        let pts = [
            G1Projective::generator().to_affine(),
            (G1Projective::generator() * Fr::from(3)).to_affine(),
        ];
        let vals = [
            Fr::from(9),
            Fr::from(2),
            Fr::from(9),
            Fr::from(9),
            Fr::from(5),
        ];
        // 2·G + 5·3G = 17·G
        let got = msm(dense_pairs(&pts, &vals, &d));
        assert_eq!(got, G1Projective::generator() * Fr::from(17));
    }
}
