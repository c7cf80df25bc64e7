//! GPU SpMV (`cuzk::gpu::kernels::spmv`) against the CPU SpMV (`Csr::spmv`), bit for bit, with
//! every scheme: random CSR matrices with random coefficient tables and the edge cases (empty rows,
//! a row of 64 entries, z = 0, only ±1 coefficients, no rows), the real 2 KiB compiled circuit
//! (fixture at `~/.cache/cuzk/fixture-2kib-v1`, built if missing), and the device R1CS check
//! finding planted wrong rows; the streamed SpMV (matrices copied in row blocks) and the
//! blockwise R1CS check against the CPU on a circuit of several blocks. Skips (with a message) when no CUDA device is usable, fails
//! instead under `CUZK_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;

use std::sync::Arc;

use blstrs::Scalar as Fr;
use cuzk::circuit::{CoeffTable, CompiledCircuit, Counts, Csr, Layout};
use cuzk::gpu::driver::device::{Device, DeviceBuffer};
use cuzk::gpu::kernels::spmv::{
    r1cs_check, spmv, CircuitOnDevice, DeviceCircuit, DeviceCsr, Matrix, Scheme, StreamedCircuit,
};
use cuzk::gpu::kernels::zpack::PackedAux;
use cuzk::gpu::memory::alloc::Arena;
use cuzk::gpu::memory::layout::{circuit_device_bytes, SPMV_BLOCK_NNZ, SPMV_BLOCK_ROWS};
use cuzk::prover::gpu::pinned_registry;
use cuzk::synth::Density;
use cuzk::{Backend, Engine, EngineConfig, Synthesis, Timings};
use cuzk_dev::fixture::{default_fixture_dir, ensure_2kib_fixture};
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use common::gpu_device as device;

/// A random CSR matrix of `rows` rows over `vars` variables: row lengths from `len(rng, j)`,
/// coefficient indices below `ncoeffs`.
fn random_csr(
    rng: &mut ChaCha20Rng,
    rows: usize,
    vars: usize,
    ncoeffs: u32,
    mut len: impl FnMut(&mut ChaCha20Rng, usize) -> usize,
) -> Csr {
    let mut m = Csr::new();
    for j in 0..rows {
        for _ in 0..len(rng, j) {
            m.col.push(rng.gen_range(0..vars as u32));
            m.coeff.push(rng.gen_range(0..ncoeffs));
        }
        m.row_ptr.push(m.col.len() as u32);
    }
    assert!(m.is_well_formed(vars, ncoeffs as usize));
    m
}

fn random_table(rng: &mut ChaCha20Rng, extra: usize) -> CoeffTable {
    let mut t = CoeffTable::default();
    for k in 0..extra {
        // small powers of two (as in the PoRep circuits) and random values
        let v = if k % 2 == 0 {
            Fr::from(1u64 << (k % 60 + 1))
        } else {
            Fr::random(&mut *rng)
        };
        t.intern(v);
    }
    t
}

/// y = M·z on the device with `scheme` (z uploaded as input ‖ aux), read back.
fn gpu_spmv(
    dev: &Arc<Device>,
    m: &Csr,
    t: &CoeffTable,
    input: &[Fr],
    aux: &[Fr],
    scheme: Scheme,
) -> Vec<Fr> {
    let stream = dev.stream().unwrap();
    let dm = DeviceCsr::upload(dev, m, None).unwrap();
    let dcoef = dev.upload(t.values()).unwrap();
    let (din, daux) = (dev.upload(input).unwrap(), dev.upload(aux).unwrap());
    // one sentinel element past the rows: it must stay untouched
    let mut y: DeviceBuffer<Fr> = dev.upload(&vec![Fr::from(99); m.rows() + 1]).unwrap();
    spmv(
        &stream,
        &dm,
        dcoef.as_slice(),
        din.as_slice(),
        daux.as_slice(),
        &mut y.as_mut_slice(),
        scheme,
    )
    .unwrap();
    stream.synchronize().unwrap();
    let mut out = y.to_vec().unwrap();
    assert_eq!(
        out.pop(),
        Some(Fr::from(99)),
        "{scheme:?} wrote past the rows"
    );
    out
}

