//! The C ABI of cuzk (`include/cuzk.h`, generated from this file by cbindgen).
//!
//! This module holds the C ABI only: it converts C arguments into calls of the Rust API
//! ([`crate::Engine`]) and the results back, and nothing else.
//!
//! # Conventions
//!
//! * Every name is prefixed `cuzk_`. Handles are opaque (`cuzk_engine_t`) with a `_new` / `_free`
//!   pair; results (`cuzk_result_t`) are owned by the caller and released with their `_free`.
//! * Inputs come first (`const`), out-parameters last; sizes are `size_t`.
//! * Every function that can fail returns a [`CuzkStatus`] (`cuzk_status_t`): `CUZK_STATUS_OK`
//!   (0) or the stable code of [`crate::Error::code`] - 1xx input, 2xx parameters, 3xx device,
//!   4xx out of memory, 5xx proving, 9xx internal (901: a panic caught at the boundary).
//! * **Error messages** are kept per OS thread: every function returning a `cuzk_status_t`
//!   replaces the calling thread's last-error message - with the error's text on failure, with
//!   the empty string on success - and [`cuzk_last_error_message`] copies it out. Read it on the
//!   thread that made the failing call, before the next status-returning call on that thread.
//!   (Go: run the call and the read inside one `runtime.LockOSThread` section; the wrapper in
//!   `examples/go` does.)
//! * `NULL` is never dereferenced: a `NULL` handle, buffer (of non-zero length) or
//!   out-parameter is the input error `CUZK_STATUS_INVALID_CONFIG` (104) naming the argument.
//!   A `NULL` buffer with length 0 is an empty buffer (and fails as such: an empty C1 output is
//!   `CUZK_STATUS_MALFORMED_INPUT`, an empty prover id `CUZK_STATUS_INVALID_PROVER_ID`);
//!   `NULL` options mean the defaults; freeing `NULL` does nothing.
//! * Functions without a status (`_free`, `cuzk_last_error_message`) leave the last-error
//!   message alone.
//! * Option structs grow without breaking the ABI: `cuzk_options_t` starts with its size
//!   (`struct_size`, set by `cuzk_options_init`); see that struct.
//! * No panic crosses the boundary: every exported function body runs in one helper
//!   (`boundary`, a `catch_unwind`); a panic becomes `CUZK_STATUS_PANIC` with the panic's
//!   message (a panic in a function without a status is recorded as its message too). The library
//!   must therefore be built with unwinding panics (the default; not `panic = "abort"`).
//! * Thread safety: one engine may be used by many threads at once (`cuzk_prove_porep_c2`,
//!   `cuzk_prove_window_post`, `cuzk_prove_winning_post` and `cuzk_prove_snap_deals` are
//!   reentrant); results are independent objects. Freeing (`cuzk_engine_free`,
//!   `cuzk_result_free`) must not race with other uses of the same object.
//!
//! # Linking
//!
//! `cargo build --release` writes the static library `target/release/libcuzk.a` (and
//! `libcuzk.so`). A C program links it with the system libraries Rust's standard library needs:
//! `cc prog.c -Iinclude target/release/libcuzk.a -lpthread -ldl -lm -lrt -lgcc_s -lutil -lc`
//! (`cargo rustc --release --lib --crate-type staticlib -- --print native-static-libs` prints
//! the exact list; builds with the `cuda` feature also need `-lcuda`).

// Raw pointers are only dereferenced in this module, each with a `// SAFETY:` line.
use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::{Backend, EngineConfig, ProveOptions};
use crate::engine::{C2Output, Engine};
use crate::error::{Error, Result};
use crate::progress::Stage;

/// Length of a prover id in bytes.
pub const CUZK_PROVER_ID_LEN: usize = 32;

/// Length of one partition's Groth16 proof in bytes (compressed A || B || C).
pub const CUZK_PROOF_BYTES_PER_PARTITION: usize = 192;

/// cbindgen:rename-all=prefix:CUZK_STATUS_
/// Status of a cuzk call: `CUZK_STATUS_OK` (0) or an error code, grouped by origin.
///
/// The numbers are stable (those of the Rust `cuzk::Error::code()`): 1xx input, 2xx
/// parameters, 3xx device, 4xx out of memory, 5xx proving, 9xx internal. New codes may be added
/// within a group; a caller should treat an unknown code by its hundreds. The message of the last
/// failure on the calling thread is read with `cuzk_last_error_message`.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CuzkStatus {
    /// Success.
    OK = 0,
    /// The C1 output is not valid JSON of the expected shape (or the wrapper's base64 is bad).
    MALFORMED_INPUT = 100,
    /// The C1 output is well formed but inconsistent.
    INVALID_INPUT = 101,
    /// The prover id is not 32 bytes.
    INVALID_PROVER_ID = 102,
    /// The C1 output's proof type is not one cuzk can prove.
    UNSUPPORTED_PROOF = 103,
    /// An option, environment variable or argument (e.g. a `NULL` handle) cannot be used.
    INVALID_CONFIG = 104,
    /// A Groth16 parameter or verifying-key file is missing.
    PARAMETERS_NOT_FOUND = 200,
    /// A Groth16 parameter file is truncated, corrupt or for another circuit.
    PARAMETERS_INVALID = 201,
    /// The GPU backend was requested but no usable device exists.
    NO_DEVICE = 300,
    /// A device exists but cannot run cuzk's kernels.
    DEVICE_UNSUPPORTED = 301,
    /// A CUDA driver call failed.
    CUDA = 302,
    /// Not enough device memory, even for the smallest tier.
    OUT_OF_DEVICE_MEMORY = 400,
    /// The host-memory budget does not allow even one partition.
    OUT_OF_HOST_MEMORY = 401,
    /// Circuit synthesis failed.
    SYNTHESIS = 500,
    /// A produced proof failed self-verification (never returned as a result).
    VERIFICATION_FAILED = 501,
    /// The call was cancelled; no proof.
    CANCELLED = 502,
    /// I/O error outside parameter files.
    IO = 900,
    /// A panic was caught at the C boundary (a bug in cuzk); the engine stays usable.
    PANIC = 901,
    /// Any other internal error (a bug in cuzk or a dependency).
    INTERNAL = 902,
}

impl CuzkStatus {
    /// The status of an error: the same number as [`Error::code`]. The match is exhaustive, so
    /// a new [`Error`] variant does not compile until it has a status here.
    pub fn of(e: &Error) -> CuzkStatus {
        match e {
            Error::MalformedInput(_) => CuzkStatus::MALFORMED_INPUT,
            Error::InvalidInput(_) => CuzkStatus::INVALID_INPUT,
            Error::InvalidProverId { .. } => CuzkStatus::INVALID_PROVER_ID,
            Error::UnsupportedProof(_) => CuzkStatus::UNSUPPORTED_PROOF,
            Error::InvalidConfig { .. } => CuzkStatus::INVALID_CONFIG,
            Error::ParametersNotFound { .. } => CuzkStatus::PARAMETERS_NOT_FOUND,
            Error::ParametersInvalid { .. } => CuzkStatus::PARAMETERS_INVALID,
            Error::NoDevice(_) => CuzkStatus::NO_DEVICE,
            Error::DeviceUnsupported { .. } => CuzkStatus::DEVICE_UNSUPPORTED,
            Error::Cuda { .. } => CuzkStatus::CUDA,
            Error::OutOfDeviceMemory { .. } => CuzkStatus::OUT_OF_DEVICE_MEMORY,
            Error::OutOfHostMemory { .. } => CuzkStatus::OUT_OF_HOST_MEMORY,
            Error::Synthesis { .. } => CuzkStatus::SYNTHESIS,
            Error::VerificationFailed { .. } => CuzkStatus::VERIFICATION_FAILED,
            Error::Cancelled => CuzkStatus::CANCELLED,
            Error::Io(_) => CuzkStatus::IO,
            Error::Panic(_) => CuzkStatus::PANIC,
            Error::Internal(_) => CuzkStatus::INTERNAL,
        }
    }
}

