//! CUDA devices: discovery, primary contexts, the embedded kernel module, streams, events,
//! device buffers and kernel launches — a thin, thread-safe layer over the CUDA driver API.
//!
//! - [`device_count`] says how many devices the driver sees (honouring `CUDA_VISIBLE_DEVICES`);
//!   it returns `Ok(0)` when the driver reports no device and [`Error::NoDevice`] when the
//!   driver cannot be initialised at all.
//! - [`Device::get`] opens a device once per process: it retains the device's *primary*
//!   context (shared with every other user of the driver in this process), checks the compute
//!   capability against the architectures in the fatbin ([`Error::DeviceUnsupported`]) and
//!   loads the fatbin built from `cuda/*.cu` (`cuModuleLoadData`). The returned
//!   `Arc<Device>` is `Send + Sync`; every call binds the context to the calling thread first,
//!   so any number of worker threads can share one device.
//! - [`Stream`], [`Event`], [`DeviceBuffer`] own their driver objects and release them on drop.
//! - [`Stream::launch`] launches a kernel of the module by name with arguments built by
//!   [`KernelArgs`].
//!
//! Every driver error becomes [`Error::Cuda`] (device ordinal, driver call, `CUDA_ERROR_*`
//! name and description); allocations that fail for lack of memory become
//! [`Error::OutOfDeviceMemory`] with the bytes asked for and the bytes free.
//!
//! Faults ([`crate::gpu::driver::fault`]): a sticky status (illegal address, launch failure, ECC,
//! …) or a wait past the calling thread's stage deadline **retires** the device for the rest of
//! the process: the error carries `fault: Some(_)`, it is logged once, and every later call on
//! that device (through [`Device::bind`]) fails with the same fault instead of touching the
//! poisoned context. With a stage deadline set, waits ([`Stream::synchronize`],
//! [`Event::synchronize`], synchronous host-to-device copies) poll `cuEventQuery` until the
//! deadline instead of blocking.
//!
//! Allocations made through [`Device::alloc_in`] count against an
//! [`Arena`] (the worker's reserved bytes) and fail with
//! [`Error::OutOfDeviceMemory`] before any `cuMemAlloc` when they would exceed it.
//!
//! Raw driver bindings are declared here (returning the raw `i32` status so that status codes
//! newer than the `cuda-driver-sys` enum are handled without undefined behaviour); the library
//! itself is linked through `cuda-driver-sys` (`CUDA_LIBRARY_PATH`).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{DeviceFault, Error, Result};
use crate::gpu::driver::fault;
use crate::gpu::memory::alloc::{Arena, ArenaLease};

// Force the link of libcuda through cuda-driver-sys's build script (link search path).
use cuda_driver_sys as _;

/// The fatbin compiled by build.rs from `cuda/*.cu`.
static FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cuzk.fatbin"));
/// Architectures with machine code (SASS) in [`FATBIN`], e.g. `"75,80,90"`.
const FATBIN_SASS: &str = env!("CUZK_FATBIN_SASS");
/// The architecture whose PTX is in [`FATBIN`] (JIT-compiled by the driver on newer GPUs).
const FATBIN_PTX: &str = env!("CUZK_FATBIN_PTX");

#[allow(non_camel_case_types, non_snake_case, dead_code)]
mod ffi {
    use std::ffi::{c_char, c_int, c_uint, c_void};
    pub type CUresult = c_int;
    pub type CUdevice = c_int;
    pub type CUcontext = *mut c_void;
    pub type CUmodule = *mut c_void;
    pub type CUfunction = *mut c_void;
    pub type CUstream = *mut c_void;
    pub type CUevent = *mut c_void;
    pub type CUdeviceptr = u64;

    pub const CUDA_SUCCESS: CUresult = 0;
    pub const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
    pub const CUDA_ERROR_NO_DEVICE: CUresult = 100;
    pub const CUDA_ERROR_NOT_READY: CUresult = 600;
    pub const CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: c_int = 1;
    pub const CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: c_int = 16;
    pub const CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: c_int = 38;
    pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
    pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;
    pub const CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: c_int = 97;
    pub const CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: c_int = 8;
    pub const CU_STREAM_NON_BLOCKING: c_uint = 1;
    pub const CU_EVENT_DEFAULT: c_uint = 0;
    pub const CU_EVENT_DISABLE_TIMING: c_uint = 2;

    #[link(name = "cuda")]
    extern "C" {
        pub fn cuInit(flags: c_uint) -> CUresult;
        pub fn cuDriverGetVersion(version: *mut c_int) -> CUresult;
        pub fn cuGetErrorName(e: CUresult, s: *mut *const c_char) -> CUresult;
        pub fn cuGetErrorString(e: CUresult, s: *mut *const c_char) -> CUresult;
        pub fn cuDeviceGetCount(n: *mut c_int) -> CUresult;
        pub fn cuDeviceGet(dev: *mut CUdevice, ordinal: c_int) -> CUresult;
        pub fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult;
        pub fn cuDeviceGetAttribute(v: *mut c_int, attrib: c_int, dev: CUdevice) -> CUresult;
        pub fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) -> CUresult;
        pub fn cuDevicePrimaryCtxRetain(ctx: *mut CUcontext, dev: CUdevice) -> CUresult;
        pub fn cuCtxSetCurrent(ctx: CUcontext) -> CUresult;
        pub fn cuCtxSynchronize() -> CUresult;
        pub fn cuModuleLoadData(m: *mut CUmodule, image: *const c_void) -> CUresult;
        pub fn cuModuleGetFunction(
            f: *mut CUfunction,
            m: CUmodule,
            name: *const c_char,
        ) -> CUresult;
        pub fn cuFuncSetAttribute(f: CUfunction, attrib: c_int, value: c_int) -> CUresult;
        pub fn cuLaunchKernel(
            f: CUfunction,
            gx: c_uint,
            gy: c_uint,
            gz: c_uint,
            bx: c_uint,
            by: c_uint,
            bz: c_uint,
            shared: c_uint,
            stream: CUstream,
            params: *mut *mut c_void,
            extra: *mut *mut c_void,
        ) -> CUresult;
        pub fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CUresult;
        pub fn cuMemAlloc_v2(p: *mut CUdeviceptr, bytes: usize) -> CUresult;
        pub fn cuMemFree_v2(p: CUdeviceptr) -> CUresult;
        pub fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, bytes: usize) -> CUresult;
        pub fn cuMemcpyHtoDAsync_v2(
            dst: CUdeviceptr,
            src: *const c_void,
            bytes: usize,
            s: CUstream,
        ) -> CUresult;
        pub fn cuMemcpyDtoHAsync_v2(
            dst: *mut c_void,
            src: CUdeviceptr,
            bytes: usize,
            s: CUstream,
        ) -> CUresult;
        pub fn cuMemcpyDtoDAsync_v2(
            dst: CUdeviceptr,
            src: CUdeviceptr,
            bytes: usize,
            s: CUstream,
        ) -> CUresult;
        pub fn cuMemsetD8Async(dst: CUdeviceptr, v: u8, n: usize, s: CUstream) -> CUresult;
        pub fn cuStreamCreate(s: *mut CUstream, flags: c_uint) -> CUresult;
        pub fn cuStreamDestroy_v2(s: CUstream) -> CUresult;
        pub fn cuStreamSynchronize(s: CUstream) -> CUresult;
        pub fn cuStreamWaitEvent(s: CUstream, e: CUevent, flags: c_uint) -> CUresult;
        pub fn cuEventCreate(e: *mut CUevent, flags: c_uint) -> CUresult;
        pub fn cuEventDestroy_v2(e: CUevent) -> CUresult;
        pub fn cuEventRecord(e: CUevent, s: CUstream) -> CUresult;
        pub fn cuEventSynchronize(e: CUevent) -> CUresult;
        pub fn cuEventQuery(e: CUevent) -> CUresult;
        pub fn cuEventElapsedTime(ms: *mut f32, start: CUevent, end: CUevent) -> CUresult;
    }
}

