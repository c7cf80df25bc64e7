//! The C ABI called directly from Rust (the `extern "C"` functions of `cuzk::ffi`): argument
//! checks, per-thread error messages, and the panic boundary.
//!
//! ```text
//! cargo test --release --test ffi_abi
//! ```
//!
//! The panic test (feature `test-hooks`) proves the 2 KiB fixture (CPU, ~1 minute; the fixture itself takes ~10
//! minutes the first time, see `cuzk_dev::fixture`). Calling `extern "C"` functions with raw pointers
//! is `unsafe`: each call says why its pointers are valid.

use std::ffi::{c_char, CString};
use std::ptr;

use cuzk::c1::prover_id_from_actor_id;
use cuzk::ffi::*;

fn last_error() -> String {
    let mut buf = vec![0 as c_char; 4096];
    // SAFETY: buf is a live buffer of buf.len() bytes.
    let n = unsafe { cuzk_last_error_message(buf.as_mut_ptr(), buf.len()) };
    assert!(n < buf.len(), "message longer than the test buffer");
    let bytes: Vec<u8> = buf[..n].iter().map(|&c| c as u8).collect();
    String::from_utf8(bytes).expect("messages are UTF-8")
}

/// The defaults of `cuzk_options_init`.
fn default_options() -> CuzkOptions {
    let mut o = std::mem::MaybeUninit::<CuzkOptions>::uninit();
    // SAFETY: o is valid for writing size_of::<CuzkOptions>() bytes.
    let s = unsafe { cuzk_options_init(o.as_mut_ptr(), std::mem::size_of::<CuzkOptions>()) };
    assert_eq!(s, CuzkStatus::OK, "{}", last_error());
    // SAFETY: cuzk_options_init wrote the whole struct.
    unsafe { o.assume_init() }
}

/// An engine with the CPU backend and `parameter_dir`.
fn cpu_engine(parameter_dir: Option<&std::path::Path>) -> *mut CuzkEngine {
    let dir = parameter_dir.map(|d| CString::new(d.to_str().unwrap()).unwrap());
    let mut opts = default_options();
    opts.backend = CuzkBackend::CPU as i32;
    opts.parameter_dir = dir.as_ref().map_or(ptr::null(), |d| d.as_ptr());
    let mut engine = ptr::null_mut();
    // SAFETY: opts is a valid options struct whose parameter_dir string outlives the call;
    // engine is a live out-pointer.
    let s = unsafe { cuzk_engine_new(&opts, &mut engine) };
    assert_eq!(s, CuzkStatus::OK, "{}", last_error());
    assert!(!engine.is_null());
    engine
}

/// Proves `c1` with `engine`; returns the status and the result (NULL on failure).
fn prove(
    engine: *const CuzkEngine,
    c1: &[u8],
    sector_id: u64,
    prover_id: &[u8],
) -> (CuzkStatus, *mut CuzkResult) {
    let mut out: *mut CuzkResult = ptr::NonNull::dangling().as_ptr(); // must become NULL or a result
                                                                      // SAFETY: engine is NULL or live; the slices are live for the call; out is a live
                                                                      // out-pointer.
    let s = unsafe {
        cuzk_prove_porep_c2(
            engine,
            c1.as_ptr(),
            c1.len(),
            sector_id,
            prover_id.as_ptr(),
            prover_id.len(),
            &mut out,
        )
    };
    if s != CuzkStatus::OK {
        assert!(out.is_null(), "a failed call must set *out to NULL");
    }
    (s, out)
}

#[test]
fn statuses_of_bad_arguments() {
    // Prover ids: LEB128 of the actor id, as the fixture and filecoin-ffi build them.
    let mut id = [0xaa_u8; CUZK_PROVER_ID_LEN];
    // SAFETY: id has room for 32 bytes.
    assert_eq!(
        unsafe { cuzk_prover_id_from_actor_id(1000, id.as_mut_ptr()) },
        CuzkStatus::OK
    );
    assert_eq!(&id[..3], &[0xe8, 0x07, 0x00]);
    assert_eq!(id, prover_id_from_actor_id(1000));
    assert_eq!(last_error(), "");
    // SAFETY: NULL is allowed (and rejected).
    let s = unsafe { cuzk_prover_id_from_actor_id(1000, ptr::null_mut()) };
    assert_eq!(s, CuzkStatus::INVALID_CONFIG);
    assert!(last_error().contains("out"), "{}", last_error());

    // Engines.
    // SAFETY: NULL options mean the defaults; NULL out is rejected.
    assert_eq!(
        unsafe { cuzk_engine_new(ptr::null(), ptr::null_mut()) },
        CuzkStatus::INVALID_CONFIG
    );
    let mut opts = default_options();
    opts.backend = 9;
    let mut engine: *mut CuzkEngine = ptr::NonNull::dangling().as_ptr();
    // SAFETY: opts is valid; engine is a live out-pointer.
    assert_eq!(
        unsafe { cuzk_engine_new(&opts, &mut engine) },
        CuzkStatus::INVALID_CONFIG
    );
    assert!(engine.is_null());
    assert!(last_error().contains("backend"), "{}", last_error());
    // SAFETY: NULL handles are no-ops.
    unsafe {
        cuzk_engine_free(ptr::null_mut());
        cuzk_result_free(ptr::null_mut());
    }

    // Proving with bad arguments (nothing reaches the parameters).
    let pid = prover_id_from_actor_id(1000);
    assert_eq!(
        prove(ptr::null(), b"{}", 1, &pid).0,
        CuzkStatus::INVALID_CONFIG
    );
    assert!(last_error().contains("engine"), "{}", last_error());
    let engine = cpu_engine(Some(std::path::Path::new("/nonexistent/cuzk-ffi-abi")));
    let (s, _) = prove(engine, b"{\"not\": \"c1", 1, &pid);
    assert_eq!(s, CuzkStatus::MALFORMED_INPUT, "{}", last_error());
    let mut out = ptr::null_mut();
    // SAFETY: c1_json is NULL with a non-zero length (rejected before any read); the other
    // pointers are live.
    let s = unsafe { cuzk_prove_porep_c2(engine, ptr::null(), 5, 1, pid.as_ptr(), 32, &mut out) };
    assert_eq!(s, CuzkStatus::INVALID_CONFIG);
    assert_eq!(
        last_error(),
        "invalid configuration c1_json=\"NULL\": must not be NULL when c1_len is 5"
    );
    // SAFETY: out is NULL (rejected); the buffers are live.
    let s = unsafe {
        cuzk_prove_porep_c2(
            engine,
            b"{}".as_ptr(),
            2,
            1,
            pid.as_ptr(),
            32,
            ptr::null_mut(),
        )
    };
    assert_eq!(s, CuzkStatus::INVALID_CONFIG);
    // SAFETY: engine came from cuzk_engine_new and is not used afterwards.
    unsafe { cuzk_engine_free(engine) };
}

