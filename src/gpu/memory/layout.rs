//! Device-memory layouts: how many bytes each buffer-owning GPU operation needs for a shape.
//!
//! The functions here are the ones the GPU code sizes its buffers with (the MSM workspace calls
//! [`MsmSizes::new`] for every MSM it runs), and the allocator's tier plans
//! ([`crate::gpu::memory::alloc`]) are sums of them; so a plan describes what is allocated, by
//! construction. Plain Rust, compiled and tested without CUDA.
//!
//! Every buffer is counted rounded up to [`ALIGN`] bytes (the granularity an
//! [`Arena`](crate::gpu::memory::alloc::Arena) counts in).

use crate::error::{Error, Result};

/// Granularity, in bytes, in which device buffers are counted (256 B, `cuMemAlloc`'s alignment).
pub const ALIGN: u64 = 256;

/// `bytes` rounded up to [`ALIGN`].
pub const fn align_up(bytes: u64) -> u64 {
    bytes.div_ceil(ALIGN).saturating_mul(ALIGN)
}

/// Bytes of one BLS12-381 scalar-field element (`Fr`, 4 × 64-bit limbs).
pub const FR_BYTES: u64 = 32;

/// Sizes and launch constants of one group of the MSM (shared with `cuda/msm.cu`'s launches in
/// `gpu::kernels::msm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupLayout {
    /// `g1` / `g2` (kernel name suffix).
    pub name: &'static str,
    /// Bytes of one affine point (blst layout).
    pub affine_bytes: u64,
    /// Bytes of one Jacobian point (blst layout), the MSM's result type.
    pub jacobian_bytes: u64,
    /// Bytes of one XYZZ bucket point on the device.
    pub xyzz_bytes: u64,
    /// Threads per block of the point kernels.
    pub pt_threads: u32,
    /// Threads per block of the tree reduction.
    pub red_threads: u32,
    /// Occupancy variants of the accumulation kernel compiled in `cuda/msm.cu`.
    pub min_blocks: &'static [u32],
    /// The default variant below 2^`min_blocks_switch_log2` Pippenger scalars, and from there on.
    pub default_min_blocks: (u32, u32),
    /// Where the default occupancy variant switches (log2 of the Pippenger scalars).
    pub min_blocks_switch_log2: u32,
    /// Cost of one bucket (its flush in the accumulation, its share of the running sums), in
    /// tenths of one mixed addition: the window cost model of [`window_bits_for`].
    pub bucket_cost_tenths: u32,
    /// Occupancy variants of the batch-affine kernel compiled in `cuda/msm.cu`
    /// (`cuzk_msm_accumulate_affine_<name>_mb<B>`).
    pub affine_min_blocks: &'static [u32],
    /// The batch-affine variant used when [`MsmLimits::affine_min_blocks`] is `None`.
    pub affine_default_min_blocks: u32,
    /// Shortest bucket list (entries) accumulated batch-affine by default (with
    /// [`Accumulation::BatchAffine`] and [`MsmLimits::affine_min_list`] unset).
    pub affine_min_list: u64,
}

impl GroupLayout {
    /// Bytes of one coordinate field element, half an affine point (`Fp` 48 B, `Fp2` 96 B).
    pub const fn field_bytes(&self) -> u64 {
        self.affine_bytes / 2
    }

    /// Device bytes of one batch-affine chain: its bookkeeping (16 B), accumulator (an affine
    /// point), prefix product (a field element), first-run key (4 B) and sum (an affine point):
    /// 260 B for G1, 500 B for G2.
    #[cfg(any(test, feature = "internals"))]
    pub const fn affine_chain_bytes(&self) -> u64 {
        16 + self.affine_bytes + self.field_bytes() + 4 + self.affine_bytes
    }

    /// The accumulation variant used by default for `m` Pippenger scalars.
    pub fn default_min_blocks(&self, m: u64) -> u32 {
        if m >= 1 << self.min_blocks_switch_log2 {
            self.default_min_blocks.1
        } else {
            self.default_min_blocks.0
        }
    }
}

/// G1 (points over Fp): 96 B affine, 144 B Jacobian, 192 B XYZZ.
pub const G1_LAYOUT: GroupLayout = GroupLayout {
    name: "g1",
    affine_bytes: 96,
    jacobian_bytes: 144,
    xyzz_bytes: 192,
    pt_threads: 128,
    red_threads: 128,
    min_blocks: &[3, 4, 5],
    // H200, BENCHMARKS.md: 4 blocks fastest at 2^24, 5 at 2^26 and 2^27 (a 6-block variant,
    // tried in *run N5*, was 8-36 % slower at every size: spills).
    default_min_blocks: (4, 5),
    min_blocks_switch_log2: 25,
    // H200 sweeps of c - 2 ..= c + 3: c = 20 fastest at 2^24, 2^26 and 2^27 (c = 18 within 0.5 %
    // at 2^26). Past it the bucketing's histogram/scatter atomics leave the 50 MB L2
    // (13 windows x 2^20 counters at c = 21: 2.3x the bucketing time), and the one window fewer
    // at c = 22, 23 gains less in accumulation than the bucketing and window sums lose.
    bucket_cost_tenths: 44,
    affine_min_blocks: &[3, 4, 5],
    // H200, 2^27: 4 blocks 1092 ms, 3 1102, 5 1119 (spills: 188 / 72 / 552 B per thread).
    affine_default_min_blocks: 4,
    affine_min_list: AFFINE_MIN_LIST,
};

/// G2 (points over Fp2): 192 B affine, 288 B Jacobian, 384 B XYZZ.
pub const G2_LAYOUT: GroupLayout = GroupLayout {
    name: "g2",
    affine_bytes: 192,
    jacobian_bytes: 288,
    xyzz_bytes: 384,
    pt_threads: 64,
    red_threads: 64,
    min_blocks: &[4, 6],
    // H200, BENCHMARKS.md: 4 blocks fastest at 2^22 (144 vs 161 ms), 6 at 2^24 (788 vs 886 ms).
    default_min_blocks: (4, 6),
    min_blocks_switch_log2: 23,
    // H200 sweeps: c = 16 fastest at 2^22, c = 19 at 2^24 (733 ms vs 780 at c = 20), which a
    // bucket cost between 5.4 and 9.9 mixed additions selects (the G2 flush moves 384 B).
    bucket_cost_tenths: 75,
    // 128 threads of Fp2 state: 255 registers for 2 blocks, 168 for 3 (both spill ~1 KB).
    affine_min_blocks: &[2, 3],
    affine_default_min_blocks: AFFINE_MIN_BLOCKS_G2,
    affine_min_list: AFFINE_MIN_LIST_G2,
};

/// Largest window the cost model picks (bits): larger ones were slower on the H200 (see
/// `G1_LAYOUT.bucket_cost_tenths`).
pub const MAX_AUTO_WINDOW_BITS: u32 = 21;

