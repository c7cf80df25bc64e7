//! Host classes of the kernels in `cuda/`: each module owns the launches, device buffers and
//! sizes of one `.cu` file of the same name (`msm.rs` ↔ `cuda/msm.cu`, …).
//!
//! - `msm`: Pippenger multi-scalar multiplication over G1 and G2 (`MsmWorkspace`).
//! - `ntt`: number-theoretic transforms and the fused H-polynomial step.
//! - `spmv`: a, b, c = A·z, B·z, C·z of a compiled circuit, and the R1CS check.
//! - `fixed_base`: fixed-base scalar multiplication, for parameter generation.
//! - `zpack`: a witness's aux vector packed on the host, expanded on the device.
//!
//! Every module needs the `cuda` feature. They launch through [`crate::gpu::driver`] and size
//! their buffers with [`crate::gpu::memory::layout`].

// Used by cuzk's parameter generator (`dev/`) only, not by the prover.
#[cfg(all(feature = "cuda", any(test, feature = "internals")))]
pub mod fixed_base;
#[cfg(feature = "cuda")]
pub mod msm;
#[cfg(feature = "cuda")]
pub mod ntt;
#[cfg(feature = "cuda")]
pub mod spmv;
#[cfg(feature = "cuda")]
pub mod zpack;
