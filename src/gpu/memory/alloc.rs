//! VRAM budget and tier planner: how much device memory one partition may use, and how.
//!
//! A GPU worker asks its device's [`DeviceAllocator`] for a [`Plan`] before it allocates anything.
//! The allocator
//! - reads the driver's free memory ([`MemInfo::mem_get_info`], `cuMemGetInfo`) at **every**
//!   reservation, never once at start-up;
//! - always leaves [`SAFETY_MARGIN`] (512 MiB) free;
//! - subtracts what this process has *reserved but not yet allocated* (a [`Reservation`]'s bytes
//!   minus what its owner reported with [`Reservation::note_allocated`]), so two workers can
//!   never plan with the same free bytes (the two-worker OOM: both pre-staged 6 GiB at once on a
//!   16 GiB card);
//! - honours an optional cap (`vram_limit`, `CUZK_VRAM_LIMIT`): a capped device behaves like a
//!   card of `vram_limit` bytes — its live reservations plus the margin never exceed the cap
//!   (emulates a 16 GiB card on a 141 GB H200);
//! - keeps no pool: a reservation's bytes go back when its guard drops (also while a panic
//!   unwinds), so free memory returns to its baseline after every call.
//!
//! # Tiers
//! Tried in order per partition, from [`PlanOptions::start`] down (n = 2^`domain_log2`, sizes at
//! the 32 GiB PoRep partition, n = 2^27, in parentheses). A plan counts what is live at once:
//! a partition's H side (the GPU SpMV, the R1CS check and the H step: domain buffers, z, the
//! block slots of matrices streamed from host memory) is freed before its MSM side (h and aux,
//! the MSM workspace, streamed bases) is allocated, so a tier needs the larger of the two
//! ([`PartitionShape::h_side_bytes`], [`PartitionShape::msm_side_bytes`]).
//!
//! | tier | device memory |
//! |---|---|
//! | [`Tier::Resident`] | parameters (44.1 GiB, unless already resident) + max(H side with three domain buffers d_a, d_b, d_c (12 GiB) and z (3.9 GiB): 16.2 GiB; MSM side: h, aux and the workspace of whole-length MSMs over resident bases: 23.0 GiB) |
//! | [`Tier::FullStaging`] | max(the same H side; h, aux, the MSM workspace of one 2^24-point pass and double-buffered streamed bases, 2 × 2^24 × 192 B = 6 GiB) |
//! | [`Tier::Partial`] | max(H side with two domain buffers, b's shared with c, and the blockwise R1CS check: 12.2 GiB; h, aux and the same MSM pass, or the largest smaller power-of-two pass that fits: 2^23 on a 16 GiB card, 13.6 GiB) |
//! | [`Tier::Streaming`] | one domain buffer (n·32 B = 4 GiB; the H step on the CPU) + an MSM chunk that fits (≥ 2^16 points); skipped while other partitions hold memory that comes back ([`PlanOptions::gpu_h_step`]) |
//! | — | [`Error::OutOfDeviceMemory`] with the smallest tier's bytes ([`PartitionShape::min_bytes`]) as `needed` |
//!
//! A split partition's parts plan only their own MSMs ([`PartitionShape::queries`]): its H side
//! has no aux beside the H MSM and passes of up to [`MSM_PASS_POINTS_G1`] points (2^24 at 2^27
//! on a 16 GiB card, where the whole partition gets 2^23; 2^25 on a 24 GiB card); its L, A, B
//! MSMs have no H side and no h.
//!
//! Every figure is a sum of the buffer-size functions of [`crate::gpu::memory::layout`] — the same
//! functions the GPU code sizes its buffers with ([`msm_workspace_bytes`] for the MSM workspace,
//! whose window choice is `layout::window_bits_for`; [`h_step_bytes`]; [`streamed_bases_bytes`])
//! — so a plan is what is allocated. The GPU backend then hands the plan out as an [`Arena`]:
//! every device buffer of the partition is counted against it, and one that would exceed it is
//! an [`Error::OutOfDeviceMemory`] before any `cuMemAlloc`; the arena's high-water mark is kept
//! ([`arena_records`]).
//!
//! # Usage (host side of one partition)
//! ```
//! use std::sync::Arc;
//! use cuzk::gpu::memory::alloc::{
//!     DeviceAllocator, FakeMemInfo, PartitionShape, PlanOptions, Tier, GIB,
//! };
//!
//! let mem = Arc::new(FakeMemInfo::new(&[(16 * GIB, 16 * GIB)]));
//! let alloc = DeviceAllocator::new(0, mem, None);
//! let plan = alloc.plan(&PartitionShape::porep_32gib(), &PlanOptions::default()).unwrap();
//! assert!(plan.needed <= plan.available && plan.tier != Tier::Resident);
//! // ... cuMemAlloc the buffers, then plan.work.note_allocated(bytes) ...
//! drop(plan); // bytes return to the budget
//! assert_eq!(alloc.reserved_bytes(), 0);
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::srs::Queries;

/// One mebibyte (2^20 bytes).
#[cfg(any(test, feature = "internals"))]
pub const MIB: u64 = 1 << 20;
/// One gibibyte (2^30 bytes).
pub const GIB: u64 = 1 << 30;

/// Device memory that always stays free, in bytes (512 MiB): room for the CUDA context's own
/// growth, cuBLAS-style library workspaces and other processes' small allocations.
pub const SAFETY_MARGIN: u64 = 512 << 20;

pub use crate::gpu::memory::layout::FR_BYTES;
use crate::gpu::memory::layout::{
    align_up, h_step_bytes, msm_workspace_bytes, r1cs_block_bytes, spmv_work_bytes,
    streamed_bases_bytes, streamed_circuit_bytes, Accumulation, MsmLimits, MsmShape, G1_LAYOUT,
    G2_LAYOUT, SPMV_BLOCK_NNZ, SPMV_BLOCK_ROWS, SPMV_PLANNED_COEFFS, SPMV_PLANNED_ROW_NNZ,
};

/// Bytes of one G1 affine point as stored on the device (x, y in `Fp`, 2 × 48 B).
pub const G1_AFFINE_BYTES: u64 = G1_LAYOUT.affine_bytes;
/// Bytes of one G2 affine point as stored on the device (x, y in `Fp2`, 2 × 96 B).
pub const G2_AFFINE_BYTES: u64 = G2_LAYOUT.affine_bytes;

/// Points processed by one on-device MSM pass in the streamed tiers (2^24) when the work has
/// G2 MSMs (B_G2): its double-buffered base slots take 2 × 2^24 × 192 B = 6 GiB. An MSM
/// longer than a pass runs in several passes whose partial sums are added.
pub const MSM_PASS_POINTS: u64 = 1 << 24;
/// Points of a pass when the work has G1 MSMs only (a split partition's H side: 2^25, the
/// same 6 GiB of base slots): fewer passes, each paying its bucket reduction once (G1 at
/// 2^27 on an H100: eight 2^24-point passes 1.07 s, four 2^25-point passes 0.95 s).
pub const MSM_PASS_POINTS_G1: u64 = 1 << 25;
/// Granularity and minimum of a streaming chunk, in points (2^16).
pub const MSM_CHUNK_ALIGN_POINTS: u64 = 1 << 16;
/// Largest NTT domain the planner accepts (2^40 points); larger shapes are
/// [`Error::InvalidInput`].
pub const MAX_DOMAIN_LOG2: u32 = 40;
/// SM count the planner assumes when the allocator was not told the device's
/// ([`DeviceAllocator::with_sm_count`]): 132, an H100/H200.
pub const DEFAULT_SM_COUNT: u32 = 132;

/// Formats a byte count as GiB with two decimals (`"12.00 GiB"`), for messages and reports.
pub fn fmt_gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / GIB as f64)
}

/// Source of a device's free and total memory: the CUDA implementation (in `gpu::driver::device`)
/// calls `cuMemGetInfo` with the device's context current; tests use `FakeMemInfo` (feature `test-hooks`).
pub trait MemInfo: Send + Sync {
    /// Returns `(free, total)` bytes of device ordinal `device`, as the driver reports them now.
    ///
    /// # Errors
    /// [`Error::Cuda`] when the driver call fails, [`Error::NoDevice`] for an unknown ordinal.
    fn mem_get_info(&self, device: usize) -> Result<(u64, u64)>;
}

#[cfg(any(test, feature = "test-hooks"))]
#[derive(Clone, Debug)]
struct FakeDevice {
    free: u64,
    total: u64,
    fail: Option<String>,
    sticky: bool,
}

#[cfg(any(test, feature = "test-hooks"))]
/// A [`MemInfo`] for tests: per-device `(free, total)` figures that a test can change at any
/// time, with simulated `cuMemAlloc`/`cuMemFree` ([`FakeMemInfo::allocate`],
/// [`FakeMemInfo::release`]) and injected driver failures. Counts its calls so tests can check
/// that free memory is read at every reservation.
#[derive(Debug, Default)]
pub struct FakeMemInfo {
    devices: Mutex<Vec<FakeDevice>>,
    calls: AtomicU64,
}

#[cfg(any(test, feature = "test-hooks"))]
impl FakeMemInfo {
    /// One fake device per `(free, total)` pair, ordinals 0, 1, ….
    pub fn new(devices: &[(u64, u64)]) -> Self {
        FakeMemInfo {
            devices: Mutex::new(
                devices
                    .iter()
                    .map(|&(free, total)| FakeDevice {
                        free,
                        total,
                        fail: None,
                        sticky: false,
                    })
                    .collect(),
            ),
            calls: AtomicU64::new(0),
        }
    }

    fn dev<R>(&self, device: usize, f: impl FnOnce(&mut FakeDevice) -> R) -> Option<R> {
        lock(&self.devices).get_mut(device).map(f)
    }

    /// Sets the free bytes of `device` (e.g. another process allocated). Unknown ordinals are
    /// ignored.
    pub fn set_free(&self, device: usize, free: u64) {
        self.dev(device, |d| d.free = free);
    }

    /// Current fake free bytes of `device` (0 for an unknown ordinal).
    pub fn free(&self, device: usize) -> u64 {
        self.dev(device, |d| d.free).unwrap_or(0)
    }

    /// Simulates `cuMemAlloc(bytes)`: lowers the free figure.
    ///
    /// # Errors
    /// [`Error::Cuda`] (`CUDA_ERROR_OUT_OF_MEMORY`) when `bytes` exceeds the free figure or the
    /// ordinal is unknown.
    pub fn allocate(&self, device: usize, bytes: u64) -> Result<()> {
        let ok = self
            .dev(device, |d| {
                if bytes <= d.free {
                    d.free -= bytes;
                    true
                } else {
                    false
                }
            })
            .unwrap_or(false);
        if ok {
            Ok(())
        } else {
            Err(Error::Cuda {
                device,
                call: "cuMemAlloc".into(),
                message: format!("CUDA_ERROR_OUT_OF_MEMORY (2): {bytes} bytes (fake)"),
                fault: None,
            })
        }
    }

    /// Simulates `cuMemFree` of `bytes`: raises the free figure (never above the total).
    pub fn release(&self, device: usize, bytes: u64) {
        self.dev(device, |d| {
            d.free = d.free.saturating_add(bytes).min(d.total)
        });
    }

    /// Makes every later `mem_get_info(device)` fail with [`Error::Cuda`] carrying `message`
    /// (`None` heals the device).
    pub fn set_failure(&self, device: usize, message: Option<&str>) {
        self.dev(device, |d| {
            d.fail = message.map(str::to_string);
            d.sticky = false;
        });
    }

