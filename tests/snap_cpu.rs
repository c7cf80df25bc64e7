//! SnapDeals on the real 2 KiB SnapDeals fixture (a sealed sector updated by filecoin-proofs,
//! its vanilla partition proofs), CPU backend: the proof (native witness, the default) verifies
//! with filecoin-proofs-api's `verify_empty_sector_update_proof` (a flipped byte and an altered
//! comm_r_new do not), the compiled path with the native or the gadget witness and the
//! reference synthesis give the same bytes for the same r and s, the compiled circuit's
//! witness (native and gadget), a, b, c and densities equal bellperson's synthesis exactly, the
//! native witness equals the gadgets' on real-shape 8 MiB inputs (`cuzk_dev::snapgen`), bad
//! input gets typed errors before any proving, and the C ABI's `cuzk_prove_snap_deals` proves
//! and refuses bad arguments with typed statuses (calling `extern "C"` functions with raw
//! pointers is `unsafe`: each call says why its pointers are valid).

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use blstrs::Scalar as Fr;
use cuzk::snap::SnapRequest;
use cuzk::{Backend, CircuitCache, Engine, EngineConfig, ProveOptions, Synthesis};
use cuzk_dev::fixture::run_self_with_env;
use cuzk_dev::snap_fixture::{
    default_snap_fixture_dir, ensure_snap_fixture, SnapFixture, UPDATE_2KIB,
};
use filecoin_proofs::constants::SectorShape2KiB;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCompound, PartitionProof, PublicInputs, PublicParams,
};

fn fixture() -> &'static SnapFixture {
    static F: OnceLock<SnapFixture> = OnceLock::new();
    F.get_or_init(|| {
        let _ = env_logger::builder().is_test(true).try_init();
        ensure_snap_fixture(&default_snap_fixture_dir()).expect("2 KiB SnapDeals fixture")
    })
}

/// The engine the tests share.
fn engine() -> Arc<Engine> {
    static E: OnceLock<Arc<Engine>> = OnceLock::new();
    E.get_or_init(new_engine).clone()
}

/// A CPU engine over the fixture's parameters, without a circuit cache file.
fn new_engine() -> Arc<Engine> {
    Engine::new(
        EngineConfig::default()
            .with_parameter_dir(&fixture().param_dir)
            .with_backend(Backend::Cpu)
            .with_circuit_cache(CircuitCache::Off),
    )
    .expect("engine")
}

/// The fixture's request as Curio sends it (sector size 0: from the proof type), with
/// `vanilla` as the vanilla proofs.
fn request<'a>(f: &'a SnapFixture, vanilla: &'a [&'a [u8]]) -> SnapRequest<'a> {
    SnapRequest {
        registered_proof: UPDATE_2KIB,
        vanilla_proofs: vanilla,
        comm_r_old: &f.comm_r_old,
        comm_r_new: &f.comm_r_new,
        comm_d_new: &f.comm_d_new,
        sector_size: None,
    }
}

fn prove(vanilla: &[Vec<u8>], options: &ProveOptions) -> cuzk::Result<cuzk::ProofOutput> {
    let f = fixture();
    let v: Vec<&[u8]> = vanilla.iter().map(Vec::as_slice).collect();
    engine().prove_snap_deals(&request(f, &v), options)
}

/// The counts a witness driver reads from a layout: inputs and aux of the prefix and of a
/// block, and the blocks.
fn layout_counts(l: &cuzk::circuit::Layout) -> (usize, usize, usize, usize, usize) {
    (
        l.prefix.inputs,
        l.prefix.aux,
        l.block.inputs,
        l.block.aux,
        l.challenges,
    )
}

