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
use crate::gpu::memory::pinned::PinnedRegistry;

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
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn spmv(
    stream: &Stream,
    m: &DeviceCsr,
    coeffs: DeviceSlice<'_, Fr>,
    input: DeviceSlice<'_, Fr>,
    aux: DeviceSlice<'_, Fr>,
    y: &mut DeviceSliceMut<'_, Fr>,
    scheme: Scheme,
) -> Result<()> {
    let block = RowBlock {
        row_ptr: m.row_ptr.as_slice(),
        col: m.col.as_slice(),
        coeff: m.coeff.as_slice(),
        base: 0,
    };
    launch_rows(stream, &block, coeffs, input, aux, y, scheme)
}

/// Rows of a CSR matrix on the device: `row_ptr` holds rows + 1 offsets as they are in the
/// whole matrix, `col` and `coeff` its entries from entry `base` on (the whole arrays and
/// `base` = 0 for a resident matrix; a streamed row block's entries and its first offset).
struct RowBlock<'a> {
    row_ptr: DeviceSlice<'a, u32>,
    col: DeviceSlice<'a, u32>,
    coeff: DeviceSlice<'a, u32>,
    base: u32,
}

impl RowBlock<'_> {
    fn rows(&self) -> usize {
        self.row_ptr.len().saturating_sub(1)
    }
}

/// Queues y[..rows] = M·z for the rows of `block` (see [`spmv`]).
fn launch_rows(
    stream: &Stream,
    block: &RowBlock<'_>,
    coeffs: DeviceSlice<'_, Fr>,
    input: DeviceSlice<'_, Fr>,
    aux: DeviceSlice<'_, Fr>,
    y: &mut DeviceSliceMut<'_, Fr>,
    scheme: Scheme,
) -> Result<()> {
    let dev = stream.device();
    let rows = block.rows();
    if y.len() < rows {
        return Err(Error::internal(format!(
            "SpMV output of {} elements for {} rows",
            y.len(),
            rows
        )));
    }
    if input.len() + aux.len() > u32::MAX as usize {
        return Err(Error::internal("SpMV: z exceeds 2^32 variables"));
    }
    let ords = [
        block.row_ptr.device().ordinal(),
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
    if rows == 0 {
        return Ok(());
    }
    let (g, name) = scheme.kernel();
    let k = dev.kernel(name)?;
    let threads = (rows as u64) * g as u64;
    let blocks = threads.div_ceil(THREADS as u64).min(MAX_BLOCKS as u64) as u32;
    let mut args = KernelArgs::new();
    args.push_ptr(y.device_ptr())
        .push_ptr(block.row_ptr.device_ptr())
        .push_ptr(block.col.device_ptr())
        .push_ptr(block.coeff.device_ptr())
        .push_u32(block.base)
        .push_ptr(coeffs.device_ptr())
        .push_ptr(input.device_ptr())
        .push_u32(input.len() as u32)
        .push_ptr(aux.device_ptr())
        .push_u32(rows as u32);
    // SAFETY: matches cuzk_spmv_g*(Fr* y, const u32* row_ptr, const u32* col, const u32* coeff,
    // u32 base, const Fr* coeffs, const Fr* input, u32 num_inputs, const Fr* aux, u32 rows);
    // y holds >= rows elements; row_ptr rows + 1 offsets whose entries base .. lie in col and
    // coeff, and the matrix's indices are in range of z and coeffs (callers' contract); the
    // borrows keep every buffer alive while the caller synchronises `stream` before dropping
    // them (every caller here does, and the arguments are borrowed for this call).
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
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn evaluate(
        &self,
        stream: &Stream,
        input: DeviceSlice<'_, Fr>,
        aux: DeviceSlice<'_, Fr>,
        outs: [&mut DeviceBuffer<Fr>; 3],
    ) -> Result<()> {
        let mut on = CircuitOnDevice::Resident(self);
        for (m, y) in [Matrix::A, Matrix::B, Matrix::C].into_iter().zip(outs) {
            on.evaluate(stream, m, input, aux, &mut y.as_mut_slice())?;
        }
        Ok(())
    }
}

/// One of the R1CS matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Matrix {
    /// A (a = A·z).
    A,
    /// B (b = B·z).
    B,
    /// C (c = C·z).
    C,
}