    /// Makes every later `mem_get_info(device)` fail with a *sticky* [`Error::Cuda`]
    /// (`fault: Some(DeviceFault::Sticky)`, e.g. `"CUDA_ERROR_ILLEGAL_ADDRESS (700)"`), as the
    /// driver does once a context is poisoned. Never heals (a poisoned context does not).
    pub fn set_sticky_failure(&self, device: usize, message: &str) {
        self.dev(device, |d| {
            d.fail = Some(message.to_string());
            d.sticky = true;
        });
    }

    /// Number of `mem_get_info` calls so far (all devices).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

#[cfg(any(test, feature = "test-hooks"))]
impl MemInfo for FakeMemInfo {
    fn mem_get_info(&self, device: usize) -> Result<(u64, u64)> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.dev(device, |d| d.clone()) {
            None => Err(Error::NoDevice(format!(
                "no device with ordinal {device} (fake)"
            ))),
            Some(FakeDevice {
                fail: Some(m),
                sticky,
                ..
            }) => Err(Error::Cuda {
                device,
                call: "cuMemGetInfo".into(),
                message: m,
                fault: sticky.then_some(crate::error::DeviceFault::Sticky),
            }),
            Some(d) => Ok((d.free, d.total)),
        }
    }
}

/// The shape of one partition's proving work, from which every tier's byte needs follow.
///
/// All lengths are element counts. For the 32 GiB PoRep partition see
/// [`PartitionShape::porep_32gib`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PartitionShape {
    /// log2 of the NTT domain size n (27 for 32 GiB sectors).
    pub domain_log2: u32,
    /// R1CS constraints of the circuit (without the input constraints).
    pub num_constraints: u64,
    /// Public inputs, including the constant `ONE`.
    pub num_inputs: u64,
    /// Auxiliary (private) variables.
    pub num_aux: u64,
    /// Length of the H query (G1 points), n − 1 in bellperson's parameters.
    pub h_len: u64,
    /// Length of the L query (G1 points), `num_aux`.
    pub l_len: u64,
    /// Length of the A query (G1 points; points at infinity are not stored).
    pub a_len: u64,
    /// Length of the B query in G1.
    pub b_g1_len: u64,
    /// Length of the B query in G2.
    pub b_g2_len: u64,
    /// The MSMs this work runs on the device ([`Queries::ALL`] for a whole partition; a split
    /// partition's H side is [`Queries::H`], its other MSMs [`Queries::REST`]): a plan holds
    /// only their scalars, workspaces and base slots, and the H side (SpMV, R1CS check, H
    /// step) only with [`Queries::H`].
    pub queries: Queries,
}

impl PartitionShape {
    /// Builds a shape from the circuit's counts the way bellperson sizes its domain: n is the
    /// next power of two ≥ `num_constraints + num_inputs` (each input adds one constraint),
    /// `h_len = n − 1`, `l_len = num_aux`, and both B queries have `b_len` points.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the domain would exceed 2^[`MAX_DOMAIN_LOG2`] or a query is
    /// longer than the variables it indexes.
    pub fn from_counts(
        num_constraints: u64,
        num_inputs: u64,
        num_aux: u64,
        a_len: u64,
        b_len: u64,
    ) -> Result<Self> {
        let rows = num_constraints.saturating_add(num_inputs).max(1);
        let n = rows.checked_next_power_of_two().unwrap_or(u64::MAX);
        let domain_log2 = n.trailing_zeros();
        if n == u64::MAX || domain_log2 > MAX_DOMAIN_LOG2 {
            return Err(Error::InvalidInput(format!(
                "partition of {rows} constraint rows exceeds the 2^{MAX_DOMAIN_LOG2} NTT domain"
            )));
        }
        let vars = num_inputs.saturating_add(num_aux);
        if a_len > vars || b_len > vars {
            return Err(Error::InvalidInput(format!(
                "query lengths A {a_len} / B {b_len} exceed the {vars} variables"
            )));
        }
        Ok(PartitionShape {
            domain_log2,
            num_constraints,
            num_inputs,
            num_aux,
            h_len: n - 1,
            l_len: num_aux,
            a_len,
            b_g1_len: b_len,
            b_g2_len: b_len,
            queries: Queries::ALL,
        })
    }

    /// The same shape for the work of `queries` only (a split partition's part, see
    /// [`Self::queries`]).
    pub fn with_queries(self, queries: Queries) -> Self {
        PartitionShape { queries, ..self }
    }

    /// The 32 GiB PoRep partition: 130,278,541 constraints without the 328 input constraints
    /// (130,278,869 with them), 328 inputs,
    /// 130,169,893 aux, domain 2^27, A 129.8 M and B 33.1 M points (rounded to 0.1 M).
    /// Parameters 44.1 GiB.
    #[cfg(any(test, feature = "internals"))]
    pub fn porep_32gib() -> Self {
        PartitionShape {
            domain_log2: 27,
            num_constraints: 130_278_541,
            num_inputs: 328,
            num_aux: 130_169_893,
            h_len: (1 << 27) - 1,
            l_len: 130_169_893,
            a_len: 129_800_000,
            b_g1_len: 33_100_000,
            b_g2_len: 33_100_000,
            queries: Queries::ALL,
        }
    }

    /// NTT domain size n = 2^`domain_log2` (points).
    #[cfg(any(test, feature = "internals"))]
    pub fn domain_size(&self) -> u64 {
        1u64 << self.domain_log2.min(63)
    }

    /// Bytes of the Groth16 parameters' MSM bases on the device:
    /// `(h + l + a + b_g1) × 96 + b_g2 × 192` (44.1 GiB at 32 GiB sectors).
    ///
    /// Each of the five vectors is its own device buffer, counted rounded up to
    /// `layout::ALIGN` (as the arena the GPU backend uploads them into counts it).
    pub fn params_bytes(&self) -> u64 {
        [self.h_len, self.l_len, self.a_len, self.b_g1_len]
            .into_iter()
            .map(|n| align_up(n.saturating_mul(G1_AFFINE_BYTES)))
            .sum::<u64>()
            .saturating_add(align_up(self.b_g2_len.saturating_mul(G2_AFFINE_BYTES)))
    }

