//! SupraSeal's Groth16 prover (supraseal-c2, the prover filecoin-proofs' `cuda-supraseal` feature
//! calls) on a **synthetic partition** with the shape of a 32 GiB PoRep partition scaled to a
//! domain of 2^N — the same shape `examples/batch.rs` gives cuzk — so that both GPU provers can
//! be timed on e.g. 2^26 in one device call (issue 13). The proofs are not valid (the parameters
//! are a repeated pool of random points, the assignment is random); what is measured is the
//! prover's wall time per proof on resident host inputs.
//!
//! Usage: supraseal-synth --log2 N --params FILE [--repeat R] [--pool-log2 K]
//!
//! * Shape (as `batch --log2 N`): constraints 130,278,869 · 2^(N−27), 328 inputs, aux
//!   130,169,893 · 2^(N−27); A aux density 99.2 %, B aux density 26.5 % (independent per
//!   variable), of the inputs only the constant one in B; a, b, c uniformly random; aux 3.5 %
//!   random, the rest 0/1 with 48 % ones (BENCHMARKS.md, "The 0/1 split").
//! * `--params FILE`: written first if missing (bellperson's `.params` layout: verifying key,
//!   then H = 2^N − 1, L = aux, A, B_G1, B_G2 points, each vector a big-endian u32 length and
//!   uncompressed points), from a pool of 2^K distinct points (default 16) repeated, as
//!   `batch --pool-log2` does. 2^26: ~24 GB.
//! * Prints the parameter load (`SRS::try_new`, into SupraSeal's host memory) and each proof's
//!   wall time, then the mean of all but the first.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve, Group};
use rand_core::SeedableRng;
use rayon::prelude::*;

/// SupraSeal's proof layout (three blst affine points), as bellperson's `Proof<Bls12>`.
#[repr(C)]
struct Proof {
    a: G1Affine,
    b: G2Affine,
    c: G1Affine,
}

/// splitmix64 (Steele, Lea and Flood 2014): fast deterministic filler.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A field element from four 64-bit draws (top two bits cleared: < 2^254 < r).
fn scalar(seed: u64) -> Scalar {
    let l = [mix(seed), mix(seed ^ 1), mix(seed ^ 2), mix(seed ^ 3) >> 2];
    Scalar::from_u64s_le(&l).unwrap()
}

/// `n` points P_0 + i·Q (a random start walked by a random step), affine.
fn pool<G: Group + Curve>(n: usize, seed: u64) -> Vec<G::AffineRepr>
where
    G::AffineRepr: Default + Clone,
{
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let (start, step) = (G::random(&mut rng), G::random(&mut rng));
    let mut p = Vec::with_capacity(n);
    let mut x = start;
    for _ in 0..n {
        p.push(x);
        x += step;
    }
    let mut out = vec![G::AffineRepr::default(); n];
    G::batch_normalize(&p, &mut out);
    out
}