impl DeviceCircuit {
    fn matrix(&self, m: Matrix) -> &DeviceCsr {
        match m {
            Matrix::A => &self.a,
            Matrix::B => &self.b,
            Matrix::C => &self.c,
        }
    }
}

fn host_matrix(cc: &CompiledCircuit, m: Matrix) -> &Csr {
    match m {
        Matrix::A => &cc.a,
        Matrix::B => &cc.b,
        Matrix::C => &cc.c,
    }
}

/// The row ranges of `rows` rows in blocks of `block` rows (the last one shorter).
fn row_blocks(rows: usize, block: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let block = block.max(1);
    (0..rows.div_ceil(block)).map(move |k| k * block..((k + 1) * block).min(rows))
}

/// A compiled circuit's matrices streamed from host memory, for a card that cannot keep them
/// resident (a 32 GiB partition's take 6.8 GiB): each SpMV copies the matrix in blocks of at
/// most [`layout::SPMV_BLOCK_ROWS`] rows and [`layout::SPMV_BLOCK_NNZ`] non-zeros through two
/// slots (the next block uploading on a copy
/// stream while the current one computes, [`crate::gpu::driver::upload::for_each_pass`]), so a
/// partition's device memory holds two blocks' CSR arrays (≤ 0.27 GiB) instead of the matrices.
/// The host arrays should be page-locked for the copies to overlap (the GPU backend pins them
/// once); pageable ones are copied synchronously. Its buffers come out of the partition's
/// [`Arena`]: [`Self::bytes_for`] bytes.
pub struct StreamedCircuit<'c> {
    cc: &'c CompiledCircuit,
    registry: &'c PinnedRegistry,
    coeffs: DeviceBuffer<Fr>,
    slots: [[DeviceBuffer<u32>; 3]; 2],
}

/// The row blocks `m` streams in: consecutive, at most [`layout::SPMV_BLOCK_ROWS`] rows and
/// [`layout::SPMV_BLOCK_NNZ`] non-zeros each.
///
/// # Errors
/// [`Error::InvalidInput`] for a row of more than [`layout::SPMV_BLOCK_NNZ`] non-zeros.
fn stream_blocks(m: &Csr) -> Result<Vec<std::ops::Range<usize>>> {
    let (max_rows, max_nnz) = (
        layout::SPMV_BLOCK_ROWS as usize,
        layout::SPMV_BLOCK_NNZ as usize,
    );
    let rows = m.rows();
    let nnz = |r0: usize, r1: usize| (m.row_ptr[r1] - m.row_ptr[r0]) as usize;
    let mut out = Vec::with_capacity(rows.div_ceil(max_rows));
    let mut r0 = 0;
    while r0 < rows {
        let mut r1 = (r0 + max_rows).min(rows);
        if nnz(r0, r1) > max_nnz {
            // the last row end whose block still fits (row_ptr is non-decreasing)
            let fit = m.row_ptr[r0 + 1..=r1].partition_point(|&e| (e - m.row_ptr[r0]) as usize <= max_nnz);
            if fit == 0 {
                return Err(Error::InvalidInput(format!(
                    "row {r0} has {} non-zeros, more than a streamed block's {max_nnz}",
                    nnz(r0, r0 + 1)
                )));
            }
            r1 = r0 + fit;
        }
        out.push(r0..r1);
        r0 = r1;
    }
    Ok(out)
}

impl<'c> StreamedCircuit<'c> {
    /// Rows and non-zeros of the largest block of A, B or C.
    fn slot_sizes(cc: &CompiledCircuit) -> Result<(u64, u64)> {
        let mut most = (0u64, 0u64);
        for m in [&cc.a, &cc.b, &cc.c] {
            for r in stream_blocks(m)? {
                most.0 = most.0.max(r.len() as u64);
                most.1 = most.1.max((m.row_ptr[r.end] - m.row_ptr[r.start]) as u64);
            }
        }
        Ok(most)
    }