/// Window size (bits) for `m` Pippenger scalars of group `g`: minimises `m W + k W 2^(c-1)`
/// (bucket additions plus the cost of each bucket, `k` = `g.bucket_cost_tenths / 10` mixed
/// additions: its flush in the accumulation and its share of the running sums), with
/// `W = floor(255 / c) + 1`, for c in 2..=21. The cap keeps the bucket array at most 13 x 2^20
/// XYZZ points (2.6 GB for G1): on an H200, c = 22 at n = 2^27 cost a 48-156 ms window stage,
/// more than it saved in the accumulation. Non-decreasing in `m`.
pub fn window_bits_for(m: usize, g: &GroupLayout) -> u32 {
    let k = g.bucket_cost_tenths as f64 / 10.0;
    let mut best = (f64::MAX, 2u32);
    for c in 2..=MAX_AUTO_WINDOW_BITS {
        let w = (255 / c + 1) as f64;
        let cost = m as f64 * w + k * w * (1u64 << (c - 1)) as f64;
        if cost < best.0 {
            best = (cost, c);
        }
    }
    best.1
}

/// How the level-1 bucket accumulation of an MSM adds its points (G1 and G2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Accumulation {
    /// One XYZZ accumulator per thread, mixed additions (madd-2008-s): `cuzk_msm_accumulate_*`.
    Xyzz,
    /// Affine additions sharing one inversion per step among a block's [`AFFINE_THREADS`]
    /// threads of up to [`AFFINE_CHAINS_PER_THREAD`] chains each (Montgomery's trick, per
    /// thread and then across the block; `cuda/msm_affine.cuh`) when the list has at least the
    /// group's [`GroupLayout::affine_min_list`] entries ([`AFFINE_MIN_LIST`] for G1,
    /// [`AFFINE_MIN_LIST_G2`] for G2), else as `Xyzz`. Costs
    /// [`GroupLayout::affine_chain_bytes`] of device memory per chain (260 B in G1, 500 B in
    /// G2) of 65 to ~260 list entries: 1-4 B (G1) or 2-8 B (G2) per list entry.
    #[default]
    BatchAffine,
}

impl Accumulation {
    /// Parses `xyzz` / `affine` (the values of `CUZK_MSM_ACCUMULATION`).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "xyzz" => Some(Accumulation::Xyzz),
            "affine" | "batch-affine" => Some(Accumulation::BatchAffine),
            _ => None,
        }
    }
}

/// Most chains per thread of the batch-affine accumulation: the additions that share one
/// inversion. More chains share the step's inversion among more additions but leave more
/// partial sums (two per chain, summed by level 2) and more chain state. With Fermat's
/// inversion in every thread (~485 products per thread and step; seventh session, before the
/// block shared it) many chains won: at 2^27, 403 chains of 65 entries 869 ms against 128 of
/// 202 1,036 ms. With the binary one (~55 products' worth,
/// `Fp::inverse_vartime`) the curve is flat and the partials decide (H200, G1, ms, same call:
/// 2^26 at 48 / 64 / 80 / **100** / 128 / 201 chains 416.2 / 410.9 / 406.7 / **403.6** / 402.9
/// / 404.1; 2^27 at 100 / 128 / 403: **783.2** / 781.8 / 785.0; G2 2^24 at 100 / 108: 310.0 /
/// 310.0-310.2; BENCHMARKS.md, session of 2026-12-03): 100 keeps the time and cuts the chain states
/// to a quarter (260 B per G1 chain: 1.76 GB at 2^27 instead of 7.1; 500 B per G2 chain,
/// [`GroupLayout::affine_chain_bytes`]). Below ~2^25 G1 points the list gives fewer chains
/// per thread at [`AFFINE_MIN_STEPS`] entries each anyway.
pub const AFFINE_CHAINS_PER_THREAD: u32 = 100;
/// List entries per batch-affine chain the shape aims at, at least (shorter lists at
/// [`AFFINE_MIN_CHAINS`] per thread get fewer threads): each chain leaves two partial sums, and
/// its state costs [`GroupLayout::affine_chain_bytes`].
pub const AFFINE_MIN_STEPS: u64 = 64;
/// Fewest batch-affine chains per thread [`AffineShape::for_list`] picks (unless the configured
/// most is lower).
pub const AFFINE_MIN_CHAINS: u64 = 32;
/// Smallest G1 list (entries) accumulated batch-affine (2^26 = 67,108,864); shorter lists leave
/// too few chains per thread for the threads a device needs (the 132-SM wave of 67,584 threads
/// at 32 chains of 64 entries wants 2^27), and use the XYZZ kernel. With the step's inversion
/// shared by the block (`block_inverse`) and binary (`Fp::inverse_vartime`), the H200 measured
/// batch-affine ahead from G1 2^22 (67 M entries, half the wave): 45.9 against 49.6 ms; the
/// PoRep mix at 2^27 (75 M) 86.9 against 89.5, and the partition's L and A MSMs faster
/// (0.087 / 0.096-0.103 s against 0.093 / 0.104-0.116); behind at 2^21 (34 M): 37.8 against
/// 28.5 ms (BENCHMARKS.md, session of 2026-12-03; with Fermat's inversion the crossover was
/// above 2^22, at 3 x 2^25).
pub const AFFINE_MIN_LIST: u64 = 1 << 26;
/// Threads per block of the batch-affine kernel (`AFFINE_THREADS` in cuda/msm.cu).
pub const AFFINE_THREADS: u32 = 128;
/// Smallest G2 list (entries) accumulated batch-affine (2^25 = 33,554,432). G2's kernel runs 2
/// blocks of [`AFFINE_THREADS`] per multiprocessor ([`AFFINE_MIN_BLOCKS_G2`]), a wave of 33,792
/// threads, which [`AFFINE_MIN_CHAINS`] chains of [`AFFINE_MIN_STEPS`] entries fill at 2^26
/// entries; the XYZZ mixed addition in Fp2 costs so much more (spilling at 255 registers) that
/// the H200 measured batch-affine ahead already at half a wave: G2 2^21 (c = 16, 33.5 M
/// entries) 73.6 against 82.1 ms, 2^22 92.6 against 141.6, 2^24 310 against 721 (BENCHMARKS.md,
/// session of 2026-12-03).
pub const AFFINE_MIN_LIST_G2: u64 = 1 << 25;
/// Default occupancy variant of the G2 batch-affine kernel (blocks per multiprocessor).
pub const AFFINE_MIN_BLOCKS_G2: u32 = 2;

