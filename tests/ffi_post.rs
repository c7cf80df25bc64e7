//! The C ABI's PoSt calls (`cuzk_prove_window_post`, `cuzk_prove_winning_post`) called from
//! Rust on the 2 KiB PoSt fixture (CPU): a verified 192-byte proof of each kind, and typed
//! statuses for bad arguments. Calling `extern "C"` functions with raw pointers is `unsafe`:
//! each call says why its pointers are valid.

use std::ffi::{c_char, CString};
use std::ptr;

use cuzk::ffi::*;
use cuzk::ProofKind;
use cuzk_dev::post_fixture::{
    default_post_fixture_dir, ensure_post_fixture, number_2kib, PostFixture, RANDOMNESS,
};

fn last_error() -> String {
    let mut buf = vec![0 as c_char; 4096];
    // SAFETY: buf is a live buffer of buf.len() bytes.
    let n = unsafe { cuzk_last_error_message(buf.as_mut_ptr(), buf.len()) };
    String::from_utf8(buf[..n].iter().map(|&c| c as u8).collect()).unwrap()
}

/// An engine with the CPU backend and the fixture's parameters.
fn cpu_engine(f: &PostFixture) -> *mut CuzkEngine {
    let dir = CString::new(f.param_dir.to_str().unwrap()).unwrap();
    let mut o = std::mem::MaybeUninit::<CuzkOptions>::uninit();
    // SAFETY: o is valid for writing size_of::<CuzkOptions>() bytes.
    let s = unsafe { cuzk_options_init(o.as_mut_ptr(), std::mem::size_of::<CuzkOptions>()) };
    assert_eq!(s, CuzkStatus::OK, "{}", last_error());
    // SAFETY: cuzk_options_init wrote the whole struct.
    let mut opts = unsafe { o.assume_init() };
    opts.backend = CuzkBackend::CPU as i32;
    opts.parameter_dir = dir.as_ptr();
    let mut engine = ptr::null_mut();
    // SAFETY: opts is valid and its parameter_dir string outlives the call; engine is a live
    // out-pointer.
    let s = unsafe { cuzk_engine_new(&opts, &mut engine) };
    assert_eq!(s, CuzkStatus::OK, "{}", last_error());
    engine
}

/// Calls the C function of `kind` on `vanilla` (pointer and length arrays built from it);
/// `null_arrays` passes NULL arrays with the count of `vanilla`.
fn prove(
    engine: *const CuzkEngine,
    kind: ProofKind,
    vanilla: &[Vec<u8>],
    randomness: &[u8],
    prover_id: &[u8],
    null_arrays: bool,
) -> (CuzkStatus, *mut CuzkResult) {
    let ptrs: Vec<*const u8> = vanilla.iter().map(|v| v.as_ptr()).collect();
    let lens: Vec<usize> = vanilla.iter().map(Vec::len).collect();
    let (p, l) = if null_arrays {
        (ptr::null(), ptr::null())
    } else {
        (ptrs.as_ptr(), lens.as_ptr())
    };
    let mut out: *mut CuzkResult = ptr::NonNull::dangling().as_ptr();
    let n = number_2kib(kind);
    // SAFETY: engine is live; ptrs/lens hold vanilla.len() entries pointing into live vectors
    // (or are NULL, which the call must refuse); the other slices are live; out is a live
    // out-pointer.
    let s = unsafe {
        match kind {
            ProofKind::WinningPost => cuzk_prove_winning_post(
                engine,
                n,
                p,
                l,
                vanilla.len(),
                randomness.as_ptr(),
                randomness.len(),
                prover_id.as_ptr(),
                prover_id.len(),
                &mut out,
            ),
            _ => cuzk_prove_window_post(
                engine,
                n,
                p,
                l,
                vanilla.len(),
                randomness.as_ptr(),
                randomness.len(),
                prover_id.as_ptr(),
                prover_id.len(),
                0,
                &mut out,
            ),
        }
    };
    if s != CuzkStatus::OK {
        assert!(out.is_null(), "a failed call must set *out to NULL");
    }
    (s, out)
}

#[test]
fn post_calls_of_the_c_abi_prove_and_refuse_bad_arguments() {
    let _ = env_logger::builder().is_test(true).try_init();
    let f = ensure_post_fixture(&default_post_fixture_dir()).expect("2 KiB PoSt fixture");
    let engine = cpu_engine(&f);
    for kind in [ProofKind::WinningPost, ProofKind::WindowPost] {
        let vanilla = f.vanilla_proofs(kind, &RANDOMNESS).unwrap();
        let (s, r) = prove(engine, kind, &vanilla, &RANDOMNESS, &f.prover_id, false);
        assert_eq!(s, CuzkStatus::OK, "{kind}: {}", last_error());
        // SAFETY: r is a live result of the call above, freed below.
        let res = unsafe { &*r };
        assert_eq!(res.proof_len, 192, "{kind}");
        assert_eq!(res.partitions_len, 1);
        assert!(res.verified);
        // SAFETY: r came from the call above and is freed once.
        unsafe { cuzk_result_free(r) };

        let (s, _) = prove(
            engine,
            kind,
            &vanilla,
            &RANDOMNESS[..31],
            &f.prover_id,
            false,
        );
        assert_eq!(s, CuzkStatus::INVALID_INPUT, "{kind}: {}", last_error());
        assert!(last_error().contains("randomness"), "{}", last_error());
        let (s, _) = prove(engine, kind, &vanilla, &RANDOMNESS, &f.prover_id, true);
        assert_eq!(s, CuzkStatus::INVALID_CONFIG, "{kind}: {}", last_error());
        let (s, _) = prove(engine, kind, &[], &RANDOMNESS, &f.prover_id, false);
        assert_eq!(s, CuzkStatus::INVALID_INPUT, "{kind}: {}", last_error());
        let (s, _) = prove(
            engine,
            kind,
            &vanilla,
            &RANDOMNESS,
            &f.prover_id[..8],
            false,
        );
        assert_eq!(s, CuzkStatus::INVALID_PROVER_ID, "{kind}: {}", last_error());
        let garbage = vec![vec![0xa5u8; 64]];
        let (s, _) = prove(engine, kind, &garbage, &RANDOMNESS, &f.prover_id, false);
        assert_eq!(s, CuzkStatus::MALFORMED_INPUT, "{kind}: {}", last_error());
    }
    let (s, _) = prove(
        ptr::null(),
        ProofKind::WinningPost,
        &[],
        &RANDOMNESS,
        &f.prover_id,
        false,
    );
    assert_eq!(s, CuzkStatus::INVALID_CONFIG);
    // SAFETY: engine came from cuzk_engine_new, no call uses it any more.
    unsafe { cuzk_engine_free(engine) };
}
