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
//! the 32 GiB PoRep partition, n = 2^27, in parentheses):
//!
//! | tier | device memory |
//! |---|---|
//! | [`Tier::Resident`] | parameters (44.1 GiB, unless already resident) + d_a, d_b, d_c (3·n·32 B = 12 GiB) + one MSM pass over resident bases (≈ 0.95 GiB) |
//! | [`Tier::FullStaging`] | d_a, d_b, d_c (12 GiB) + one MSM pass with double-buffered streamed bases (≈ 6.95 GiB) |
//! | [`Tier::Partial`] | d_a + one buffer shared by b and c (2·n·32 B = 8 GiB) + the same MSM pass (≈ 6.95 GiB) |
//! | [`Tier::Streaming`] | one domain buffer (n·32 B = 4 GiB) + an MSM chunk that fits (≥ 2^16 points, ≈ 0.23 GiB with the buckets) |
//! | — | [`Error::OutOfDeviceMemory`] with the smallest tier's bytes ([`PartitionShape::min_bytes`]) as `needed` |
//!
//! So at 2^27 a 141 GB card gets `Resident`, 24 GiB `FullStaging`, 16 GiB `Partial`, 8 GiB
//! `Streaming`, 4 GiB the error. The per-point and bucket figures are the constants below
//! ([`FR_BYTES`], [`G1_AFFINE_BYTES`], [`G2_AFFINE_BYTES`], [`MSM_SCRATCH_BYTES_PER_POINT`],
//! [`MSM_BUCKET_BYTES`], [`MSM_PASS_POINTS`]); the GPU code sizes its buffers with the same
//! functions ([`msm_pass_bytes`], [`PartitionShape::staging_bytes`]) so plan and allocation agree.
//!
//! # Usage (host side of one partition)
//! ```
//! use std::sync::Arc;
//! use cuzk::gpu::alloc::{DeviceAllocator, FakeMemInfo, PartitionShape, PlanOptions, Tier, GIB};
//!
//! let mem = Arc::new(FakeMemInfo::new(&[(16 * GIB, 16 * GIB)]));
//! let alloc = DeviceAllocator::new(0, mem, None);
//! let plan = alloc.plan(&PartitionShape::porep_32gib(), &PlanOptions::default()).unwrap();
//! assert_eq!(plan.tier, Tier::Partial);
//! // ... cuMemAlloc the buffers, then plan.work.note_allocated(bytes) ...
//! drop(plan); // bytes return to the budget
//! assert_eq!(alloc.reserved_bytes(), 0);
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// One mebibyte (2^20 bytes).
pub const MIB: u64 = 1 << 20;
/// One gibibyte (2^30 bytes).
pub const GIB: u64 = 1 << 30;

/// Device memory that always stays free, in bytes (512 MiB): room for the CUDA context's own
/// growth, cuBLAS-style library workspaces and other processes' small allocations.
pub const SAFETY_MARGIN: u64 = 512 << 20;

/// Bytes of one BLS12-381 scalar-field element (`Fr`, 4 × 64-bit limbs, Montgomery form).
pub const FR_BYTES: u64 = 32;
/// Bytes of one G1 affine point as stored on the device (x, y in `Fp`, 2 × 48 B).
pub const G1_AFFINE_BYTES: u64 = 96;
/// Bytes of one G2 affine point as stored on the device (x, y in `Fp2`, 2 × 96 B).
pub const G2_AFFINE_BYTES: u64 = 192;
/// Bytes of one G1 bucket accumulator in XYZZ coordinates (4 × 48 B).
pub const G1_XYZZ_BYTES: u64 = 192;
/// Bytes of one G2 bucket accumulator in XYZZ coordinates (4 × 96 B).
pub const G2_XYZZ_BYTES: u64 = 384;

