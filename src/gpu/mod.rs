//! GPU side of the prover.
//!
//! The planning parts (the VRAM-aware allocator's tiers, the pinned-range registry, the pool of
//! pinned witness buffers) are plain Rust, compiled and unit-tested without CUDA; the parts that
//! call the CUDA driver are behind the `cuda` feature.

pub mod alloc;
pub mod fault;
pub mod hostpool;
pub mod layout;

pub mod pinned;

#[cfg(feature = "cuda")]
pub mod device;
#[cfg(feature = "cuda")]
pub mod fixed_base;
#[cfg(feature = "cuda")]
pub mod hostmem;
#[cfg(feature = "cuda")]
pub mod msm;
#[cfg(feature = "cuda")]
pub mod ntt;
#[cfg(feature = "cuda")]
pub mod spmv;
#[cfg(all(feature = "cuda", any(test, feature = "test-hooks")))]
#[doc(hidden)]
pub mod testing;
#[cfg(feature = "cuda")]
pub mod upload;