/// `CUDA_ERROR_NAME (code): description` for a driver status.
fn describe(code: ffi::CUresult) -> String {
    let mut name: *const c_char = std::ptr::null();
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: the driver writes a pointer to a static NUL-terminated string or leaves null.
    let (rn, rs) = unsafe {
        (
            ffi::cuGetErrorName(code, &mut name),
            ffi::cuGetErrorString(code, &mut text),
        )
    };
    let cstr = |r: ffi::CUresult, p: *const c_char| {
        if r == ffi::CUDA_SUCCESS && !p.is_null() {
            // SAFETY: non-null pointer returned by the driver to a static C string.
            Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        } else {
            None
        }
    };
    match (cstr(rn, name), cstr(rs, text)) {
        (Some(n), Some(t)) => format!("{n} ({code}): {t}"),
        (Some(n), None) => format!("{n} ({code})"),
        _ => format!("CUDA error {code}"),
    }
}

/// Devices retired after a fault: ordinal → (fault, message of the error that retired it).
fn retired() -> &'static Mutex<HashMap<usize, (DeviceFault, String)>> {
    static RETIRED: OnceLock<Mutex<HashMap<usize, (DeviceFault, String)>>> = OnceLock::new();
    RETIRED.get_or_init(Default::default)
}

/// Retires `device` for the rest of the process after `e` (an [`Error::Cuda`] with a fault);
/// logged once, as an error. Returns `e`.
fn retire(e: Error) -> Error {
    if let Error::Cuda {
        device,
        fault: Some(f),
        ..
    } = &e
    {
        let mut r = retired().lock().unwrap_or_else(|p| p.into_inner());
        if !r.contains_key(device) {
            log::error!("cuzk: device {device} retired: {e}");
            r.insert(*device, (*f, e.to_string()));
        }
    }
    e
}

/// Why device `ordinal` was retired, if it was (see the module docs).
pub fn retired_reason(ordinal: usize) -> Option<(DeviceFault, String)> {
    retired()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&ordinal)
        .cloned()
}

/// Maps a driver status to `Ok` or [`Error::Cuda`]; a sticky status retires the device.
fn check(code: ffi::CUresult, device: usize, call: &str) -> Result<()> {
    if code == ffi::CUDA_SUCCESS {
        Ok(())
    } else {
        let sticky = fault::is_sticky(code);
        let e = Error::Cuda {
            device,
            call: call.to_string(),
            message: describe(code),
            fault: sticky.then_some(DeviceFault::Sticky),
        };
        Err(if sticky { retire(e) } else { e })
    }
}

/// Waits until `event` has completed: blocking (`cuEventSynchronize`) without a stage
/// deadline on this thread, else polling `cuEventQuery` until the deadline, past which the
/// device is retired with a timeout fault.
fn wait_event(device: usize, event: ffi::CUevent, call: &str) -> Result<()> {
    match fault::current_deadline() {
        None => {
            // SAFETY: valid event of a bound context.
            check(unsafe { ffi::cuEventSynchronize(event) }, device, call)
        }
        Some(d) => fault::wait_until(device, call, d, || {
            // SAFETY: valid event of a bound context.
            let r = unsafe { ffi::cuEventQuery(event) };
            if r == ffi::CUDA_ERROR_NOT_READY {
                Ok(false)
            } else {
                check(r, device, call).map(|_| true)
            }
        })
        .map_err(retire),
    }
}

/// Waits for everything queued so far on the raw stream `raw` of the bound context (the legacy
/// default stream when null): `cuStreamSynchronize`, or with a stage deadline an event recorded
/// at its end and polled ([`wait_event`]).
fn sync_stream(device: usize, raw: ffi::CUstream, call: &str) -> Result<()> {
    if fault::current_deadline().is_none() {
        // SAFETY: valid stream (or the legacy default stream) of the bound context.
        return check(unsafe { ffi::cuStreamSynchronize(raw) }, device, call);
    }
    let mut e: ffi::CUevent = std::ptr::null_mut();
    // SAFETY: out-pointer to a local; context bound by the caller.
    check(
        unsafe { ffi::cuEventCreate(&mut e, ffi::CU_EVENT_DISABLE_TIMING) },
        device,
        "cuEventCreate",
    )?;
    // SAFETY: e was just created in the bound context; raw is a stream of that context.
    let r = check(
        unsafe { ffi::cuEventRecord(e, raw) },
        device,
        "cuEventRecord",
    )
    .and_then(|_| wait_event(device, e, call));
    // SAFETY: e is owned here and destroyed once (pending records complete regardless).
    unsafe { ffi::cuEventDestroy_v2(e) };
    r
}