/// A vector of `len` points: its big-endian u32 length, then the pool's serialized points
/// (`pool`, `size` bytes each) repeated.
fn write_vec(w: &mut impl Write, len: usize, pool: &[u8], size: usize) -> Result<()> {
    w.write_all(&u32::try_from(len)?.to_be_bytes())?;
    let per = pool.len() / size;
    for _ in 0..len / per {
        w.write_all(pool)?;
    }
    w.write_all(&pool[..(len % per) * size])?;
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| supraseal_anchor::flag(&args, name);
    let log2: u32 = flag("--log2").context("--log2 N")?.parse()?;
    if !(16..=27).contains(&log2) {
        bail!("--log2: 16 ..= 27");
    }
    let params = PathBuf::from(flag("--params").context("--params FILE")?);
    let repeat: usize = flag("--repeat").map_or(Ok(4), |s| s.parse())?;
    let pool_log2: u32 = flag("--pool-log2").map_or(Ok(16), |s| s.parse())?;

    let shift = 27 - log2;
    let rows = 130_278_869usize >> shift;
    let inputs = 328usize;
    let aux = 130_169_893usize >> shift;
    let domain = 1usize << log2;
    // Densities: bit j of word j / 64.
    let bits = |p_permille: u64, salt: u64| -> (Vec<u64>, usize) {
        let mut v = vec![0u64; aux.div_ceil(64)];
        let mut n = 0;
        for j in 0..aux {
            if mix(salt ^ (j as u64).wrapping_mul(0x2545_F491_4F6C_DD1D)) % 1000 < p_permille {
                v[j / 64] |= 1 << (j % 64);
                n += 1;
            }
        }
        (v, n)
    };
    let (a_dens, a_count) = bits(992, 0xA);
    let (b_dens, b_count) = bits(265, 0xB);
    let mut b_inp = vec![0u64; inputs.div_ceil(64)];
    b_inp[0] = 1; // only the constant one of the inputs is in B
    println!(
        "supraseal-synth 2^{log2}: {rows} constraints, {inputs} inputs, {aux} aux, A {a_count} + {inputs}, B {b_count} + 1"
    );

    if !params.exists() {
        let t = Instant::now();
        let n = 1usize << pool_log2;
        let g1 = pool::<G1Projective>(n, 1);
        let g2 = pool::<G2Projective>(n, 2);
        let tmp = params.with_extension("tmp");
        let s1: Vec<u8> = g1.iter().flat_map(|p| p.to_uncompressed()).collect();
        let s2: Vec<u8> = g2.iter().flat_map(|p| p.to_uncompressed()).collect();
        let mut w = BufWriter::with_capacity(64 << 20, File::create(&tmp)?);
        // Verifying key: alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1, delta_g2.
        w.write_all(&s1[0..96])?;
        w.write_all(&s1[96..192])?;
        w.write_all(&s2[0..192])?;
        w.write_all(&s2[192..384])?;
        w.write_all(&s1[192..288])?;
        w.write_all(&s2[384..576])?;
        write_vec(&mut w, inputs, &s1, 96)?; // ic
        write_vec(&mut w, domain - 1, &s1, 96)?; // h
        write_vec(&mut w, aux, &s1, 96)?; // l
        write_vec(&mut w, inputs + a_count, &s1, 96)?; // a
        write_vec(&mut w, 1 + b_count, &s1, 96)?; // b_g1
        write_vec(&mut w, 1 + b_count, &s2, 192)?; // b_g2
        w.flush()?;
        drop(w);
        std::fs::rename(&tmp, &params)?;
        println!(
            "parameters written to {} ({:.2} GB) in {:.1} s",
            params.display(),
            std::fs::metadata(&params)?.len() as f64 / 1e9,
            t.elapsed().as_secs_f64()
        );
    }

    let t = Instant::now();
    let srs = supraseal_c2::SRS::try_new(params.clone(), true)
        .map_err(|e| anyhow::anyhow!("SRS::try_new: {}", String::from(e)))?;
    println!("SRS loaded in {:.2} s", t.elapsed().as_secs_f64());

    let t = Instant::now();
    let fill = |len: usize, salt: u64| -> Vec<Scalar> {
        (0..len)
            .into_par_iter()
            .map(|i| scalar(salt ^ (i as u64) << 8))
            .collect()
    };
    let (a, b, c) = (
        fill(rows, 1 << 60),
        fill(rows, 2 << 60),
        fill(rows, 3 << 60),
    );
    let mut input = fill(inputs, 4 << 60);
    input[0] = Scalar::ONE;
    let aux_v: Vec<Scalar> = (0..aux)
        .into_par_iter()
        .map(|j| {
            let r = mix((j as u64) ^ (5 << 60)) % 1000;
            if r < 35 {
                scalar((j as u64) ^ (6 << 60))
            } else if r < 35 + 463 {
                Scalar::ONE
            } else {
                Scalar::ZERO
            }
        })
        .collect();
    println!("assignment generated in {:.1} s", t.elapsed().as_secs_f64());

    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
    let mut times = Vec::new();
    for k in 0..repeat {
        let r = [Scalar::random(&mut rng)];
        let s = [Scalar::random(&mut rng)];
        let mut proofs = [Proof {
            a: G1Affine::identity(),
            b: G2Affine::identity(),
            c: G1Affine::identity(),
        }];
        let t = Instant::now();
        supraseal_c2::generate_groth16_proof(
            &[a.as_ptr()],
            &[b.as_ptr()],
            &[c.as_ptr()],
            rows,
            &[input.as_ptr()],
            &[aux_v.as_ptr()],
            inputs,
            aux,
            &a_dens,
            &b_inp,
            &b_dens,
            a_count,
            1,
            b_count,
            1,
            &r,
            &s,
            &mut proofs,
            &srs,
        );
        let dt = t.elapsed().as_secs_f64();
        println!(
            "proof {k}: {dt:.3} s (a ≠ 0: {})",
            !bool::from(proofs[0].a.is_identity())
        );
        times.push(dt);
    }
    if times.len() > 1 {
        let warm = &times[1..];
        println!(
            "supraseal 2^{log2} synthetic: {} proofs; first {:.3} s, warm mean {:.3} s",
            times.len(),
            times[0],
            warm.iter().sum::<f64>() / warm.len() as f64
        );
    }
    Ok(())
}
