//! Multi-scalar multiplication (MSM) on the GPU for BLS12-381 G1 and G2: `sum_j s_j * P_j`.
//!
//! The kernels are in `cuda/msm.cu` / `cuda/msm.cuh` (point arithmetic in `cuda/curve.cuh`).
//! Algorithm: Pippenger's bucket method (Pippenger, "On the evaluation of powers and related
//! problems", FOCS 1976) with signed c-bit windows, in the order the prover needs it:
//!
//! 1. **classify** (GPU): each scalar is brought to canonical form (from Montgomery form for
//!    [`blstrs::Scalar`], see [`Scalars`]); scalars equal to 0 are skipped, points whose scalar is 1
//!    are summed by a plain reduction, every other scalar goes to the Pippenger part. The PoRep
//!    witness is ~96 % zeros and ones, so this is most of the work saved. A density bitmap
//!    (bellperson's `DensityTracker`) selects which scalars are used: the i-th set bit pairs with
//!    the i-th point.
//! 2. **bucketing** (GPU): a counting sort of the (window, |digit|) keys (histogram with atomics,
//!    exclusive scan, scatter); the window size c is chosen from the number of such scalars m.
//!    Lists of at least `layout::TWO_PASS_MIN_LIST` entries scatter in two passes (by coarse
//!    bin into a staging buffer, a group of `layout::TWO_PASS_GROUP_WINDOWS` windows at a time,
//!    then by key with shared-memory cursors), which keeps the stores of the blocks in flight
//!    within the L2 (cuda/msm.cuh 2'; H200 G1 2^27: 141 ms instead of 172).
//! 3. **accumulation** (GPU): the sorted list is cut into equal segments, one per thread, so that
//!    the load does not depend on how the scalars fall into buckets; runs that cross a segment
//!    border are finished by a second, much smaller pass (repeated until one segment is left).
//! 4. **window sums** (GPU): `sum_b b * B_b` per window by chunked running sums and a tree.
//! 5. **combination** (host, blstrs): `sum_w 2^(c w) W_w + ones` by c doublings per window.
//!
//! Streamed bases (passes of points uploaded in turn, `prover::gpu`) may gather instead: each
//! pass sums its ones and copies its other scalars and their points into a [`GatherSink`]
//! (`cuzk_msm_gather`), and one MSM over the sink replaces steps 2–5 of every pass.
//!
//! Only one host/device synchronisation happens inside an MSM: the two counts of step 1 are read
//! back to size the later launches (on this MSM's own stream, never the whole device). The result
//! is read after an event, see [`MsmWorkspace::start`] / [`MsmWorkspace::finish`]: the
//! host-side combination of one MSM overlaps the GPU work of the next (two result slots).
//!
//! Speed (H200, points and scalars resident, uniform scalars; BENCHMARKS.md, 2026-12-03): G1
//! 2^22 in 46 ms, 2^23 in 76 ms, 2^24 in 118 ms, 2^26 in 0.40 s, 2^27 in 0.79 s (batch-affine
//! accumulation from 2^26 list entries); G2 2^22 in 93 ms, 2^24 in 0.31 s (batch-affine from
//! 2^25 entries). The limiter is the bucket accumulation (76 % at 2^26).
//!
//! Memory (bytes, n scalars, m of them neither 0 nor 1, W windows, B = 2^(c-1) buckets per
//! window, X = 192 (G1) or 384 (G2) bytes per XYZZ point): 4n (rest/ones indices) + n/8 x 2
//! (density) + min(m W, list cap) x 4 (bucket list) + (W B + 1) x (X + 8) (buckets, counts,
//! cursors; X + 4 with the two-pass scatter) + small partial buffers; the two-pass scatter's
//! staging buffer adds 8 B per scalar and window of a group, the batch-affine chain states
//! 260 B (G1) or 500 B (G2) per chain (exactly: `layout::MsmSizes`); plus the scalars (32n) and points (96 / 192
//! per point) when they are uploaded from the host. Buffers are kept by the [`MsmWorkspace`]
//! for reuse and freed when it is dropped.

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::Group;

use crate::error::{Error, Result};
use crate::gpu::driver::device::{
    Device, DeviceBuffer, DeviceRepr, DeviceSlice, Event, KernelArgs, Stream,
};
use crate::gpu::memory::alloc::Arena;
use crate::gpu::memory::layout::{
    self, GroupLayout, MsmLimits, MsmShape, MsmSizes, AFFINE_THREADS, G1_LAYOUT, G2_LAYOUT,
};
pub use crate::gpu::memory::layout::{Accumulation, AffineShape, TwoPass};

/// A scalar in canonical (non-Montgomery) form: four little-endian 64-bit limbs, the integer
/// value (e.g. `u64s_from_bytes(scalar.to_repr())`). Values `>= r` are reduced modulo r on the
/// device.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CanonicalScalar(pub [u64; 4]);

// SAFETY: four plain integers; every bit pattern is a valid value.
unsafe impl DeviceRepr for CanonicalScalar {}

impl CanonicalScalar {
    /// The canonical integer of a [`blstrs::Scalar`] (`to_repr`, little-endian bytes -> limbs).
    #[cfg(any(test, feature = "internals"))]
    pub fn from_scalar(s: &Scalar) -> Self {
        let b = ff::PrimeField::to_repr(s);
        let mut l = [0u64; 4];
        for (i, limb) in l.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[8 * i..8 * i + 8]);
            *limb = u64::from_le_bytes(w);
        }
        CanonicalScalar(l)
    }
}

