// cuzk — number-theoretic transform over the BLS12-381 scalar field Fr.
//
// Algorithm
//   Radix-2 Cooley-Tukey, grouped into passes of k <= 10 stages ("radix-2^k" passes, the
//   decomposition of Bailey, "FFTs in external or hierarchical memory", J. Supercomputing 1990,
//   applied recursively). A pass over the index bits [lo, lo+k) of a transform of size 2^L
//   splits every block of m = 2^(lo+k) elements as 2^k rows x 2^lo columns and runs, for each
//   column, a local 2^k-point transform in shared memory plus one "twist" multiplication per
//   element by w_m^(col * bitrev_k(r)) (r = row position):
//     * DIF (Gentleman-Sande) passes go from the top bits down, twist after the local transform:
//       natural order in, bit-reversed order out;
//     * DIT (Cooley-Tukey) passes go from the bottom bits up, twist before the local transform:
//       bit-reversed order in, natural order out.
//   Inverse transforms use w^-1 (table index negated mod the table size); scaling by 1/n and the
//   coset factors g^i / g^-i are fused into the first or last pass ("pre"/"post" scaling).
//
// Roots
//   Domains of size n = 2^L use w_n = ROOT_OF_UNITY^(2^(32-L)) (ROOT_OF_UNITY of order 2^32, as
//   ff / bellperson's EvaluationDomain). All twiddles are powers of w_N, N = 2^MAX_LOG_N, read as
//   tw_lo[e mod 2^14] * tw_hi[e / 2^14] (since w_n = w_N^(N/n) one table pair serves every
//   domain size), except in a pass whose blocks span at most 2^18 elements (lo + k <= 18):
//   its twist exponents are multiples of 2^10, read from a direct table of w_N^(2^10 j),
//   j < 2^18 (8 MiB), one product fewer. The local transforms read w_(2^10)^j from a 1024-entry table. The tables are
//   generated on the device by cuzk_ntt_powers (src/gpu/kernels/ntt.rs).
#include "field.cuh"

