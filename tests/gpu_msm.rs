//! GPU MSM (src/gpu/kernels/msm.rs, cuda/msm.cu) against blstrs' `multi_exp` (blst's Pippenger) and
//! a naive sum: one generic check `gpu == reference` over sizes n = 0, 1, 2, 3, 2^k +- 1 up to
//! 2^CUZK_TEST_MSM_MAX_LOG (default 22) and scalar kinds (0, 1, r - 1, random, the PoRep mix of
//! zeros and ones, one repeated value), with repeated points and points at infinity; plus the
//! density bitmap, device-resident points, canonical scalars, chunked bucket lists, forced window
//! sizes and out-of-order tickets; streamed passes whose Pippenger parts are gathered into a
//! sink and summed once equal the one MSM.
//!
//! Needs a CUDA device; without one every test prints why and passes.
#![cfg(feature = "cuda")]

mod common;

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk::gpu::driver::device::Device;
use cuzk::gpu::kernels::msm::{
    Accumulation, CanonicalScalar, GatherSink, MsmConfig, MsmGroup, MsmWorkspace, Points, Scalars,
    G1, G2,
};
use cuzk::Error;
use ff::Field;
use group::{Curve, Group};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use common::gpu_device as device;

fn max_log() -> u32 {
    match std::env::var("CUZK_TEST_MSM_MAX_LOG") {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("CUZK_TEST_MSM_MAX_LOG={v:?} is not a number")),
        Err(_) => 22,
    }
}

/// The group-specific parts of the generic check.
trait TestGroup: MsmGroup
where
    Self::Projective: Curve<AffineRepr = Self::Affine> + std::fmt::Debug + PartialEq + Send + Sync,
    Self::Affine: Send + Sync,
{
    fn reference(points: &[Self::Projective], scalars: &[Scalar]) -> Self::Projective;
    fn gpu(
        ws: &mut MsmWorkspace,
        points: Points<'_, Self::Affine>,
        scalars: Scalars<'_>,
        density: Option<&[u64]>,
    ) -> cuzk::Result<Self::Projective>;
}

impl TestGroup for G1 {
    fn reference(points: &[G1Projective], scalars: &[Scalar]) -> G1Projective {
        reference_impl(points, scalars, G1Projective::multi_exp)
    }
    fn gpu(
        ws: &mut MsmWorkspace,
        points: Points<'_, G1Affine>,
        scalars: Scalars<'_>,
        density: Option<&[u64]>,
    ) -> cuzk::Result<G1Projective> {
        ws.msm_g1(points, scalars, density)
    }
}

impl TestGroup for G2 {
    fn reference(points: &[G2Projective], scalars: &[Scalar]) -> G2Projective {
        reference_impl(points, scalars, G2Projective::multi_exp)
    }
    fn gpu(
        ws: &mut MsmWorkspace,
        points: Points<'_, G2Affine>,
        scalars: Scalars<'_>,
        density: Option<&[u64]>,
    ) -> cuzk::Result<G2Projective> {
        ws.msm_g2(points, scalars, density)
    }
}

/// Naive sum for small n, blst's Pippenger otherwise; pairs with an infinity point are left out
/// (they add nothing, and the reference need not handle them).
fn reference_impl<P: Group<Scalar = Scalar>>(
    points: &[P],
    scalars: &[Scalar],
    multi_exp: fn(&[P], &[Scalar]) -> P,
) -> P {
    let (p, s): (Vec<P>, Vec<Scalar>) = points
        .iter()
        .zip(scalars)
        .filter(|(p, _)| !bool::from(p.is_identity()))
        .map(|(p, s)| (*p, *s))
        .unzip();
    if p.len() <= 64 {
        p.iter()
            .zip(&s)
            .fold(P::identity(), |acc, (p, s)| acc + *p * *s)
    } else {
        multi_exp(&p, &s)
    }
}

/// n points: chunks of 4096 walk R + i S from a random R and S (cheap), every 97th point repeats
/// its predecessor and every 1009th is infinity.
fn points<P: Group + Curve + Send + Sync>(n: usize, seed: u64) -> (Vec<P>, Vec<P::AffineRepr>)
where
    P::AffineRepr: Send + Sync + Default + Copy,
{
    let proj: Vec<P> = (0..n.div_ceil(4096))
        .into_par_iter()
        .flat_map_iter(|c| {
            let mut rng =
                ChaCha20Rng::seed_from_u64(seed ^ (c as u64).wrapping_mul(0x9e3779b97f4a7c15));
            let step = P::random(&mut rng);
            let mut cur = P::random(&mut rng);
            let len = 4096.min(n - c * 4096);
            let mut v = Vec::with_capacity(len);
            for i in 0..len {
                let g = c * 4096 + i;
                if g % 1009 == 1008 {
                    v.push(P::identity());
                } else if g % 97 == 96 && i > 0 {
                    v.push(v[i - 1]);
                } else {
                    v.push(cur);
                }
                cur += step;
            }
            v.into_iter()
        })
        .collect();
    let mut aff = vec![P::AffineRepr::default(); n];
    proj.par_chunks(4096)
        .zip(aff.par_chunks_mut(4096))
        .for_each(|(p, a)| P::batch_normalize(p, a));
    (proj, aff)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Random,
    Zero,
    One,
    MinusOne,
    /// The PoRep witness shape: 96.5 % zeros and ones (48 % of them ones), 3.5 % other values.
    PoRep,
    /// Every scalar the same random value (all points in one bucket per window).
    Repeated,
}

