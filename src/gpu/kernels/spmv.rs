//! a = A·z, b = B·z, c = C·z on the device (`cuda/spmv.cu`), and the R1CS check a∘b = c.
//!
//! [`DeviceCircuit`] owns the device copy of one compiled circuit's matrices and coefficient
//! table ([`CompiledCircuit`]): uploaded once per device and kept resident by the GPU backend
//! across partitions and calls while it fits beside the allocator's plans. Its size is
//! [`layout::circuit_device_bytes`] of the circuit's counts, which is exactly what
//! [`DeviceCircuit::upload`] allocates (the upload fills an [`Arena`] of that size and fails if
//! it does not come out even). Per partition only z (inputs ‖ aux, 32 B per variable) crosses to
//! the device; [`DeviceCircuit::evaluate`] writes a, b, c straight into the H step's domain
//! buffers and [`r1cs_check`] returns the first failing row.
//!
//! Results equal [`Csr::spmv`] bit for bit (tests/gpu_spmv.rs): field addition is exact, so the
//! order of the sum does not matter, and every value is canonical Montgomery form.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use blstrs::Scalar as Fr;

use crate::circuit::{CompiledCircuit, Csr};
use crate::error::{Error, Result};
use crate::gpu::driver::device::{
    Device, DeviceBuffer, DeviceSlice, DeviceSliceMut, KernelArgs, Stream,
};
use crate::gpu::memory::alloc::Arena;
use crate::gpu::memory::layout;

/// Threads per block of the SpMV and check kernels (a multiple of 32, as the kernels need).
pub const THREADS: u32 = 256;
/// Most blocks of one launch (the kernels stride over the rest of the rows).
const MAX_BLOCKS: u32 = 1 << 20;

/// How rows are spread over threads (the kernels `cuzk_spmv_g1`, `_g4`, `_g32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// One row per thread (default: most PoRep rows have 1–3 entries).
    RowPerThread,
    /// Four lanes per row, then a shuffle reduction.
    QuadPerRow,
    /// One warp per row.
    WarpPerRow,
}

impl Scheme {
    /// All schemes (for tests and benches).
    pub const ALL: [Scheme; 3] = [Scheme::RowPerThread, Scheme::QuadPerRow, Scheme::WarpPerRow];

    /// Threads per row and the kernel's name.
    fn kernel(self) -> (u32, &'static str) {
        match self {
            Scheme::RowPerThread => (1, "cuzk_spmv_g1"),
            Scheme::QuadPerRow => (4, "cuzk_spmv_g4"),
            Scheme::WarpPerRow => (32, "cuzk_spmv_g32"),
        }
    }
}

/// Process-wide default scheme (0, 1, 2 = [`Scheme::ALL`] order), for benchmarks.
static DEFAULT_SCHEME: AtomicU32 = AtomicU32::new(0);

/// Sets the scheme [`DeviceCircuit::evaluate`] uses (benchmark knob; process-wide).
#[doc(hidden)]
#[cfg(any(test, feature = "internals"))]
pub fn set_default_scheme(s: Scheme) {
    let i = Scheme::ALL.iter().position(|&x| x == s).unwrap_or(0);
    DEFAULT_SCHEME.store(i as u32, Ordering::Relaxed);
}

/// The scheme [`DeviceCircuit::evaluate`] uses.
pub fn default_scheme() -> Scheme {
    Scheme::ALL[(DEFAULT_SCHEME.load(Ordering::Relaxed) as usize).min(2)]
}

/// One CSR matrix on the device (`row_ptr`, `col`, `coeff` as in [`Csr`]).
pub struct DeviceCsr {
    row_ptr: DeviceBuffer<u32>,
    col: DeviceBuffer<u32>,
    coeff: DeviceBuffer<u32>,
    rows: usize,
}

impl DeviceCsr {
    /// Copies `m` to `dev` (synchronously), counted against `arena` when given:
    /// [`layout::csr_buffers`]`(rows, nnz)` bytes.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `m` has more than `u32::MAX` rows; allocation
    /// ([`Error::OutOfDeviceMemory`]) and copy ([`Error::Cuda`]) errors.
    pub fn upload(dev: &Arc<Device>, m: &Csr, arena: Option<&Arena>) -> Result<Self> {
        if m.rows() >= u32::MAX as usize {
            return Err(Error::InvalidInput(format!(
                "a matrix of {} rows exceeds the SpMV's 32-bit rows",
                m.rows()
            )));
        }
        let up = |v: &[u32]| -> Result<DeviceBuffer<u32>> {
            let mut b = dev.alloc_in(arena, v.len())?;
            if !v.is_empty() {
                b.copy_from_host(v)?;
            }
            Ok(b)
        };
        Ok(DeviceCsr {
            row_ptr: up(&m.row_ptr)?,
            col: up(&m.col)?,
            coeff: up(&m.coeff)?,
            rows: m.rows(),
        })
    }