/// Shortest bucket list (entries) scattered in two passes (coarse bin, then key: `cuda/msm.cuh`
/// 2'). H200: two passes win at 2^24 random scalars (218 M entries: bucketing 17.4 vs 21.6 ms)
/// and lose on the PoRep mix at 2^27 (75 M entries: 5.7 vs 4.3 ms), so the crossover is taken
/// at 2^27 entries. (A coarse bin is one block's work in the second pass: on a long list of
/// equal or tightly clustered scalars that block moves most of a window alone — correct, and
/// slower than one pass; the prover's long lists, the H MSM's, are uniform.)
pub const TWO_PASS_MIN_LIST: u64 = 1 << 27;
/// Windows per group of the two-pass scatter: its staging buffer holds one group's entries,
/// 8 B each (24 B per scalar, 3.2 GB at 2^27 against the list's 7 GB); each group reads the
/// scalars once more.
pub const TWO_PASS_GROUP_WINDOWS: u32 = 3;
/// Most coarse bins per window of the two-pass scatter's first pass (the top bits of the
/// bucket index): 2^14, so that its per-entry atomics spread over 3 × 2^14 counters (H200,
/// 2^26: with 2^10 bins they were the limit, 14 ms per group) while the bins' fronts (two
/// sectors each, 3 MiB) stay in the L2, and each bin's list range is small (4 Ki entries at
/// 2^26) for the second pass.
pub const TWO_PASS_COARSE_BITS: u32 = 14;
/// Most bucket-index bits below a coarse bin (`CUZK_TWO_PASS_FINE_BITS` in cuda/msm.cuh): the
/// second pass keeps a bin's 2^9 cursors in shared memory. Windows of up to 24 bits fit.
pub const TWO_PASS_FINE_BITS: u32 = 9;

/// Shape of a two-pass scatter (`cuda/msm.cuh` 2').
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TwoPass {
    /// Bucket-index bits below the coarse bin: coarse bin = (key − group base) >> `lb`.
    pub lb: u32,
    /// Windows per group (the last group may have fewer).
    pub group_windows: u32,
    /// Coarse bins of a full group, `group_windows × 2^(c − 1 − lb)`.
    pub coarse_bins: u32,
}

impl TwoPass {
    /// The shape for window bits `c`, `nw` windows and `chunk_m` scalars per list chunk, or
    /// `None` when the list (`chunk_m × nw` entries) is below `lim.two_pass_min_list`.
    pub fn for_list(c: u32, nw: u32, chunk_m: u64, lim: &MsmLimits) -> Option<Self> {
        let len = chunk_m * nw as u64;
        if len == 0 || len < lim.two_pass_min_list {
            return None;
        }
        let h = (c - 1).min(TWO_PASS_COARSE_BITS);
        if c - 1 - h > TWO_PASS_FINE_BITS {
            return None;
        }
        let gw = lim.two_pass_group_windows.min(nw).max(1);
        Some(TwoPass {
            lb: c - 1 - h,
            group_windows: gw,
            coarse_bins: gw << h,
        })
    }
}

/// Launch shape of a batch-affine level-1 accumulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AffineShape {
    /// Threads.
    pub threads: u32,
    /// Chains per thread (one addition each per step; the block's threads share the step's
    /// inversion).
    pub chains_per_thread: u32,
    /// List entries per chain.
    pub steps: u32,
}

impl AffineShape {
    /// Chains in all (`threads × chains_per_thread`).
    pub fn chains(&self) -> u64 {
        self.threads as u64 * self.chains_per_thread as u64
    }

    /// The shape for a list of `len` entries of group `g` on `sms` multiprocessors, or `None`
    /// when `len` is below `lim.affine_min_list` (default: the group's
    /// [`GroupLayout::affine_min_list`]) or 0: at most one wave of resident threads
    /// (`sms × blocks × AFFINE_THREADS`, blocks = the occupancy variant), each
    /// with `len / (wave × AFFINE_MIN_STEPS)` chains clamped to [`AFFINE_MIN_CHAINS`] ..=
    /// `lim.affine_chains_per_thread`; chains of about `len / chains` entries (rounding up to
    /// whole threads may leave short lists fewer than [`AFFINE_MIN_STEPS`]).
    pub fn for_list(len: u64, sms: u64, g: &GroupLayout, lim: &MsmLimits) -> Option<Self> {
        if len == 0 || len < lim.affine_min_list.unwrap_or(g.affine_min_list) {
            return None;
        }
        let max_ch = lim.affine_chains_per_thread.max(1) as u64;
        let mb = lim.affine_min_blocks.unwrap_or(g.affine_default_min_blocks) as u64;
        let wave = sms.max(1) * mb * AFFINE_THREADS as u64;
        // Threads first (a full wave: the H200 measured 642 ms at 2^26 with 128 chains on a full
        // wave against 680 ms with 256 on 63 % of it), then as many chains as the list gives
        // each thread at AFFINE_MIN_STEPS entries per chain, at least AFFINE_MIN_CHAINS.
        let ch = (len / (wave * AFFINE_MIN_STEPS)).clamp(max_ch.min(AFFINE_MIN_CHAINS), max_ch);
        let threads = len.div_ceil(ch * AFFINE_MIN_STEPS).clamp(1, wave);
        let steps = len.div_ceil(threads * ch);
        Some(AffineShape {
            threads: threads as u32,
            chains_per_thread: ch as u32,
            steps: steps as u32,
        })
    }
}

/// The MSM settings that change its buffer sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmLimits {
    /// Fixed window size in bits, or `None` for [`window_bits_for`].
    pub window_bits: Option<u32>,
    /// Largest bucket list, in 4-byte entries, built at once.
    pub max_list_entries: u64,
    /// Fixed accumulation variant of the XYZZ kernel, or `None` for
    /// [`GroupLayout::default_min_blocks`].
    pub accumulate_min_blocks: Option<u32>,
    /// Fixed occupancy variant of the batch-affine kernel, or `None` for
    /// [`GroupLayout::affine_default_min_blocks`].
    pub affine_min_blocks: Option<u32>,
    /// Streaming multiprocessors of the device (sizes the segment buffers).
    pub sm_count: u32,
    /// How buckets are accumulated.
    pub accumulation: Accumulation,
    /// Shortest list accumulated batch-affine, both groups; `None`: each group's
    /// [`GroupLayout::affine_min_list`].
    pub affine_min_list: Option<u64>,
    /// Batch-affine chains per thread: each thread's additions per step, whose prefix product
    /// joins the block's shared inversion (default [`AFFINE_CHAINS_PER_THREAD`]).
    pub affine_chains_per_thread: u32,
    /// Shortest list scattered in two passes (default [`TWO_PASS_MIN_LIST`]).
    pub two_pass_min_list: u64,
    /// Windows per group of the two-pass scatter (default [`TWO_PASS_GROUP_WINDOWS`]).
    pub two_pass_group_windows: u32,
}

impl MsmLimits {
    /// The defaults of `gpu::kernels::msm::MsmConfig` (automatic window, 2^31 list entries) on a
    /// device of `sm_count` SMs.
    pub const fn defaults(sm_count: u32) -> Self {
        MsmLimits {
            window_bits: None,
            max_list_entries: 1 << 31,
            accumulate_min_blocks: None,
            affine_min_blocks: None,
            sm_count,
            accumulation: Accumulation::BatchAffine,
            affine_min_list: None,
            affine_chains_per_thread: AFFINE_CHAINS_PER_THREAD,
            two_pass_min_list: TWO_PASS_MIN_LIST,
            two_pass_group_windows: TWO_PASS_GROUP_WINDOWS,
        }
    }
}