/// cbindgen:rename-all=prefix:CUZK_BACKEND_
/// Prover backend.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CuzkBackend {
    /// GPU when cuzk was built with CUDA and a usable device exists, else CPU (options only;
    /// reported per partition as the backend that actually ran).
    AUTO = 0,
    /// CPU only.
    CPU = 1,
    /// GPU only (see `allow_cpu_fallback`).
    GPU = 2,
}

/// cbindgen:rename-all=prefix:CUZK_STAGE_
/// A stage of a proof, for timings. Numbers are stable; new stages may be added.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CuzkStage {
    /// Parsing and validating the C1 output.
    PARSE = 0,
    /// Loading (or reusing) the Groth16 parameters.
    LOAD_PARAMS = 1,
    /// Circuit synthesis of one partition.
    SYNTHESIS = 2,
    /// H polynomial (NTTs).
    NTT = 3,
    /// MSM over the H query.
    MSM_H = 4,
    /// MSM over the L query.
    MSM_L = 5,
    /// MSM over the A query.
    MSM_A = 6,
    /// MSM over the B query in G1.
    MSM_B_G1 = 7,
    /// MSM over the B query in G2.
    MSM_B_G2 = 8,
    /// Host-device transfers.
    TRANSFER = 9,
    /// Waiting for a GPU worker.
    WAIT = 10,
    /// Groth16 epilogue.
    EPILOGUE = 11,
    /// Self-verification.
    VERIFY = 12,
    /// The whole call.
    TOTAL = 13,
    /// Loading (or recording) the compiled circuit.
    COMPILE = 14,
    /// Witness generation of one partition (part of `SYNTHESIS`).
    WITNESS = 15,
    /// a, b, c by sparse matrix-vector products (part of `SYNTHESIS`).
    SPMV = 16,
}

impl CuzkStage {
    fn of(s: Stage) -> CuzkStage {
        match s {
            Stage::Parse => CuzkStage::PARSE,
            Stage::LoadParams => CuzkStage::LOAD_PARAMS,
            Stage::Synthesis => CuzkStage::SYNTHESIS,
            Stage::Ntt => CuzkStage::NTT,
            Stage::MsmH => CuzkStage::MSM_H,
            Stage::MsmL => CuzkStage::MSM_L,
            Stage::MsmA => CuzkStage::MSM_A,
            Stage::MsmBG1 => CuzkStage::MSM_B_G1,
            Stage::MsmBG2 => CuzkStage::MSM_B_G2,
            Stage::Transfer => CuzkStage::TRANSFER,
            Stage::Wait => CuzkStage::WAIT,
            Stage::Epilogue => CuzkStage::EPILOGUE,
            Stage::Verify => CuzkStage::VERIFY,
            Stage::Total => CuzkStage::TOTAL,
            Stage::Compile => CuzkStage::COMPILE,
            Stage::Witness => CuzkStage::WITNESS,
            Stage::Spmv => CuzkStage::SPMV,
        }
    }
}

/// Options of an engine. Fill a struct with the defaults with
/// `cuzk_options_init(&opts, sizeof opts)`, then change fields; the struct is read during
/// `cuzk_engine_new` only (the caller keeps ownership of it and of the memory its pointers point
/// to, which may be freed once `cuzk_engine_new` returns).
///
/// The struct can grow without breaking the ABI: new fields are only ever appended, and
/// `struct_size` says how large the caller's struct is. A library newer than the caller's header
/// gives the fields the caller does not know their defaults; a library older than the caller's
/// header accepts the larger struct only when the fields it does not know are zero (their
/// defaults) and otherwise fails with `CUZK_STATUS_INVALID_CONFIG`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CuzkOptions {
    /// Size of this struct in bytes as the caller was compiled, `sizeof(cuzk_options_t)`; set
    /// by `cuzk_options_init`. Always the first field.
    pub struct_size: usize,
    /// Directory of the Groth16 `.params` / `.vk` files, a NUL-terminated path; `NULL` or `""`:
    /// the `FIL_PROOFS_PARAMETER_CACHE` environment variable when set and not empty, else
    /// `/var/tmp/filecoin-proof-parameters`.
    pub parameter_dir: *const c_char,
    /// A `cuzk_backend_t` value (`CUZK_BACKEND_AUTO` by default); anything else is
    /// `CUZK_STATUS_INVALID_CONFIG`.
    pub backend: i32,
    /// CUDA device ordinals to use, `devices_len` of them; `NULL` / 0: all visible devices.
    pub devices: *const u32,
    /// Number of entries of `devices`.
    pub devices_len: usize,
    /// GPU workers per device; 0: the default (2).
    pub workers_per_device: u32,
    /// Cap in bytes on the device memory cuzk may use on each device; 0: no cap.
    pub vram_limit_bytes: u64,
    /// Host-memory budget in bytes (loaded parameters, compiled circuits and every partition in
    /// flight); 0: the default, the host's available memory when the engine is created less
    /// 1/16 of it (at least 4 GiB left to the rest of the machine).
    pub host_memory_limit_bytes: u64,
    /// Verify every proof before returning it (default `true`).
    pub verify: bool,
    /// Let GPU work run on the CPU when no device can take it (default `false`); reported per
    /// partition in the result, never silent.
    pub allow_cpu_fallback: bool,
}

/// An engine: loaded parameters and workers, reused by every proof made with it. Opaque; created
/// by `cuzk_engine_new`, released by `cuzk_engine_free`. Thread-safe.
pub struct CuzkEngine {
    engine: Arc<Engine>,
    verify: bool,
}

/// Where and how one partition was proved. Part of a `cuzk_result_t`, which owns it.
#[repr(C)]
#[derive(Debug)]
pub struct CuzkPartition {
    /// Partition index (0-based).
    pub index: usize,
    /// The backend that ran it: `CUZK_BACKEND_CPU` or `CUZK_BACKEND_GPU`.
    pub backend: CuzkBackend,
    /// CUDA device ordinal, or -1 on the CPU.
    pub device: i32,
    /// Allocator tier that ran on the GPU (NUL-terminated, owned by the result), or `NULL`.
    pub tier: *const c_char,
}

/// One timing: a stage of one partition (or of the whole call) and how long it took.
#[repr(C)]
#[derive(Debug)]
pub struct CuzkTiming {
    /// Partition index, or -1 for a stage of the whole call (e.g. `CUZK_STAGE_TOTAL`).
    pub partition: i64,
    /// Which stage.
    pub stage: CuzkStage,
    /// The stage's short name (`"synthesis"`, `"msm_h"`, ...): a static NUL-terminated string,
    /// valid for the life of the process.
    pub stage_name: *const c_char,
    /// Duration in milliseconds.
    pub ms: f64,
}