    /// Device bytes of the slots and the coefficient table for `cc`
    /// ([`layout::streamed_circuit_bytes`]): what [`Self::new`] allocates (`u64::MAX` for a
    /// circuit that cannot stream: a row longer than a block).
    pub fn bytes_for(cc: &CompiledCircuit) -> u64 {
        match Self::slot_sizes(cc) {
            Ok((rows, nnz)) => {
                layout::streamed_circuit_bytes(rows, nnz, cc.coeffs.len() as u64)
            }
            Err(_) => u64::MAX,
        }
    }

    /// Allocates the two slots in `arena` and uploads the coefficient table (pageable, small).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for more than `u32::MAX` rows or a row longer than a block;
    /// allocation and copy errors.
    pub fn new(
        dev: &Arc<Device>,
        cc: &'c CompiledCircuit,
        arena: Option<&Arena>,
        registry: &'c PinnedRegistry,
    ) -> Result<Self> {
        let rows = cc.layout.num_constraints();
        if rows >= u32::MAX as usize {
            return Err(Error::InvalidInput(format!(
                "a matrix of {rows} rows exceeds the SpMV's 32-bit rows"
            )));
        }
        let (block, nnz) = Self::slot_sizes(cc)?;
        let slot = || -> Result<[DeviceBuffer<u32>; 3]> {
            Ok([
                dev.alloc_in(arena, block as usize + 1)?,
                dev.alloc_in(arena, nnz as usize)?,
                dev.alloc_in(arena, nnz as usize)?,
            ])
        };
        let slots = [slot()?, slot()?];
        let v = cc.coeffs.values();
        let mut coeffs = dev.alloc_in::<Fr>(arena, v.len())?;
        coeffs.copy_from_host(v)?;
        Ok(StreamedCircuit {
            cc,
            registry,
            coeffs,
            slots,
        })
    }
}