/// One MSM as a workspace runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmShape {
    /// The group.
    pub group: &'static GroupLayout,
    /// Number of scalars.
    pub n: u64,
    /// Most scalars that can be neither 0 nor 1 (at most `n`; with a density bitmap, its set
    /// bits: B_G2 of a 32 GiB partition has 33.1 M points for 130 M scalars). The plans bound
    /// the Pippenger part by it; the MSM itself sizes by the count it finds.
    pub max_m: u64,
    /// The scalars are uploaded by the workspace (host scalars): 32 B each.
    pub host_scalars: bool,
    /// Points the workspace uploads (host points), 0 when they are on the device.
    pub host_points: u64,
    /// A density bitmap selects the scalars.
    pub density: bool,
}

/// Elements per block of `cuzk_msm_scan_block`.
pub const SCAN_BLOCK: u64 = 2048;
/// Segment length of the partial passes (level >= 2).
pub const PARTIAL_SEGMENT: u32 = 32;
/// Buckets per running-sum chunk.
pub const REDUCE_CHUNK: u32 = 32;

/// Scratch entries of a multi-level scan of `len` elements (the block sums of every level).
pub fn scan_scratch(len: u64) -> u64 {
    let mut total = 0;
    let mut l = len;
    loop {
        let nb = l.div_ceil(SCAN_BLOCK).max(1);
        total += nb;
        if nb == 1 {
            return total;
        }
        l = nb;
    }
}

/// Number of MSM workspace buffers ([`MsmSizes::slots`]).
pub const MSM_SLOTS: usize = 26;

/// Every size one MSM of a workspace uses, for `m` scalars that are neither 0 nor 1 and `n1`
/// ones (known after the classification); `gpu::kernels::msm` sizes its launches and buffers from
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmSizes {
    /// Window bits (0 when m = 0).
    pub c: u32,
    /// Windows.
    pub nw: u32,
    /// Buckets per window, 2^(c−1).
    pub half: u64,
    /// Buckets in all, `nw · half`.
    pub k: u64,
    /// Scalars per list chunk.
    pub chunk_m: u64,
    /// Accumulation variant (blocks per multiprocessor) of the kernel that runs: the
    /// batch-affine one's when [`Self::affine`] is set, else the XYZZ one's.
    pub mb: u32,
    /// Level-1 segments.
    pub s1: u32,
    /// Batch-affine launch shape ([`Accumulation::BatchAffine`] and a long enough list), or
    /// `None` for the XYZZ kernel.
    pub affine: Option<AffineShape>,
    /// Two-pass scatter shape, or `None` for the one-pass scatter.
    pub two_pass: Option<TwoPass>,
    /// Capacity of the level ≥ 2 partial buffers.
    pub lvl_cap: u64,
    /// Buckets per running-sum chunk.
    pub red_chunk: u32,
    /// Running-sum chunks per window.
    pub per_w: u32,
    /// Partial sums of the ones.
    pub t_ones: u32,
    /// Entries of the first reduction buffer.
    pub sums_len: u64,
    /// Bytes of each workspace buffer this MSM needs (0: not used), in the order of
    /// `gpu::kernels::msm`'s buffers: scalars, points, density words, density prefix, scan scratch,
    /// indices, counters, counts, cursors, list, buckets, 3 partial keys, 3 partial points,
    /// 2 sums, then the batch-affine chain meta, accumulators, prefix products, first keys,
    /// first sums, then the two-pass scatter's staging (entries and keys of one window group)
    /// and coarse cursors; plus one result slot.
    pub slots: [u64; MSM_SLOTS],
    /// Bytes of one result slot (W + 1 Jacobian points).
    pub result: u64,
}

/// Index of each buffer in [`MsmSizes::slots`].
#[allow(missing_docs)]
pub mod slot {
    pub const SCALARS: usize = 0;
    pub const POINTS: usize = 1;
    pub const DENS_WORDS: usize = 2;
    pub const DENS_PREFIX: usize = 3;
    pub const SCAN_TMP: usize = 4;
    pub const IDX: usize = 5;
    pub const COUNTERS: usize = 6;
    pub const COUNTS: usize = 7;
    pub const CURSORS: usize = 8;
    pub const LIST: usize = 9;
    pub const BUCKETS: usize = 10;
    pub const PART_KEYS: [usize; 3] = [11, 12, 13];
    pub const PART_PTS: [usize; 3] = [14, 15, 16];
    pub const SUMS: [usize; 2] = [17, 18];
    pub const CHAIN_META: usize = 19;
    pub const CHAIN_ACC: usize = 20;
    pub const CHAIN_SCRATCH: usize = 21;
    pub const FIRST_KEYS: usize = 22;
    pub const FIRST_PTS: usize = 23;
    pub const TWO_PASS_TMP: usize = 24;
    pub const COARSE: usize = 25;
}

/// Bytes of a buffer of `len` elements of `elem` bytes as a workspace allocates it (at least
/// one element), aligned.
fn buf(len: u64, elem: u64) -> u64 {
    align_up(len.max(1).saturating_mul(elem))
}

