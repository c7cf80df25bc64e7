//! Page-locking of host memory (`cuMemHostRegister` / `cuMemHostUnregister`), the driver side of
//! [`crate::gpu::memory::pinned`]'s registry. Registrations are portable (usable from every
//! device's context). Callers go through the registry, which never registers a range twice (so the
//! driver's error 712, "host memory already registered", cannot happen).
//!
//! The driver calls need a current context: they bind a device this process has already opened
//! ([`Device::any_open`], the engine's devices — so a device excluded with `CUZK_DEVICES` never
//! gets a context), never device 0 by default.

use std::ffi::{c_int, c_uint, c_void};

use crate::error::{Error, Result};
use crate::gpu::driver::device::Device;

/// `CU_MEMHOSTREGISTER_PORTABLE`.
const PORTABLE: c_uint = 1;

#[link(name = "cuda")]
extern "C" {
    fn cuMemHostRegister_v2(p: *mut c_void, bytes: usize, flags: c_uint) -> c_int;
    fn cuMemHostUnregister(p: *mut c_void) -> c_int;
}

fn status(device: usize, code: c_int, call: &str) -> Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(Error::Cuda {
            device,
            call: call.into(),
            message: format!("CUDA error {code}"),
            fault: None,
        })
    }
}

/// A device the engine opened, bound on this thread.
fn bound() -> Result<usize> {
    let d = Device::any_open().ok_or_else(|| {
        Error::NoDevice("host memory registration before any CUDA device was opened".into())
    })?;
    d.bind()?;
    Ok(d.ordinal())
}

/// Page-locks `len` bytes at `ptr` for DMA from any device.
///
/// # Errors
/// [`Error::Cuda`] with the driver's code (712 already registered, 2 out of memory / memlock);
/// [`Error::NoDevice`] when this process has opened no (unretired) device yet.
pub fn register(ptr: usize, len: usize) -> Result<()> {
    let device = bound()?;
    // SAFETY: the registry passes a live host range it owns a reference to; the driver only
    // page-locks it and does not write to it.
    status(
        device,
        unsafe { cuMemHostRegister_v2(ptr as *mut c_void, len, PORTABLE) },
        "cuMemHostRegister",
    )
}

/// Releases the registration starting at `ptr`.
///
/// # Errors
/// [`Error::Cuda`] (713 when `ptr` is not registered); [`Error::NoDevice`] as [`register`].
pub fn unregister(ptr: usize) -> Result<()> {
    let device = bound()?;
    // SAFETY: `ptr` is the start of a range this process registered and still owns.
    status(
        device,
        unsafe { cuMemHostUnregister(ptr as *mut c_void) },
        "cuMemHostUnregister",
    )
}
