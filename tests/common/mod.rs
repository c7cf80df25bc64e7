//! Helpers shared by the GPU test files (`tests/gpu_*.rs`, feature `cuda`).

use std::sync::Arc;

use cuzk::gpu::device::{device_count, Device};

/// CUDA device 0, or `None` after printing why when no device or no usable driver is present
/// (the GPU tests then skip their checks, as their module docs say).
///
/// # Panics
/// If a device is visible but cannot be opened.
pub fn gpu_device() -> Option<Arc<Device>> {
    match device_count() {
        Ok(0) => {
            eprintln!("SKIPPED: no CUDA device visible");
            None
        }
        Err(e) => {
            eprintln!("SKIPPED: CUDA driver unusable: {e}");
            None
        }
        Ok(_) => Some(Device::get(0).expect("open CUDA device 0")),
    }
}