    /// Longest MSM of the partition, in points.
    pub fn max_msm_len(&self) -> u64 {
        [
            self.h_len,
            self.l_len,
            self.a_len,
            self.b_g1_len,
            self.b_g2_len,
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }

    /// Points of one MSM pass in the non-streaming tiers: `min(MSM_PASS_POINTS, max_msm_len)`
    /// ([`MSM_PASS_POINTS_G1`] when [`Self::queries`] has no G2 MSM), at least 1.
    pub fn pass_points(&self) -> u64 {
        let cap = if self.queries.contains(Queries::B_G2) {
            MSM_PASS_POINTS
        } else {
            MSM_PASS_POINTS_G1
        };
        cap.min(self.max_msm_len()).max(1)
    }

    /// Bytes of the domain buffers of a tier's H side (n = 2^`domain_log2`, [`FR_BYTES`] each,
    /// [`h_step_bytes`]): `Resident`/`FullStaging` 3·n·32 (d_a, d_b, d_c: 12 GiB at 2^27);
    /// `Partial` 2·n·32 (d_a and one buffer b and c share: 8 GiB); `Streaming` n·32 (one domain
    /// buffer, h from the CPU NTT).
    pub fn staging_bytes(&self, kind: TierKind) -> u64 {
        let buffers = match kind {
            TierKind::Resident | TierKind::FullStaging => 3,
            TierKind::Partial => 2,
            TierKind::Streaming => 1,
        };
        h_step_bytes(self.domain_log2, buffers)
    }

    /// Device bytes of a tier's H side — the SpMV, the R1CS check and the H step, which run
    /// before any MSM: its domain buffers ([`Self::staging_bytes`]), z for the GPU SpMV
    /// ([`spmv_work_bytes`], 3.9 GiB at 2^27), the block slots of matrices streamed from host
    /// memory ([`streamed_circuit_bytes`] of a block of at most [`SPMV_BLOCK_NNZ`] non-zeros and
    /// [`SPMV_PLANNED_ROW_NNZ`] a row on average), and with two buffers the blockwise
    /// R1CS check's block of c ([`r1cs_block_bytes`]). 2^27: 16.2 GiB with three buffers,
    /// 12.2 GiB with two. `Streaming`: its one buffer (h comes from the CPU). 0 when
    /// [`Self::queries`] has no H (the L, A, B MSMs of a split partition).
    pub fn h_side_bytes(&self, kind: TierKind) -> u64 {
        if !self.queries.contains(Queries::H) {
            return 0;
        }
        let buffers = self.staging_bytes(kind);
        if kind == TierKind::Streaming {
            return buffers;
        }
        let rows = self.num_constraints.saturating_add(self.num_inputs);
        let check = if kind == TierKind::Partial {
            r1cs_block_bytes(rows)
        } else {
            0
        };
        let block_rows = rows.min(SPMV_BLOCK_ROWS);
        buffers
            .saturating_add(spmv_work_bytes(self.num_inputs, self.num_aux))
            .saturating_add(streamed_circuit_bytes(
                block_rows,
                SPMV_BLOCK_NNZ.min(block_rows.saturating_mul(SPMV_PLANNED_ROW_NNZ)),
                SPMV_PLANNED_COEFFS,
            ))
            .saturating_add(check)
    }

    /// Device bytes of a tier's MSM side with passes (or chunks) of `points` points: h
    /// (n·32 B) and aux (`num_aux` × 32 B) beside the MSM part ([`Self::msm_bytes`]) — for a
    /// whole partition the GPU SpMV keeps aux on the device from the start, so both are live
    /// during the H MSM; a split partition's H side counts h only, its other MSMs aux only.
    /// `Streaming` with H: its domain buffer (aux takes h's room after the H MSM) and the chunk.
    pub fn msm_side_bytes(&self, kind: TierKind, points: u64, lim: &MsmLimits) -> u64 {
        let h = self.queries.contains(Queries::H);
        let aux = !self.queries.and(Queries::REST).is_empty();
        let aux_bytes = align_up(self.num_aux.saturating_mul(FR_BYTES));
        let scalars = match (kind, h, aux) {
            (TierKind::Streaming, true, _) => self.staging_bytes(kind),
            (_, true, true) => h_step_bytes(self.domain_log2, 1).saturating_add(aux_bytes),
            (_, true, false) => h_step_bytes(self.domain_log2, 1),
            (_, false, true) => aux_bytes,
            (_, false, false) => 0,
        };
        scalars.saturating_add(self.msm_bytes(kind, points, lim))
    }

    /// Working bytes of a tier with passes of `points` points: what is live at once, the larger
    /// of its H side and its MSM side (the H side's buffers are freed before the MSMs start).
    fn work_bytes(&self, kind: TierKind, points: u64, lim: &MsmLimits) -> u64 {
        self.h_side_bytes(kind)
            .max(self.msm_side_bytes(kind, points, lim))
    }

    /// The MSMs the GPU backend runs over resident bases: H (h_len scalars), L (aux), A, B_G1
    /// (aux, density) in G1 and B_G2 (aux, density: at most `b_g2_len` Pippenger scalars) in
    /// G2; scalars and points on the device.
    pub fn resident_msms(&self) -> [MsmShape; 3] {
        let n = self.h_len.max(self.num_aux);
        let sh = |group, n, max_m, density| MsmShape {
            group,
            n,
            max_m,
            host_scalars: false,
            host_points: 0,
            density,
        };
        [
            sh(&G1_LAYOUT, n, n, false),
            sh(&G1_LAYOUT, self.num_aux, self.num_aux, true),
            sh(
                &G2_LAYOUT,
                self.num_aux,
                self.b_g2_len.min(self.num_aux),
                true,
            ),
        ]
    }

    /// The MSMs of one streamed pass of `points` points (rounded up to 64 scalars, as
    /// `prover::msm_passes` splits them): G1 without and with density, G2 with density.
    pub fn pass_msms(points: u64) -> [MsmShape; 3] {
        let n = points.div_ceil(64).max(1) * 64;
        let sh = |group, density| MsmShape {
            group,
            n,
            max_m: n,
            host_scalars: false,
            host_points: 0,
            density,
        };
        [
            sh(&G1_LAYOUT, false),
            sh(&G1_LAYOUT, true),
            sh(&G2_LAYOUT, true),
        ]
    }

    /// Bytes of the MSM part of a tier: for `Resident` the workspace of [`Self::resident_msms`];
    /// otherwise the workspace of [`Self::pass_msms`]`(points)` plus the double-buffered base
    /// slots of the larger points streamed ([`streamed_bases_bytes`]: G2 with B_G2, else G1).
    /// Only the MSM kinds of [`Self::queries`] count.
    pub fn msm_bytes(&self, kind: TierKind, points: u64, lim: &MsmLimits) -> u64 {
        let ws = |shapes: [MsmShape; 3]| {
            let used: Vec<MsmShape> = shapes
                .into_iter()
                .zip(self.msm_kinds_used())
                .filter_map(|(s, used)| used.then_some(s))
                .collect();
            msm_workspace_bytes(&used, lim).unwrap_or(u64::MAX)
        };
        match kind {
            TierKind::Resident => ws(self.resident_msms()),
            _ => {
                // The base slots hold the larger points the work streams: G2 with B_G2.
                let group = if self.queries.contains(Queries::B_G2) {
                    &G2_LAYOUT
                } else {
                    &G1_LAYOUT
                };
                ws(Self::pass_msms(points)).saturating_add(streamed_bases_bytes(points, group))
            }
        }
    }

    /// Which of the three MSM kinds of [`Self::resident_msms`] / [`Self::pass_msms`] the
    /// shape's [`Self::queries`] run: G1 without density (H, L), G1 with density (A, B_G1),
    /// G2 (B_G2).
    fn msm_kinds_used(&self) -> [bool; 3] {
        let q = self.queries;
        [
            !q.and(Queries::H.or(Queries::L)).is_empty(),
            !q.and(Queries::A.or(Queries::B_G1)).is_empty(),
            q.contains(Queries::B_G2),
        ]
    }

    /// Total device bytes of a tier with the default [`MsmLimits`] (on a
    /// [`DEFAULT_SM_COUNT`]-SM device); see [`Self::tier_bytes_with`].
    #[cfg(any(test, feature = "internals"))]
    pub fn tier_bytes(&self, kind: TierKind, params_resident: bool) -> u64 {
        self.tier_bytes_with(
            kind,
            params_resident,
            &MsmLimits::defaults(DEFAULT_SM_COUNT),
        )
    }

    /// Total device bytes of a tier: the larger of its H side ([`Self::h_side_bytes`]) and its
    /// MSM side ([`Self::msm_side_bytes`]) with [`Self::pass_points`] (+ the parameters'
    /// [`Self::params_bytes`] for `Resident` unless `params_resident`). 2^27, `Resident`:
    /// 44.1 + 23.0 GiB (the MSM side: h, aux and the whole-length MSM workspace). For
    /// `Streaming` this is the largest chunk; the smallest is
    /// [`Self::streaming_min_bytes_with`].
    pub fn tier_bytes_with(&self, kind: TierKind, params_resident: bool, lim: &MsmLimits) -> u64 {
        let params = if kind == TierKind::Resident && !params_resident {
            self.params_bytes()
        } else {
            0
        };
        params.saturating_add(self.work_bytes(kind, self.pass_points(), lim))
    }

    /// Device bytes of the L, A and B MSMs of `partitions` partitions sharing streamed passes
    /// of `points` points (the GPU backend's batches, [`crate::config::Tuning::msm_batch`]):
    /// each partition's aux (`num_aux` × 32 B, 3.9 GiB at 32 GiB) beside one MSM part
    /// ([`Self::msm_bytes`]: the pass workspace and the double-buffered base slots), which
    /// the partitions use in turn. At 2^27 with 2^23-point passes: two partitions 13.4 GiB (no
    /// more than one partition's `Partial` plan, 13.6 GiB), four 21.2 GiB (a 24 GiB card).
    pub fn shared_bases_bytes(&self, partitions: u64, points: u64, lim: &MsmLimits) -> u64 {
        partitions
            .saturating_mul(align_up(self.num_aux.saturating_mul(FR_BYTES)))
            .saturating_add(self.msm_bytes(TierKind::Partial, points, lim))
    }

    /// Bytes of `Streaming` with chunks of `points` points.
    pub fn streaming_bytes(&self, points: u64, lim: &MsmLimits) -> u64 {
        self.work_bytes(TierKind::Streaming, points, lim)
    }

    /// Bytes of `Partial` with MSM passes of `points` points.
    pub fn partial_bytes(&self, points: u64, lim: &MsmLimits) -> u64 {
        self.work_bytes(TierKind::Partial, points, lim)
    }

    /// Device bytes of `Partial` with its smallest pass (see [`Self::partial_fit`]).
    pub fn partial_min_bytes_with(&self, lim: &MsmLimits) -> u64 {
        self.partial_passes()
            .map(|p| self.partial_bytes(p, lim))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// The pass sizes `Partial` tries, largest first: [`Self::pass_points`], then the powers of
    /// two below it down to [`Self::min_chunk_points`].
    fn partial_passes(&self) -> impl Iterator<Item = u64> {
        let (max, min) = (self.pass_points(), self.min_chunk_points());
        let below = if max.is_power_of_two() {
            max / 2
        } else {
            1u64 << (63 - max.leading_zeros())
        };
        std::iter::once(max).chain(
            std::iter::successors(Some(below), |p| Some(p / 2)).take_while(move |&p| p >= min),
        )
    }

    /// The largest MSM pass (`partial_passes`) with which `Partial` fits in `avail` bytes
    /// (its working memory always holds the H step on two domain buffers, [`Self::h_side_bytes`]).
    /// `None` when no pass does. 2^27 on a 16 GiB card: 2^23 for a whole partition, 2^24 for
    /// its H side alone.
    pub fn partial_fit(&self, avail: u64, lim: &MsmLimits) -> Option<u64> {
        self.partial_passes()
            .find(|&p| self.partial_bytes(p, lim) <= avail)
    }

    /// Smallest streaming chunk, in points: [`MSM_CHUNK_ALIGN_POINTS`], or the whole longest MSM
    /// when it is shorter.
    pub fn min_chunk_points(&self) -> u64 {
        MSM_CHUNK_ALIGN_POINTS.min(self.pass_points())
    }

    /// Device bytes of `Streaming` with [`Self::min_chunk_points`] (default limits).
    #[cfg(any(test, feature = "internals"))]
    pub fn streaming_min_bytes(&self) -> u64 {
        self.streaming_min_bytes_with(&MsmLimits::defaults(DEFAULT_SM_COUNT))
    }

    /// Device bytes of `Streaming` with [`Self::min_chunk_points`] — the smallest tier for
    /// large shapes (see [`Self::min_bytes`]).
    pub fn streaming_min_bytes_with(&self, lim: &MsmLimits) -> u64 {
        self.streaming_bytes(self.min_chunk_points(), lim)
    }

    /// [`Self::min_bytes_with`] with the default limits.
    #[cfg(any(test, feature = "internals"))]
    pub fn min_bytes(&self, start: TierKind, params_resident: bool) -> u64 {
        self.min_bytes_with(
            start,
            params_resident,
            &MsmLimits::defaults(DEFAULT_SM_COUNT),
        )
    }

    /// Fewest device bytes any tier from `start` down can run in: the `needed` figure of
    /// [`Error::OutOfDeviceMemory`]. Usually the smallest streaming chunk; for small shapes
    /// `Resident` may need less.
    pub fn min_bytes_with(&self, start: TierKind, params_resident: bool, lim: &MsmLimits) -> u64 {
        TierKind::ALL
            .into_iter()
            .filter(|k| *k >= start)
            .map(|k| match k {
                TierKind::Streaming => self.streaming_min_bytes_with(lim),
                TierKind::Partial => self.partial_min_bytes_with(lim),
                k => self.tier_bytes_with(k, params_resident, lim),
            })
            .min()
            .unwrap_or(u64::MAX)
    }
}

/// The kind of a [`Tier`], without its data; ordered best (`Resident`) to last (`Streaming`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TierKind {
    /// Parameters resident + full staging.
    Resident,
    /// Full staging of a, b, c; bases streamed.
    FullStaging,
    /// d_a + one shared b/c buffer; bases streamed.
    Partial,
    /// One domain buffer; MSM in chunks that fit.
    Streaming,
}

impl TierKind {
    /// All kinds in the order they are tried.
    pub const ALL: [TierKind; 4] = [
        TierKind::Resident,
        TierKind::FullStaging,
        TierKind::Partial,
        TierKind::Streaming,
    ];

    /// The next kind to try after this one, `None` after `Streaming`.
    pub fn lower(self) -> Option<TierKind> {
        let i = TierKind::ALL.iter().position(|&k| k == self)?;
        TierKind::ALL.get(i + 1).copied()
    }

    /// Stable short name: `resident`, `full-staging`, `partial`, `streaming`.
    pub fn name(self) -> &'static str {
        match self {
            TierKind::Resident => "resident",
            TierKind::FullStaging => "full-staging",
            TierKind::Partial => "partial",
            TierKind::Streaming => "streaming",
        }
    }
}

impl fmt::Display for TierKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How one partition uses device memory (see the module table for the bytes of each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Parameters resident in device memory + full staging of a, b, c.
    Resident,
    /// d_a, d_b, d_c on the device (3·n·32 B); MSM bases streamed per pass.
    FullStaging,
    /// d_a plus one buffer shared by b and c (2·n·32 B); MSM bases streamed per pass.
    Partial {
        /// Points of one MSM pass: [`PartitionShape::pass_points`], or a smaller power of two
        /// (≥ [`PartitionShape::min_chunk_points`]) when the tier fits only so
        /// ([`PartitionShape::partial_fit`]: 2^23 for a whole 2^27 partition on a 16 GiB card).
        pass_points: u64,
    },
    /// One domain buffer; MSM bases and scalars streamed in chunks.
    Streaming {
        /// Points per chunk (a multiple of [`MSM_CHUNK_ALIGN_POINTS`] unless the whole MSM is
        /// shorter).
        chunk_points: u64,
        /// Device bytes of the chunk's MSM part ([`PartitionShape::msm_bytes`]: workspace and
        /// two base slots), without the domain buffer.
        chunk_bytes: u64,
    },
}

impl Tier {
    /// The tier's kind.
    pub fn kind(&self) -> TierKind {
        match self {
            Tier::Resident => TierKind::Resident,
            Tier::FullStaging => TierKind::FullStaging,
            Tier::Partial { .. } => TierKind::Partial,
            Tier::Streaming { .. } => TierKind::Streaming,
        }
    }