    /// Rows of the matrix.
    #[cfg(any(test, feature = "internals"))]
    pub fn rows(&self) -> usize {
        self.rows
    }
}

/// Queues y[..rows] = M·z on `stream` with `scheme`, z = (`input` ‖ `aux`), coefficient table
/// `coeffs` (on the device, Montgomery form). Elements of `y` past `rows` are not written.
///
/// The caller keeps the matrix's column and coefficient indices in range (a [`Csr`] that
/// passed [`Csr::is_well_formed`] for `input.len() + aux.len()` variables and `coeffs.len()`
/// coefficients): the kernel does not check them.
///
/// # Errors
/// [`Error::Internal`] when `y` is shorter than the rows, the buffers are on another device or z
/// has more than `u32::MAX` variables; launch errors.
pub fn spmv(
    stream: &Stream,
    m: &DeviceCsr,
    coeffs: DeviceSlice<'_, Fr>,
    input: DeviceSlice<'_, Fr>,
    aux: DeviceSlice<'_, Fr>,
    y: &mut DeviceSliceMut<'_, Fr>,
    scheme: Scheme,
) -> Result<()> {
    let dev = stream.device();
    if y.len() < m.rows {
        return Err(Error::internal(format!(
            "SpMV output of {} elements for {} rows",
            y.len(),
            m.rows
        )));
    }
    if input.len() + aux.len() > u32::MAX as usize {
        return Err(Error::internal("SpMV: z exceeds 2^32 variables"));
    }
    let ords = [
        m.row_ptr.device().ordinal(),
        coeffs.device().ordinal(),
        input.device().ordinal(),
        aux.device().ordinal(),
        y.device().ordinal(),
    ];
    if ords.iter().any(|&o| o != dev.ordinal()) {
        return Err(Error::internal(format!(
            "SpMV buffers on devices {ords:?}, stream on device {}",
            dev.ordinal()
        )));
    }
    if m.rows == 0 {
        return Ok(());
    }
    let (g, name) = scheme.kernel();
    let k = dev.kernel(name)?;
    let threads = (m.rows as u64) * g as u64;
    let blocks = threads.div_ceil(THREADS as u64).min(MAX_BLOCKS as u64) as u32;
    let mut args = KernelArgs::new();
    args.push_ptr(y.device_ptr())
        .push_ptr(m.row_ptr.device_ptr())
        .push_ptr(m.col.device_ptr())
        .push_ptr(m.coeff.device_ptr())
        .push_ptr(coeffs.device_ptr())
        .push_ptr(input.device_ptr())
        .push_u32(input.len() as u32)
        .push_ptr(aux.device_ptr())
        .push_u32(m.rows as u32);
    // SAFETY: matches cuzk_spmv_g*(Fr* y, const u32* row_ptr, const u32* col, const u32* coeff,
    // const Fr* coeffs, const Fr* input, u32 num_inputs, const Fr* aux, u32 rows); y holds
    // >= rows elements; the matrix's indices are in range of z and coeffs (caller's contract);
    // the borrows keep every buffer alive while the caller synchronises `stream` before
    // dropping them (every caller here does, and the arguments are borrowed for this call).
    unsafe { stream.launch(&k, name, blocks, THREADS, 0, &mut args) }
}

/// The R1CS check on the device: the first row j < `a.len()` with `a[j]·b[j] ≠ c[j]`, or `None`.
/// Allocates its 4-byte result word in `arena` ([`layout::R1CS_FLAG_BYTES`]) and synchronises
/// `stream`.
///
/// # Errors
/// [`Error::Internal`] for slices of different lengths, more than `u32::MAX − 1` rows or
/// another device; allocation, launch and copy errors.
pub fn r1cs_check(
    stream: &Stream,
    arena: Option<&Arena>,
    a: DeviceSlice<'_, Fr>,
    b: DeviceSlice<'_, Fr>,
    c: DeviceSlice<'_, Fr>,
) -> Result<Option<usize>> {
    let rows = a.len();
    if b.len() != rows || c.len() != rows || rows >= u32::MAX as usize {
        return Err(Error::internal(format!(
            "R1CS check of {} / {} / {} rows",
            rows,
            b.len(),
            c.len()
        )));
    }
    let dev = stream.device();
    let mut flag = dev.alloc_in::<u32>(arena, 1)?;
    flag.copy_from_host(&[u32::MAX])?;
    if rows > 0 {
        let k = dev.kernel("cuzk_r1cs_check")?;
        let blocks = (rows as u64)
            .div_ceil(THREADS as u64)
            .min(MAX_BLOCKS as u64) as u32;
        let mut args = KernelArgs::new();
        args.push_ptr(a.device_ptr())
            .push_ptr(b.device_ptr())
            .push_ptr(c.device_ptr())
            .push_u32(rows as u32)
            .push_ptr(flag.device_ptr());
        // SAFETY: matches cuzk_r1cs_check(const Fr* a, const Fr* b, const Fr* c, u32 rows,
        // u32* first_bad); a, b, c hold rows elements, flag one; all stay alive until the
        // stream is synchronised below.
        unsafe { stream.launch(&k, "cuzk_r1cs_check", blocks, THREADS, 0, &mut args)? };
    }
    stream.synchronize()?;
    let mut out = [0u32];
    flag.copy_to_host(&mut out)?;
    Ok((out[0] != u32::MAX).then_some(out[0] as usize))
}

