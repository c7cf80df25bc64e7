//! Field arithmetic of `cuda/field.cuh` (Fr, Fp, Fp2) against blstrs, through the single-op
//! kernels of `cuda/test_kernels.cu`, on random values and edge values (0, 1, p-1, 2, 1/2 …).
//! Skips (with a message) when no CUDA device is usable.
#![cfg(feature = "cuda")]

mod common;

use std::sync::Arc;

use blstrs::{Fp, Fp2, Scalar};
use cuzk::gpu::driver::device::{Device, DeviceRepr};
use cuzk::gpu::testing::{self, TestField};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

const ADD: i32 = 0;
const SUB: i32 = 1;
const MUL: i32 = 2;
const SQR: i32 = 3;
const NEG: i32 = 4;
const INV: i32 = 5;
const TO_MONT: i32 = 6;
const FROM_MONT: i32 = 7;
const EQ: i32 = 8;
const DBL: i32 = 9;
const IS_ZERO: i32 = 10;
/// a*b + (a+b)*b by one lazy-reduction `mul_add` (every field).
const MUL_ADD: i32 = 14;
/// a*a + a*b + b*b + (a+b)*(a+b) by one `mul_sum<4>` (Fp; Fr's bound allows two products).
const MUL_SUM4: i32 = 15;
/// The binary extended Euclidean inversion (`inverse_vartime`, every field).
const INV_VARTIME: i32 = 16;
/// Fp2 Karatsuba product (the form before the lazy-reduction `mul`).
const FP2_KARATSUBA: i32 = 11;
/// The three Montgomery product variants, each whatever `mul` (op 2) defaults to.
const MUL_VARIANTS: [(i32, &str); 3] = [(11, "mul_cios"), (12, "mul_wide"), (13, "mul_split")];

use common::gpu_device as device;

/// Runs the test kernel `op(a, b) -> out` for `n` field elements on raw buffers (`A`, `B` input types,
/// `O` output type, `out_len` values of `O` read back).
fn run<A: DeviceRepr, B: DeviceRepr, O: DeviceRepr + Default>(
    dev: &Arc<Device>,
    field: TestField,
    op: i32,
    a: &[A],
    b: &[B],
    n: usize,
    out_len: usize,
) -> Vec<O> {
    let da = dev.upload(a).unwrap();
    let db = dev.upload(b).unwrap();
    let mut dout = dev.upload(&vec![O::default(); out_len]).unwrap();
    let stream = dev.stream().unwrap();
    testing::field_op(&stream, field, op, &da, &db, &mut dout, n).unwrap();
    dout.to_vec().unwrap()
}

fn rng() -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(0x5eed_f1e1d)
}

fn fr_values() -> Vec<Scalar> {
    let two = Scalar::from(2u64);
    let mut v = vec![
        Scalar::ZERO,
        Scalar::ONE,
        -Scalar::ONE,
        two,
        two.invert().unwrap(),
        -two,
        Scalar::from(u64::MAX),
    ];
    let mut r = rng();
    v.extend((0..2000).map(|_| Scalar::random(&mut r)));
    v.extend(raw_edges(Scalar::from(2u64).invert().unwrap(), 256));
    v
}

/// Elements whose Montgomery representation A (the integer the kernels see) is 2^k, 3 * 2^k or
/// p - 2^k, for shifts around the 32-bit limb boundaries: x = ±c 2^k R^-1 with R = 2^`bits`
/// and `half` = 1/2. They drive `inverse_vartime`'s shifts by whole limbs and by 1, 31, 32, 33 bits.
fn raw_edges<F: Field>(half: F, bits: u64) -> Vec<F> {
    let mut v = Vec::new();
    for k in [0u64, 1, 31, 32, 33, 63, 64, 65, 100, 200, bits - 4] {
        let x = half.pow_vartime([bits - k]);
        v.extend([x, x.double() + x, -x]);
    }
    v
}

fn fp_values() -> Vec<Fp> {
    let two = Fp::from(2u64);
    let mut v = vec![
        Fp::ZERO,
        Fp::ONE,
        -Fp::ONE,
        two,
        two.invert().unwrap(),
        -two,
        Fp::from(u64::MAX),
    ];
    let mut r = rng();
    v.extend((0..2000).map(|_| Fp::random(&mut r)));
    v.extend(raw_edges(Fp::from(2u64).invert().unwrap(), 384));
    v
}

