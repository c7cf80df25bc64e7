//! GPU NTT (`cuzk::gpu::kernels::ntt`) against bellperson's CPU `EvaluationDomain`: forward,
//! inverse, coset forward/inverse, round trips and the fused H step, for every size 2^0 … 2^max.
//! `CUZK_TEST_NTT_MAX_LOG` sets max (default 24); the H step is checked up to
//! `CUZK_TEST_H_MAX_LOG` (default 22). Skips (with a message) when no CUDA device is usable.
#![cfg(feature = "cuda")]

mod common;

use std::sync::Arc;

use bellperson::domain::EvaluationDomain;
use blstrs::Scalar;
use cuzk::gpu::driver::device::Device;
use cuzk::gpu::kernels::ntt::{self, Direction, PassProduct};
use ec_gpu_gen::threadpool::Worker;
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

use common::gpu_device as device;

fn env_log(name: &str, default: u32) -> u32 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// n random scalars (deterministic per seed), generated in parallel.
fn random(n: usize, seed: u64) -> Vec<Scalar> {
    const CHUNK: usize = 1 << 14;
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(i, c)| {
        let mut r = ChaCha20Rng::seed_from_u64(seed ^ ((i as u64) << 20));
        for x in c {
            *x = Scalar::random(&mut r);
        }
    });
    v
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Fft,
    Ifft,
    CosetFft,
    IcosetFft,
}

fn cpu(kind: Kind, v: Vec<Scalar>) -> Vec<Scalar> {
    let w = Worker::new();
    let mut d = EvaluationDomain::from_coeffs(v).unwrap();
    match kind {
        Kind::Fft => d.fft(&w, &mut None).unwrap(),
        Kind::Ifft => d.ifft(&w, &mut None).unwrap(),
        Kind::CosetFft => d.coset_fft(&w, &mut None).unwrap(),
        Kind::IcosetFft => d.icoset_fft(&w, &mut None).unwrap(),
    }
    d.into_coeffs()
}

fn gpu_with(dev: &Arc<Device>, kind: Kind, v: &[Scalar], product: PassProduct) -> Vec<Scalar> {
    let mut out = v.to_vec();
    let (dir, coset) = match kind {
        Kind::Fft => (Direction::Forward, false),
        Kind::Ifft => (Direction::Inverse, false),
        Kind::CosetFft => (Direction::Forward, true),
        Kind::IcosetFft => (Direction::Inverse, true),
    };
    ntt::ntt_host_with(dev, &mut out, dir, coset, product).unwrap();
    out
}

fn first_diff(a: &[Scalar], b: &[Scalar]) -> Option<usize> {
    a.par_iter()
        .zip(b.par_iter())
        .position_first(|(x, y)| x != y)
}

#[test]
fn ntt_matches_cpu_all_sizes() {
    let Some(dev) = device() else { return };
    check_all_sizes(
        &dev,
        env_log("CUZK_TEST_NTT_MAX_LOG", 24),
        ntt::DEFAULT_PRODUCT,
    );
}

/// The pass kernel with each of the other products (cuzk_ntt_pass, _wide, _split).
#[test]
fn ntt_other_products_match_cpu() {
    let Some(dev) = device() else { return };
    for product in PassProduct::ALL {
        if product != ntt::DEFAULT_PRODUCT {
            check_all_sizes(&dev, env_log("CUZK_TEST_NTT_OTHER_MAX_LOG", 22), product);
        }
    }
}

fn check_all_sizes(dev: &Arc<Device>, max: u32, product: PassProduct) {
    for log_n in 0..=max {
        let n = 1usize << log_n;
        let x = random(n, 1000 + log_n as u64);
        for kind in [Kind::Fft, Kind::Ifft, Kind::CosetFft, Kind::IcosetFft] {
            let want = cpu(kind, x.clone());
            let got = gpu_with(dev, kind, &x, product);
            if let Some(i) = first_diff(&got, &want) {
                panic!(
                    "{kind:?} 2^{log_n} ({product:?}): first difference at {i}: gpu {:?} cpu {:?}",
                    got[i], want[i]
                );
            }
        }
        eprintln!("2^{log_n}: fft, ifft, coset_fft, icoset_fft ok ({product:?})");
    }
}