/// Result of the one `cuInit` of the process: device count, or a message.
fn init() -> Result<usize> {
    static INIT: OnceLock<std::result::Result<usize, String>> = OnceLock::new();
    INIT.get_or_init(|| {
        // SAFETY: cuInit(0) may be called any number of times from any thread.
        let r = unsafe { ffi::cuInit(0) };
        if r == ffi::CUDA_ERROR_NO_DEVICE {
            return Ok(0);
        }
        if r != ffi::CUDA_SUCCESS {
            return Err(format!(
                "the CUDA driver could not be initialised: cuInit returned {} \
                 (is an NVIDIA driver installed and is this the real libcuda.so.1, not a stub?)",
                describe(r)
            ));
        }
        let mut n: c_int = 0;
        // SAFETY: out-pointer to a local.
        let r = unsafe { ffi::cuDeviceGetCount(&mut n) };
        if r != ffi::CUDA_SUCCESS {
            return Err(format!("cuDeviceGetCount failed: {}", describe(r)));
        }
        Ok(n.max(0) as usize)
    })
    .clone()
    .map_err(Error::NoDevice)
}

/// Number of CUDA devices visible to this process (after `CUDA_VISIBLE_DEVICES`).
///
/// Returns `Ok(0)` when the driver loads but sees no device, and [`Error::NoDevice`] when the
/// driver cannot be initialised (no kernel module, stub library). A process without any
/// `libcuda.so.1` does not start at all, since the library is linked.
pub fn device_count() -> Result<usize> {
    init()
}

/// Version of the installed driver's CUDA API, e.g. `(13, 0)`.
#[cfg(any(test, feature = "internals"))]
pub fn driver_version() -> Result<(u32, u32)> {
    init()?;
    let mut v: c_int = 0;
    // SAFETY: out-pointer to a local.
    check(
        unsafe { ffi::cuDriverGetVersion(&mut v) },
        0,
        "cuDriverGetVersion",
    )?;
    Ok(((v / 1000) as u32, ((v % 1000) / 10) as u32))
}

/// Architectures in the embedded fatbin: (`sm_NN` with machine code, `compute_NN` as PTX),
/// as numbers like 90 for sm_90.
pub fn fatbin_archs() -> (Vec<u32>, u32) {
    let sass = FATBIN_SASS
        .split(',')
        .filter_map(|s| s.parse().ok())
        .collect();
    (sass, FATBIN_PTX.parse().unwrap_or(0))
}

/// Whether the fatbin can run on a device of compute capability `major.minor`: machine code
/// for the same major version and a minor version not above the device's, or PTX for an
/// architecture not above the device's (the driver compiles it at load).
pub fn fatbin_supports(major: u32, minor: u32) -> bool {
    let (sass, ptx) = fatbin_archs();
    let cc = major * 10 + minor;
    sass.iter().any(|&a| a / 10 == major && a % 10 <= minor) || (ptx != 0 && ptx <= cc)
}

/// Opens every visible device (see [`Device::get`]). Empty when there is none.
#[cfg(any(test, feature = "internals"))]
pub fn devices() -> Result<Vec<Arc<Device>>> {
    (0..device_count()?).map(Device::get).collect()
}

/// Free and total memory of a device in bytes (`cuMemGetInfo`), read from the driver now.
pub fn mem_get_info(device: usize) -> Result<(u64, u64)> {
    Device::get(device)?.mem_get_info()
}

/// The devices opened so far, by ordinal (never closed).
fn open_devices() -> &'static Mutex<HashMap<usize, Arc<Device>>> {
    static OPEN: OnceLock<Mutex<HashMap<usize, Arc<Device>>>> = OnceLock::new();
    OPEN.get_or_init(Default::default)
}

/// One opened CUDA device: its primary context and the loaded kernel module.
/// Shared between threads as `Arc<Device>`; obtained from [`Device::get`].
pub struct Device {
    ordinal: usize,
    ctx: ffi::CUcontext,
    module: ffi::CUmodule,
    name: String,
    cc: (u32, u32),
    sm_count: u32,
    total_memory: u64,
    // Reported by `max_shared_memory_optin` and `l2_cache_bytes` (tests and benches).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    max_shared_optin: u32,
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    l2_bytes: u32,
    functions: Mutex<HashMap<String, usize>>,
}

// SAFETY: a CUcontext / CUmodule / CUfunction handle may be used from any thread once the
// context is current on it (every method calls `bind` first); the driver serialises internally.
unsafe impl Send for Device {}
// SAFETY: as above; the mutable function cache is behind a Mutex.
unsafe impl Sync for Device {}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("ordinal", &self.ordinal)
            .field("name", &self.name)
            .field("cc", &self.cc)
            .field("sm_count", &self.sm_count)
            .field("total_memory", &self.total_memory)
            .finish()
    }
}

fn attr(dev: ffi::CUdevice, ordinal: usize, a: c_int) -> Result<u32> {
    let mut v: c_int = 0;
    // SAFETY: out-pointer to a local; dev is a valid device handle.
    check(
        unsafe { ffi::cuDeviceGetAttribute(&mut v, a, dev) },
        ordinal,
        "cuDeviceGetAttribute",
    )?;
    Ok(v.max(0) as u32)
}