fn random_z(rng: &mut ChaCha20Rng, n: usize) -> Vec<Fr> {
    (0..n)
        .map(|i| match i % 5 {
            0 => Fr::ZERO,
            1 => Fr::ONE,
            _ => Fr::random(&mut *rng),
        })
        .collect()
}

#[test]
fn gpu_spmv_equals_cpu_spmv_on_random_matrices_and_edge_cases() {
    let Some(dev) = device() else { return };
    let mut rng = ChaCha20Rng::seed_from_u64(10);
    let t = random_table(&mut rng, 30);
    let nc = t.len() as u32;
    let (ni, na) = (7usize, 5000usize);
    let input = random_z(&mut rng, ni);
    let aux = random_z(&mut rng, na);
    let vars = ni + na;
    let mut cases: Vec<(&str, Csr)> = vec![
        // PoRep-like: mostly 1–3 entries, some up to 40, some empty
        (
            "porep-like",
            random_csr(&mut rng, 20_000, vars, nc, |r, _| {
                match r.gen_range(0..100) {
                    0..=4 => 0,
                    5..=84 => r.gen_range(1..=3),
                    85..=97 => r.gen_range(4..=12),
                    _ => r.gen_range(13..=40),
                }
            }),
        ),
        ("empty rows", random_csr(&mut rng, 1000, vars, nc, |_, _| 0)),
        (
            "a row of 64",
            random_csr(
                &mut rng,
                257,
                vars,
                nc,
                |_, j| if j == 100 { 64 } else { 1 },
            ),
        ),
        (
            "only ±1",
            random_csr(&mut rng, 5000, vars, 2, |r, _| r.gen_range(0..=8)),
        ),
        ("no rows", Csr::new()),
        ("one row", random_csr(&mut rng, 1, vars, nc, |_, _| 33)),
    ];
    // every row 64 entries over 20 variables (repeated columns in a row)
    cases.push(("all rows 64", random_csr(&mut rng, 300, 20, nc, |_, _| 64)));
    let zeros = (vec![Fr::ZERO; ni], vec![Fr::ZERO; na]);
    for (name, m) in &cases {
        let want = m.spmv(&t, &input, &aux);
        for scheme in Scheme::ALL {
            let got = gpu_spmv(&dev, m, &t, &input, &aux, scheme);
            assert_eq!(got.len(), want.len(), "{name}");
            if let Some(j) = (0..want.len()).find(|&j| got[j] != want[j]) {
                panic!("{name}, {scheme:?}: row {j} differs");
            }
            // z = 0 gives 0
            let got0 = gpu_spmv(&dev, m, &t, &zeros.0, &zeros.1, scheme);
            assert!(got0.iter().all(|v| bool::from(v.is_zero())), "{name} z = 0");
        }
    }
}

#[test]
fn r1cs_check_finds_the_first_planted_wrong_row() {
    let Some(dev) = device() else { return };
    let stream = dev.stream().unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let n = 100_003;
    let a: Vec<Fr> = (0..n).map(|_| Fr::random(&mut rng)).collect();
    let b: Vec<Fr> = (0..n).map(|_| Fr::random(&mut rng)).collect();
    let mut c: Vec<Fr> = a.iter().zip(&b).map(|(x, y)| *x * y).collect();
    let up = |v: &[Fr]| dev.upload(v).unwrap();
    let (da, db) = (up(&a), up(&b));
    let check = |c: &[Fr]| {
        let dc = up(c);
        r1cs_check(&stream, None, da.as_slice(), db.as_slice(), dc.as_slice()).unwrap()
    };
    assert_eq!(check(&c), None);
    c[77_777] += Fr::ONE;
    assert_eq!(check(&c), Some(77_777));
    c[5] = Fr::ZERO;
    c[99_999] = Fr::ONE;
    assert_eq!(check(&c), Some(5), "the first failing row");
    // zero rows
    let e = dev.alloc::<Fr>(0).unwrap();
    assert_eq!(
        r1cs_check(&stream, None, e.as_slice(), e.as_slice(), e.as_slice()).unwrap(),
        None
    );
}