namespace cuzk {
namespace ntt {

constexpr unsigned MAX_LOG_N = 28;  // largest supported domain 2^28
constexpr unsigned INNER_LOG = 10;  // local transforms up to 2^10 points; inner table size
constexpr unsigned SPLIT = 14;      // two-level tables: 2^14 low + 2^14 high entries
constexpr unsigned MID_SHIFT = 10;  // direct table of w_N^(j 2^10), j < 2^18: every twist of a
constexpr unsigned MID_LOG = 18;    // pass with lo + k <= 18 (its exponents are multiples of 2^10)

/// The pass kernel's Montgomery product, one kernel per choice (src/gpu/kernels/ntt.rs
/// `PassProduct`): P = 0 Fr::mul_cios, 1 Fr::mul_wide, 2 Fr::mul_split (field.cuh documents all
/// three).
constexpr int PASS_CIOS = 0, PASS_WIDE = 1, PASS_SPLIT = 2;
template <int P>
__device__ __forceinline__ Fr fmul(const Fr& a, const Fr& b) {
    return P == PASS_SPLIT ? Fr::mul_split(a, b) : P == PASS_WIDE ? Fr::mul_wide(a, b) : Fr::mul_cios(a, b);
}

__device__ __forceinline__ uint32_t bitrev(uint32_t x, unsigned bits) {
    return bits == 0 ? 0u : (__brev(x) >> (32 - bits));
}

/// lo[e mod 2^14] * hi[e >> 14] (e < 2^28).
template <int W>
__device__ __forceinline__ Fr table2(const Fr* lo, const Fr* hi, uint32_t e) {
    Fr a = Fr::load(lo + (e & ((1u << SPLIT) - 1)));
    uint32_t h = e >> SPLIT;
    if (h == 0) return a;
    return fmul<W>(a, Fr::load(hi + h));
}

/// The twist factor w_N^e: one load from the direct table when the pass's exponents are
/// multiples of 2^MID_SHIFT (`direct`, uniform over a launch), else the two-level product.
template <int W>
__device__ __forceinline__ Fr twiddle(const Fr* lo, const Fr* hi, const Fr* mid, uint32_t e, bool direct) {
    if (direct) return Fr::load(mid + (e >> MID_SHIFT));
    return table2<W>(lo, hi, e);
}

/// Scaling modes of the fused pre/post step: 0 none, 1 x*scale, 2 x*scale*t(i), 3 x*t(i) where
/// t(i) = s_lo[i mod 2^14]*s_hi[i >> 14] (g^i or g^-i tables; mode 3 is mode 2 with scale 1,
/// one product fewer).
template <int W>
__device__ __forceinline__ Fr apply_scale(const Fr& x, int mode, const Fr& scale, const Fr* s_lo,
                                          const Fr* s_hi, uint32_t i) {
    if (mode == 1) return fmul<W>(x, scale);
    if (mode == 2) return fmul<W>(x, fmul<W>(scale, table2<W>(s_lo, s_hi, i)));
    if (mode == 3) return fmul<W>(x, table2<W>(s_lo, s_hi, i));
    return x;
}

__device__ __forceinline__ Fr smem_load(const uint4* s0, const uint4* s1, unsigned i) {
    uint4 a = s0[i], b = s1[i];
    Fr r;
    r.l[0] = a.x; r.l[1] = a.y; r.l[2] = a.z; r.l[3] = a.w;
    r.l[4] = b.x; r.l[5] = b.y; r.l[6] = b.z; r.l[7] = b.w;
    return r;
}
__device__ __forceinline__ void smem_store(uint4* s0, uint4* s1, unsigned i, const Fr& x) {
    s0[i] = make_uint4(x.l[0], x.l[1], x.l[2], x.l[3]);
    s1[i] = make_uint4(x.l[4], x.l[5], x.l[6], x.l[7]);
}

}  // namespace ntt
}  // namespace cuzk

using cuzk::Fr;

/// out[i] = base^i for i < count (twiddle and coset tables).
extern "C" __global__ void cuzk_ntt_powers(Fr* out, Fr base, unsigned count) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    Fr::pow(base, i).store(out + i);
}