#[test]
fn ntt_round_trips_and_edge_inputs() {
    let Some(dev) = device() else { return };
    for log_n in [1u32, 5, 10, 11, 16, 20] {
        let n = 1usize << log_n;
        let x = random(n, 7 + log_n as u64);
        let mut y = x.clone();
        ntt::ntt_host(&dev, &mut y, Direction::Forward, false).unwrap();
        ntt::ntt_host(&dev, &mut y, Direction::Inverse, false).unwrap();
        assert_eq!(first_diff(&y, &x), None, "fft/ifft round trip 2^{log_n}");
        ntt::ntt_host(&dev, &mut y, Direction::Forward, true).unwrap();
        ntt::ntt_host(&dev, &mut y, Direction::Inverse, true).unwrap();
        assert_eq!(first_diff(&y, &x), None, "coset round trip 2^{log_n}");
        // all zeros stay zero; all ones -> n at 0, zero elsewhere; delta -> all ones
        let mut z = vec![Scalar::ZERO; n];
        ntt::ntt_host(&dev, &mut z, Direction::Forward, false).unwrap();
        assert!(z.iter().all(|v| bool::from(v.is_zero())), "zeros 2^{log_n}");
        let mut o = vec![Scalar::ONE; n];
        ntt::ntt_host(&dev, &mut o, Direction::Forward, false).unwrap();
        assert_eq!(o[0], Scalar::from(n as u64));
        assert!(
            o[1..].iter().all(|v| bool::from(v.is_zero())),
            "ones 2^{log_n}"
        );
        let mut d = vec![Scalar::ZERO; n];
        d[0] = Scalar::ONE;
        ntt::ntt_host(&dev, &mut d, Direction::Forward, false).unwrap();
        assert!(d.iter().all(|v| *v == Scalar::ONE), "delta 2^{log_n}");
        // p - 1 everywhere
        let m = vec![-Scalar::ONE; n];
        let mut g = m.clone();
        ntt::ntt_host(&dev, &mut g, Direction::Forward, true).unwrap();
        assert_eq!(
            first_diff(&g, &cpu(Kind::CosetFft, m)),
            None,
            "-1 coset 2^{log_n}"
        );
        eprintln!("2^{log_n}: round trips and edge inputs ok");
    }
}

#[test]
fn h_step_matches_cpu() {
    let Some(dev) = device() else { return };
    let max = env_log("CUZK_TEST_H_MAX_LOG", 22);
    let w = Worker::new();
    let mut logs: Vec<u32> = (0..=max.min(12)).collect();
    logs.extend([16, 20, 22].into_iter().filter(|&l| l > 12 && l <= max));
    for log_n in logs {
        let n = 1usize << log_n;
        let (a, b, c) = (
            random(n, 11 + log_n as u64),
            random(n, 22 + log_n as u64),
            random(n, 33 + log_n as u64),
        );
        // bellperson's prover sequence
        let mut da = EvaluationDomain::from_coeffs(a.clone()).unwrap();
        let mut db = EvaluationDomain::from_coeffs(b.clone()).unwrap();
        let mut dc = EvaluationDomain::from_coeffs(c.clone()).unwrap();
        for d in [&mut da, &mut db, &mut dc] {
            d.ifft(&w, &mut None).unwrap();
            d.coset_fft(&w, &mut None).unwrap();
        }
        da.mul_assign(&w, &db);
        da.sub_assign(&w, &dc);
        da.divide_by_z_on_coset(&w);
        da.icoset_fft(&w, &mut None).unwrap();
        let want = da.into_coeffs();
        for product in PassProduct::ALL {
            let got = ntt::h_step_host_with(&dev, &a, &b, &c, product).unwrap();
            if let Some(i) = first_diff(&got, &want) {
                panic!(
                    "h_step 2^{log_n} ({product:?}): first difference at {i}: gpu {:?} cpu {:?}",
                    got[i], want[i]
                );
            }
        }
        // On two buffers, c written into b's once A·B is formed: the same result.
        let stream = dev.stream().unwrap();
        let mut da = dev.upload(&a).unwrap();
        let mut dbc = dev.upload(&b).unwrap();
        ntt::h_step_shared(
            &stream,
            &mut da.as_mut_slice(),
            &mut dbc.as_mut_slice(),
            |bc| bc.copy_from_host(&c),
        )
        .unwrap();
        stream.synchronize().unwrap();
        let got = da.to_vec().unwrap();
        if let Some(i) = first_diff(&got, &want) {
            panic!(
                "h_step_shared 2^{log_n}: first difference at {i}: gpu {:?} cpu {:?}",
                got[i], want[i]
            );
        }
        eprintln!("h_step 2^{log_n} ok (every product, and on two buffers)");
    }
}

#[test]
fn bad_lengths_are_errors() {
    let Some(dev) = device() else { return };
    let mut v = vec![Scalar::ONE; 3];
    assert!(ntt::ntt_host(&dev, &mut v, Direction::Forward, false).is_err());
    let mut e: Vec<Scalar> = vec![];
    assert!(ntt::ntt_host(&dev, &mut e, Direction::Forward, false).is_err());
    let a = vec![Scalar::ONE; 4];
    let b = vec![Scalar::ONE; 8];
    assert!(ntt::h_step_host(&dev, &a, &b, &a).is_err());
    let stream = dev.stream().unwrap();
    let (mut da, mut db) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
    assert!(ntt::h_step_shared(
        &stream,
        &mut da.as_mut_slice(),
        &mut db.as_mut_slice(),
        |_| Ok(())
    )
    .is_err());
}