/// The scalars of an MSM.
#[derive(Clone, Copy)]
// The prover passes device scalars only; tests and benches use the others.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub enum Scalars<'a> {
    /// `blstrs::Scalar` values in host memory (Montgomery form; converted on the device).
    Host(&'a [Scalar]),
    /// `blstrs::Scalar` values already on the device (e.g. the H polynomial after the NTT).
    Device(DeviceSlice<'a, Scalar>),
    /// Canonical integers in host memory.
    HostCanonical(&'a [CanonicalScalar]),
    /// Canonical integers on the device.
    DeviceCanonical(DeviceSlice<'a, CanonicalScalar>),
}

impl Scalars<'_> {
    fn len(&self) -> usize {
        match self {
            Scalars::Host(s) => s.len(),
            Scalars::Device(s) => s.len(),
            Scalars::HostCanonical(s) => s.len(),
            Scalars::DeviceCanonical(s) => s.len(),
        }
    }
    fn montgomery(&self) -> bool {
        matches!(self, Scalars::Host(_) | Scalars::Device(_))
    }
}

/// The bases of an MSM: affine points in blst layout (`blstrs::G1Affine` / `G2Affine`).
// The prover passes resident points only; tests and benches upload theirs (`Host`).
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub enum Points<'a, A: DeviceRepr> {
    /// Points in host memory: uploaded for this MSM (synchronous copy).
    Host(&'a [A]),
    /// Points resident on the device (uploaded once, e.g. the parameters).
    Device(DeviceSlice<'a, A>),
}

impl<A: DeviceRepr> Points<'_, A> {
    fn len(&self) -> usize {
        match self {
            Points::Host(p) => p.len(),
            Points::Device(p) => p.len(),
        }
    }
}

/// Tuning knobs. The defaults suit an H100/H200-class GPU; every field can be left alone.
#[derive(Clone, Debug)]
pub struct MsmConfig {
    /// Window size in bits (2..=24). `None`: chosen from the number of scalars that are neither
    /// 0 nor 1 by a cost model (see [`window_bits_for`]).
    pub window_bits: Option<u32>,
    /// Largest bucket list in entries (4 bytes each) built at once; beyond it the scalars are
    /// processed in chunks that add into the same buckets. Default 2^31 (8 GiB: a 2^27 MSM in one
    /// chunk; the first chunk stores run sums, later chunks add them, which costs more).
    pub max_list_entries: u64,
    /// Occupancy variant of the level-1 XYZZ accumulation kernel: blocks per multiprocessor it
    /// is compiled for (`__launch_bounds__(threads, blocks)`, fewer registers per thread for
    /// more blocks). One of [`MsmGroup::MIN_BLOCKS`] of every group the workspace runs; `None`:
    /// [`MsmGroup::default_min_blocks`]. The number of segments is sized to one wave of these
    /// resident threads.
    pub accumulate_min_blocks: Option<u32>,
    /// Occupancy variant of the batch-affine kernel (one of `GroupLayout::affine_min_blocks` of
    /// every group the workspace runs: G1 3, 4, 5; G2 2, 3); `None`: the group's
    /// `GroupLayout::affine_default_min_blocks` (G1 4, G2 2). Its wave of resident threads
    /// sizes the chains. (Until the release of 2026-12-03, `accumulate_min_blocks` chose this
    /// variant too.) The allocator's plans assume the defaults: a larger variant's wave holds
    /// more chain states than a plan sized with `None`.
    pub affine_min_blocks: Option<u32>,
    /// How buckets are accumulated, G1 and G2 (default [`Accumulation::BatchAffine`]: affine
    /// additions with a shared inversion on lists of at least the group's
    /// `GroupLayout::affine_min_list` entries: `layout::AFFINE_MIN_LIST` for G1,
    /// `layout::AFFINE_MIN_LIST_G2` for G2).
    pub accumulation: Accumulation,
    /// Shortest bucket list (entries) accumulated batch-affine, both groups; `None` (default):
    /// each group's own (tests set `Some(0)` to run the batch-affine kernel on small MSMs).
    pub affine_min_list: Option<u64>,
    /// Batch-affine chains per thread, each thread's additions per step (the block's threads
    /// share the step's inversion; 1..=4096;
    /// default `layout::AFFINE_CHAINS_PER_THREAD`). Device memory grows with it.
    pub affine_chains_per_thread: u32,
    /// Shortest bucket list (entries) scattered in two passes, by coarse bin and then by key
    /// (`cuda/msm.cuh` 2'); default `layout::TWO_PASS_MIN_LIST` (tests set 0 or `u64::MAX` to
    /// run either scatter on any MSM). Device memory: 8 B per entry of a window group.
    pub two_pass_min_list: u64,
    /// Windows per group of the two-pass scatter (default `layout::TWO_PASS_GROUP_WINDOWS`):
    /// each group reads the scalars once; its staging buffer holds 8 B per scalar and window.
    pub two_pass_group_windows: u32,
    /// Record GPU time per stage into [`MsmStats::stage_ms`] (events between the stages, and a
    /// stream synchronisation at the end of [`MsmWorkspace::start`]). Off by default.
    pub profile: bool,
    /// Count every buffer of the workspace against this arena (a plan's reservation): a buffer
    /// beyond it is [`Error::OutOfDeviceMemory`] before any `cuMemAlloc`. `None`: plain
    /// allocations. Size it with `layout::msm_workspace_bytes`.
    pub arena: Option<Arena>,
}

impl Default for MsmConfig {
    fn default() -> Self {
        MsmConfig {
            window_bits: None,
            max_list_entries: 1 << 31,
            accumulate_min_blocks: None,
            affine_min_blocks: None,
            accumulation: Accumulation::default(),
            affine_min_list: None,
            affine_chains_per_thread: layout::AFFINE_CHAINS_PER_THREAD,
            two_pass_min_list: layout::TWO_PASS_MIN_LIST,
            two_pass_group_windows: layout::TWO_PASS_GROUP_WINDOWS,
            profile: false,
            arena: None,
        }
    }
}

/// What the last MSM of a workspace did (for benches and logs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MsmStats {
    /// Number of scalars given.
    pub n: usize,
    /// Scalars that were neither 0 nor 1 (the Pippenger part).
    pub m: usize,
    /// Scalars equal to 1 (summed by reduction).
    pub ones: usize,
    /// Scalars neither 0 nor 1 copied into a [`GatherSink`] instead of summed (then `m` is 0).
    pub gathered: usize,
    /// Window size in bits (0 when m = 0).
    pub window_bits: u32,
    /// Number of windows.
    pub windows: u32,
    /// Chunks the rest was split into (list capacity).
    pub chunks: u32,
    /// Occupancy variant of the accumulation kernel that ran (0 when m = 0).
    pub min_blocks: u32,
    /// The batch-affine launch shape when the level-1 accumulation ran batch-affine.
    pub affine: Option<AffineShape>,
    /// The two-pass scatter's shape when the list was scattered in two passes.
    pub two_pass: Option<TwoPass>,
    /// With [`MsmConfig::profile`]: GPU milliseconds per stage (`classify`, `ones`, `bucketing`,
    /// `accumulate`, `partials`, `window_sums`), summed over chunks; empty otherwise.
    pub stage_ms: Vec<(&'static str, f32)>,
}

/// Stage timing with events (only when profiling).
struct Marks {
    on: bool,
    events: Vec<(&'static str, Event)>,
}

impl Marks {
    fn new(on: bool, dev: &Arc<Device>, st: &Stream) -> Result<Self> {
        let mut m = Marks {
            on,
            events: Vec::new(),
        };
        m.mark(dev, st, "")?;
        Ok(m)
    }
    /// Records the end of stage `name` on the stream.
    fn mark(&mut self, dev: &Arc<Device>, st: &Stream, name: &'static str) -> Result<()> {
        if self.on {
            let e = Event::new(dev, true)?;
            e.record(st)?;
            self.events.push((name, e));
        }
        Ok(())
    }
    /// Waits for the stream and sums the time of each stage.
    fn collect(&self, st: &Stream) -> Result<Vec<(&'static str, f32)>> {
        let mut out: Vec<(&'static str, f32)> = Vec::new();
        if !self.on {
            return Ok(out);
        }
        st.synchronize()?;
        for w in self.events.windows(2) {
            let ms = w[1].1.elapsed_ms(&w[0].1)?;
            match out.iter_mut().find(|(n, _)| *n == w[1].0) {
                Some(e) => e.1 += ms,
                None => out.push((w[1].0, ms)),
            }
        }
        Ok(out)
    }
}

#[cfg(any(test, feature = "internals"))]
pub use layout::window_bits_for;

/// A group the MSM runs over (implemented for [`G1`] and [`G2`]).
pub trait MsmGroup: Send + Sync + 'static {
    /// Affine point type (blst layout; infinity all-zero).
    type Affine: DeviceRepr;
    /// Projective (Jacobian, blst layout) point type, the result.
    type Projective: DeviceRepr + Group + Copy;
    /// Kernel name suffix (`g1` / `g2`).
    const SUFFIX: &'static str;
    /// Sizes and launch constants ([`crate::gpu::memory::layout`]), the same the planner uses.
    const LAYOUT: &'static GroupLayout;
    /// Bytes of one XYZZ point on the device.
    const XYZZ_BYTES: usize;
    /// Threads per block of the point kernels (must match cuda/msm.cu).
    const PT_THREADS: u32;
    /// Threads per block of the tree reduction (must match cuda/msm.cu).
    const RED_THREADS: u32;
    /// Occupancy variants of `cuzk_msm_accumulate_<suffix>_mb<B>` compiled in cuda/msm.cu
    /// (ptxas 13.0 on sm_90, inlined `mul_split` product: G1 3 -> 168 registers, 4 -> 128,
    /// 5 -> 96 with spills; G2 4 -> 255, 6 -> 168 with spills).
    const MIN_BLOCKS: &'static [u32];
    /// The variant used when [`MsmConfig::accumulate_min_blocks`] is `None`, for m scalars that
    /// are neither 0 nor 1 ([`GroupLayout::default_min_blocks`], measured on an H200: G1 4 blocks
    /// fastest at 2^24, 5 at 2^26 and 2^27; G2 4 at 2^22, 6 at 2^24).
    // Read by the MSM tests and benches; the prover's default comes from the layout.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    fn default_min_blocks(m: usize) -> u32;
}

/// BLS12-381 G1 (points over Fp).
pub struct G1;
/// BLS12-381 G2 (points over Fp2).
pub struct G2;

impl MsmGroup for G1 {
    type Affine = G1Affine;
    type Projective = G1Projective;
    const SUFFIX: &'static str = "g1";
    const LAYOUT: &'static GroupLayout = &G1_LAYOUT;
    const XYZZ_BYTES: usize = G1_LAYOUT.xyzz_bytes as usize;
    const PT_THREADS: u32 = G1_LAYOUT.pt_threads;
    const RED_THREADS: u32 = G1_LAYOUT.red_threads;
    const MIN_BLOCKS: &'static [u32] = G1_LAYOUT.min_blocks;
    fn default_min_blocks(m: usize) -> u32 {
        G1_LAYOUT.default_min_blocks(m as u64)
    }
}

impl MsmGroup for G2 {
    type Affine = G2Affine;
    type Projective = G2Projective;
    const SUFFIX: &'static str = "g2";
    const LAYOUT: &'static GroupLayout = &G2_LAYOUT;
    const XYZZ_BYTES: usize = G2_LAYOUT.xyzz_bytes as usize;
    const PT_THREADS: u32 = G2_LAYOUT.pt_threads;
    const RED_THREADS: u32 = G2_LAYOUT.red_threads;
    const MIN_BLOCKS: &'static [u32] = G2_LAYOUT.min_blocks;
    fn default_min_blocks(m: usize) -> u32 {
        G2_LAYOUT.default_min_blocks(m as u64)
    }
}

/// Elements per block of `cuzk_msm_scan_block`.
const SCAN_BLOCK: usize = layout::SCAN_BLOCK as usize;
/// Segment length of the partial passes (level >= 2). Must be >= 4 so that every pass shrinks
/// the list (2 ceil(count / L) < count for count > L).
const PARTIAL_SEGMENT: u32 = layout::PARTIAL_SEGMENT;
const _: () = assert!(PARTIAL_SEGMENT >= 4);
/// Points per thread of the tree reduction before the shared-memory tree.
const REDUCE_PER_THREAD: u32 = 4;
/// Largest n: point indices carry a sign in bit 31 of the bucket list.
const MAX_N: usize = (1 << 31) - 1;

/// A grow-only device buffer slot, allocated in the workspace's arena if it has one.
struct Slot<T: DeviceRepr>(Option<DeviceBuffer<T>>, Option<Arena>);

impl<T: DeviceRepr> Slot<T> {
    fn new(arena: &Option<Arena>) -> Self {
        Slot(None, arena.clone())
    }
    /// Device pointer of a buffer of at least `len` elements. A smaller buffer is replaced, after
    /// `st` has finished every queued kernel (which may still read it); the old one is freed
    /// first so that both need not fit at once.
    fn ensure(&mut self, dev: &Arc<Device>, st: &Stream, len: usize) -> Result<u64> {
        let len = len.max(1);
        if self.0.as_ref().map(|b| b.len() < len).unwrap_or(true) {
            if self.0.is_some() {
                st.synchronize()?;
            }
            self.0 = None;
            self.0 = Some(dev.alloc_in::<T>(self.1.as_ref(), len)?);
        }
        Ok(self.0.as_ref().map(|b| b.device_ptr()).unwrap_or(0))
    }
}

/// Device buffers of one workspace.
struct Buffers {
    scalars: Slot<u64>,
    points: Slot<u8>,
    dens_words: Slot<u32>,
    dens_prefix: Slot<u32>,
    scan_tmp: Slot<u32>,
    idx: Slot<u32>,
    counters: Slot<u32>,
    counts: Slot<u32>,
    cursors: Slot<u32>,
    list: Slot<u32>,
    buckets: Slot<u8>,
    /// Batch-affine chain states: meta (16 B), accumulators, prefix products, first runs.
    chains: [Slot<u8>; 5],
    part_keys: [Slot<u32>; 3],
    part_pts: [Slot<u8>; 3],
    sums: [Slot<u8>; 2],
    /// Two-pass scatter: a window group's entries then their keys; coarse cursors.
    two_pass_tmp: Slot<u32>,
    coarse: Slot<u32>,
}

/// An MSM in flight: its result is read by [`MsmWorkspace::finish`].
#[must_use = "an MSM's result is only available through MsmWorkspace::finish"]
#[derive(Debug)]
pub struct MsmTicket {
    slot: usize,
    id: u64,
    group: &'static str,
}

/// Window layout of a queued MSM: ticket id, window bits, number of windows.
#[derive(Clone, Copy)]
struct Pending {
    id: u64,
    c: u32,
    nw: u32,
}

/// Device pointers of one MSM's inputs, from [`MsmWorkspace::upload_inputs`].
#[derive(Clone, Copy)]
struct Inputs {
    /// The n scalars (4 `u64` each), in the caller's buffer or the `scalars` slot.
    scalars: u64,
    /// The affine points, in the caller's buffer or the `points` slot.
    points: u64,
    /// 1 when the scalars are in Montgomery form (the kernels convert them), else 0.
    mont: u32,
    /// Density bitmap words (0 without a bitmap).
    dens_words: u64,
    /// Exclusive prefix popcounts of the density words (0 without a bitmap).
    dens_prefix: u64,
}

/// What [`MsmWorkspace::classify`] found: the two index lists in the `idx` slot and their
/// lengths.
#[derive(Clone, Copy)]
struct Classified {
    /// Indices of the scalars that are neither 0 nor 1 (`idx[0..m]`).
    rest: u64,
    /// Indices of the scalars equal to 1 (`idx[n..n + n1]`).
    ones: u64,
    /// Scalars that are neither 0 nor 1: the Pippenger part.
    m: usize,
    /// Scalars equal to 1.
    n1: usize,
}

/// The buffers every MSM writes its result through ([`MsmWorkspace::prepare_outputs`]).
struct Outputs {
    /// The claimed result slot: W + 1 Jacobian points.
    result: u64,
    /// The two ping-pong buffers of the reduction tree (`sums` slots).
    sums: [u64; 2],
}

/// The two-pass scatter's shape and buffers.
#[derive(Clone, Copy)]
struct TwoPassBufs {
    shape: TwoPass,
    /// Staging of one window group's entries (`two_pass_tmp`, first half).
    tmp_val: u64,
    /// Staging of their keys (`two_pass_tmp`, second half).
    tmp_key: u64,
    /// Coarse-bin cursors (`coarse`).
    coarse: u64,
}

/// Device pointers of the Pippenger part's buffers, sized by
/// [`MsmWorkspace::prepare_pippenger`] before its first kernel (0: not used by this MSM).
struct PippengerBufs {
    buckets: u64,
    counts: u64,
    /// One-pass scatter cursors.
    cursors: u64,
    /// The bucket list of one chunk.
    list: u64,
    /// Level-1 XYZZ partials (keys, points).
    part0: (u64, u64),
    /// Batch-affine chain states: meta, accumulators, prefix products, first keys, first sums.
    chains: [u64; 5],
    two_pass: Option<TwoPassBufs>,
    /// Level >= 2 partials, ping-pong (keys, points).
    part1: (u64, u64),
    part2: (u64, u64),
}

/// One chunk of the Pippenger scalars: `mc` entries of the rest list from `rest`, decomposed
/// into signed c-bit digits.
#[derive(Clone, Copy)]
struct Chunk {
    inp: Inputs,
    /// Device address of the chunk's first rest index.
    rest: u64,
    mc: usize,
    c: u32,
    /// 1 for the first chunk (the accumulation stores run sums; later chunks add them).
    fresh: u32,
}

impl Chunk {
    /// The leading arguments of the digit kernels (`cuzk_msm_histogram`, `cuzk_msm_scatter`,
    /// `cuzk_msm_scatter_coarse`) for windows `w0..w1`.
    fn push_digit_args(&self, a: &mut KernelArgs, w0: u32, w1: u32) {
        a.push_ptr(self.inp.scalars)
            .push_u32(self.inp.mont)
            .push_ptr(self.inp.dens_words)
            .push_ptr(self.inp.dens_prefix)
            .push_ptr(self.rest)
            .push_u32(self.mc as u32)
            .push_u32(self.c)
            .push_u32(w0)
            .push_u32(w1);
    }
}

/// Where level 1 of a chunk's accumulation left the runs that cross a segment border: `count`
/// (key, point) pairs at `cur`; `toggle` picks the next output of the ping-pong; `done` when
/// they are already in the buckets.
struct Level {
    count: u32,
    cur: (u64, u64),
    toggle: bool,
    done: bool,
}

/// Result slot: W + 1 Jacobian points (windows, then the ones sum) and the event after them.
struct ResultSlot {
    buf: Slot<u8>,
    event: Event,
    /// The MSM whose result the slot holds (or will hold once `event` completes).
    busy: Option<Pending>,
}

/// Reusable stream and device buffers for MSMs on one device. Not shareable between threads
/// (`&mut self`); create one per worker.
pub struct MsmWorkspace {
    dev: Arc<Device>,
    stream: Stream,
    cfg: MsmConfig,
    bufs: Buffers,
    slots: [ResultSlot; 2],
    /// Results read back early because their slot was needed before `finish` was called.
    parked: Vec<(Pending, Vec<u8>)>,
    next_slot: usize,
    next_id: u64,
    stats: MsmStats,
}

/// Number of u32 words of a density bitmap of n bits.
fn words_for(n: usize) -> usize {
    n.div_ceil(32)
}

impl MsmWorkspace {
    /// A workspace with its own stream on `dev` and the default [`MsmConfig`].
    #[cfg(any(test, feature = "internals"))]
    pub fn new(dev: &Arc<Device>) -> Result<Self> {
        Self::with_config(dev, MsmConfig::default())
    }

    /// A workspace with its own stream on `dev`.
    pub fn with_config(dev: &Arc<Device>, cfg: MsmConfig) -> Result<Self> {
        if let Some(c) = cfg.window_bits {
            if !(2..=24).contains(&c) {
                return Err(Error::InvalidConfig {
                    name: "MsmConfig::window_bits".into(),
                    value: c.to_string(),
                    reason: "must be between 2 and 24".into(),
                });
            }
        }
        let ar = cfg.arena.clone();
        let slot = || -> Result<ResultSlot> {
            Ok(ResultSlot {
                buf: Slot::new(&ar),
                event: Event::new(dev, false)?,
                busy: None,
            })
        };
        Ok(MsmWorkspace {
            dev: dev.clone(),
            stream: dev.stream()?,
            cfg,
            bufs: Buffers {
                scalars: Slot::new(&ar),
                points: Slot::new(&ar),
                dens_words: Slot::new(&ar),
                dens_prefix: Slot::new(&ar),
                scan_tmp: Slot::new(&ar),
                idx: Slot::new(&ar),
                counters: Slot::new(&ar),
                counts: Slot::new(&ar),
                cursors: Slot::new(&ar),
                list: Slot::new(&ar),
                buckets: Slot::new(&ar),
                chains: [
                    Slot::new(&ar),
                    Slot::new(&ar),
                    Slot::new(&ar),
                    Slot::new(&ar),
                    Slot::new(&ar),
                ],
                part_keys: [Slot::new(&ar), Slot::new(&ar), Slot::new(&ar)],
                part_pts: [Slot::new(&ar), Slot::new(&ar), Slot::new(&ar)],
                sums: [Slot::new(&ar), Slot::new(&ar)],
                two_pass_tmp: Slot::new(&ar),
                coarse: Slot::new(&ar),
            },
            slots: [slot()?, slot()?],
            parked: Vec::new(),
            next_slot: 0,
            next_id: 1,
            stats: MsmStats::default(),
        })
    }

    /// The device of this workspace.
    #[cfg(any(test, feature = "internals"))]
    pub fn device(&self) -> &Arc<Device> {
        &self.dev
    }

    /// The stream the MSM kernels are queued on (to order other work after them with events).
    #[cfg(any(test, feature = "internals"))]
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// What the last started MSM did.
    #[cfg(any(test, feature = "internals"))]
    pub fn stats(&self) -> &MsmStats {
        &self.stats
    }

    /// Frees every buffer (the next MSM allocates again).
    pub fn release(&mut self) -> Result<()> {
        self.stream.synchronize()?;
        let b = &mut self.bufs;
        b.scalars.0 = None;
        b.points.0 = None;
        b.dens_words.0 = None;
        b.dens_prefix.0 = None;
        b.scan_tmp.0 = None;
        b.idx.0 = None;
        b.counters.0 = None;
        b.counts.0 = None;
        b.cursors.0 = None;
        b.list.0 = None;
        b.two_pass_tmp.0 = None;
        b.coarse.0 = None;
        b.buckets.0 = None;
        for s in b.chains.iter_mut() {
            s.0 = None;
        }
        for s in b.part_keys.iter_mut() {
            s.0 = None;
        }
        for s in b.part_pts.iter_mut() {
            s.0 = None;
        }
        for s in b.sums.iter_mut() {
            s.0 = None;
        }
        Ok(())
    }

    /// MSM `sum_j scalars[j] * points[p(j)]` in group `G`, blocking: [`MsmWorkspace::start`]
    /// then [`MsmWorkspace::finish`].
    pub fn msm<G: MsmGroup>(
        &mut self,
        points: Points<'_, G::Affine>,
        scalars: Scalars<'_>,
        density: Option<&[u64]>,
    ) -> Result<G::Projective> {
        let t = self.start::<G>(points, scalars, density)?;
        self.finish::<G>(t)
    }

    /// G1 MSM, blocking: [`MsmWorkspace::msm`] in [`G1`].
    #[cfg(any(test, feature = "internals"))]
    pub fn msm_g1(
        &mut self,
        points: Points<'_, G1Affine>,
        scalars: Scalars<'_>,
        density: Option<&[u64]>,
    ) -> Result<G1Projective> {
        self.msm::<G1>(points, scalars, density)
    }

    /// G2 MSM, blocking: [`MsmWorkspace::msm`] in [`G2`].
    #[cfg(any(test, feature = "internals"))]
    pub fn msm_g2(
        &mut self,
        points: Points<'_, G2Affine>,
        scalars: Scalars<'_>,
        density: Option<&[u64]>,
    ) -> Result<G2Projective> {
        self.msm::<G2>(points, scalars, density)
    }

    /// Queues the MSM `sum_j scalars[j] * points[p(j)]` and returns a ticket for [`finish`].
    ///
    /// - Without `density`, `p(j) = j` and `points.len() >= scalars.len()` (extra points unused).
    /// - With `density` (bit j of the bitmap is bit `j % 64` of word `j / 64`, bellperson's
    ///   layout), scalar j is used only if its bit is set, and `p(j)` is the number of set bits
    ///   below j; the bitmap must have at least `scalars.len()` bits and `points.len()` must be at
    ///   least the number of set bits among them.
    ///
    /// Blocks until the scalars are classified (one small read-back on this workspace's stream).
    /// Host inputs are copied synchronously before the call returns.
    ///
    /// Errors: [`Error::InvalidInput`] for inconsistent lengths or more than 2^31 - 1 scalars or
    /// points, [`Error::OutOfDeviceMemory`] when the buffers do not fit, [`Error::Cuda`].
    ///
    /// The stages, each a private method of the workspace, run in this order on the
    /// workspace's stream: `check_inputs` (host), `claim_slot`, `wait_before_host_copies`,
    /// `upload_inputs`, `classify` (the one read-back), `plan_sizes` (host), `prepare_outputs`,
    /// `sum_ones` (n1 > 0); when m > 0, `prepare_pippenger`, then per list chunk
    /// `bucket_chunk`, `accumulate_chunk`, `reduce_partials`, and `window_sums` after the
    /// chunks; last `hand_off`, which leaves the result to `finish`.
    ///
    /// [`finish`]: MsmWorkspace::finish
    pub fn start<G: MsmGroup>(
        &mut self,
        points: Points<'_, G::Affine>,
        scalars: Scalars<'_>,
        density: Option<&[u64]>,
    ) -> Result<MsmTicket> {
        self.start_in::<G>(points, scalars, density, None)
    }

    /// [`start`](Self::start) of one streamed pass whose Pippenger part goes to `sink`: when
    /// the scalars that are neither 0 nor 1 fit the sink's room, they and their points are
    /// copied into it (`cuzk_msm_gather`) and the ticket's result is the sum over the scalars
    /// equal to 1 only; [`GatherSink::drain`] sums the gathered part in one MSM after the last
    /// pass. Otherwise this is [`start`](Self::start). [`MsmStats::gathered`] says which.
    ///
    /// Errors: those of [`start`](Self::start); [`Error::Internal`] if the sink is on another
    /// device.
    pub fn start_gathering<G: MsmGroup>(
        &mut self,
        points: Points<'_, G::Affine>,
        scalars: Scalars<'_>,
        density: Option<&[u64]>,
        sink: &mut GatherSink<G>,
    ) -> Result<MsmTicket> {
        if sink.ordinal != self.dev.ordinal() {
            return Err(Error::internal("a gather sink of another device"));
        }
        self.start_in::<G>(points, scalars, density, Some(sink))
    }

    /// Blocking [`start_gathering`](Self::start_gathering) then [`finish`](Self::finish).
    pub fn msm_gathering<G: MsmGroup>(
        &mut self,
        points: Points<'_, G::Affine>,
        scalars: Scalars<'_>,
        density: Option<&[u64]>,
        sink: &mut GatherSink<G>,
    ) -> Result<G::Projective> {
        let t = self.start_gathering::<G>(points, scalars, density, sink)?;
        self.finish::<G>(t)
    }

    fn start_in<G: MsmGroup>(
        &mut self,
        points: Points<'_, G::Affine>,
        scalars: Scalars<'_>,
        density: Option<&[u64]>,
        sink: Option<&mut GatherSink<G>>,
    ) -> Result<MsmTicket> {
        let n = scalars.len();
        self.check_inputs::<G>(&points, n, density)?;
        let (slot_i, id) = self.claim_slot()?;
        self.wait_before_host_copies(&points, &scalars, density)?;
        let mut marks = Marks::new(self.cfg.profile, &self.dev, &self.stream)?;
        let inp = self.upload_inputs(&points, &scalars, density)?;
        let mut cls = self.classify(&inp, n, &mut marks)?;
        // ---- gathering: the Pippenger part moves to the sink when it fits
        let mut gathered = 0usize;
        if let Some(sink) = sink {
            if cls.m > 0 && cls.m <= sink.room() {
                self.gather::<G>(&inp, &cls, sink)?;
                marks.mark(&self.dev, &self.stream, "gather")?;
                gathered = cls.m;
                cls.m = 0;
            }
        }
        let sz = self.plan_sizes::<G>(&points, &scalars, density, &cls)?;
        let out = self.prepare_outputs::<G>(slot_i, &sz)?;
        if cls.n1 > 0 {
            self.sum_ones::<G>(&inp, &cls, &sz, &out, &mut marks)?;
        }

        // ---- Pippenger on the rest
        let mut chunks = 0u32;
        // the variant of the kernel that runs (batch-affine or XYZZ: MsmSizes::mb)
        let min_blocks = if cls.m > 0 { sz.mb } else { 0 };
        if cls.m > 0 {
            let pb = self.prepare_pippenger::<G>(&sz)?;
            marks.mark(&self.dev, &self.stream, "bucketing")?;
            let mut m0 = 0usize;
            while m0 < cls.m {
                let chunk = Chunk {
                    inp,
                    rest: cls.rest + 4 * m0 as u64,
                    mc: (sz.chunk_m as usize).min(cls.m - m0),
                    c: sz.c,
                    fresh: (m0 == 0) as u32,
                };
                chunks += 1;
                self.bucket_chunk(&chunk, &sz, &pb)?;
                marks.mark(&self.dev, &self.stream, "bucketing")?;
                let level = self.accumulate_chunk::<G>(&chunk, &sz, &pb, &mut marks)?;
                self.reduce_partials::<G>(&chunk, &sz, &pb, level)?;
                marks.mark(&self.dev, &self.stream, "partials")?;
                m0 += chunk.mc;
            }
            self.window_sums::<G>(&sz, &pb, &out, &mut marks)?;
        }
        let stats = MsmStats {
            n,
            m: cls.m,
            gathered,
            ones: cls.n1,
            window_bits: sz.c,
            windows: sz.nw,
            chunks,
            min_blocks,
            affine: if cls.m > 0 { sz.affine } else { None },
            two_pass: if cls.m > 0 { sz.two_pass } else { None },
            stage_ms: Vec::new(),
        };
        self.hand_off::<G>(slot_i, id, marks, stats)
    }

    /// Stage 0 of [`start`](Self::start), on the host only: checks the lengths (at most
    /// [`MAX_N`] scalars and points), the config fields that depend on the group
    /// (`affine_chains_per_thread`, the occupancy variants), and that `points` holds at least as
    /// many points as the scalars use (n, or the set bits of the first n of `density`). Touches
    /// no workspace state, so an error here leaves the workspace as it was.
    fn check_inputs<G: MsmGroup>(
        &self,
        points: &Points<'_, G::Affine>,
        n: usize,
        density: Option<&[u64]>,
    ) -> Result<()> {
        let npts = points.len();
        if n > MAX_N || npts > MAX_N {
            return Err(Error::InvalidInput(format!(
                "msm: {n} scalars / {npts} points; at most {MAX_N} are supported"
            )));
        }
        if !(1..=4096).contains(&self.cfg.affine_chains_per_thread) {
            return Err(Error::InvalidConfig {
                name: "MsmConfig::affine_chains_per_thread".into(),
                value: self.cfg.affine_chains_per_thread.to_string(),
                reason: "must be between 1 and 4096".into(),
            });
        }
        for (name, value, variants) in [
            (
                "MsmConfig::accumulate_min_blocks",
                self.cfg.accumulate_min_blocks,
                G::MIN_BLOCKS,
            ),
            (
                "MsmConfig::affine_min_blocks",
                self.cfg.affine_min_blocks,
                G::LAYOUT.affine_min_blocks,
            ),
        ] {
            if let Some(mb) = value {
                if !variants.contains(&mb) {
                    return Err(Error::InvalidConfig {
                        name: name.into(),
                        value: mb.to_string(),
                        reason: format!("{} variants are {variants:?}", G::SUFFIX),
                    });
                }
            }
        }
        // ---- validate the density / lengths on the host
        let used_points = match density {
            None => n,
            Some(d) => {
                if d.len() * 64 < n {
                    return Err(Error::InvalidInput(format!(
                        "msm: density bitmap has {} bits for {n} scalars",
                        d.len() * 64
                    )));
                }
                let full = n / 64;
                let mut c: usize = d[..full].iter().map(|w| w.count_ones() as usize).sum();
                if n % 64 != 0 {
                    c += (d[full] & ((1u64 << (n % 64)) - 1)).count_ones() as usize;
                }
                c
            }
        };
        if npts < used_points {
            return Err(Error::InvalidInput(format!(
                "msm: {used_points} points needed, {npts} given"
            )));
        }
        Ok(())
    }

    /// Stage 1: takes the next of the two result slots (alternating) and a fresh ticket id.
    /// A result still unread in that slot is read back first and parked for its `finish`
    /// ([`park_slot`](Self::park_slot), which waits for that MSM's event).
    fn claim_slot(&mut self) -> Result<(usize, u64)> {
        // ---- result slot (park a result still unread)
        let slot_i = self.next_slot;
        self.next_slot ^= 1;
        self.park_slot(slot_i)?;
        let id = self.next_id;
        self.next_id += 1;
        Ok((slot_i, id))
    }

    /// Stage 2: waits for this workspace's stream when any input comes from the host (scalars,
    /// points or a density bitmap). Host copies are synchronous and not ordered with the
    /// (non-blocking) stream, so the previous MSM must have finished reading the buffers they
    /// overwrite. Device-only inputs queue behind it without a wait.
    fn wait_before_host_copies<A: DeviceRepr>(
        &self,
        points: &Points<'_, A>,
        scalars: &Scalars<'_>,
        density: Option<&[u64]>,
    ) -> Result<()> {
        // ---- inputs on the device. Host copies are synchronous and not ordered with this
        // workspace's (non-blocking) stream: let the previous MSM finish reading the buffers.
        if matches!(scalars, Scalars::Host(_) | Scalars::HostCanonical(_))
            || matches!(points, Points::Host(_))
            || density.is_some()
        {
            self.stream.synchronize()?;
        }
        Ok(())
    }

    /// Stage 3: puts the inputs on the device and returns their pointers ([`Inputs`]).
    ///
    /// - Host scalars are copied into the `scalars` slot (4n `u64`, Montgomery or canonical as
    ///   given: the kernels convert Montgomery form), host points into the `points` slot
    ///   (`npts` affine points as bytes); device inputs are used in place.
    /// - A density bitmap is copied as ⌈n/32⌉ `u32` words into `dens_words`; `cuzk_msm_popc`
    ///   and an exclusive scan (scratch: `scan_tmp`) then write each word's number of set bits
    ///   before it into `dens_prefix` (⌈n/32⌉ `u32`): the point index of a used scalar.
    fn upload_inputs<A: DeviceRepr>(
        &mut self,
        points: &Points<'_, A>,
        scalars: &Scalars<'_>,
        density: Option<&[u64]>,
    ) -> Result<Inputs> {
        let (dev, st, b) = (&self.dev, &self.stream, &mut self.bufs);
        let n = scalars.len();
        let mont = scalars.montgomery() as u32;
        let scalars_ptr = match scalars {
            Scalars::Device(s) => s.device_ptr(),
            Scalars::DeviceCanonical(s) => s.device_ptr(),
            Scalars::Host(s) => upload(dev, st, &mut b.scalars, as_u64_words_scalar(s))?,
            Scalars::HostCanonical(s) => {
                upload(dev, st, &mut b.scalars, as_u64_words_canonical(s))?
            }
        };
        let points_ptr = match points {
            Points::Device(p) => p.device_ptr(),
            Points::Host(p) => upload(dev, st, &mut b.points, as_bytes(p))?,
        };
        let (dw, dp) = match density {
            None => (0u64, 0u64),
            Some(d) => {
                let nw = words_for(n);
                let words: Vec<u32> = d
                    .iter()
                    .flat_map(|w| [*w as u32, (*w >> 32) as u32])
                    .take(nw)
                    .collect();
                let dw = upload(dev, st, &mut b.dens_words, &words)?;
                let dp = b.dens_prefix.ensure(dev, st, nw)?;
                launch(
                    st,
                    dev,
                    "cuzk_msm_popc",
                    blocks(nw, 256),
                    256,
                    KernelArgs::new()
                        .push_ptr(dw)
                        .push_u32(nw as u32)
                        .push_ptr(dp),
                )?;
                scan_exclusive(st, dev, &mut b.scan_tmp, dp, nw)?;
                (dw, dp)
            }
        };
        Ok(Inputs {
            scalars: scalars_ptr,
            points: points_ptr,
            mont,
            dens_words: dw,
            dens_prefix: dp,
        })
    }

    /// Stage 4: `cuzk_msm_classify` sorts the n scalars into three kinds — 0 (skipped), 1 (their
    /// point indices from `idx[n..]`) and the rest (from `idx[0..]`) — and counts the last two
    /// in `counters` (2 `u32`: m, n1). The `idx` slot holds 2n `u32`. Marks `classify`, then
    /// waits for the stream and reads the two counts back: the MSM's one read-back, which sizes
    /// everything after it.
    fn classify(&mut self, inp: &Inputs, n: usize, marks: &mut Marks) -> Result<Classified> {
        let (dev, st, b) = (&self.dev, &self.stream, &mut self.bufs);
        // ---- classify: rest indices from the front of idx, ones from idx[n..]
        let idx = b.idx.ensure(dev, st, 2 * n)?;
        let rest_ptr = idx;
        let ones_ptr = idx + 4 * n as u64;
        let counters = b.counters.ensure(dev, st, 2)?;
        zero(st, &mut b.counters, 2)?;
        if n > 0 {
            launch(
                st,
                dev,
                "cuzk_msm_classify",
                blocks(n, 256),
                256,
                KernelArgs::new()
                    .push_ptr(inp.scalars)
                    .push_u32(n as u32)
                    .push_u32(inp.mont)
                    .push_ptr(inp.dens_words)
                    .push_ptr(inp.dens_prefix)
                    .push_ptr(rest_ptr)
                    .push_ptr(ones_ptr)
                    .push_ptr(counters),
            )?;
        }
        marks.mark(dev, st, "classify")?;
        let mut cnt = [0u32; 2];
        st.synchronize()?;
        if let Some(buf) = b.counters.0.as_ref() {
            buf.slice(0..2)?.copy_to_host(&mut cnt)?;
        }
        Ok(Classified {
            rest: rest_ptr,
            ones: ones_ptr,
            m: cnt[0] as usize,
            n1: cnt[1] as usize,
        })
    }

    /// Stage 4' (gathering, when the rest fits the sink): `cuzk_msm_gather` copies the m rest
    /// scalars (canonical) and their points into `sink` after its [`GatherSink::len`] entries,
    /// on this workspace's stream, right after the classification that wrote the rest list.
    fn gather<G: MsmGroup>(
        &mut self,
        inp: &Inputs,
        cls: &Classified,
        sink: &mut GatherSink<G>,
    ) -> Result<()> {
        let (dev, st) = (&self.dev, &self.stream);
        let point = std::mem::size_of::<G::Affine>();
        let pw = point / 4;
        let at = sink.fill;
        let words = cls
            .m
            .checked_mul(pw)
            .filter(|w| w.div_ceil(256) <= i32::MAX as usize)
            .ok_or_else(|| Error::internal("gather launch too large"))?;
        launch(
            st,
            dev,
            "cuzk_msm_gather",
            blocks(words, 256),
            256,
            KernelArgs::new()
                .push_ptr(cls.rest)
                .push_u32(cls.m as u32)
                .push_ptr(inp.scalars)
                .push_u32(inp.mont)
                .push_ptr(inp.dens_words)
                .push_ptr(inp.dens_prefix)
                .push_ptr(inp.points)
                .push_u32(pw as u32)
                .push_ptr(sink.scalars.device_ptr() + (at * 32) as u64)
                .push_ptr(sink.points.device_ptr() + (at * point) as u64),
        )?;
        sink.fill += cls.m;
        Ok(())
    }

    /// Stage 5, on the host: every size of this MSM from the counts, before any buffer of the
    /// Pippenger part exists, so that no buffer grows while this MSM's kernels run. The sizes
    /// are [`MsmSizes::new`]'s — the function the allocator's plans sum — for this shape (n,
    /// host or device inputs, density) and the config's limits: the window size c and number of
    /// windows, the list chunk, the level-1 accumulation (batch-affine shape or XYZZ segments,
    /// and its occupancy variant), the two-pass scatter's shape, the partial and reduction
    /// buffer lengths.
    fn plan_sizes<G: MsmGroup>(
        &self,
        points: &Points<'_, G::Affine>,
        scalars: &Scalars<'_>,
        density: Option<&[u64]>,
        cls: &Classified,
    ) -> Result<MsmSizes> {
        let n = scalars.len();
        let npts = points.len();
        // ---- plan every size first, so that no buffer grows while kernels of this MSM run:
        // the sizes come from layout::MsmSizes, the function the allocator's plans sum
        let lim = MsmLimits {
            window_bits: self.cfg.window_bits,
            max_list_entries: self.cfg.max_list_entries,
            accumulate_min_blocks: self.cfg.accumulate_min_blocks,
            affine_min_blocks: self.cfg.affine_min_blocks,
            sm_count: self.dev.sm_count().max(1),
            accumulation: self.cfg.accumulation,
            affine_min_list: self.cfg.affine_min_list,
            affine_chains_per_thread: self.cfg.affine_chains_per_thread,
            two_pass_min_list: self.cfg.two_pass_min_list,
            two_pass_group_windows: self.cfg.two_pass_group_windows,
        };
        let lshape = MsmShape {
            group: G::LAYOUT,
            n: n as u64,
            max_m: n as u64,
            host_scalars: matches!(scalars, Scalars::Host(_) | Scalars::HostCanonical(_)),
            host_points: if matches!(points, Points::Host(_)) {
                npts as u64
            } else {
                0
            },
            density: density.is_some(),
        };
        MsmSizes::new(&lshape, cls.m as u64, cls.n1 as u64, &lim)
    }

    /// Stage 6: the buffers every MSM writes its result through, whatever m and n1 are: the
    /// claimed result slot, (W + 1) Jacobian points zeroed on the stream (W window sums, then
    /// the ones sum), and the two reduction buffers of the tree, `sums[0]` (`sums_len` XYZZ
    /// points) and `sums[1]` (half of them).
    fn prepare_outputs<G: MsmGroup>(&mut self, slot_i: usize, sz: &MsmSizes) -> Result<Outputs> {
        let (dev, st, b) = (&self.dev, &self.stream, &mut self.bufs);
        let xb = G::XYZZ_BYTES;
        let jac = std::mem::size_of::<G::Projective>();
        let nw = sz.nw;
        let sums_len = sz.sums_len as usize;
        let res_ptr = self.slots[slot_i]
            .buf
            .ensure(dev, st, (nw as usize + 1) * jac)?;
        zero(st, &mut self.slots[slot_i].buf, (nw as usize + 1) * jac)?;
        let sums = [
            b.sums[0].ensure(dev, st, sums_len * xb)?,
            b.sums[1].ensure(dev, st, sums_len.div_ceil(2) * xb)?,
        ];
        Ok(Outputs {
            result: res_ptr,
            sums,
        })
    }

    /// Stage 7 (when n1 > 0): the points whose scalar is 1, summed without Pippenger —
    /// `cuzk_msm_ones_*` adds them into `t_ones` XYZZ partial sums in `sums[0]`, the tree
    /// reduces those to one point, converted to Jacobian into the result slot's last entry
    /// (index W). Marks `ones`.
    fn sum_ones<G: MsmGroup>(
        &mut self,
        inp: &Inputs,
        cls: &Classified,
        sz: &MsmSizes,
        out: &Outputs,
        marks: &mut Marks,
    ) -> Result<()> {
        let (dev, st) = (&self.dev, &self.stream);
        let jac = std::mem::size_of::<G::Projective>();
        let (nw, t_ones) = (sz.nw, sz.t_ones);
        // ---- ones: T partial sums -> tree -> results[nw]
        launch(
            st,
            dev,
            &format!("cuzk_msm_ones_{}", G::SUFFIX),
            blocks(t_ones as usize, G::PT_THREADS),
            G::PT_THREADS,
            KernelArgs::new()
                .push_ptr(cls.ones)
                .push_u32(cls.n1 as u32)
                .push_u32(t_ones)
                .push_ptr(inp.points)
                .push_ptr(out.sums[0]),
        )?;
        let sum = reduce_tree::<G>(st, dev, out.sums, 1, t_ones)?;
        to_jacobian::<G>(st, dev, sum, 1, out.result + nw as u64 * jac as u64)?;
        marks.mark(dev, st, "ones")?;
        Ok(())
    }

    /// Stage 8 (when m > 0): sizes every buffer of the Pippenger part before its first kernel,
    /// in this order (K = W · 2^(c−1) buckets, X = XYZZ bytes):
    /// `buckets` (K + 1 XYZZ points), `counts` (K + 1 `u32`), `cursors` (K + 1 `u32`, one-pass
    /// scatter only), `list` (`chunk_m` · W `u32`), level-1 partials `part_keys[0]` /
    /// `part_pts[0]` (2 · s1 keys and points, XYZZ accumulation only), the five batch-affine
    /// chain-state slots `chains` (per chain 16 B meta, an affine accumulator, a field element
    /// of prefix product, a 4 B first key, an affine first sum; batch-affine only), the two-pass
    /// staging `two_pass_tmp` (entries then keys, 2 · `chunk_m` · group windows `u32`) and
    /// `coarse` cursors, the level ≥ 2 partials `part_keys[1..3]` / `part_pts[1..3]`
    /// (`lvl_cap` each), and the scan scratch for K + 1 entries. Then zeroes the buckets.
    fn prepare_pippenger<G: MsmGroup>(&mut self, sz: &MsmSizes) -> Result<PippengerBufs> {
        let (dev, st, b) = (&self.dev, &self.stream, &mut self.bufs);
        let xb = G::XYZZ_BYTES;
        let kk = sz.k as usize;
        let chunk_m = sz.chunk_m as usize;
        let s1 = sz.s1;
        let lvl_cap = sz.lvl_cap as usize;
        let buckets = b.buckets.ensure(dev, st, (kk + 1) * xb)?;
        let counts = b.counts.ensure(dev, st, kk + 1)?;
        let cursors = if sz.two_pass.is_none() {
            b.cursors.ensure(dev, st, kk + 1)?
        } else {
            0
        };
        let list = b.list.ensure(dev, st, chunk_m * sz.nw as usize)?;
        let affine = sz.affine;
        let (pk0, pp0) = if affine.is_none() {
            (
                b.part_keys[0].ensure(dev, st, 2 * s1 as usize)?,
                b.part_pts[0].ensure(dev, st, 2 * s1 as usize * xb)?,
            )
        } else {
            (0, 0)
        };
        let mut ch = [0u64; 5];
        if let Some(a) = affine {
            let gch = a.chains() as usize;
            let (ab, fb) = (
                G::LAYOUT.affine_bytes as usize,
                G::LAYOUT.field_bytes() as usize,
            );
            for (p, (slot, bytes)) in ch
                .iter_mut()
                .zip(b.chains.iter_mut().zip([16, ab, fb, 4, ab]))
            {
                *p = slot.ensure(dev, st, gch * bytes)?;
            }
        }
        let two_pass = sz.two_pass.map(|t| -> Result<_> {
            let cap = chunk_m * t.group_windows as usize;
            let tmp = b.two_pass_tmp.ensure(dev, st, 2 * cap)?;
            let ccur = b.coarse.ensure(dev, st, t.coarse_bins as usize)?;
            Ok(TwoPassBufs {
                shape: t,
                tmp_val: tmp,
                tmp_key: tmp + 4 * cap as u64,
                coarse: ccur,
            })
        });
        let two_pass = two_pass.transpose()?;
        let pk1 = b.part_keys[1].ensure(dev, st, lvl_cap)?;
        let pp1 = b.part_pts[1].ensure(dev, st, lvl_cap * xb)?;
        let pk2 = b.part_keys[2].ensure(dev, st, lvl_cap)?;
        let pp2 = b.part_pts[2].ensure(dev, st, lvl_cap * xb)?;
        prepare_scan(dev, st, &mut b.scan_tmp, kk + 1)?;
        zero(st, &mut b.buckets, (kk + 1) * xb)?;
        Ok(PippengerBufs {
            buckets,
            counts,
            cursors,
            list,
            part0: (pk0, pp0),
            chains: ch,
            two_pass,
            part1: (pk1, pp1),
            part2: (pk2, pp2),
        })
    }

    /// Stage 9, per chunk: digit decomposition and bucketing of the chunk's `mc` scalars into
    /// `list` (one `u32` entry per scalar and window whose signed c-bit digit is not 0: the
    /// point index, its sign in bit 31), ordered by bucket key. `cuzk_msm_histogram` counts the
    /// entries per key into `counts` (zeroed first, K + 1 `u32`), an exclusive scan makes them
    /// start offsets, then the scatter: one pass (`counts` copied to `cursors`,
    /// `cuzk_msm_scatter`), or two (per window group: `cuzk_msm_coarse_init` sets the coarse
    /// cursors, `cuzk_msm_scatter_coarse` writes the group's entries and keys into the staging
    /// buffer by coarse bin, `cuzk_msm_scatter_fine` moves them into `list` by key).
    fn bucket_chunk(&mut self, chunk: &Chunk, sz: &MsmSizes, pb: &PippengerBufs) -> Result<()> {
        let (dev, st, b) = (&self.dev, &self.stream, &mut self.bufs);
        let (c, nw) = (sz.c, sz.nw);
        let kk = sz.k as usize;
        let (mc, counts, list) = (chunk.mc, pb.counts, pb.list);
        zero(st, &mut b.counts, kk + 1)?;
        let mut a = KernelArgs::new();
        chunk.push_digit_args(&mut a, 0, nw);
        a.push_ptr(counts);
        launch(st, dev, "cuzk_msm_histogram", blocks(mc, 256), 256, &mut a)?;
        scan_exclusive(st, dev, &mut b.scan_tmp, counts, kk + 1)?;
        if let Some(tp) = pb.two_pass {
            let (t, tmp_val, tmp_key, ccur) = (tp.shape, tp.tmp_val, tp.tmp_key, tp.coarse);
            // by coarse bin into tmp, then by key into the list, a window group at a
            // time (cuda/msm.cuh 2')
            let half = 1u32 << (c - 1);
            let mut w0 = 0u32;
            while w0 < nw {
                let w1 = (w0 + t.group_windows).min(nw);
                let kb0 = w0 * half;
                let bins = (w1 - w0) << (c - 1 - t.lb);
                launch(
                    st,
                    dev,
                    "cuzk_msm_coarse_init",
                    blocks(bins as usize, 256),
                    256,
                    KernelArgs::new()
                        .push_ptr(counts)
                        .push_u32(kb0)
                        .push_u32(t.lb)
                        .push_u32(bins)
                        .push_ptr(ccur),
                )?;
                let mut a = KernelArgs::new();
                chunk.push_digit_args(&mut a, w0, w1);
                a.push_u32(t.lb)
                    .push_ptr(ccur)
                    .push_ptr(tmp_val)
                    .push_ptr(tmp_key);
                launch(
                    st,
                    dev,
                    "cuzk_msm_scatter_coarse",
                    blocks(mc, 256),
                    256,
                    &mut a,
                )?;
                launch(
                    st,
                    dev,
                    "cuzk_msm_scatter_fine",
                    bins,
                    256,
                    KernelArgs::new()
                        .push_ptr(counts)
                        .push_u32(kb0)
                        .push_u32(t.lb)
                        .push_ptr(tmp_val)
                        .push_ptr(tmp_key)
                        .push_ptr(list),
                )?;
                w0 = w1;
            }
        } else {
            copy_d2d(st, &mut b.cursors, &b.counts, kk + 1)?;
            let mut a = KernelArgs::new();
            chunk.push_digit_args(&mut a, 0, nw);
            a.push_ptr(pb.cursors).push_ptr(list);
            launch(st, dev, "cuzk_msm_scatter", blocks(mc, 256), 256, &mut a)?;
        }
        Ok(())
    }

    /// Stage 10, per chunk: level 1 of the bucket accumulation, over `list` into `buckets`
    /// (the first chunk stores run sums, later ones add: `fresh`).
    ///
    /// - Batch-affine ([`MsmSizes::affine`]): `cuzk_msm_affine_init_*` sets the chain states
    ///   (`chains`), `cuzk_msm_accumulate_affine_*_mb<B>` runs `steps` affine steps over
    ///   `chains_per_thread` chains per thread; marks `accumulate`; then
    ///   `cuzk_msm_affine_partials_*` reduces the 2 · chains first and open runs (level 2)
    ///   into `part_*[1]`, directly into the buckets when they fit one segment.
    /// - XYZZ: `cuzk_msm_accumulate_*_mb<B>` over `s1` equal segments, one per thread, writes
    ///   the 2 · s1 runs that cross a segment border into `part_*[0]`; marks `accumulate`.
    ///
    /// Returns where the runs left for the level ≥ 2 passes are ([`Level`]).
    fn accumulate_chunk<G: MsmGroup>(
        &mut self,
        chunk: &Chunk,
        sz: &MsmSizes,
        pb: &PippengerBufs,
        marks: &mut Marks,
    ) -> Result<Level> {
        let (dev, st) = (&self.dev, &self.stream);
        let (k, mb, s1) = (sz.k, sz.mb, sz.s1);
        let (list, counts, buckets, points_ptr) =
            (pb.list, pb.counts, pb.buckets, chunk.inp.points);
        let ch = pb.chains;
        let (pk1, pp1) = pb.part1;
        let fresh = chunk.fresh;
        if let Some(af) = sz.affine {
            // level 1, batch-affine: chain states, then L steps over CH chains per thread
            let gch = af.chains() as u32;
            launch(
                st,
                dev,
                &format!("cuzk_msm_affine_init_{}", G::SUFFIX),
                blocks(gch as usize, 256),
                256,
                KernelArgs::new()
                    .push_ptr(counts)
                    .push_u32(k as u32)
                    .push_u32(gch)
                    .push_u32(af.steps)
                    .push_ptr(ch[0])
                    .push_ptr(ch[3])
                    .push_ptr(ch[4]),
            )?;
            launch(
                st,
                dev,
                &format!("cuzk_msm_accumulate_affine_{}_mb{mb}", G::SUFFIX),
                blocks(af.threads as usize, AFFINE_THREADS),
                AFFINE_THREADS,
                KernelArgs::new()
                    .push_ptr(list)
                    .push_ptr(counts)
                    .push_u32(k as u32)
                    .push_u32(af.threads)
                    .push_u32(af.chains_per_thread)
                    .push_u32(af.steps)
                    .push_ptr(points_ptr)
                    .push_ptr(buckets)
                    .push_ptr(ch[0])
                    .push_ptr(ch[1])
                    .push_ptr(ch[2])
                    .push_ptr(ch[3])
                    .push_ptr(ch[4])
                    .push_u32(fresh),
            )?;
            marks.mark(dev, st, "accumulate")?;
            // level 2 over the 2 G chain slots (first run, open run)
            let n2 = 2 * gch;
            let fin = n2 <= PARTIAL_SEGMENT;
            let (l, s) = if fin {
                (n2, 1)
            } else {
                (PARTIAL_SEGMENT, n2.div_ceil(PARTIAL_SEGMENT))
            };
            launch(
                st,
                dev,
                &format!("cuzk_msm_affine_partials_{}", G::SUFFIX),
                blocks(s as usize, G::PT_THREADS),
                G::PT_THREADS,
                KernelArgs::new()
                    .push_ptr(ch[3])
                    .push_ptr(ch[4])
                    .push_ptr(ch[0])
                    .push_ptr(ch[1])
                    .push_u32(n2)
                    .push_u32(l)
                    .push_u32(s)
                    .push_ptr(pk1)
                    .push_ptr(pp1)
                    .push_ptr(buckets)
                    .push_u32(fin as u32)
                    .push_u32(k as u32)
                    .push_u32(fresh),
            )?;
            Ok(Level {
                count: 2 * s,
                cur: (pk1, pp1),
                toggle: true,
                done: fin,
            })
        } else {
            let (pk0, pp0) = pb.part0;
            // level 1: one segment per thread
            launch(
                st,
                dev,
                &format!("cuzk_msm_accumulate_{}_mb{mb}", G::SUFFIX),
                blocks(s1 as usize, G::PT_THREADS),
                G::PT_THREADS,
                KernelArgs::new()
                    .push_ptr(list)
                    .push_ptr(counts)
                    .push_u32(k as u32)
                    .push_u32(s1)
                    .push_ptr(points_ptr)
                    .push_ptr(buckets)
                    .push_ptr(pk0)
                    .push_ptr(pp0)
                    .push_u32(fresh),
            )?;
            marks.mark(dev, st, "accumulate")?;
            Ok(Level {
                count: 2 * s1,
                cur: (pk0, pp0),
                toggle: false,
                done: false,
            })
        }
    }

    /// Stage 11, per chunk: levels ≥ 2 of the accumulation. Each `cuzk_msm_partials_*` pass
    /// cuts the `count` runs left at `level.cur` into segments of [`PARTIAL_SEGMENT`] and
    /// writes the runs that still cross a border into the other of `part_*[1]` / `part_*[2]`
    /// (ping-pong, `lvl_cap` entries each), until one segment is left, whose pass adds into the
    /// buckets (`fin`). Nothing to do when level 1 already finished (`level.done`).
    fn reduce_partials<G: MsmGroup>(
        &mut self,
        chunk: &Chunk,
        sz: &MsmSizes,
        pb: &PippengerBufs,
        level: Level,
    ) -> Result<()> {
        let (dev, st) = (&self.dev, &self.stream);
        let k = sz.k;
        let (buckets, fresh) = (pb.buckets, chunk.fresh);
        let ((pk1, pp1), (pk2, pp2)) = (pb.part1, pb.part2);
        let Level {
            mut count,
            mut cur,
            mut toggle,
            done,
        } = level;
        // levels >= 2 until a single segment remains
        let mut more = !done;
        while more {
            let fin = count <= PARTIAL_SEGMENT;
            let (l, s) = if fin {
                (count, 1)
            } else {
                (PARTIAL_SEGMENT, count.div_ceil(PARTIAL_SEGMENT))
            };
            let out = if toggle { (pk2, pp2) } else { (pk1, pp1) };
            launch(
                st,
                dev,
                &format!("cuzk_msm_partials_{}", G::SUFFIX),
                blocks(s as usize, G::PT_THREADS),
                G::PT_THREADS,
                KernelArgs::new()
                    .push_ptr(cur.0)
                    .push_ptr(cur.1)
                    .push_u32(count)
                    .push_u32(l)
                    .push_u32(s)
                    .push_ptr(out.0)
                    .push_ptr(out.1)
                    .push_ptr(buckets)
                    .push_u32(fin as u32)
                    .push_u32(k as u32)
                    .push_u32(fresh),
            )?;
            more = !fin;
            cur = out;
            toggle = !toggle;
            count = 2 * s;
        }
        Ok(())
    }

    /// Stage 12 (when m > 0), after every chunk: the window sums `sum_b b · B_b`.
    /// `cuzk_msm_bucket_reduce_*` runs `per_w` chunked running sums of `red_chunk` buckets per
    /// window into `sums[0]` (W · `per_w` XYZZ points), the tree reduces each window's to one
    /// point, converted to Jacobian into the result slot's first W entries. Marks
    /// `window_sums`.
    fn window_sums<G: MsmGroup>(
        &mut self,
        sz: &MsmSizes,
        pb: &PippengerBufs,
        out: &Outputs,
        marks: &mut Marks,
    ) -> Result<()> {
        let (dev, st) = (&self.dev, &self.stream);
        let (c, nw, per_w) = (sz.c, sz.nw, sz.per_w);
        // window sums: chunked running sums, then a tree per window
        let nthreads = nw * per_w;
        launch(
            st,
            dev,
            &format!("cuzk_msm_bucket_reduce_{}", G::SUFFIX),
            blocks(nthreads as usize, G::PT_THREADS),
            G::PT_THREADS,
            KernelArgs::new()
                .push_ptr(pb.buckets)
                .push_u32(nw)
                .push_u32(c)
                .push_u32(sz.red_chunk)
                .push_ptr(out.sums[0]),
        )?;
        let wsum = reduce_tree::<G>(st, dev, out.sums, nw, per_w)?;
        to_jacobian::<G>(st, dev, wsum, nw, out.result)?;
        marks.mark(dev, st, "window_sums")?;
        Ok(())
    }

    /// Stage 13: hands the result over to [`finish`](Self::finish). Records the slot's event
    /// after the last kernel and marks the slot busy with this MSM's window layout (what
    /// `finish`, or a later [`park_slot`](Self::park_slot), needs to read and combine it); with
    /// profiling, waits for the stream and fills `stats.stage_ms`; stores `stats` as
    /// [`MsmWorkspace::stats`] and returns the ticket.
    fn hand_off<G: MsmGroup>(
        &mut self,
        slot_i: usize,
        id: u64,
        marks: Marks,
        mut stats: MsmStats,
    ) -> Result<MsmTicket> {
        let st = &self.stream;
        let (c, nw) = (stats.window_bits, stats.windows);
        let slot = &mut self.slots[slot_i];
        slot.event.record(st)?;
        slot.busy = Some(Pending { id, c, nw });
        stats.stage_ms = marks.collect(st)?;
        self.stats = stats;
        Ok(MsmTicket {
            slot: slot_i,
            id,
            group: G::SUFFIX,
        })
    }

    /// Waits for the MSM of `ticket` and returns its result (combined on the host with blstrs).
    ///
    /// Errors: [`Error::Internal`] if the ticket is of the other group, belongs to another
    /// workspace or was already consumed; [`Error::Cuda`] for kernel failures.
    pub fn finish<G: MsmGroup>(&mut self, ticket: MsmTicket) -> Result<G::Projective> {
        if ticket.group != G::SUFFIX {
            return Err(Error::Internal(format!(
                "msm ticket of {} finished as {}",
                ticket.group,
                G::SUFFIX
            )));
        }
        if let Some(pos) = self.parked.iter().position(|(p, _)| p.id == ticket.id) {
            let (p, bytes) = self.parked.swap_remove(pos);
            return Ok(combine::<G>(&bytes, p.c, p.nw));
        }
        let slot = &mut self.slots[ticket.slot];
        match slot.busy {
            Some(p) if p.id == ticket.id => {
                let bytes = read_slot(
                    slot,
                    (p.nw as usize + 1) * std::mem::size_of::<G::Projective>(),
                )?;
                slot.busy = None;
                Ok(combine::<G>(&bytes, p.c, p.nw))
            }
            _ => Err(Error::Internal(format!(
                "msm ticket {} is not pending in this workspace",
                ticket.id
            ))),
        }
    }

    /// Reads back an unfinished result occupying `slot` so that the slot can be reused.
    fn park_slot(&mut self, slot: usize) -> Result<()> {
        let s = &mut self.slots[slot];
        if let Some(p) = s.busy {
            let bytes = read_slot(s, (p.nw as usize + 1) * G_PROJ_BYTES_MAX)?;
            s.busy = None;
            self.parked.push((p, bytes));
        }
        Ok(())
    }
}

/// The Pippenger part of a streamed MSM's passes, gathered for one MSM after the last pass.
///
/// A witness is mostly zeros and ones (a 32 GiB PoRep partition: 1.70 M of 130.17 M aux values
/// are neither): a pass of a streamed MSM sums its ones by a reduction, and its few other
/// scalars would pay a whole Pippenger run (bucket sort, accumulation of short lists, window
/// sums) for a handful of points per bucket. With a sink
/// ([`MsmWorkspace::start_gathering`]) each pass copies those scalars (canonical form, 32 B)
/// and their points (96 B G1, 192 B G2) into it instead, and [`GatherSink::drain`] runs one
/// Pippenger MSM over all of them, as long as the points are resident — the bucket method's
/// cost once per query rather than once per pass. A pass whose part does not fit the room left
/// runs its own Pippenger part as before, so any witness gives the same sum.
///
/// Memory: `capacity` × (affine point + 32 B) ([`layout::gather_sink_bytes`]), taken from the
/// arena given. The drain's MSM has at most `capacity` scalars, so a workspace sized for passes
/// of at least `capacity` points (any density) holds it without growing.
pub struct GatherSink<G: MsmGroup> {
    points: DeviceBuffer<G::Affine>,
    scalars: DeviceBuffer<CanonicalScalar>,
    fill: usize,
    ordinal: usize,
}

impl<G: MsmGroup> GatherSink<G> {
    /// An empty sink of `capacity` entries (at least 1) on `dev`, in `arena` when given.
    ///
    /// Errors: [`Error::OutOfDeviceMemory`] (the arena or the device), [`Error::Cuda`].
    pub fn new(dev: &Arc<Device>, arena: Option<&Arena>, capacity: usize) -> Result<Self> {
        let capacity = capacity.max(1);
        Ok(GatherSink {
            points: dev.alloc_in::<G::Affine>(arena, capacity)?,
            scalars: dev.alloc_in::<CanonicalScalar>(arena, capacity)?,
            fill: 0,
            ordinal: dev.ordinal(),
        })
    }

    /// Entries the sink holds at most.
    pub fn capacity(&self) -> usize {
        self.scalars.len()
    }

    /// Entries gathered since the last drain.
    // Read by the tests and benches; the prover drains without asking.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn len(&self) -> usize {
        self.fill
    }

    /// Whether nothing was gathered since the last drain.
    // Read by the tests and benches; the prover drains without asking.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.fill == 0
    }

    fn room(&self) -> usize {
        self.capacity() - self.fill
    }

    /// Σ of the gathered scalars times their points, by one MSM on `ws` (the workspace that
    /// gathered them: its stream orders the copies before the sum), and empties the sink. The
    /// identity when it is empty.
    ///
    /// Errors: those of [`MsmWorkspace::msm`]; [`Error::Internal`] for a workspace on another
    /// device. After an error of a gathering pass or of the drain, the sink's sum is lost:
    /// the caller's MSM is to be run again from its first pass.
    pub fn drain(&mut self, ws: &mut MsmWorkspace) -> Result<G::Projective> {
        if self.ordinal != ws.dev.ordinal() {
            return Err(Error::internal("a gather sink drained on another device"));
        }
        let n = std::mem::take(&mut self.fill);
        if n == 0 {
            return Ok(G::Projective::identity());
        }
        ws.msm::<G>(
            Points::Device(self.points.slice(0..n)?),
            Scalars::DeviceCanonical(self.scalars.slice(0..n)?),
            None,
        )
    }
}

/// Upper bound of a Jacobian point's size over both groups (G2: 288 bytes); used to park
/// results without knowing the group of the MSM that wrote them.
const G_PROJ_BYTES_MAX: usize = 288;

/// Waits for the slot's event and copies up to `want` bytes of it to the host.
fn read_slot(slot: &ResultSlot, want: usize) -> Result<Vec<u8>> {
    slot.event.synchronize()?;
    let buf = slot
        .buf
        .0
        .as_ref()
        .ok_or_else(|| Error::internal("msm result slot has no buffer"))?;
    let len = want.min(buf.len());
    let mut v = vec![0u8; len];
    buf.slice(0..len)?.copy_to_host(&mut v)?;
    Ok(v)
}

/// `sum_w 2^(c w) W_w + ones` from the W + 1 Jacobian points in `bytes` (blst layout).
fn combine<G: MsmGroup>(bytes: &[u8], c: u32, nw: u32) -> G::Projective {
    let sz = std::mem::size_of::<G::Projective>();
    let pt = |i: usize| -> G::Projective {
        // SAFETY: bytes holds (nw + 1) * sz bytes written by cuzk_msm_to_jacobian_* in the
        // blst_p1 / blst_p2 layout that G1Projective / G2Projective wrap (repr(transparent));
        // read_unaligned because a Vec<u8> is only byte-aligned.
        unsafe {
            std::ptr::read_unaligned(bytes[i * sz..(i + 1) * sz].as_ptr() as *const G::Projective)
        }
    };
    let mut acc = G::Projective::identity();
    for w in (0..nw as usize).rev() {
        for _ in 0..c {
            acc = acc.double();
        }
        acc += pt(w);
    }
    acc + pt(nw as usize)
}

/// Number of blocks of `threads` covering `n` items (at least 1).
fn blocks(n: usize, threads: u32) -> u32 {
    (n.div_ceil(threads as usize)).max(1) as u32
}

/// Launches a kernel of the embedded module by name.
fn launch(
    st: &Stream,
    dev: &Arc<Device>,
    name: &str,
    grid: u32,
    block: u32,
    args: &mut KernelArgs,
) -> Result<()> {
    let k = dev.kernel(name)?;
    // SAFETY: every call site pushes the arguments in the order and with the C types of the
    // kernel's signature in cuda/msm.cu (pointers as u64 device addresses of buffers owned by the
    // workspace or borrowed for the duration of the MSM, which the caller keeps alive until the
    // result is read: `finish` waits for the stream's event before the buffers can change).
    unsafe { st.launch(&k, name, grid, block, 0, args) }
}

/// Zeroes the first `len` elements of a slot's buffer on the stream.
fn zero<T: DeviceRepr>(st: &Stream, slot: &mut Slot<T>, len: usize) -> Result<()> {
    if let Some(b) = slot.0.as_mut() {
        b.slice_mut(0..len)?.zero(st)?;
    }
    Ok(())
}

/// Copies `len` elements between two slots on the stream.
fn copy_d2d<T: DeviceRepr>(
    st: &Stream,
    dst: &mut Slot<T>,
    src: &Slot<T>,
    len: usize,
) -> Result<()> {
    match (dst.0.as_mut(), src.0.as_ref()) {
        (Some(d), Some(s)) => d.slice_mut(0..len)?.copy_from_device(&s.slice(0..len)?, st),
        _ => Err(Error::internal("msm: copy between unallocated buffers")),
    }
}

/// Uploads `data` into a slot (synchronous copy) and returns its device pointer.
fn upload<T: DeviceRepr>(
    dev: &Arc<Device>,
    st: &Stream,
    slot: &mut Slot<T>,
    data: &[T],
) -> Result<u64> {
    let ptr = slot.ensure(dev, st, data.len())?;
    if let Some(b) = slot.0.as_mut() {
        b.slice_mut(0..data.len())?.copy_from_host(data)?;
    }
    Ok(ptr)
}

fn as_u64_words_scalar(s: &[Scalar]) -> &[u64] {
    // SAFETY: blstrs::Scalar is #[repr(transparent)] over blst_fr { l: [u64; 4] }.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u64, s.len() * 4) }
}

fn as_u64_words_canonical(s: &[CanonicalScalar]) -> &[u64] {
    // SAFETY: CanonicalScalar is #[repr(transparent)] over [u64; 4].
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u64, s.len() * 4) }
}