impl MsmSizes {
    /// The sizes of one MSM of `shape` with `m` Pippenger scalars and `n1` ones.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the window leaves too many buckets for 32-bit keys.
    pub fn new(shape: &MsmShape, m: u64, n1: u64, lim: &MsmLimits) -> Result<Self> {
        let g = shape.group;
        let n = shape.n;
        let sms = lim.sm_count.max(1) as u64;
        let xb = g.xyzz_bytes;
        let c = if m == 0 {
            0
        } else {
            lim.window_bits
                .unwrap_or_else(|| window_bits_for(m as usize, g))
        };
        let nw: u32 = if m == 0 { 0 } else { 255 / c + 1 };
        let half: u64 = if m == 0 { 0 } else { 1u64 << (c - 1) };
        let k = nw as u64 * half;
        if k + 1 >= u32::MAX as u64 {
            return Err(Error::InvalidConfig {
                name: "MsmConfig::window_bits".into(),
                value: c.to_string(),
                reason: "too many buckets".into(),
            });
        }
        let t_ones = (n1 / 64).clamp(1, sms * 256) as u32;
        let chunk_m = if m == 0 {
            0
        } else {
            (lim.max_list_entries / nw as u64).max(1).min(m)
        };
        let xyzz_mb = lim
            .accumulate_min_blocks
            .unwrap_or_else(|| g.default_min_blocks(m));
        let s1_cap = (sms * xyzz_mb as u64 * g.pt_threads as u64).max(1);
        let s1 = (chunk_m * nw as u64).div_ceil(64).clamp(1, s1_cap) as u32;
        let affine = if lim.accumulation == Accumulation::BatchAffine {
            AffineShape::for_list(chunk_m * nw as u64, sms, g, lim)
        } else {
            None
        };
        let mb = match affine {
            Some(_) => lim.affine_min_blocks.unwrap_or(g.affine_default_min_blocks),
            None => xyzz_mb,
        };
        let two_pass = TwoPass::for_list(c, nw, chunk_m, lim);
        // level-1 output entries: 2 per segment / chain
        let l1_out = match affine {
            Some(a) => 2 * a.chains(),
            None => 2 * s1 as u64,
        };
        let lvl_cap = l1_out.div_ceil(PARTIAL_SEGMENT as u64) * 2 + 2;
        let red_chunk = if m == 0 {
            1
        } else {
            (REDUCE_CHUNK as u64).min(half) as u32
        };
        let per_w = if m == 0 {
            0
        } else {
            (half / red_chunk as u64) as u32
        };
        let sums_len = (t_ones as u64).max(nw as u64 * per_w as u64);
        let dens_words = if shape.density { n.div_ceil(32) } else { 0 };
        let mut slots = [0u64; MSM_SLOTS];
        if shape.host_scalars {
            slots[slot::SCALARS] = buf(4 * n, 8);
        }
        if shape.host_points > 0 {
            slots[slot::POINTS] = buf(shape.host_points * g.affine_bytes, 1);
        }
        let mut scan = 0;
        if shape.density {
            slots[slot::DENS_WORDS] = buf(dens_words, 4);
            slots[slot::DENS_PREFIX] = buf(dens_words, 4);
            scan = scan_scratch(dens_words);
        }
        slots[slot::IDX] = buf(2 * n, 4);
        slots[slot::COUNTERS] = buf(2, 4);
        if m > 0 {
            scan = scan.max(scan_scratch(k + 1));
            slots[slot::COUNTS] = buf(k + 1, 4);
            if two_pass.is_none() {
                slots[slot::CURSORS] = buf(k + 1, 4);
            }
            slots[slot::LIST] = buf(chunk_m * nw as u64, 4);
            slots[slot::BUCKETS] = buf((k + 1) * xb, 1);
            match affine {
                Some(a) => {
                    let gch = a.chains();
                    slots[slot::CHAIN_META] = buf(gch, 16);
                    slots[slot::CHAIN_ACC] = buf(gch, g.affine_bytes);
                    slots[slot::CHAIN_SCRATCH] = buf(gch, g.field_bytes());
                    slots[slot::FIRST_KEYS] = buf(gch, 4);
                    slots[slot::FIRST_PTS] = buf(gch, g.affine_bytes);
                }
                None => {
                    slots[slot::PART_KEYS[0]] = buf(2 * s1 as u64, 4);
                    slots[slot::PART_PTS[0]] = buf(2 * s1 as u64 * xb, 1);
                }
            }
            for l in 1..3 {
                slots[slot::PART_KEYS[l]] = buf(lvl_cap, 4);
                slots[slot::PART_PTS[l]] = buf(lvl_cap * xb, 1);
            }
            if let Some(t) = two_pass {
                slots[slot::TWO_PASS_TMP] = buf(2 * chunk_m * t.group_windows as u64, 4);
                slots[slot::COARSE] = buf(t.coarse_bins as u64, 4);
            }
        }
        if scan > 0 {
            slots[slot::SCAN_TMP] = buf(scan, 4);
        }
        slots[slot::SUMS[0]] = buf(sums_len * xb, 1);
        slots[slot::SUMS[1]] = buf(sums_len.div_ceil(2) * xb, 1);
        let result = buf((nw as u64 + 1) * g.jacobian_bytes, 1);
        Ok(MsmSizes {
            c,
            nw,
            half,
            k,
            chunk_m,
            mb,
            s1,
            affine,
            two_pass,
            lvl_cap,
            red_chunk,
            per_w,
            t_ones,
            sums_len,
            slots,
            result,
        })
    }
}

/// The `m` values at which an MSM of `n` scalars needs the most memory for each window the cost
/// model can pick (the largest `m ≤ n` of each window; with a fixed window, `n` alone). Buffer
/// sizes grow with `m` for a fixed window, so these bound every `m ≤ n`.
fn worst_m(n: u64, g: &GroupLayout, lim: &MsmLimits) -> Vec<u64> {
    if n == 0 {
        return vec![0];
    }
    if lim.window_bits.is_some() {
        return vec![n];
    }
    let (lo, hi) = (window_bits_for(1, g), window_bits_for(n as usize, g));
    (lo..=hi)
        .filter_map(|c| {
            // largest m in 1..=n with window_bits_for(m) <= c (non-decreasing in m)
            let (mut a, mut b) = (1u64, n);
            if window_bits_for(1, g) > c {
                return None;
            }
            while a < b {
                let mid = a + (b - a).div_ceil(2);
                if window_bits_for(mid as usize, g) <= c {
                    a = mid;
                } else {
                    b = mid - 1;
                }
            }
            Some(a)
        })
        .collect()
}

/// Device bytes of one MSM workspace that runs every MSM of `shapes` (in any order, any data):
/// its buffers only grow, so each buffer is the largest any of them needs for any count of
/// zeros and ones, plus two result slots. This is what `gpu::kernels::msm::MsmWorkspace::reserve`
/// allocates up front.
///
/// # Errors
/// As [`MsmSizes::new`].
pub fn msm_workspace_bytes(shapes: &[MsmShape], lim: &MsmLimits) -> Result<u64> {
    Ok(msm_workspace_slots(shapes, lim)?.iter().sum())
}

/// The buffers of [`msm_workspace_bytes`] one by one: [`MSM_SLOTS`] buffers in the order of
/// [`MsmSizes::slots`], then the two result slots.
///
/// # Errors
/// As [`MsmSizes::new`].
pub fn msm_workspace_slots(shapes: &[MsmShape], lim: &MsmLimits) -> Result<[u64; MSM_SLOTS + 2]> {
    let mut out = [0u64; MSM_SLOTS + 2];
    for s in shapes {
        for m in worst_m(s.max_m.min(s.n), s.group, lim) {
            // ones: the most the partial-sum buffer can take is when every other scalar is 1
            // a smaller m of the same window may fall below the batch-affine threshold and
            // need the XYZZ kernel's buffers instead, or below the two-pass threshold and need
            // the one-pass scatter's cursors: plan every combination
            let xyzz = MsmLimits {
                accumulation: Accumulation::Xyzz,
                ..*lim
            };
            let one_pass = |l: &MsmLimits| MsmLimits {
                two_pass_min_list: u64::MAX,
                ..*l
            };
            for l in [*lim, xyzz, one_pass(lim), one_pass(&xyzz)] {
                let l = &l;
                let z = MsmSizes::new(s, m, s.n, l)?;
                for (o, b) in out.iter_mut().zip(z.slots) {
                    *o = (*o).max(b);
                }
                out[MSM_SLOTS] = out[MSM_SLOTS].max(z.result);
            }
        }
    }
    out[MSM_SLOTS + 1] = out[MSM_SLOTS];
    Ok(out)
}

