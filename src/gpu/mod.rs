//! GPU side of the prover, in three rooms grouped by concern:
//!
//! - [`memory`]: planning — the VRAM allocator (tiers, arenas), the byte sizes of every device
//!   buffer for a shape, the pinned-range registry and the pool of pinned witness buffers. Plain
//!   Rust, compiled and unit-tested without CUDA.
//! - [`driver`]: the CUDA driver side — devices, contexts, streams, events, buffers, the kernel
//!   module, page-locking, copy-stream uploads — and the fault policy (plain Rust) that decides
//!   when a device is retired.
//! - [`kernels`]: the host classes of the kernels of `cuda/` (MSM, NTT, SpMV, fixed-base
//!   multiplication), one per `.cu` file of the same name.
//!
//! Dependencies point one way: `kernels` → `driver` → `memory` (and `kernels` → `memory` for
//! sizes and arenas); `memory` uses neither, `driver` never uses `kernels`. The parts that call
//! the CUDA driver are behind the `cuda` feature; `testing` (test kernels, `test-hooks`) sits
//! beside the rooms because it uses both `driver` and `kernels`.

pub mod driver;
pub mod kernels;
pub mod memory;

#[cfg(all(feature = "cuda", any(test, feature = "test-hooks")))]
#[doc(hidden)]
pub mod testing;