/// The result of a proof. Owned by the caller: release it with `cuzk_result_free` (once); every
/// pointer in it stays valid until then. Read-only; may be read from any thread.
#[repr(C)]
#[derive(Debug)]
pub struct CuzkResult {
    /// The proof: 192 bytes per partition, partitions in order - the byte layout of
    /// filecoin-proofs' `seal_commit_phase2` proof (PoRep C2), of filecoin-proofs-api's
    /// WindowPoSt partition and WinningPoSt proofs (192 bytes), or of its
    /// `generate_empty_sector_update_proof_with_vanilla` (SnapDeals).
    pub proof: *const u8,
    /// Length of `proof` in bytes.
    pub proof_len: usize,
    /// One entry per partition.
    pub partitions: *const CuzkPartition,
    /// Number of entries of `partitions`.
    pub partitions_len: usize,
    /// Stage timings in the order they were recorded (a stage appears once per partition).
    pub timings: *const CuzkTiming,
    /// Number of entries of `timings`.
    pub timings_len: usize,
    /// Wall time of the whole call in milliseconds.
    pub total_ms: f64,
    /// Whether the proof was verified before it was returned.
    pub verified: bool,
}

/// A [`CuzkResult`] with the Rust values its pointers point into. `repr(C)` with `public` first,
/// so a `*mut CuzkResult` handed out is also a `*mut OwnedResult`.
#[repr(C)]
struct OwnedResult {
    public: CuzkResult,
    _proof: Box<[u8]>,
    _partitions: Box<[CuzkPartition]>,
    _tiers: Vec<CString>,
    _timings: Box<[CuzkTiming]>,
}

impl OwnedResult {
    fn new(out: C2Output) -> Box<OwnedResult> {
        let proof: Box<[u8]> = out.proof.into_boxed_slice();
        let mut tiers = Vec::new();
        let partitions: Box<[CuzkPartition]> = out
            .partitions
            .iter()
            .map(|p| {
                let tier = match &p.tier {
                    Some(t) => {
                        // Tier names are ours and contain no NUL; replace one rather than fail.
                        let c = CString::new(t.replace('\0', "?")).unwrap_or_default();
                        let ptr = c.as_ptr();
                        tiers.push(c); // moving a CString does not move its heap buffer
                        ptr
                    }
                    None => std::ptr::null(),
                };
                CuzkPartition {
                    index: p.partition,
                    backend: if p.backend == "gpu" {
                        CuzkBackend::GPU
                    } else {
                        CuzkBackend::CPU
                    },
                    device: p.device.and_then(|d| i32::try_from(d).ok()).unwrap_or(-1),
                    tier,
                }
            })
            .collect();
        let timings: Box<[CuzkTiming]> = out
            .timings
            .entries
            .iter()
            .map(|(partition, stage, elapsed)| CuzkTiming {
                partition: partition.map(|p| p as i64).unwrap_or(-1),
                stage: CuzkStage::of(*stage),
                stage_name: stage_name(*stage).as_ptr(),
                ms: elapsed.as_secs_f64() * 1e3,
            })
            .collect();
        let total_ms = out.timings.total(Stage::Total).as_secs_f64() * 1e3;
        Box::new(OwnedResult {
            public: CuzkResult {
                proof: proof.as_ptr(),
                proof_len: proof.len(),
                partitions: partitions.as_ptr(),
                partitions_len: partitions.len(),
                timings: timings.as_ptr(),
                timings_len: timings.len(),
                total_ms,
                verified: out.verified,
            },
            _proof: proof,
            _partitions: partitions,
            _tiers: tiers,
            _timings: timings,
        })
    }
}

/// Static NUL-terminated names of the stages (the same as [`Stage::name`]).
fn stage_name(s: Stage) -> &'static CStr {
    match s {
        Stage::Parse => c"parse",
        Stage::LoadParams => c"load_params",
        Stage::Synthesis => c"synthesis",
        Stage::Ntt => c"ntt",
        Stage::MsmH => c"msm_h",
        Stage::MsmL => c"msm_l",
        Stage::MsmA => c"msm_a",
        Stage::MsmBG1 => c"msm_b_g1",
        Stage::MsmBG2 => c"msm_b_g2",
        Stage::Transfer => c"transfer",
        Stage::Wait => c"wait",
        Stage::Epilogue => c"epilogue",
        Stage::Verify => c"verify",
        Stage::Total => c"total",
        Stage::Compile => c"compile",
        Stage::Witness => c"witness",
        Stage::Spmv => c"spmv",
    }
}

// ---------------------------------------------------------------------------------------------
// The panic boundary and the last-error message.

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn set_last_error(msg: String) {
    LAST_ERROR.with(|m| *m.borrow_mut() = msg);
}

/// Records `e` as the calling thread's last error.
fn record(e: &Error) {
    // Interior NULs would cut the C string short.
    set_last_error(e.to_string().replace('\0', "\u{FFFD}"));
}

/// The one panic boundary: every exported function's body runs in here. Returns what `body`
/// returns; if it panics, records the panic's message (`Error::Panic`, `&str` and `String`
/// payloads kept) as the calling thread's last error and returns `on_panic`.
fn boundary<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            record(&Error::from_panic(payload));
            on_panic
        }
    }
}

/// Runs the body of a status-returning function in [`boundary`]: records its outcome as the
/// calling thread's last error (empty on success) and returns its status; a panic is
/// `CUZK_STATUS_PANIC`.
fn with_status(body: impl FnOnce() -> Result<()>) -> CuzkStatus {
    boundary(CuzkStatus::PANIC, || match body() {
        Ok(()) => {
            set_last_error(String::new());
            CuzkStatus::OK
        }
        Err(e) => {
            record(&e);
            CuzkStatus::of(&e)
        }
    })
}

/// An argument that must not be `NULL`.
fn null_arg(name: &str) -> Error {
    Error::InvalidConfig {
        name: name.into(),
        value: "NULL".into(),
        reason: "this argument must not be NULL".into(),
    }
}

/// A `NULL` buffer whose length is not 0.
fn null_buffer(name: &str, len_name: &str, len: usize) -> Error {
    Error::InvalidConfig {
        name: name.into(),
        value: "NULL".into(),
        reason: format!("must not be NULL when {len_name} is {len}"),
    }
}

/// Borrows `len` bytes at `ptr` (`NULL` with length 0 is the empty slice).
///
/// # Safety
/// Unless `ptr` is `NULL`, it must point to `len` readable bytes that stay valid and unchanged
/// for `'a`.
unsafe fn bytes<'a>(ptr: *const u8, len: usize, name: &str, len_name: &str) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(null_buffer(name, len_name, len));
    }
    if len > isize::MAX as usize {
        return Err(Error::InvalidInput(format!(
            "buffer length {len} is larger than isize::MAX"
        )));
    }
    // SAFETY: ptr is non-NULL and, by the caller's contract, points to len readable bytes valid
    // for 'a; len <= isize::MAX was checked.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Writes `value` through the out-parameter `out`.
///
/// # Safety
/// `out` must be `NULL` (an error) or valid for a write of one `T`.
unsafe fn write_out<T>(out: *mut T, name: &str, value: T) -> Result<()> {
    if out.is_null() {
        return Err(null_arg(name));
    }
    // SAFETY: out is non-NULL and, by the caller's contract, valid for writes of a T.
    unsafe { out.write(value) };
    Ok(())
}