/// Device bytes of the H step's domain buffers: `buffers` × n × 32 B (the NTT works in place:
/// no scratch beyond the process-wide twiddle tables, which the safety margin covers).
pub fn h_step_bytes(domain_log2: u32, buffers: u64) -> u64 {
    buffers.saturating_mul(align_up(
        (1u64 << domain_log2.min(62)).saturating_mul(FR_BYTES),
    ))
}

/// Device bytes of the two double-buffered base slots an MSM streams `chunk` points of `group`
/// through (`gpu::driver::upload`, feature `cuda`).
pub fn streamed_bases_bytes(chunk: u64, group: &GroupLayout) -> u64 {
    2 * align_up(chunk.max(1).saturating_mul(group.affine_bytes))
}

/// Device bytes of a gather sink of `capacity` entries in `group` (`gpu::kernels::msm::GatherSink`:
/// the points, then canonical scalars of 32 B): 128 B an entry in G1, 224 B in G2.
pub fn gather_sink_bytes(capacity: u64, group: &GroupLayout) -> u64 {
    let c = capacity.max(1);
    align_up(c.saturating_mul(group.affine_bytes)).saturating_add(align_up(c.saturating_mul(FR_BYTES)))
}

/// Bytes of one CSR index entry on the device (`u32`: a row offset, a column or a coefficient
/// index).
pub const CSR_INDEX_BYTES: u64 = 4;

/// Bytes of the device buffers of one CSR matrix of `rows` rows and `nnz` non-zeros, one by one,
/// as `gpu::kernels::spmv::DeviceCsr::upload` allocates them: `row_ptr` ((rows + 1) × 4 B), `col`
/// and `coeff` (nnz × 4 B each), each rounded up to [`ALIGN`] (an empty buffer takes nothing).
pub fn csr_buffers(rows: u64, nnz: u64) -> [u64; 3] {
    let b = |len: u64| align_up(len.saturating_mul(CSR_INDEX_BYTES));
    [b(rows.saturating_add(1)), b(nnz), b(nnz)]
}

/// Device bytes of a compiled circuit kept resident for the GPU SpMV
/// (`gpu::kernels::spmv::DeviceCircuit`): the three matrices A, B, C of `rows` rows and `nnz[i]`
/// non-zeros ([`csr_buffers`]) plus the coefficient table (`coeffs` × 32 B). A 32 GiB partition
/// (130.3 M rows, 309/130/283 M non-zeros): ≈ 7.4 GB.
pub fn circuit_device_bytes(rows: u64, nnz: [u64; 3], coeffs: u64) -> u64 {
    nnz.iter()
        .map(|&n| csr_buffers(rows, n).iter().sum::<u64>())
        .sum::<u64>()
        .saturating_add(align_up(coeffs.saturating_mul(FR_BYTES)))
}

/// Bytes of the R1CS check's result word on the device (one `u32`, aligned).
pub const R1CS_FLAG_BYTES: u64 = ALIGN;

/// Most rows of one block of a compiled circuit's matrix streamed from host memory, and of one
/// block of the blockwise R1CS check (2^21 rows: a 32 GiB partition's 130.3 M rows are ~63
/// blocks; the check's block of c is 64 MiB).
pub const SPMV_BLOCK_ROWS: u64 = 1 << 21;

/// Most non-zeros of one streamed block (2^23: 32 MiB per array; a block ends early where its
/// rows would hold more).
pub const SPMV_BLOCK_NNZ: u64 = 1 << 23;

/// Non-zeros a row the planner budgets for a streamed block of few rows (a small circuit's
/// block slots are sized by its rows: PoRep rows hold 1 to ~40, 2.4 on average in A).
pub const SPMV_PLANNED_ROW_NNZ: u64 = 64;

/// Most coefficients the planner budgets for a streamed circuit's table (2^16, 2 MiB; the
/// PoRep circuits have a few dozen).
pub const SPMV_PLANNED_COEFFS: u64 = 1 << 16;

/// Device bytes of a compiled circuit whose matrices stream from host memory in row blocks
/// (`gpu::kernels::spmv::StreamedCircuit`): two slots, each one block's CSR arrays
/// ([`csr_buffers`] of `block_rows` rows and `block_nnz` non-zeros), and the coefficient table
/// (`coeffs` × 32 B). At most ≈ 0.27 GiB ([`SPMV_BLOCK_ROWS`], [`SPMV_BLOCK_NNZ`]).
pub fn streamed_circuit_bytes(block_rows: u64, block_nnz: u64, coeffs: u64) -> u64 {
    2u64.saturating_mul(csr_buffers(block_rows, block_nnz).iter().sum::<u64>())
        .saturating_add(align_up(coeffs.saturating_mul(FR_BYTES)))
}

/// Device bytes of the blockwise R1CS check's block of c (`min(rows, SPMV_BLOCK_ROWS)` × 32 B)
/// and its result word: what the check needs when c has no domain buffer of its own (the H step
/// on two domain buffers, b's shared with c).
pub fn r1cs_block_bytes(rows: u64) -> u64 {
    align_up(rows.min(SPMV_BLOCK_ROWS).saturating_mul(FR_BYTES)).saturating_add(R1CS_FLAG_BYTES)
}

