//! Number-theoretic transforms over the BLS12-381 scalar field on the GPU (`cuda/ntt.cu`),
//! and the fused H-polynomial step of the Groth16 prover.
//!
//! Domains are powers of two, `n = 2^log_n` with `log_n <= MAX_LOG_N` (2^28). The roots are
//! those of `ff`/bellperson's `EvaluationDomain` (`w_n = ROOT_OF_UNITY^(2^(32 - log_n))`) and
//! the coset generator is `Scalar::MULTIPLICATIVE_GENERATOR` (7), so results equal the CPU's
//! `fft`, `ifft`, `coset_fft`, `icoset_fft` and `divide_by_z_on_coset` bit for bit.
//!
//! Layers:
//! - [`ntt`]: in-place transform of a device slice, natural order in and out (forward, inverse
//!   scaled by 1/n, coset variants).
//! - [`h_step`]: `a <- icoset( (coset(ifft a) * coset(ifft b) - coset(ifft c)) / Z )` on device
//!   slices, Z = g^n - 1 on the coset, in six transforms (C's coset evaluations are never
//!   formed); `b` and `c` are overwritten.
//! - [`dif`], [`dit`], [`bit_reverse`] with [`Scaling`]: the building blocks, for callers that
//!   want to keep data in bit-reversed order between steps.
//! - [`ntt_host`], [`h_step_host`]: the same on host slices (upload, compute, download).
//!
//! The algorithm (radix-2^k passes of up to 10 stages in shared memory with twist factors
//! between passes) is described in `cuda/ntt.cu`. Twiddle and coset tables (about 11.5 MB) are
//! built on each device the first time it is used and kept for the life of the process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use blstrs::Scalar;
use ff::{Field, PrimeField};

use crate::error::{Error, Result};
#[cfg(any(test, feature = "internals"))]
use crate::gpu::driver::device::Device;
use crate::gpu::driver::device::{DeviceBuffer, DeviceSliceMut, KernelArgs, Stream};

/// Largest supported domain: 2^28 elements.
pub const MAX_LOG_N: u32 = 28;
/// Most stages per pass (local transforms of up to 2^10 points).
const INNER_LOG: u32 = 10;
/// Two-level tables: 2^14 low and 2^14 high entries.
const SPLIT: u32 = 14;
/// The direct twist table holds w_N^(j 2^MID_SHIFT), j < 2^MID_LOG (cuda/ntt.cu).
const MID_SHIFT: u32 = 10;
const MID_LOG: u32 = 18;
/// log2 of the elements per thread block of a pass (2^10 * 32 B = 32 KiB shared memory).
const TILE_LOG: u32 = 10;
/// Most threads per block of a pass (the kernel's launch bound).
const MAX_THREADS: u32 = 256;

/// The Montgomery product of the pass kernel (cuda/field.cuh documents the three; one kernel
/// each, cuda/ntt.cu). Every one is checked against the CPU by tests/gpu_ntt.rs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// The prover runs `Split`; tests and benches choose the others (`tune`).
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub enum PassProduct {
    /// `Fr::mul_cios` (`cuzk_ntt_pass`): word-serial CIOS.
    Cios = 0,
    /// `Fr::mul_wide` (`cuzk_ntt_pass_wide`): 64-bit partial products, shifted accumulator.
    Wide = 1,
    /// `Fr::mul_split` (`cuzk_ntt_pass_split`): 64-bit partial products, unshifted accumulator
    /// split by alignment (the MSM's product).
    Split = 2,
}

impl PassProduct {
    /// Every choice, in kernel order.
    #[cfg(any(test, feature = "internals"))]
    pub const ALL: [PassProduct; 3] = [PassProduct::Cios, PassProduct::Wide, PassProduct::Split];

    /// The product's name in cuda/field.cuh (`mul_cios`, `mul_wide`, `mul_split`).
    #[cfg(any(test, feature = "internals"))]
    pub fn name(self) -> &'static str {
        match self {
            PassProduct::Cios => "mul_cios",
            PassProduct::Wide => "mul_wide",
            PassProduct::Split => "mul_split",
        }
    }

    fn kernel(self) -> &'static str {
        match self {
            PassProduct::Cios => "cuzk_ntt_pass",
            PassProduct::Wide => "cuzk_ntt_pass_wide",
            PassProduct::Split => "cuzk_ntt_pass_split",
        }
    }

    /// The index the test kernels take (0 cios, 1 wide, 2 split; cuda/test_kernels.cu).
    #[cfg(any(test, feature = "internals"))]
    pub fn index(self) -> i32 {
        self as i32
    }
}