/// Reads an options struct into an engine configuration and the per-call `verify` flag.
///
/// # Safety
/// `opts` must be a valid `CuzkOptions` whose pointers follow that struct's documentation.
unsafe fn config_of(opts: &CuzkOptions) -> Result<(EngineConfig, bool)> {
    let parameter_dir = if opts.parameter_dir.is_null() {
        None
    } else {
        // SAFETY: non-NULL, and by the caller's contract a NUL-terminated string valid for this
        // call.
        let c = unsafe { CStr::from_ptr(opts.parameter_dir) };
        // An empty path means unset, as an empty FIL_PROOFS_PARAMETER_CACHE does.
        if c.is_empty() {
            None
        } else {
            Some(path_of(c)?)
        }
    };
    let backend =
        match opts.backend {
            0 => Backend::Auto,
            1 => Backend::Cpu,
            2 => Backend::Gpu,
            v => return Err(Error::InvalidConfig {
                name: "backend".into(),
                value: v.to_string(),
                reason:
                    "expected CUZK_BACKEND_AUTO (0), CUZK_BACKEND_CPU (1) or CUZK_BACKEND_GPU (2)"
                        .into(),
            }),
        };
    let devices = if opts.devices_len == 0 {
        None
    } else if opts.devices.is_null() {
        return Err(null_buffer("devices", "devices_len", opts.devices_len));
    } else if opts.devices_len > isize::MAX as usize / std::mem::size_of::<u32>() {
        return Err(Error::InvalidConfig {
            name: "devices_len".into(),
            value: opts.devices_len.to_string(),
            reason: "too large".into(),
        });
    } else {
        // SAFETY: non-NULL, and by the caller's contract devices_len readable u32 values valid
        // for this call; the size fits isize (checked above).
        let list = unsafe { std::slice::from_raw_parts(opts.devices, opts.devices_len) };
        Some(list.iter().map(|&d| d as usize).collect())
    };
    let config = EngineConfig {
        parameter_dir,
        backend,
        devices,
        gpu_workers_per_device: opts.workers_per_device as usize,
        vram_limit: (opts.vram_limit_bytes != 0).then_some(opts.vram_limit_bytes),
        host_memory_limit: (opts.host_memory_limit_bytes != 0)
            .then_some(opts.host_memory_limit_bytes),
        allow_cpu_fallback: opts.allow_cpu_fallback,
        verify_production_params: crate::config::verify_production_params_from_env()?,
        ..EngineConfig::default()
    };
    Ok((config, opts.verify))
}

#[cfg(unix)]
fn path_of(c: &CStr) -> Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(c.to_bytes())))
}

#[cfg(not(unix))]
fn path_of(c: &CStr) -> Result<PathBuf> {
    c.to_str()
        .map(PathBuf::from)
        .map_err(|_| Error::InvalidConfig {
            name: "parameter_dir".into(),
            value: c.to_string_lossy().into_owned(),
            reason: "not UTF-8".into(),
        })
}

// ---------------------------------------------------------------------------------------------
// Exported functions.

/// Fills `opts` with the default options: parameter directory from the environment (`NULL`),
/// backend `CUZK_BACKEND_AUTO`, all devices, default workers per device, no VRAM or
/// host-memory cap, verification on, no CPU fallback; and sets `opts->struct_size` to
/// `struct_size`.
///
/// * `opts` - the caller's struct (owned by the caller), written in full.
/// * `struct_size` - `sizeof(cuzk_options_t)` as the caller was compiled (bytes beyond the
///   fields this library knows are set to zero, the defaults of later fields).
///
/// Returns `CUZK_STATUS_OK`, or `CUZK_STATUS_INVALID_CONFIG` when `opts` is `NULL` or
/// `struct_size` is smaller than the first version of the struct. Thread-safe.
///
/// # Safety
/// `opts` is `NULL` or valid for writing `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn cuzk_options_init(
    opts: *mut CuzkOptions,
    struct_size: usize,
) -> CuzkStatus {
    with_status(|| {
        if opts.is_null() {
            return Err(null_arg("opts"));
        }
        check_options_size(struct_size)?;
        let ours = std::mem::size_of::<CuzkOptions>();
        let mut defaults = DEFAULT_OPTIONS;
        defaults.struct_size = struct_size;
        // SAFETY: opts is non-NULL and valid for writing struct_size bytes by the caller's
        // contract; the source is a local CuzkOptions of `ours` bytes and we copy at most that
        // many; the caller's struct cannot overlap our local.
        unsafe {
            std::ptr::write_bytes(opts as *mut u8, 0, struct_size);
            std::ptr::copy_nonoverlapping(
                &defaults as *const CuzkOptions as *const u8,
                opts as *mut u8,
                ours.min(struct_size),
            );
        }
        Ok(())
    })
}

/// Bytes of the first version of `cuzk_options_t`: up to the end of its last field,
/// `allow_cpu_fallback`. Fields added later come after it, so this never changes.
const OPTIONS_V1_SIZE: usize =
    std::mem::offset_of!(CuzkOptions, allow_cpu_fallback) + std::mem::size_of::<bool>();

fn check_options_size(struct_size: usize) -> Result<()> {
    if struct_size < OPTIONS_V1_SIZE {
        return Err(Error::InvalidConfig {
            name: "struct_size".into(),
            value: struct_size.to_string(),
            reason: format!(
                "smaller than the first cuzk_options_t ({OPTIONS_V1_SIZE} bytes); fill the \
                 struct with cuzk_options_init(&opts, sizeof opts)"
            ),
        });
    }
    Ok(())
}

/// Reads the caller's options struct of `opts->struct_size` bytes: the fields this library
/// knows from it, the others (a caller with an older header) from the defaults.
///
/// # Safety
/// `opts` is non-NULL and points to a `cuzk_options_t` of `opts->struct_size` readable bytes
/// (its first field is the size).
unsafe fn read_options(opts: *const CuzkOptions) -> Result<CuzkOptions> {
    // SAFETY: opts is non-NULL and points to at least the size field (caller's contract), the
    // first field of the repr(C) struct, aligned like the struct.
    let size = unsafe { (opts as *const usize).read() };
    check_options_size(size)?;
    let ours = std::mem::size_of::<CuzkOptions>();
    if size > ours {
        // SAFETY: the caller's struct has `size` readable bytes (contract); ours < size.
        let extra =
            unsafe { std::slice::from_raw_parts((opts as *const u8).add(ours), size - ours) };
        if extra.iter().any(|&b| b != 0) {
            return Err(Error::InvalidConfig {
                name: "struct_size".into(),
                value: size.to_string(),
                reason: format!(
                    "the caller's cuzk_options_t sets fields this library does not know (it \
                     knows {ours} bytes): the header is newer than the library"
                ),
            });
        }
    }
    let mut o = DEFAULT_OPTIONS;
    // SAFETY: the caller's struct has `size` readable bytes, we copy min(size, ours) of them
    // into a local CuzkOptions of `ours` bytes; its bool fields are C bools (0 or 1) by the
    // caller's contract, so every copied field is a valid value.
    unsafe {
        std::ptr::copy_nonoverlapping(
            opts as *const u8,
            &mut o as *mut CuzkOptions as *mut u8,
            ours.min(size),
        );
    }
    o.struct_size = ours;
    Ok(o)
}

const DEFAULT_OPTIONS: CuzkOptions = CuzkOptions {
    struct_size: std::mem::size_of::<CuzkOptions>(),
    parameter_dir: std::ptr::null(),
    backend: CuzkBackend::AUTO as i32,
    devices: std::ptr::null(),
    devices_len: 0,
    workers_per_device: 0,
    vram_limit_bytes: 0,
    host_memory_limit_bytes: 0,
    verify: true,
    allow_cpu_fallback: false,
};

