//! The CUDA driver side: everything that talks to `libcuda`, and the policy for its faults.
//!
//! - [`fault`]: which driver errors poison a context, and the per-thread stage deadlines that
//!   turn a wait that never ends into an error (plain Rust, unit-tested without CUDA).
//! - `device`: devices, primary contexts, the embedded kernel module, streams, events, device
//!   buffers (counted against a [`crate::gpu::memory::alloc::Arena`]) and kernel launches.
//! - `hostmem`: `cuMemHostRegister` / `cuMemHostUnregister`, the driver calls behind
//!   [`crate::gpu::memory::pinned`]'s registry.
//! - `upload`: double-buffered host → device copies on a copy stream.
//!
//! `device`, `hostmem` and `upload` need the `cuda` feature. This room uses
//! [`crate::gpu::memory`] (arenas, the pinned registry) and never [`crate::gpu::kernels`].

pub mod fault;

#[cfg(feature = "cuda")]
pub mod device;
#[cfg(feature = "cuda")]
pub mod hostmem;
#[cfg(feature = "cuda")]
pub mod upload;