fn fp2_values() -> Vec<Fp2> {
    let e = [Fp::ZERO, Fp::ONE, -Fp::ONE, Fp::from(2u64)];
    let mut v = Vec::new();
    for x in e {
        for y in e {
            v.push(Fp2::new(x, y));
        }
    }
    let mut r = rng();
    v.extend((0..1000).map(|_| Fp2::random(&mut r)));
    v
}

/// All ordered pairs of the first `edge` values plus a random pairing of the rest.
fn pairs<T: Copy>(vals: &[T], edge: usize) -> (Vec<T>, Vec<T>) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for x in &vals[..edge] {
        for y in &vals[..edge] {
            a.push(*x);
            b.push(*y);
        }
    }
    for (i, x) in vals.iter().enumerate() {
        a.push(*x);
        b.push(vals[(i * 7 + 3) % vals.len()]);
    }
    a.extend_from_slice(vals);
    b.extend_from_slice(vals);
    (a, b)
}

macro_rules! check_ops {
    ($dev:expr, $kernel:expr, $ty:ty, $vals:expr, $edge:expr, $name:expr) => {{
        let dev = $dev;
        let (a, b) = pairs(&$vals, $edge);
        let n = a.len();
        let cases: Vec<(i32, &str, Box<dyn Fn(&$ty, &$ty) -> $ty>)> = vec![
            (ADD, "add", Box::new(|x, y| *x + *y)),
            (SUB, "sub", Box::new(|x, y| *x - *y)),
            (MUL, "mul", Box::new(|x, y| *x * *y)),
            (SQR, "sqr", Box::new(|x, _| x.square())),
            (NEG, "neg", Box::new(|x, _| -*x)),
            (
                INV,
                "inverse",
                Box::new(|x, _| Option::<$ty>::from(x.invert()).unwrap_or(<$ty>::ZERO)),
            ),
            (
                INV_VARTIME,
                "inverse_vartime",
                Box::new(|x, _| Option::<$ty>::from(x.invert()).unwrap_or(<$ty>::ZERO)),
            ),
            (
                EQ,
                "eq",
                Box::new(|x, y| if x == y { <$ty>::ONE } else { <$ty>::ZERO }),
            ),
            (DBL, "dbl", Box::new(|x, _| x.double())),
            (
                MUL_ADD,
                "mul_add",
                Box::new(|x, y| *x * *y + (*x + *y) * *y),
            ),
            (
                IS_ZERO,
                "is_zero",
                Box::new(|x, _| {
                    if bool::from(x.is_zero()) {
                        <$ty>::ONE
                    } else {
                        <$ty>::ZERO
                    }
                }),
            ),
        ];
        for (op, opname, f) in cases {
            // inverse is slow (Fermat): check fewer values
            let m = if op == INV { n.min(600) } else { n };
            let got: Vec<$ty> = run(dev, $kernel, op, &a[..m], &b[..m], m, m);
            for i in 0..m {
                let want = f(&a[i], &b[i]);
                assert_eq!(
                    got[i], want,
                    "{} {opname} #{i}: a={:?} b={:?}",
                    $name, a[i], b[i]
                );
            }
            eprintln!("{} {opname}: {m} values ok", $name);
        }
    }};
}

#[test]
fn fr_ops_match_blstrs() {
    let Some(dev) = device() else { return };
    check_ops!(&dev, TestField::Fr, Scalar, fr_values(), 7, "Fr");
}

#[test]
fn fp_ops_match_blstrs() {
    let Some(dev) = device() else { return };
    check_ops!(&dev, TestField::Fp, Fp, fp_values(), 7, "Fp");
}

#[test]
fn fp2_ops_match_blstrs() {
    let Some(dev) = device() else { return };
    check_ops!(&dev, TestField::Fp2, Fp2, fp2_values(), 16, "Fp2");
}