/// Creates an engine.
///
/// * `opts` - options (filled by `cuzk_options_init`, then changed), read during this call
///   only (the caller keeps ownership); `NULL`: the defaults.
/// * `out` - receives the new engine, owned by the caller, to release with `cuzk_engine_free`;
///   set to `NULL` on failure.
///
/// Loads nothing yet: parameters are loaded on the first proof. Thread-safe.
///
/// Besides the options, reads the environment variables `FIL_PROOFS_PARAMETER_CACHE` (when
/// `parameter_dir` is `NULL` or empty) and `FIL_PROOFS_VERIFY_PRODUCTION_PARAMS`
/// (filecoin-proofs' switch: check the parameter files against the official digests), and no
/// other.
///
/// Returns `CUZK_STATUS_OK`, `CUZK_STATUS_INVALID_CONFIG` (bad option or `struct_size`, bad
/// `FIL_PROOFS_VERIFY_PRODUCTION_PARAMS` value, `NULL` `out`),
/// `CUZK_STATUS_NO_DEVICE` (GPU backend without a usable device), ...
///
/// # Safety
/// `opts` is `NULL` or points to a valid `cuzk_options_t` of `opts->struct_size` readable bytes
/// (see its fields for their pointers); `out` is `NULL` or valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn cuzk_engine_new(
    opts: *const CuzkOptions,
    out: *mut *mut CuzkEngine,
) -> CuzkStatus {
    with_status(|| {
        if !out.is_null() {
            // SAFETY: out is non-NULL and valid for writes by the caller's contract.
            unsafe { out.write(std::ptr::null_mut()) };
        }
        let opts = if opts.is_null() {
            DEFAULT_OPTIONS
        } else {
            // SAFETY: opts is non-NULL and points to a cuzk_options_t of its struct_size bytes
            // by the caller's contract.
            unsafe { read_options(opts) }?
        };
        // SAFETY: opts' pointers follow CuzkOptions' documentation by the caller's contract.
        let (config, verify) = unsafe { config_of(&opts) }?;
        if out.is_null() {
            return Err(null_arg("out"));
        }
        let engine = Engine::new(config)?;
        let handle = Box::into_raw(Box::new(CuzkEngine { engine, verify }));
        // SAFETY: out is non-NULL (checked) and valid for writes by the caller's contract.
        unsafe { write_out(out, "out", handle) }
    })
}

/// Releases an engine and everything it holds (parameters, GPU workers). `NULL` is a no-op.
///
/// No other call may use `engine` during or after this one: wait for running
/// `cuzk_prove_porep_c2` calls to return first. Results made with the engine stay valid.
///
/// # Safety
/// `engine` is `NULL` or a handle from `cuzk_engine_new` not freed before.
#[no_mangle]
pub unsafe extern "C" fn cuzk_engine_free(engine: *mut CuzkEngine) {
    boundary((), || {
        if !engine.is_null() {
            // SAFETY: engine came from Box::into_raw in cuzk_engine_new and, by the caller's
            // contract, is freed once and not in use.
            drop(unsafe { Box::from_raw(engine) });
        }
    })
}

/// Proves commit phase 2 (C2) of one sector.
///
/// * `engine` - from `cuzk_engine_new`; may be used by many threads at once.
/// * `c1_json`, `c1_len` - the C1 output: the `SealCommitPhase1Output` JSON of
///   filecoin-proofs(-api), or the wrapper `{"SectorNum": n, "Phase1Out": base64(JSON),
///   "SectorSize": bytes}`. Borrowed for the call only.
/// * `sector_id` - the sector number.
/// * `prover_id`, `prover_id_len` - the 32-byte prover id (see
///   `cuzk_prover_id_from_actor_id`). Borrowed for the call only.
/// * `out` - receives the result, owned by the caller (release with `cuzk_result_free`); set
///   to `NULL` on failure.
///
/// Blocks until the proof is done (seconds to minutes). Thread-safe.
///
/// Returns `CUZK_STATUS_OK` or an error status; the message is then in
/// `cuzk_last_error_message` on this thread.
///
/// # Safety
/// `engine` is `NULL` or a live handle from `cuzk_engine_new`; `c1_json` points to `c1_len`
/// readable bytes (or is `NULL` with `c1_len` 0); `prover_id` points to `prover_id_len`
/// readable bytes (or is `NULL` with length 0); `out` is `NULL` or valid for writing one
/// pointer. The buffers must not be changed by another thread during the call.
#[no_mangle]
pub unsafe extern "C" fn cuzk_prove_porep_c2(
    engine: *const CuzkEngine,
    c1_json: *const u8,
    c1_len: usize,
    sector_id: u64,
    prover_id: *const u8,
    prover_id_len: usize,
    out: *mut *mut CuzkResult,
) -> CuzkStatus {
    with_status(|| {
        // SAFETY: engine and out as this function's contract says.
        let handle = unsafe { proof_call(engine, out) }?;
        // SAFETY: c1_json points to c1_len readable bytes for this call (caller's contract).
        let c1 = unsafe { bytes(c1_json, c1_len, "c1_json", "c1_len") }?;
        // SAFETY: prover_id points to prover_id_len readable bytes for this call.
        let prover = unsafe { bytes(prover_id, prover_id_len, "prover_id", "prover_id_len") }?;
        let output = handle.engine.prove_porep_c2(
            c1,
            sector_id,
            prover,
            &handle.options(crate::ProofKind::PorepC2),
        )?;
        // SAFETY: out is non-NULL (checked by proof_call) and valid for writes.
        unsafe { write_result(out, output) }
    })
}

/// The start of a proving call: `*out` set to `NULL` (when `out` is not `NULL`), then the
/// engine handle, or [`Error::InvalidConfig`] for a `NULL` engine or `out`.
///
/// # Safety
/// `engine` is `NULL` or a live handle from `cuzk_engine_new` not freed during the call; `out`
/// is `NULL` or valid for writing one pointer.
unsafe fn proof_call<'a>(
    engine: *const CuzkEngine,
    out: *mut *mut CuzkResult,
) -> Result<&'a CuzkEngine> {
    if !out.is_null() {
        // SAFETY: out is non-NULL and valid for writes by the caller's contract.
        unsafe { out.write(std::ptr::null_mut()) };
    }
    if engine.is_null() {
        return Err(null_arg("engine"));
    }
    if out.is_null() {
        return Err(null_arg("out"));
    }
    // SAFETY: engine is non-NULL and, by the caller's contract, a live handle not being freed
    // during this call; CuzkEngine is Sync, so shared use from threads is fine.
    Ok(unsafe { &*engine })
}

/// Hands `output` to the caller through `out` as a `cuzk_result_t` it owns.
///
/// # Safety
/// `out` is valid for writing one pointer.
unsafe fn write_result(out: *mut *mut CuzkResult, output: crate::ProofOutput) -> Result<()> {
    let result = Box::into_raw(OwnedResult::new(output)) as *mut CuzkResult;
    // SAFETY: out is valid for writes by the caller's contract.
    unsafe { write_out(out, "out", result) }
}

impl CuzkEngine {
    /// The options of one proving call of `kind` on this engine: its verification switch, and
    /// the kind's [default priority](crate::ProofKind::default_priority) (a WinningPoSt goes
    /// ahead of PoRep partitions queued by other threads of the caller).
    fn options(&self, kind: crate::ProofKind) -> ProveOptions {
        ProveOptions {
            verify: self.verify,
            priority: kind.default_priority(),
            ..ProveOptions::default()
        }
    }
}