impl Device {
    /// Opens device `ordinal` (0-based among visible devices), once per process; later calls
    /// return the same `Arc`.
    ///
    /// Errors: [`Error::NoDevice`] if the driver is unusable or `ordinal` is out of range,
    /// [`Error::DeviceUnsupported`] if the fatbin has no code the device can run (or the
    /// driver is too old for its PTX), [`Error::Cuda`] for other driver failures.
    pub fn get(ordinal: usize) -> Result<Arc<Device>> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(Error::NoDevice(format!(
                "device {ordinal} requested but the driver sees {count} device(s) (CUDA_VISIBLE_DEVICES={})",
                std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_else(|_| "<unset>".into())
            )));
        }
        let mut open = open_devices().lock().map_err(Error::internal)?;
        if let Some(d) = open.get(&ordinal) {
            return Ok(d.clone());
        }
        let d = Arc::new(Self::open(ordinal)?);
        open.insert(ordinal, d.clone());
        Ok(d)
    }

    fn open(ordinal: usize) -> Result<Device> {
        let mut dev: ffi::CUdevice = 0;
        // SAFETY: out-pointer to a local; ordinal < device count.
        check(
            unsafe { ffi::cuDeviceGet(&mut dev, ordinal as c_int) },
            ordinal,
            "cuDeviceGet",
        )?;
        let mut buf = [0 as c_char; 256];
        // SAFETY: the driver writes at most buf.len() bytes including the NUL.
        check(
            unsafe { ffi::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as c_int, dev) },
            ordinal,
            "cuDeviceGetName",
        )?;
        // SAFETY: NUL-terminated by the driver (and the buffer ends with zeros).
        let name = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let major = attr(
            dev,
            ordinal,
            ffi::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
        )?;
        let minor = attr(
            dev,
            ordinal,
            ffi::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
        )?;
        let sm_count = attr(dev, ordinal, ffi::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let max_shared_optin = attr(
            dev,
            ordinal,
            ffi::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?;
        let l2_bytes = attr(dev, ordinal, ffi::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?;
        let mut total: usize = 0;
        // SAFETY: out-pointer to a local.
        check(
            unsafe { ffi::cuDeviceTotalMem_v2(&mut total, dev) },
            ordinal,
            "cuDeviceTotalMem",
        )?;

        let (sass, ptx) = fatbin_archs();
        if !fatbin_supports(major, minor) {
            return Err(Error::DeviceUnsupported {
                device: ordinal,
                reason: format!(
                    "{name} has compute capability {major}.{minor}; this build of cuzk has machine code for \
                     sm_{{{}}} and PTX for compute_{ptx} only (rebuild with CUZK_CUDA_ARCHS=sm_{major}{minor} \
                     or without CUZK_CUDA_ARCHS)",
                    sass.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(",")
                ),
            });
        }

        let mut ctx: ffi::CUcontext = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; the primary context is retained for the process
        // lifetime (Device values live in a static map and are never dropped).
        check(
            unsafe { ffi::cuDevicePrimaryCtxRetain(&mut ctx, dev) },
            ordinal,
            "cuDevicePrimaryCtxRetain",
        )?;
        // SAFETY: ctx was just retained.
        check(
            unsafe { ffi::cuCtxSetCurrent(ctx) },
            ordinal,
            "cuCtxSetCurrent",
        )?;
        let mut module: ffi::CUmodule = std::ptr::null_mut();
        // SAFETY: FATBIN is a complete fatbin image built by nvcc, alive for 'static.
        let r = unsafe { ffi::cuModuleLoadData(&mut module, FATBIN.as_ptr() as *const c_void) };
        if r != ffi::CUDA_SUCCESS {
            return Err(Error::DeviceUnsupported {
                device: ordinal,
                reason: format!(
                    "{name} (compute capability {major}.{minor}) cannot load the cuzk kernels: {} \
                     (a driver older than the CUDA toolkit used to build cuzk rejects its PTX; \
                     update the driver or build for sm_{major}{minor})",
                    describe(r)
                ),
            });
        }
        log::info!(
            "cuzk: device {ordinal}: {name}, cc {major}.{minor}, {sm_count} SMs, {:.1} GiB",
            total as f64 / (1u64 << 30) as f64
        );
        Ok(Device {
            ordinal,
            ctx,
            module,
            name,
            cc: (major, minor),
            sm_count,
            total_memory: total as u64,
            max_shared_optin,
            l2_bytes,
            functions: Mutex::new(HashMap::new()),
        })
    }

    /// Makes this device's context current on the calling thread (cheap; every method of
    /// this module does it, so callers only need it before raw driver calls of their own).
    ///
    /// Errors: the fault that retired the device, once it is retired ([`retired_reason`]):
    /// nothing more runs on a poisoned context.
    pub fn bind(&self) -> Result<()> {
        if let Some((f, message)) = retired_reason(self.ordinal) {
            return Err(Error::Cuda {
                device: self.ordinal,
                call: "device retired".into(),
                message,
                fault: Some(f),
            });
        }
        // SAFETY: ctx is a retained primary context, valid for the process lifetime.
        check(
            unsafe { ffi::cuCtxSetCurrent(self.ctx) },
            self.ordinal,
            "cuCtxSetCurrent",
        )
    }

    /// Device ordinal (0-based, among visible devices).
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
    /// Marketing name, e.g. "NVIDIA H200".
    #[cfg(any(test, feature = "internals"))]
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Compute capability (major, minor), e.g. (9, 0).
    #[cfg(any(test, feature = "internals"))]
    pub fn compute_capability(&self) -> (u32, u32) {
        self.cc
    }
    /// Number of streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }
    /// Total device memory in bytes.
    #[cfg(any(test, feature = "internals"))]
    pub fn total_memory(&self) -> u64 {
        self.total_memory
    }
    /// Largest dynamic shared memory a block may opt into, in bytes.
    #[cfg(any(test, feature = "internals"))]
    pub fn max_shared_memory_optin(&self) -> u32 {
        self.max_shared_optin
    }
    /// L2 cache size in bytes.
    #[cfg(any(test, feature = "internals"))]
    pub fn l2_cache_bytes(&self) -> u32 {
        self.l2_bytes
    }

    /// (free, total) device memory in bytes, read from the driver now (`cuMemGetInfo`).
    pub fn mem_get_info(&self) -> Result<(u64, u64)> {
        self.bind()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: out-pointers to locals; context bound.
        check(
            unsafe { ffi::cuMemGetInfo_v2(&mut free, &mut total) },
            self.ordinal,
            "cuMemGetInfo",
        )?;
        Ok((free as u64, total as u64))
    }

    /// Waits until all work on the device (all streams) has finished.
    #[cfg(any(test, feature = "internals"))]
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: context bound.
        check(
            unsafe { ffi::cuCtxSynchronize() },
            self.ordinal,
            "cuCtxSynchronize",
        )
    }

    /// The lowest-ordinal device this process has opened ([`Device::get`]) that is not
    /// retired, if any: the context host-memory registration binds (never device 0 by
    /// default, which would create a context on a device the user excluded).
    pub fn any_open() -> Option<Arc<Device>> {
        let open = open_devices().lock().ok()?;
        let mut v: Vec<_> = open.values().cloned().collect();
        v.sort_by_key(|d| d.ordinal);
        v.into_iter().find(|d| retired_reason(d.ordinal).is_none())
    }

    /// Looks up a kernel of the embedded module by its `extern "C"` name (cached).
    /// Errors with [`Error::Cuda`] (`CUDA_ERROR_NOT_FOUND`) when no such kernel exists.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let mut cache = self.functions.lock().map_err(Error::internal)?;
        if let Some(&f) = cache.get(name) {
            return Ok(Kernel {
                func: f as ffi::CUfunction,
                device: self.ordinal,
            });
        }
        self.bind()?;
        let cname = CString::new(name).map_err(Error::internal)?;
        let mut f: ffi::CUfunction = std::ptr::null_mut();
        // SAFETY: module is loaded; cname is NUL-terminated; out-pointer to a local.
        check(
            unsafe { ffi::cuModuleGetFunction(&mut f, self.module, cname.as_ptr()) },
            self.ordinal,
            &format!("cuModuleGetFunction({name})"),
        )?;
        cache.insert(name.to_string(), f as usize);
        Ok(Kernel {
            func: f,
            device: self.ordinal,
        })
    }

    /// Allocates an uninitialised device buffer of `len` elements of `T`.
    ///
    /// Errors: [`Error::OutOfDeviceMemory`] (bytes asked for, bytes free) when the driver has
    /// no room, [`Error::Cuda`] otherwise. `len == 0` allocates nothing.
    pub fn alloc<T: DeviceRepr>(self: &Arc<Self>, len: usize) -> Result<DeviceBuffer<T>> {
        self.alloc_leased(len, None)
    }

    /// Allocates like [`Device::alloc`], counted against `arena` (its bytes rounded up to
    /// [`crate::gpu::memory::layout::ALIGN`]); the bytes go back to the arena when the buffer
    /// drops. With `arena` `None`, the same as [`Device::alloc`].
    ///
    /// Errors: [`Error::OutOfDeviceMemory`] `{ needed, free: arena's bytes left }` when the
    /// buffer would exceed the arena (no `cuMemAlloc` happens); else as [`Device::alloc`].
    pub fn alloc_in<T: DeviceRepr>(
        self: &Arc<Self>,
        arena: Option<&Arena>,
        len: usize,
    ) -> Result<DeviceBuffer<T>> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::internal("device allocation size overflows usize"))?;
        let lease = match arena {
            Some(a) if bytes > 0 => Some(a.take(bytes as u64)?),
            _ => None,
        };
        self.alloc_leased(len, lease)
    }

    fn alloc_leased<T: DeviceRepr>(
        self: &Arc<Self>,
        len: usize,
        lease: Option<ArenaLease>,
    ) -> Result<DeviceBuffer<T>> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::internal("device allocation size overflows usize"))?;
        let mut ptr: ffi::CUdeviceptr = 0;
        if bytes > 0 {
            self.bind()?;
            // SAFETY: out-pointer to a local; context bound.
            let r = unsafe { ffi::cuMemAlloc_v2(&mut ptr, bytes) };
            if r == ffi::CUDA_ERROR_OUT_OF_MEMORY {
                let free = self.mem_get_info().map(|(f, _)| f).unwrap_or(0);
                return Err(Error::OutOfDeviceMemory {
                    device: self.ordinal,
                    needed: bytes as u64,
                    free,
                });
            }
            check(r, self.ordinal, &format!("cuMemAlloc({bytes} bytes)"))?;
        }
        Ok(DeviceBuffer {
            device: self.clone(),
            ptr,
            len,
            _lease: lease,
            _t: PhantomData,
        })
    }

    /// Allocates a buffer and copies `data` into it (synchronously).
    #[cfg(any(test, feature = "internals"))]
    pub fn upload<T: DeviceRepr>(self: &Arc<Self>, data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut b = self.alloc(data.len())?;
        b.copy_from_host(data)?;
        Ok(b)
    }

    /// Creates a new non-blocking stream on this device.
    pub fn stream(self: &Arc<Self>) -> Result<Stream> {
        Stream::new(self)
    }
}