namespace cuzk {
namespace ntt {
/// Body of cuzk_ntt_pass{,_wide,_split} (documented at cuzk_ntt_pass); W selects the product.
template <int W>
__device__ __forceinline__ void pass_body(
    Fr* data, unsigned log_n, unsigned lo, unsigned k, unsigned log_g, int dit, int inverse,
    const Fr* w_inner, const Fr* tw_lo, const Fr* tw_hi, const Fr* tw_mid, int pre_mode, int post_mode,
    const Fr& scale, const Fr* s_lo, const Fr* s_hi) {
    extern __shared__ uint4 smem[];
    const unsigned G = 1u << log_g;
    const unsigned T = 1u << (k + log_g);
    uint4* s0 = smem;
    uint4* s1 = smem + T;
    const unsigned q0 = blockIdx.x << log_g;
    const unsigned col_mask = (1u << lo) - 1;
    const unsigned tw_shift = MAX_LOG_N - lo - k;
    const uint32_t tw_mask = (1u << MAX_LOG_N) - 1;
    const bool direct = tw_shift >= MID_SHIFT;  // twist exponents are multiples of 2^MID_SHIFT

    // ---- load (+ pre-scale, + DIT twist) ----
    for (unsigned idx = threadIdx.x; idx < T; idx += blockDim.x) {
        unsigned g, r;
        if (lo == 0) { g = idx >> k; r = idx & ((1u << k) - 1); }
        else { g = idx & (G - 1); r = idx >> log_g; }
        const unsigned q = q0 + g, col = q & col_mask, outer = q >> lo;
        const uint32_t pos = (outer << (lo + k)) + (r << lo) + col;
        Fr x = Fr::load(data + pos);
        if (pre_mode) x = apply_scale<W>(x, pre_mode, scale, s_lo, s_hi, dit ? bitrev(pos, log_n) : pos);
        if (dit && lo != 0) {
            uint32_t e = (col * bitrev(r, k)) << tw_shift;
            if (e != 0) {
                if (inverse) e = ((1u << MAX_LOG_N) - e) & tw_mask;
                x = fmul<W>(x, twiddle<W>(tw_lo, tw_hi, tw_mid, e, direct));
            }
        }
        smem_store(s0, s1, r * G + g, x);
    }
    __syncthreads();

    // ---- local radix-2 stages ----
    const unsigned nbf = G << (k - 1);
    for (unsigned st = 0; st < k; st++) {
        const unsigned j = dit ? st : (k - 1 - st);  // half-size h = 2^j
        const unsigned h = 1u << j;
        for (unsigned bf = threadIdx.x; bf < nbf; bf += blockDim.x) {
            const unsigned g = bf & (G - 1), u = bf >> log_g;
            const unsigned i0 = ((u >> j) << (j + 1)) | (u & (h - 1));
            const unsigned a_i = i0 * G + g, b_i = (i0 + h) * G + g;
            Fr a = smem_load(s0, s1, a_i), b = smem_load(s0, s1, b_i);
            const bool unit = (j == 0) || ((u & (h - 1)) == 0);
            Fr w;
            if (!unit) {
                unsigned wi = (u & (h - 1)) << (INNER_LOG - j - 1);
                if (inverse) wi = ((1u << INNER_LOG) - wi) & ((1u << INNER_LOG) - 1);
                w = Fr::load(w_inner + wi);
            }
            if (dit) {
                if (!unit) b = fmul<W>(b, w);
                smem_store(s0, s1, a_i, a + b);
                smem_store(s0, s1, b_i, a - b);
            } else {
                Fr d = a - b;
                if (!unit) d = fmul<W>(d, w);
                smem_store(s0, s1, a_i, a + b);
                smem_store(s0, s1, b_i, d);
            }
        }
        __syncthreads();
    }

    // ---- store (+ DIF twist, + post-scale) ----
    for (unsigned idx = threadIdx.x; idx < T; idx += blockDim.x) {
        unsigned g, r;
        if (lo == 0) { g = idx >> k; r = idx & ((1u << k) - 1); }
        else { g = idx & (G - 1); r = idx >> log_g; }
        const unsigned q = q0 + g, col = q & col_mask, outer = q >> lo;
        const uint32_t pos = (outer << (lo + k)) + (r << lo) + col;
        Fr x = smem_load(s0, s1, r * G + g);
        if (!dit && lo != 0) {
            uint32_t e = (col * bitrev(r, k)) << tw_shift;
            if (e != 0) {
                if (inverse) e = ((1u << MAX_LOG_N) - e) & tw_mask;
                x = fmul<W>(x, twiddle<W>(tw_lo, tw_hi, tw_mid, e, direct));
            }
        }
        if (post_mode) x = apply_scale<W>(x, post_mode, scale, s_lo, s_hi, dit ? pos : bitrev(pos, log_n));
        x.store(data + pos);
    }
}
}  // namespace ntt
}  // namespace cuzk