fn le_u64s(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn fr_montgomery_conversions() {
    let Some(dev) = device() else { return };
    let vals = fr_values();
    // canonical integers as raw limbs
    let plain: Vec<u64> = vals
        .iter()
        .flat_map(|s| le_u64s(&s.to_bytes_le()))
        .collect();
    let got: Vec<Scalar> = run(
        &dev,
        TestField::Fr,
        TO_MONT,
        &plain,
        &plain,
        vals.len(),
        vals.len(),
    );
    assert_eq!(got, vals, "Fr to_mont");
    let back: Vec<u64> = run::<Scalar, Scalar, u64>(
        &dev,
        TestField::Fr,
        FROM_MONT,
        &vals,
        &vals,
        vals.len(),
        4 * vals.len(),
    );
    assert_eq!(back, plain, "Fr from_mont");
}

#[test]
fn fp_montgomery_conversions() {
    let Some(dev) = device() else { return };
    let vals = fp_values();
    let plain: Vec<u64> = vals
        .iter()
        .flat_map(|s| le_u64s(&s.to_bytes_le()))
        .collect();
    let got: Vec<Fp> = run(
        &dev,
        TestField::Fp,
        TO_MONT,
        &plain,
        &plain,
        vals.len(),
        vals.len(),
    );
    assert_eq!(got, vals, "Fp to_mont");
    let back: Vec<u64> = run::<Fp, Fp, u64>(
        &dev,
        TestField::Fp,
        FROM_MONT,
        &vals,
        &vals,
        vals.len(),
        6 * vals.len(),
    );
    assert_eq!(back, plain, "Fp from_mont");
}

/// Products `op` of `field` on the pairs of `vals` (all ordered pairs of the first `edge`, see
/// [`pairs`]) against blstrs; returns how many were checked.
fn check_products<T>(
    dev: &Arc<Device>,
    field: TestField,
    op: i32,
    name: &str,
    vals: &[T],
    edge: usize,
) -> usize
where
    T: DeviceRepr + Default + Copy + PartialEq + std::fmt::Debug + std::ops::Mul<Output = T>,
{
    let (a, b) = pairs(vals, edge);
    let got: Vec<T> = run(dev, field, op, &a, &b, a.len(), a.len());
    for i in 0..a.len() {
        assert_eq!(
            got[i],
            a[i] * b[i],
            "{field:?} {name} #{i}: a={:?} b={:?}",
            a[i],
            b[i]
        );
    }
    a.len()
}

/// Every Montgomery product variant (`Fr`/`Fp` `mul_cios`, `mul_wide`, `mul_split`; `mul`, op 2,
/// checked by every other test here, is `mul_split`) against blstrs.
#[test]
fn mul_variants_match_blstrs() {
    let Some(dev) = device() else { return };
    for (op, name) in MUL_VARIANTS {
        let nr = check_products(&dev, TestField::Fr, op, name, &fr_values(), 7);
        let np = check_products(&dev, TestField::Fp, op, name, &fp_values(), 7);
        eprintln!("{name}: Fr and Fp ok ({nr} and {np} products)");
    }
}

/// Sums of four products with one Montgomery reduction (`mul_sum<4>` in Fp, the sums of G2's
/// formulas; the edge values p - 1 reach the K p^2 bound; Fr's `mul_add`, K = 2, is in
/// `fr_ops_match_blstrs`) and the Fp2 Karatsuba product kept beside the lazy-reduction `mul`,
/// against blstrs.
#[test]
fn lazy_reduction_matches_blstrs() {
    let Some(dev) = device() else { return };
    let (a, b) = pairs(&fp_values(), 7);
    let got: Vec<Fp> = run(&dev, TestField::Fp, MUL_SUM4, &a, &b, a.len(), a.len());
    for i in 0..a.len() {
        let (x, y) = (a[i], b[i]);
        let want = x * x + x * y + y * y + (x + y) * (x + y);
        assert_eq!(got[i], want, "Fp mul_sum<4> #{i}: a={x:?} b={y:?}");
    }
    let np = a.len();
    let nk = check_products(
        &dev,
        TestField::Fp2,
        FP2_KARATSUBA,
        "Karatsuba",
        &fp2_values(),
        16,
    );
    eprintln!("mul_sum<4>: {np} Fp values ok; Fp2 Karatsuba: {nk} ok");
}