fn as_bytes<A: DeviceRepr>(p: &[A]) -> &[u8] {
    // SAFETY: DeviceRepr types are plain data without padding that matters; any initialised
    // value can be viewed as bytes.
    unsafe { std::slice::from_raw_parts(p.as_ptr() as *const u8, std::mem::size_of_val(p)) }
}

/// Block counts of the levels of a multi-level scan of `len` elements.
fn scan_levels(len: usize) -> Vec<usize> {
    let mut levels = Vec::new();
    let mut l = len;
    loop {
        let nb = l.div_ceil(SCAN_BLOCK).max(1);
        levels.push(nb);
        if nb == 1 {
            return levels;
        }
        l = nb;
    }
}

/// Makes the scan scratch buffer large enough for a scan of `len` elements.
fn prepare_scan(dev: &Arc<Device>, st: &Stream, tmp: &mut Slot<u32>, len: usize) -> Result<u64> {
    tmp.ensure(dev, st, scan_levels(len).iter().sum())
}

/// In-place exclusive scan of `len` u32 at `data` (wrapping sums): per-block scans, then the
/// block sums scanned recursively and added back.
fn scan_exclusive(
    st: &Stream,
    dev: &Arc<Device>,
    tmp: &mut Slot<u32>,
    data: u64,
    len: usize,
) -> Result<()> {
    let levels = scan_levels(len);
    let base = prepare_scan(dev, st, tmp, len)?;
    let mut ptrs = vec![data];
    let mut lens = vec![len];
    let mut off = 0u64;
    for &nb in &levels {
        ptrs.push(base + 4 * off);
        lens.push(nb);
        off += nb as u64;
    }
    for i in 0..levels.len() {
        launch(
            st,
            dev,
            "cuzk_msm_scan_block",
            levels[i] as u32,
            256,
            KernelArgs::new()
                .push_ptr(ptrs[i])
                .push_u32(lens[i] as u32)
                .push_ptr(ptrs[i + 1]),
        )?;
    }
    for i in (0..levels.len()).rev() {
        if levels[i] > 1 {
            launch(
                st,
                dev,
                "cuzk_msm_scan_add",
                blocks(lens[i], 256),
                256,
                KernelArgs::new()
                    .push_ptr(ptrs[i])
                    .push_u32(lens[i] as u32)
                    .push_ptr(ptrs[i + 1]),
            )?;
        }
    }
    Ok(())
}