#[test]
fn error_messages_are_per_thread() {
    let engine = cpu_engine(None);
    struct Handle(*mut CuzkEngine);
    // SAFETY: cuzk_engine_t is documented thread-safe; the engine outlives the threads.
    unsafe impl Send for Handle {}
    unsafe impl Sync for Handle {}
    let h = Handle(engine);
    std::thread::scope(|scope| {
        for k in 1..=8usize {
            let h = &h;
            scope.spawn(move || {
                for _ in 0..50 {
                    let mut out = ptr::null_mut();
                    // SAFETY: c1_json is NULL with length k (rejected before any read); the
                    // engine is live; out is a live out-pointer.
                    let s = unsafe {
                        cuzk_prove_porep_c2(h.0, ptr::null(), k, 1, ptr::null(), 0, &mut out)
                    };
                    assert_eq!(s, CuzkStatus::INVALID_CONFIG);
                    assert_eq!(
                        last_error(),
                        format!(
                            "invalid configuration c1_json=\"NULL\": must not be NULL when \
                             c1_len is {k}"
                        )
                    );
                }
            });
        }
    });
    // SAFETY: engine came from cuzk_engine_new; the threads have ended.
    unsafe { cuzk_engine_free(engine) };
}

/// Needs the test hook `cuzk_test_inject_panic` (feature `test-hooks`; scripts/test.sh enables
/// it).
#[cfg(feature = "test-hooks")]
#[test]
fn a_panic_is_status_901_with_its_message_and_the_engine_stays_usable() {
    use cuzk::engine::INJECTED_PANIC_MESSAGE;
    use cuzk_dev::fixture::{default_fixture_dir, ensure_2kib_fixture};
    let _ = env_logger::builder().is_test(true).try_init();
    let fixture = ensure_2kib_fixture(&default_fixture_dir()).expect("2 KiB fixture");
    let c1 = fixture.read_c1().unwrap();
    let engine = cpu_engine(Some(&fixture.param_dir));

    // SAFETY: engine is live.
    assert_eq!(unsafe { cuzk_test_inject_panic(engine) }, CuzkStatus::OK);
    let (s, out) = prove(engine, &c1, fixture.sector_id, &fixture.prover_id);
    assert_eq!(s, CuzkStatus::PANIC);
    assert_eq!(s as i32, 901);
    assert!(out.is_null());
    let msg = last_error();
    assert!(
        msg.contains(INJECTED_PANIC_MESSAGE),
        "message {msg:?} lacks the panic's"
    );

    // The same engine proves the next call.
    let (s, out) = prove(engine, &c1, fixture.sector_id, &fixture.prover_id);
    assert_eq!(s, CuzkStatus::OK, "{}", last_error());
    assert_eq!(last_error(), "");
    // SAFETY: out is a live result from cuzk_prove_porep_c2; its pointers and lengths describe
    // live arrays until cuzk_result_free.
    let (proof, partitions) = unsafe {
        let r = &*out;
        (
            std::slice::from_raw_parts(r.proof, r.proof_len).to_vec(),
            std::slice::from_raw_parts(r.partitions, r.partitions_len)
                .iter()
                .map(|p| (p.index, p.backend, p.device))
                .collect::<Vec<_>>(),
        )
    };
    // SAFETY: out came from cuzk_prove_porep_c2 and is freed once.
    unsafe { cuzk_result_free(out) };
    assert_eq!(partitions, vec![(0, CuzkBackend::CPU, -1)]);
    assert_eq!(proof.len(), CUZK_PROOF_BYTES_PER_PARTITION);
    assert!(
        fixture.verify(&proof).expect("verify_seal ran"),
        "the proof does not verify"
    );
    // SAFETY: engine came from cuzk_engine_new and is not used afterwards.
    unsafe { cuzk_engine_free(engine) };
}
