//! Memory planning, host and device: what may be allocated where, and how much.
//!
//! - [`alloc`]: the per-device VRAM allocator — free memory read at every reservation, the tiers
//!   of a partition, and the arenas every device buffer is counted against.
//! - [`layout`]: the byte size of every buffer a GPU operation owns, for a shape; the
//!   allocator's plans are sums of these functions.
//! - [`pinned`]: the process-wide, reference-counted registry of page-locked host ranges (the
//!   driver calls it makes come through a [`pinned::HostPinner`]).
//! - [`hostpool`]: the pool of witness buffers page-locked once and reused by every partition.
//!
//! Plain Rust: compiled and unit-tested without CUDA, and no module here uses
//! [`crate::gpu::driver`] or [`crate::gpu::kernels`].

pub mod alloc;
pub mod hostpool;
pub mod layout;
pub mod pinned;