/// The proof, checked by filecoin-proofs-api in a child process whose
/// `FIL_PROOFS_PARAMETER_CACHE` is the fixture's parameter directory (read once per process).
#[test]
fn snap_proof_verifies_with_filecoin_proofs_and_tampering_does_not() {
    const TEST: &str = "snap_proof_verifies_with_filecoin_proofs_and_tampering_does_not";
    let f = fixture();
    if let Some(file) = std::env::var_os("CUZK_TEST_SNAP_PROOF") {
        // The child: filecoin-proofs-api's verifier on the parent's proof.
        let proof = std::fs::read(file).unwrap();
        assert_eq!(proof.len(), 192);
        assert!(
            f.verify_with_filecoin_proofs(&proof, f.comm_r_new).unwrap(),
            "filecoin-proofs rejects our proof"
        );
        for i in [0, 47, 48, 100, 143, 144, 191] {
            let mut bad = proof.clone();
            bad[i] ^= 0x01;
            let verdict = f.verify_with_filecoin_proofs(&bad, f.comm_r_new);
            assert!(
                !matches!(verdict, Ok(true)),
                "byte {i} flipped still verifies"
            );
        }
        // Another comm_r_new (still a field element): the proof is not one of it.
        let mut other = f.comm_r_new;
        other[0] ^= 1;
        assert!(!matches!(
            f.verify_with_filecoin_proofs(&proof, other),
            Ok(true)
        ));
        println!("child verified the snap proof");
        return;
    }
    let t = Instant::now();
    let out = prove(&f.vanilla_proofs().unwrap(), &ProveOptions::default()).unwrap();
    eprintln!(
        "2 KiB snap proof on the CPU in {:.2} s: {:?}",
        t.elapsed().as_secs_f64(),
        out.timings.entries
    );
    assert_eq!(out.proof.len(), 192);
    assert!(out.verified);
    assert_eq!(out.partitions.len(), 1);
    assert_eq!(out.partitions[0].backend, "cpu");
    let file = std::env::temp_dir().join(format!("cuzk-snap-proof-{}", std::process::id()));
    std::fs::write(&file, &out.proof).unwrap();
    let child = run_self_with_env(
        TEST,
        &[
            ("FIL_PROOFS_PARAMETER_CACHE", f.param_dir.as_os_str()),
            ("CUZK_TEST_SNAP_PROOF", file.as_os_str()),
        ],
    )
    .unwrap();
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && stdout.contains("child verified the snap proof"),
        "child: {stdout}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
    std::fs::remove_file(&file).unwrap();
}

/// With the same r and s, the compiled circuit (recorded whole) with the native witness or the
/// gadgets' and the reference synthesis of filecoin's circuit give the same proof bytes.
#[test]
fn native_gadget_and_reference_paths_give_the_same_snap_proof() {
    let f = fixture();
    let vanilla = f.vanilla_proofs().unwrap();
    let rs = vec![(Fr::from(12_345u64), Fr::from(67_890u64))];
    let proofs: Vec<Vec<u8>> = [Synthesis::Compiled, Synthesis::Gadget, Synthesis::Reference]
        .into_iter()
        .map(|s| {
            let o = ProveOptions::default()
                .with_synthesis(s)
                .with_randomness(rs.clone());
            prove(&vanilla, &o).unwrap().proof
        })
        .collect();
    assert_eq!(proofs[0].len(), 192);
    assert_eq!(proofs[0], proofs[1], "native and gadget witness");
    assert_eq!(
        proofs[0], proofs[2],
        "native witness and reference synthesis"
    );
}

