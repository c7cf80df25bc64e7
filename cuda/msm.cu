// cuda/msm.cu -- Pippenger MSM kernels for BLS12-381 G1 and G2 (host side: src/gpu/kernels/msm.rs).
//
// The algorithm and the per-thread bodies are in msm.cuh; this file holds the __global__ entry
// points (extern "C", so that the host finds them by name in the embedded module), the warp-level
// stream compaction of the scalars, a two-level exclusive scan and the block tree reduction.
//
// Buffers (all device memory, 16-byte aligned as cuMemAlloc returns them):
//   scalars      n x 4 x u64, blstrs::Scalar (Montgomery, `mont` = 1) or canonical (`mont` = 0)
//   points       affine_t<Fp> (96 B, = blstrs::G1Affine) / affine_t<Fp2> (192 B, = G2Affine)
//   buckets etc. xyzz_t<Fp> (192 B) / xyzz_t<Fp2> (384 B)
//   results      jacobian_t<Fp> (144 B, = blstrs::G1Projective) / jacobian_t<Fp2> (288 B)
#include "field.cuh"
#include "msm.cuh"
#include "msm_affine.cuh"

using namespace cuzk_msm;
// Point kernels use the wrappers of curve.cuh: the XYZZ bucket accumulation the inlined Fp product
// (FpI / Fp2I), every other kernel the out-of-line one (FpX / Fp2X); same layouts (see there).
typedef cuzk_curve::FpX Fp;
typedef cuzk_curve::Fp2X Fp2;
typedef cuzk_curve::FpI FpAcc;
typedef cuzk_curve::Fp2I Fp2Acc;
// The batch-affine accumulation's kind: the one out-of-line product. Unlike the XYZZ loop (one mixed
// addition per iteration), a step here runs a forward pass, an inversion and a backward pass:
// inlined, that was 7,500 instructions (120 KB) of hot code, and warps stalled on instruction
// fetch (ncu: 31 % of the cycles between issues). Out of line the loops are ~1,100 instructions
// around one 440-instruction product: H200 G1 2^27 1,092 -> 909 ms (docs/history/BENCHMARKS-2026-11-29-to-12-03.md, *R2*).
typedef cuzk_curve::FpX FpAff;
typedef cuzk_curve::Fp2X Fp2Aff;

#define FULL_MASK 0xffffffffu

static __device__ __forceinline__ u32 global_tid() { return blockIdx.x * blockDim.x + threadIdx.x; }

// ---------------------------------------------------------------------------------------------
// classification: 0 -> skipped, 1 -> ones (point index), else -> rest (scalar index)

/// One thread per scalar j < n (grid of ceil(n / blockDim) blocks, blockDim a multiple of 32).
/// counters[0] += rest entries, counters[1] += ones entries (warp-aggregated atomics; the order
/// of entries across warps is unspecified, which the sums do not depend on).
extern "C" __global__ void cuzk_msm_classify(const u64* scalars, u32 n, u32 mont, const u32* dens_words,
                                             const u32* dens_prefix, u32* rest, u32* ones, u32* counters) {
    const u32 j = global_tid();
    const u32 lane = threadIdx.x & 31;
    bool is_rest = false, is_one = false;
    if (j < n && density_bit(j, dens_words)) {
        u64 s[4];
        load_scalar(scalars, j, mont, s);
        const u64 hi = s[1] | s[2] | s[3];
        is_one = hi == 0 && s[0] == 1;
        is_rest = !is_one && (hi | s[0]) != 0;
    }
    const u32 lt = (1u << lane) - 1u;
    const u32 mr = __ballot_sync(FULL_MASK, is_rest);
    const u32 mo = __ballot_sync(FULL_MASK, is_one);
    u32 base_r = 0, base_o = 0;
    if (lane == 0) {
        if (mr) base_r = atomicAdd(&counters[0], (u32)__popc(mr));
        if (mo) base_o = atomicAdd(&counters[1], (u32)__popc(mo));
    }
    base_r = __shfl_sync(FULL_MASK, base_r, 0);
    base_o = __shfl_sync(FULL_MASK, base_o, 0);
    if (is_rest) rest[base_r + __popc(mr & lt)] = j;
    if (is_one) ones[base_o + __popc(mo & lt)] = point_index(j, dens_words, dens_prefix);
}