/// Proves one WindowPoSt partition: the 192 bytes filecoin-proofs-api's
/// `post::generate_single_window_post_with_vanilla` returns for the same input.
///
/// * `engine` - from `cuzk_engine_new`; may be used by many threads at once.
/// * `registered_proof` - the PoSt proof type in the actors' numbering: 10..14 (WindowPoSt
///   2 KiB, 8 MiB, 512 MiB, 32 GiB, 64 GiB).
/// * `vanilla_proofs`, `vanilla_proof_lens`, `vanilla_proof_count` - one vanilla proof per
///   sector of the partition (the bytes of `post::generate_single_vanilla_proof`; at most 2349
///   at 32 GiB): `vanilla_proofs[i]` points to `vanilla_proof_lens[i]` bytes. Borrowed for the
///   call only.
/// * `randomness`, `randomness_len` - the 32-byte PoSt randomness. Borrowed.
/// * `prover_id`, `prover_id_len` - the 32-byte prover id (see
///   `cuzk_prover_id_from_actor_id`). Borrowed.
/// * `partition_index` - the partition's index in the deadline.
/// * `out` - receives the result (one partition), owned by the caller (release with
///   `cuzk_result_free`); set to `NULL` on failure.
///
/// Its partitions run at high priority: ahead of PoRep partitions queued by other calls.
/// Blocks until the proof is done. Thread-safe. Returns `CUZK_STATUS_OK` or an error status
/// (input errors 1xx before any proving); the message is then in `cuzk_last_error_message`.
///
/// # Safety
/// `engine` is `NULL` or a live handle from `cuzk_engine_new`; `vanilla_proofs` and
/// `vanilla_proof_lens` point to `vanilla_proof_count` readable entries each (or are `NULL`
/// with a count of 0), and each `vanilla_proofs[i]` to `vanilla_proof_lens[i]` readable bytes;
/// `randomness` and `prover_id` point to their lengths in readable bytes (or are `NULL` with
/// length 0); `out` is `NULL` or valid for writing one pointer. The buffers must not be changed
/// by another thread during the call.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cuzk_prove_window_post(
    engine: *const CuzkEngine,
    registered_proof: u64,
    vanilla_proofs: *const *const u8,
    vanilla_proof_lens: *const usize,
    vanilla_proof_count: usize,
    randomness: *const u8,
    randomness_len: usize,
    prover_id: *const u8,
    prover_id_len: usize,
    partition_index: usize,
    out: *mut *mut CuzkResult,
) -> CuzkStatus {
    // SAFETY: the caller's contract is this function's (see `# Safety`).
    unsafe {
        prove_post(
            engine,
            crate::ProofKind::WindowPost,
            registered_proof,
            (vanilla_proofs, vanilla_proof_lens, vanilla_proof_count),
            (randomness, randomness_len),
            (prover_id, prover_id_len),
            partition_index,
            out,
        )
    }
}

/// Proves a WinningPoSt: the 192 bytes filecoin-proofs-api's
/// `post::generate_winning_post_with_vanilla` returns for the same input.
///
/// Arguments as `cuzk_prove_window_post`, with `registered_proof` 0..4 (WinningPoSt 2 KiB,
/// 8 MiB, 512 MiB, 32 GiB, 64 GiB), the challenged sector's vanilla proof (one), and no
/// partition index. Its partitions run at critical priority: ahead of every other call's
/// queued partitions. Blocks until the proof is done. Thread-safe.
///
/// # Safety
/// As `cuzk_prove_window_post`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cuzk_prove_winning_post(
    engine: *const CuzkEngine,
    registered_proof: u64,
    vanilla_proofs: *const *const u8,
    vanilla_proof_lens: *const usize,
    vanilla_proof_count: usize,
    randomness: *const u8,
    randomness_len: usize,
    prover_id: *const u8,
    prover_id_len: usize,
    out: *mut *mut CuzkResult,
) -> CuzkStatus {
    // SAFETY: the caller's contract is this function's (see `# Safety`).
    unsafe {
        prove_post(
            engine,
            crate::ProofKind::WinningPost,
            registered_proof,
            (vanilla_proofs, vanilla_proof_lens, vanilla_proof_count),
            (randomness, randomness_len),
            (prover_id, prover_id_len),
            0,
            out,
        )
    }
}

/// The body of `cuzk_prove_window_post` and `cuzk_prove_winning_post`.
///
/// # Safety
/// As `cuzk_prove_window_post`.
#[allow(clippy::too_many_arguments)]
unsafe fn prove_post(
    engine: *const CuzkEngine,
    kind: crate::ProofKind,
    registered_proof: u64,
    (vanilla_ptrs, vanilla_lens, count): (*const *const u8, *const usize, usize),
    (randomness, randomness_len): (*const u8, usize),
    (prover_id, prover_id_len): (*const u8, usize),
    partition_index: usize,
    out: *mut *mut CuzkResult,
) -> CuzkStatus {
    with_status(|| {
        // SAFETY: engine and out as this function's contract says.
        let handle = unsafe { proof_call(engine, out) }?;
        // SAFETY: the arrays and their buffers as this function's contract says.
        let vanilla = unsafe { vanilla_arrays(vanilla_ptrs, vanilla_lens, count) }?;
        // SAFETY: randomness points to randomness_len readable bytes for this call.
        let randomness =
            unsafe { bytes(randomness, randomness_len, "randomness", "randomness_len") }?;
        // SAFETY: prover_id points to prover_id_len readable bytes for this call.
        let prover = unsafe { bytes(prover_id, prover_id_len, "prover_id", "prover_id_len") }?;
        let req = crate::post::PostRequest {
            kind,
            registered_proof,
            vanilla_proofs: &vanilla,
            randomness,
            prover_id: prover,
            partition_index,
        };
        let output = handle.engine.prove_post(&req, &handle.options(kind))?;
        // SAFETY: out is non-NULL (checked by proof_call) and valid for writes.
        unsafe { write_result(out, output) }
    })
}

/// The byte slices of the caller's arrays of `count` vanilla proofs (`ptrs[i]` to `lens[i]`
/// bytes).
///
/// # Errors
/// [`Error::InvalidInput`] for `NULL` arrays with a count, or a count larger than an array can
/// be; `NULL` entries with a length as [`bytes`].
///
/// # Safety
/// `ptrs` and `lens` point to `count` readable entries each (or are `NULL` with a count of 0),
/// each `ptrs[i]` to `lens[i]` readable bytes, all unchanged for the lifetime `'a`.
unsafe fn vanilla_arrays<'a>(
    ptrs: *const *const u8,
    lens: *const usize,
    count: usize,
) -> Result<Vec<&'a [u8]>> {
    if count > 0 && (ptrs.is_null() || lens.is_null()) {
        return Err(null_buffer(
            "vanilla_proofs or vanilla_proof_lens",
            "vanilla_proof_count",
            count,
        ));
    }
    if count > (isize::MAX as usize) / std::mem::size_of::<usize>() {
        return Err(Error::InvalidInput(format!(
            "vanilla_proof_count {count} is larger than an array can be"
        )));
    }
    let (ptrs, lens): (&[*const u8], &[usize]) = if count == 0 {
        (&[], &[])
    } else {
        // SAFETY: both arrays are non-NULL (checked) and hold `count` readable entries
        // (caller's contract); count * size fits isize (checked).
        unsafe {
            (
                std::slice::from_raw_parts(ptrs, count),
                std::slice::from_raw_parts(lens, count),
            )
        }
    };
    ptrs.iter()
        .zip(lens)
        // SAFETY: each ptrs[i] points to lens[i] readable bytes (caller's contract).
        .map(|(&p, &n)| unsafe { bytes(p, n, "vanilla_proofs[i]", "vanilla_proof_lens[i]") })
        .collect()
}