    /// Stable short name (the kind's): `resident`, `full-staging`, `partial`, `streaming`.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Points of one MSM pass of the streamed-bases tiers (`Partial`'s pass, `Streaming`'s
    /// chunk); `None` for `Resident` and `FullStaging` (which use
    /// [`PartitionShape::pass_points`]).
    pub fn pass_points(&self) -> Option<u64> {
        match *self {
            Tier::Partial { pass_points } => Some(pass_points),
            Tier::Streaming { chunk_points, .. } => Some(chunk_points),
            _ => None,
        }
    }

    /// Points of one MSM pass of `shape` under this tier — what the GPU backend sizes its base
    /// buffers and passes with, and so what the plan budgeted: the tier's own pass
    /// ([`Self::pass_points`]) for `Partial` and `Streaming`, else
    /// [`PartitionShape::pass_points`].
    pub fn msm_pass_points(&self, shape: &PartitionShape) -> u64 {
        self.pass_points().unwrap_or_else(|| shape.pass_points())
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tier::Streaming {
                chunk_points,
                chunk_bytes,
            } => {
                write!(
                    f,
                    "streaming (chunks of {chunk_points} points, {})",
                    fmt_gib(*chunk_bytes)
                )
            }
            Tier::Partial { pass_points } => {
                write!(f, "partial (passes of {pass_points} points)")
            }
            t => f.write_str(t.name()),
        }
    }
}

/// Options of [`DeviceAllocator::plan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanOptions {
    /// Best tier to try; lower ones follow. A retry after an out-of-memory failure at tier `t`
    /// passes `t.lower()` (see `scheduler::Attempt::start_tier`).
    pub start: TierKind,
    /// The parameters of this shape are already resident on the device (kept alive by an
    /// earlier [`Plan::params`]): `Resident` then needs only the staging and pass bytes.
    pub params_resident: bool,
    /// Only tiers whose H step runs on the device (`Streaming`, whose H step runs on the CPU,
    /// is skipped). For a partition that waits while other partitions of this process hold
    /// device memory: their memory comes back, and waiting for it beats an H step on the CPU
    /// (tens of seconds at 2^27 against a fraction of one).
    pub gpu_h_step: bool,
    /// Worst tier to accept (default `Streaming`: any). A partition waiting while other
    /// partitions hold device memory takes no tier below the one the device would give it
    /// once that memory is back ([`DeviceAllocator::tier_if_freed`]): on an 80 GB card one
    /// partition at a time with the parameters resident beats two streaming their bases.
    pub worst: TierKind,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            start: TierKind::Resident,
            params_resident: false,
            gpu_h_step: false,
            worst: TierKind::Streaming,
        }
    }
}

/// What one partition may use on one device: the tier and its reserved bytes. Dropping the plan
/// (or its reservations) returns the bytes to the budget.
#[derive(Debug)]
// `device`, `needed` and `available` are read by tests and the batch example (and `Debug`).
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub struct Plan {
    /// CUDA device ordinal.
    pub device: usize,
    /// The tier chosen (report it: `PartitionReport::tier`).
    pub tier: Tier,
    /// Bytes of the tier (`work` plus `params`).
    pub needed: u64,
    /// Bytes that were available when planning (after margin, other reservations and the cap).
    pub available: u64,
    /// The partition's working memory (staging buffers, MSM pass or chunk, buckets).
    pub work: Reservation,
    /// For `Resident` without `params_resident`: the parameters' bytes, separately, so the
    /// caller can keep them (with the uploaded parameters) beyond this partition. `None`
    /// otherwise.
    pub params: Option<Reservation>,
}

/// The allocator's view of one device at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemSnapshot {
    /// CUDA device ordinal.
    pub device: usize,
    /// Free bytes the driver reports.
    pub free: u64,
    /// Total bytes the driver reports.
    pub total: u64,
    /// Bytes of this allocator's live reservations.
    pub reserved: u64,
    /// Reserved bytes not yet reported allocated (still counted in `free` by the driver).
    pub pending: u64,
    /// The cap, if any.
    pub limit: Option<u64>,
    /// Bytes a new reservation may take now:
    /// `min(free − margin − pending, limit − margin − reserved)`, floored at 0.
    pub available: u64,
}

#[derive(Debug, Default)]
struct Ledger {
    /// Sum of live reservations' bytes.
    reserved: u64,
    /// Part of `reserved` that owners reported as allocated.
    allocated: u64,
    /// Number of live reservations.
    live: usize,
    /// Highest `reserved` seen.
    peak_reserved: u64,
}

#[derive(Debug)]
struct Shared {
    device: usize,
    ledger: Mutex<Ledger>,
    released: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The VRAM budget of one device, shared by all its workers (wrap in an `Arc` or keep one per
/// device in the engine). Thread-safe.
pub struct DeviceAllocator {
    device: usize,
    mem: Arc<dyn MemInfo>,
    vram_limit: Option<u64>,
    limits: MsmLimits,
    shared: Arc<Shared>,
}

impl fmt::Debug for DeviceAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceAllocator")
            .field("device", &self.device)
            .field("vram_limit", &self.vram_limit)
            .field("ledger", &*lock(&self.shared.ledger))
            .finish()
    }
}

impl DeviceAllocator {
    /// Allocator of device ordinal `device`, reading memory through `mem`, capped at
    /// `vram_limit` bytes in total (`None`: the card's memory).
    pub fn new(device: usize, mem: Arc<dyn MemInfo>, vram_limit: Option<u64>) -> Self {
        DeviceAllocator {
            device,
            mem,
            vram_limit,
            limits: MsmLimits::defaults(DEFAULT_SM_COUNT),
            shared: Arc::new(Shared {
                device,
                ledger: Mutex::new(Ledger::default()),
                released: Condvar::new(),
            }),
        }
    }

    /// Plans for a device of `sm_count` streaming multiprocessors (the MSM's segment buffers
    /// scale with it; default [`DEFAULT_SM_COUNT`]).
    pub fn with_sm_count(mut self, sm_count: u32) -> Self {
        self.limits.sm_count = sm_count.max(1);
        self
    }

    /// Plans MSMs with this bucket accumulation (default [`Accumulation::BatchAffine`]; its
    /// chain states are part of every plan that uses it) and, when given, this shortest
    /// batch-affine list for both groups (default: each group's
    /// `layout::GroupLayout::affine_min_list`).
    pub fn with_accumulation(mut self, accumulation: Accumulation, min_list: Option<u64>) -> Self {
        self.limits.accumulation = accumulation;
        if min_list.is_some() {
            self.limits.affine_min_list = min_list;
        }
        self
    }

    /// The MSM limits plans are computed with (what `gpu::kernels::msm::MsmConfig::default` uses on
    /// this device).
    pub fn msm_limits(&self) -> MsmLimits {
        self.limits
    }

    /// CUDA device ordinal.
    #[cfg(any(test, feature = "internals"))]
    pub fn device(&self) -> usize {
        self.device
    }

    /// The cap in bytes, if any.
    #[cfg(any(test, feature = "internals"))]
    pub fn vram_limit(&self) -> Option<u64> {
        self.vram_limit
    }

    fn snapshot_locked(&self, l: &Ledger) -> Result<MemSnapshot> {
        let (free, total) = self.mem.mem_get_info(self.device)?;
        let pending = l.reserved.saturating_sub(l.allocated);
        let mut available = free.saturating_sub(SAFETY_MARGIN).saturating_sub(pending);
        if let Some(limit) = self.vram_limit {
            available = available.min(
                limit
                    .saturating_sub(SAFETY_MARGIN)
                    .saturating_sub(l.reserved),
            );
        }
        Ok(MemSnapshot {
            device: self.device,
            free,
            total,
            reserved: l.reserved,
            pending,
            limit: self.vram_limit,
            available,
        })
    }

    /// Reads the driver now and returns the allocator's view (see [`MemSnapshot::available`]).
    ///
    /// # Errors
    /// The [`MemInfo`] error (driver failure).
    pub fn snapshot(&self) -> Result<MemSnapshot> {
        let l = lock(&self.shared.ledger);
        self.snapshot_locked(&l)
    }

    /// Bytes a new reservation may take now (reads the driver).
    ///
    /// # Errors
    /// The [`MemInfo`] error.
    pub fn available(&self) -> Result<u64> {
        Ok(self.snapshot()?.available)
    }

    /// Bytes of this allocator's live reservations (0 when every guard has dropped).
    pub fn reserved_bytes(&self) -> u64 {
        lock(&self.shared.ledger).reserved
    }

    /// Number of live reservations.
    #[cfg(any(test, feature = "internals"))]
    pub fn live_reservations(&self) -> usize {
        lock(&self.shared.ledger).live
    }

    /// Highest total of simultaneous reservations seen so far, in bytes.
    #[cfg(any(test, feature = "internals"))]
    pub fn peak_reserved_bytes(&self) -> u64 {
        lock(&self.shared.ledger).peak_reserved
    }

    fn insert_locked(&self, l: &mut Ledger, bytes: u64, label: &'static str) -> Reservation {
        l.reserved += bytes;
        l.live += 1;
        l.peak_reserved = l.peak_reserved.max(l.reserved);
        Reservation {
            shared: Arc::clone(&self.shared),
            bytes,
            allocated: AtomicU64::new(0),
            label,
        }
    }

    /// Reserves exactly `bytes` for a purpose named by `label` (shown in logs and `Debug`).
    ///
    /// # Errors
    /// [`Error::OutOfDeviceMemory`] `{ needed: bytes, free: available }` when they do not fit;
    /// the [`MemInfo`] error when the driver cannot be read.
    pub fn reserve(&self, bytes: u64, label: &'static str) -> Result<Reservation> {
        let mut l = lock(&self.shared.ledger);
        let snap = self.snapshot_locked(&l)?;
        if bytes > snap.available {
            return Err(Error::OutOfDeviceMemory {
                device: self.device,
                needed: bytes,
                free: snap.available,
            });
        }
        Ok(self.insert_locked(&mut l, bytes, label))
    }