/// Reduces `nseg` segments of `seg_len` XYZZ points at `bufs[0]` to one point each, ping-ponging
/// between the two buffers (both pre-sized: `bufs[1]` holds at least half of `bufs[0]`'s points,
/// and each pass shrinks the count by `RED_THREADS * REDUCE_PER_THREAD >= 2`). Returns the device
/// pointer of the `nseg` results.
fn reduce_tree<G: MsmGroup>(
    st: &Stream,
    dev: &Arc<Device>,
    bufs: [u64; 2],
    nseg: u32,
    seg_len: u32,
) -> Result<u64> {
    let g = G::RED_THREADS * REDUCE_PER_THREAD;
    let mut cur = 0;
    let mut len = seg_len;
    while len > 1 {
        let bps = len.div_ceil(g);
        launch(
            st,
            dev,
            &format!("cuzk_msm_reduce_{}", G::SUFFIX),
            nseg * bps,
            G::RED_THREADS,
            KernelArgs::new()
                .push_ptr(bufs[cur])
                .push_u32(len)
                .push_u32(g)
                .push_ptr(bufs[cur ^ 1]),
        )?;
        cur ^= 1;
        len = bps;
    }
    Ok(bufs[cur])
}

/// Converts `count` XYZZ points at `src` into Jacobian points at `dst` (blst layout).
fn to_jacobian<G: MsmGroup>(
    st: &Stream,
    dev: &Arc<Device>,
    src: u64,
    count: u32,
    dst: u64,
) -> Result<()> {
    launch(
        st,
        dev,
        &format!("cuzk_msm_to_jacobian_{}", G::SUFFIX),
        blocks(count as usize, 64),
        64,
        KernelArgs::new()
            .push_ptr(src)
            .push_u32(count)
            .push_ptr(dst),
    )
}

