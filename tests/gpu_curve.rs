//! GPU point arithmetic (cuda/curve.cuh) against blstrs: addition, doubling and mixed addition in
//! G1 and G2, including the exceptional cases (infinity, P + P, P + (-P)).
//!
//! Needs a CUDA device; without one every test prints why and passes.
#![cfg(feature = "cuda")]

mod common;

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use cuzk::gpu::driver::device::Device;
use cuzk::gpu::kernels::msm::{curve_op, CurveOp, MsmGroup, G1, G2};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use common::gpu_device as device;

/// Inputs `a`, `b` as affine points, then the same as projective points.
type Cases<P> = (
    Vec<<P as Curve>::AffineRepr>,
    Vec<<P as Curve>::AffineRepr>,
    Vec<P>,
    Vec<P>,
);

/// What an operation should give, computed with blstrs.
type Expected<P> = Box<dyn Fn(P, P) -> P>;

/// The pairs every operation is checked on: random, equal, opposite, and with infinity.
fn cases<P: Group + Curve>(rng: &mut ChaCha20Rng, random: usize) -> Cases<P> {
    let mut a = Vec::new();
    let mut b = Vec::new();
    for _ in 0..random {
        a.push(P::random(&mut *rng));
        b.push(P::random(&mut *rng));
    }
    let p = P::random(&mut *rng);
    let q = P::random(&mut *rng);
    for (x, y) in [
        (p, p),
        (p, -p),
        (P::identity(), q),
        (p, P::identity()),
        (P::identity(), P::identity()),
        (p.double(), p),
        (p, p.double()),
    ] {
        a.push(x);
        b.push(y);
    }
    let aa: Vec<P::AffineRepr> = a.iter().map(|x| x.to_affine()).collect();
    let ba: Vec<P::AffineRepr> = b.iter().map(|x| x.to_affine()).collect();
    (aa, ba, a, b)
}

fn check_group<G: MsmGroup>(
    dev: &Arc<Device>,
    a: &[G::Affine],
    b: &[G::Affine],
    pa: &[G::Projective],
    pb: &[G::Projective],
) where
    G::Projective: std::fmt::Debug + PartialEq,
{
    let expect: [(CurveOp, Expected<G::Projective>); 5] = [
        (CurveOp::Add, Box::new(|x, y| x + y)),
        (CurveOp::Double, Box::new(|x, _| x.double())),
        (CurveOp::MixedAdd, Box::new(|x, y| x + y)),
        (CurveOp::MixedSub, Box::new(|x, y| x - y)),
        (CurveOp::MixedDouble, Box::new(|x, _| x + x)),
    ];
    for (op, f) in expect.iter() {
        let got = curve_op::<G>(dev, *op, a, b).expect("curve_op");
        assert_eq!(got.len(), a.len());
        for i in 0..a.len() {
            assert_eq!(got[i], f(pa[i], pb[i]), "{} {op:?} case {i}", G::SUFFIX);
        }
    }
}

#[test]
fn g1_point_ops_match_blstrs() {
    let Some(dev) = device() else { return };
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let (a, b, pa, pb) = cases::<G1Projective>(&mut rng, 64);
    let a: Vec<G1Affine> = a;
    let b: Vec<G1Affine> = b;
    check_group::<G1>(&dev, &a, &b, &pa, &pb);
}

#[test]
fn g2_point_ops_match_blstrs() {
    let Some(dev) = device() else { return };
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let (a, b, pa, pb) = cases::<G2Projective>(&mut rng, 32);
    let a: Vec<G2Affine> = a;
    let b: Vec<G2Affine> = b;
    check_group::<G2>(&dev, &a, &b, &pa, &pb);
}

#[test]
fn infinity_is_all_zero_in_blst_layout() {
    // The device code relies on blst's encoding of the affine point at infinity: x = y = 0
    // (Montgomery zero is the all-zero word pattern).
    let g1 = G1Affine::identity();
    assert!(bool::from(g1.x().is_zero() & g1.y().is_zero()));
    let g2 = G2Affine::identity();
    assert!(bool::from(g2.x().is_zero() & g2.y().is_zero()));
}
