//! Safe launchers for the test kernels of `cuda/test_kernels.cu` (used by tests/gpu_field.rs,
//! benches/ntt.rs and benches/msm.rs; not part of the prover). Behind `test-hooks`. They sit
//! above `device` and `ntt` (the NTT's `PassProduct` picks the probe's product), so that
//! `device` depends on no kernel module.

use crate::error::{Error, Result};
use crate::gpu::driver::device::{DeviceBuffer, DeviceRepr, KernelArgs, Stream};
use crate::gpu::kernels::ntt::PassProduct;

/// Field of a single-op test kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestField {
    /// `cuzk_test_fr_op`, 32-byte elements.
    Fr,
    /// `cuzk_test_fp_op`, 48-byte elements.
    Fp,
    /// `cuzk_test_fp2_op`, 96-byte elements.
    Fp2,
}

/// Runs `out[i] = op(a[i], b[i])` for `i < n` (op codes in cuda/test_kernels.cu) and
/// waits for it. Buffers are raw bytes of any plain type; each must hold at least
/// `n` elements of the field.
pub fn field_op<A: DeviceRepr, B: DeviceRepr, O: DeviceRepr>(
    stream: &Stream,
    field: TestField,
    op: i32,
    a: &DeviceBuffer<A>,
    b: &DeviceBuffer<B>,
    out: &mut DeviceBuffer<O>,
    n: usize,
) -> Result<()> {
    let (name, size) = match field {
        TestField::Fr => ("cuzk_test_fr_op", 32),
        TestField::Fp => ("cuzk_test_fp_op", 48),
        TestField::Fp2 => ("cuzk_test_fp2_op", 96),
    };
    let need = n * size;
    if a.bytes() < need || b.bytes() < need || out.bytes() < need || n > u32::MAX as usize {
        return Err(Error::internal(format!(
            "{name}: buffers too small for {n} elements"
        )));
    }
    let k = stream.device().kernel(name)?;
    let mut args = KernelArgs::new();
    args.push_i32(op)
        .push_ptr(a.device_ptr())
        .push_ptr(b.device_ptr())
        .push_ptr(out.device_ptr())
        .push_u32(n as u32);
    // SAFETY: (int op, const F* a, const F* b, F* out, unsigned n); all buffers hold n
    // elements of F (checked above) and are borrowed until the synchronisation below.
    unsafe { stream.launch(&k, name, (n as u32).div_ceil(128).max(1), 128, 0, &mut args)? };
    stream.synchronize()
}

/// Queues the point-addition cost probe of cuda/test_kernels.cu (`add_probe`) over `t`
/// threads with `k` additions each: `affine` = false, the accumulation's XYZZ mixed addition
/// (`acc[i] += q[i + j t]`, `acc`: t XYZZ points of 192 bytes, all-zero = infinity); true,
/// `out[j] = p[j] + q[j]` in affine coordinates with one inversion per thread (Montgomery's
/// trick; `scratch`: t k Fp elements of 48 bytes). `p`, `q`, `out` hold t k points.
#[allow(clippy::too_many_arguments)]
pub fn g1_add_probe(
    stream: &Stream,
    affine: bool,
    p: &DeviceBuffer<blstrs::G1Affine>,
    q: &DeviceBuffer<blstrs::G1Affine>,
    acc: &mut DeviceBuffer<u8>,
    out: &mut DeviceBuffer<blstrs::G1Affine>,
    scratch: &mut DeviceBuffer<u8>,
    t: u32,
    k: u32,
) -> Result<()> {
    let n = t as usize * k as usize;
    if p.len() < n
        || q.len() < n
        || out.len() < n
        || acc.len() < 192 * t as usize
        || scratch.len() < 48 * n
    {
        return Err(Error::internal("g1_add_probe: buffers too small"));
    }
    let name = if affine {
        "cuzk_test_g1_add_probe_affine"
    } else {
        "cuzk_test_g1_add_probe_xyzz"
    };
    let kern = stream.device().kernel(name)?;
    let mut args = KernelArgs::new();
    args.push_ptr(p.device_ptr())
        .push_ptr(q.device_ptr())
        .push_ptr(acc.device_ptr())
        .push_ptr(out.device_ptr())
        .push_ptr(scratch.device_ptr())
        .push_u32(t)
        .push_u32(k);
    // SAFETY: (const affine* p, const affine* q, xyzz* acc, affine* out, Fp* scratch,
    // unsigned T, unsigned k); every buffer holds what T and k index (checked above) and is
    // borrowed for the call; the caller synchronises the stream before freeing them.
    unsafe { stream.launch(&kern, name, t.div_ceil(128).max(1), 128, 0, &mut args) }
}

/// Queues `iters` rounds of two independent Fr multiplication chains per element of
/// `data` (a throughput probe: 2 * iters * len multiplications with `product`).
pub fn fr_mul_chain(
    stream: &Stream,
    data: &mut DeviceBuffer<blstrs::Scalar>,
    iters: u32,
    product: PassProduct,
) -> Result<()> {
    let n = u32::try_from(data.len()).map_err(Error::internal)?;
    let k = stream.device().kernel("cuzk_test_fr_mul_chain")?;
    let mut args = KernelArgs::new();
    args.push_ptr(data.device_ptr())
        .push_u32(n)
        .push_u32(iters)
        .push_i32(product.index());
    // SAFETY: (Fr* data, unsigned n, unsigned iters, int product); data holds n elements and is
    // mutably borrowed here; the caller synchronises the stream before freeing it (a
    // DeviceBuffer's drop frees with cuMemFree, which waits for pending work).
    unsafe {
        stream.launch(
            &k,
            "cuzk_test_fr_mul_chain",
            n.div_ceil(256).max(1),
            256,
            0,
            &mut args,
        )
    }
}