/// Plain-data types that may be copied bit for bit between host and device memory.
///
/// # Safety
/// Implementors must be `Copy`, contain no pointers or references, have no padding bytes whose
/// content matters, and accept every bit pattern the device code may write (or the device code
/// must only write valid ones).
pub unsafe trait DeviceRepr: Copy + Send + Sync + 'static {}
// SAFETY: plain integers.
unsafe impl DeviceRepr for u8 {}
// SAFETY: plain integers.
unsafe impl DeviceRepr for u32 {}
// SAFETY: plain integers.
unsafe impl DeviceRepr for u64 {}
// SAFETY: plain integers.
unsafe impl DeviceRepr for i32 {}
// SAFETY: #[repr(transparent)] over blst_fr = [u64; 4] in Montgomery form; kernels write
// canonical (reduced) values only (cuda/field.cuh).
unsafe impl DeviceRepr for blstrs::Scalar {}
// SAFETY: #[repr(transparent)] over blst_fp = [u64; 6], canonical values only (field.cuh).
unsafe impl DeviceRepr for blstrs::Fp {}
// SAFETY: #[repr(transparent)] over blst_fp2 = [blst_fp; 2].
unsafe impl DeviceRepr for blstrs::Fp2 {}
// SAFETY: #[repr(transparent)] over blst_p1_affine = {x, y: blst_fp}.
unsafe impl DeviceRepr for blstrs::G1Affine {}
// SAFETY: #[repr(transparent)] over blst_p2_affine = {x, y: blst_fp2}.
unsafe impl DeviceRepr for blstrs::G2Affine {}
// SAFETY: #[repr(transparent)] over blst_p1 = {x, y, z: blst_fp}.
unsafe impl DeviceRepr for blstrs::G1Projective {}
// SAFETY: #[repr(transparent)] over blst_p2 = {x, y, z: blst_fp2}.
unsafe impl DeviceRepr for blstrs::G2Projective {}

/// A kernel of the embedded module (see [`Device::kernel`]). Cheap to copy.
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    func: ffi::CUfunction,
    device: usize,
}
// SAFETY: CUfunction handles are immutable and valid in any thread once the context is bound.
unsafe impl Send for Kernel {}
// SAFETY: as above.
unsafe impl Sync for Kernel {}

impl Kernel {
    /// Allows launches with up to `bytes` of dynamic shared memory (needed above 48 KiB).
    pub fn set_max_dynamic_shared(&self, bytes: u32) -> Result<()> {
        // SAFETY: valid function handle; plain attribute set.
        check(
            unsafe {
                ffi::cuFuncSetAttribute(
                    self.func,
                    ffi::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes as c_int,
                )
            },
            self.device,
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
        )
    }
}

/// Kernel arguments in declaration order, each kept at a stable address until the launch.
/// Build with the typed `push_*` methods; the kernel's C signature must match exactly.
#[derive(Default)]
pub struct KernelArgs {
    vals: Vec<Box<[u64]>>,
}

