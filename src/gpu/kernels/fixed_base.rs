//! Fixed-base scalar multiplication on the GPU: sᵢ·G for many scalars and one point G of G1 or
//! G2 — the bulk of Groth16 parameter generation (the H, L, A, B queries are multiples of two
//! fixed bases). Kernels: `cuda/fixed_base.cu`.
//!
//! A [`FixedBase`] holds, on one device, the window tables of a G1 and a G2 base: [`WINDOWS`]
//! windows of [`WINDOW_BITS`] bits, `table[k·(2^w − 1) + d − 1] = d·2^(w·k)·G` in affine form
//! (built on the device from the window bases, one inversion per entry). One thread per scalar
//! then adds at most [`WINDOWS`] table points (mixed XYZZ additions, no doublings) and stores a
//! Jacobian point (blst layout, = `blstrs::G1Projective`); the host normalizes chunks of results
//! to affine with blstrs' batch normalization, in parallel.
//!
//! Device memory: tables 100.7 MB (G1) + 201.3 MB (G2), plus per chunk of at most [`CHUNK`]
//! scalars 32 B (scalar) + 144 B (G1) or 288 B (G2) each: [`FixedBase::bytes`].

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::{Curve, Group};
use rayon::prelude::*;

use super::msm::{MsmGroup, G1, G2};
use crate::error::Result;
use crate::gpu::driver::device::{Device, DeviceBuffer, KernelArgs};

/// Bits per window of the tables.
pub const WINDOW_BITS: u32 = 16;
/// Windows per table (`WINDOWS · WINDOW_BITS ≥ 255`, the scalar size).
pub const WINDOWS: u32 = 16;
/// Table points per window (`2^WINDOW_BITS − 1`; digit 0 needs none).
const DIGITS: usize = (1 << WINDOW_BITS) - 1;
/// Scalars per launch (and per host normalization batch).
pub const CHUNK: usize = 1 << 22;
/// Threads per block.
const THREADS: u32 = 128;

/// The window tables of a G1 and a G2 base on one device.
pub struct FixedBase {
    dev: Arc<Device>,
    g1: DeviceBuffer<G1Affine>,
    g2: DeviceBuffer<G2Affine>,
}

impl FixedBase {
    /// Builds the tables of `g1` and `g2` on `dev`.
    ///
    /// # Errors
    /// [`crate::Error::OutOfDeviceMemory`] / [`crate::Error::Cuda`] from the device.
    pub fn new(dev: &Arc<Device>, g1: &G1Projective, g2: &G2Projective) -> Result<FixedBase> {
        Ok(FixedBase {
            dev: dev.clone(),
            g1: table::<G1>(dev, *g1)?,
            g2: table::<G2>(dev, *g2)?,
        })
    }

    /// Device bytes a [`FixedBase`] and one chunk of G2 work take (the most at any time).
    pub fn bytes() -> u64 {
        let t = (WINDOWS as usize * DIGITS) as u64;
        let (a1, a2) = (
            std::mem::size_of::<G1Affine>() as u64,
            std::mem::size_of::<G2Affine>() as u64,
        );
        t * (a1 + a2) + CHUNK as u64 * (32 + std::mem::size_of::<G2Projective>() as u64)
    }

    /// `out[i] = scalars[i]·g1` (affine; the identity for a zero scalar).
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] when the lengths differ; device errors.
    pub fn g1(&self, scalars: &[Scalar], out: &mut [G1Affine]) -> Result<()> {
        mul::<G1>(&self.dev, &self.g1, scalars, out)
    }

    /// `out[i] = scalars[i]·g2` (affine).
    ///
    /// # Errors
    /// As [`FixedBase::g1`].
    pub fn g2(&self, scalars: &[Scalar], out: &mut [G2Affine]) -> Result<()> {
        mul::<G2>(&self.dev, &self.g2, scalars, out)
    }
}