    /// Reserves the first of `candidates` (bytes, best first) that fits, for a purpose named
    /// by `label`; when none does, waits up to `timeout` for one of this allocator's
    /// reservations to drop (re-reading the driver at least every 50 ms) and tries again.
    /// Returns the index of the one reserved and its reservation, `None` when none fitted in
    /// time.
    ///
    /// # Errors
    /// The [`MemInfo`] error.
    pub fn reserve_first(
        &self,
        candidates: &[u64],
        label: &'static str,
        timeout: Duration,
    ) -> Result<Option<(usize, Reservation)>> {
        const POLL: Duration = Duration::from_millis(50);
        let deadline = Instant::now() + timeout;
        let mut l = lock(&self.shared.ledger);
        loop {
            let available = self.snapshot_locked(&l)?.available;
            if let Some(i) = candidates.iter().position(|&b| b <= available) {
                let r = self.insert_locked(&mut l, candidates[i], label);
                return Ok(Some((i, r)));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            l = self
                .shared
                .released
                .wait_timeout(l, (deadline - now).min(POLL))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The best tier from `opts.start` down to `opts.worst` (`Streaming` skipped with
    /// `opts.gpu_h_step`) that fits in `avail` bytes, with its bytes.
    fn choose(&self, shape: &PartitionShape, opts: &PlanOptions, avail: u64) -> Option<(Tier, u64)> {
        let lim = &self.limits;
        TierKind::ALL
            .into_iter()
            .filter(|k| {
                *k >= opts.start
                    && *k <= opts.worst
                    && !(opts.gpu_h_step && *k == TierKind::Streaming)
            })
            .find_map(|kind| match kind {
                TierKind::Partial => shape.partial_fit(avail, lim).map(|points| {
                    (
                        Tier::Partial {
                            pass_points: points,
                        },
                        shape.partial_bytes(points, lim),
                    )
                }),
                TierKind::Streaming => streaming_fit(shape, avail, lim).map(|points| {
                    (
                        Tier::Streaming {
                            chunk_points: points,
                            chunk_bytes: shape.msm_bytes(kind, points, lim),
                        },
                        shape.streaming_bytes(points, lim),
                    )
                }),
                _ => {
                    let needed = shape.tier_bytes_with(kind, opts.params_resident, lim);
                    let tier = match kind {
                        TierKind::Resident => Tier::Resident,
                        _ => Tier::FullStaging,
                    };
                    (needed <= avail).then_some((tier, needed))
                }
            })
    }

    /// The tier [`Self::plan`] would choose now if `freed` more bytes were available (the
    /// working memory other partitions hold and will give back), without reserving anything;
    /// `None` when none would fit.
    ///
    /// # Errors
    /// The [`MemInfo`] error.
    pub fn tier_if_freed(
        &self,
        shape: &PartitionShape,
        opts: &PlanOptions,
        freed: u64,
    ) -> Result<Option<TierKind>> {
        let l = lock(&self.shared.ledger);
        let avail = self.snapshot_locked(&l)?.available.saturating_add(freed);
        Ok(self.choose(shape, opts, avail).map(|(t, _)| t.kind()))
    }

    fn plan_locked(
        &self,
        l: &mut Ledger,
        shape: &PartitionShape,
        opts: &PlanOptions,
    ) -> Result<Plan> {
        let snap = self.snapshot_locked(l)?;
        let avail = snap.available;
        if let Some((tier, needed)) = self.choose(shape, opts, avail) {
            let params_bytes = if tier == Tier::Resident && !opts.params_resident {
                shape.params_bytes()
            } else {
                0
            };
            let params = (params_bytes > 0).then(|| self.insert_locked(l, params_bytes, "params"));
            let work = self.insert_locked(l, needed - params_bytes, tier.name());
            log::debug!(
                "device {}: planned {tier} for 2^{} partition: {} of {} available ({} reserved by cuzk)",
                self.device,
                shape.domain_log2,
                fmt_gib(needed),
                fmt_gib(avail),
                fmt_gib(snap.reserved),
            );
            return Ok(Plan {
                device: self.device,
                tier,
                needed,
                available: avail,
                work,
                params,
            });
        }
        Err(Error::OutOfDeviceMemory {
            device: self.device,
            needed: shape.min_bytes_with(opts.start, opts.params_resident, &self.limits),
            free: avail,
        })
    }

    /// Chooses the best tier from `opts.start` down that fits now and reserves its bytes, in
    /// one step under the allocator's lock (two callers never plan with the same bytes).
    ///
    /// # Errors
    /// [`Error::OutOfDeviceMemory`] `{ needed: shape.min_bytes(..), free: available }` when no
    /// tier fits, not even the smallest streaming chunk; the [`MemInfo`] error.
    pub fn plan(&self, shape: &PartitionShape, opts: &PlanOptions) -> Result<Plan> {
        let mut l = lock(&self.shared.ledger);
        self.plan_locked(&mut l, shape, opts)
    }

    /// Like [`Self::plan`], but when nothing fits, waits up to `timeout` for memory to come
    /// back (woken when one of this allocator's reservations drops, and re-reading the driver
    /// at least every 50 ms for other processes' memory) before giving up.
    ///
    /// # Errors
    /// As [`Self::plan`], with the figures of the last try.
    pub fn plan_wait(
        &self,
        shape: &PartitionShape,
        opts: &PlanOptions,
        timeout: Duration,
    ) -> Result<Plan> {
        const POLL: Duration = Duration::from_millis(50);
        let deadline = Instant::now() + timeout;
        let mut l = lock(&self.shared.ledger);
        loop {
            match self.plan_locked(&mut l, shape, opts) {
                Err(e @ Error::OutOfDeviceMemory { .. }) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(e);
                    }
                    let wait = (deadline - now).min(POLL);
                    l = self
                        .shared
                        .released
                        .wait_timeout(l, wait)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                other => return other,
            }
        }
    }
}

/// The largest streaming chunk (the whole longest MSM, or a multiple of
/// [`MSM_CHUNK_ALIGN_POINTS`]) whose tier fits in `avail` bytes, `None` when not even
/// [`PartitionShape::min_chunk_points`] fits. The bytes grow with the chunk, so a binary search.
fn streaming_fit(shape: &PartitionShape, avail: u64, lim: &MsmLimits) -> Option<u64> {
    let max = shape.pass_points();
    if shape.streaming_bytes(max, lim) <= avail {
        return Some(max);
    }
    if shape.streaming_bytes(shape.min_chunk_points(), lim) > avail {
        return None;
    }
    // k chunks of MSM_CHUNK_ALIGN_POINTS, k in [1, max / align)
    let (mut lo, mut hi) = (1u64, (max / MSM_CHUNK_ALIGN_POINTS).max(1));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if shape.streaming_bytes(mid * MSM_CHUNK_ALIGN_POINTS, lim) <= avail {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some((lo * MSM_CHUNK_ALIGN_POINTS).max(shape.min_chunk_points()))
}

/// Device memory handed out from one plan's reservation: every buffer of the partition is
/// counted against it ([`Arena::take`]), so a worker cannot allocate beyond its reservation —
/// and `CUZK_VRAM_LIMIT` holds at allocation time, not only at planning time. Records its
/// high-water mark; when the last clone drops, the record goes to [`arena_records`].
/// Clones share the same budget. Thread-safe.
#[derive(Clone, Debug)]
pub struct Arena {
    inner: Arc<ArenaInner>,
}

#[derive(Debug)]
struct ArenaInner {
    device: usize,
    label: String,
    capacity: u64,
    /// (used, high-water), bytes.
    state: Mutex<(u64, u64)>,
}

/// One arena's figures, kept after it is gone ([`arena_records`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaRecord {
    /// CUDA device ordinal.
    pub device: usize,
    /// What the arena was for (e.g. `"full-staging"`).
    pub label: String,
    /// Bytes it could hand out (the plan's reservation).
    pub capacity: u64,
    /// Most bytes handed out at once.
    pub high_water: u64,
}

fn records() -> &'static Mutex<Vec<ArenaRecord>> {
    static R: std::sync::OnceLock<Mutex<Vec<ArenaRecord>>> = std::sync::OnceLock::new();
    R.get_or_init(Default::default)
}

/// The figures of the arenas dropped so far in this process, oldest first (at most the last
/// 4096), e.g. to check that peak ≤ reservation on every tier (tests/gpu_alloc.rs).
#[cfg(any(test, feature = "internals"))]
pub fn arena_records() -> Vec<ArenaRecord> {
    lock(records()).clone()
}

impl Drop for ArenaInner {
    fn drop(&mut self) {
        let high_water = lock(&self.state).1;
        log::debug!(
            "device {}: arena {}: high-water {} of {} reserved",
            self.device,
            self.label,
            fmt_gib(high_water),
            fmt_gib(self.capacity)
        );
        let mut r = lock(records());
        if r.len() >= 4096 {
            r.remove(0);
        }
        r.push(ArenaRecord {
            device: self.device,
            label: std::mem::take(&mut self.label),
            capacity: self.capacity,
            high_water,
        });
    }
}

impl Arena {
    /// An arena of `capacity` bytes on `device`, named `label` in logs and records.
    pub fn new(device: usize, label: impl Into<String>, capacity: u64) -> Self {
        Arena {
            inner: Arc::new(ArenaInner {
                device,
                label: label.into(),
                capacity,
                state: Mutex::new((0, 0)),
            }),
        }
    }

    /// An arena over the bytes of `r` (its device, label and size).
    pub fn over(r: &Reservation) -> Self {
        Self::new(r.device(), r.label(), r.bytes())
    }

    /// Takes `bytes` (rounded up to `layout::ALIGN`), returned when the lease drops.
    ///
    /// # Errors
    /// [`Error::OutOfDeviceMemory`] `{ needed: bytes, free: bytes left }` when they exceed what
    /// is left (logged as an error: the plan did not cover an allocation).
    pub fn take(&self, bytes: u64) -> Result<ArenaLease> {
        let b = align_up(bytes);
        let mut st = lock(&self.inner.state);
        let left = self.inner.capacity - st.0;
        if b > left {
            log::error!(
                "device {}: arena {} exhausted: {b} bytes asked, {left} of {} left",
                self.inner.device,
                self.inner.label,
                self.inner.capacity
            );
            return Err(Error::OutOfDeviceMemory {
                device: self.inner.device,
                needed: b,
                free: left,
            });
        }
        st.0 += b;
        st.1 = st.1.max(st.0);
        Ok(ArenaLease {
            inner: self.inner.clone(),
            bytes: b,
        })
    }

    /// Bytes the arena may hand out in all.
    pub fn capacity(&self) -> u64 {
        self.inner.capacity
    }

    /// Bytes handed out now.
    pub fn used(&self) -> u64 {
        lock(&self.inner.state).0
    }

    /// Most bytes handed out at once so far.
    pub fn high_water(&self) -> u64 {
        lock(&self.inner.state).1
    }
}

/// Bytes taken from an [`Arena`]; returned when dropped.
#[derive(Debug)]
pub struct ArenaLease {
    inner: Arc<ArenaInner>,
    bytes: u64,
}

impl ArenaLease {
    /// Bytes held (aligned).
    #[cfg(any(test, feature = "internals"))]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for ArenaLease {
    fn drop(&mut self) {
        lock(&self.inner.state).0 -= self.bytes;
    }
}

/// Bytes reserved on one device; returns them to the [`DeviceAllocator`] when dropped (also
/// during a panic's unwinding). Thread-safe; not clonable.
///
/// Owners report actual device allocations so the budget does not count them twice (once as
/// reserved, once in the driver's free figure): call [`Reservation::note_allocated`] *after*
/// `cuMemAlloc` succeeds and [`Reservation::note_freed`] *before* `cuMemFree`; both orders err
/// on the safe side. Not reporting is safe too, only more conservative.
pub struct Reservation {
    shared: Arc<Shared>,
    bytes: u64,
    allocated: AtomicU64,
    label: &'static str,
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("device", &self.shared.device)
            .field("label", &self.label)
            .field("bytes", &self.bytes)
            .field("allocated", &self.allocated.load(Ordering::SeqCst))
            .finish()
    }
}

impl Reservation {
    /// Device ordinal.
    pub fn device(&self) -> usize {
        self.shared.device
    }

    /// Reserved bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// What the reservation is for (tier name or the `reserve` label).
    pub fn label(&self) -> &'static str {
        self.label
    }

    /// Bytes reported allocated so far (≤ [`Self::bytes`]).
    #[cfg(any(test, feature = "internals"))]
    pub fn allocated(&self) -> u64 {
        self.allocated.load(Ordering::SeqCst)
    }