/// The compiled circuit's gadget witness (one synthesis of the whole partition) and native
/// witness, a, b, c and densities equal bellperson's own synthesis of filecoin's circuit,
/// exactly; a witness with one value changed fails the R1CS check. Prints the witnesses' cost.
#[test]
fn compiled_snap_circuit_equals_the_reference_synthesis() {
    let f = fixture();
    let pp = PublicParams::from_sector_size(2048);
    let vanilla: PartitionProof<SectorShape2KiB> =
        bincode::deserialize(&f.vanilla_proofs().unwrap()[0]).unwrap();
    let inputs = PublicInputs {
        k: 1,
        comm_r_old: filecoin_proofs::as_safe_commitment(&f.comm_r_old, "comm_r_old").unwrap(),
        comm_d_new: filecoin_proofs::as_safe_commitment(&f.comm_d_new, "comm_d_new").unwrap(),
        comm_r_new: filecoin_proofs::as_safe_commitment(&f.comm_r_new, "comm_r_new").unwrap(),
        h: storage_proofs_update::constants::h_default(pp.sector_nodes),
    };
    type C = EmptySectorUpdateCompound<SectorShape2KiB>;
    let circuit = || {
        <C as CompoundProof<'_, EmptySectorUpdate<SectorShape2KiB>, _>>::circuit(
            &inputs,
            (),
            &vanilla,
            &pp,
            Some(0),
        )
        .unwrap()
    };
    let t = Instant::now();
    let cc = cuzk::circuit::snap::compile::<SectorShape2KiB>(&pp).unwrap();
    let t_compile = t.elapsed();
    let t = Instant::now();
    let reference = cuzk::synth::Assignment::synthesize(circuit()).unwrap();
    let t_reference = t.elapsed();
    let mut w = cuzk::circuit::Witness::default();
    let t = Instant::now();
    cuzk::circuit::snap::witness_into(&cc.layout, circuit(), 0, &mut w).unwrap();
    let t_witness = t.elapsed();
    assert_eq!(w.input, reference.input, "inputs");
    let public =
        <C as CompoundProof<'_, EmptySectorUpdate<SectorShape2KiB>, _>>::generate_public_inputs(
            &inputs,
            &pp,
            Some(0),
        )
        .unwrap();
    assert_eq!(
        w.input[1..],
        public[..],
        "the public inputs the verifier takes"
    );
    assert_eq!(w.aux.len(), reference.aux.len());
    let first = w.aux.iter().zip(&reference.aux).position(|(a, b)| a != b);
    assert_eq!(first, None, "first differing aux value");
    // The native witness, value for value; its own counts are the recorded layout's.
    let mut native = cuzk::circuit::Witness::default();
    let t = Instant::now();
    cuzk::circuit::native::snap::witness_into(&cc.layout, &inputs, &vanilla, &pp, 0, &mut native)
        .unwrap();
    let t_native = t.elapsed();
    assert_eq!(native.input, w.input, "native inputs");
    let first = native.aux.iter().zip(&w.aux).position(|(a, b)| a != b);
    assert_eq!(
        (native.aux.len(), first),
        (w.aux.len(), None),
        "native aux values"
    );
    let counted = cuzk::circuit::native::snap::counted_layout::<SectorShape2KiB>(&pp).unwrap();
    assert_eq!(layout_counts(&counted), layout_counts(&cc.layout));
    let asg = cc.evaluate(w.clone()).unwrap();
    assert_eq!(asg.a.len(), 1_705_044);
    assert!(asg.a == reference.a, "a = A·z");
    assert!(asg.b == reference.b, "b = B·z");
    assert!(asg.c == reference.c, "c = C·z");
    assert_eq!(asg.a_aux_density, reference.a_aux_density);
    assert_eq!(asg.b_input_density, reference.b_input_density);
    assert_eq!(asg.b_aux_density, reference.b_aux_density);
    cuzk::prover::check_satisfied(&asg, 0).unwrap();
    // A leaf of challenge 7 changed: the R1CS check refuses it.
    let mut bad = w;
    bad.aux[cc.layout.challenge_aux(7).start + 100] += Fr::from(1u64);
    let e = cuzk::prover::check_satisfied(&cc.evaluate(bad).unwrap(), 0).unwrap_err();
    assert_eq!(e.code(), 500, "{e}");
    eprintln!(
        "2 KiB snap partition: {} constraints, {} aux; recorded in {:.2} s, reference synthesis \
         {:.2} s, gadget witness {:.2} s (one core: {:.3} µs per constraint), native witness \
         {:.3} s",
        asg.a.len(),
        asg.aux.len(),
        t_compile.as_secs_f64(),
        t_reference.as_secs_f64(),
        t_witness.as_secs_f64(),
        t_witness.as_secs_f64() * 1e6 / asg.a.len() as f64,
        t_native.as_secs_f64()
    );
}

/// Real-shape 8 MiB inputs (`cuzk_dev::snapgen`: 4 partitions of 10 challenges, 128 apex
/// leaves, a partition path of 2 levels): the native witness of the first and the last
/// partition equals the gadgets' value for value, with the recorded layout, whose counts are
/// the native routine's own.
#[test]
fn native_witness_equals_the_gadgets_on_real_8mib_inputs() {
    use filecoin_proofs::constants::SectorShape8MiB;
    use filecoin_proofs_api::RegisteredUpdateProof;
    type Tree = SectorShape8MiB;
    let proof = RegisteredUpdateProof::StackedDrg8MiBV1;
    let snap = cuzk_dev::snapgen::generate(proof, [9; 32]).unwrap();
    let pp = PublicParams::from_sector_size(8 << 20);
    use filecoin_proofs::as_safe_commitment as commitment;
    let inputs = PublicInputs {
        k: pp.partition_count,
        comm_r_old: commitment(&snap.comm_r_old, "comm_r_old").unwrap(),
        comm_d_new: commitment(&snap.comm_d_new, "comm_d_new").unwrap(),
        comm_r_new: commitment(&snap.comm_r_new, "comm_r_new").unwrap(),
        h: filecoin_proofs::SectorUpdateConfig::from_porep_config(&proof.as_v1_config()).h,
    };
    let layout = cuzk::circuit::snap::layout::<Tree>(&pp).unwrap();
    let counted = cuzk::circuit::native::snap::counted_layout::<Tree>(&pp).unwrap();
    assert_eq!(layout_counts(&counted), layout_counts(&layout));
    type C = EmptySectorUpdateCompound<Tree>;
    for k in [0, pp.partition_count - 1] {
        let vanilla: PartitionProof<Tree> = bincode::deserialize(&snap.vanilla_proofs[k]).unwrap();
        let circuit = <C as CompoundProof<'_, EmptySectorUpdate<Tree>, _>>::circuit(
            &inputs,
            (),
            &vanilla,
            &pp,
            Some(k),
        )
        .unwrap();
        let mut gadget = cuzk::circuit::Witness::default();
        cuzk::circuit::snap::witness_into(&layout, circuit, k, &mut gadget).unwrap();
        let mut native = cuzk::circuit::Witness::default();
        cuzk::circuit::native::snap::witness_into(&layout, &inputs, &vanilla, &pp, k, &mut native)
            .unwrap();
        assert_eq!(native.input, gadget.input, "partition {k}: inputs");
        let first = native.aux.iter().zip(&gadget.aux).position(|(a, b)| a != b);
        assert_eq!(
            (native.aux.len(), first),
            (gadget.aux.len(), None),
            "partition {k}: aux values"
        );
    }
}

