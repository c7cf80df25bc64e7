// cuda/msm.cuh -- Pippenger multi-scalar multiplication over BLS12-381 G1 / G2: per-thread bodies.
//
// The __global__ wrappers live in msm.cu; the bodies here are plain templates over the field
// type (msm.cu instantiates them with the wrapper kinds of curve.cuh).
//
// Algorithm (Pippenger, "On the evaluation of powers and related problems", FOCS 1976; signed
// windows as in Bootle et al. / the common "bucket method" write-ups):
//   0. classify  : every scalar s_j is converted to canonical form (from Montgomery when asked),
//                  s_j = 0 is skipped, s_j = 1 puts its point into the "ones" list (summed by a plain
//                  reduction), every other j goes to the "rest" list. With a density bitmap, scalar j
//                  is used only if bit j is set, and its point is the popcount of the bits below j.
//   1. digits    : s = sum_w d_w 2^(c w), d_w in [-2^(c-1), 2^(c-1)] (signed c-bit windows,
//                  W = floor(255 / c) + 1 windows cover every s < 2^255 > r).
//   2. bucketing : counting sort of (window, |d|) keys: histogram (atomics) -> exclusive scan ->
//                  scatter (atomics); the list holds point index | (d < 0) << 31 grouped by key.
//                  Long lists scatter in two passes, by coarse bin then by key (2' below).
//   3. accumulate: the grouped list is cut into equal segments, one per thread (load balance does
//                  not depend on the bucket sizes). Runs inside a segment go straight to their
//                  bucket; the first and the last run of every segment go to a "partials" list
//                  (sorted by key), which is reduced again the same way until one segment is left.
//   4. window sum: sum_b b * B_b per window by running sums over chunks of C buckets:
//                  chunk j gives acc_j + (j C) run_j; the chunk results are added by a tree.
//   5. the host combines sum_w 2^(c w) W_w + ones (blstrs).
#pragma once

#include "curve.cuh"

#ifndef CUZK_HD
#define CUZK_HD inline
#endif