    /// Reports that `bytes` of this reservation are now allocated on the device (so they are
    /// no longer subtracted again from the driver's free figure). Clamped to the unallocated
    /// rest.
    pub fn note_allocated(&self, bytes: u64) {
        let mut l = lock(&self.shared.ledger);
        let cur = self.allocated.load(Ordering::SeqCst);
        let add = bytes.min(self.bytes - cur);
        self.allocated.store(cur + add, Ordering::SeqCst);
        l.allocated += add;
    }

    /// Reports that `bytes` of this reservation are about to be freed (they count as pending
    /// again until the reservation drops). Clamped to what was allocated.
    pub fn note_freed(&self, bytes: u64) {
        let mut l = lock(&self.shared.ledger);
        let cur = self.allocated.load(Ordering::SeqCst);
        let sub = bytes.min(cur);
        self.allocated.store(cur - sub, Ordering::SeqCst);
        l.allocated -= sub;
        self.shared.released.notify_all();
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut l = lock(&self.shared.ledger);
        l.reserved -= self.bytes;
        l.allocated -= self.allocated.load(Ordering::SeqCst);
        l.live -= 1;
        drop(l);
        self.shared.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    /// H200: 141 GB total, ~0.5 GiB taken by the context.
    const H200_TOTAL: u64 = 141_000_000_000;

    fn card(free: u64) -> (Arc<FakeMemInfo>, DeviceAllocator) {
        let mem = Arc::new(FakeMemInfo::new(&[(free, free)]));
        let a = DeviceAllocator::new(0, mem.clone(), None);
        (mem, a)
    }

    fn shape() -> PartitionShape {
        PartitionShape::porep_32gib()
    }

    /// The tier a fresh card with `free` bytes gets for [`shape`].
    fn tier_of(free: u64) -> Tier {
        card(free)
            .1
            .plan(&shape(), &PlanOptions::default())
            .unwrap()
            .tier
    }

    /// The plan's bytes for a tier, from the buffer-size functions of `gpu::memory::layout` one by
    /// one.
    fn sum_of_buffers(s: &PartitionShape, kind: TierKind, points: u64, lim: &MsmLimits) -> u64 {
        use crate::gpu::memory::layout::{msm_workspace_slots, MSM_SLOTS};
        let n_bufs = match kind {
            TierKind::Resident | TierKind::FullStaging => 3,
            TierKind::Partial => 2,
            TierKind::Streaming => 1,
        };
        use crate::gpu::memory::layout::{csr_buffers, r1cs_block_bytes, spmv_work_bytes};
        let buf = align_up((1u64 << s.domain_log2) * 32);
        let (shapes, bases) = match kind {
            TierKind::Resident => (s.resident_msms().to_vec(), 0),
            _ => (
                PartitionShape::pass_msms(points).to_vec(),
                2 * align_up(points * 192),
            ),
        };
        let slots: [u64; MSM_SLOTS + 2] = msm_workspace_slots(&shapes, lim).unwrap();
        let msm = slots.iter().sum::<u64>() + bases;
        if kind == TierKind::Streaming {
            return buf + msm;
        }
        let rows = (s.num_constraints + s.num_inputs).min(1 << 21);
        let blocks = 2 * csr_buffers(rows, (rows * 64).min(1 << 23)).iter().sum::<u64>()
            + align_up((1 << 16) * 32);
        let check = if kind == TierKind::Partial {
            r1cs_block_bytes(s.num_constraints + s.num_inputs)
        } else {
            0
        };
        let h_side = n_bufs * buf + spmv_work_bytes(s.num_inputs, s.num_aux) + blocks + check;
        let msm_side = buf + align_up(s.num_aux * 32) + msm;
        h_side.max(msm_side)
    }

    /// A batch of L, A, B MSMs over shared bases on the cards the issue names: two 32 GiB
    /// partitions with 2^23-point passes fit in the room of the H side a 16 GiB card's
    /// `Partial` plan holds (the other worker's turn), and a whole 24 GiB card holds four.
    #[test]
    fn shared_bases_batches_fit_the_small_cards() {
        let s = PartitionShape::porep_32gib();
        let lim = MsmLimits::defaults(DEFAULT_SM_COUNT);
        let aux = align_up(s.num_aux * FR_BYTES);
        let one = s.shared_bases_bytes(1, 1 << 23, &lim);
        assert_eq!(one, aux + s.msm_bytes(TierKind::Partial, 1 << 23, &lim));
        assert_eq!(s.shared_bases_bytes(3, 1 << 23, &lim), one + 2 * aux);
        // 16 GiB: two partitions in no more than one partition's Partial plan (13.55 GiB).
        let two = s.shared_bases_bytes(2, 1 << 23, &lim);
        assert!(two <= s.partial_bytes(1 << 23, &lim), "{}", fmt_gib(two));
        assert!(two <= 16 * GIB - SAFETY_MARGIN - 2 * GIB, "{}", fmt_gib(two));
        // 24 GiB: four with 2^23-point passes, not four with 2^24.
        let card = 24 * GIB - SAFETY_MARGIN;
        assert!(s.shared_bases_bytes(4, 1 << 23, &lim) <= card);
        assert!(s.shared_bases_bytes(4, 1 << 24, &lim) > card);
    }

    #[test]
    fn a_split_partitions_parts_plan_only_their_own_msms() {
        let s = PartitionShape::porep_32gib();
        let (h, rest) = (s.with_queries(Queries::H), s.with_queries(Queries::REST));
        let lim = MsmLimits::defaults(DEFAULT_SM_COUNT);
        let aux = align_up(s.num_aux * FR_BYTES);
        let hbuf = h_step_bytes(s.domain_log2, 1);
        let p = 1u64 << 24;
        // The H side alone: no aux and no L, A, B workspace or G2 base slots beside its H MSM.
        assert_eq!(h.h_side_bytes(TierKind::Partial), s.h_side_bytes(TierKind::Partial));
        let g1 = msm_workspace_bytes(&PartitionShape::pass_msms(p)[..1], &lim).unwrap()
            + streamed_bases_bytes(p, &G1_LAYOUT);
        assert_eq!(h.msm_side_bytes(TierKind::Partial, p, &lim), hbuf + g1);
        // The other MSMs alone: no H side, no h.
        assert_eq!(rest.h_side_bytes(TierKind::Partial), 0);
        assert_eq!(
            rest.msm_side_bytes(TierKind::Partial, p, &lim),
            aux + s.msm_bytes(TierKind::Partial, p, &lim)
        );
        // A 16 GiB card: the whole partition runs 2^23-point passes, its H side 2^24 in its
        // two-buffer H step's room (12.2 GiB), and the other MSMs need less than either.
        let card = 16 * GIB - SAFETY_MARGIN;
        assert_eq!(s.partial_fit(card, &lim), Some(1 << 23));
        assert_eq!(h.partial_fit(card, &lim), Some(1 << 24));
        let (hb, wb) = (h.partial_bytes(1 << 24, &lim), s.partial_bytes(1 << 23, &lim));
        assert_eq!(hb, h.h_side_bytes(TierKind::Partial), "{}", fmt_gib(hb));
        assert!(hb < wb, "{} vs {}", fmt_gib(hb), fmt_gib(wb));
        assert!(rest.partial_bytes(1 << 23, &lim) + 4 * GIB <= wb);
        // G1 MSMs only: passes of 2^25 points where they fit (a 24 GiB card's full staging).
        assert_eq!((h.pass_points(), rest.pass_points()), (1 << 25, 1 << 24));
        let a = DeviceAllocator::new(0, Arc::new(FakeMemInfo::new(&[(24 * GIB, 24 * GIB)])), None);
        let plan = a.plan(&h, &PlanOptions::default()).unwrap();
        assert_eq!(plan.tier, Tier::FullStaging);
        assert_eq!(plan.tier.msm_pass_points(&h), 1 << 25);
    }

    #[test]
    fn planner_bytes_equal_the_sum_of_the_buffer_size_functions() {
        for log2 in 20..=27u32 {
            let n = 1u64 << log2;
            let aux = n - n / 32;
            let s = PartitionShape::from_counts(n - n / 16, 328, aux, aux - aux / 100, aux / 4)
                .unwrap();
            assert_eq!(s.domain_log2, log2);
            for sms in [DEFAULT_SM_COUNT, 16] {
                let lim = MsmLimits::defaults(sms);
                for kind in TierKind::ALL {
                    let want = sum_of_buffers(&s, kind, s.pass_points(), &lim);
                    assert_eq!(s.tier_bytes_with(kind, true, &lim), want, "2^{log2} {kind}");
                    if kind == TierKind::Resident {
                        assert_eq!(
                            s.tier_bytes_with(kind, false, &lim),
                            want + s.params_bytes()
                        );
                    }
                }
                // the plan an allocator makes on a card where just that tier fits
                for kind in TierKind::ALL {
                    let a = DeviceAllocator::new(
                        0,
                        Arc::new(FakeMemInfo::new(&[(H200_TOTAL * 2, H200_TOTAL * 2)])),
                        Some(SAFETY_MARGIN + s.tier_bytes_with(kind, false, &lim)),
                    )
                    .with_sm_count(sms);
                    let p = a
                        .plan(
                            &s,
                            &PlanOptions {
                                start: kind,
                                params_resident: false,
                                ..PlanOptions::default()
                            },
                        )
                        .unwrap();
                    assert_eq!(p.tier.kind(), kind, "2^{log2}");
                    let points = p.tier.pass_points().unwrap_or(s.pass_points());
                    let params = if kind == TierKind::Resident {
                        s.params_bytes()
                    } else {
                        0
                    };
                    assert_eq!(p.needed, params + sum_of_buffers(&s, kind, points, &lim));
                    assert_eq!(
                        p.work.bytes() + p.params.as_ref().map_or(0, |r| r.bytes()),
                        p.needed
                    );
                }
            }
        }
        // the 2^27 H MSM alone needs gigabytes at the resident tier (the old fixed 16-bit
        // window budgeted 0.95 GiB for it)
        let big = shape().msm_bytes(TierKind::Resident, 0, &MsmLimits::defaults(132));
        assert!(big > 8 * GIB, "{}", fmt_gib(big));
    }

    #[test]
    fn tiers_by_card_size_follow_the_sums() {
        let s = shape();
        let o = PlanOptions::default();
        for gib in [8u64, 12, 16, 24, 32, 48, 141] {
            let (_m, a) = card(gib * GIB);
            let avail = gib * GIB - SAFETY_MARGIN;
            match a.plan(&s, &o) {
                Ok(p) => {
                    assert!(p.needed <= avail);
                    // every better tier did not fit
                    for k in TierKind::ALL.into_iter().filter(|k| *k < p.tier.kind()) {
                        assert!(s.tier_bytes(k, false) > avail, "{gib} GiB: {k}");
                    }
                }
                Err(Error::OutOfDeviceMemory { needed, free, .. }) => {
                    assert_eq!(needed, s.min_bytes(TierKind::Resident, false));
                    assert_eq!(free, avail);
                    assert!(needed > avail);
                }
                Err(e) => panic!("{e}"),
            }
        }
        let (_m, a) = card(4 * GIB);
        assert!(matches!(
            a.plan(&s, &o),
            Err(Error::OutOfDeviceMemory { .. })
        ));
        let (_m, a) = card(H200_TOTAL);
        assert_eq!(a.plan(&s, &o).unwrap().tier, Tier::Resident);
    }

    #[test]
    fn arena_caps_allocations_and_records_its_high_water_mark() {
        let a = Arena::new(3, "partial", 10 * 256);
        let l1 = a.take(1000).unwrap(); // 1024 aligned
        assert_eq!(l1.bytes(), 1024);
        let l2 = a.take(1536).unwrap();
        assert_eq!(a.used(), 2560);
        match a.take(1) {
            Err(Error::OutOfDeviceMemory {
                device: 3,
                needed: 256,
                free: 0,
            }) => {}
            other => panic!("expected the arena's typed error, got {other:?}"),
        }
        drop(l1);
        let l3 = a.clone().take(768).unwrap();
        assert_eq!(a.high_water(), 2560);
        drop((l2, l3));
        assert_eq!(a.used(), 0);
        drop(a);
        let r = arena_records();
        assert!(r.iter().any(|r| r.device == 3
            && r.label == "partial"
            && r.capacity == 2560
            && r.high_water == 2560));
    }

    #[test]
    fn shape_from_counts_matches_bellperson_sizing() {
        let s = PartitionShape::from_counts(130_278_541, 328, 130_169_893, 129_800_000, 33_100_000)
            .unwrap();
        assert_eq!(s, shape());
        // exactly a power of two of rows stays at that power
        let s = PartitionShape::from_counts(1000, 24, 2000, 2024, 500).unwrap();
        assert_eq!((s.domain_log2, s.h_len, s.l_len), (10, 1023, 2000));
        assert_eq!(
            PartitionShape::from_counts(1025, 0, 10, 1, 1)
                .unwrap()
                .domain_log2,
            11
        );
        assert!(matches!(
            PartitionShape::from_counts(1 << 41, 1, 1, 1, 1),
            Err(Error::InvalidInput(_))
        ));
        assert!(matches!(
            PartitionShape::from_counts(10, 1, 5, 7, 1),
            Err(Error::InvalidInput(_))
        ));
    }

    #[test]
    fn tier_names_and_order() {
        assert_eq!(
            TierKind::ALL.map(|k| k.name()),
            ["resident", "full-staging", "partial", "streaming"]
        );
        assert_eq!(TierKind::Resident.lower(), Some(TierKind::FullStaging));
        assert_eq!(TierKind::Streaming.lower(), None);
        assert!(TierKind::Resident < TierKind::Streaming);
        let p = Tier::Partial {
            pass_points: 1 << 23,
        };
        assert_eq!((p.name(), p.pass_points()), ("partial", Some(1 << 23)));
        assert_eq!(p.to_string(), "partial (passes of 8388608 points)");
        let t = Tier::Streaming {
            chunk_points: 1 << 20,
            chunk_bytes: 432 << 20,
        };
        assert_eq!(t.name(), "streaming");
        assert_eq!(
            t.to_string(),
            "streaming (chunks of 1048576 points, 0.42 GiB)"
        );
    }

    #[test]
    fn h200_141gb_is_resident_and_params_split() {
        let (_m, a) = card(H200_TOTAL - 512 * MIB);
        let s = shape();
        let plan = a.plan(&s, &PlanOptions::default()).unwrap();
        assert_eq!(plan.tier, Tier::Resident);
        assert_eq!(plan.needed, s.tier_bytes(TierKind::Resident, false));
        let params = plan.params.as_ref().unwrap();
        assert_eq!(params.bytes(), s.params_bytes());
        assert_eq!(params.label(), "params");
        assert_eq!(plan.work.bytes(), s.tier_bytes(TierKind::Resident, true));
        assert_eq!(a.reserved_bytes(), plan.needed);
        assert_eq!(a.live_reservations(), 2);
        // keep the parameters, drop the partition's work: a second partition reuses them
        let Plan { work, params, .. } = plan;
        drop(work);
        let second = a
            .plan(
                &s,
                &PlanOptions {
                    params_resident: true,
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(second.tier, Tier::Resident);
        assert!(second.params.is_none());
        assert_eq!(second.needed, s.tier_bytes(TierKind::Resident, true));
        drop(second);
        drop(params);
        assert_eq!(a.reserved_bytes(), 0);
        assert_eq!(a.live_reservations(), 0);
    }

    #[test]
    fn vram_limit_emulates_a_16gib_card_on_h200() {
        let mem = Arc::new(FakeMemInfo::new(&[(H200_TOTAL, H200_TOTAL)]));
        let a = DeviceAllocator::new(0, mem, Some(16 * GIB));
        let s = shape();
        let p = a.plan(&s, &PlanOptions::default()).unwrap();
        assert_eq!(p.tier, tier_of(16 * GIB));
        assert_eq!(p.available, 16 * GIB - SAFETY_MARGIN);
        // the cap counts live reservations: what is left is 16 GiB - margin - Partial
        let left = 16 * GIB - SAFETY_MARGIN - p.needed;
        assert_eq!(a.available().unwrap(), left);
        match a.plan(&s, &PlanOptions::default()) {
            Err(Error::OutOfDeviceMemory { free, .. }) => assert_eq!(free, left),
            other => panic!("expected OOM, got {other:?}"),
        }
        assert!(a.reserve(left + 1, "x").is_err());
        let r = a.reserve(left, "x").unwrap();
        assert_eq!(a.available().unwrap(), 0);
        drop((p, r));
        assert_eq!(a.available().unwrap(), 16 * GIB - SAFETY_MARGIN);
    }

    #[test]
    fn the_backend_runs_the_plans_msm_pass() {
        // 2^27 under a 16 GiB cap plans `Partial` with 2^23-point passes; the GPU backend sizes
        // its base slots with `msm_pass_points`, so it must be that pass, not the default 2^24
        // (whose double-buffered G2 slots alone, 6 GiB, broke the plan before)
        let mem = Arc::new(FakeMemInfo::new(&[(H200_TOTAL, H200_TOTAL)]));
        let a = DeviceAllocator::new(0, mem, Some(16 * GIB));
        let s = shape();
        let p = a.plan(&s, &PlanOptions::default()).unwrap();
        assert_eq!(
            p.tier,
            Tier::Partial {
                pass_points: 1 << 23
            }
        );
        assert_eq!(p.tier.msm_pass_points(&s), 1 << 23);
        assert!(s.pass_points() > 1 << 23);
        let lim = MsmLimits::defaults(DEFAULT_SM_COUNT);
        assert!(s.partial_bytes(s.pass_points(), &lim) > p.needed);
        let t = Tier::Streaming {
            chunk_points: 1 << 20,
            chunk_bytes: 0,
        };
        assert_eq!(t.msm_pass_points(&s), 1 << 20);
        for t in [Tier::Resident, Tier::FullStaging] {
            assert_eq!(t.msm_pass_points(&s), s.pass_points());
        }
    }

    #[test]
    fn free_memory_is_read_at_every_plan() {
        let (mem, a) = card(24 * GIB);
        let s = shape();
        let o = PlanOptions::default();
        assert_eq!(a.plan(&s, &o).unwrap().tier, tier_of(24 * GIB));
        mem.set_free(0, 16 * GIB); // another process took 8 GiB
        assert_eq!(a.plan(&s, &o).unwrap().tier, tier_of(16 * GIB));
        mem.set_free(0, H200_TOTAL);
        assert_eq!(a.plan(&s, &o).unwrap().tier, Tier::Resident);
        assert_eq!(mem.calls(), 3);
        mem.set_failure(0, Some("CUDA_ERROR_LAUNCH_FAILED (719)"));
        assert!(matches!(a.plan(&s, &o), Err(Error::Cuda { device: 0, .. })));
        mem.set_failure(0, None);
        assert!(a.plan(&s, &o).is_ok());
    }

    #[test]
    fn two_workers_on_16gib_never_share_bytes() {
        let (mem, a) = card(16 * GIB);
        let s = shape();
        let o = PlanOptions::default();
        let first = a.plan(&s, &o).unwrap();
        assert_eq!(first.tier, tier_of(16 * GIB));
        // the second worker sees only what the first left: not even streaming fits
        let left = 16 * GIB - SAFETY_MARGIN - first.needed;
        match a.plan(&s, &o) {
            Err(Error::OutOfDeviceMemory { needed, free, .. }) => {
                assert_eq!(free, left);
                assert_eq!(needed, s.streaming_min_bytes());
            }
            other => panic!("expected OOM, got {other:?}"),
        }
        // the first worker allocates for real: the driver's free figure drops, and the
        // allocator stops counting those bytes as pending -> the same figure for worker 2
        mem.allocate(0, first.needed).unwrap();
        first.work.note_allocated(first.needed);
        assert_eq!(a.available().unwrap(), left);
        // frees before dropping: pending again, still the same figure
        first.work.note_freed(first.needed);
        mem.release(0, first.needed);
        assert_eq!(a.available().unwrap(), left);
        drop(first);
        assert_eq!(a.plan(&s, &o).unwrap().tier, tier_of(16 * GIB));
        assert_eq!(a.reserved_bytes(), 0);
    }

    #[test]
    fn concurrent_planners_on_16gib() {
        for _ in 0..20 {
            let (_m, a) = card(16 * GIB);
            let a = Arc::new(a);
            let barrier = Arc::new(Barrier::new(2));
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let (a, b) = (a.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        b.wait();
                        let r = a.plan(&shape(), &PlanOptions::default());
                        // hold the plan until both have planned
                        b.wait();
                        r.map(|p| p.tier)
                    })
                })
                .collect();
            let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            let ok: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
            assert_eq!(ok, vec![&tier_of(16 * GIB)], "{results:?}");
            assert!(results
                .iter()
                .any(|r| matches!(r, Err(Error::OutOfDeviceMemory { .. }))));
            assert_eq!(a.reserved_bytes(), 0);
        }
    }