impl KernelArgs {
    /// Empty argument list.
    pub fn new() -> Self {
        Self::default()
    }
    /// Appends any plain value (a `T` parameter by value, up to 256 bytes).
    pub fn push<T: DeviceRepr>(&mut self, v: T) -> &mut Self {
        let words = std::mem::size_of::<T>().div_ceil(8).max(1);
        let mut b = vec![0u64; words].into_boxed_slice();
        // SAFETY: b has at least size_of::<T>() bytes and u64 alignment >= T's for the types
        // used here (integers, field elements); unaligned write is used regardless.
        unsafe { std::ptr::write_unaligned(b.as_mut_ptr() as *mut T, v) };
        self.vals.push(b);
        self
    }
    /// Appends a `u32` (`unsigned`) argument.
    pub fn push_u32(&mut self, v: u32) -> &mut Self {
        self.push(v)
    }
    /// Appends an `int` argument.
    pub fn push_i32(&mut self, v: i32) -> &mut Self {
        self.push(v)
    }
    /// Appends a `u64` (`unsigned long long` / `size_t`) argument.
    pub fn push_u64(&mut self, v: u64) -> &mut Self {
        self.push(v)
    }
    /// Appends a device pointer argument (`T*` / `const T*`).
    pub fn push_ptr(&mut self, p: u64) -> &mut Self {
        self.push(p)
    }
    fn params(&mut self) -> Vec<*mut c_void> {
        self.vals
            .iter_mut()
            .map(|b| b.as_mut_ptr() as *mut c_void)
            .collect()
    }
}

/// Launch geometry: grid or block dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim3(pub u32, pub u32, pub u32);
impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3(x, 1, 1)
    }
}
impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3(x, y, 1)
    }
}
impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3(x, y, z)
    }
}

/// A CUDA stream (non-blocking with respect to the legacy default stream). Work queued on one
/// stream runs in order; use [`Event`]s to order work across streams.
pub struct Stream {
    device: Arc<Device>,
    raw: ffi::CUstream,
}
// SAFETY: stream handles may be used from any thread with the context bound (done per call).
unsafe impl Send for Stream {}
// SAFETY: the driver serialises operations queued on one stream from several threads.
unsafe impl Sync for Stream {}

impl Stream {
    /// Creates a stream on `device`.
    pub fn new(device: &Arc<Device>) -> Result<Stream> {
        device.bind()?;
        let mut s: ffi::CUstream = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; context bound.
        check(
            unsafe { ffi::cuStreamCreate(&mut s, ffi::CU_STREAM_NON_BLOCKING) },
            device.ordinal,
            "cuStreamCreate",
        )?;
        Ok(Stream {
            device: device.clone(),
            raw: s,
        })
    }
    /// The device this stream belongs to.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }
    /// Raw `CUstream` handle (for other modules' driver calls).
    #[cfg(any(test, feature = "internals"))]
    pub fn raw(&self) -> *mut c_void {
        self.raw
    }
    /// Blocks until all queued work has finished; surfaces errors of earlier kernels.
    /// With a stage deadline on this thread ([`crate::gpu::driver::fault::stage_deadline`]) it
    /// polls and fails with a timeout fault past the deadline.
    pub fn synchronize(&self) -> Result<()> {
        self.device.bind()?;
        sync_stream(self.device.ordinal, self.raw, "cuStreamSynchronize")
    }
    /// Makes later work on this stream wait for `event` (recorded on any stream).
    #[cfg(any(test, feature = "internals"))]
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.device.bind()?;
        // SAFETY: valid stream and event.
        check(
            unsafe { ffi::cuStreamWaitEvent(self.raw, event.raw, 0) },
            self.device.ordinal,
            "cuStreamWaitEvent",
        )
    }

    /// Queues a kernel launch. `name` only labels errors.
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list in number, order and types, and every
    /// device pointer in it must stay valid (its buffer alive) until the kernel has finished.
    pub unsafe fn launch(
        &self,
        kernel: &Kernel,
        name: &str,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        shared_bytes: u32,
        args: &mut KernelArgs,
    ) -> Result<()> {
        let (g, b) = (grid.into(), block.into());
        self.device.bind()?;
        let mut params = args.params();
        // SAFETY: the caller guarantees argument types and lifetimes; params points to boxed
        // values that outlive this call (the driver copies them at launch).
        let r = unsafe {
            ffi::cuLaunchKernel(
                kernel.func,
                g.0,
                g.1,
                g.2,
                b.0,
                b.1,
                b.2,
                shared_bytes,
                self.raw,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check(
            r,
            self.device.ordinal,
            &format!("cuLaunchKernel({name}, grid {g:?}, block {b:?}, shared {shared_bytes})"),
        )
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: the stream is owned; pending work still completes after destroy.
            unsafe { ffi::cuStreamDestroy_v2(self.raw) };
        }
    }
}

/// A CUDA event, for cross-stream ordering and timing.
pub struct Event {
    device: Arc<Device>,
    raw: ffi::CUevent,
}
// SAFETY: event handles may be used from any thread with the context bound (done per call).
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// Creates an event; `timing` enables [`Event::elapsed_ms`] (slightly slower to record).
    pub fn new(device: &Arc<Device>, timing: bool) -> Result<Event> {
        device.bind()?;
        let mut e: ffi::CUevent = std::ptr::null_mut();
        let flags = if timing {
            ffi::CU_EVENT_DEFAULT
        } else {
            ffi::CU_EVENT_DISABLE_TIMING
        };
        // SAFETY: out-pointer to a local; context bound.
        check(
            unsafe { ffi::cuEventCreate(&mut e, flags) },
            device.ordinal,
            "cuEventCreate",
        )?;
        Ok(Event {
            device: device.clone(),
            raw: e,
        })
    }
    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.device.bind()?;
        // SAFETY: valid event and stream of the same context.
        check(
            unsafe { ffi::cuEventRecord(self.raw, stream.raw) },
            self.device.ordinal,
            "cuEventRecord",
        )
    }
    /// Blocks until the recorded work has finished (polling until the stage deadline, if this
    /// thread has one; past it, a timeout fault).
    pub fn synchronize(&self) -> Result<()> {
        self.device.bind()?;
        wait_event(self.device.ordinal, self.raw, "cuEventSynchronize")
    }
    /// Whether the recorded work has finished (non-blocking).
    #[cfg(any(test, feature = "internals"))]
    pub fn is_done(&self) -> Result<bool> {
        self.device.bind()?;
        // SAFETY: valid event.
        let r = unsafe { ffi::cuEventQuery(self.raw) };
        if r == ffi::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        check(r, self.device.ordinal, "cuEventQuery").map(|_| true)
    }
    /// Milliseconds between `start` and this event (both recorded with timing enabled, both
    /// completed).
    pub fn elapsed_ms(&self, start: &Event) -> Result<f32> {
        self.device.bind()?;
        let mut ms = 0f32;
        // SAFETY: out-pointer to a local; valid events.
        check(
            unsafe { ffi::cuEventElapsedTime(&mut ms, start.raw, self.raw) },
            self.device.ordinal,
            "cuEventElapsedTime",
        )?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: owned event.
            unsafe { ffi::cuEventDestroy_v2(self.raw) };
        }
    }
}