/// A compiled circuit's matrices A, B, C and coefficient table on one device (see the module
/// docs).
pub struct DeviceCircuit {
    a: DeviceCsr,
    b: DeviceCsr,
    c: DeviceCsr,
    coeffs: DeviceBuffer<Fr>,
    num_inputs: usize,
    num_aux: usize,
    // Reported by `bytes` (tests).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    bytes: u64,
}

impl DeviceCircuit {
    /// Device bytes of `cc`'s matrices and table ([`layout::circuit_device_bytes`]): what
    /// [`Self::upload`] allocates.
    pub fn bytes_for(cc: &CompiledCircuit) -> u64 {
        layout::circuit_device_bytes(
            cc.layout.num_constraints() as u64,
            [cc.a.nnz() as u64, cc.b.nnz() as u64, cc.c.nnz() as u64],
            cc.coeffs.len() as u64,
        )
    }

    /// Copies `cc`'s matrices and coefficient table to `dev` (synchronously; pageable copies:
    /// this happens once per device). With `arena`, every buffer is counted against it, and
    /// the arena must come out exactly full: its capacity should be [`Self::bytes_for`].
    ///
    /// # Errors
    /// [`Error::OutOfDeviceMemory`] when the buffers do not fit the arena or the device;
    /// [`Error::Internal`] when the allocations do not add up to the arena's capacity (the
    /// size function and the upload disagree); copy errors.
    pub fn upload(dev: &Arc<Device>, cc: &CompiledCircuit, arena: Option<&Arena>) -> Result<Self> {
        let bytes = Self::bytes_for(cc);
        let before = arena.map_or(0, |a| a.used());
        let a = DeviceCsr::upload(dev, &cc.a, arena)?;
        let b = DeviceCsr::upload(dev, &cc.b, arena)?;
        let c = DeviceCsr::upload(dev, &cc.c, arena)?;
        let coeffs = {
            let v = cc.coeffs.values();
            let mut buf = dev.alloc_in::<Fr>(arena, v.len())?;
            buf.copy_from_host(v)?;
            buf
        };
        if let Some(ar) = arena {
            let used = ar.used() - before;
            if used != bytes {
                return Err(Error::internal(format!(
                    "the resident circuit took {used} device bytes, its size function says {bytes}"
                )));
            }
        }
        Ok(DeviceCircuit {
            a,
            b,
            c,
            coeffs,
            num_inputs: cc.layout.num_inputs(),
            num_aux: cc.layout.num_aux(),
            bytes,
        })
    }

    /// Device bytes held ([`Self::bytes_for`] of the circuit).
    #[cfg(any(test, feature = "internals"))]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Rows (constraints) of the matrices.
    pub fn rows(&self) -> usize {
        self.a.rows
    }

    /// Queues a, b, c = A·z, B·z, C·z into the first [`Self::rows`] elements of `outs` (the H
    /// step's domain buffers, n ≥ rows elements each) and zeroes the rest, with
    /// [`default_scheme`]. z = (`input` ‖ `aux`) on the device.
    ///
    /// # Errors
    /// [`Error::Internal`] when z does not have the circuit's sizes or an output is shorter
    /// than the rows; launch errors.
    pub fn evaluate(
        &self,
        stream: &Stream,
        input: DeviceSlice<'_, Fr>,
        aux: DeviceSlice<'_, Fr>,
        outs: [&mut DeviceBuffer<Fr>; 3],
    ) -> Result<()> {
        if input.len() != self.num_inputs || aux.len() != self.num_aux {
            return Err(Error::internal(format!(
                "witness of {} inputs and {} aux for a resident circuit of {} and {}",
                input.len(),
                aux.len(),
                self.num_inputs,
                self.num_aux
            )));
        }
        let scheme = default_scheme();
        let rows = self.rows();
        for (m, y) in [&self.a, &self.b, &self.c].into_iter().zip(outs) {
            if y.len() < rows {
                return Err(Error::internal(format!(
                    "SpMV output of {} elements for {rows} rows",
                    y.len()
                )));
            }
            spmv(
                stream,
                m,
                self.coeffs.as_slice(),
                input,
                aux,
                &mut y.slice_mut(..rows)?,
                scheme,
            )?;
            if y.len() > rows {
                y.slice_mut(rows..)?.zero(stream)?;
            }
        }
        Ok(())
    }
}