/// Gathering (src/gpu/kernels/msm.rs, `GatherSink`): the m scalars of the rest list and their
/// points copied into a sink, whose one Pippenger MSM after the last streamed pass replaces one
/// per pass. One thread per 32-bit word of a gathered point (`pw` words a point: 24 for G1, 48
/// for G2); the thread of word 0 also writes the scalar, in canonical form (4 limbs).
extern "C" __global__ void cuzk_msm_gather(const u32* rest, u32 m, const u64* scalars, u32 mont,
                                           const u32* dens_words, const u32* dens_prefix, const u32* points,
                                           u32 pw, u64* out_scalars, u32* out_points) {
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 i = t / pw;
    const u32 w = (u32)(t - i * pw);
    if (i >= m) return;
    const u32 j = rest[i];
    const u32 p = point_index(j, dens_words, dens_prefix);
    out_points[i * pw + w] = points[(u64)p * pw + w];
    if (w == 0) {
        u64 s[4];
        load_scalar(scalars, j, mont, s);
        u64* o = out_scalars + 4 * i;
        o[0] = s[0];
        o[1] = s[1];
        o[2] = s[2];
        o[3] = s[3];
    }
}

/// out[i] = popcount(words[i]), i < nwords (input of the density prefix scan).
extern "C" __global__ void cuzk_msm_popc(const u32* words, u32 nwords, u32* out) {
    const u32 i = global_tid();
    if (i < nwords) out[i] = __popc(words[i]);
}

// ---------------------------------------------------------------------------------------------
// exclusive scan of u32 (wrapping), 2048 elements per block of 256 threads

#define SCAN_THREADS 256
#define SCAN_ITEMS 8
#define SCAN_BLOCK (SCAN_THREADS * SCAN_ITEMS)

/// Exclusive scan in place within each block of 2048 elements; block_sums[b] = block b's total.
extern "C" __global__ void __launch_bounds__(SCAN_THREADS) cuzk_msm_scan_block(u32* data, u32 len, u32* block_sums) {
    __shared__ u32 warp_tot[SCAN_THREADS / 32];
    const u32 tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const u64 base = (u64)blockIdx.x * SCAN_BLOCK + (u64)tid * SCAN_ITEMS;
    u32 v[SCAN_ITEMS];
    u32 sum = 0;
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS; k++) {
        v[k] = (base + k < len) ? data[base + k] : 0u;
        sum += v[k];
    }
    u32 x = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const u32 y = __shfl_up_sync(FULL_MASK, x, o);
        if (lane >= (u32)o) x += y;
    }
    if (lane == 31) warp_tot[warp] = x;
    __syncthreads();
    if (warp == 0) {
        u32 t = lane < SCAN_THREADS / 32 ? warp_tot[lane] : 0u;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const u32 y = __shfl_up_sync(FULL_MASK, t, o);
            if (lane >= (u32)o) t += y;
        }
        if (lane < SCAN_THREADS / 32) warp_tot[lane] = t;
    }
    __syncthreads();
    u32 excl = x - sum + (warp ? warp_tot[warp - 1] : 0u);
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS; k++) {
        if (base + k < len) data[base + k] = excl;
        excl += v[k];
    }
    if (tid == SCAN_THREADS - 1) block_sums[blockIdx.x] = excl;
}

/// data[i] += block_sums[i / 2048] (block_sums already scanned), i < len.
extern "C" __global__ void cuzk_msm_scan_add(u32* data, u32 len, const u32* block_sums) {
    const u32 i = global_tid();
    if (i < len) data[i] += block_sums[i / SCAN_BLOCK];
}

// ---------------------------------------------------------------------------------------------
// bucketing

/// One thread per rest entry i < m: counts[key] += 1 for every nonzero digit of windows [w0, w1).
extern "C" __global__ void cuzk_msm_histogram(const u64* scalars, u32 mont, const u32* dens_words,
                                              const u32* dens_prefix, const u32* rest, u32 m, u32 c, u32 w0,
                                              u32 w1, u32* counts) {
    bucket_args a{scalars, mont, dens_words, dens_prefix, rest, m, c, w0, w1};
    body_histogram(global_tid(), a, counts);
}

/// One thread per coarse bin g < G of a group (see body_coarse_init).
extern "C" __global__ void cuzk_msm_coarse_init(const u32* offsets, u32 kb0, u32 lb, u32 G, u32* ccur) {
    body_coarse_init(global_tid(), offsets, kb0, lb, G, ccur);
}

