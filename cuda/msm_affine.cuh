// cuda/msm_affine.cuh -- batch-affine bucket accumulation (level 1 of msm.cuh's step 3), G1 and G2.
//
// The bucket-grouped list is cut into G = S * CH contiguous chains of L entries; thread s of S owns
// the CH chains g = i * S + s (i < CH), so that a warp's chain states are adjacent in memory. Every
// chain keeps one affine accumulator (x, y) in device memory. Step t adds entry t of each of the
// thread's CH chains to its accumulator, and the CH affine additions share one field inversion
// (Montgomery's trick, "Speeding the Pollard and elliptic curve methods of factorization", Math.
// Comp. 1987): a forward pass multiplies the denominators into prefix products (kept in
// `scratch`), one inversion, and a backward pass peels each denominator's inverse off the
// running inverse (2 products) before the addition itself (lambda, x3 = lambda^2 - x1 - x2,
// y3 = lambda (x1 - x3) - y1: 3 products). The threads of a block share that inversion too
// (`block_inverse`: Montgomery's trick once more, over the block's prefix products; SIMT: one
// warp's inversion costs the same instructions for 1 or 32 lanes), and it is the binary
// extended Euclidean one (`Fp::inverse_vartime`, ~27 k instructions, ~55 products' worth,
// against Fermat's ~485 products): a warp pays ~24 / 4 + 55 / 4 products per step for it. With
// CH = 100 (2^26, 2^27) that is ~6.2 products per addition against ~11 for the XYZZ mixed
// addition (madd-2008-s); BENCHMARKS.md measures the trade. In G2 (F = Fp2) the products are Fp2
// products (~3 Fp products each) and the inversion is one Fp inversion of the norm.
//
// Exceptional cases take the denominator 1 (a product by one in the forward pass, which keeps a
// single product site; nothing in the backward pass): a point at infinity (skipped), P = -A (the
// accumulator becomes empty); an idle chain (past the list) and an empty accumulator (it becomes
// the point) take no product at all. P = A is a doubling with denominator 2y and numerator 3x^2.
//
// Run boundaries: a chain that reaches the end of its bucket flushes the accumulator: its first
// run goes to the chain's `first` slot (the run may have started in an earlier chain), a run that
// lies wholly inside the chain goes straight to its bucket (its only writer), and the run open at
// the end stays in the state as the chain's `last` slot. Entries 2g (first) and 2g + 1 (last) are
// sorted by key across chains; level 2 (body_accumulate_sorted over affine_entries) sums them like
// the XYZZ path's partials. Idle chains carry the sentinel key K.
#pragma once

#include "msm.cuh"