#[test]
fn gpu_spmv_of_the_real_2kib_circuit_equals_the_cpu() {
    let Some(dev) = device() else { return };
    let _ = env_logger::builder().is_test(true).try_init();
    let f = ensure_2kib_fixture(&default_fixture_dir()).expect("2 KiB fixture");
    let engine = Engine::new(
        EngineConfig::default()
            .with_parameter_dir(&f.param_dir)
            .with_backend(Backend::Cpu),
    )
    .expect("engine");
    let c1 = f.read_c1().unwrap();
    let cc = engine.circuit_c1(&c1, f.sector_id, &f.prover_id).unwrap();
    let asg = engine
        .synthesize_c1(
            &c1,
            f.sector_id,
            &f.prover_id,
            0,
            Synthesis::Compiled,
            &mut Timings::default(),
        )
        .unwrap();
    cuzk::prover::check_satisfied(&asg, 0).unwrap();
    let rows = cc.layout.num_constraints();
    assert_eq!(asg.a.len(), rows);

    // The upload takes exactly its size function's bytes.
    let bytes = DeviceCircuit::bytes_for(&cc);
    assert_eq!(
        bytes,
        circuit_device_bytes(
            rows as u64,
            [cc.a.nnz() as u64, cc.b.nnz() as u64, cc.c.nnz() as u64],
            cc.coeffs.len() as u64
        )
    );
    let arena = Arena::new(dev.ordinal(), "circuit", bytes);
    let dcirc = DeviceCircuit::upload(&dev, &cc, Some(&arena)).unwrap();
    assert_eq!((arena.used(), arena.high_water()), (bytes, bytes));
    assert!(
        DeviceCircuit::upload(&dev, &cc, Some(&arena)).is_err(),
        "arena full"
    );

    let stream = dev.stream().unwrap();
    let n = rows.next_power_of_two();
    let din = dev.upload(&asg.input).unwrap();
    let daux = dev.upload(&asg.aux).unwrap();
    for scheme in Scheme::ALL {
        cuzk::gpu::kernels::spmv::set_default_scheme(scheme);
        // the H step's buffers: n elements each, garbage in the tail that must be zeroed
        let mut outs: Vec<DeviceBuffer<Fr>> = (0..3)
            .map(|_| dev.upload(&vec![Fr::from(5); n]).unwrap())
            .collect();
        let [oa, ob, oc] = &mut outs[..] else {
            unreachable!()
        };
        dcirc
            .evaluate(&stream, din.as_slice(), daux.as_slice(), [oa, ob, oc])
            .unwrap();
        stream.synchronize().unwrap();
        for (name, o, want) in [
            ("a", &outs[0], &asg.a),
            ("b", &outs[1], &asg.b),
            ("c", &outs[2], &asg.c),
        ] {
            let got = o.to_vec().unwrap();
            if let Some(j) = (0..rows).find(|&j| got[j] != want[j]) {
                panic!("{scheme:?}: {name}[{j}] differs from the CPU SpMV");
            }
            assert!(
                got[rows..].iter().all(|v| bool::from(v.is_zero())),
                "{name} tail"
            );
        }
        let check = r1cs_check(
            &stream,
            None,
            outs[0].slice(..rows).unwrap(),
            outs[1].slice(..rows).unwrap(),
            outs[2].slice(..rows).unwrap(),
        )
        .unwrap();
        assert_eq!(check, None, "{scheme:?}");
    }
    cuzk::gpu::kernels::spmv::set_default_scheme(Scheme::RowPerThread);

    // A wrong witness value: the device check names the constraint the CPU check names.
    let mut aux = asg.aux.clone();
    let k = aux
        .iter()
        .position(|v| *v != Fr::ZERO && *v != Fr::ONE)
        .unwrap();
    aux[k] += Fr::ONE;
    let want = {
        let bad = cc
            .evaluate(cuzk::circuit::Witness {
                input: asg.input.clone(),
                aux: aux.clone(),
            })
            .unwrap();
        match cuzk::prover::check_satisfied(&bad, 0) {
            Err(cuzk::Error::Synthesis { message, .. }) => message,
            other => panic!("the CPU check accepted a wrong witness: {other:?}"),
        }
    };
    let daux = dev.upload(&aux).unwrap();
    let mut outs: Vec<DeviceBuffer<Fr>> = (0..3).map(|_| dev.alloc(n).unwrap()).collect();
    let [oa, ob, oc] = &mut outs[..] else {
        unreachable!()
    };
    dcirc
        .evaluate(&stream, din.as_slice(), daux.as_slice(), [oa, ob, oc])
        .unwrap();
    let j = r1cs_check(
        &stream,
        None,
        outs[0].slice(..rows).unwrap(),
        outs[1].slice(..rows).unwrap(),
        outs[2].slice(..rows).unwrap(),
    )
    .unwrap()
    .expect("the device check finds the wrong row");
    let msg = cuzk::prover::unsatisfied(0, j, rows).to_string();
    assert!(msg.contains(&want), "device: {msg}; CPU: {want}");
}