fn scalars(n: usize, kind: Kind, seed: u64) -> Vec<Scalar> {
    let rep = Scalar::random(ChaCha20Rng::seed_from_u64(seed ^ 0xabcdef));
    (0..n.div_ceil(4096))
        .into_par_iter()
        .flat_map_iter(|c| {
            let mut rng = ChaCha20Rng::seed_from_u64(seed.wrapping_add(c as u64));
            let len = 4096.min(n - c * 4096);
            (0..len)
                .map(|_| match kind {
                    Kind::Random => Scalar::random(&mut rng),
                    Kind::Zero => Scalar::ZERO,
                    Kind::One => Scalar::ONE,
                    Kind::MinusOne => -Scalar::ONE,
                    Kind::Repeated => rep,
                    Kind::PoRep => {
                        let u: f64 = rng.gen();
                        if u < 0.965 * 0.52 {
                            Scalar::ZERO
                        } else if u < 0.965 {
                            Scalar::ONE
                        } else if u < 0.975 {
                            Scalar::from(rng.gen_range(2u64..1000))
                        } else {
                            Scalar::random(&mut rng)
                        }
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The generic check: the GPU result equals the reference for every (size, kind).
fn check<G: TestGroup>(ws: &mut MsmWorkspace, sizes: &[usize], kinds: &[Kind], seed: u64)
where
    G::Projective: Curve<AffineRepr = G::Affine> + std::fmt::Debug + PartialEq + Send + Sync,
    G::Affine: Send + Sync + Default + Copy,
{
    let max = sizes.iter().copied().max().unwrap_or(0);
    let (proj, aff) = points::<G::Projective>(max, seed);
    for &n in sizes {
        for &kind in kinds {
            let s = scalars(n, kind, seed.wrapping_mul(31).wrapping_add(n as u64));
            let t = std::time::Instant::now();
            let got =
                G::gpu(ws, Points::Host(&aff[..n]), Scalars::Host(&s), None).expect("gpu msm");
            let gpu_ms = t.elapsed().as_secs_f64() * 1e3;
            let want = G::reference(&proj[..n], &s);
            let st = ws.stats().clone();
            println!(
                "{} n={n:>8} {kind:?}: m={} ones={} c={} W={} gpu {gpu_ms:.1} ms (with upload)",
                G::SUFFIX,
                st.m,
                st.ones,
                st.window_bits,
                st.windows
            );
            assert_eq!(got, want, "{} n={n} kind={kind:?}", G::SUFFIX);
        }
    }
}

/// A workspace of `cfg` (a forced path) after the generic G1 check over the sparse sizes up to
/// 2^20 + 1, without 0.
fn check_forced(dev: &Arc<Device>, cfg: &MsmConfig, kinds: &[Kind], seed: u64) -> MsmWorkspace {
    let mut ws = MsmWorkspace::with_config(dev, cfg.clone()).unwrap();
    let sizes: Vec<usize> = sizes_upto(max_log().min(20), false)
        .into_iter()
        .filter(|&n| n > 0)
        .collect();
    check::<G1>(&mut ws, &sizes, kinds, seed);
    ws
}

fn sizes_upto(max_log: u32, dense: bool) -> Vec<usize> {
    let mut v = vec![0usize, 1, 2, 3];
    for k in [4u32, 8, 12, 16, 20, 22] {
        if k > max_log {
            continue;
        }
        let p = 1usize << k;
        if dense || k < 20 {
            v.extend([p - 1, p + 1]);
        } else {
            v.push(if k == 22 { p - 1 } else { p + 1 });
        }
    }
    v
}

#[test]
fn g1_msm_matches_blstrs_random() {
    let Some(dev) = device() else { return };
    let mut ws = MsmWorkspace::new(&dev).unwrap();
    check::<G1>(&mut ws, &sizes_upto(max_log(), false), &[Kind::Random], 11);
}

#[test]
fn g1_msm_matches_blstrs_edge_scalars() {
    let Some(dev) = device() else { return };
    let mut ws = MsmWorkspace::new(&dev).unwrap();
    let sizes: Vec<usize> = [1usize, 2, 3, 257, 4097, 65537, (1 << 20) + 1]
        .into_iter()
        .filter(|&n| n <= 1 << max_log())
        .collect();
    check::<G1>(
        &mut ws,
        &sizes,
        &[Kind::Zero, Kind::One, Kind::MinusOne, Kind::PoRep],
        12,
    );
    let small: Vec<usize> = sizes.into_iter().filter(|&n| n <= 65537).collect();
    check::<G1>(&mut ws, &small, &[Kind::Repeated], 13);
}

#[test]
fn g2_msm_matches_blstrs() {
    let Some(dev) = device() else { return };
    let mut ws = MsmWorkspace::new(&dev).unwrap();
    let mut sizes = vec![0usize, 1, 2, 3, 17, 255, 4097, 65535];
    for k in [20u32, 22] {
        if k <= max_log() {
            sizes.push(if k == 22 { (1 << k) - 1 } else { (1 << k) + 1 });
        }
    }
    check::<G2>(&mut ws, &sizes, &[Kind::Random], 21);
    let small: Vec<usize> = sizes
        .iter()
        .copied()
        .filter(|&n| (1..=65535).contains(&n))
        .collect();
    check::<G2>(
        &mut ws,
        &small,
        &[
            Kind::Zero,
            Kind::One,
            Kind::MinusOne,
            Kind::PoRep,
            Kind::Repeated,
        ],
        22,
    );
}

/// P × `np`, −P × `nn`, Q × `nq` and three points at infinity (P, Q random from `rng`),
/// projective and affine: under one scalar every window puts them in one bucket, whose chains
/// meet P + P, P + (−P) and (−P) + P.
fn exceptional_points<P>(
    rng: &mut ChaCha20Rng,
    np: usize,
    nn: usize,
    nq: usize,
) -> (Vec<P>, Vec<P::AffineRepr>)
where
    P: Curve,
    P::AffineRepr: Default + Copy,
{
    let (p, q) = (P::random(&mut *rng), P::random(&mut *rng));
    let mut proj = vec![p; np];
    proj.extend(vec![-p; nn]);
    proj.extend(vec![q; nq]);
    proj.extend(vec![P::identity(); 3]);
    let mut aff = vec![P::AffineRepr::default(); proj.len()];
    P::batch_normalize(&proj, &mut aff);
    (proj, aff)
}

/// A density bitmap over `n` scalars (`n.div_ceil(64)` words), each bit set with probability
/// `p`, and the indices of its set bits.
fn density_bits(n: usize, p: f64, rng: &mut ChaCha20Rng) -> (Vec<u64>, Vec<usize>) {
    let mut bits = vec![0u64; n.div_ceil(64)];
    let mut used = Vec::new();
    for j in 0..n {
        if rng.gen_bool(p) {
            bits[j / 64] |= 1 << (j % 64);
            used.push(j);
        }
    }
    (bits, used)
}

/// Density bitmap: scalar j is used iff bit j is set; the i-th set bit pairs with point i.
fn check_density<G: TestGroup>(dev: &Arc<Device>, n: usize, seed: u64)
where
    G::Projective: Curve<AffineRepr = G::Affine> + std::fmt::Debug + PartialEq + Send + Sync,
    G::Affine: Send + Sync + Default + Copy,
{
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (mut bits, used) = density_bits(n, 0.265, &mut rng);
    // bits past n must be ignored
    bits.push(u64::MAX);
    let (proj, aff) = points::<G::Projective>(used.len(), seed);
    for kind in [Kind::PoRep, Kind::Random] {
        let s = scalars(n, kind, seed + 1);
        let sel: Vec<Scalar> = used.iter().map(|&j| s[j]).collect();
        let want = G::reference(&proj, &sel);
        let mut ws = MsmWorkspace::new(dev).unwrap();
        let got = G::gpu(&mut ws, Points::Host(&aff), Scalars::Host(&s), Some(&bits))
            .expect("gpu msm with density");
        assert_eq!(got, want, "{} density n={n} {kind:?}", G::SUFFIX);
        // too few points for the set bits
        if !aff.is_empty() {
            let e = G::gpu(
                &mut ws,
                Points::Host(&aff[..aff.len() - 1]),
                Scalars::Host(&s),
                Some(&bits),
            );
            assert!(matches!(e, Err(Error::InvalidInput(_))), "{e:?}");
        }
    }
}

#[test]
fn density_bitmap_selects_scalars() {
    let Some(dev) = device() else { return };
    for n in [1usize, 63, 64, 65, 1000, 100_003] {
        check_density::<G1>(&dev, n, n as u64);
    }
    for n in [65usize, 20_001] {
        check_density::<G2>(&dev, n, n as u64 + 7);
    }
}

#[test]
fn resident_points_canonical_scalars_and_tickets() {
    let Some(dev) = device() else { return };
    let n = 50_000;
    let (proj, aff) = points::<G1Projective>(n, 5);
    let resident = dev.upload(&aff).unwrap();
    let mut ws = MsmWorkspace::new(&dev).unwrap();
    let sets: Vec<Vec<Scalar>> = (0..3)
        .map(|i| {
            scalars(
                n - i * 1000,
                if i == 1 { Kind::PoRep } else { Kind::Random },
                40 + i as u64,
            )
        })
        .collect();
    let want: Vec<G1Projective> = sets
        .iter()
        .map(|s| G1::reference(&proj[..s.len()], s))
        .collect();
    // three MSMs in flight over two result slots, finished out of order
    let t0 = ws
        .start::<G1>(
            Points::Device(resident.as_slice()),
            Scalars::Host(&sets[0]),
            None,
        )
        .unwrap();
    let t1 = ws
        .start::<G1>(
            Points::Device(resident.as_slice()),
            Scalars::Host(&sets[1]),
            None,
        )
        .unwrap();
    let t2 = ws
        .start::<G1>(
            Points::Device(resident.as_slice()),
            Scalars::Host(&sets[2]),
            None,
        )
        .unwrap();
    assert_eq!(ws.finish::<G1>(t2).unwrap(), want[2]);
    assert_eq!(ws.finish::<G1>(t0).unwrap(), want[0]);
    assert_eq!(ws.finish::<G1>(t1).unwrap(), want[1]);
    // device-resident scalars, Montgomery and canonical (with values >= r, reduced on the device)
    let d_s = dev.upload(&sets[0]).unwrap();
    assert_eq!(
        ws.msm_g1(
            Points::Device(resident.as_slice()),
            Scalars::Device(d_s.as_slice()),
            None
        )
        .unwrap(),
        want[0]
    );
    let r_minus_1 = CanonicalScalar::from_scalar(&-Scalar::ONE).0;
    let canon: Vec<CanonicalScalar> = sets[0]
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut c = CanonicalScalar::from_scalar(s);
            if i % 3 == 0 {
                // c + r if it fits in 256 bits (r = (r - 1) + 1)
                let mut carry = 1u128;
                let mut out = [0u64; 4];
                for k in 0..4 {
                    let t = c.0[k] as u128 + r_minus_1[k] as u128 + carry;
                    out[k] = t as u64;
                    carry = t >> 64;
                }
                if carry == 0 {
                    c.0 = out;
                }
            }
            c
        })
        .collect();
    assert_eq!(
        ws.msm_g1(
            Points::Device(resident.as_slice()),
            Scalars::HostCanonical(&canon),
            None
        )
        .unwrap(),
        want[0]
    );
    let d_c = dev.upload(&canon).unwrap();
    assert_eq!(
        ws.msm_g1(
            Points::Device(resident.as_slice()),
            Scalars::DeviceCanonical(d_c.as_slice()),
            None
        )
        .unwrap(),
        want[0]
    );
    // a ticket of G1 cannot be finished as G2
    let t = ws
        .start::<G1>(
            Points::Device(resident.as_slice()),
            Scalars::Host(&sets[0][..10]),
            None,
        )
        .unwrap();
    assert!(ws.finish::<G2>(t).is_err());
    // fewer points than scalars
    let e = ws.msm_g1(
        Points::Host(&aff[..10]),
        Scalars::Host(&sets[0][..11]),
        None,
    );
    assert!(matches!(e, Err(Error::InvalidInput(_))), "{e:?}");
}

#[test]
fn forced_windows_and_chunked_lists() {
    let Some(dev) = device() else { return };
    let n = 30_001;
    let (proj, aff) = points::<G1Projective>(n, 9);
    let s = scalars(n, Kind::Random, 99);
    let want = G1::reference(&proj, &s);
    for (c, cap) in [
        (2u32, 1u64 << 30),
        (5, 10_000),
        (13, 100_000),
        (16, 1 << 30),
        (20, 100_000),
    ] {
        let cfg = MsmConfig {
            window_bits: Some(c),
            max_list_entries: cap,
            ..MsmConfig::default()
        };
        let mut ws = MsmWorkspace::with_config(&dev, cfg).unwrap();
        let got = ws
            .msm_g1(Points::Host(&aff), Scalars::Host(&s), None)
            .unwrap();
        println!("c={c} cap={cap}: chunks={}", ws.stats().chunks);
        assert_eq!(got, want, "c={c} cap={cap}");
    }
    let (proj2, aff2) = points::<G2Projective>(3001, 10);
    let s2 = scalars(3001, Kind::Random, 98);
    let want2 = G2::reference(&proj2, &s2);
    let cfg = MsmConfig {
        window_bits: Some(7),
        max_list_entries: 5000,
        ..MsmConfig::default()
    };
    let mut ws = MsmWorkspace::with_config(&dev, cfg).unwrap();
    assert_eq!(
        ws.msm_g2(Points::Host(&aff2), Scalars::Host(&s2), None)
            .unwrap(),
        want2
    );
    assert!(MsmWorkspace::with_config(
        &dev,
        MsmConfig {
            window_bits: Some(1),
            ..MsmConfig::default()
        }
    )
    .is_err());
    // every occupancy variant of the accumulation kernel gives the same result
    for mb in G1::MIN_BLOCKS {
        let cfg = MsmConfig {
            accumulate_min_blocks: Some(*mb),
            ..MsmConfig::default()
        };
        let mut ws = MsmWorkspace::with_config(&dev, cfg).unwrap();
        assert_eq!(
            ws.msm_g1(Points::Host(&aff), Scalars::Host(&s), None)
                .unwrap(),
            want,
            "G1 mb={mb}"
        );
    }
    for mb in G2::MIN_BLOCKS {
        let cfg = MsmConfig {
            accumulate_min_blocks: Some(*mb),
            ..MsmConfig::default()
        };
        let mut ws = MsmWorkspace::with_config(&dev, cfg).unwrap();
        assert_eq!(
            ws.msm_g2(Points::Host(&aff2), Scalars::Host(&s2), None)
                .unwrap(),
            want2,
            "G2 mb={mb}"
        );
    }
    let mut ws = MsmWorkspace::with_config(
        &dev,
        MsmConfig {
            accumulate_min_blocks: Some(7),
            ..MsmConfig::default()
        },
    )
    .unwrap();
    assert!(matches!(
        ws.msm_g1(Points::Host(&aff), Scalars::Host(&s), None),
        Err(Error::InvalidConfig { .. })
    ));
}

/// The batch-affine accumulation (cuda/msm_affine.cuh), forced onto small lists
/// (`affine_min_list: Some(0)`): random and edge scalars over points with repeats and infinities,
/// one point and its negation under one scalar (doublings and cancellations inside a chain),
/// chunked lists (buckets added to, not stored), a density bitmap, and the XYZZ setting.
#[test]
fn batch_affine_accumulation_matches_blstrs() {
    let Some(dev) = device() else { return };
    let cfg = MsmConfig {
        affine_min_list: Some(0),
        ..MsmConfig::default()
    };
    let mut ws = check_forced(&dev, &cfg, &[Kind::Random, Kind::PoRep, Kind::MinusOne], 21);
    let a = ws.stats().affine.expect("the batch-affine kernel ran");
    // the largest size: several threads of 32 chains (layout::AFFINE_MIN_CHAINS) each
    assert!(a.chains_per_thread >= 32 && a.threads > 1, "{a:?}");
    check::<G1>(&mut ws, &[1, 3, 4097, 65537], &[Kind::Repeated], 22);

    // P x 600, -P x 400, Q x 50, infinity x 3, all under one scalar: every window's digit puts
    // them in one bucket, whose chains meet P + P, P + (-P) and (-P) + P.
    let mut rng = ChaCha20Rng::seed_from_u64(23);
    let (proj, aff) = exceptional_points::<G1Projective>(&mut rng, 600, 400, 50);
    for c in [None, Some(3)] {
        let s = vec![Scalar::random(&mut rng); proj.len()];
        let want = G1::reference(&proj, &s);
        let cfg_c = MsmConfig {
            window_bits: c,
            ..cfg.clone()
        };
        let (got, _) = affine_msm::<G1>(&dev, cfg_c, &aff, &s, None);
        assert_eq!(got, want, "P / -P / Q, window {c:?}");
    }

    // chunked lists: later chunks add into the buckets
    let n = 30_001;
    let (proj, aff) = points::<G1Projective>(n, 24);
    let s = scalars(n, Kind::Random, 25);
    let want = G1::reference(&proj, &s);
    for (c, cap) in [(13u32, 100_000u64), (20, 100_000), (16, 1 << 30)] {
        let cfg_c = MsmConfig {
            window_bits: Some(c),
            max_list_entries: cap,
            ..cfg.clone()
        };
        let (got, st) = affine_msm::<G1>(&dev, cfg_c, &aff, &s, None);
        assert_eq!(got, want, "c={c} cap={cap} chunks={}", st.chunks);
    }
    // every occupancy variant, and other batch sizes (1: no batching; 7: chains of odd count;
    // 31: just below the floor of 32)
    for (mb, ch) in [(3u32, 32u32), (4, 32), (5, 1), (5, 7), (5, 31)] {
        let cfg_c = MsmConfig {
            affine_min_blocks: Some(mb),
            affine_chains_per_thread: ch,
            ..cfg.clone()
        };
        let (got, st) = affine_msm::<G1>(&dev, cfg_c, &aff, &s, None);
        let a = st.affine.expect("batch-affine");
        assert_eq!((st.min_blocks, a.chains_per_thread), (mb, ch));
        assert_eq!(got, want, "mb={mb} CH={ch}");
    }
    let mut ws = MsmWorkspace::with_config(
        &dev,
        MsmConfig {
            affine_chains_per_thread: 0,
            ..cfg.clone()
        },
    )
    .unwrap();
    assert!(matches!(
        ws.msm_g1(Points::Host(&aff), Scalars::Host(&s), None),
        Err(Error::InvalidConfig { .. })
    ));
    // the XYZZ setting runs the XYZZ kernel on the same input
    let mut ws = MsmWorkspace::with_config(
        &dev,
        MsmConfig {
            accumulation: cuzk::gpu::kernels::msm::Accumulation::Xyzz,
            ..cfg.clone()
        },
    )
    .unwrap();
    assert_eq!(
        ws.msm_g1(Points::Host(&aff), Scalars::Host(&s), None)
            .unwrap(),
        want
    );
    assert_eq!(ws.stats().affine, None);

    // density bitmap (the L / A / B_G1 shape)
    let (bits, used) = density_bits(n, 0.4, &mut rng);
    let (proj, aff) = points::<G1Projective>(used.len(), 26);
    let s = scalars(n, Kind::PoRep, 27);
    let sel: Vec<Scalar> = used.iter().map(|&j| s[j]).collect();
    let want = G1::reference(&proj, &sel);
    let (got, _) = affine_msm::<G1>(&dev, cfg, &aff, &s, Some(&bits));
    assert_eq!(got, want, "density");
}

/// The batch-affine accumulation of G2 (Fp2 chains, the block's inversion through the norm),
/// forced onto small lists: random, edge and repeated scalars, one point and its negation under
/// one scalar (doublings and cancellations inside a chain), chunked lists, both occupancy
/// variants and odd chain counts, a density bitmap; a variant G2 lacks is a config error.
#[test]
fn g2_batch_affine_accumulation_matches_blstrs() {
    let Some(dev) = device() else { return };
    let cfg = MsmConfig {
        affine_min_list: Some(0),
        ..MsmConfig::default()
    };
    let mut ws = MsmWorkspace::with_config(&dev, cfg.clone()).unwrap();
    let mut sizes = vec![1usize, 2, 3, 17, 255, 4097, 65535];
    if max_log() >= 20 {
        sizes.push((1 << 20) + 1);
    }
    check::<G2>(&mut ws, &sizes, &[Kind::Random], 41);
    let a = ws.stats().affine.expect("the G2 batch-affine kernel ran");
    assert!(a.threads > 1, "{a:?}");
    assert_eq!(ws.stats().min_blocks, 2);
    check::<G2>(
        &mut ws,
        &[1, 3, 4097, 65535],
        &[Kind::MinusOne, Kind::PoRep, Kind::Repeated],
        42,
    );

    let mut rng = ChaCha20Rng::seed_from_u64(43);
    let (proj, aff) = exceptional_points::<G2Projective>(&mut rng, 300, 200, 25);
    for c in [None, Some(3)] {
        let s = vec![Scalar::random(&mut rng); proj.len()];
        let cfg_c = MsmConfig {
            window_bits: c,
            ..cfg.clone()
        };
        let (got, _) = affine_msm::<G2>(&dev, cfg_c, &aff, &s, None);
        assert_eq!(got, G2::reference(&proj, &s), "P / -P / Q, window {c:?}");
    }

    let n = 20_001;
    let (proj, aff) = points::<G2Projective>(n, 44);
    let s = scalars(n, Kind::Random, 45);
    let want = G2::reference(&proj, &s);
    for (c, cap) in [(13u32, 60_000u64), (16, 1 << 30)] {
        let cfg_c = MsmConfig {
            window_bits: Some(c),
            max_list_entries: cap,
            ..cfg.clone()
        };
        let (got, st) = affine_msm::<G2>(&dev, cfg_c, &aff, &s, None);
        assert_eq!(got, want, "c={c} cap={cap} chunks={}", st.chunks);
    }
    for (mb, ch) in [(2u32, 32u32), (3, 32), (3, 1), (2, 7)] {
        let cfg_c = MsmConfig {
            affine_min_blocks: Some(mb),
            affine_chains_per_thread: ch,
            ..cfg.clone()
        };
        let (got, st) = affine_msm::<G2>(&dev, cfg_c, &aff, &s, None);
        assert_eq!(
            (st.min_blocks, st.affine.unwrap().chains_per_thread),
            (mb, ch)
        );
        assert_eq!(got, want, "mb={mb} CH={ch}");
    }
    let mut bad = MsmWorkspace::with_config(
        &dev,
        MsmConfig {
            affine_min_blocks: Some(4),
            ..cfg.clone()
        },
    )
    .unwrap();
    assert!(matches!(
        bad.msm_g2(Points::Host(&aff), Scalars::Host(&s), None),
        Err(Error::InvalidConfig { .. })
    ));

    let (bits, used) = density_bits(n, 0.3, &mut rng);
    let (proj, aff) = points::<G2Projective>(used.len(), 46);
    let s = scalars(n, Kind::PoRep, 47);
    let sel: Vec<Scalar> = used.iter().map(|&j| s[j]).collect();
    let want = G2::reference(&proj, &sel);
    let (got, _) = affine_msm::<G2>(&dev, cfg, &aff, &s, Some(&bits));
    assert_eq!(got, want, "density");
}

/// One MSM of group `G` on a new workspace of `cfg`, and what the workspace did.
fn one_msm<G: MsmGroup>(
    dev: &Arc<Device>,
    cfg: MsmConfig,
    aff: &[G::Affine],
    s: &[Scalar],
    density: Option<&[u64]>,
) -> (G::Projective, cuzk::gpu::kernels::msm::MsmStats) {
    let mut ws = MsmWorkspace::with_config(dev, cfg).unwrap();
    let got = ws
        .msm::<G>(Points::Host(aff), Scalars::Host(s), density)
        .unwrap();
    (got, ws.stats().clone())
}

/// [`one_msm`]; asserts that the batch-affine kernel ran.
fn affine_msm<G: MsmGroup>(
    dev: &Arc<Device>,
    cfg: MsmConfig,
    aff: &[G::Affine],
    s: &[Scalar],
    density: Option<&[u64]>,
) -> (G::Projective, cuzk::gpu::kernels::msm::MsmStats) {
    let (got, st) = one_msm::<G>(dev, cfg, aff, s, density);
    assert!(
        st.affine.is_some(),
        "the {} batch-affine kernel did not run: {st:?}",
        G::SUFFIX
    );
    (got, st)
}

/// The two-pass scatter (cuda/msm.cuh 2': by coarse bin into a staging buffer, then by key),
/// forced onto every list (`two_pass_min_list: 0`): G1 and G2, random, edge and PoRep scalars,
/// every window from 2 bits (128 windows: groups of 3 and a last one of 2; no bits below the
/// coarse bin) to 21 (6 bits below it), chunked lists, a density bitmap, and both
/// accumulations, 1 / 5 / all windows per group. The one-pass setting (`u64::MAX`) runs the old
/// scatter on the same input.
#[test]
fn two_pass_scatter_matches_blstrs() {
    let Some(dev) = device() else { return };
    let cfg = MsmConfig {
        two_pass_min_list: 0,
        ..MsmConfig::default()
    };
    let mut ws = check_forced(
        &dev,
        &cfg,
        &[Kind::Random, Kind::PoRep, Kind::MinusOne, Kind::Repeated],
        31,
    );
    assert!(ws.stats().two_pass.is_some(), "{:?}", ws.stats());
    check::<G2>(&mut ws, &[1, 4097, 65537], &[Kind::Random, Kind::PoRep], 32);
    assert!(ws.stats().two_pass.is_some(), "{:?}", ws.stats());

    let n = 30_001;
    let (proj, aff) = points::<G1Projective>(n, 33);
    let s = scalars(n, Kind::Random, 34);
    let want = G1::reference(&proj, &s);
    // (window, list cap, accumulation, bits below the coarse bin: c - 1 - min(c - 1, 14))
    for (c, cap, acc, lb) in [
        (2u32, 1u64 << 30, Accumulation::Xyzz, 0u32),
        (3, 1 << 30, Accumulation::Xyzz, 0),
        (7, 100_000, Accumulation::Xyzz, 0),
        (11, 1 << 30, Accumulation::BatchAffine, 0),
        (16, 100_000, Accumulation::BatchAffine, 1),
        (20, 100_000, Accumulation::Xyzz, 5),
        (21, 1 << 30, Accumulation::BatchAffine, 6),
    ] {
        let cfg_c = MsmConfig {
            window_bits: Some(c),
            max_list_entries: cap,
            accumulation: acc,
            affine_min_list: Some(0),
            ..cfg.clone()
        };
        let (got, st, t) = two_pass_msm(&dev, cfg_c, &aff, &s, None);
        assert_eq!(t.lb, lb, "c={c}");
        assert_eq!(t.coarse_bins, t.group_windows << (c - 1 - t.lb), "c={c}");
        assert_eq!(got, want, "c={c} cap={cap} {acc:?} chunks={}", st.chunks);
    }
    // one window per group, five, all of them
    for gw in [1u32, 5, 99] {
        let cfg_g = MsmConfig {
            two_pass_group_windows: gw,
            ..cfg.clone()
        };
        let (got, st, t) = two_pass_msm(&dev, cfg_g, &aff, &s, None);
        assert_eq!(t.group_windows, gw.min(st.windows));
        assert_eq!(got, want, "{gw} windows per group");
    }
    for n in [1000usize, 100_003] {
        let mut rng = ChaCha20Rng::seed_from_u64(n as u64);
        let (bits, used) = density_bits(n, 0.4, &mut rng);
        let (proj, aff) = points::<G1Projective>(used.len(), n as u64 + 1);
        let s = scalars(n, Kind::Random, n as u64 + 2);
        let sel: Vec<Scalar> = used.iter().map(|&j| s[j]).collect();
        let want = G1::reference(&proj, &sel);
        let (got, _, _) = two_pass_msm(&dev, cfg.clone(), &aff, &s, Some(&bits));
        assert_eq!(got, want, "density n={n}");
    }
    // the one-pass setting and the default on the same list (the default takes two passes from
    // layout::TWO_PASS_MIN_LIST entries)
    let n = (1usize << max_log().min(20)) + 1;
    let (proj, aff) = points::<G1Projective>(n, 35);
    let s = scalars(n, Kind::Random, 36);
    let want = G1::reference(&proj, &s);
    for (min_list, two) in [
        (u64::MAX, false),
        (MsmConfig::default().two_pass_min_list, true),
    ] {
        let cfg_m = MsmConfig {
            two_pass_min_list: min_list,
            ..MsmConfig::default()
        };
        let (got, st) = one_msm::<G1>(&dev, cfg_m, &aff, &s, None);
        let long = st.m as u64 * st.windows as u64 >= MsmConfig::default().two_pass_min_list;
        assert_eq!(st.two_pass.is_some(), two && long, "{st:?}");
        assert_eq!(got, want, "two_pass_min_list={min_list}");
    }
}

/// [`one_msm`]; asserts that the two-pass scatter ran.
fn two_pass_msm(
    dev: &Arc<Device>,
    cfg: MsmConfig,
    aff: &[G1Affine],
    s: &[Scalar],
    density: Option<&[u64]>,
) -> (
    G1Projective,
    cuzk::gpu::kernels::msm::MsmStats,
    cuzk::gpu::kernels::msm::TwoPass,
) {
    let (got, st) = one_msm::<G1>(dev, cfg, aff, s, density);
    let t = st.two_pass.expect("two-pass scatter");
    (got, st, t)
}

/// Passes of `pass` scalars (a multiple of 64) over the PoRep mix, their points on the device,
/// each pass run with `ws.msm_gathering` into one sink of `capacity` entries, then
/// `sink.drain`: Σ of the pass results and the drain equals the whole MSM, with and without a
/// density bitmap. Returns (passes gathered, passes that ran their own Pippenger part).
fn gathered_passes<G: TestGroup>(
    dev: &Arc<Device>,
    n: usize,
    pass: usize,
    capacity: usize,
    dense: bool,
    seed: u64,
) -> (usize, usize)
where
    G::Projective: Curve<AffineRepr = G::Affine> + std::fmt::Debug + PartialEq + Send + Sync,
    G::Affine: Send + Sync + Default + Copy,
{
    assert_eq!(pass % 64, 0);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (bits, used) = if dense {
        (Vec::new(), (0..n).collect::<Vec<_>>())
    } else {
        density_bits(n, 0.6, &mut rng)
    };
    let (proj, aff) = points::<G::Projective>(used.len(), seed);
    let s = scalars(n, Kind::PoRep, seed + 1);
    let sel: Vec<Scalar> = used.iter().map(|&j| s[j]).collect();
    let want = G::reference(&proj, &sel);
    let resident = dev.upload(&aff).unwrap();
    let ds = dev.upload(&s).unwrap();
    let mut ws = MsmWorkspace::new(dev).unwrap();
    let mut sink = GatherSink::<G>::new(dev, None, capacity).unwrap();
    assert_eq!(sink.capacity(), capacity.max(1));
    let (mut gathered, mut own) = (0, 0);
    // Twice over the same sink: a drained sink gathers again (the prover's L, A, B_G1).
    for round in 0..2 {
        let mut got = G::Projective::identity();
        let mut p0 = 0usize; // the pass's first point
        for a in (0..n).step_by(pass) {
            let e = (a + pass).min(n);
            let words = (!dense).then(|| &bits[a / 64..e.div_ceil(64)]);
            let np = if dense {
                e - a
            } else {
                used.iter().filter(|&&j| j >= a && j < e).count()
            };
            let before = sink.len();
            got += ws
                .msm_gathering::<G>(
                    Points::Device(resident.slice(p0..p0 + np).unwrap()),
                    Scalars::Device(ds.slice(a..e).unwrap()),
                    words,
                    &mut sink,
                )
                .unwrap();
            let st = ws.stats().clone();
            if st.gathered > 0 {
                assert_eq!((st.m, sink.len()), (0, before + st.gathered), "pass at {a}");
                gathered += 1;
            } else if st.m > 0 {
                own += 1;
            }
            p0 += np;
        }
        assert!(!sink.is_empty() || gathered == 0);
        got += sink.drain(&mut ws).unwrap();
        assert!(sink.is_empty());
        assert_eq!(
            got,
            want,
            "{} n={n} pass={pass} capacity={capacity} dense={dense} round {round}",
            G::SUFFIX
        );
        // an empty sink drains to the identity
        assert_eq!(sink.drain(&mut ws).unwrap(), G::Projective::identity());
    }
    (gathered / 2, own / 2)
}

#[test]
fn gathered_passes_equal_one_msm() {
    let Some(dev) = device() else { return };
    // Room for every pass: all gathered, one Pippenger run at the end.
    let (g, o) = gathered_passes::<G1>(&dev, 200_003, 1 << 15, 200_003, true, 1);
    assert!(g >= 6 && o == 0, "{g} gathered, {o} own");
    let (g, o) = gathered_passes::<G1>(&dev, 100_001, 1 << 14, 100_001, false, 2);
    assert!(g >= 6 && o == 0, "{g} gathered, {o} own");
    let (g, o) = gathered_passes::<G2>(&dev, 40_001, 1 << 13, 40_001, false, 3);
    assert!(g >= 4 && o == 0, "{g} gathered, {o} own");
    // Room for about two passes' parts (~3.5 % of a pass each): the rest run their own.
    let (g, o) = gathered_passes::<G1>(&dev, 200_003, 1 << 15, 2400, true, 4);
    assert!(g >= 1 && o >= 1, "{g} gathered, {o} own");
    let (g, o) = gathered_passes::<G2>(&dev, 40_001, 1 << 13, 600, false, 5);
    assert!(g >= 1 && o >= 1, "{g} gathered, {o} own");
}