namespace cuzk_msm {

/// Chain flag: the accumulator is empty (infinity).
#define CUZK_CHAIN_EMPTY 1u
/// Chain flag: the chain's first run is still open (its flush goes to the `first` slot).
#define CUZK_CHAIN_FIRST 2u

/// Per-chain bookkeeping, 16 B: x = bucket key of the open run, y = end of that bucket in the
/// list (offsets[key + 1]), z = CUZK_CHAIN_* flags, w unused.
typedef uint4 chain_meta;

/// Chain g of G: its start g L; meta = (key of the bucket holding entry g L, that bucket's end,
/// EMPTY | FIRST); first slot = (key, infinity). Chains starting past the list (N = offsets[K])
/// get the sentinel key K.
template <class F>
CUZK_HD void body_affine_init(u32 g, u32 G, u32 L, const u32* offsets, u32 K, chain_meta* meta, u32* first_keys,
                              affine_t<F>* first_pts) {
    if (g >= G) return;
    const u32 N = offsets[K];
    const u64 start = (u64)g * L;
    u32 k = K, kend = N;
    if (start < N) {
        u32 lo = 0, hi = K;
        while (hi - lo > 1) {
            const u32 mid = (lo + hi) >> 1;
            if (offsets[mid] <= start)
                lo = mid;
            else
                hi = mid;
        }
        k = lo;
        kend = offsets[k + 1];
    }
    meta[g] = make_uint4(k, kend, CUZK_CHAIN_EMPTY | CUZK_CHAIN_FIRST, 0u);
    first_keys[g] = k;
    F::zero().store(&first_pts[g].x);
    F::zero().store(&first_pts[g].y);
}

/// The arguments of one level-1 batch-affine launch.
template <class F> struct affine_args {
    const u32* list;     // bucket-grouped list, N entries (point index | sign << 31)
    const u32* offsets;  // K + 1 bucket offsets, offsets[K] = N
    u32 K;               // buckets
    u32 S, CH, L;        // threads, chains per thread, entries per chain
    const affine_t<F>* points;
    xyzz_t<F>* buckets;
    chain_meta* meta;    // G = S CH chain states
    affine_t<F>* acc;    // G accumulators
    F* scratch;          // G prefix products
    u32* first_keys;     // G first-run keys (written by the init)
    affine_t<F>* first_pts;  // G first-run sums
    bool fresh;          // buckets still infinity (plain stores)
    F* tree;             // shared memory, 2 B elements (block_inverse; B threads per block)
};

/// Point of list entry e (sign applied); `inf` when it is the point at infinity.
template <class F> CUZK_HD affine_t<F> entry_point(const affine_t<F>* points, u32 e, bool& inf) {
    affine_t<F> p = load_affine(points + (e & 0x7fffffffu));
    inf = is_inf(p);
    if (e >> 31) p.y = -p.y;
    return p;
}

/// Closes the run of chain g at a bucket boundary (the entry at `pos` starts another bucket): the
/// accumulator goes to the first slot or to its bucket, and the chain moves to the bucket of `pos`.
template <class F>
CUZK_COLD void affine_flush(const affine_args<F>& a, u32 g, u64 pos, chain_meta& m) {
    if (!(m.z & CUZK_CHAIN_EMPTY)) {
        const affine_t<F> v = load_affine(a.acc + g);
        if (m.z & CUZK_CHAIN_FIRST) {
            v.x.store(&a.first_pts[g].x);
            v.y.store(&a.first_pts[g].y);
        } else {
            bucket_put(a.buckets, m.x, xyzz_from_affine(v), a.fresh);
        }
    }
    u32 k = m.x + 1;
    while (a.offsets[k + 1] <= pos) k++;
    m = make_uint4(k, a.offsets[k + 1], CUZK_CHAIN_EMPTY, 0u);
    a.meta[g] = m;
}

/// The inversion of one step, out of line: called once per block and step, and its code stays
/// out of the loop bodies. The binary extended Euclidean inversion (`Fp::inverse_vartime`, ~27 k
/// instructions against ~230 k for Fermat's; variable time, which adds no new kind of leak: the
/// MSM is not constant-time anyway — its bucket sizes, exceptional cases and memory accesses
/// follow the scalars).
CUZK_COLD cuzk::Fp fp_inverse_ool(cuzk::Fp a) {
    return cuzk::Fp::inverse_vartime(a);
}

/// x^-1 in the wrapper kind of the batch-affine kernel: Fp by `fp_inverse_ool`.
template <bool INL> CUZK_HD FpT<INL> inverse_ool(const FpT<INL>& x) { return {fp_inverse_ool(x.v)}; }

/// x^-1 in Fp2: conj(x) / (x0^2 + x1^2), the norm inverted by `fp_inverse_ool`.
template <bool INL> CUZK_HD Fp2T<INL> inverse_ool(const Fp2T<INL>& x) {
    const FpT<INL> n = inverse_ool(x.c0 * x.c0 + x.c1 * x.c1);
    return {x.c0 * n, -(x.c1 * n)};
}

/// x^-1 for every thread's x (x != 0) with one inversion per block (`inverse_ool`): Montgomery's trick
/// over the block as a product tree in shared memory (`tree`: 2 B elements; B, a power of two,
/// must be the launch's blockDim.x: the kernel is launched with B threads only; heap order, node v's children 2v and 2v + 1, thread j's leaf B + j). Up: B - 1
/// products, level by level; thread 0 inverts the root; down: a child's inverse is its parent's
/// times its sibling (2 (B - 1) products). Only the levels with more than 32 nodes occupy more
/// than one warp, so for B = 128 the block spends 8 + 16 warp-products and one inversion where
/// every warp spent an inversion. Synchronises the block: every thread of it
/// must call it, the same number of times. x = 0 anywhere makes every inverse of the block 0
/// (the callers' denominators are never 0: exceptional cases take 1).
template <u32 B, class F> CUZK_HD F block_inverse(const F& x, F* tree) {
    static_assert(B >= 2 && (B & (B - 1)) == 0, "block_inverse: B must be a power of two");
    const u32 j = threadIdx.x;
    x.store(tree + B + j);
    __syncthreads();
    for (u32 w = B >> 1; w > 0; w >>= 1) {
        if (j < w) (F::load(tree + 2 * (w + j)) * F::load(tree + 2 * (w + j) + 1)).store(tree + w + j);
        __syncthreads();
    }
    if (j == 0) inverse_ool(F::load(tree + 1)).store(tree + 1);
    __syncthreads();
    for (u32 w = 1; w < B; w <<= 1) {
        if (j < w) {
            const u32 v = w + j;
            const F inv = F::load(tree + v), l = F::load(tree + 2 * v), r = F::load(tree + 2 * v + 1);
            (inv * r).store(tree + 2 * v);
            (inv * l).store(tree + 2 * v + 1);
        }
        __syncthreads();
    }
    // Only this thread reads its leaf, and the next call's first write is this thread's own leaf:
    // no barrier needed after the read.
    return F::load(tree + B + j);
}

/// 3 x^2, the numerator of a doubling (P = A inside a chain: rare), out of line.
template <class F> CUZK_COLD F affine_dbl_num(F x) {
    const F s = F::sqr(x);
    return s + F::dbl(s);
}

/// Thread s: L steps over its CH chains (see the header comment). Threads s >= S (the rest of
/// the last block) own no chain but join every step's `block_inverse` (B threads per block).
template <u32 B, class F> CUZK_HD void body_accumulate_affine(u32 s, const affine_args<F>& a) {
    const u32 N = a.offsets[a.K];
    const u32 CH = s < a.S ? a.CH : 0;
    for (u32 t = 0; t < a.L; t++) {
        // forward: denominators into prefix products
        F prefix = F::one();
        for (u32 i = 0; i < CH; i++) {
            const u32 g = i * a.S + s;
            const u64 pos = (u64)g * a.L + t;
            if (pos < N) {
                chain_meta m = a.meta[g];
                if (pos >= m.y) affine_flush(a, g, pos, m);
                if (!(m.z & CUZK_CHAIN_EMPTY)) {
                    const u32 e = a.list[pos];
                    const affine_t<F>* P = a.points + (e & 0x7fffffffu);
                    const F px = F::load(&P->x);
                    const F ax = F::load(&a.acc[g].x);
                    // one product site for both denominators (the code size is the limiter)
                    F den = F::one();
                    if (px == ax) {
                        bool inf;
                        const affine_t<F> p = entry_point(a.points, e, inf);
                        const F ay = F::load(&a.acc[g].y);
                        if (!inf && p.y == ay) den = F::dbl(ay);
                    } else if (!(px.is_zero() && F::load(&P->y).is_zero())) {
                        den = px - ax;
                    }
                    prefix = prefix * den;
                }
            }
            prefix.store(a.scratch + g);
        }
        F inv = block_inverse<B>(prefix, a.tree);
        // backward: peel each inverse, add
        for (u32 i = CH; i-- > 0;) {
            const u32 g = i * a.S + s;
            const u64 pos = (u64)g * a.L + t;
            if (pos >= N) continue;
            const u32 e = a.list[pos];
            bool inf;
            const affine_t<F> p = entry_point(a.points, e, inf);
            if (inf) continue;
            uint32_t* flags = &a.meta[g].z;
            const u32 fl = *flags;
            if (fl & CUZK_CHAIN_EMPTY) {
                p.x.store(&a.acc[g].x);
                p.y.store(&a.acc[g].y);
                *flags = fl & ~CUZK_CHAIN_EMPTY;
                continue;
            }
            const affine_t<F> q = load_affine(a.acc + g);
            F num, den;
            if (p.x == q.x) {
                if (!(p.y == q.y)) {  // P = -A
                    *flags = fl | CUZK_CHAIN_EMPTY;
                    continue;
                }
                num = affine_dbl_num(q.x);
                den = F::dbl(q.y);
            } else {
                num = p.y - q.y;
                den = p.x - q.x;
            }
            const F inv_i = i ? inv * F::load(a.scratch + g - a.S) : inv;
            inv = inv * den;
            const F lambda = num * inv_i;
            const F x3 = F::sqr(lambda) - q.x - p.x;
            const F y3 = lambda * (q.x - x3) - q.y;
            x3.store(&a.acc[g].x);
            y3.store(&a.acc[g].y);
        }
    }
}

/// Level-2 entries of the batch-affine chains: 2g = chain g's first slot, 2g + 1 its state (the
/// run open at the end; infinity when empty).
template <class F> struct affine_entries {
    const u32* first_keys;
    const affine_t<F>* first_pts;
    const chain_meta* meta;
    const affine_t<F>* acc;
    CUZK_HD u32 key(u32 i) const { return (i & 1) ? meta[i >> 1].x : first_keys[i >> 1]; }
    CUZK_HD xyzz_t<F> add_to(const xyzz_t<F>& s, u32 i) const {
        const u32 g = i >> 1;
        if (i & 1) {
            if (meta[g].z & CUZK_CHAIN_EMPTY) return s;
            return xyzz_add_affine_ool(s, load_affine(acc + g), false);
        }
        return xyzz_add_affine_ool(s, load_affine(first_pts + g), false);
    }
};

}  // namespace cuzk_msm
