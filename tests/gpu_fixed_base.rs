//! GPU fixed-base multiplication (cuda/fixed_base.cu) against blstrs: s·G in G1 and G2 for
//! random scalars and the edge cases 0, 1, 2, r − 1, digits at the window borders, and more
//! scalars than one launch chunk. `CUZK_FIXED_BASE_N` sets the number of random scalars
//! (default 5,000).
//!
//! Needs a CUDA device; without one the test prints why and passes, unless `CUZK_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk::gpu::kernels::fixed_base::FixedBase;
use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

fn scalars(rng: &mut ChaCha20Rng) -> Vec<Scalar> {
    let n = std::env::var("CUZK_FIXED_BASE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000usize);
    let mut s = vec![
        Scalar::ZERO,
        Scalar::ONE,
        Scalar::from(2u64),
        -Scalar::ONE,
        -Scalar::from(2u64),
        Scalar::from(0xffffu64),
        Scalar::from(0x1_0000u64),
        Scalar::from(u64::MAX),
        Scalar::from(2u64).pow_vartime([254u64]),
        Scalar::ROOT_OF_UNITY,
    ];
    s.extend((0..n).map(|_| Scalar::random(&mut *rng)));
    s
}

#[test]
fn fixed_base_equals_blstrs() {
    let Some(dev) = common::gpu_device() else {
        return;
    };
    let mut rng = ChaCha20Rng::from_seed([17; 32]);
    let g1 = G1Projective::random(&mut rng);
    let g2 = G2Projective::random(&mut rng);
    let fb = FixedBase::new(&dev, &g1, &g2).expect("tables");
    let s = scalars(&mut rng);

    let mut o1 = vec![G1Affine::identity(); s.len()];
    fb.g1(&s, &mut o1).expect("g1");
    let mut o2 = vec![G2Affine::identity(); s.len()];
    fb.g2(&s, &mut o2).expect("g2");
    s.par_iter().enumerate().for_each(|(i, x)| {
        assert_eq!(o1[i], (g1 * x).to_affine(), "G1, scalar {i}");
        assert_eq!(o2[i], (g2 * x).to_affine(), "G2, scalar {i}");
    });
    assert!(bool::from(o1[0].is_identity()) && bool::from(o2[0].is_identity()));
    assert_eq!(o1[1], g1.to_affine());
    assert_eq!(o1[3], (-g1).to_affine());

    // Several launch chunks (the last one partial), G1 only: compared on a sample.
    let n = cuzk::gpu::kernels::fixed_base::CHUNK + 1000;
    let big: Vec<Scalar> = (0..n as u64).map(|i| Scalar::from(i * 7919 + 3)).collect();
    let mut ob = vec![G1Affine::identity(); n];
    fb.g1(&big, &mut ob).expect("g1 chunks");
    for i in (0..n).step_by(n / 97).chain([n - 1, n - 1000, n - 1001]) {
        assert_eq!(ob[i], (g1 * big[i]).to_affine(), "chunked G1, scalar {i}");
    }

    // Mismatched lengths are an error, empty input is fine.
    assert!(fb.g1(&s[..2], &mut o1[..3]).is_err());
    fb.g1(&[], &mut []).expect("empty");
}