#[test]
fn bad_snap_input_gets_typed_errors_before_proving() {
    let f = fixture();
    let o = ProveOptions::default();
    let vanilla = f.vanilla_proofs().unwrap();
    let v: Vec<&[u8]> = vanilla.iter().map(Vec::as_slice).collect();
    let e = new_engine();
    let code = |r: SnapRequest<'_>| {
        let c = cuzk::snap::check(&r).unwrap_err().code();
        assert_eq!(e.prove_snap_deals(&r, &o).unwrap_err().code(), c);
        c
    };
    let good = request(f, &v);
    cuzk::snap::check(&good).unwrap();
    assert_eq!(
        code(SnapRequest {
            vanilla_proofs: &[v[0], v[0]],
            ..good
        }),
        101,
        "two vanilla proofs for one partition"
    );
    assert_eq!(
        code(SnapRequest {
            vanilla_proofs: &[],
            ..good
        }),
        101,
        "no vanilla proofs"
    );
    let mut other = f.comm_r_new;
    other[0] ^= 1;
    assert_eq!(
        code(SnapRequest {
            comm_r_new: &other,
            ..good
        }),
        101,
        "another comm_r_new: the vanilla proofs do not verify"
    );
    assert_eq!(
        code(SnapRequest {
            comm_r_old: &f.comm_d_new,
            ..good
        }),
        101,
        "comm_d_new as comm_r_old"
    );
    assert_eq!(
        code(SnapRequest {
            comm_d_new: &f.comm_d_new[..31],
            ..good
        }),
        101,
        "31-byte comm_d_new"
    );
    for (n, size) in [(UPDATE_2KIB, Some(8 << 20)), (1, None), (3, Some(32 << 30))] {
        assert_eq!(
            code(SnapRequest {
                registered_proof: n,
                sector_size: size,
                ..good
            }),
            101,
            "proof type {n}, sector size {size:?}"
        );
    }
    let cut = [&v[0][..v[0].len() / 2]];
    assert_eq!(
        code(SnapRequest {
            vanilla_proofs: &cut,
            ..good
        }),
        100,
        "truncated vanilla proof"
    );
    let mut long = v[0].to_vec();
    long.extend_from_slice(b"garbage!");
    let long = [long.as_slice()];
    assert_eq!(
        code(SnapRequest {
            vanilla_proofs: &long,
            ..good
        }),
        100,
        "bytes after a whole vanilla proof"
    );
    // A byte of a Merkle path changed: decodes, does not verify.
    let mut bent = vanilla[0].clone();
    let n = bent.len();
    bent[n - 40] ^= 0x01;
    assert!(
        matches!(
            code(SnapRequest {
                vanilla_proofs: &[&bent],
                ..good
            }),
            100 | 101
        ),
        "damaged vanilla proof"
    );
    // Nothing was proved: no parameters were read.
    assert_eq!(e.param_loads(), 0);
}