/// Pippenger window width in bits used for the bucket estimate (signed digits).
pub const MSM_WINDOW_BITS: u64 = 16;
/// Number of windows for a 255-bit scalar with signed digits of [`MSM_WINDOW_BITS`] bits:
/// ⌈255 / 16⌉ + 1 (the carry of the last window) = 17.
pub const MSM_WINDOWS: u64 = 255_u64.div_ceil(MSM_WINDOW_BITS) + 1;
/// Upper bound on the bucket memory of one MSM, in bytes: every window's 2^(c−1) signed-digit
/// buckets held at once as G2 XYZZ points (the larger group):
/// 17 × 32768 × 384 B = 213,909,504 B (204 MiB). G1 MSMs use half of it.
pub const MSM_BUCKET_BYTES: u64 = MSM_WINDOWS * (1 << (MSM_WINDOW_BITS - 1)) * G2_XYZZ_BYTES;
/// Per-point scratch of one MSM pass, in bytes: a u32 bucket key and a u32 point index for the
/// window being sorted, doubled for the radix sort's ping-pong buffers (16 B).
pub const MSM_SCRATCH_BYTES_PER_POINT: u64 = 16;
/// Points processed by one on-device MSM pass in the non-streaming tiers (2^24). An MSM longer
/// than this runs in several passes whose partial sums are added.
pub const MSM_PASS_POINTS: u64 = 1 << 24;
/// Granularity and minimum of a streaming chunk, in points (2^16).
pub const MSM_CHUNK_ALIGN_POINTS: u64 = 1 << 16;
/// Largest NTT domain the planner accepts (2^40 points); larger shapes are
/// [`Error::InvalidInput`].
pub const MAX_DOMAIN_LOG2: u32 = 40;

/// Where an MSM's bases live during a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bases {
    /// Already in device memory (the [`Tier::Resident`] parameters): no base buffers per pass.
    Resident,
    /// Uploaded per pass from (pinned) host memory into two buffers (double-buffered), sized for
    /// the larger G2 points.
    Streamed,
}

/// Device bytes one point of an MSM pass costs: its scalar ([`FR_BYTES`]), its sort scratch
/// ([`MSM_SCRATCH_BYTES_PER_POINT`]) and, when bases are streamed, two G2 affine slots
/// (double buffering). 48 B resident, 432 B streamed.
pub const fn msm_point_bytes(bases: Bases) -> u64 {
    FR_BYTES
        + MSM_SCRATCH_BYTES_PER_POINT
        + match bases {
            Bases::Resident => 0,
            Bases::Streamed => 2 * G2_AFFINE_BYTES,
        }
}

/// Device bytes of one MSM pass over `points` points: `points × msm_point_bytes(bases)` plus
/// the bucket memory [`MSM_BUCKET_BYTES`]. E.g. 2^24 streamed points: 6.75 GiB + 204 MiB.
pub const fn msm_pass_bytes(points: u64, bases: Bases) -> u64 {
    points
        .saturating_mul(msm_point_bytes(bases))
        .saturating_add(MSM_BUCKET_BYTES)
}

/// Formats a byte count as GiB with two decimals (`"12.00 GiB"`), for messages and reports.
pub fn fmt_gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / GIB as f64)
}

/// Source of a device's free and total memory: the CUDA implementation (in `gpu::device`)
/// calls `cuMemGetInfo` with the device's context current; tests use [`FakeMemInfo`].
pub trait MemInfo: Send + Sync {
    /// Returns `(free, total)` bytes of device ordinal `device`, as the driver reports them now.
    ///
    /// # Errors
    /// [`Error::Cuda`] when the driver call fails, [`Error::NoDevice`] for an unknown ordinal.
    fn mem_get_info(&self, device: usize) -> Result<(u64, u64)>;
}

#[derive(Clone, Debug)]
struct FakeDevice {
    free: u64,
    total: u64,
    fail: Option<String>,
    sticky: bool,
}