/// Proves a SnapDeals sector update: the bytes filecoin-proofs-api's
/// `update::generate_empty_sector_update_proof_with_vanilla` returns for the same input, 192
/// per partition (1 partition at 2 KiB, 4 at 8 MiB, 16 from 512 MiB on: 3,072 bytes at
/// 32 GiB), each partition verified and then the whole proof as
/// `update::verify_empty_sector_update_proof` verifies it, before it is returned.
///
/// * `engine` - from `cuzk_engine_new`; may be used by many threads at once.
/// * `registered_proof` - the update proof type in the actors' numbering: 0..4 (2 KiB,
///   8 MiB, 512 MiB, 32 GiB, 64 GiB).
/// * `vanilla_proofs`, `vanilla_proof_lens`, `vanilla_proof_count` - one vanilla proof per
///   partition, in partition order (the bytes of `update::generate_partition_proofs`):
///   `vanilla_proofs[i]` points to `vanilla_proof_lens[i]` bytes. Borrowed for the call only.
/// * `comm_r_old`, `comm_r_new`, `comm_d_new` and their lengths - the sector key's replica
///   commitment, the updated replica's, the new data's: 32 bytes each. Borrowed.
/// * `sector_size` - the sector size in bytes the caller expects, checked against the proof
///   type's; 0 takes the proof type's.
/// * `out` - receives the result, owned by the caller (release with `cuzk_result_free`); set
///   to `NULL` on failure.
///
/// Its partitions run at normal priority, as PoRep's. Blocks until the proof is done.
/// Thread-safe. Returns `CUZK_STATUS_OK` or an error status (input errors 1xx before any
/// proving: a wrong partition count, commitments not 32 bytes, a sector size of another proof
/// type, vanilla proofs that do not decode or verify); the message is then in
/// `cuzk_last_error_message`.
///
/// # Safety
/// As `cuzk_prove_window_post` for `engine`, the vanilla proof arrays and `out`; each
/// commitment points to its length in readable bytes (or is `NULL` with length 0).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cuzk_prove_snap_deals(
    engine: *const CuzkEngine,
    registered_proof: u64,
    vanilla_proofs: *const *const u8,
    vanilla_proof_lens: *const usize,
    vanilla_proof_count: usize,
    comm_r_old: *const u8,
    comm_r_old_len: usize,
    comm_r_new: *const u8,
    comm_r_new_len: usize,
    comm_d_new: *const u8,
    comm_d_new_len: usize,
    sector_size: u64,
    out: *mut *mut CuzkResult,
) -> CuzkStatus {
    with_status(|| {
        // SAFETY: engine and out as this function's contract says.
        let handle = unsafe { proof_call(engine, out) }?;
        // SAFETY: the arrays and their buffers as this function's contract says.
        let vanilla =
            unsafe { vanilla_arrays(vanilla_proofs, vanilla_proof_lens, vanilla_proof_count) }?;
        // SAFETY: each commitment points to its length in readable bytes for this call.
        let (comm_r_old, comm_r_new, comm_d_new) = unsafe {
            (
                bytes(comm_r_old, comm_r_old_len, "comm_r_old", "comm_r_old_len")?,
                bytes(comm_r_new, comm_r_new_len, "comm_r_new", "comm_r_new_len")?,
                bytes(comm_d_new, comm_d_new_len, "comm_d_new", "comm_d_new_len")?,
            )
        };
        let req = crate::snap::SnapRequest {
            registered_proof,
            vanilla_proofs: &vanilla,
            comm_r_old,
            comm_r_new,
            comm_d_new,
            sector_size: (sector_size != 0).then_some(sector_size),
        };
        let output = handle
            .engine
            .prove_snap_deals(&req, &handle.options(crate::ProofKind::SnapDeals))?;
        // SAFETY: out is non-NULL (checked by proof_call) and valid for writes.
        unsafe { write_result(out, output) }
    })
}

/// Releases a result from `cuzk_prove_porep_c2`, `cuzk_prove_window_post`,
/// `cuzk_prove_winning_post` or `cuzk_prove_snap_deals` and everything it points to. `NULL`
/// is a no-op. Not to be called twice, nor while another thread reads the result.
///
/// # Safety
/// `result` is `NULL` or a result from one of those calls, not freed before.
#[no_mangle]
pub unsafe extern "C" fn cuzk_result_free(result: *mut CuzkResult) {
    boundary((), || {
        if !result.is_null() {
            // SAFETY: result came from Box::into_raw(Box<OwnedResult>) cast to its first field
            // (repr(C), offset 0), and by the caller's contract is freed once.
            drop(unsafe { Box::from_raw(result as *mut OwnedResult) });
        }
    })
}

/// Writes the 32-byte prover id of miner actor `actor_id` (`f0<actor_id>`; the payload of its
/// ID address, as filecoin-ffi builds it) to `out`, which the caller owns and which must have
/// room for `CUZK_PROVER_ID_LEN` (32) bytes. Thread-safe.
///
/// Returns `CUZK_STATUS_OK`, or `CUZK_STATUS_INVALID_CONFIG` when `out` is `NULL`.
///
/// # Safety
/// `out` is `NULL` or valid for writing 32 bytes.
#[no_mangle]
pub unsafe extern "C" fn cuzk_prover_id_from_actor_id(actor_id: u64, out: *mut u8) -> CuzkStatus {
    with_status(|| {
        let id: [u8; CUZK_PROVER_ID_LEN] = crate::c1::prover_id_from_actor_id(actor_id);
        // SAFETY: out is NULL (rejected) or valid for writing 32 bytes by the caller's contract;
        // [u8; 32] has alignment 1.
        unsafe { write_out(out as *mut [u8; CUZK_PROVER_ID_LEN], "out", id) }
    })
}

/// Copies the calling thread's last-error message (see the status conventions: set by every
/// status-returning call, empty after a success) into `buf` as a NUL-terminated UTF-8 string,
/// truncated to `len - 1` bytes at a character boundary. `buf` is owned by the caller;
/// `NULL` or `len` 0 writes nothing.
///
/// Returns the message's full length in bytes, without the NUL: when it is `>= len`, the copy
/// was truncated and a buffer of (return value + 1) bytes would hold it. Does not change the
/// last error. Thread-safe (each thread has its own message).
///
/// # Safety
/// `buf` is `NULL` or valid for writing `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn cuzk_last_error_message(buf: *mut c_char, len: usize) -> usize {
    boundary(0, || {
        LAST_ERROR.with(|m| {
            let m = m.borrow();
            if !buf.is_null() && len > 0 {
                let mut n = m.len().min(len - 1);
                while !m.is_char_boundary(n) {
                    n -= 1;
                }
                // SAFETY: buf is non-NULL and valid for len bytes by the caller's contract;
                // n + 1 <= len; the source is a live String that cannot overlap a C buffer we
                // do not own.
                unsafe {
                    std::ptr::copy_nonoverlapping(m.as_ptr(), buf as *mut u8, n);
                    buf.add(n).write(0);
                }
            }
            m.len()
        })
    })
}