/// `cuzk_prove_snap_deals` on `vanilla` (pointer and length arrays built from it) and the
/// commitments; checks that a failed call leaves `*out` NULL.
fn prove_c(
    engine: *const cuzk::ffi::CuzkEngine,
    registered_proof: u64,
    vanilla: &[&[u8]],
    [r_old, r_new, d_new]: [&[u8]; 3],
    sector_size: u64,
) -> (cuzk::ffi::CuzkStatus, *mut cuzk::ffi::CuzkResult) {
    use cuzk::ffi::*;
    let ptrs: Vec<*const u8> = vanilla.iter().map(|v| v.as_ptr()).collect();
    let lens: Vec<usize> = vanilla.iter().map(|v| v.len()).collect();
    let mut out: *mut CuzkResult = std::ptr::NonNull::dangling().as_ptr();
    // SAFETY: engine is live (or NULL, which the call refuses); ptrs/lens hold vanilla.len()
    // entries pointing into live slices; the commitments are live slices; out is a live
    // out-pointer.
    let s = unsafe {
        cuzk_prove_snap_deals(
            engine,
            registered_proof,
            ptrs.as_ptr(),
            lens.as_ptr(),
            vanilla.len(),
            r_old.as_ptr(),
            r_old.len(),
            r_new.as_ptr(),
            r_new.len(),
            d_new.as_ptr(),
            d_new.len(),
            sector_size,
            &mut out,
        )
    };
    if s != CuzkStatus::OK {
        assert!(out.is_null(), "a failed call must set *out to NULL");
    }
    (s, out)
}

fn last_error() -> String {
    let mut buf = vec![0 as std::ffi::c_char; 4096];
    // SAFETY: buf is a live buffer of buf.len() bytes.
    let n = unsafe { cuzk::ffi::cuzk_last_error_message(buf.as_mut_ptr(), buf.len()) };
    String::from_utf8(buf[..n].iter().map(|&c| c as u8).collect()).unwrap()
}

#[test]
fn c_abi_proves_snap_deals_and_refuses_bad_arguments() {
    use cuzk::ffi::*;
    let f = fixture();
    let dir = std::ffi::CString::new(f.param_dir.to_str().unwrap()).unwrap();
    let mut o = std::mem::MaybeUninit::<CuzkOptions>::uninit();
    // SAFETY: o is valid for writing size_of::<CuzkOptions>() bytes.
    let s = unsafe { cuzk_options_init(o.as_mut_ptr(), std::mem::size_of::<CuzkOptions>()) };
    assert_eq!(s, CuzkStatus::OK, "{}", last_error());
    // SAFETY: cuzk_options_init wrote the whole struct.
    let mut opts = unsafe { o.assume_init() };
    opts.backend = CuzkBackend::CPU as i32;
    opts.parameter_dir = dir.as_ptr();
    let mut engine = std::ptr::null_mut();
    // SAFETY: opts is valid and its parameter_dir string outlives the call; engine is a live
    // out-pointer.
    let s = unsafe { cuzk_engine_new(&opts, &mut engine) };
    assert_eq!(s, CuzkStatus::OK, "{}", last_error());

    let vanilla = f.vanilla_proofs().unwrap();
    let v: Vec<&[u8]> = vanilla.iter().map(Vec::as_slice).collect();
    let comms: [&[u8]; 3] = [&f.comm_r_old, &f.comm_r_new, &f.comm_d_new];
    // Curio's proof-share jobs send sector size 0: the proof type's.
    let (s, r) = prove_c(engine, UPDATE_2KIB, &v, comms, 0);
    assert_eq!(s, CuzkStatus::OK, "{}", last_error());
    // SAFETY: r is a live result of the call above, freed below.
    let res = unsafe { &*r };
    assert_eq!((res.proof_len, res.partitions_len), (192, 1));
    assert!(res.verified);
    // SAFETY: r came from the call above and is freed once.
    unsafe { cuzk_result_free(r) };
    let short: [&[u8]; 3] = [&f.comm_r_old, &f.comm_r_new[..31], &f.comm_d_new];
    for (what, s) in [
        (
            "31-byte comm_r_new",
            prove_c(engine, UPDATE_2KIB, &v, short, 0).0,
        ),
        (
            "8 MiB sector size",
            prove_c(engine, UPDATE_2KIB, &v, comms, 8 << 20).0,
        ),
        (
            "two vanilla proofs",
            prove_c(engine, UPDATE_2KIB, &[v[0], v[0]], comms, 0).0,
        ),
        ("32 GiB proof type", prove_c(engine, 3, &v, comms, 0).0),
    ] {
        assert_eq!(s, CuzkStatus::INVALID_INPUT, "{what}: {}", last_error());
    }
    let (s, _) = prove_c(engine, UPDATE_2KIB, &[&[0xa5; 64]], comms, 0);
    assert_eq!(s, CuzkStatus::MALFORMED_INPUT, "{}", last_error());
    let (s, _) = prove_c(std::ptr::null(), UPDATE_2KIB, &v, comms, 0);
    assert_eq!(s, CuzkStatus::INVALID_CONFIG);
    // SAFETY: engine came from cuzk_engine_new, no call uses it any more.
    unsafe { cuzk_engine_free(engine) };
}