/// G1 MSM on `dev` with a temporary workspace (allocated and freed in the call).
/// `points.len() >= scalars.len()`; see [`MsmWorkspace::start`] for the rules and errors.
#[cfg(any(test, feature = "internals"))]
pub fn msm_g1(
    dev: &Arc<Device>,
    points: Points<'_, G1Affine>,
    scalars: Scalars<'_>,
) -> Result<G1Projective> {
    MsmWorkspace::new(dev)?.msm_g1(points, scalars, None)
}

/// G2 MSM on `dev` with a temporary workspace (allocated and freed in the call).
/// `points.len() >= scalars.len()`; see [`MsmWorkspace::start`] for the rules and errors.
#[cfg(any(test, feature = "internals"))]
pub fn msm_g2(
    dev: &Arc<Device>,
    points: Points<'_, G2Affine>,
    scalars: Scalars<'_>,
) -> Result<G2Projective> {
    MsmWorkspace::new(dev)?.msm_g2(points, scalars, None)
}

#[cfg(any(test, feature = "test-hooks"))]
/// Point operations exposed for `tests/gpu_curve.rs` (kernel `cuzk_curve_test_g1` / `_g2`): each
/// runs the device formulas of `cuda/curve.cuh` on affine inputs and returns Jacobian results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CurveOp {
    /// `a + b` with both inputs lifted to XYZZ (add-2008-s).
    Add = 0,
    /// `2a` (dbl-2008-s-1).
    Double = 1,
    /// `a + b` by mixed addition (madd-2008-s).
    MixedAdd = 2,
    /// `a - b` by mixed addition with the negated input.
    MixedSub = 3,
    /// `a + a` by mixed addition (must take the doubling branch).
    MixedDouble = 4,
}