/// Two-pass scatter, pass A: one thread per rest entry i < m, windows [w0, w1) (body_scatter_coarse).
extern "C" __global__ void cuzk_msm_scatter_coarse(const u64* scalars, u32 mont, const u32* dens_words,
                                                   const u32* dens_prefix, const u32* rest, u32 m, u32 c, u32 w0,
                                                   u32 w1, u32 lb, u32* ccur, u32* tmp_val, u32* tmp_key) {
    bucket_args a{scalars, mont, dens_words, dens_prefix, rest, m, c, w0, w1};
    body_scatter_coarse(global_tid(), a, lb, w0 << (c - 1), ccur, tmp_val, tmp_key);
}

/// Two-pass scatter, pass B: block g per coarse bin of the group whose keys start at kb0
/// (body_scatter_fine; lb <= CUZK_TWO_PASS_FINE_BITS).
extern "C" __global__ void cuzk_msm_scatter_fine(const u32* offsets, u32 kb0, u32 lb, const u32* tmp_val,
                                                 const u32* tmp_key, u32* list) {
    __shared__ u32 cur[1u << CUZK_TWO_PASS_FINE_BITS];
    body_scatter_fine(blockIdx.x, threadIdx.x, blockDim.x, offsets, kb0, lb, cur, tmp_val, tmp_key, list);
}

/// One thread per rest entry i < m: list[cursors[key]++] = point index | sign << 31.
extern "C" __global__ void cuzk_msm_scatter(const u64* scalars, u32 mont, const u32* dens_words,
                                            const u32* dens_prefix, const u32* rest, u32 m, u32 c, u32 w0, u32 w1,
                                            u32* cursors, u32* list) {
    bucket_args a{scalars, mont, dens_words, dens_prefix, rest, m, c, w0, w1};
    body_scatter(global_tid(), a, cursors, list);
}

// ---------------------------------------------------------------------------------------------
// per-group kernels, instantiated for G1 (Fp) and G2 (Fp2)

// Threads per block of the point kernels (G2's larger state leaves fewer registers per thread).
#define PT_THREADS_G1 128
#define PT_THREADS_G2 64
// Threads per block of the tree reduction (shared memory: threads x sizeof(xyzz)).
#define RED_THREADS_G1 128
#define RED_THREADS_G2 64

template <class F, int T>
static __device__ __forceinline__ void reduce_block(const xyzz_t<F>* in, u32 seg_len, u32 G, xyzz_t<F>* out) {
    // block (seg, b): elements seg * seg_len + b * G + [0, G) (clipped to seg_len)
    __shared__ __align__(16) unsigned char smem_raw[T * sizeof(xyzz_t<F>)];
    xyzz_t<F>* smem = reinterpret_cast<xyzz_t<F>*>(smem_raw);
    const u32 bps = (seg_len + G - 1) / G;
    const u32 seg = blockIdx.x / bps, b = blockIdx.x % bps;
    const u64 base = (u64)seg * seg_len;
    const u32 lo = b * G;
    const u32 hi = (lo + G < seg_len) ? lo + G : seg_len;
    xyzz_t<F> acc = xyzz_inf<F>();
    for (u32 i = lo + threadIdx.x; i < hi; i += T) acc = xyzz_add_ool(acc, load_xyzz(in + base + i));
    store_xyzz(smem + threadIdx.x, acc);
    __syncthreads();
#pragma unroll 1
    for (u32 h = T / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) {
            acc = xyzz_add_ool(acc, load_xyzz(smem + threadIdx.x + h));
            store_xyzz(smem + threadIdx.x, acc);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) store_xyzz(out + (u64)seg * bps + b, acc);
}

// Level-1 accumulation, one variant per occupancy target: __launch_bounds__(PT, MB) caps the
// registers so that MB blocks fit on a multiprocessor (sm_90, 64K registers). The host picks one
// (MsmConfig::accumulate_min_blocks); the arithmetic is identical.
#define CUZK_MSM_ACCUMULATE(SUF, F, PT, PF, MB)                                                              \
    /** Level-1 accumulation over the bucket-grouped list; S threads in total (see msm.cuh). */          \
    extern "C" __global__ void __launch_bounds__(PT, MB) cuzk_msm_accumulate_##SUF##_mb##MB(                 \
        const u32* list, const u32* offsets, u32 K, u32 S, const affine_t<F>* points, xyzz_t<F>* buckets,    \
        u32* part_keys, xyzz_t<F>* part_pts, u32 fresh) {                                                    \
        const u32 s = global_tid();                                                                          \
        if (s < S) body_accumulate<F, PF>(s, S, list, offsets, K, points, buckets, part_keys, part_pts, fresh != 0); \
    }