/// An owned device allocation of `len` elements of `T` (`cuMemAlloc`, freed on drop).
pub struct DeviceBuffer<T: DeviceRepr> {
    device: Arc<Device>,
    ptr: ffi::CUdeviceptr,
    len: usize,
    /// The arena bytes this buffer holds (returned after `cuMemFree`, fields drop after `drop`).
    _lease: Option<ArenaLease>,
    _t: PhantomData<T>,
}
// SAFETY: a device pointer is just an address in the context's space; T is plain data.
unsafe impl<T: DeviceRepr> Send for DeviceBuffer<T> {}
// SAFETY: shared access only reads (copies to host / passes the address).
unsafe impl<T: DeviceRepr> Sync for DeviceBuffer<T> {}

impl<T: DeviceRepr> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>[{}] @ {:#x} on device {}",
            std::any::type_name::<T>(),
            self.len,
            self.ptr,
            self.device.ordinal
        )
    }
}

fn range_of(r: impl RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
    let s = match r.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s + 1,
        Bound::Unbounded => 0,
    };
    let e = match r.end_bound() {
        Bound::Included(&e) => e + 1,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if s > e || e > len {
        return Err(Error::internal(format!(
            "device slice range {s}..{e} out of bounds for length {len}"
        )));
    }
    Ok((s, e))
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the buffer holds no element.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Device address of element 0 (for kernel arguments).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
    /// The device owning the memory.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }
    /// Size in bytes.
    #[cfg(any(test, feature = "internals"))]
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
    /// Read-only view of elements `range`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'_, T>> {
        let (s, e) = range_of(range, self.len)?;
        Ok(DeviceSlice {
            device: &self.device,
            ptr: self.ptr + (s * std::mem::size_of::<T>()) as u64,
            len: e - s,
            _t: PhantomData,
        })
    }
    /// Mutable view of elements `range`.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'_, T>> {
        let (s, e) = range_of(range, self.len)?;
        Ok(DeviceSliceMut {
            device: &self.device,
            ptr: self.ptr + (s * std::mem::size_of::<T>()) as u64,
            len: e - s,
            _t: PhantomData,
        })
    }
    /// View of the whole buffer.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        DeviceSlice {
            device: &self.device,
            ptr: self.ptr,
            len: self.len,
            _t: PhantomData,
        }
    }
    /// Mutable view of the whole buffer.
    pub fn as_mut_slice(&mut self) -> DeviceSliceMut<'_, T> {
        DeviceSliceMut {
            device: &self.device,
            ptr: self.ptr,
            len: self.len,
            _t: PhantomData,
        }
    }
    /// Synchronous copy of `src` (exactly `len` elements) into the buffer.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        self.as_mut_slice().copy_from_host(src)
    }
    /// Synchronous copy of the buffer into `dst` (exactly `len` elements).
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        self.as_slice().copy_to_host(dst)
    }
    /// Copies the whole buffer into a new `Vec` (synchronously).
    #[cfg(any(test, feature = "internals"))]
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.as_slice().to_vec()
    }
}

impl<T: DeviceRepr> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr != 0 && self.device.bind().is_ok() {
            // SAFETY: ptr came from cuMemAlloc and is freed once; cuMemFree waits for pending
            // work that uses it.
            unsafe { ffi::cuMemFree_v2(self.ptr) };
        }
    }
}

/// A borrowed read-only range of device memory holding `len` values of `T`.
#[derive(Clone, Copy)]
pub struct DeviceSlice<'a, T: DeviceRepr> {
    device: &'a Arc<Device>,
    ptr: u64,
    len: usize,
    _t: PhantomData<&'a T>,
}

/// A borrowed mutable range of device memory holding `len` values of `T`.
pub struct DeviceSliceMut<'a, T: DeviceRepr> {
    device: &'a Arc<Device>,
    ptr: u64,
    len: usize,
    _t: PhantomData<&'a mut T>,
}

fn len_check(what: &str, want: usize, got: usize) -> Result<()> {
    if want != got {
        return Err(Error::internal(format!(
            "{what}: device range has {want} elements, host slice {got}"
        )));
    }
    Ok(())
}

macro_rules! slice_common {
    ($t:ident) => {
        impl<'a, T: DeviceRepr> $t<'a, T> {
            /// Number of elements.
            pub fn len(&self) -> usize {
                self.len
            }
            /// Whether the range is empty.
            #[cfg(any(test, feature = "internals"))]
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }
            /// Device address of the first element.
            pub fn device_ptr(&self) -> u64 {
                self.ptr
            }
            /// The device owning the memory.
            pub fn device(&self) -> &'a Arc<Device> {
                self.device
            }
            /// Synchronous copy of the range into `dst` (same length). It does not wait for
            /// work queued on other (non-blocking) streams: synchronise the stream that wrote
            /// the range first.
            // The prover copies from `DeviceSlice`s only; tests from `DeviceSliceMut`s too.
            #[cfg_attr(not(feature = "internals"), allow(dead_code))]
            pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
                len_check("copy_to_host", self.len, dst.len())?;
                if self.len == 0 {
                    return Ok(());
                }
                self.device.bind()?;
                // SAFETY: dst has len elements of plain data; the device range is valid.
                check(
                    unsafe {
                        ffi::cuMemcpyDtoH_v2(
                            dst.as_mut_ptr() as *mut c_void,
                            self.ptr,
                            self.len * std::mem::size_of::<T>(),
                        )
                    },
                    self.device.ordinal,
                    "cuMemcpyDtoH",
                )
            }
            /// Copies the range into a new `Vec` (synchronously).
            #[cfg(any(test, feature = "internals"))]
            pub fn to_vec(&self) -> Result<Vec<T>> {
                let mut v = Vec::<T>::with_capacity(self.len);
                // SAFETY: the capacity is reserved; the elements are written by the copy below
                // before `v` is returned (T is plain data, any bit pattern from the device is a
                // value the kernels wrote).
                let out = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr(), self.len) };
                self.copy_to_host(out)?;
                // SAFETY: all len elements were initialised by the copy.
                unsafe { v.set_len(self.len) };
                Ok(v)
            }
            /// Queues a copy of the range into host memory at `dst`.
            ///
            /// # Safety
            /// `dst` must stay valid and untouched until `stream` has passed this copy; it should
            /// be page-locked for the copy to be truly asynchronous.
            #[cfg(any(test, feature = "internals"))]
            pub unsafe fn copy_to_host_async(&self, dst: &mut [T], stream: &Stream) -> Result<()> {
                len_check("copy_to_host_async", self.len, dst.len())?;
                if self.len == 0 {
                    return Ok(());
                }
                self.device.bind()?;
                // SAFETY: caller keeps dst alive until the stream passes the copy.
                check(
                    unsafe {
                        ffi::cuMemcpyDtoHAsync_v2(
                            dst.as_mut_ptr() as *mut c_void,
                            self.ptr,
                            self.len * std::mem::size_of::<T>(),
                            stream.raw,
                        )
                    },
                    self.device.ordinal,
                    "cuMemcpyDtoHAsync",
                )
            }
        }
    };
}
slice_common!(DeviceSlice);
slice_common!(DeviceSliceMut);