/// A compiled circuit of `rows` rows (no recorded layout: all inputs and aux in the prefix)
/// from its matrices, for the streamed SpMV.
fn circuit_of(a: Csr, b: Csr, c: Csr, t: CoeffTable, ni: usize, na: usize) -> CompiledCircuit {
    let rows = a.rows();
    CompiledCircuit {
        layout: Layout {
            prefix: Counts {
                inputs: ni,
                aux: na,
                constraints: rows - ni,
            },
            block: Counts::default(),
            challenges: 0,
        },
        a,
        b,
        c,
        coeffs: t,
        a_aux_density: Density::with_len(na),
        b_input_density: Density::with_len(ni),
        b_aux_density: Density::with_len(na),
    }
}

#[test]
fn streamed_spmv_and_the_blockwise_check_equal_the_cpu() {
    let Some(dev) = device() else { return };
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let t = random_table(&mut rng, 20);
    let nc = t.len() as u32;
    let (ni, na) = (5usize, 3000usize);
    let vars = ni + na;
    let block = SPMV_BLOCK_ROWS as usize;
    // Over two blocks of rows; B's first block holds 8 entries a row (2^24 non-zeros: split by
    // the block's non-zero limit), C has empty rows.
    let rows = 2 * block + 12_345;
    let a = random_csr(&mut rng, rows, vars, nc, |r, _| r.gen_range(1..=3));
    let b = random_csr(&mut rng, rows, vars, nc, |r, j| {
        if j < block {
            8
        } else {
            r.gen_range(0..=2)
        }
    });
    let c = random_csr(&mut rng, rows, vars, nc, |r, _| r.gen_range(0..=4));
    assert!(b.row_ptr[block] as u64 > SPMV_BLOCK_NNZ);
    let input = random_z(&mut rng, ni);
    let aux = random_z(&mut rng, na);
    let want = [&a, &b, &c].map(|m| m.spmv(&t, &input, &aux));
    let cc = circuit_of(a, b, c, t, ni, na);
    let n = rows.next_power_of_two();
    let stream = dev.stream().unwrap();
    let (din, daux) = (dev.upload(&input).unwrap(), dev.upload(&aux).unwrap());
    let bytes = StreamedCircuit::bytes_for(&cc);
    let arena = Arena::new(dev.ordinal(), "streamed", bytes);
    let streamed = StreamedCircuit::new(&dev, &cc, Some(&arena), pinned_registry()).unwrap();
    assert_eq!(
        arena.used(),
        bytes,
        "the slots take their size function's bytes"
    );
    let resident = DeviceCircuit::upload(&dev, &cc, None).unwrap();
    for mut on in [
        CircuitOnDevice::Streamed(Box::new(streamed)),
        CircuitOnDevice::Resident(&resident),
    ] {
        let kind = match on {
            CircuitOnDevice::Streamed(_) => "streamed",
            CircuitOnDevice::Resident(_) => "resident",
        };
        let mut outs = Vec::new();
        for (k, m) in [Matrix::A, Matrix::B, Matrix::C].into_iter().enumerate() {
            let mut y = dev.upload(&vec![Fr::from(5); n]).unwrap();
            on.evaluate(
                &stream,
                m,
                din.as_slice(),
                daux.as_slice(),
                &mut y.as_mut_slice(),
            )
            .unwrap();
            stream.synchronize().unwrap();
            let got = y.to_vec().unwrap();
            if let Some(j) = (0..rows).find(|&j| got[j] != want[k][j]) {
                panic!("{kind} {m:?}: row {j} differs");
            }
            assert!(
                got[rows..].iter().all(|v| bool::from(v.is_zero())),
                "{kind} {m:?}: the tail is zeroed"
            );
            outs.push(y);
        }
        // a∘b = c fails somewhere (random matrices): the first such row, found block by block
        let first = (0..rows).find(|&j| want[0][j] * want[1][j] != want[2][j]);
        assert!(first.is_some());
        let mut scratch = dev.alloc::<Fr>(block).unwrap();
        let got = on
            .check_blockwise(
                &stream,
                None,
                din.as_slice(),
                daux.as_slice(),
                outs[0].slice(..rows).unwrap(),
                outs[1].slice(..rows).unwrap(),
                &mut scratch,
            )
            .unwrap();
        assert_eq!(got, first, "{kind}: first failing row");
        // with c's own values as a∘b in a later block only: that row is found
        let ab: Vec<Fr> = (0..rows).map(|j| want[0][j] * want[1][j]).collect();
        let da = dev.upload(&ab).unwrap();
        let ones = dev.upload(&vec![Fr::ONE; rows]).unwrap();
        let got = on
            .check_blockwise(
                &stream,
                None,
                din.as_slice(),
                daux.as_slice(),
                da.as_slice(),
                ones.as_slice(),
                &mut scratch,
            )
            .unwrap();
        let first = (0..rows).find(|&j| ab[j] != want[2][j]);
        assert_eq!(got, first, "{kind}: c against a∘b·1");
        // z = 0: every row holds
        let zeros = (
            dev.upload(&vec![Fr::ZERO; ni]).unwrap(),
            dev.upload(&vec![Fr::ZERO; na]).unwrap(),
        );
        let zero = dev.upload(&vec![Fr::ZERO; rows]).unwrap();
        let got = on
            .check_blockwise(
                &stream,
                None,
                zeros.0.as_slice(),
                zeros.1.as_slice(),
                zero.as_slice(),
                zero.as_slice(),
                &mut scratch,
            )
            .unwrap();
        assert_eq!(got, None, "{kind}: z = 0 satisfies every row");
    }
}