    #[test]
    fn plan_wait_gets_the_bytes_when_the_other_worker_finishes() {
        let (_m, a) = card(16 * GIB);
        let a = Arc::new(a);
        let first = a.plan(&shape(), &PlanOptions::default()).unwrap();
        let a2 = a.clone();
        let t = std::thread::spawn(move || {
            a2.plan_wait(&shape(), &PlanOptions::default(), Duration::from_secs(10))
                .map(|p| p.tier)
        });
        std::thread::sleep(Duration::from_millis(30));
        drop(first);
        assert_eq!(t.join().unwrap().unwrap(), tier_of(16 * GIB));
        // and a timeout returns the OOM error
        let _held = a.plan(&shape(), &PlanOptions::default()).unwrap();
        let t0 = Instant::now();
        let r = a.plan_wait(
            &shape(),
            &PlanOptions::default(),
            Duration::from_millis(120),
        );
        assert!(matches!(r, Err(Error::OutOfDeviceMemory { .. })));
        assert!(t0.elapsed() >= Duration::from_millis(120));
    }

    #[test]
    fn reservations_return_on_drop_and_on_panic() {
        let (_m, a) = card(24 * GIB);
        let baseline = a.available().unwrap();
        for _ in 0..100 {
            let p = a.plan(&shape(), &PlanOptions::default()).unwrap();
            p.work.note_allocated(GIB);
            let r = a.reserve(GIB, "extra").unwrap();
            assert_eq!(a.live_reservations(), 2);
            drop((p, r));
        }
        assert_eq!(a.available().unwrap(), baseline);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _p = a.plan(&shape(), &PlanOptions::default()).unwrap();
            let _r = a.reserve(GIB, "extra").unwrap();
            panic!("kernel failed");
        }));
        assert!(r.is_err());
        assert_eq!((a.reserved_bytes(), a.live_reservations()), (0, 0));
        // a panicking thread, too
        let a = Arc::new(a);
        let a2 = a.clone();
        let j = std::thread::spawn(move || {
            let _p = a2.plan(&shape(), &PlanOptions::default()).unwrap();
            panic!("worker died");
        });
        assert!(j.join().is_err());
        assert_eq!(a.reserved_bytes(), 0);
        assert_eq!(a.available().unwrap(), baseline);
        assert!(a.peak_reserved_bytes() >= shape().tier_bytes(TierKind::FullStaging, false));
    }

    /// On a small shape (the 32 GiB partition scaled to 2^20, the `check` of the batch example)
    /// `Resident` needs less than `Partial` (whose pass streams every base), so no cap alone
    /// forces `Partial`; starting there (`PlanOptions::start`, `Tuning::gpu_start_tier`)
    /// under the smallest cap that holds it does.
    #[test]
    fn a_start_tier_forces_partial_where_resident_needs_less() {
        let f = 1.0 / 128.0;
        let s = PartitionShape::from_counts(
            (130_278_541.0 * f) as u64,
            328,
            (130_169_893.0 * f) as u64,
            (129_125_984.0 * f) as u64,
            (34_496_670.0 * f) as u64,
        )
        .unwrap();
        assert_eq!(s.domain_log2, 20);
        assert!(s.tier_bytes(TierKind::Resident, false) < s.tier_bytes(TierKind::Partial, false));
        let cap = SAFETY_MARGIN + s.tier_bytes(TierKind::Partial, false) + MIB;
        let a = DeviceAllocator::new(
            0,
            Arc::new(FakeMemInfo::new(&[(4 * cap, 4 * cap)])),
            Some(cap),
        );
        assert_eq!(
            a.plan(&s, &PlanOptions::default()).unwrap().tier.kind(),
            TierKind::Resident
        );
        let start = PlanOptions {
            start: TierKind::Partial,
            ..PlanOptions::default()
        };
        assert_eq!(a.plan(&s, &start).unwrap().tier.kind(), TierKind::Partial);
    }

    /// B_G2 has 130 M scalars but 33.1 M points: planned with m up to n it would size its
    /// bucket list (and, below the chain cap, its batch-affine chain states) for 130 M scalars,
    /// over 1 GiB more at 2^27.
    #[test]
    fn the_b_g2_msm_is_planned_at_its_points_not_its_scalars() {
        use crate::gpu::memory::layout::{msm_workspace_slots, MsmSizes};
        let s = PartitionShape::porep_32gib();
        let [_, _, g2] = s.resident_msms();
        assert_eq!((g2.n, g2.max_m), (s.num_aux, s.b_g2_len));
        let lim = MsmLimits::defaults(DEFAULT_SM_COUNT);
        let loose = MsmShape { max_m: g2.n, ..g2 };
        let tight = msm_workspace_bytes(&[g2], &lim).unwrap();
        assert!(msm_workspace_bytes(&[loose], &lim).unwrap() > tight + GIB);
        // the bound covers every m the MSM can meet (at most b_g2_len set bits)
        let bound = msm_workspace_slots(&[g2], &lim).unwrap();
        for m in [1, s.b_g2_len / 3, s.b_g2_len - 1, s.b_g2_len] {
            let z = MsmSizes::new(&g2, m, s.b_g2_len - m, &lim).unwrap();
            for (i, (&b, &x)) in bound.iter().zip(&z.slots).enumerate() {
                assert!(x <= b, "m {m} slot {i}: {x} > {b}");
            }
        }
    }

    #[test]
    fn a_16gib_card_gets_the_partial_tier_at_2_27_with_a_smaller_pass() {
        // The 2^24 pass (4.9 GiB workspace + 6 GiB of base slots) does not fit next to the 8 GiB
        // of d_a and the shared b/c buffer; the 2^23 pass does, and the H step stays on the GPU.
        let s = shape();
        let lim = MsmLimits::defaults(DEFAULT_SM_COUNT);
        assert!(s.tier_bytes(TierKind::Partial, false) > 16 * GIB - SAFETY_MARGIN);
        for (free, cap) in [(16 * GIB, None), (H200_TOTAL, Some(16 * GIB))] {
            let mem = Arc::new(FakeMemInfo::new(&[(free, free)]));
            let a = DeviceAllocator::new(0, mem, cap);
            let p = a.plan(&s, &PlanOptions::default()).unwrap();
            assert_eq!(
                p.tier,
                Tier::Partial {
                    pass_points: 1 << 23
                },
                "{}",
                p.tier
            );
            assert_eq!(p.needed, s.partial_bytes(1 << 23, &lim));
            assert!(p.needed <= 16 * GIB - SAFETY_MARGIN);
            assert!(
                p.work.bytes() >= (3 * 32) << 27,
                "room for the device H step"
            );
        }
        // the passes tried: 2^24, 2^23, …, 2^16
        let passes: Vec<u64> = s.partial_passes().collect();
        assert_eq!(passes.first(), Some(&(1 << 24)));
        assert_eq!(passes.last(), Some(&(1 << 16)));
        assert_eq!(passes.len(), 9);
        // a card where no partial pass leaves room for the H step streams
        let (_m, a) = card(12 * GIB);
        assert_eq!(
            a.plan(&s, &PlanOptions::default()).unwrap().tier.kind(),
            TierKind::Streaming
        );
    }

    #[test]
    fn small_shape_tiers_and_oom_figure() {
        // 2 KiB-like partition: the streaming chunk is the whole MSM; Resident (7.3 MB of
        // parameters) needs more than Streaming (its H side holds z and the SpMV's blocks)
        let s = PartitionShape::from_counts(30_000, 2, 20_000, 19_000, 5_000).unwrap();
        assert_eq!(s.domain_log2, 15);
        assert_eq!(s.pass_points(), 32_767);
        assert_eq!(s.min_chunk_points(), 32_767);
        let resident = s.tier_bytes(TierKind::Resident, false);
        assert!(resident > s.streaming_min_bytes() && resident < 64 << 20);
        assert_eq!(s.min_bytes(TierKind::Resident, false), s.streaming_min_bytes());
        assert_eq!(
            s.min_bytes(TierKind::FullStaging, false),
            s.streaming_min_bytes()
        );
        assert_eq!(
            shape().min_bytes(TierKind::Resident, false),
            shape().streaming_min_bytes()
        );
        let (_m, a) = card(SAFETY_MARGIN + resident);
        let p = a.plan(&s, &PlanOptions::default()).unwrap();
        assert_eq!(p.tier, Tier::Resident);
        drop(p);
        // a card that holds less takes the tiers below
        let (_m, a) = card(SAFETY_MARGIN + s.streaming_min_bytes());
        let p = a.plan(&s, &PlanOptions::default()).unwrap();
        assert_eq!(p.tier.kind(), TierKind::Streaming);
        let start = PlanOptions {
            start: TierKind::Streaming,
            params_resident: false,
            ..PlanOptions::default()
        };
        drop(p);
        let p = a.plan(&s, &start).unwrap();
        assert_eq!(
            p.tier,
            Tier::Streaming {
                chunk_points: 32_767,
                chunk_bytes: s.msm_bytes(
                    TierKind::Streaming,
                    32_767,
                    &MsmLimits::defaults(DEFAULT_SM_COUNT)
                )
            }
        );
        drop(p);
        let resident_only = PlanOptions {
            gpu_h_step: true,
            ..PlanOptions::default()
        };
        let (_m, a) = card(SAFETY_MARGIN + s.streaming_min_bytes() - 1);
        assert!(matches!(
            a.plan(&s, &resident_only),
            Err(Error::OutOfDeviceMemory { needed, .. }) if needed == s.streaming_min_bytes()
        ));
        let (_m, a) = card(SAFETY_MARGIN + s.streaming_min_bytes() - 1);
        assert!(matches!(
            a.plan(&s, &start),
            Err(Error::OutOfDeviceMemory { needed, .. }) if needed == s.streaming_min_bytes()
        ));
    }

    #[test]
    fn the_32gib_partition_plans_what_is_live_at_once() {
        let s = shape();
        let lim = MsmLimits::defaults(DEFAULT_SM_COUNT);
        // H side: three domain buffers and z (16.0 GiB), two and the check's block (12.1 GiB)
        let (h3, h2) = (
            s.h_side_bytes(TierKind::FullStaging),
            s.h_side_bytes(TierKind::Partial),
        );
        assert!(h3 > 15 * GIB && h3 < 17 * GIB, "{}", fmt_gib(h3));
        assert!(h2 > 11 * GIB && h2 < 13 * GIB, "{}", fmt_gib(h2));
        // Resident: h, aux and the whole-length workspace (23.0 GiB), not d_a, d_b, d_c beside
        // the workspace (27.1 GiB): the parameters, the circuit and one partition fit an
        // 80 GB card (78.16 GiB after the margin)
        let resident = s.tier_bytes_with(TierKind::Resident, true, &lim);
        assert!(resident < 23 * GIB, "{}", fmt_gib(resident));
        assert!(s.params_bytes() + resident + 7 * GIB < 78 * GIB);
        // a 16 GiB card: Partial with 2^23-point passes (13.6 GiB); 24 GiB: full staging
        assert_eq!(tier_of(16 * GIB), Tier::Partial { pass_points: 1 << 23 });
        assert_eq!(tier_of(24 * GIB), Tier::FullStaging);
        // the largest of the two sides, whatever the pass
        for p in [1u64 << 24, 1 << 23, 1 << 20] {
            assert_eq!(
                s.partial_bytes(p, &lim),
                h2.max(s.msm_side_bytes(TierKind::Partial, p, &lim))
            );
        }
        // a partition that waits while others hold memory never takes Streaming (H on the CPU)
        // (half a 16 GiB card held by another partition)
        let (_m, a) = card(16 * GIB);
        let first = a.reserve(8 * GIB, "other").unwrap();
        assert_eq!(
            a.plan(&s, &PlanOptions::default()).unwrap().tier.kind(),
            TierKind::Streaming
        );
        let waiting = PlanOptions {
            gpu_h_step: true,
            ..PlanOptions::default()
        };
        assert!(matches!(
            a.plan(&s, &waiting),
            Err(Error::OutOfDeviceMemory { .. })
        ));
        drop(first);
        assert_eq!(a.plan(&s, &waiting).unwrap().tier.kind(), TierKind::Partial);

        // An 80 GB card (80,550 MiB free) with the circuit kept: one partition with the
        // parameters resident fits; while another holds full staging, the next waits for the
        // resident tier instead of taking full staging too
        let (_m, a) = card(80_550 * MIB);
        let _circuit = a.reserve(6_840 * MIB, "circuit").unwrap();
        let o = PlanOptions::default();
        let other = a.plan(&s, &PlanOptions { start: TierKind::FullStaging, ..o }).unwrap();
        assert_eq!(other.tier, Tier::FullStaging);
        assert_eq!(a.plan(&s, &o).unwrap().tier, Tier::FullStaging);
        let best = a.tier_if_freed(&s, &o, other.work.bytes()).unwrap();
        assert_eq!(best, Some(TierKind::Resident));
        let waiting = PlanOptions {
            gpu_h_step: true,
            worst: TierKind::Resident,
            ..o
        };
        assert!(matches!(
            a.plan(&s, &waiting),
            Err(Error::OutOfDeviceMemory { .. })
        ));
        drop(other);
        let p = a.plan(&s, &waiting).unwrap();
        assert_eq!(p.tier, Tier::Resident);
        assert!(p.params.is_some());
    }
}