impl<'a, T: DeviceRepr> DeviceSlice<'a, T> {
    /// The sub-range `range` (element indices within this slice), with the same lifetime.
    ///
    /// Errors: [`Error::Internal`] when the range is out of bounds.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'a, T>> {
        let (s, e) = range_of(range, self.len)?;
        Ok(DeviceSlice {
            device: self.device,
            ptr: self.ptr + (s * std::mem::size_of::<T>()) as u64,
            len: e - s,
            _t: PhantomData,
        })
    }
}

impl<'a, T: DeviceRepr> DeviceSliceMut<'a, T> {
    /// The sub-range `range` (element indices within this slice), borrowed mutably.
    ///
    /// Errors: [`Error::Internal`] when the range is out of bounds.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'_, T>> {
        let (s, e) = range_of(range, self.len)?;
        Ok(DeviceSliceMut {
            device: self.device,
            ptr: self.ptr + (s * std::mem::size_of::<T>()) as u64,
            len: e - s,
            _t: PhantomData,
        })
    }
    /// Reborrows as a read-only slice.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        DeviceSlice {
            device: self.device,
            ptr: self.ptr,
            len: self.len,
            _t: PhantomData,
        }
    }
    /// The range's memory as 32-bit words (`len · size_of::<T>() / 4` of them), lent as
    /// scratch space. What is written through it need not be valid `T` values: the lender
    /// must have the range overwritten with valid ones before it is read as `T` again
    /// ([`DeviceRepr`]'s contract).
    pub fn into_scratch_words(self) -> DeviceSliceMut<'a, u32> {
        DeviceSliceMut {
            device: self.device,
            ptr: self.ptr,
            len: self.len * std::mem::size_of::<T>() / 4,
            _t: PhantomData,
        }
    }
    /// Reborrows mutably (to pass to a function without giving this one away).
    #[cfg(any(test, feature = "internals"))]
    pub fn reborrow(&mut self) -> DeviceSliceMut<'_, T> {
        DeviceSliceMut {
            device: self.device,
            ptr: self.ptr,
            len: self.len,
            _t: PhantomData,
        }
    }
    /// Synchronous copy of `src` (same length) into the range: when it returns, the data is in
    /// device memory and visible to work queued afterwards on any stream.
    ///
    /// (A plain `cuMemcpyHtoD` from pageable memory may return once the data is staged, before
    /// it reaches the device, and work on non-blocking streams does not wait for it; so the copy
    /// is queued on the legacy default stream and that stream is synchronised.) It does not
    /// wait for work already queued on other streams that uses the range: synchronise those
    /// first.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        len_check("copy_from_host", self.len, src.len())?;
        if self.len == 0 {
            return Ok(());
        }
        self.device.bind()?;
        let null: ffi::CUstream = std::ptr::null_mut();
        // SAFETY: src has len elements and stays borrowed until the stream synchronisation
        // below; the device range is valid and exclusively borrowed.
        check(
            unsafe {
                ffi::cuMemcpyHtoDAsync_v2(
                    self.ptr,
                    src.as_ptr() as *const c_void,
                    self.len * std::mem::size_of::<T>(),
                    null,
                )
            },
            self.device.ordinal,
            "cuMemcpyHtoDAsync",
        )?;
        sync_stream(self.device.ordinal, null, "cuStreamSynchronize(default)")
    }
    /// Queues a copy of host memory `src` into the range.
    ///
    /// # Safety
    /// `src` must stay valid and unmodified until `stream` has passed this copy; it should be
    /// page-locked for the copy to be truly asynchronous.
    pub unsafe fn copy_from_host_async(&mut self, src: &[T], stream: &Stream) -> Result<()> {
        len_check("copy_from_host_async", self.len, src.len())?;
        if self.len == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: caller keeps src alive until the stream passes the copy.
        check(
            unsafe {
                ffi::cuMemcpyHtoDAsync_v2(
                    self.ptr,
                    src.as_ptr() as *const c_void,
                    self.len * std::mem::size_of::<T>(),
                    stream.raw,
                )
            },
            self.device.ordinal,
            "cuMemcpyHtoDAsync",
        )
    }
    /// Queues a device-to-device copy of `src` (same length) into the range.
    pub fn copy_from_device(&mut self, src: &DeviceSlice<'_, T>, stream: &Stream) -> Result<()> {
        len_check("copy_from_device", self.len, src.len)?;
        if self.len == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: both ranges are valid device memory of len elements.
        check(
            unsafe {
                ffi::cuMemcpyDtoDAsync_v2(
                    self.ptr,
                    src.ptr,
                    self.len * std::mem::size_of::<T>(),
                    stream.raw,
                )
            },
            self.device.ordinal,
            "cuMemcpyDtoDAsync",
        )
    }
    /// Queues setting every byte of the range to zero.
    pub fn zero(&mut self, stream: &Stream) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: valid device range.
        check(
            unsafe {
                ffi::cuMemsetD8Async(self.ptr, 0, self.len * std::mem::size_of::<T>(), stream.raw)
            },
            self.device.ordinal,
            "cuMemsetD8Async",
        )
    }
}