/// z's aux packed on the host and expanded on the device (`cuzk::gpu::kernels::zpack`) equals
/// the dense vector, value for value: a PoRep-like mix (partial groups and tasks included), all
/// zeros and ones, and a scratch too short is refused without touching the output.
#[test]
fn packed_aux_expands_on_the_device_to_the_dense_vector() {
    let Some(dev) = device() else { return };
    let mut rng = ChaCha20Rng::seed_from_u64(44);
    for (n, share) in [(1usize, 0.5), (33, 0.04), (300_001, 0.035), (1 << 20, 0.0)] {
        let aux: Vec<Fr> = (0..n)
            .map(|_| {
                let u: f64 = rng.gen();
                if u < share {
                    Fr::random(&mut rng)
                } else if u < share + (1.0 - share) / 2.0 {
                    Fr::ONE
                } else {
                    Fr::ZERO
                }
            })
            .collect();
        // One value of one is more than the share packed (1/8): not packed.
        let Some(p) = PackedAux::pack(&aux) else {
            assert_eq!(n, 1);
            continue;
        };
        let stream = dev.stream().unwrap();
        let mut scratch = dev.alloc::<u32>(p.scratch_words()).unwrap();
        let mut out = dev.alloc::<Fr>(n).unwrap();
        p.expand(&stream, scratch.as_mut_slice(), &mut out.as_mut_slice())
            .unwrap();
        stream.synchronize().unwrap();
        assert_eq!(out.to_vec().unwrap(), aux, "n = {n}");
        if p.scratch_words() > 1 {
            let mut short = dev.alloc::<u32>(p.scratch_words() - 1).unwrap();
            assert!(p
                .expand(&stream, short.as_mut_slice(), &mut out.as_mut_slice())
                .is_err());
        }
    }
}