/// The window table of `base` (see the module docs).
fn table<G>(dev: &Arc<Device>, base: G::Projective) -> Result<DeviceBuffer<G::Affine>>
where
    G: MsmGroup,
    G::Projective: Curve<AffineRepr = G::Affine>,
{
    let mut bases = Vec::with_capacity(WINDOWS as usize);
    let mut b = base;
    for _ in 0..WINDOWS {
        bases.push(b);
        for _ in 0..WINDOW_BITS {
            b = b.double();
        }
    }
    let mut affine = vec![G::Projective::identity().to_affine(); bases.len()];
    G::Projective::batch_normalize(&bases, &mut affine);
    let st = dev.stream()?;
    let mut d_bases = dev.alloc::<G::Affine>(affine.len())?;
    // SAFETY: `affine` outlives the synchronize below.
    unsafe { d_bases.as_mut_slice().copy_from_host_async(&affine, &st)? };
    let n = WINDOWS as usize * DIGITS;
    let out = dev.alloc::<G::Affine>(n)?;
    let name = format!("cuzk_fixed_base_table_{}", G::SUFFIX);
    let k = dev.kernel(&name)?;
    // SAFETY: the arguments follow cuzk_fixed_base_table_<g1|g2>(const affine_t*, unsigned,
    // unsigned, affine_t*) in cuda/fixed_base.cu; both buffers live until the synchronize below.
    unsafe {
        st.launch(
            &k,
            &name,
            (n as u32).div_ceil(THREADS),
            THREADS,
            0,
            KernelArgs::new()
                .push_ptr(d_bases.device_ptr())
                .push_u32(WINDOWS)
                .push_u32(WINDOW_BITS)
                .push_ptr(out.device_ptr()),
        )?;
    }
    st.synchronize()?;
    Ok(out)
}

fn mul<G>(
    dev: &Arc<Device>,
    table: &DeviceBuffer<G::Affine>,
    scalars: &[Scalar],
    out: &mut [G::Affine],
) -> Result<()>
where
    G: MsmGroup,
    G::Projective: Curve<AffineRepr = G::Affine> + Send + Sync,
{
    if scalars.len() != out.len() {
        return Err(crate::Error::InvalidInput(format!(
            "fixed-base multiplication: {} scalars, {} outputs",
            scalars.len(),
            out.len()
        )));
    }
    if scalars.is_empty() {
        return Ok(());
    }
    let cap = scalars.len().min(CHUNK);
    let mut d_s = dev.alloc::<Scalar>(cap)?;
    let d_out = dev.alloc::<G::Projective>(cap)?;
    let mut host = vec![G::Projective::identity(); cap];
    let st = dev.stream()?;
    let name = format!("cuzk_fixed_base_mul_{}", G::SUFFIX);
    let k = dev.kernel(&name)?;
    for (s, o) in scalars.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
        let n = s.len();
        // SAFETY: `s` outlives the synchronize below.
        unsafe { d_s.slice_mut(0..n)?.copy_from_host_async(s, &st)? };
        // SAFETY: the arguments follow cuzk_fixed_base_mul_<g1|g2>(const u64*, unsigned,
        // unsigned, const affine_t*, unsigned, unsigned, jacobian_t*) in cuda/fixed_base.cu;
        // scalars (blstrs::Scalar, Montgomery form: mont = 1), the table (WINDOWS windows of
        // WINDOW_BITS bits, as built by `table`) and the n outputs are live device buffers
        // until the synchronize below.
        unsafe {
            st.launch(
                &k,
                &name,
                (n as u32).div_ceil(THREADS),
                THREADS,
                0,
                KernelArgs::new()
                    .push_ptr(d_s.device_ptr())
                    .push_u32(n as u32)
                    .push_u32(1)
                    .push_ptr(table.device_ptr())
                    .push_u32(WINDOWS)
                    .push_u32(WINDOW_BITS)
                    .push_ptr(d_out.device_ptr()),
            )?;
        }
        // SAFETY: `host` outlives the synchronize below.
        unsafe { d_out.slice(0..n)?.copy_to_host_async(&mut host[..n], &st)? };
        st.synchronize()?;
        o.par_chunks_mut(1 << 12)
            .zip(host[..n].par_chunks(1 << 12))
            .for_each(|(a, p)| G::Projective::batch_normalize(p, a));
    }
    Ok(())
}