#[cfg(any(test, feature = "test-hooks"))]
/// Runs `op` element-wise on `a` and `b` (same length) on `dev`; synchronous.
///
/// Errors: [`Error::InvalidInput`] when the lengths differ, [`Error::Cuda`] /
/// [`Error::OutOfDeviceMemory`] from the device.
pub fn curve_op<G: MsmGroup>(
    dev: &Arc<Device>,
    op: CurveOp,
    a: &[G::Affine],
    b: &[G::Affine],
) -> Result<Vec<G::Projective>> {
    if a.len() != b.len() {
        return Err(Error::InvalidInput(format!(
            "curve_op: {} and {} points",
            a.len(),
            b.len()
        )));
    }
    if a.is_empty() {
        return Ok(Vec::new());
    }
    let st = dev.stream()?;
    let da = dev.upload(a)?;
    let db = dev.upload(b)?;
    let out = dev.alloc::<G::Projective>(a.len())?;
    launch(
        &st,
        dev,
        &format!("cuzk_curve_test_{}", G::SUFFIX),
        blocks(a.len(), 64),
        64,
        KernelArgs::new()
            .push_u32(op as u32)
            .push_ptr(da.device_ptr())
            .push_ptr(db.device_ptr())
            .push_u32(a.len() as u32)
            .push_ptr(out.device_ptr()),
    )?;
    st.synchronize()?;
    out.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_bits_grow_with_m() {
        let mut last = 0;
        for k in [0usize, 1, 10, 1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 26] {
            let c = window_bits_for(k, &G1_LAYOUT);
            assert!((2..=21).contains(&c));
            assert!(c >= last, "c({k}) = {c} < {last}");
            last = c;
        }
    }

    #[test]
    fn canonical_scalar_of_small_values() {
        assert_eq!(
            CanonicalScalar::from_scalar(&Scalar::from(5u64)).0,
            [5, 0, 0, 0]
        );
        let minus_one = -Scalar::from(1u64);
        assert_eq!(
            CanonicalScalar::from_scalar(&minus_one).0,
            [
                0xffffffff00000000,
                0x53bda402fffe5bfe,
                0x3339d80809a1d805,
                0x73eda753299d7d48
            ]
        );
    }
}