/// A [`MemInfo`] for tests: per-device `(free, total)` figures that a test can change at any
/// time, with simulated `cuMemAlloc`/`cuMemFree` ([`FakeMemInfo::allocate`],
/// [`FakeMemInfo::release`]) and injected driver failures. Counts its calls so tests can check
/// that free memory is read at every reservation.
#[derive(Debug, Default)]
pub struct FakeMemInfo {
    devices: Mutex<Vec<FakeDevice>>,
    calls: AtomicU64,
}

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
        })
    }

    /// The 32 GiB PoRep partition: 130,278,541 constraints without the 328 input constraints
    /// (130,278,869 with them), 328 inputs,
    /// 130,169,893 aux, domain 2^27, A 129.8 M and B 33.1 M points (rounded to 0.1 M).
    /// Parameters 44.1 GiB.
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
        }
    }

    /// NTT domain size n = 2^`domain_log2` (points).
    pub fn domain_size(&self) -> u64 {
        1u64 << self.domain_log2.min(63)
    }

    /// Bytes of the Groth16 parameters' MSM bases on the device:
    /// `(h + l + a + b_g1) × 96 + b_g2 × 192` (44.1 GiB at 32 GiB sectors).
    pub fn params_bytes(&self) -> u64 {
        let g1 = self.h_len + self.l_len + self.a_len + self.b_g1_len;
        g1.saturating_mul(G1_AFFINE_BYTES)
            .saturating_add(self.b_g2_len.saturating_mul(G2_AFFINE_BYTES))
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

    /// Points of one MSM pass in the non-streaming tiers: `min(MSM_PASS_POINTS, max_msm_len)`,
    /// at least 1.
    pub fn pass_points(&self) -> u64 {
        MSM_PASS_POINTS.min(self.max_msm_len()).max(1)
    }

    /// Bytes of the H-step buffers of a tier (n = [`Self::domain_size`], [`FR_BYTES`] each):
    /// `Resident`/`FullStaging` 3·n·32 (d_a + d_bc, 12 GiB at 2^27); `Partial` 2·n·32 (d_a +
    /// one buffer b and c take in turn, 8 GiB); `Streaming` n·32 (one domain buffer; a and b
    /// stream through the MSM chunk for the pointwise step, 4 GiB).
    pub fn staging_bytes(&self, kind: TierKind) -> u64 {
        let buffers = match kind {
            TierKind::Resident | TierKind::FullStaging => 3,
            TierKind::Partial => 2,
            TierKind::Streaming => 1,
        };
        self.domain_size()
            .saturating_mul(FR_BYTES)
            .saturating_mul(buffers)
    }

    /// Total device bytes of a tier. `params_resident`: the parameters are already on the
    /// device (held by an earlier plan's [`Plan::params`]), so `Resident` needs no parameter
    /// bytes. For `Streaming` this is the largest chunk ([`Self::pass_points`] points); the
    /// smallest is [`Self::streaming_min_bytes`].
    pub fn tier_bytes(&self, kind: TierKind, params_resident: bool) -> u64 {
        let staging = self.staging_bytes(kind);
        let pass = self.pass_points();
        match kind {
            TierKind::Resident => {
                let params = if params_resident {
                    0
                } else {
                    self.params_bytes()
                };
                params
                    .saturating_add(staging)
                    .saturating_add(msm_pass_bytes(pass, Bases::Resident))
            }
            _ => staging.saturating_add(msm_pass_bytes(pass, Bases::Streamed)),
        }
    }

    /// Smallest streaming chunk, in points: [`MSM_CHUNK_ALIGN_POINTS`], or the whole longest MSM
    /// when it is shorter.
    pub fn min_chunk_points(&self) -> u64 {
        MSM_CHUNK_ALIGN_POINTS.min(self.pass_points())
    }

    /// Device bytes of `Streaming` with [`Self::min_chunk_points`] — the smallest tier for
    /// large shapes (see [`Self::min_bytes`]).
    pub fn streaming_min_bytes(&self) -> u64 {
        self.staging_bytes(TierKind::Streaming)
            .saturating_add(msm_pass_bytes(self.min_chunk_points(), Bases::Streamed))
    }

    /// Fewest device bytes any tier from `start` down can run in: the `needed` figure of
    /// [`Error::OutOfDeviceMemory`]. Usually [`Self::streaming_min_bytes`]; for small shapes
    /// (parameters smaller than the streamed base buffers) `Resident` may need less.
    pub fn min_bytes(&self, start: TierKind, params_resident: bool) -> u64 {
        TierKind::ALL
            .into_iter()
            .filter(|k| *k >= start)
            .map(|k| match k {
                TierKind::Streaming => self.streaming_min_bytes(),
                k => self.tier_bytes(k, params_resident),
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
        match self {
            TierKind::Resident => Some(TierKind::FullStaging),
            TierKind::FullStaging => Some(TierKind::Partial),
            TierKind::Partial => Some(TierKind::Streaming),
            TierKind::Streaming => None,
        }
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
    Partial,
    /// One domain buffer; MSM bases and scalars streamed in chunks.
    Streaming {
        /// Points per chunk (a multiple of [`MSM_CHUNK_ALIGN_POINTS`] unless the whole MSM is
        /// shorter).
        chunk_points: u64,
        /// Device bytes of one chunk's buffers: `chunk_points × msm_point_bytes(Streamed)`
        /// (scalars, sort scratch, two base slots), without the buckets.
        chunk_bytes: u64,
    },
}

impl Tier {
    /// The tier's kind.
    pub fn kind(&self) -> TierKind {
        match self {
            Tier::Resident => TierKind::Resident,
            Tier::FullStaging => TierKind::FullStaging,
            Tier::Partial => TierKind::Partial,
            Tier::Streaming { .. } => TierKind::Streaming,
        }
    }

    /// Stable short name (the kind's): `resident`, `full-staging`, `partial`, `streaming`.
    pub fn name(&self) -> &'static str {
        self.kind().name()
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
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            start: TierKind::Resident,
            params_resident: false,
        }
    }
}

/// What one partition may use on one device: the tier and its reserved bytes. Dropping the plan
/// (or its reservations) returns the bytes to the budget.
#[derive(Debug)]
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
            shared: Arc::new(Shared {
                device,
                ledger: Mutex::new(Ledger::default()),
                released: Condvar::new(),
            }),
        }
    }

    /// CUDA device ordinal.
    pub fn device(&self) -> usize {
        self.device
    }

    /// The cap in bytes, if any.
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
    pub fn live_reservations(&self) -> usize {
        lock(&self.shared.ledger).live
    }

    /// Highest total of simultaneous reservations seen so far, in bytes.
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

    fn plan_locked(
        &self,
        l: &mut Ledger,
        shape: &PartitionShape,
        opts: &PlanOptions,
    ) -> Result<Plan> {
        let snap = self.snapshot_locked(l)?;
        let avail = snap.available;
        for kind in TierKind::ALL.into_iter().filter(|k| *k >= opts.start) {
            let (tier, needed) = if kind == TierKind::Streaming {
                let fixed = shape.staging_bytes(kind).saturating_add(MSM_BUCKET_BYTES);
                let per_point = msm_point_bytes(Bases::Streamed);
                let fit = avail.saturating_sub(fixed) / per_point;
                let max = shape.pass_points();
                let points = if fit >= max {
                    max
                } else {
                    fit / MSM_CHUNK_ALIGN_POINTS * MSM_CHUNK_ALIGN_POINTS
                };
                if points == 0 || points < shape.min_chunk_points() || fixed > avail {
                    continue;
                }
                let chunk_bytes = points * per_point;
                (
                    Tier::Streaming {
                        chunk_points: points,
                        chunk_bytes,
                    },
                    fixed + chunk_bytes,
                )
            } else {
                let needed = shape.tier_bytes(kind, opts.params_resident);
                if needed > avail {
                    continue;
                }
                let tier = match kind {
                    TierKind::Resident => Tier::Resident,
                    TierKind::FullStaging => Tier::FullStaging,
                    _ => Tier::Partial,
                };
                (tier, needed)
            };
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
            needed: shape.min_bytes(opts.start, opts.params_resident),
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

    #[test]
    fn constants_and_formulas() {
        assert_eq!(MSM_WINDOWS, 17);
        assert_eq!(MSM_BUCKET_BYTES, 213_909_504);
        assert_eq!(msm_point_bytes(Bases::Resident), 48);
        assert_eq!(msm_point_bytes(Bases::Streamed), 432);
        assert_eq!(
            msm_pass_bytes(1 << 24, Bases::Streamed),
            (1 << 24) * 432 + 213_909_504
        );
        let s = shape();
        assert_eq!(s.domain_size(), 1 << 27);
        assert_eq!(s.staging_bytes(TierKind::FullStaging), 12 * GIB);
        assert_eq!(s.staging_bytes(TierKind::Partial), 8 * GIB);
        assert_eq!(s.staging_bytes(TierKind::Streaming), 4 * GIB);
        // (2^27-1 + 130,169,893 + 129.8M + 33.1M) * 96 + 33.1M * 192
        let params =
            ((1u64 << 27) - 1 + 130_169_893 + 129_800_000 + 33_100_000) * 96 + 33_100_000 * 192;
        assert_eq!(s.params_bytes(), params);
        assert!((s.params_bytes() as f64 / GIB as f64 - 44.1).abs() < 0.1);
        assert_eq!(s.pass_points(), 1 << 24);
        assert_eq!(
            s.tier_bytes(TierKind::FullStaging, false),
            12 * GIB + (1 << 24) * 432 + MSM_BUCKET_BYTES
        );
        assert_eq!(
            s.tier_bytes(TierKind::Partial, false),
            8 * GIB + (1 << 24) * 432 + MSM_BUCKET_BYTES
        );
        assert_eq!(
            s.tier_bytes(TierKind::Resident, true),
            12 * GIB + (1 << 24) * 48 + MSM_BUCKET_BYTES
        );
        assert_eq!(
            s.tier_bytes(TierKind::Resident, false),
            params + 12 * GIB + (1 << 24) * 48 + MSM_BUCKET_BYTES
        );
        assert_eq!(
            s.streaming_min_bytes(),
            4 * GIB + (1 << 16) * 432 + MSM_BUCKET_BYTES
        );
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
        assert_eq!(Tier::Partial.to_string(), "partial");
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
    fn tiers_by_card_size() {
        let s = shape();
        let o = PlanOptions::default();
        let (_m, a) = card(24 * GIB);
        assert_eq!(a.plan(&s, &o).unwrap().tier, Tier::FullStaging);
        let (_m, a) = card(16 * GIB);
        let p = a.plan(&s, &o).unwrap();
        assert_eq!(p.tier, Tier::Partial);
        assert_eq!(p.available, 16 * GIB - SAFETY_MARGIN);
        assert_eq!(p.needed, 8 * GIB + (1 << 24) * 432 + MSM_BUCKET_BYTES);
        let (_m, a) = card(8 * GIB);
        let p = a.plan(&s, &o).unwrap();
        // 7.5 GiB available - 4 GiB domain - buckets = room for 8,204,136 streamed points,
        // aligned down to 2^16: 125 * 65536 = 8,192,000.
        let fit = (8 * GIB - SAFETY_MARGIN - 4 * GIB - MSM_BUCKET_BYTES) / 432;
        assert_eq!(fit, 8_204_136);
        let points = 125 * 65_536;
        assert_eq!(
            p.tier,
            Tier::Streaming {
                chunk_points: points,
                chunk_bytes: points * 432
            }
        );
        assert_eq!(p.needed, 4 * GIB + MSM_BUCKET_BYTES + points * 432);
        assert!(p.needed <= p.available);
        assert_eq!(p.work.bytes(), p.needed);
    }

    #[test]
    fn four_gib_card_is_out_of_memory_with_numbers() {
        let (_m, a) = card(4 * GIB);
        match a.plan(&shape(), &PlanOptions::default()) {
            Err(Error::OutOfDeviceMemory {
                device,
                needed,
                free,
            }) => {
                assert_eq!(device, 0);
                assert_eq!(needed, 4 * GIB + (1 << 16) * 432 + MSM_BUCKET_BYTES);
                assert_eq!(free, 4 * GIB - SAFETY_MARGIN);
            }
            other => panic!("expected OutOfDeviceMemory, got {other:?}"),
        }
        assert_eq!(a.reserved_bytes(), 0);
    }

    #[test]
    fn vram_limit_emulates_a_16gib_card_on_h200() {
        let mem = Arc::new(FakeMemInfo::new(&[(H200_TOTAL, H200_TOTAL)]));
        let a = DeviceAllocator::new(0, mem, Some(16 * GIB));
        let s = shape();
        let p = a.plan(&s, &PlanOptions::default()).unwrap();
        assert_eq!(p.tier, Tier::Partial);
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
    fn free_memory_is_read_at_every_plan() {
        let (mem, a) = card(24 * GIB);
        let s = shape();
        let o = PlanOptions::default();
        assert_eq!(a.plan(&s, &o).unwrap().tier, Tier::FullStaging);
        mem.set_free(0, 16 * GIB); // another process took 8 GiB
        assert_eq!(a.plan(&s, &o).unwrap().tier, Tier::Partial);
        mem.set_free(0, H200_TOTAL);
        assert_eq!(a.plan(&s, &o).unwrap().tier, Tier::Resident);
        assert_eq!(mem.calls(), 3);
        mem.set_failure(0, Some("CUDA_ERROR_LAUNCH_FAILED (719)"));
        assert!(matches!(a.plan(&s, &o), Err(Error::Cuda { device: 0, .. })));
        mem.set_failure(0, None);
        assert!(a.plan(&s, &o).is_ok());
    }

    #[test]
    fn start_tier_skips_better_tiers() {
        let (_m, a) = card(H200_TOTAL);
        let s = shape();
        let p = a
            .plan(
                &s,
                &PlanOptions {
                    start: TierKind::Partial,
                    params_resident: false,
                },
            )
            .unwrap();
        assert_eq!(p.tier, Tier::Partial);
        let p2 = a
            .plan(
                &s,
                &PlanOptions {
                    start: TierKind::Streaming,
                    params_resident: false,
                },
            )
            .unwrap();
        assert_eq!(
            p2.tier,
            Tier::Streaming {
                chunk_points: 1 << 24,
                chunk_bytes: (1 << 24) * 432
            }
        );
    }

    #[test]
    fn two_workers_on_16gib_never_share_bytes() {
        let (mem, a) = card(16 * GIB);
        let s = shape();
        let o = PlanOptions::default();
        let first = a.plan(&s, &o).unwrap();
        assert_eq!(first.tier, Tier::Partial);
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
        assert_eq!(a.plan(&s, &o).unwrap().tier, Tier::Partial);
        assert_eq!(a.reserved_bytes(), 0);
    }

    #[test]
    fn two_workers_on_24gib_second_gets_lower_tier() {
        let (_m, a) = card(24 * GIB);
        let s = shape();
        let o = PlanOptions::default();
        let first = a.plan(&s, &o).unwrap();
        assert_eq!(first.tier, Tier::FullStaging);
        let second = a.plan(&s, &o).unwrap();
        let left = 24 * GIB - SAFETY_MARGIN - first.needed;
        let points = (left - 4 * GIB - MSM_BUCKET_BYTES) / 432 / 65_536 * 65_536;
        assert_eq!(
            second.tier,
            Tier::Streaming {
                chunk_points: points,
                chunk_bytes: points * 432
            }
        );
        assert!(first.needed + second.needed <= 24 * GIB - SAFETY_MARGIN);
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
            assert_eq!(ok, vec![&Tier::Partial], "{results:?}");
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
        assert_eq!(t.join().unwrap().unwrap(), Tier::Partial);
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

    #[test]
    fn small_shape_tiers_and_oom_figure() {
        // 2 KiB-like partition: the streaming chunk is the whole MSM, and Resident (7.3 MB of
        // parameters) needs less than Streaming's double-buffered G2 slots
        let s = PartitionShape::from_counts(30_000, 2, 20_000, 19_000, 5_000).unwrap();
        assert_eq!(s.domain_log2, 15);
        assert_eq!(s.pass_points(), 32_767);
        assert_eq!(s.min_chunk_points(), 32_767);
        let resident = s.tier_bytes(TierKind::Resident, false);
        assert!(resident < s.streaming_min_bytes());
        assert_eq!(s.min_bytes(TierKind::Resident, false), resident);
        assert_eq!(
            s.min_bytes(TierKind::FullStaging, false),
            s.streaming_min_bytes()
        );
        assert_eq!(
            shape().min_bytes(TierKind::Resident, false),
            shape().streaming_min_bytes()
        );
        let (_m, a) = card(SAFETY_MARGIN + s.streaming_min_bytes());
        let p = a.plan(&s, &PlanOptions::default()).unwrap();
        assert_eq!(p.tier, Tier::Resident);
        let start = PlanOptions {
            start: TierKind::Streaming,
            params_resident: false,
        };
        drop(p);
        let p = a.plan(&s, &start).unwrap();
        assert_eq!(
            p.tier,
            Tier::Streaming {
                chunk_points: 32_767,
                chunk_bytes: 32_767 * 432
            }
        );
        drop(p);
        let (_m, a) = card(SAFETY_MARGIN + resident - 1);
        assert!(matches!(
            a.plan(&s, &PlanOptions::default()),
            Err(Error::OutOfDeviceMemory { needed, .. }) if needed == resident
        ));
        let (_m, a) = card(SAFETY_MARGIN + s.streaming_min_bytes() - 1);
        assert!(matches!(
            a.plan(&s, &start),
            Err(Error::OutOfDeviceMemory { needed, .. }) if needed == s.streaming_min_bytes()
        ));
    }
}