namespace cuzk_msm {

using namespace cuzk_curve;
typedef unsigned int u32;
typedef unsigned long long u64;

#if defined(__CUDA_ARCH__)
CUZK_HD u64 mulhi64(u64 a, u64 b) { return __umul64hi(a, b); }
CUZK_HD u32 popc32(u32 x) { return __popc(x); }
CUZK_HD u32 atomic_add_u32(u32* p, u32 v) { return atomicAdd(p, v); }
CUZK_HD u32 atomic_add_shared(u32* p, u32 v) { return atomicAdd(p, v); }
#else
inline u64 mulhi64(u64 a, u64 b) { return (u64)(((unsigned __int128)a * b) >> 64); }
inline u32 popc32(u32 x) { return (u32)__builtin_popcount(x); }
inline u32 atomic_add_u32(u32* p, u32 v) {
    u32 o = *p;
    *p = o + v;
    return o;
}
inline u32 atomic_add_shared(u32* p, u32 v) { return atomic_add_u32(p, v); }
#endif

/// BLS12-381 scalar field modulus r, little-endian 64-bit limbs.
#define CUZK_R0 0xffffffff00000001ull
#define CUZK_R1 0x53bda402fffe5bfeull
#define CUZK_R2 0x3339d80809a1d805ull
#define CUZK_R3 0x73eda753299d7d48ull
/// -r^{-1} mod 2^64.
#define CUZK_RINV 0xfffffffeffffffffull

/// a >= r ?
CUZK_HD bool geq_r(const u64 a[4]) {
    const u64 r[4] = {CUZK_R0, CUZK_R1, CUZK_R2, CUZK_R3};
    for (int i = 3; i >= 0; i--) {
        if (a[i] != r[i]) return a[i] > r[i];
    }
    return true;
}

/// a -= r (caller ensures a >= r).
CUZK_HD void sub_r(u64 a[4]) {
    const u64 r[4] = {CUZK_R0, CUZK_R1, CUZK_R2, CUZK_R3};
    u64 borrow = 0;
    for (int i = 0; i < 4; i++) {
        u64 t = a[i] - r[i];
        u64 b1 = a[i] < r[i];
        u64 t2 = t - borrow;
        u64 b2 = t < borrow;
        a[i] = t2;
        borrow = b1 | b2;
    }
}

/// Montgomery reduction a * 2^-256 mod r (REDC, Montgomery 1985) of a 4-limb a < 2^256: the
/// canonical value of a blst_fr / blstrs::Scalar given in Montgomery form.
CUZK_HD void fr_from_mont(u64 a[4]) {
    const u64 r[4] = {CUZK_R0, CUZK_R1, CUZK_R2, CUZK_R3};
    u64 t[5] = {a[0], a[1], a[2], a[3], 0};
    // Word-serial REDC: 4 rounds, each adds m * r (m = t0 * -r^-1) and shifts one limb out.
    for (int i = 0; i < 4; i++) {
        u64 m = t[0] * CUZK_RINV;
        u64 carry = 0;
        for (int k = 0; k < 4; k++) {
            u64 lo = m * r[k];
            u64 hi = mulhi64(m, r[k]);
            u64 s = t[k] + lo;
            hi += (s < lo);
            u64 s2 = s + carry;
            hi += (s2 < carry);
            t[k] = s2;
            carry = hi;
        }
        u64 s = t[4] + carry;  // t[4] <= 1 here, no overflow past 2^64 * 2
        u64 top = (s < carry);
        // shift down one limb
        t[0] = t[1];
        t[1] = t[2];
        t[2] = t[3];
        t[3] = s;
        t[4] = top;
    }
    a[0] = t[0];
    a[1] = t[1];
    a[2] = t[2];
    a[3] = t[3];
    if (t[4] || geq_r(a)) sub_r(a);
}

/// Loads scalar j as a canonical integer < r: from Montgomery form (`mont` != 0) or reducing a
/// canonical 256-bit value modulo r (at most two subtractions since 2^256 < 3r).
CUZK_HD void load_scalar(const u64* scalars, u32 j, u32 mont, u64 s[4]) {
    const u64* p = scalars + 4 * (u64)j;
    s[0] = p[0];
    s[1] = p[1];
    s[2] = p[2];
    s[3] = p[3];
    if (mont) {
        fr_from_mont(s);
    } else {
        if (geq_r(s)) sub_r(s);
        if (geq_r(s)) sub_r(s);
    }
}

/// Point index of scalar j: j without a density map; with one, the number of set bits below j.
/// `words`: bit j is bit (j % 32) of words[j / 32]; `prefix[i]`: set bits in words[0..i).
CUZK_HD u32 point_index(u32 j, const u32* words, const u32* prefix) {
    if (!words) return j;
    u32 w = words[j >> 5];
    u32 below = w & ((1u << (j & 31)) - 1u);
    return prefix[j >> 5] + popc32(below);
}

CUZK_HD bool density_bit(u32 j, const u32* words) { return !words || ((words[j >> 5] >> (j & 31)) & 1u); }

/// Bits [b, b + c) of a 256-bit little-endian integer (c <= 32; bits past 255 read as 0).
CUZK_HD u32 get_bits(const u64 s[4], u32 b, u32 c) {
    u32 li = b >> 6, sh = b & 63;
    if (li >= 4) return 0;
    u64 v = s[li] >> sh;
    if (sh + c > 64 && li + 1 < 4) v |= s[li + 1] << (64 - sh);
    return (u32)(v & ((1ull << c) - 1ull));
}

/// Signed digit of window w (c bits, w_end windows walked from 0 for the carries). Calls
/// emit(w, d) for every window w in [w0, w1) whose digit d is nonzero.
template <class Emit> CUZK_HD void for_each_digit(const u64 s[4], u32 c, u32 w0, u32 w1, Emit emit) {
    const u32 half = 1u << (c - 1);
    u32 carry = 0;
    for (u32 w = 0; w < w1; w++) {
        u32 raw = get_bits(s, w * c, c) + carry;
        int d;
        if (raw > half) {
            d = (int)raw - (int)(2u * half);
            carry = 1;
        } else {
            d = (int)raw;
            carry = 0;
        }
        if (w >= w0 && d != 0) emit(w, d);
    }
}

// ---------------------------------------------------------------------------------------------
// 2. bucketing (counting sort by key = (w - w0) * B + |d| - 1, B = 2^(c-1))

struct bucket_args {
    const u64* scalars;  // n scalars, 4 x u64 each
    u32 mont;            // scalars in Montgomery form?
    const u32* dens_words;   // density bitmap or null
    const u32* dens_prefix;  // exclusive popcount prefix per word (null without density)
    const u32* rest;     // rest[i] = scalar index j
    u32 m;               // entries of `rest` handled by this launch
    u32 c;               // window bits
    u32 w0, w1;          // windows [w0, w1) of this group
};

CUZK_HD void body_histogram(u32 i, const bucket_args& a, u32* counts) {
    if (i >= a.m) return;
    u64 s[4];
    load_scalar(a.scalars, a.rest[i], a.mont, s);
    const u32 B = 1u << (a.c - 1);
    const u32 w0 = a.w0;
    for_each_digit(s, a.c, a.w0, a.w1, [&](u32 w, int d) {
        u32 k = (w - w0) * B + (u32)(d < 0 ? -d : d) - 1u;
        atomic_add_u32(&counts[k], 1u);
    });
}

CUZK_HD void body_scatter(u32 i, const bucket_args& a, u32* cursors, u32* list) {
    if (i >= a.m) return;
    u32 j = a.rest[i];
    u64 s[4];
    load_scalar(a.scalars, j, a.mont, s);
    u32 p = point_index(j, a.dens_words, a.dens_prefix);
    const u32 B = 1u << (a.c - 1);
    const u32 w0 = a.w0;
    for_each_digit(s, a.c, a.w0, a.w1, [&](u32 w, int d) {
        u32 k = (w - w0) * B + (u32)(d < 0 ? -d : d) - 1u;
        u32 pos = atomic_add_u32(&cursors[k], 1u);
        list[pos] = p | (d < 0 ? 0x80000000u : 0u);
    });
}

// ---------------------------------------------------------------------------------------------
// 2'. two-pass scatter of long lists (instead of body_scatter)
//
// body_scatter writes each entry to a random place of the whole list: on a list larger than the
// L2 every 4-byte store costs a sector read and write-back of DRAM (ncu, H200 G1 2^26: 96 GB of
// DRAM traffic for a 3.5 GB list, 77 ms of the 86 ms bucketing). After the histogram and its
// scan (the offsets of every key, as before), the bucket index b = |d| - 1 of window w is split
// into a coarse bin g = (k - kb0) >> lb (k = w B + b, kb0 = the window group's first key) and
// lb low bits; coarse bins are contiguous key ranges:
//   A. per window group [w0, w1): tmp[ccur[g]++] = (entry, k), ccur starting at the bin's list
//      offset relative to the group (body_coarse_init): tmp holds the group's entries grouped by
//      coarse bin, in the order of the final list. The blocks in flight append to the fronts of
//      the group's bins (3 x 2^14 at c = 20: two sectors each, 3 MiB, in the L2).
//   B. one block per coarse bin: list[cur[k]++] = entry with the bin's 2^lb cursors in shared
//      memory. A bin's entries land in its own list range (4,096 entries at 2^26): no global
//      atomics, and the blocks in flight write a few MB.
// A first version with 2^10 coarse bins per window and per-entry global atomics in pass B too
// lost to the one-pass scatter (14 + 11 ms per group at 2^26: the atomics on the few counters the
// blocks in flight share). A version with block tiles aggregated in shared memory and 2^9 bins
// per window (no per-entry global atomics at all) lost more: its pass-B blocks each write a
// 512 KB list range, so the blocks in flight write 0.5 GB at once (153 vs 87 ms at 2^26).
// Places within a bucket are assigned by atomics: the order in a bucket is unspecified (as before).

/// ccur[g] = offsets[kb0 + (g << lb)] - offsets[kb0] for g < G (a group's coarse bins).
CUZK_HD void body_coarse_init(u32 g, const u32* offsets, u32 kb0, u32 lb, u32 G, u32* ccur) {
    if (g < G) ccur[g] = offsets[kb0 + (g << lb)] - offsets[kb0];
}

/// Pass A, one thread per rest entry i < m, windows [w0, w1) of the args (the group), key
/// k = w B + |d| - 1 as in the whole list; kb0 = w0 B.
CUZK_HD void body_scatter_coarse(u32 i, const bucket_args& a, u32 lb, u32 kb0, u32* ccur, u32* tmp_val,
                                 u32* tmp_key) {
    if (i >= a.m) return;
    u32 j = a.rest[i];
    u64 s[4];
    load_scalar(a.scalars, j, a.mont, s);
    u32 p = point_index(j, a.dens_words, a.dens_prefix);
    const u32 B = 1u << (a.c - 1);
    for_each_digit(s, a.c, a.w0, a.w1, [&](u32 w, int d) {
        u32 k = w * B + (u32)(d < 0 ? -d : d) - 1u;
        u32 pos = atomic_add_u32(&ccur[(k - kb0) >> lb], 1u);
        tmp_val[pos] = p | (d < 0 ? 0x80000000u : 0u);
        tmp_key[pos] = k;
    });
}

/// Most bucket-index bits below a coarse bin (layout::TWO_PASS_FINE_BITS): pass B keeps a bin's
/// 2^lb cursors in shared memory.
#define CUZK_TWO_PASS_FINE_BITS 9

/// Pass B, block g of a group's coarse bins (threads t of T): the bin's 2^lb cursors in shared
/// memory start at its keys' list offsets; every entry of the bin's tmp range goes to
/// list[cur[key - bin base]++]. A bin of all entries (e.g. equal scalars) is one block's serial
/// work.
CUZK_HD void body_scatter_fine(u32 g, u32 t, u32 T, const u32* offsets, u32 kb0, u32 lb, u32* cur,
                               const u32* tmp_val, const u32* tmp_key, u32* list) {
    const u32 kbase = kb0 + (g << lb);
    const u32 begin = offsets[kbase] - offsets[kb0];
    const u32 end = offsets[kbase + (1u << lb)] - offsets[kb0];
    for (u32 i = t; i < (1u << lb); i += T) cur[i] = offsets[kbase + i];
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
    for (u32 i = begin + t; i < end; i += T) {
        u32 pos = atomic_add_shared(&cur[tmp_key[i] - kbase], 1u);
        list[pos] = tmp_val[i];
    }
}

// ---------------------------------------------------------------------------------------------
// 3. accumulation

/// Adds a run's sum into its bucket: buckets[k] += v (a key is written at most once per chunk, by
/// exactly one thread).
template <class F> CUZK_COLD void bucket_add(xyzz_t<F>* buckets, u32 k, const xyzz_t<F>& v) {
    if (is_inf(v)) return;
    store_xyzz(buckets + k, xyzz_add_ool(load_xyzz(buckets + k), v));
}

/// Writes a run's sum: a plain store when the buckets are `fresh` (first chunk: every bucket is
/// still infinity), else buckets[k] += v.
template <class F> CUZK_HD void bucket_put(xyzz_t<F>* buckets, u32 k, const xyzz_t<F>& v, bool fresh) {
    if (fresh)
        store_xyzz(buckets + k, v);
    else
        bucket_add(buckets, k, v);
}

/// Level-1 accumulation, thread s of S. `offsets` has K + 1 entries (offsets[K] = N, the list
/// length); segment s is [s L, min((s+1) L, N)) with L = ceil(N / S). Writes partial slots
/// 2s (first run) and 2s+1 (last run); segments past N write the sentinel key K with infinity.
template <class F, bool PREFETCH>
CUZK_HD void body_accumulate(u32 s, u32 S, const u32* list, const u32* offsets, u32 K, const affine_t<F>* points,
                             xyzz_t<F>* buckets, u32* part_keys, xyzz_t<F>* part_pts, bool fresh) {
    const u32 N = offsets[K];
    const u32 L = (N + S - 1) / S;
    const u64 start64 = (u64)s * L;
    if (N == 0 || start64 >= N) {
        part_keys[2 * s] = K;
        part_keys[2 * s + 1] = K;
        store_xyzz(part_pts + 2 * s, xyzz_inf<F>());
        store_xyzz(part_pts + 2 * s + 1, xyzz_inf<F>());
        return;
    }
    const u32 start = (u32)start64;
    const u32 end = (start + L < N) ? start + L : N;
    // bucket k with offsets[k] <= start < offsets[k+1]
    u32 lo = 0, hi = K;
    while (hi - lo > 1) {
        u32 mid = (lo + hi) >> 1;
        if (offsets[mid] <= start)
            lo = mid;
        else
            hi = mid;
    }
    u32 k = lo;
    u32 kend = offsets[k + 1];
    u32 run_start = start;
    xyzz_t<F> acc = xyzz_inf<F>();
    // With PREFETCH the next point is loaded before the current addition (its latency hidden behind
    // ~10 field multiplications), at the cost of one more point in registers.
    u32 e = list[start];
    affine_t<F> pt;
    if (PREFETCH) pt = load_affine(points + (e & 0x7fffffffu));
    for (u32 i = start;; i++) {
        const bool has_next = i + 1 < end;
        u32 e_next = 0;
        affine_t<F> pt_next;
        if (has_next) e_next = list[i + 1];
        if (PREFETCH) {
            if (has_next) pt_next = load_affine(points + (e_next & 0x7fffffffu));
        } else {
            pt = load_affine(points + (e & 0x7fffffffu));
        }
        acc = xyzz_add_affine(acc, pt, (e >> 31) != 0);
        if (i + 1 == kend || !has_next) {
            const bool is_first = run_start == start;
            const bool is_last = !has_next;
            if (is_first) {
                part_keys[2 * s] = k;
                store_xyzz(part_pts + 2 * s, acc);
                if (is_last) {
                    part_keys[2 * s + 1] = k;
                    store_xyzz(part_pts + 2 * s + 1, xyzz_inf<F>());
                }
            } else if (is_last) {
                part_keys[2 * s + 1] = k;
                store_xyzz(part_pts + 2 * s + 1, acc);
            } else {
                bucket_put(buckets, k, acc, fresh);
            }
            if (!has_next) break;
            acc = xyzz_inf<F>();
            run_start = i + 1;
            k++;
            while (offsets[k + 1] <= i + 1) k++;
            kend = offsets[k + 1];
        }
        e = e_next;
        if (PREFETCH) pt = pt_next;
    }
}

/// Entries of a key-sorted XYZZ partial list (level >= 2 input).
template <class F> struct xyzz_entries {
    const u32* keys;
    const xyzz_t<F>* pts;
    CUZK_HD u32 key(u32 i) const { return keys[i]; }
    CUZK_HD xyzz_t<F> add_to(const xyzz_t<F>& acc, u32 i) const { return xyzz_add_ool(acc, load_xyzz(pts + i)); }
};

/// Level-n accumulation of a key-sorted list of `count` entries (`E`: key(i), add_to(acc, i)) in
/// segments of L, thread s. With `final_pass` (a single segment) every run goes to its bucket.
template <class F, class E>
CUZK_HD void body_accumulate_sorted(u32 s, const E& src, u32 count, u32 L, u32* out_keys, xyzz_t<F>* out_pts,
                                    xyzz_t<F>* buckets, u32 final_pass, u32 K, bool fresh) {
    const u64 start64 = (u64)s * L;
    if (start64 >= count) {
        if (!final_pass) {
            out_keys[2 * s] = K;
            out_keys[2 * s + 1] = K;
            store_xyzz(out_pts + 2 * s, xyzz_inf<F>());
            store_xyzz(out_pts + 2 * s + 1, xyzz_inf<F>());
        }
        return;
    }
    const u32 start = (u32)start64;
    const u32 end = (start + L < count) ? start + L : count;
    u32 run_start = start;
    xyzz_t<F> acc = xyzz_inf<F>();
    for (u32 i = start; i < end; i++) {
        const u32 k = src.key(i);
        acc = src.add_to(acc, i);
        const bool has_next = i + 1 < end;
        if (!has_next || src.key(i + 1) != k) {
            const bool is_first = run_start == start;
            const bool is_last = !has_next;
            if (final_pass || (!is_first && !is_last)) {
                if (k < K) bucket_put(buckets, k, acc, fresh);
            } else if (is_first) {
                out_keys[2 * s] = k;
                store_xyzz(out_pts + 2 * s, acc);
                if (is_last) {
                    out_keys[2 * s + 1] = k;
                    store_xyzz(out_pts + 2 * s + 1, xyzz_inf<F>());
                }
            } else {
                out_keys[2 * s + 1] = k;
                store_xyzz(out_pts + 2 * s + 1, acc);
            }
            acc = xyzz_inf<F>();
            run_start = i + 1;
        }
    }
}

/// Level-n accumulation of a key-sorted XYZZ list (see body_accumulate_sorted).
template <class F>
CUZK_HD void body_accumulate_partials(u32 s, const u32* keys, const xyzz_t<F>* pts, u32 count, u32 L,
                                      u32* out_keys, xyzz_t<F>* out_pts, xyzz_t<F>* buckets, u32 final_pass,
                                      u32 K, bool fresh) {
    body_accumulate_sorted<F>(s, xyzz_entries<F>{keys, pts}, count, L, out_keys, out_pts, buckets, final_pass, K,
                              fresh);
}

// ---------------------------------------------------------------------------------------------
// 4. window sums

/// Thread t of nw * (B / C): chunk j = t % (B/C) of window w = t / (B/C) of the bucket array
/// (B buckets per window, bucket b holds digit b + 1). Output: sum_{b in chunk} (b + 1) * B_b.
template <class F>
CUZK_HD void body_bucket_reduce(u32 t, const xyzz_t<F>* buckets, u32 nw, u32 c, u32 C, xyzz_t<F>* out) {
    const u32 B = 1u << (c - 1);
    const u32 per_w = B / C;
    if (t >= nw * per_w) return;
    const u32 w = t / per_w, j = t % per_w;
    const xyzz_t<F>* b = buckets + (u64)w * B + (u64)j * C;
    xyzz_t<F> run = xyzz_inf<F>(), acc = xyzz_inf<F>();
    for (int i = (int)C - 1; i >= 0; i--) {
        run = xyzz_add_ool(run, load_xyzz(b + i));
        acc = xyzz_add_ool(acc, run);
    }
    // acc = sum_i (i + 1) b_i; the digits of this chunk are j C + i + 1.
    if (j != 0) acc = xyzz_add_ool(acc, xyzz_mul_u32(run, j * C, (int)(c - 1)));
    store_xyzz(out + t, acc);
}

/// Thread t of T: sum of points[ones[i]] over i = t, t + T, ... < n1.
template <class F>
CUZK_HD void body_ones(u32 t, u32 T, const u32* ones, u32 n1, const affine_t<F>* points, xyzz_t<F>* out) {
    xyzz_t<F> acc = xyzz_inf<F>();
    for (u32 i = t; i < n1; i += T) acc = xyzz_add_affine(acc, load_affine(points + ones[i]), false);
    store_xyzz(out + t, acc);
}

}  // namespace cuzk_msm
