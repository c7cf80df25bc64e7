//! Helpers shared by the GPU test files (`tests/gpu_*.rs`, feature `cuda`).

use std::sync::Arc;

use cuzk::gpu::driver::device::{device_count, Device};

/// Whether `CUZK_REQUIRE_GPU` is set to a true value (`1`, `true`, `yes`, `on`); `0`, `false`,
/// empty or unset mean no.
///
/// # Panics
/// On any other value (a typo must not turn the requirement off).
pub fn gpu_required() -> bool {
    match std::env::var("CUZK_REQUIRE_GPU") {
        Err(_) => false,
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "" | "0" | "false" | "no" | "off" => false,
            "1" | "true" | "yes" | "on" => true,
            _ => panic!("CUZK_REQUIRE_GPU={v:?}: expected 1/true or 0/false"),
        },
    }
}

/// CUDA device 0, or `None` after printing why when no device or no usable driver is present
/// (the GPU tests then skip their checks, as their module docs say) — unless
/// `CUZK_REQUIRE_GPU=1`, when a missing device fails the test instead.
///
/// # Panics
/// If a device is visible but cannot be opened, or none is and `CUZK_REQUIRE_GPU=1`.
pub fn gpu_device() -> Option<Arc<Device>> {
    let why = match device_count() {
        Ok(0) => "no CUDA device visible".to_string(),
        Err(e) => format!("CUDA driver unusable: {e}"),
        Ok(_) => return Some(Device::get(0).expect("open CUDA device 0")),
    };
    if gpu_required() {
        panic!("CUZK_REQUIRE_GPU=1 but {why}");
    }
    eprintln!("SKIPPED: {why}");
    None
}