/// Testing only: makes the next `cuzk_prove_porep_c2` on `engine` panic inside the engine, to
/// check that the panic comes back as `CUZK_STATUS_PANIC` and the engine stays usable. Only
/// with the feature `test-hooks`, which release builds never enable; not in the header.
///
/// # Safety
/// `engine` is `NULL` (an error) or a live handle from `cuzk_engine_new`.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
#[no_mangle]
pub unsafe extern "C" fn cuzk_test_inject_panic(engine: *const CuzkEngine) -> CuzkStatus {
    with_status(|| {
        if engine.is_null() {
            return Err(null_arg("engine"));
        }
        // SAFETY: non-NULL and, by the caller's contract, a live handle.
        let handle = unsafe { &*engine };
        handle.engine.inject_panic_for_test();
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::error::tests::all_errors;

    #[test]
    fn calls_of_the_c_abi_take_their_kinds_priority() {
        let engine = CuzkEngine {
            engine: crate::Engine::new(EngineConfig {
                backend: Backend::Cpu,
                ..EngineConfig::default()
            })
            .expect("CPU engine"),
            verify: false,
        };
        let p = |k| engine.options(k).priority;
        assert_eq!(p(crate::ProofKind::PorepC2), crate::Priority::Normal);
        assert_eq!(p(crate::ProofKind::WindowPost), crate::Priority::High);
        assert_eq!(p(crate::ProofKind::WinningPost), crate::Priority::Critical);
        assert_eq!(p(crate::ProofKind::SnapDeals), crate::Priority::Normal);
        assert!(!engine.options(crate::ProofKind::WinningPost).verify);
    }

    #[test]
    fn statuses_are_the_error_codes() {
        for e in all_errors() {
            assert_eq!(CuzkStatus::of(&e) as i32, e.code(), "{e:?}");
        }
    }

    #[test]
    fn stage_names_match_the_rust_names() {
        for s in [
            Stage::Parse,
            Stage::LoadParams,
            Stage::Synthesis,
            Stage::Ntt,
            Stage::MsmH,
            Stage::MsmL,
            Stage::MsmA,
            Stage::MsmBG1,
            Stage::MsmBG2,
            Stage::Transfer,
            Stage::Wait,
            Stage::Epilogue,
            Stage::Verify,
            Stage::Total,
        ] {
            assert_eq!(stage_name(s).to_str().unwrap(), s.name());
            let _ = CuzkStage::of(s);
        }
    }

    #[test]
    fn boundary_catches_str_and_string_panics() {
        assert_eq!(with_status(|| panic!("static message")), CuzkStatus::PANIC);
        assert_eq!(last_message(), "internal panic: static message");
        let n = 7;
        assert_eq!(with_status(|| panic!("formatted {n}")), CuzkStatus::PANIC);
        assert_eq!(last_message(), "internal panic: formatted 7");
        assert_eq!(with_status(|| Ok(())), CuzkStatus::OK);
        assert_eq!(last_message(), "");
        // Functions without a status return their fallback and keep the message too.
        assert_eq!(boundary(5usize, || panic!("in a free")), 5);
        assert_eq!(last_message(), "internal panic: in a free");
        assert_eq!(boundary(5usize, || 6), 6);
        assert_eq!(last_message(), "internal panic: in a free");
    }

    #[test]
    fn last_error_message_truncates_at_char_boundaries() {
        let _ = with_status(|| Err(Error::Internal("é€x".into())));
        let full = "internal error: é€x";
        let mut buf = [0x55 as c_char; 64];
        // SAFETY: buf is a live local array of 64 bytes.
        let n = unsafe { cuzk_last_error_message(buf.as_mut_ptr(), buf.len()) };
        assert_eq!(n, full.len());
        // SAFETY: the call wrote a NUL-terminated string into buf.
        assert_eq!(
            unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap(),
            full
        );
        // Room for "internal error: " (16 bytes) plus one byte of the 2-byte 'é': cut before it.
        let mut small = [0x55 as c_char; 18];
        // SAFETY: small is a live local array of 18 bytes.
        let n = unsafe { cuzk_last_error_message(small.as_mut_ptr(), small.len()) };
        assert_eq!(n, full.len());
        // SAFETY: as above.
        assert_eq!(
            unsafe { CStr::from_ptr(small.as_ptr()) }.to_bytes(),
            b"internal error: "
        );
        // SAFETY: NULL with length 0 writes nothing.
        assert_eq!(
            unsafe { cuzk_last_error_message(std::ptr::null_mut(), 0) },
            full.len()
        );
    }

    #[test]
    fn options_carry_their_size_and_grow_without_breaking() {
        let ours = std::mem::size_of::<CuzkOptions>();
        // A caller with this header.
        let mut o = std::mem::MaybeUninit::<CuzkOptions>::uninit();
        // SAFETY: o is valid for writing `ours` bytes.
        assert_eq!(
            unsafe { cuzk_options_init(o.as_mut_ptr(), ours) },
            CuzkStatus::OK
        );
        // SAFETY: cuzk_options_init wrote the whole struct.
        let o = unsafe { o.assume_init() };
        assert_eq!(o.struct_size, ours);
        assert!(o.verify && !o.allow_cpu_fallback && o.parameter_dir.is_null());
        // SAFETY: o is a valid struct of o.struct_size bytes.
        assert_eq!(unsafe { read_options(&o) }.unwrap().struct_size, ours);
        // Too small, or NULL.
        let mut o2 = o;
        // SAFETY: o2 is valid for writing 8 bytes.
        let s = unsafe { cuzk_options_init(&mut o2, 8) };
        assert_eq!(s, CuzkStatus::INVALID_CONFIG);
        assert!(last_message().contains("struct_size"), "{}", last_message());
        o2.struct_size = 8;
        // SAFETY: o2 is a valid struct, larger than its struct_size says.
        assert_eq!(unsafe { read_options(&o2) }.unwrap_err().code(), 104);
        // SAFETY: NULL is rejected before any write.
        let s = unsafe { cuzk_options_init(std::ptr::null_mut(), ours) };
        assert_eq!(s, CuzkStatus::INVALID_CONFIG);
        // A caller with a newer header: 16 more bytes; zero (its defaults) is accepted.
        #[repr(C)]
        struct Newer {
            o: CuzkOptions,
            later: [u64; 2],
        }
        let size = std::mem::size_of::<Newer>();
        let mut n = std::mem::MaybeUninit::<Newer>::uninit();
        // SAFETY: n is valid for writing `size` bytes.
        let s = unsafe { cuzk_options_init(n.as_mut_ptr() as *mut CuzkOptions, size) };
        assert_eq!(s, CuzkStatus::OK);
        // SAFETY: cuzk_options_init wrote all `size` bytes.
        let mut n = unsafe { n.assume_init() };
        assert_eq!(n.o.struct_size, size);
        assert_eq!(n.later, [0, 0]);
        assert!(n.o.verify);
        // SAFETY: n is a valid struct of n.o.struct_size bytes.
        let read = unsafe { read_options(&n as *const Newer as *const CuzkOptions) }.unwrap();
        assert!(read.verify && read.struct_size == ours);
        // ... and a later field set to something this library cannot honour is an error.
        n.later[1] = 1;
        // SAFETY: as above.
        let e = unsafe { read_options(&n as *const Newer as *const CuzkOptions) }.unwrap_err();
        assert_eq!(e.code(), 104);
        assert!(e.to_string().contains("newer"), "{e}");
    }

    fn last_message() -> String {
        LAST_ERROR.with(|m| m.borrow().clone())
    }
}