/// The pass kernel's product unless a `*_with` function chooses: `mul_split` (BENCHMARKS.md,
/// "NTT": 2^27 forward in the H200 runs of each product; `mul_wide` was the default before).
pub const DEFAULT_PRODUCT: PassProduct = PassProduct::Split;

/// Tuning override for benchmarks: 0 = defaults, else `tile_log << 16 | threads`.
static TUNE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Benchmark knob: elements per block `2^tile_log` (8..=11) and threads per block (32..=256,
/// a power of two) of the pass kernel; `tune(0, 0)` restores the defaults. Process-wide.
#[doc(hidden)]
#[cfg(any(test, feature = "internals"))]
pub fn tune(tile_log: u32, threads: u32) {
    let v = if tile_log == 0 {
        0
    } else {
        (tile_log.clamp(8, 11) << 16) | threads.clamp(32, MAX_THREADS)
    };
    TUNE.store(v, std::sync::atomic::Ordering::Relaxed);
}

fn tuning() -> (u32, u32) {
    match TUNE.load(std::sync::atomic::Ordering::Relaxed) {
        0 => (TILE_LOG, MAX_THREADS),
        v => (v >> 16, v & 0xffff),
    }
}

/// Direction of a transform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg(any(test, feature = "internals"))]
pub enum Direction {
    /// Evaluation: `X[j] = sum_i x[i] w^(ij)`.
    Forward,
    /// Interpolation: `x[i] = n^-1 sum_j X[j] w^(-ij)` (scaled by 1/n).
    Inverse,
}

/// Multiplication fused into the first (`pre`) or last (`post`) pass of [`dif`] / [`dit`].
/// Indices are natural-order indices of the data at that point (for bit-reversed data the
/// kernels bit-reverse the position first).
#[derive(Clone, Copy, Debug)]
pub enum Scaling {
    /// Nothing.
    None,
    /// `x[i] *= s`.
    Mul(Scalar),
    /// `x[i] *= s * g^i` (g = 7, the coset generator).
    MulCosetPowers(Scalar),
    /// `x[i] *= s * g^-i`.
    MulCosetInversePowers(Scalar),
}

/// Device tables shared by every transform on one device.
struct Tables {
    /// w_(2^10)^j, j < 1024.
    w_inner: DeviceBuffer<Scalar>,
    /// w_N^j, j < 2^14 (N = 2^28).
    tw_lo: DeviceBuffer<Scalar>,
    /// w_N^(2^14 j), j < 2^14.
    tw_hi: DeviceBuffer<Scalar>,
    /// w_N^(2^10 j), j < 2^18 (8 MiB): the twists of passes with lo + k <= 18.
    tw_mid: DeviceBuffer<Scalar>,
    /// g^j, g^(2^14 j), g^-j, g^(-2^14 j), j < 2^14.
    g_lo: DeviceBuffer<Scalar>,
    g_hi: DeviceBuffer<Scalar>,
    gi_lo: DeviceBuffer<Scalar>,
    gi_hi: DeviceBuffer<Scalar>,
}

fn pow2(x: Scalar, log: u32) -> Scalar {
    let mut y = x;
    for _ in 0..log {
        y = y.square();
    }
    y
}

/// Primitive 2^log_n-th root of unity, as bellperson's EvaluationDomain computes it.
pub fn root_of_unity(log_n: u32) -> Scalar {
    pow2(Scalar::ROOT_OF_UNITY, Scalar::S - log_n)
}

fn tables(stream: &Stream) -> Result<Arc<Tables>> {
    static CACHE: OnceLock<Mutex<HashMap<usize, Arc<Tables>>>> = OnceLock::new();
    let dev = stream.device();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .map_err(Error::internal)?;
    if let Some(t) = cache.get(&dev.ordinal()) {
        return Ok(t.clone());
    }
    let w_n = root_of_unity(MAX_LOG_N);
    let g = Scalar::MULTIPLICATIVE_GENERATOR;
    let gi = Option::<Scalar>::from(g.invert())
        .ok_or_else(|| Error::internal("generator not invertible"))?;
    let make = |base: Scalar, count: usize| -> Result<DeviceBuffer<Scalar>> {
        let buf = dev.alloc::<Scalar>(count)?;
        let k = dev.kernel("cuzk_ntt_powers")?;
        let mut args = KernelArgs::new();
        args.push_ptr(buf.device_ptr())
            .push(base)
            .push_u32(count as u32);
        // SAFETY: cuzk_ntt_powers(Fr* out, Fr base, unsigned count); buf holds count elements
        // and outlives the launch (the stream is synchronised below before returning).
        unsafe {
            stream.launch(
                &k,
                "cuzk_ntt_powers",
                (count as u32).div_ceil(256),
                256,
                0,
                &mut args,
            )?
        };
        Ok(buf)
    };
    let t = Tables {
        w_inner: make(pow2(w_n, MAX_LOG_N - INNER_LOG), 1 << INNER_LOG)?,
        tw_lo: make(w_n, 1 << SPLIT)?,
        tw_hi: make(pow2(w_n, SPLIT), 1 << SPLIT)?,
        tw_mid: make(pow2(w_n, MID_SHIFT), 1 << MID_LOG)?,
        g_lo: make(g, 1 << SPLIT)?,
        g_hi: make(pow2(g, SPLIT), 1 << SPLIT)?,
        gi_lo: make(gi, 1 << SPLIT)?,
        gi_hi: make(pow2(gi, SPLIT), 1 << SPLIT)?,
    };
    stream.synchronize()?;
    let t = Arc::new(t);
    cache.insert(dev.ordinal(), t.clone());
    Ok(t)
}

/// log2 of a power-of-two length within the supported range.
fn log2_len(n: usize) -> Result<u32> {
    if n == 0 || !n.is_power_of_two() || n.trailing_zeros() > MAX_LOG_N {
        return Err(Error::internal(format!(
            "NTT length {n} is not a power of two between 1 and 2^{MAX_LOG_N}"
        )));
    }
    Ok(n.trailing_zeros())
}

fn same_device(stream: &Stream, data: &DeviceSliceMut<'_, Scalar>) -> Result<()> {
    if data.device().ordinal() != stream.device().ordinal() {
        return Err(Error::internal(format!(
            "NTT data on device {} but stream on device {}",
            data.device().ordinal(),
            stream.device().ordinal()
        )));
    }
    Ok(())
}

/// Stage counts of the passes for a 2^log_n transform, from the top bits down, balanced.
fn plan(log_n: u32) -> Vec<u32> {
    if log_n == 0 {
        return vec![];
    }
    let passes = log_n.div_ceil(INNER_LOG);
    let (base, rem) = (log_n / passes, log_n % passes);
    (0..passes).map(|i| base + u32::from(i < rem)).collect()
}

fn scaling_args(t: &Tables, s: Scaling) -> (i32, Scalar, u64, u64) {
    match s {
        Scaling::None => (0, Scalar::ONE, t.g_lo.device_ptr(), t.g_hi.device_ptr()),
        Scaling::Mul(x) => (1, x, t.g_lo.device_ptr(), t.g_hi.device_ptr()),
        // mode 3: the same without the product by a scale of one
        Scaling::MulCosetPowers(x) => (
            if x == Scalar::ONE { 3 } else { 2 },
            x,
            t.g_lo.device_ptr(),
            t.g_hi.device_ptr(),
        ),
        Scaling::MulCosetInversePowers(x) => (
            if x == Scalar::ONE { 3 } else { 2 },
            x,
            t.gi_lo.device_ptr(),
            t.gi_hi.device_ptr(),
        ),
    }
}

/// Runs the passes of one transform: DIF (natural in, bit-reversed out) or DIT (bit-reversed
/// in, natural out), with the fused first/last-pass scalings.
#[allow(clippy::too_many_arguments)]
fn passes(
    stream: &Stream,
    data: &mut DeviceSliceMut<'_, Scalar>,
    dit: bool,
    inverse: bool,
    pre: Scaling,
    post: Scaling,
    product: PassProduct,
) -> Result<()> {
    same_device(stream, data)?;
    let log_n = log2_len(data.len())?;
    let t = tables(stream)?;
    let dev = stream.device();
    let kname = product.kernel();
    let kernel = dev.kernel(kname)?;
    let mut ks = plan(log_n);
    if log_n == 0 {
        // n = 1: the transform is the identity; apply the scalings (index 0: g^0 = 1).
        for s in [pre, post] {
            let (mode, scale, lo, hi) = scaling_args(&t, s);
            if mode != 0 {
                let k = dev.kernel("cuzk_ntt_scale")?;
                let mut args = KernelArgs::new();
                args.push_ptr(data.device_ptr())
                    .push_u32(1)
                    .push_i32(mode)
                    .push(scale)
                    .push_ptr(lo)
                    .push_ptr(hi);
                // SAFETY: cuzk_ntt_scale(Fr*, unsigned n, int mode, Fr scale, const Fr*, const Fr*);
                // data has 1 element; tables live in the per-device cache for the process.
                unsafe { stream.launch(&k, "cuzk_ntt_scale", 1, 32, 0, &mut args)? };
            }
        }
        return Ok(());
    }
    if dit {
        ks.reverse();
    }
    let npass = ks.len();
    let (tile_log, max_threads) = tuning();
    let mut covered = 0u32; // bits already handled (from the top for DIF, bottom for DIT)
    for (p, &k) in ks.iter().enumerate() {
        let lo = if dit { covered } else { log_n - covered - k };
        covered += k;
        let mut log_g = tile_log.saturating_sub(k);
        log_g = log_g.min(log_n - k);
        if lo > 0 {
            log_g = log_g.min(lo);
        }
        let tile = 1u32 << (k + log_g);
        let threads = (tile / 2).clamp(32, max_threads);
        let grid = 1u32 << (log_n - k - log_g);
        let shared = tile * 32;
        if shared > 48 * 1024 {
            dev.bind()?;
            kernel.set_max_dynamic_shared(shared)?;
        }
        let (pre_mode, pre_scale, pre_lo, pre_hi) =
            scaling_args(&t, if p == 0 { pre } else { Scaling::None });
        let (post_mode, post_scale, post_lo, post_hi) =
            scaling_args(&t, if p + 1 == npass { post } else { Scaling::None });
        // One scale value per launch: when both are active (only possible with one pass), fold
        // the pre scale in with a separate launch first.
        let (pre_mode, scale, s_lo, s_hi, post_mode) = if pre_mode != 0 && post_mode != 0 {
            let k2 = dev.kernel("cuzk_ntt_scale")?;
            let mut args = KernelArgs::new();
            args.push_ptr(data.device_ptr())
                .push_u32(data.len() as u32)
                .push_i32(pre_mode)
                .push(pre_scale)
                .push_ptr(pre_lo)
                .push_ptr(pre_hi);
            if dit {
                return Err(Error::internal(
                    "pre-scaling of bit-reversed data with a single DIT pass is not supported",
                ));
            }
            // SAFETY: cuzk_ntt_scale(Fr*, unsigned, int, Fr, const Fr*, const Fr*); data holds
            // len elements (natural order: DIF input), tables live for the process.
            unsafe {
                stream.launch(
                    &k2,
                    "cuzk_ntt_scale",
                    (data.len() as u32).div_ceil(256),
                    256,
                    0,
                    &mut args,
                )?
            };
            (0, post_scale, post_lo, post_hi, post_mode)
        } else if pre_mode != 0 {
            (pre_mode, pre_scale, pre_lo, pre_hi, 0)
        } else {
            (0, post_scale, post_lo, post_hi, post_mode)
        };
        let mut args = KernelArgs::new();
        args.push_ptr(data.device_ptr())
            .push_u32(log_n)
            .push_u32(lo)
            .push_u32(k)
            .push_u32(log_g)
            .push_i32(i32::from(dit))
            .push_i32(i32::from(inverse))
            .push_ptr(t.w_inner.device_ptr())
            .push_ptr(t.tw_lo.device_ptr())
            .push_ptr(t.tw_hi.device_ptr())
            .push_ptr(t.tw_mid.device_ptr())
            .push_i32(pre_mode)
            .push_i32(post_mode)
            .push(scale)
            .push_ptr(s_lo)
            .push_ptr(s_hi);
        // SAFETY: matches cuzk_ntt_pass(Fr*, unsigned log_n, unsigned lo, unsigned k, unsigned
        // log_g, int dit, int inverse, const Fr* x4, int pre_mode, int post_mode, Fr scale,
        // const Fr* x2); the plan keeps k <= 10, lo + k <= log_n, 2^log_g <= 2^lo for lo > 0,
        // grid * tile = n; data is borrowed mutably for the call and the tables live for the
        // process, so all pointers outlive the queued kernel as long as the caller keeps `data`
        // alive until the stream is synchronised (the borrow ends at return: documented).
        unsafe { stream.launch(&kernel, kname, grid, threads, shared, &mut args)? };
    }
    Ok(())
}

/// Decimation-in-frequency transform: natural-order input, **bit-reversed** output, in place.
/// `pre` is applied to the input (natural indices), `post` to the output (indices of the
/// bit-reversed output, i.e. natural frequency indices). Queued on `stream`; `data` must stay
/// allocated until the stream is synchronised. Length: a power of two up to 2^28.
#[cfg(any(test, feature = "internals"))]
pub fn dif(
    stream: &Stream,
    data: &mut DeviceSliceMut<'_, Scalar>,
    dir: Direction,
    pre: Scaling,
    post: Scaling,
) -> Result<()> {
    passes(
        stream,
        data,
        false,
        dir == Direction::Inverse,
        pre,
        post,
        DEFAULT_PRODUCT,
    )
}

/// Decimation-in-time transform: **bit-reversed** input, natural-order output, in place.
/// `pre` indices are those of the (bit-reversed) input's natural positions; `post` natural.
/// With a single pass (n <= 1024) `pre` and `post` cannot both be set. Inverse transforms are not
/// scaled by 1/n: pass `Scaling::Mul(n^-1)` (or a coset scaling) as `post`.
#[cfg(any(test, feature = "internals"))]
pub fn dit(
    stream: &Stream,
    data: &mut DeviceSliceMut<'_, Scalar>,
    dir: Direction,
    pre: Scaling,
    post: Scaling,
) -> Result<()> {
    passes(
        stream,
        data,
        true,
        dir == Direction::Inverse,
        pre,
        post,
        DEFAULT_PRODUCT,
    )
}

/// In-place bit-reversal permutation of a power-of-two-length slice.
#[cfg(any(test, feature = "internals"))]
pub fn bit_reverse(stream: &Stream, data: &mut DeviceSliceMut<'_, Scalar>) -> Result<()> {
    same_device(stream, data)?;
    let log_n = log2_len(data.len())?;
    if log_n == 0 {
        return Ok(());
    }
    let k = stream.device().kernel("cuzk_ntt_bitrev")?;
    let mut args = KernelArgs::new();
    args.push_ptr(data.device_ptr()).push_u32(log_n);
    // SAFETY: cuzk_ntt_bitrev(Fr* data, unsigned log_n); data holds 2^log_n elements.
    unsafe {
        stream.launch(
            &k,
            "cuzk_ntt_bitrev",
            (data.len() as u32).div_ceil(256),
            256,
            0,
            &mut args,
        )
    }
}

/// 1/n in Fr.
fn inv_n(n: usize) -> Result<Scalar> {
    Option::<Scalar>::from(Scalar::from(n as u64).invert())
        .ok_or_else(|| Error::internal("n not invertible"))
}

/// In-place transform of a device slice, natural order in and out.
///
/// `Forward`: `X[j] = sum_i x[i] w^(ij)`; `Inverse`: `x[i] = n^-1 sum_j X[j] w^(-ij)`.
/// `coset`: evaluate on / interpolate from the coset `g*<w>` (forward multiplies `x[i]` by
/// `g^i` first, inverse multiplies the result by `g^-i`), as bellperson's `coset_fft` /
/// `icoset_fft`. The work is queued on `stream`: synchronise before reading the result.
/// Errors: length not a power of two in 1..=2^28, data on another device, CUDA errors.
#[cfg(any(test, feature = "internals"))]
pub fn ntt(
    stream: &Stream,
    data: &mut DeviceSliceMut<'_, Scalar>,
    dir: Direction,
    coset: bool,
) -> Result<()> {
    ntt_with(stream, data, dir, coset, DEFAULT_PRODUCT)
}

/// [`ntt`] with an explicit choice of the pass kernel's product.
#[doc(hidden)]
#[cfg(any(test, feature = "internals"))]
pub fn ntt_with(
    stream: &Stream,
    data: &mut DeviceSliceMut<'_, Scalar>,
    dir: Direction,
    coset: bool,
    product: PassProduct,
) -> Result<()> {
    let n = data.len();
    log2_len(n)?;
    let (pre, post) = match (dir, coset) {
        (Direction::Forward, false) => (Scaling::None, Scaling::None),
        (Direction::Forward, true) => (Scaling::MulCosetPowers(Scalar::ONE), Scaling::None),
        (Direction::Inverse, false) => (Scaling::None, Scaling::Mul(inv_n(n)?)),
        (Direction::Inverse, true) => (Scaling::None, Scaling::MulCosetInversePowers(inv_n(n)?)),
    };
    passes(
        stream,
        data,
        false,
        dir == Direction::Inverse,
        pre,
        post,
        product,
    )?;
    bit_reverse(stream, data)
}

/// The H step of the Groth16 prover on device slices of equal power-of-two length n:
///
/// `a <- icoset_fft( (coset_fft(ifft a) * coset_fft(ifft b) - coset_fft(ifft c)) / (g^n - 1) )`
///
/// i.e. bellperson's `ifft`, `coset_fft`, `mul_assign`, `sub_assign`, `divide_by_z_on_coset`,
/// `icoset_fft` sequence, with the result (n coefficients, natural order) in `a`, equal to it
/// element for element. `b` and `c` are overwritten with intermediate values.
///
/// Six transforms instead of seven: C's coset evaluations are never formed. The coset
/// interpolation is linear and C has degree < n, so
/// `icoset((A·B − C)/Z) = icoset(A·B)/Z − C/Z` with C = ifft(c): `c` gets one inverse
/// transform, and its coefficients (divided by Z) are subtracted after the last one. Six
/// transforms, one pointwise product and one subtraction pass, queued on `stream`. Errors as
/// [`ntt`], plus mismatched lengths.
pub fn h_step(
    stream: &Stream,
    a: &mut DeviceSliceMut<'_, Scalar>,
    b: &mut DeviceSliceMut<'_, Scalar>,
    c: &mut DeviceSliceMut<'_, Scalar>,
) -> Result<()> {
    h_step_with(stream, a, b, c, DEFAULT_PRODUCT)
}

/// [`h_step`] with an explicit choice of the pass kernel's product.
#[doc(hidden)]
pub fn h_step_with(
    stream: &Stream,
    a: &mut DeviceSliceMut<'_, Scalar>,
    b: &mut DeviceSliceMut<'_, Scalar>,
    c: &mut DeviceSliceMut<'_, Scalar>,
    product: PassProduct,
) -> Result<()> {
    let n = a.len();
    if b.len() != n || c.len() != n {
        return Err(Error::internal(format!(
            "h_step: lengths differ (a {n}, b {}, c {})",
            b.len(),
            c.len()
        )));
    }
    same_device(stream, b)?;
    same_device(stream, c)?;
    let h = HStep::new(stream, n, product)?;
    h.to_coset(a)?;
    h.to_coset(b)?;
    h.c_over_z(c)?;
    h.combine(a, b)?;
    h.interpolate(a)?;
    h.subtract(a, c)
}

/// [`h_step`] on two domain buffers instead of three, for a card that cannot hold three
/// (2 × 4 GiB instead of 3 × 4 GiB at 2^27): `bc` holds b (evaluations, natural order) on
/// entry; once A·B is formed on the coset, `fill_c` writes c into `bc` (queued on `stream` or
/// synchronous), and C's coefficients take b's place. The same transforms and passes as
/// [`h_step`] in another order (A·B's interpolation before C's transform, independent of
/// it), so `a` ends equal to [`h_step`]'s result element for element. Errors as [`h_step`],
/// plus `fill_c`'s.
pub fn h_step_shared(
    stream: &Stream,
    a: &mut DeviceSliceMut<'_, Scalar>,
    bc: &mut DeviceSliceMut<'_, Scalar>,
    fill_c: impl FnOnce(&mut DeviceSliceMut<'_, Scalar>) -> Result<()>,
) -> Result<()> {
    let n = a.len();
    if bc.len() != n {
        return Err(Error::internal(format!(
            "h_step_shared: lengths differ (a {n}, bc {})",
            bc.len()
        )));
    }
    same_device(stream, bc)?;
    let h = HStep::new(stream, n, DEFAULT_PRODUCT)?;
    h.to_coset(a)?;
    h.to_coset(bc)?;
    h.combine(a, bc)?;
    h.interpolate(a)?;
    // The combine kernel reads `bc` on `stream`; `fill_c` may write it from the host with a
    // copy that does not order itself after `stream`'s work, so that work ends first.
    stream.synchronize()?;
    fill_c(bc)?;
    h.c_over_z(bc)?;
    h.subtract(a, bc)
}

/// The stages of the H step on a domain of n = 2^`log_n` points (see [`h_step`]), each queued
/// on `stream`.
///
/// The 1/n of the inverse transforms are folded into the constants, so that a, b and the
/// result are scaled by g^±i alone (one product per element fewer each): with a' = n A and
/// b' = n B on the coset (unscaled inverse transforms), a' b' / (Z n^3) = A B / (Z n), and the
/// last inverse transform's own 1/n is the n^-3's third factor.
struct HStep<'s> {
    stream: &'s Stream,
    n: usize,
    log_n: u32,
    ninv: Scalar,
    z_inv: Scalar,
    product: PassProduct,
}

impl<'s> HStep<'s> {
    fn new(stream: &'s Stream, n: usize, product: PassProduct) -> Result<Self> {
        let log_n = log2_len(n)?;
        let ninv = inv_n(n)?;
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let z = g.pow_vartime([n as u64]) - Scalar::ONE;
        let z_inv = Option::<Scalar>::from(z.invert())
            .ok_or_else(|| Error::internal("Z vanishes on the coset"))?;
        Ok(HStep {
            stream,
            n,
            log_n,
            ninv,
            z_inv,
            product,
        })
    }

    fn check(&self, x: &DeviceSliceMut<'_, Scalar>) -> Result<()> {
        if x.len() != self.n {
            return Err(Error::internal(format!(
                "h_step: a buffer of {} for a domain of {}",
                x.len(),
                self.n
            )));
        }
        same_device(self.stream, x)
    }

    /// Evaluations (natural order) → coefficients × g^i (bit-reversed) → coset evaluations
    /// (natural order), unscaled by 1/n.
    fn to_coset(&self, x: &mut DeviceSliceMut<'_, Scalar>) -> Result<()> {
        self.check(x)?;
        passes(
            self.stream,
            x,
            false,
            true,
            Scaling::None,
            Scaling::MulCosetPowers(Scalar::ONE),
            self.product,
        )?;
        passes(
            self.stream,
            x,
            true,
            false,
            Scaling::None,
            Scaling::None,
            self.product,
        )
    }

    /// c's evaluations → C / Z in coefficients, bit-reversed order.
    fn c_over_z(&self, c: &mut DeviceSliceMut<'_, Scalar>) -> Result<()> {
        self.check(c)?;
        passes(
            self.stream,
            c,
            false,
            true,
            Scaling::None,
            Scaling::Mul(self.ninv * self.z_inv),
            self.product,
        )
    }

    /// a ← a · b / (Z n^3) on the coset.
    fn combine(
        &self,
        a: &mut DeviceSliceMut<'_, Scalar>,
        b: &DeviceSliceMut<'_, Scalar>,
    ) -> Result<()> {
        self.check(a)?;
        self.check(b)?;
        let dev = self.stream.device();
        let k = dev.kernel("cuzk_ntt_h_combine")?;
        let mut args = KernelArgs::new();
        args.push_ptr(a.device_ptr())
            .push_ptr(b.device_ptr())
            .push_u32(self.log_n)
            .push(self.z_inv * self.ninv * self.ninv * self.ninv);
        let grid = (self.n as u32).div_ceil(256);
        // SAFETY: cuzk_ntt_h_combine(Fr* a, const Fr* b, unsigned log_n, Fr k); both slices hold
        // 2^log_n elements on this stream's device (checked above).
        unsafe { self.stream.launch(&k, "cuzk_ntt_h_combine", grid, 256, 0, &mut args) }
    }

    /// a's coset evaluations → coefficients (natural order).
    fn interpolate(&self, a: &mut DeviceSliceMut<'_, Scalar>) -> Result<()> {
        self.check(a)?;
        passes(
            self.stream,
            a,
            true,
            true,
            Scaling::None,
            Scaling::MulCosetInversePowers(Scalar::ONE),
            self.product,
        )
    }

    /// a ← a − C/Z, C/Z read in bit-reversed order.
    fn subtract(
        &self,
        a: &mut DeviceSliceMut<'_, Scalar>,
        c: &DeviceSliceMut<'_, Scalar>,
    ) -> Result<()> {
        self.check(a)?;
        self.check(c)?;
        let k = self.stream.device().kernel("cuzk_ntt_sub_bitrev")?;
        let mut args = KernelArgs::new();
        args.push_ptr(a.device_ptr())
            .push_ptr(c.device_ptr())
            .push_u32(self.log_n);
        let grid = (self.n as u32).div_ceil(256);
        // SAFETY: cuzk_ntt_sub_bitrev(Fr* a, const Fr* c, unsigned log_n); both slices hold
        // 2^log_n elements on this stream's device (checked above).
        unsafe { self.stream.launch(&k, "cuzk_ntt_sub_bitrev", grid, 256, 0, &mut args) }
    }
}

/// [`ntt`] on a host slice: uploads, transforms on a new stream of `device`, downloads into
/// `data`. Blocking.
#[cfg(any(test, feature = "internals"))]
pub fn ntt_host(
    device: &Arc<Device>,
    data: &mut [Scalar],
    dir: Direction,
    coset: bool,
) -> Result<()> {
    ntt_host_with(device, data, dir, coset, DEFAULT_PRODUCT)
}

/// [`ntt_host`] with an explicit choice of the pass kernel's product.
#[doc(hidden)]
#[cfg(any(test, feature = "internals"))]
pub fn ntt_host_with(
    device: &Arc<Device>,
    data: &mut [Scalar],
    dir: Direction,
    coset: bool,
    product: PassProduct,
) -> Result<()> {
    log2_len(data.len())?;
    let stream = device.stream()?;
    let mut buf = device.upload(data)?;
    ntt_with(&stream, &mut buf.as_mut_slice(), dir, coset, product)?;
    stream.synchronize()?;
    buf.copy_to_host(data)
}

/// [`h_step`] on host slices of equal power-of-two length; returns the n coefficients of h.
/// Blocking; needs 3n * 32 bytes of device memory.
#[cfg(any(test, feature = "internals"))]
pub fn h_step_host(
    device: &Arc<Device>,
    a: &[Scalar],
    b: &[Scalar],
    c: &[Scalar],
) -> Result<Vec<Scalar>> {
    h_step_host_with(device, a, b, c, DEFAULT_PRODUCT)
}

/// [`h_step_host`] with an explicit choice of the pass kernel's product.
#[doc(hidden)]
#[cfg(any(test, feature = "internals"))]
pub fn h_step_host_with(
    device: &Arc<Device>,
    a: &[Scalar],
    b: &[Scalar],
    c: &[Scalar],
    product: PassProduct,
) -> Result<Vec<Scalar>> {
    let stream = device.stream()?;
    let mut da = device.upload(a)?;
    let mut db = device.upload(b)?;
    let mut dc = device.upload(c)?;
    h_step_with(
        &stream,
        &mut da.as_mut_slice(),
        &mut db.as_mut_slice(),
        &mut dc.as_mut_slice(),
        product,
    )?;
    stream.synchronize()?;
    da.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cover_all_bits() {
        for log_n in 0..=MAX_LOG_N {
            let p = plan(log_n);
            assert_eq!(p.iter().sum::<u32>(), log_n);
            assert!(p.iter().all(|&k| (1..=INNER_LOG).contains(&k)));
        }
        assert_eq!(plan(27), vec![9, 9, 9]);
        assert_eq!(plan(20), vec![10, 10]);
    }
}