/// Device bytes the GPU SpMV of one partition needs besides the H step's three domain buffers
/// (which it writes a, b, c into): the witness z uploaded as two buffers, input (`inputs` × 32 B)
/// and aux (`aux` × 32 B; kept on the device as the scalars of the L, A and B MSMs), and the R1CS
/// check's result word. 32 GiB partition: ≈ 3.9 GiB.
pub fn spmv_work_bytes(inputs: u64, aux: u64) -> u64 {
    align_up(inputs.saturating_mul(FR_BYTES))
        .saturating_add(align_up(aux.saturating_mul(FR_BYTES)))
        .saturating_add(R1CS_FLAG_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A G1 MSM of n scalars and points on the device, without a density map.
    fn resident_g1(n: u64) -> MsmShape {
        MsmShape {
            group: &G1_LAYOUT,
            n,
            max_m: n,
            host_scalars: false,
            host_points: 0,
            density: false,
        }
    }

    /// Every buffer of `z` (and its result slot) within the workspace bound `bound`.
    fn assert_within(bound: &[u64; MSM_SLOTS + 2], z: &MsmSizes, what: &str) {
        for (i, (&b, &s)) in bound.iter().zip(&z.slots).enumerate() {
            assert!(s <= b, "{what} slot {i}: {s} > {b}");
        }
        assert!(z.result <= bound[MSM_SLOTS], "{what} result");
    }

    #[test]
    fn window_bits_are_non_decreasing_and_worst_m_covers_each_window() {
        for g in [&G1_LAYOUT, &G2_LAYOUT] {
            let mut last = 0;
            for k in 0..31 {
                let c = window_bits_for(1usize << k, g);
                assert!(c >= last);
                last = c;
            }
            let lim = MsmLimits::defaults(132);
            let ms = worst_m(1 << 27, g, &lim);
            assert_eq!(*ms.last().unwrap(), 1 << 27);
            for &m in &ms {
                // m is the last of its window
                assert!(
                    m == 1 << 27
                        || window_bits_for(m as usize + 1, g) > window_bits_for(m as usize, g)
                );
            }
        }
    }

    /// The windows the H200 sweeps found fastest (BENCHMARKS.md, MSM section).
    #[test]
    fn window_model_picks_the_measured_best() {
        assert_eq!(window_bits_for(1 << 24, &G1_LAYOUT), 20);
        assert_eq!(window_bits_for(1 << 26, &G1_LAYOUT), 20);
        assert_eq!(window_bits_for(1 << 27, &G1_LAYOUT), 20);
        assert_eq!(window_bits_for(1 << 22, &G2_LAYOUT), 16);
        assert_eq!(window_bits_for(1 << 24, &G2_LAYOUT), 19);
        assert_eq!(G2_LAYOUT.default_min_blocks(1 << 22), 4);
        assert_eq!(G2_LAYOUT.default_min_blocks(1 << 24), 6);
        assert_eq!(G1_LAYOUT.default_min_blocks(1 << 24), 4);
        assert_eq!(G1_LAYOUT.default_min_blocks(1 << 26), 5);
    }

    #[test]
    fn workspace_bound_covers_every_m_and_n1() {
        let lim = MsmLimits::defaults(132);
        let shape = MsmShape {
            group: &G1_LAYOUT,
            n: 100_000,
            max_m: 100_000,
            host_scalars: false,
            host_points: 0,
            density: true,
        };
        let bound = msm_workspace_slots(&[shape], &lim).unwrap();
        for m in (0..=100_000u64).step_by(997) {
            for n1 in [0, 5000, 100_000 - m] {
                let z = MsmSizes::new(&shape, m, n1, &lim).unwrap();
                assert_within(&bound, &z, &format!("m {m}"));
            }
        }
    }

    #[test]
    fn batch_affine_shape_and_bytes() {
        // 2^27 scalars at c = 20: 13 windows, one wave of 132 x 4 x 128 threads
        let len = 13u64 << 27;
        let lim = MsmLimits::defaults(132);
        let a = AffineShape::for_list(len, 132, &G1_LAYOUT, &lim).unwrap();
        // a full wave of the 4-block variant, 100 chains of 259 entries (the H200's 783 ms; 403
        // chains of 65 entries, the most before, 785 ms with 4× the chain states)
        assert_eq!(
            (a.threads, a.chains_per_thread, a.steps),
            (67_584, 100, 259)
        );
        assert!(a.chains() * a.steps as u64 >= len);
        assert_eq!(
            AffineShape::for_list(AFFINE_MIN_LIST - 1, 132, &G1_LAYOUT, &lim),
            None
        );
        // 2^26: the full wave, 100 chains of 130 entries
        let h = AffineShape::for_list(13 << 26, 132, &G1_LAYOUT, &lim).unwrap();
        assert_eq!(
            (h.threads, h.chains_per_thread, h.steps),
            (67_584, 100, 130)
        );
        // 2^24: fewer chains (50 of 65 entries)
        let q = AffineShape::for_list(13 << 24, 132, &G1_LAYOUT, &lim).unwrap();
        assert_eq!((q.threads, q.chains_per_thread, q.steps), (67_584, 50, 65));
        let forced = MsmLimits {
            affine_min_list: Some(0),
            ..lim
        };
        assert_eq!(AffineShape::for_list(0, 132, &G1_LAYOUT, &forced), None);
        // short lists (tests force the path): 32 chains, fewer threads
        let b = AffineShape::for_list(1000, 132, &G1_LAYOUT, &forced).unwrap();
        assert_eq!((b.threads, b.chains_per_thread, b.steps), (1, 32, 32));
        let b = AffineShape::for_list(15 << 20, 132, &G1_LAYOUT, &forced).unwrap();
        assert_eq!((b.threads, b.chains_per_thread, b.steps), (7_680, 32, 64));
        // a configured most below the floor is taken as is
        let one = MsmLimits {
            affine_chains_per_thread: 7,
            ..forced
        };
        let b = AffineShape::for_list(30_000, 132, &G1_LAYOUT, &one).unwrap();
        assert_eq!((b.threads, b.chains_per_thread, b.steps), (67, 7, 64));
        for len in [1u64, 63, 64, 65, 4097, 1 << 28, 13 << 27] {
            for l in [forced, one] {
                let s = AffineShape::for_list(len, 132, &G1_LAYOUT, &l).unwrap();
                assert!(s.chains() * s.steps as u64 >= len, "{len}");
                assert!(s.threads as u64 <= 132 * 4 * AFFINE_THREADS as u64);
            }
        }
        let shape = resident_g1(1 << 27);
        let lim = MsmLimits::defaults(132);
        let z = MsmSizes::new(&shape, 1 << 27, 0, &lim).unwrap();
        assert_eq!(z.affine, Some(a));
        let chain: u64 = [
            slot::CHAIN_META,
            slot::CHAIN_ACC,
            slot::CHAIN_SCRATCH,
            slot::FIRST_KEYS,
            slot::FIRST_PTS,
        ]
        .iter()
        .map(|&i| z.slots[i])
        .sum();
        let per_chain = G1_LAYOUT.affine_chain_bytes();
        assert_eq!(per_chain, 260);
        assert!(chain >= a.chains() * per_chain && chain < a.chains() * per_chain + 5 * ALIGN);
        assert_eq!(z.slots[slot::PART_KEYS[0]] + z.slots[slot::PART_PTS[0]], 0);
        // level 2 takes 2 entries per chain
        assert!(z.lvl_cap >= 2 * (2 * a.chains()).div_ceil(PARTIAL_SEGMENT as u64));
        // G2: its own threshold and occupancy (2 blocks: a wave of 33,792 threads), 500 B per
        // chain with the Fp2 prefix products
        let g2 = MsmShape {
            group: &G2_LAYOUT,
            ..shape
        };
        let z2 = MsmSizes::new(&g2, 1 << 24, 0, &lim).unwrap();
        let a2 = z2.affine.expect("G2 2^24 runs batch-affine");
        assert_eq!(z2.mb, AFFINE_MIN_BLOCKS_G2);
        assert_eq!(a2.threads as u64, 132 * 2 * AFFINE_THREADS as u64);
        assert_eq!(z2.slots[slot::CHAIN_SCRATCH], align_up(a2.chains() * 96));
        assert_eq!(G2_LAYOUT.affine_chain_bytes(), 500);
        assert_eq!(
            AffineShape::for_list(AFFINE_MIN_LIST_G2 - 1, 132, &G2_LAYOUT, &lim),
            None
        );
        assert!(AffineShape::for_list(AFFINE_MIN_LIST_G2, 132, &G2_LAYOUT, &lim).is_some());
        // the XYZZ setting keeps the XYZZ kernel
        let xy = MsmLimits {
            accumulation: Accumulation::Xyzz,
            ..lim
        };
        assert_eq!(MsmSizes::new(&shape, 1 << 27, 0, &xy).unwrap().affine, None);
    }

    #[test]
    fn two_pass_shape_covers_every_window_and_the_threshold() {
        let lim = MsmLimits::defaults(132);
        for c in 2..=24u32 {
            let nw = 255 / c + 1;
            let t = TwoPass::for_list(c, nw, 1 << 24, &lim).expect("two passes");
            assert!(t.lb <= TWO_PASS_FINE_BITS, "c={c}");
            assert_eq!(t.lb, (c - 1).saturating_sub(TWO_PASS_COARSE_BITS));
            assert_eq!(t.coarse_bins, t.group_windows << (c - 1 - t.lb));
            assert_eq!(t.group_windows, TWO_PASS_GROUP_WINDOWS.min(nw));
            let all = MsmLimits {
                two_pass_group_windows: u32::MAX,
                two_pass_min_list: 0,
                ..lim
            };
            assert_eq!(TwoPass::for_list(c, nw, 1, &all).unwrap().group_windows, nw);
        }
        // the threshold is on list entries, m × W
        let m = TWO_PASS_MIN_LIST / 13;
        assert!(TwoPass::for_list(20, 13, m, &lim).is_none());
        assert!(TwoPass::for_list(20, 13, m + 1, &lim).is_some());
        let z = MsmSizes::new(&resident_g1(1 << 27), 1 << 27, 0, &lim).unwrap();
        let t = z.two_pass.unwrap();
        assert_eq!((z.c, t.lb, t.group_windows), (20, 5, 3));
        // staging: 3 windows of 8-byte entries; the coarse cursors; no global cursors
        assert_eq!(z.slots[slot::TWO_PASS_TMP], 3 << 30);
        assert_eq!(z.slots[slot::COARSE], 3 << 16);
        assert_eq!(z.slots[slot::CURSORS], 0);
    }

    #[test]
    fn workspace_bound_covers_both_sides_of_the_two_pass_threshold() {
        // an m of the same window as the largest but below the two-pass threshold runs the
        // one-pass scatter, whose cursors the largest m does not need (a fixed window: n alone
        // is planned)
        for window_bits in [None, Some(19), Some(20)] {
            let lim = MsmLimits {
                window_bits,
                ..MsmLimits::defaults(132)
            };
            let shape = resident_g1(1 << 27);
            let bound = msm_workspace_slots(&[shape], &lim).unwrap();
            for m in (1..=(1u64 << 27)).step_by(1 << 19) {
                let z = MsmSizes::new(&shape, m, 0, &lim).unwrap();
                assert_within(&bound, &z, &format!("{window_bits:?} m {m}"));
            }
            // both sides occur
            let c = lim.window_bits.unwrap_or(19) as u64;
            let m0 = TWO_PASS_MIN_LIST / (255 / c + 1);
            for (m, two) in [(m0 - 1, false), (m0 + 1, true)] {
                let z = MsmSizes::new(&shape, m, 0, &lim).unwrap();
                if z.c as u64 == c {
                    assert_eq!(z.two_pass.is_some(), two, "m {m}");
                    assert_eq!(z.slots[slot::CURSORS] > 0, !two);
                }
            }
        }
    }

    /// An m just below the batch-affine threshold runs the XYZZ kernel; the workspace bound of
    /// the largest m (batch-affine) must still cover its segment buffers. Both groups, each at
    /// its own default threshold and at configured ones.
    #[test]
    fn workspace_bound_covers_both_sides_of_the_affine_threshold() {
        for g in [&G1_LAYOUT, &G2_LAYOUT] {
            for min_list in [None, Some(1 << 29), Some(1 << 30)] {
                let lim = MsmLimits {
                    affine_min_list: min_list,
                    ..MsmLimits::defaults(132)
                };
                let min_list = min_list.unwrap_or(g.affine_min_list);
                for n in [1u64 << 22, 1 << 24, 1 << 26, 1 << 27] {
                    let shape = MsmShape {
                        group: g,
                        ..resident_g1(n)
                    };
                    let bound = msm_workspace_slots(&[shape], &lim).unwrap();
                    let c = window_bits_for(n as usize, g);
                    let nw = (255 / c + 1) as u64;
                    let m0 = min_list / nw;
                    for m in [m0.saturating_sub(1), m0, m0 + 1, n / 2, n] {
                        let m = m.min(n);
                        let z = MsmSizes::new(&shape, m, 0, &lim).unwrap();
                        let what = format!("{} min_list {min_list} n {n} m {m}", g.name);
                        assert_within(&bound, &z, &what);
                    }
                }
            }
        }
    }

    /// A gather sink's drain (`gpu::kernels::msm::GatherSink`: at most half a pass of entries,
    /// device scalars and points, no density) fits the buffers of the pass MSMs it replaces,
    /// so the batch plan needs only the sink's own bytes on top.
    #[test]
    fn a_drain_of_half_a_pass_fits_the_pass_workspace() {
        let lim = MsmLimits::defaults(132);
        for pass in [1u64 << 18, 1 << 22, 1 << 23, 1 << 24] {
            for (g, density) in [(&G1_LAYOUT, false), (&G1_LAYOUT, true), (&G2_LAYOUT, true)] {
                let shape = MsmShape {
                    group: g,
                    density,
                    ..resident_g1(pass)
                };
                let bound = msm_workspace_slots(&[shape], &lim).unwrap();
                for m in [1, pass / 64, pass / 4, pass / 2] {
                    let drain = MsmShape {
                        group: g,
                        ..resident_g1(m)
                    };
                    let z = MsmSizes::new(&drain, m, 0, &lim).unwrap();
                    assert_within(&bound, &z, &format!("{} pass {pass} drain {m}", g.name));
                }
            }
        }
        // 1.70 M values of a 32 GiB PoRep partition: 218 MB in G1, 381 MB in G2
        assert_eq!(gather_sink_bytes(1_700_000, &G1_LAYOUT), 217_600_000);
        assert_eq!(gather_sink_bytes(1_700_000, &G2_LAYOUT), 380_800_000);
    }

    #[test]
    fn h_msm_at_2_27_needs_gigabytes_not_the_old_fixed_window() {
        // the H MSM over 2^27 device-resident scalars: the sorted list alone is ~6.5 GiB
        let lim = MsmLimits::defaults(132);
        let shape = resident_g1((1 << 27) - 1);
        let b = msm_workspace_slots(&[shape], &lim).unwrap();
        assert!(b[slot::LIST] >= 6 << 30, "{}", b[slot::LIST]);
        assert!(msm_workspace_bytes(&[shape], &lim).unwrap() > 7 << 30);
    }
}