CUZK_MSM_ACCUMULATE(g1, FpAcc, PT_THREADS_G1, false, 3)
CUZK_MSM_ACCUMULATE(g1, FpAcc, PT_THREADS_G1, false, 4)
CUZK_MSM_ACCUMULATE(g1, FpAcc, PT_THREADS_G1, false, 5)
CUZK_MSM_ACCUMULATE(g2, Fp2Acc, PT_THREADS_G2, false, 4)
CUZK_MSM_ACCUMULATE(g2, Fp2Acc, PT_THREADS_G2, false, 6)

// Batch-affine level-1 accumulation (msm_affine.cuh), G1 and G2. Threads per block: layout.rs's
// AFFINE_THREADS; occupancy variants: GroupLayout::affine_min_blocks of each group, defaults
// GroupLayout::affine_default_min_blocks.
#define AFFINE_THREADS 128

/** Chain states of the batch-affine accumulation: one thread per chain g < G. */
#define CUZK_MSM_AFFINE_INIT(SUF, F)                                                                          \
    extern "C" __global__ void cuzk_msm_affine_init_##SUF(const u32* offsets, u32 K, u32 G, u32 L,          \
                                                         chain_meta* meta, u32* first_keys,                  \
                                                         affine_t<F>* first_pts) {                           \
        body_affine_init<F>(global_tid(), G, L, offsets, K, meta, first_keys, first_pts);                   \
    }
CUZK_MSM_AFFINE_INIT(g1, Fp)
CUZK_MSM_AFFINE_INIT(g2, Fp2)

/** Batch-affine level-1 accumulation: S threads, CH chains of L entries each (msm_affine.cuh);
 *  one variant per occupancy target MB, as the XYZZ kernels. The step's shared tree holds
 *  2 AFFINE_THREADS field elements (12 KiB for G1, 24 KiB for G2). */
#define CUZK_MSM_ACCUMULATE_AFFINE(SUF, F, MB)                                                                \
    extern "C" __global__ void __launch_bounds__(AFFINE_THREADS, MB) cuzk_msm_accumulate_affine_##SUF##_mb##MB( \
        const u32* list, const u32* offsets, u32 K, u32 S, u32 CH, u32 L, const affine_t<F>* points,          \
        xyzz_t<F>* buckets, chain_meta* meta, affine_t<F>* acc, F* scratch, u32* first_keys,                 \
        affine_t<F>* first_pts, u32 fresh) {                                                                  \
        __shared__ F tree[2 * AFFINE_THREADS];                                                                \
        affine_args<F> a{list,    offsets, K,       S,          CH,         L,         points,                \
                         buckets, meta,    acc,     scratch,    first_keys, first_pts, fresh != 0, tree};     \
        /* every thread of the block, also past S, joins the block's inversions */                           \
        body_accumulate_affine<AFFINE_THREADS, F>(global_tid(), a);                                           \
    }
CUZK_MSM_ACCUMULATE_AFFINE(g1, FpAff, 3)
CUZK_MSM_ACCUMULATE_AFFINE(g1, FpAff, 4)
CUZK_MSM_ACCUMULATE_AFFINE(g1, FpAff, 5)
CUZK_MSM_ACCUMULATE_AFFINE(g2, Fp2Aff, 2)
CUZK_MSM_ACCUMULATE_AFFINE(g2, Fp2Aff, 3)

/** Level 2 over the 2 G chain slots (entries 2g: first run, 2g + 1: open run) in segments of L;
 *  S = ceil(2 G / L) threads; as cuzk_msm_partials_<SUF> otherwise. */
#define CUZK_MSM_AFFINE_PARTIALS(SUF, F, PT)                                                                  \
    extern "C" __global__ void __launch_bounds__(PT) cuzk_msm_affine_partials_##SUF(                           \
        const u32* first_keys, const affine_t<F>* first_pts, const chain_meta* meta, const affine_t<F>* acc,   \
        u32 count, u32 L, u32 S, u32* out_keys, xyzz_t<F>* out_pts, xyzz_t<F>* buckets, u32 final_pass, u32 K, \
        u32 fresh) {                                                                                          \
        const u32 s = global_tid();                                                                           \
        if (s < S)                                                                                            \
            body_accumulate_sorted<F>(s, affine_entries<F>{first_keys, first_pts, meta, acc}, count, L,       \
                                      out_keys, out_pts, buckets, final_pass, K, fresh != 0);                 \
    }