/// One radix-2^k pass over the index bits [lo, lo+k) of an in-place transform of size 2^log_n.
///
/// Block b handles the 2^log_g consecutive sub-transforms q = b*2^log_g + g (column
/// col = q mod 2^lo, block outer = q >> lo), 2^(k+log_g) elements in dynamic shared memory
/// (32 bytes per element, stored as two arrays of 16-byte halves to avoid bank conflicts).
/// Requirements (host):
/// k <= 10, lo + k <= log_n <= 28, 2^log_g <= 2^lo when lo > 0, grid = 2^(log_n-k-log_g).
/// dit: 0 = DIF pass (twist after), 1 = DIT pass (twist before). inverse: use w^-1.
/// pre_mode/post_mode: fused scaling (see apply_scale) at load / store; the natural index of
/// a position p is p for natural-order data and bitrev(p) for bit-reversed data.
/// This kernel multiplies with Fr::mul_cios; _wide and _split (same arguments) with
/// Fr::mul_wide and Fr::mul_split.
#define CUZK_NTT_PASS(NAME, P)                                                                       \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                          \
        Fr* data, unsigned log_n, unsigned lo, unsigned k, unsigned log_g, int dit, int inverse,     \
        const Fr* w_inner, const Fr* tw_lo, const Fr* tw_hi, const Fr* tw_mid, int pre_mode,        \
        int post_mode, Fr scale, const Fr* s_lo, const Fr* s_hi) {                                   \
        cuzk::ntt::pass_body<P>(data, log_n, lo, k, log_g, dit, inverse, w_inner, tw_lo, tw_hi,      \
                                tw_mid, pre_mode, post_mode, scale, s_lo, s_hi);                     \
    }
CUZK_NTT_PASS(cuzk_ntt_pass, cuzk::ntt::PASS_CIOS)
CUZK_NTT_PASS(cuzk_ntt_pass_wide, cuzk::ntt::PASS_WIDE)
CUZK_NTT_PASS(cuzk_ntt_pass_split, cuzk::ntt::PASS_SPLIT)

/// In-place bit-reversal permutation of 2^log_n elements (one thread per index).
extern "C" __global__ void cuzk_ntt_bitrev(Fr* data, unsigned log_n) {
    const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >> log_n) return;
    const uint32_t q = cuzk::ntt::bitrev(p, log_n);
    if (p >= q) return;
    Fr x = Fr::load(data + p), y = Fr::load(data + q);
    y.store(data + p);
    x.store(data + q);
}

/// Multiplies x[i] by scale * t(i) (mode as in cuzk_ntt_pass), natural indices. For n = 1
/// domains and other passes that need no transform.
extern "C" __global__ void cuzk_ntt_scale(Fr* data, unsigned n, int mode, Fr scale, const Fr* s_lo,
                                          const Fr* s_hi) {
    const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    cuzk::ntt::apply_scale<cuzk::ntt::PASS_SPLIT>(Fr::load(data + p), mode, scale, s_lo, s_hi, p).store(data + p);
}

/// The pointwise step of the Groth16 H polynomial on coset evaluations (natural order in):
/// a[i] <- a[i] * b[i] * k, written to position bitrev(i) so that the following inverse transform
/// can be a DIT pass sequence (bit-reversed in, natural out). C's coset evaluations are not needed:
/// src/gpu/kernels/ntt.rs h_step subtracts C's coefficients after that transform
/// (cuzk_ntt_sub_bitrev), and folds 1 / Z on the coset and the transforms' 1/n factors into k.
extern "C" __global__ void cuzk_ntt_h_combine(Fr* a, const Fr* b, unsigned log_n, Fr k) {
    const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >> log_n) return;
    const uint32_t q = cuzk::ntt::bitrev(p, log_n);
    if (p > q) return;
    Fr vp = Fr::load(a + p) * Fr::load(b + p) * k;
    if (p == q) {
        vp.store(a + p);
        return;
    }
    Fr vq = Fr::load(a + q) * Fr::load(b + q) * k;
    vq.store(a + p);
    vp.store(a + q);
}

/// a[i] <- a[i] - c[bitrev(i)]: a in natural order, c in bit-reversed order (the output of a DIF
/// pass sequence). One thread per element; c's reads are scattered but each is a whole 32-byte
/// sector.
extern "C" __global__ void cuzk_ntt_sub_bitrev(Fr* a, const Fr* c, unsigned log_n) {
    const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >> log_n) return;
    (Fr::load(a + p) - Fr::load(c + cuzk::ntt::bitrev(p, log_n))).store(a + p);
}