/// Where one partition's SpMV reads the compiled circuit's matrices from.
pub enum CircuitOnDevice<'c> {
    /// Resident on the device (kept across partitions by the GPU backend).
    Resident(&'c DeviceCircuit),
    /// Streamed from host memory in row blocks.
    Streamed(Box<StreamedCircuit<'c>>),
}

impl CircuitOnDevice<'_> {
    /// Rows (constraints) of the matrices.
    pub fn rows(&self) -> usize {
        match self {
            CircuitOnDevice::Resident(dc) => dc.rows(),
            CircuitOnDevice::Streamed(sc) => sc.cc.layout.num_constraints(),
        }
    }

    /// Calls `f(rows, block, coeffs)` for the blocks of `block_rows` rows of matrix `m` in
    /// order (a streamed matrix always in its slots' blocks), each block's arrays on the
    /// device; the stream is synchronised after each call (a slot is reused after it).
    fn blocks<R>(
        &mut self,
        stream: &Stream,
        m: Matrix,
        block_rows: usize,
        mut f: impl FnMut(std::ops::Range<usize>, &RowBlock<'_>, DeviceSlice<'_, Fr>) -> Result<R>,
    ) -> Result<Vec<R>> {
        match self {
            CircuitOnDevice::Resident(dc) => {
                let csr = dc.matrix(m);
                let mut out = Vec::new();
                for r in row_blocks(csr.rows, block_rows) {
                    let block = RowBlock {
                        row_ptr: csr.row_ptr.slice(r.start..=r.end)?,
                        col: csr.col.as_slice(),
                        coeff: csr.coeff.as_slice(),
                        base: 0,
                    };
                    out.push(f(r, &block, dc.coeffs.as_slice())?);
                }
                Ok(out)
            }
            CircuitOnDevice::Streamed(sc) => {
                let csr = host_matrix(sc.cc, m);
                let ranges = stream_blocks(csr)?;
                let passes: Vec<[&[u32]; 3]> = ranges
                    .iter()
                    .map(|r| {
                        let (b0, b1) = (csr.row_ptr[r.start] as usize, csr.row_ptr[r.end] as usize);
                        [
                            &csr.row_ptr[r.start..=r.end],
                            &csr.col[b0..b1],
                            &csr.coeff[b0..b1],
                        ]
                    })
                    .collect();
                let coeffs = sc.coeffs.as_slice();
                let [s0, s1] = &mut sc.slots;
                let (out, _) = crate::gpu::driver::upload::for_each_pass(
                    stream.device(),
                    sc.registry,
                    [s0, s1],
                    &passes,
                    |k, [row_ptr, col, coeff]| {
                        let block = RowBlock {
                            row_ptr,
                            col,
                            coeff,
                            base: csr.row_ptr[ranges[k].start],
                        };
                        let r = f(ranges[k].clone(), &block, coeffs)?;
                        stream.synchronize()?;
                        Ok(r)
                    },
                )?;
                Ok(out)
            }
        }
    }

    /// y[..rows] = M·z for matrix `m` and z = (`input` ‖ `aux`) on the device, y[rows..]
    /// zeroed, with [`default_scheme`]. A streamed matrix is uploaded block by block (the call
    /// returns when its last block has been computed); a resident one is queued on `stream`.
    ///
    /// # Errors
    /// [`Error::Internal`] when z does not have the circuit's sizes or `y` is shorter than the
    /// rows; copy and launch errors.
    pub fn evaluate(
        &mut self,
        stream: &Stream,
        m: Matrix,
        input: DeviceSlice<'_, Fr>,
        aux: DeviceSlice<'_, Fr>,
        y: &mut DeviceSliceMut<'_, Fr>,
    ) -> Result<()> {
        self.check_z(&input, &aux)?;
        let rows = self.rows();
        if y.len() < rows {
            return Err(Error::internal(format!(
                "SpMV output of {} elements for {rows} rows",
                y.len()
            )));
        }
        let scheme = default_scheme();
        self.blocks(stream, m, usize::MAX, |r, block, coeffs| {
            launch_rows(stream, block, coeffs, input, aux, &mut y.slice_mut(r)?, scheme)
        })?;
        if y.len() > rows {
            y.slice_mut(rows..)?.zero(stream)?;
        }
        Ok(())
    }

    /// The R1CS check a∘b = c without a domain buffer for c: c = C·z is computed block by
    /// block ([`layout::SPMV_BLOCK_ROWS`] rows) into `scratch` and each block checked against
    /// the same rows of `a` and `b` ([`r1cs_check`], result words in `arena`). Returns the
    /// first failing row, or `None`. Synchronises `stream`.
    ///
    /// # Errors
    /// [`Error::Internal`] when z does not have the circuit's sizes, `a` or `b` is shorter
    /// than the rows or `scratch` than a block; copy and launch errors.
    #[allow(clippy::too_many_arguments)]
    pub fn check_blockwise(
        &mut self,
        stream: &Stream,
        arena: Option<&Arena>,
        input: DeviceSlice<'_, Fr>,
        aux: DeviceSlice<'_, Fr>,
        a: DeviceSlice<'_, Fr>,
        b: DeviceSlice<'_, Fr>,
        scratch: &mut DeviceBuffer<Fr>,
    ) -> Result<Option<usize>> {
        self.check_z(&input, &aux)?;
        let scheme = default_scheme();
        let bad = self.blocks(
            stream,
            Matrix::C,
            layout::SPMV_BLOCK_ROWS as usize,
            |r, block, coeffs| {
                let len = r.len();
                launch_rows(
                    stream,
                    block,
                    coeffs,
                    input,
                    aux,
                    &mut scratch.slice_mut(..len)?,
                    scheme,
                )?;
                let bad = r1cs_check(
                    stream,
                    arena,
                    a.slice(r.clone())?,
                    b.slice(r.clone())?,
                    scratch.slice(..len)?,
                )?;
                Ok(bad.map(|j| r.start + j))
            },
        )?;
        stream.synchronize()?;
        Ok(bad.into_iter().flatten().next())
    }

    fn check_z(&self, input: &DeviceSlice<'_, Fr>, aux: &DeviceSlice<'_, Fr>) -> Result<()> {
        let (ni, na) = match self {
            CircuitOnDevice::Resident(dc) => (dc.num_inputs, dc.num_aux),
            CircuitOnDevice::Streamed(sc) => {
                (sc.cc.layout.num_inputs(), sc.cc.layout.num_aux())
            }
        };
        if input.len() != ni || aux.len() != na {
            return Err(Error::internal(format!(
                "witness of {} inputs and {} aux for a circuit of {ni} and {na}",
                input.len(),
                aux.len(),
            )));
        }
        Ok(())
    }
}