CUZK_MSM_AFFINE_PARTIALS(g1, Fp, PT_THREADS_G1)
CUZK_MSM_AFFINE_PARTIALS(g2, Fp2, PT_THREADS_G2)

#define CUZK_MSM_KERNELS(SUF, F, PT, RT, OB)                                                                 \
    /** Level-n accumulation of key-sorted partials in segments of L; S = ceil(count / L) threads. */      \
    extern "C" __global__ void __launch_bounds__(PT) cuzk_msm_partials_##SUF(                                \
        const u32* keys, const xyzz_t<F>* pts, u32 count, u32 L, u32 S, u32* out_keys, xyzz_t<F>* out_pts,    \
        xyzz_t<F>* buckets, u32 final_pass, u32 K, u32 fresh) {                                              \
        const u32 s = global_tid();                                                                          \
        if (s < S) body_accumulate_partials<F>(s, keys, pts, count, L, out_keys, out_pts, buckets, final_pass, K, fresh != 0); \
    }                                                                                                        \
    /** Chunked running sums: nw * (2^(c-1) / C) threads. */                                                \
    extern "C" __global__ void __launch_bounds__(PT) cuzk_msm_bucket_reduce_##SUF(                           \
        const xyzz_t<F>* buckets, u32 nw, u32 c, u32 C, xyzz_t<F>* out) {                                    \
        body_bucket_reduce<F>(global_tid(), buckets, nw, c, C, out);                                         \
    }                                                                                                        \
    /** Sum of the points with scalar 1: T threads, out[t] = partial sum of thread t. */                   \
    extern "C" __global__ void __launch_bounds__(PT, OB) cuzk_msm_ones_##SUF(const u32* ones, u32 n1, u32 T, \
                                                                         const affine_t<F>* points,          \
                                                                         xyzz_t<F>* out) {                   \
        const u32 t = global_tid();                                                                          \
        if (t < T) body_ones<F>(t, T, ones, n1, points, out);                                                \
    }                                                                                                        \
    /** Tree reduction: nseg segments of seg_len points -> nseg * ceil(seg_len / G) sums; one block of  \
     *  RT threads per group of G consecutive points. */                                                   \
    extern "C" __global__ void __launch_bounds__(RT) cuzk_msm_reduce_##SUF(const xyzz_t<F>* in, u32 seg_len,  \
                                                                           u32 G, xyzz_t<F>* out) {          \
        reduce_block<F, RT>(in, seg_len, G, out);                                                            \
    }                                                                                                        \
    /** out[i] = Jacobian form of in[i] (blst layout), i < count. */                                       \
    extern "C" __global__ void cuzk_msm_to_jacobian_##SUF(const xyzz_t<F>* in, u32 count, jacobian_t<F>* out) { \
        const u32 i = global_tid();                                                                          \
        if (i < count) store_jacobian(out + i, xyzz_to_jacobian(load_xyzz(in + i)));                         \
    }                                                                                                        \
    /** Test hook for tests/gpu_curve.rs: op 0: a + b (XYZZ add of the affine inputs), 1: 2a,            \
     *  2: a + b by mixed addition, 3: a - b by mixed addition, 4: a + a by mixed addition. */          \
    extern "C" __global__ void cuzk_curve_test_##SUF(u32 op, const affine_t<F>* a, const affine_t<F>* b,    \
                                                     u32 count, jacobian_t<F>* out) {                        \
        const u32 i = global_tid();                                                                          \
        if (i >= count) return;                                                                              \
        const affine_t<F> pa = load_affine(a + i), pb = load_affine(b + i);                                  \
        xyzz_t<F> r;                                                                                         \
        switch (op) {                                                                                        \
            case 0: r = xyzz_add_ool(xyzz_from_affine(pa), xyzz_from_affine(pb)); break;                         \
            case 1: r = xyzz_dbl(xyzz_from_affine(pa)); break;                                               \
            case 2: r = xyzz_add_affine_ool(xyzz_from_affine(pa), pb, false); break;                             \
            case 3: r = xyzz_add_affine_ool(xyzz_from_affine(pa), pb, true); break;                              \
            default: r = xyzz_add_affine_ool(xyzz_from_affine(pa), pa, false); break;                            \
        }                                                                                                    \
        store_jacobian(out + i, xyzz_to_jacobian(r));                                                        \
    }

CUZK_MSM_KERNELS(g1, Fp, PT_THREADS_G1, RED_THREADS_G1, 4)
CUZK_MSM_KERNELS(g2, Fp2, PT_THREADS_G2, RED_THREADS_G2, 4)
