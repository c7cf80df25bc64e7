// cuzk — BLS12-381 base field Fp, scalar field Fr and the quadratic extension Fp2 on the GPU.
//
// Representation
//   Elements are stored in Montgomery form as little-endian 32-bit limbs:
//     Fr: 8 limbs (256 bits), R = 2^256  -- byte-identical to blstrs::Scalar (blst_fr, 4 x u64 LE)
//     Fp: 12 limbs (384 bits), R = 2^384 -- byte-identical to blstrs::Fp (blst_fp, 6 x u64 LE)
//     Fp2: c0 then c1 (c0 + c1*u, u^2 = -1) -- byte-identical to blstrs::Fp2 (blst_fp2)
//   so host slices of blstrs values are copied to the device raw, without conversion.
//   Every function here expects canonical inputs (0 <= x < modulus) and returns canonical
//   outputs.
//
// Algorithms
//   * Montgomery multiplication: coarsely integrated operand scanning (CIOS), Koc, Acar and
//     Kaliski, "Analyzing and Comparing Montgomery Multiplication Algorithms", IEEE Micro 1996.
//     Each row (t += x * y) is two PTX carry chains, one over the even- and one over the
//     odd-indexed limbs of y, each product's low and high halves landing in adjacent limbs
//     (the even/odd split of Emmart, Luo and Weems, "Optimizing Modular Multiplication for
//     NVIDIA's Maxwell GPUs", ARITH 2016), which ptxas maps to IMAD.WIDE.U32 with carries.
//     Both moduli leave a spare top bit (2p < 2^(32N)), so the result is < 2p before the single
//     conditional subtraction.
//   * Inversion: Fermat's little theorem, x^(p-2) (constant time, ~1.5 * bits multiplications).
//     Meant for a few elements per thread; use batch inversion (Montgomery's trick) for bulk.
//     `inverse_vartime`: the binary extended Euclidean algorithm (Menezes, van Oorschot and
//     Vanstone, "Handbook of Applied Cryptography", 14.61), k bits per halving step; ~8x fewer
//     instructions for Fp, variable time.
//   * Sums of products with one Montgomery reduction (`mul_sum`, lazy reduction).
//   * Fp2 multiplication: schoolbook with lazy reduction (2 `mul_add`), squaring: complex
//     squaring (a0+a1)(a0-a1) + 2 a0 a1 u (2 Fp multiplications).
//
// Carry flags flow between consecutive `asm volatile` statements of one chain; no C code that
// could touch the condition code is placed inside a chain (the technique NVIDIA's CGBN uses).
#pragma once
#include <stdint.h>

namespace cuzk {

// ---------------------------------------------------------------------------------------------
// PTX carry-chain primitives (32-bit).
// ---------------------------------------------------------------------------------------------
namespace ptx {
__device__ __forceinline__ uint32_t add_cc(uint32_t a, uint32_t b) {
    uint32_t r; asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
__device__ __forceinline__ uint32_t addc_cc(uint32_t a, uint32_t b) {
    uint32_t r; asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
__device__ __forceinline__ uint32_t addc(uint32_t a, uint32_t b) {
    uint32_t r; asm volatile("addc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
__device__ __forceinline__ uint32_t sub_cc(uint32_t a, uint32_t b) {
    uint32_t r; asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
__device__ __forceinline__ uint32_t subc_cc(uint32_t a, uint32_t b) {
    uint32_t r; asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
__device__ __forceinline__ uint32_t subc(uint32_t a, uint32_t b) {
    uint32_t r; asm volatile("subc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r;
}
__device__ __forceinline__ uint32_t mad_lo_cc(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r; asm volatile("mad.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
__device__ __forceinline__ uint32_t madc_lo_cc(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r; asm volatile("madc.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
__device__ __forceinline__ uint32_t mad_hi_cc(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r; asm volatile("mad.hi.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
__device__ __forceinline__ uint32_t madc_hi_cc(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r; asm volatile("madc.hi.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
__device__ __forceinline__ uint32_t madc_hi(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r; asm volatile("madc.hi.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
}  // namespace ptx

// ---------------------------------------------------------------------------------------------
// Field constants (little-endian 32-bit limbs). Values computed from the moduli with Python:
//   ONE = 2^(32N) mod p, R2 = 2^(64N) mod p, R3 = 2^(96N) mod p, M0 = -p^(-1) mod 2^32,
//   PM2 = p - 2.
// ---------------------------------------------------------------------------------------------
// Fr: r = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001 (255 bits)
__constant__ uint32_t CUZK_FR_P[8] = {0x00000001u, 0xffffffffu, 0xfffe5bfeu, 0x53bda402u,
                                      0x09a1d805u, 0x3339d808u, 0x299d7d48u, 0x73eda753u};
__constant__ uint32_t CUZK_FR_ONE[8] = {0xfffffffeu, 0x00000001u, 0x00034802u, 0x5884b7fau,
                                        0xecbc4ff5u, 0x998c4fefu, 0xacc5056fu, 0x1824b159u};
__constant__ uint32_t CUZK_FR_R2[8] = {0xf3f29c6du, 0xc999e990u, 0x87925c23u, 0x2b6cedcbu,
                                       0x7254398fu, 0x05d31496u, 0x9f59ff11u, 0x0748d9d9u};
__constant__ uint32_t CUZK_FR_PM2[8] = {0xffffffffu, 0xfffffffeu, 0xfffe5bfeu, 0x53bda402u,
                                        0x09a1d805u, 0x3339d808u, 0x299d7d48u, 0x73eda753u};
__constant__ uint32_t CUZK_FR_R3[8] = {0x439b73afu, 0xc62c1807u, 0x8cf06990u, 0x1b3e0d18u,
                                       0xc7b5f418u, 0x73d13c71u, 0xc8db33e9u, 0x6e2a5bb9u};
// Fp: p = 0x1a0111ea...ffffaaab (381 bits)
__constant__ uint32_t CUZK_FP_P[12] = {0xffffaaabu, 0xb9feffffu, 0xb153ffffu, 0x1eabfffeu,
                                       0xf6b0f624u, 0x6730d2a0u, 0xf38512bfu, 0x64774b84u,
                                       0x434bacd7u, 0x4b1ba7b6u, 0x397fe69au, 0x1a0111eau};
__constant__ uint32_t CUZK_FP_ONE[12] = {0x0002fffdu, 0x76090000u, 0xc40c0002u, 0xebf4000bu,
                                         0x53c758bau, 0x5f489857u, 0x70525745u, 0x77ce5853u,
                                         0xa256ec6du, 0x5c071a97u, 0xfa80e493u, 0x15f65ec3u};
__constant__ uint32_t CUZK_FP_R2[12] = {0x1c341746u, 0xf4df1f34u, 0x09d104f1u, 0x0a76e6a6u,
                                        0x4c95b6d5u, 0x8de5476cu, 0x939d83c0u, 0x67eb88a9u,
                                        0xb519952du, 0x9a793e85u, 0x92cae3aau, 0x11988fe5u};
__constant__ uint32_t CUZK_FP_PM2[12] = {0xffffaaa9u, 0xb9feffffu, 0xb153ffffu, 0x1eabfffeu,
                                         0xf6b0f624u, 0x6730d2a0u, 0xf38512bfu, 0x64774b84u,
                                         0x434bacd7u, 0x4b1ba7b6u, 0x397fe69au, 0x1a0111eau};
__constant__ uint32_t CUZK_FP_R3[12] = {0xd94ca1e0u, 0xed48ac6bu, 0x03a7adf8u, 0x315f831eu,
                                        0x615e29ddu, 0x9a53352au, 0x921e1761u, 0x34c04e5eu,
                                        0x65724728u, 0x2512d435u, 0x91755d4du, 0x0aa63460u};

/// Parameters of Fr (the BLS12-381 scalar field).
struct FrParams {
    static constexpr int N = 8;                 // 32-bit limbs
    static constexpr int BITS = 255;            // bits of the modulus
    static constexpr uint32_t M0 = 0xffffffffu; // -r^-1 mod 2^32
    static constexpr int SUM_MAX = 2;           // largest K with K r < 2^256 (mul_sum)
    /// r mod 2^64 = 2^64 - 2^32 + 1 (limbs 1, 2^32 - 1; M0 = -1): the reduction rows of
    /// `mul_sum` add m r's two low limbs with additions instead of two IMAD.WIDE (`sum_step`).
    static constexpr bool LOW_SOLINAS = true;
    __device__ __forceinline__ static uint32_t p(int i) { return CUZK_FR_P[i]; }
    __device__ __forceinline__ static uint32_t one(int i) { return CUZK_FR_ONE[i]; }
    __device__ __forceinline__ static uint32_t r2(int i) { return CUZK_FR_R2[i]; }
    __device__ __forceinline__ static uint32_t pm2(int i) { return CUZK_FR_PM2[i]; }
    __device__ __forceinline__ static uint32_t r3(int i) { return CUZK_FR_R3[i]; }
};

/// Parameters of Fp (the BLS12-381 base field).
struct FpParams {
    static constexpr int N = 12;
    static constexpr int BITS = 381;
    static constexpr uint32_t M0 = 0xfffcfffdu; // -p^-1 mod 2^32
    static constexpr int SUM_MAX = 8;           // K p < 2^384 holds up to K = 9 (mul_sum)
    static constexpr bool LOW_SOLINAS = false;  // see FrParams
    __device__ __forceinline__ static uint32_t p(int i) { return CUZK_FP_P[i]; }
    __device__ __forceinline__ static uint32_t one(int i) { return CUZK_FP_ONE[i]; }
    __device__ __forceinline__ static uint32_t r2(int i) { return CUZK_FP_R2[i]; }
    __device__ __forceinline__ static uint32_t pm2(int i) { return CUZK_FP_PM2[i]; }
    __device__ __forceinline__ static uint32_t r3(int i) { return CUZK_FP_R3[i]; }
};

/// A prime-field element in Montgomery form, N little-endian 32-bit limbs (see file header).
/// Plain data: safe to reinterpret device memory holding blstrs values of the same field.
template <class C>
struct alignas(16) Field {
    static constexpr int N = C::N;
    /// Most products `mul_sum` may add before its one reduction (K p < R).
    static constexpr int SUM_MAX = C::SUM_MAX;
    uint32_t l[N];

    // ---- constants -------------------------------------------------------------------------
    /// 0.
    __device__ __forceinline__ static Field zero() {
        Field r;
#pragma unroll
        for (int i = 0; i < N; i++) r.l[i] = 0;
        return r;
    }
    /// 1 (Montgomery form: R mod p).
    __device__ __forceinline__ static Field one() {
        Field r;
#pragma unroll
        for (int i = 0; i < N; i++) r.l[i] = C::one(i);
        return r;
    }
    /// The modulus itself (not a valid element; for tests and reductions).
    __device__ __forceinline__ static Field modulus() {
        Field r;
#pragma unroll
        for (int i = 0; i < N; i++) r.l[i] = C::p(i);
        return r;
    }

    // ---- memory ----------------------------------------------------------------------------
    /// Loads from global/shared memory with 16-byte vector loads (p must be 16-byte aligned,
    /// which holds for any element of an array allocated by cuMemAlloc).
    __device__ __forceinline__ static Field load(const Field* p) {
        Field r;
        const uint4* s = reinterpret_cast<const uint4*>(p);
#pragma unroll
        for (int i = 0; i < N / 4; i++) {
            uint4 v = s[i];
            r.l[4 * i] = v.x; r.l[4 * i + 1] = v.y; r.l[4 * i + 2] = v.z; r.l[4 * i + 3] = v.w;
        }
        return r;
    }
    /// Stores with 16-byte vector stores (same alignment rule as `load`).
    __device__ __forceinline__ void store(Field* p) const {
        uint4* d = reinterpret_cast<uint4*>(p);
#pragma unroll
        for (int i = 0; i < N / 4; i++)
            d[i] = make_uint4(l[4 * i], l[4 * i + 1], l[4 * i + 2], l[4 * i + 3]);
    }

    // ---- predicates ------------------------------------------------------------------------
    __device__ __forceinline__ bool is_zero() const {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= l[i];
        return acc == 0;
    }
    __device__ __forceinline__ bool is_one() const { return *this == one(); }
    __device__ __forceinline__ friend bool operator==(const Field& a, const Field& b) {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= a.l[i] ^ b.l[i];
        return acc == 0;
    }
    __device__ __forceinline__ friend bool operator!=(const Field& a, const Field& b) {
        return !(a == b);
    }

    // ---- reduction helpers -----------------------------------------------------------------
    /// Returns t - p if t >= p else t; requires t < 2p.
    __device__ __forceinline__ static Field reduce_once(const Field& t) {
        Field s, r;
        s.l[0] = ptx::sub_cc(t.l[0], C::p(0));
#pragma unroll
        for (int i = 1; i < N; i++) s.l[i] = ptx::subc_cc(t.l[i], C::p(i));
        uint32_t borrow = ptx::subc(0, 0);  // 0xffffffff when t < p
#pragma unroll
        for (int i = 0; i < N; i++) r.l[i] = (t.l[i] & borrow) | (s.l[i] & ~borrow);
        return r;
    }

    // ---- additive group --------------------------------------------------------------------
    /// a + b mod p.
    __device__ __forceinline__ static Field add(const Field& a, const Field& b) {
        Field t;
        t.l[0] = ptx::add_cc(a.l[0], b.l[0]);
#pragma unroll
        for (int i = 1; i < N - 1; i++) t.l[i] = ptx::addc_cc(a.l[i], b.l[i]);
        t.l[N - 1] = ptx::addc(a.l[N - 1], b.l[N - 1]);  // no carry out: 2p < 2^(32N)
        return reduce_once(t);
    }
    /// a - b mod p.
    __device__ __forceinline__ static Field sub(const Field& a, const Field& b) {
        Field t;
        t.l[0] = ptx::sub_cc(a.l[0], b.l[0]);
#pragma unroll
        for (int i = 1; i < N; i++) t.l[i] = ptx::subc_cc(a.l[i], b.l[i]);
        uint32_t borrow = ptx::subc(0, 0);
        t.l[0] = ptx::add_cc(t.l[0], C::p(0) & borrow);
#pragma unroll
        for (int i = 1; i < N - 1; i++) t.l[i] = ptx::addc_cc(t.l[i], C::p(i) & borrow);
        t.l[N - 1] = ptx::addc(t.l[N - 1], C::p(N - 1) & borrow);
        return t;
    }
    /// -a mod p (0 stays 0).
    __device__ __forceinline__ static Field neg(const Field& a) {
        Field t;
        uint32_t mask = a.is_zero() ? 0u : 0xffffffffu;
        t.l[0] = ptx::sub_cc(C::p(0), a.l[0]);
#pragma unroll
        for (int i = 1; i < N - 1; i++) t.l[i] = ptx::subc_cc(C::p(i), a.l[i]);
        t.l[N - 1] = ptx::subc(C::p(N - 1), a.l[N - 1]);
#pragma unroll
        for (int i = 0; i < N; i++) t.l[i] &= mask;
        return t;
    }
    /// 2a mod p.
    __device__ __forceinline__ static Field dbl(const Field& a) { return add(a, a); }

    // ---- multiplicative --------------------------------------------------------------------
    /// acc[0..N] += x * y[0..N) * 2^0, as two carry chains over the even-indexed and the
    /// odd-indexed limbs of y, each an alternation mad.lo / madc.hi of ONE product into adjacent
    /// limbs (ptxas fuses such pairs into IMAD.WIDE.U32 with carry; splitting low and high
    /// halves into separate chains instead costs two instructions per half on sm_70+).
    /// No carry may leave limb N (guaranteed by the callers' bounds).
    template <class Y>
    __device__ __forceinline__ static void mac_row(uint32_t (&acc)[N + 1], uint32_t x, Y y) {
        // even j: products into limbs (j, j+1), j = 0, 2, ..., N-2; carry into limb N
        acc[0] = ptx::mad_lo_cc(x, y(0), acc[0]);
        acc[1] = ptx::madc_hi_cc(x, y(0), acc[1]);
#pragma unroll
        for (int j = 2; j < N; j += 2) {
            acc[j] = ptx::madc_lo_cc(x, y(j), acc[j]);
            acc[j + 1] = ptx::madc_hi_cc(x, y(j), acc[j + 1]);
        }
        acc[N] = ptx::addc(acc[N], 0);
        // odd j: products into limbs (j, j+1), j = 1, 3, ..., N-1 (the last high half is limb N)
        acc[1] = ptx::mad_lo_cc(x, y(1), acc[1]);
        acc[2] = ptx::madc_hi_cc(x, y(1), acc[2]);
#pragma unroll
        for (int j = 3; j < N - 1; j += 2) {
            acc[j] = ptx::madc_lo_cc(x, y(j), acc[j]);
            acc[j + 1] = ptx::madc_hi_cc(x, y(j), acc[j + 1]);
        }
        acc[N - 1] = ptx::madc_lo_cc(x, y(N - 1), acc[N - 1]);
        acc[N] = ptx::madc_hi(x, y(N - 1), acc[N]);
    }

    /// Montgomery product a * b * R^-1 mod p, "wide" variant: CIOS with rows computed by
    /// `mac_row` (even/odd chains that ptxas maps to IMAD.WIDE.U32), N+1-limb accumulator.
    ///
    /// The accumulator needs only N+1 limbs: at the top of each row t < 2p, and
    /// t + a_i*b + m*p < 2p + 2 (2^32 - 1) p = 2^33 p < 2^(32(N+1)) because p < 2^(32N-1)
    /// (both moduli leave the top bit of the top limb clear), so no carry leaves limb N.
    /// About 190 IMAD-class instructions for Fr on sm_90 against about 310 (plus as many
    /// IADD3) for `mul_cios`. Checked against blstrs by tests/gpu_field.rs (op 11).
    __device__ __forceinline__ static Field mul_wide(const Field& a, const Field& b) {
        uint32_t t[N + 1];
#pragma unroll
        for (int i = 0; i < N + 1; i++) t[i] = 0;
        struct B { const Field& b; __device__ __forceinline__ uint32_t operator()(int j) const { return b.l[j]; } };
        struct P { __device__ __forceinline__ uint32_t operator()(int j) const { return C::p(j); } };
#pragma unroll
        for (int i = 0; i < N; i++) {
            mac_row(t, a.l[i], B{b});             // t += a_i * b
            const uint32_t m = t[0] * C::M0;
            mac_row(t, m, P());                   // t += m * p, making t[0] zero
#pragma unroll
            for (int j = 0; j < N; j++) t[j] = t[j + 1];  // divide by 2^32
            t[N] = 0;
        }
        Field r;
#pragma unroll
        for (int i = 0; i < N; i++) r.l[i] = t[i];
        return reduce_once(r);
    }

    /// acc[s + 2k, s + 2k + 1] += x * y(j0 + 2k) for k = 0 .. N/2 - 1, one carry chain, its carry
    /// added into acc[s + N] (a limb no earlier chain has filled past a few carries, so the
    /// addition cannot overflow). Every product lands on a pair starting at s + 2k, so within one
    /// array the pairs keep the same alignment for the whole product (no register moves).
    template <int S, int J0, class Y>
    __device__ __forceinline__ static void mac_pairs(uint32_t (&acc)[2 * N + 2], uint32_t x, Y y) {
        acc[S] = ptx::mad_lo_cc(x, y(J0), acc[S]);
        acc[S + 1] = ptx::madc_hi_cc(x, y(J0), acc[S + 1]);
#pragma unroll
        for (int k = 1; k < N / 2; k++) {
            acc[S + 2 * k] = ptx::madc_lo_cc(x, y(J0 + 2 * k), acc[S + 2 * k]);
            acc[S + 2 * k + 1] = ptx::madc_hi_cc(x, y(J0 + 2 * k), acc[S + 2 * k + 1]);
        }
        acc[S + N] = ptx::addc(acc[S + N], 0);
    }

    /// Montgomery product a * b * R^-1 mod p, "split" variant: FIOS (finely integrated operand
    /// scanning, Koc, Acar and Kaliski 1996: row i adds b_i * a and then m_i * p) over a
    /// 2N+2-limb accumulator that is never shifted, kept as two arrays E and O: E receives the
    /// 64-bit partial products whose pair starts at an even position, O those starting at an odd
    /// one, so T = E + O and every pair stays register-aligned (the even/odd split of Emmart, Luo
    /// and Weems, ARITH 2016, applied to the accumulator instead of the operand). Limb i of T,
    /// needed for m_i = t_i * (-p^-1), is E[i] + O[i] + c, with c the carry (<= 2) of the limbs
    /// already reduced to zero. `mul_wide` shifts its accumulator each row, which flips the pair
    /// alignment and costs ~390 register moves per Fp product (sm_90); this one has 2N^2
    /// IMAD.WIDE and a few additions per row. Result = T / R < 2p, then one subtraction. The
    /// rows are `mul_sum`'s with K = 1.
    __device__ __forceinline__ static Field mul_split(const Field& a, const Field& b) {
        const Field x[1] = {a}, y[1] = {b};
        return mul_sum<1>(x, y);
    }

    /// The reduction row T += m p of `sum_step` for a modulus whose two low limbs are 1 and
    /// 2^32 - 1 (Fr): m * 1 is m itself, added into the even pair at I, and m (2^32 - 1) is the
    /// pair (lo, hi) = (-m, m - [m != 0]) (one subtraction with borrow), added into the odd pair at
    /// I + 1; the limbs 2 .. N-1 of p stay IMAD.WIDE products. Two IMAD.WIDE of 2N fewer per row.
    template <int I, class P>
    __device__ __forceinline__ static void reduce_low_solinas(uint32_t (&A0)[2 * N + 2], uint32_t (&A1)[2 * N + 2],
                                                             uint32_t m, P p) {
        // even chain: m at (I, I + 1), then m p_j at (I + j, I + j + 1), j = 2, 4, ...
        A0[I] = ptx::add_cc(A0[I], m);
        A0[I + 1] = ptx::addc_cc(A0[I + 1], 0);
#pragma unroll
        for (int k = 1; k < N / 2; k++) {
            A0[I + 2 * k] = ptx::madc_lo_cc(m, p(2 * k), A0[I + 2 * k]);
            A0[I + 2 * k + 1] = ptx::madc_hi_cc(m, p(2 * k), A0[I + 2 * k + 1]);
        }
        A0[I + N] = ptx::addc(A0[I + N], 0);
        // odd chain: m (2^32 - 1) at (I + 1, I + 2), then m p_j, j = 3, 5, ...
        const uint32_t lo = ptx::sub_cc(0, m);   // borrow out = (m != 0)
        const uint32_t hi = ptx::subc(m, 0);
        A1[I + 1] = ptx::add_cc(A1[I + 1], lo);
        A1[I + 2] = ptx::addc_cc(A1[I + 2], hi);
#pragma unroll
        for (int k = 1; k < N / 2; k++) {
            A1[I + 1 + 2 * k] = ptx::madc_lo_cc(m, p(2 * k + 1), A1[I + 1 + 2 * k]);
            A1[I + 2 + 2 * k] = ptx::madc_hi_cc(m, p(2 * k + 1), A1[I + 2 + 2 * k]);
        }
        A1[I + 1 + N] = ptx::addc(A1[I + 1 + N], 0);
    }

    /// Row I of `mul_sum` (and so of `mul_split`, K = 1): T += sum_k b_k[I] * a_k, then
    /// T += m * p with m making limb I zero (the K products of the row share one reduction row).
    /// Products x * y_j land on position I + j: even j on pairs starting at I's parity, odd j on
    /// the other parity; pairs starting at even positions live in E, odd ones in O. Limb I of T
    /// is E[I] + O[I] + c (positions below I are zero, their carries in c); after the m row it
    /// is 0 mod 2^32 and its carry (at most 2) moves up into c.
    template <int I, int K, class P>
    __device__ __forceinline__ static void sum_step(uint32_t (&E)[2 * N + 2], uint32_t (&O)[2 * N + 2],
                                                    uint32_t& c, const Field (&a)[K], const Field (&b)[K], P p) {
        uint32_t(&A0)[2 * N + 2] = (I % 2 == 0) ? E : O;
        uint32_t(&A1)[2 * N + 2] = (I % 2 == 0) ? O : E;
        struct A { const Field& a; __device__ __forceinline__ uint32_t operator()(int j) const { return a.l[j]; } };
#pragma unroll
        for (int k = 0; k < K; k++) {
            mac_pairs<I, 0>(A0, b[k].l[I], A{a[k]});
            mac_pairs<I + 1, 1>(A1, b[k].l[I], A{a[k]});
        }
        const uint32_t m = (E[I] + O[I] + c) * C::M0;
        if constexpr (C::LOW_SOLINAS)
            reduce_low_solinas<I>(A0, A1, m, p);
        else
        {
            mac_pairs<I, 0>(A0, m, p);
            mac_pairs<I + 1, 1>(A1, m, p);
        }
        const uint64_t s = (uint64_t)E[I] + O[I] + c;
        c = (uint32_t)(s >> 32);
    }

    template <int I, int K, class P>
    __device__ __forceinline__ static void sum_rows(uint32_t (&E)[2 * N + 2], uint32_t (&O)[2 * N + 2],
                                                    uint32_t& c, const Field (&a)[K], const Field (&b)[K], P p) {
        if constexpr (I < N) {
            sum_step<I, K>(E, O, c, a, b, p);
            sum_rows<I + 1, K>(E, O, c, a, b, p);
        }
    }

    /// Sum of K Montgomery products with one reduction ("lazy reduction", as in Aranha, Karabina,
    /// Longa, Gebotys and Lopez, "Faster explicit formulas for computing pairings over ordinary
    /// curves", EUROCRYPT 2011): (a_0 b_0 + ... + a_{K-1} b_{K-1}) * R^-1 mod p for canonical
    /// inputs, 1 <= K <= SUM_MAX (Fr 2, Fp 8). FIOS with K product rows per reduction row:
    /// K N^2 + N^2 IMAD.WIDE instead of 2 K N^2 for K products and K - 1 additions.
    /// T = sum a_k b_k < K p^2 and the reduction adds m p < R p, so T / R < (K p / R + 1) p < 2p
    /// as long as K p < R (2r < 2^256, 9p < 2^384); one conditional subtraction. Negative terms:
    /// pass -x (canonical p - x) as a factor. K = 1 is `mul_split`. Checked against blstrs by
    /// tests/gpu_field.rs (K = 1 everywhere, K = 2 op 14, K = 4 op 15).
    template <int K>
    __device__ __forceinline__ static Field mul_sum(const Field (&a)[K], const Field (&b)[K]) {
        static_assert(K >= 1 && K <= SUM_MAX, "T / R < 2p needs K p < R");
        uint32_t E[2 * N + 2], O[2 * N + 2];
#pragma unroll
        for (int k = 0; k < 2 * N + 2; k++) {
            E[k] = 0;
            O[k] = 0;
        }
        uint32_t c = 0;
        struct P { __device__ __forceinline__ uint32_t operator()(int j) const { return C::p(j); } };
        sum_rows<0, K>(E, O, c, a, b, P());
        Field r;
        r.l[0] = ptx::add_cc(E[N], c);
#pragma unroll
        for (int k = 1; k < N; k++) r.l[k] = ptx::addc_cc(E[N + k], 0);
        r.l[0] = ptx::add_cc(r.l[0], O[N]);
#pragma unroll
        for (int k = 1; k < N; k++) r.l[k] = ptx::addc_cc(r.l[k], O[N + k]);
        return reduce_once(r);
    }
    /// a * b + c * d (Montgomery), one reduction (`mul_sum<2>`).
    __device__ __forceinline__ static Field mul_add(const Field& a, const Field& b, const Field& c, const Field& d) {
        const Field x[2] = {a, c}, y[2] = {b, d};
        return mul_sum<2>(x, y);
    }

    /// Montgomery product a * b * R^-1 mod p, "cios" variant: CIOS with each row as separate
    /// carry chains over the low and the high halves of the partial products, N+2-limb
    /// accumulator. The variant verified on the H200 first (tests/gpu_field.rs).
    __device__ __forceinline__ static Field mul_cios(const Field& a, const Field& b) {
        uint32_t t[N + 2];
#pragma unroll
        for (int i = 0; i < N + 2; i++) t[i] = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            const uint32_t ai = a.l[i];
            // t += ai * b: low halves into t[j], high halves into t[j+1]
            t[0] = ptx::mad_lo_cc(ai, b.l[0], t[0]);
#pragma unroll
            for (int j = 1; j < N; j++) t[j] = ptx::madc_lo_cc(ai, b.l[j], t[j]);
            t[N] = ptx::addc_cc(t[N], 0);
            t[N + 1] = ptx::addc(t[N + 1], 0);
            t[1] = ptx::mad_hi_cc(ai, b.l[0], t[1]);
#pragma unroll
            for (int j = 1; j < N; j++) t[j + 1] = ptx::madc_hi_cc(ai, b.l[j], t[j + 1]);
            t[N + 1] = ptx::addc(t[N + 1], 0);
            // t += m * p, making t[0] zero
            const uint32_t m = t[0] * C::M0;
            t[0] = ptx::mad_lo_cc(m, C::p(0), t[0]);
#pragma unroll
            for (int j = 1; j < N; j++) t[j] = ptx::madc_lo_cc(m, C::p(j), t[j]);
            t[N] = ptx::addc_cc(t[N], 0);
            t[N + 1] = ptx::addc(t[N + 1], 0);
            t[1] = ptx::mad_hi_cc(m, C::p(0), t[1]);
#pragma unroll
            for (int j = 1; j < N; j++) t[j + 1] = ptx::madc_hi_cc(m, C::p(j), t[j + 1]);
            t[N + 1] = ptx::addc(t[N + 1], 0);
            // divide by 2^32
#pragma unroll
            for (int j = 0; j < N + 1; j++) t[j] = t[j + 1];
            t[N + 1] = 0;
        }
        Field r;
#pragma unroll
        for (int i = 0; i < N; i++) r.l[i] = t[i];
        return reduce_once(r);
    }

    /// Montgomery product a * b * R^-1 mod p: `mul_split`, the fastest of the three variants on
    /// the H200 (the other two stay for the NTT pass kernel's `PassProduct` and the tests). All
    /// three are checked against blstrs by tests/gpu_field.rs (ops 11-13).
    /// Instructions per Fp product on sm_90 (ptxas 13.0): split 480 (287 IMAD.WIDE, no moves),
    /// wide 776 (276 IMAD.WIDE, 387 moves), cios 1280; BENCHMARKS.md has the MSM effect.
    __device__ __forceinline__ static Field mul(const Field& a, const Field& b) {
        return mul_split(a, b);
    }
    /// a^2 (Montgomery).
    __device__ __forceinline__ static Field sqr(const Field& a) { return mul(a, a); }
    /// a^e for an exponent given as N little-endian 32-bit limbs (plain integer, not Montgomery).
    /// Fixed 4-bit windows, left to right (Knuth, TAOCP vol. 2, 4.6.3): the table a^0..a^15
    /// (14 products), then per nibble four squarings and one product when it is nonzero, with
    /// the leading zero nibbles and the squarings before the first nonzero one skipped. For the
    /// inversion exponents: Fp p - 2 485 products (613 bit by bit), Fr r - 2 325 (420). The
    /// squarings and the window products share one inlined product (two in all with the
    /// table's): the code stays small in the kernels that inline it (instruction fetch).
    template <class Exp>
    __device__ __forceinline__ static Field pow_limbs(const Field& a, Exp e) {
        Field t[16];
        t[0] = one();
        t[1] = a;
#pragma unroll 1
        for (int i = 2; i < 16; i++) t[i] = mul(t[i - 1], a);
        Field r = one();
        bool started = false;
#pragma unroll 1
        for (int i = N - 1; i >= 0; i--) {
            const uint32_t w = e(i);
#pragma unroll 1
            for (int b = 28; b >= 0; b -= 4) {
                const uint32_t d = (w >> b) & 15u;
                // k < 4: a squaring (once started); k = 4: the window's product (d != 0)
#pragma unroll 1
                for (int k = started ? 0 : 4; k < 5; k++) {
                    if (k == 4) {
                        if (!d) break;
                        if (!started) {
                            r = t[d];
                            started = true;
                            break;
                        }
                    }
                    r = mul(r, k < 4 ? r : t[d]);
                }
            }
        }
        return r;
    }
    /// a^e for a 64-bit exponent.
    __device__ __forceinline__ static Field pow(const Field& a, uint64_t e) {
        Field r = one(), x = a;
#pragma unroll 1
        while (e) {
            if (e & 1) r = mul(r, x);
            e >>= 1;
            if (e) x = sqr(x);
        }
        return r;
    }
    /// a^-1 mod p by Fermat (a^(p-2)); the inverse of 0 is 0.
    __device__ __forceinline__ static Field inverse(const Field& a) {
        struct E { __device__ uint32_t operator()(int i) const { return C::pm2(i); } };
        return pow_limbs(a, E());
    }
    /// x / 2^k mod p in place, for a canonical x and 1 <= k <= 32: with m = x (-p^-1) mod 2^k
    /// (one REDC digit cut to k bits), x + m p is a multiple of 2^k below 2^k p, so the shifted
    /// quotient is canonical. One row of N IMAD.WIDE and N funnel shifts.
    __device__ __forceinline__ static void div_2k(Field& x, uint32_t k) {
        uint32_t m = x.l[0] * C::M0;
        if (k < 32) m &= (1u << k) - 1u;
        uint32_t t[N + 1];
#pragma unroll
        for (int i = 0; i < N; i++) t[i] = x.l[i];
        t[N] = 0;
        struct P { __device__ __forceinline__ uint32_t operator()(int j) const { return C::p(j); } };
        mac_row(t, m, P());  // t < 2^32 p < 2^(32 (N + 1)): no carry leaves limb N
#pragma unroll
        for (int i = 0; i < N; i++) x.l[i] = __funnelshift_rc(t[i], t[i + 1], k);
    }

    /// Divides u (odd after the call; u != 0) by its largest power of two 2^k, and x by the same
    /// 2^k mod p (a whole zero limb at a time, then the rest of the low limb's zeros).
    __device__ __forceinline__ static void strip_twos(uint32_t (&u)[N], Field& x) {
#pragma unroll 1
        while (u[0] == 0) {
#pragma unroll
            for (int i = 0; i < N - 1; i++) u[i] = u[i + 1];
            u[N - 1] = 0;
            div_2k(x, 32);
        }
        const uint32_t k = __ffs(u[0]) - 1;
        if (k) {
#pragma unroll
            for (int i = 0; i < N - 1; i++) u[i] = __funnelshift_r(u[i], u[i + 1], k);
            u[N - 1] >>= k;
            div_2k(x, k);
        }
    }

    /// a^-1 mod p (Montgomery form in and out) by the binary extended Euclidean algorithm
    /// (Stein's binary GCD with the cofactor halvings of Menezes, van Oorschot and Vanstone,
    /// "Handbook of Applied Cryptography", 14.61; the halvings k bits at a time, `div_2k`) on the
    /// representation A = a R: x1 A = u, x2 A = v (mod p) with u, v odd; the larger of u, v
    /// takes the difference and sheds its factors of two until u = v = gcd = 1, so x1 = A^-1 =
    /// a^-1 R^-1, and one product by R^3 gives a^-1 R. ~270 iterations of ~100 instructions for
    /// Fp (random inputs; at most ~2 bits(p) iterations) against ~485 products (~230 k
    /// instructions) for `inverse`. **Variable time**: only where timing is not a secret (the
    /// MSM's bucket accumulation, not constant-time anyway). The inverse of 0 is 0.
    __device__ __forceinline__ static Field inverse_vartime(const Field& a) {
        if (a.is_zero()) return zero();
        uint32_t u[N], v[N];
        Field x1 = zero(), x2 = zero();
#pragma unroll
        for (int i = 0; i < N; i++) {
            u[i] = a.l[i];
            v[i] = C::p(i);
        }
        x1.l[0] = 1;
        strip_twos(u, x1);
#pragma unroll 1
        while (true) {
            uint32_t d[N];
            d[0] = ptx::sub_cc(u[0], v[0]);
#pragma unroll
            for (int i = 1; i < N; i++) d[i] = ptx::subc_cc(u[i], v[i]);
            const uint32_t borrow = ptx::subc(0, 0);  // 0xffffffff when u < v
            if (!borrow) {
                uint32_t nz = 0;
#pragma unroll
                for (int i = 0; i < N; i++) nz |= d[i];
                if (!nz) break;  // u = v = 1
#pragma unroll
                for (int i = 0; i < N; i++) u[i] = d[i];
                x1 = sub(x1, x2);
                strip_twos(u, x1);
            } else {
                // v - u = -d (mod 2^(32N)), positive
                v[0] = ptx::sub_cc(0, d[0]);
#pragma unroll
                for (int i = 1; i < N - 1; i++) v[i] = ptx::subc_cc(0, d[i]);
                v[N - 1] = ptx::subc(0, d[N - 1]);
                x2 = sub(x2, x1);
                strip_twos(v, x2);
            }
        }
        Field r3;
#pragma unroll
        for (int i = 0; i < N; i++) r3.l[i] = C::r3(i);
        return mul(x1, r3);
    }

    /// Converts a plain integer (< p, N LE limbs) to Montgomery form: a * R mod p.
    __device__ __forceinline__ static Field to_mont(const Field& a) {
        Field r2;
#pragma unroll
        for (int i = 0; i < N; i++) r2.l[i] = C::r2(i);
        return mul(a, r2);
    }
    /// Converts from Montgomery form to the plain integer a * R^-1 mod p.
    __device__ __forceinline__ static Field from_mont(const Field& a) {
        Field u = zero();
        u.l[0] = 1;
        return mul(a, u);
    }

    // ---- operators -------------------------------------------------------------------------
    __device__ __forceinline__ friend Field operator+(const Field& a, const Field& b) { return add(a, b); }
    __device__ __forceinline__ friend Field operator-(const Field& a, const Field& b) { return sub(a, b); }
    __device__ __forceinline__ friend Field operator*(const Field& a, const Field& b) { return mul(a, b); }
    __device__ __forceinline__ Field operator-() const { return neg(*this); }
    __device__ __forceinline__ Field& operator+=(const Field& b) { return *this = add(*this, b); }
    __device__ __forceinline__ Field& operator-=(const Field& b) { return *this = sub(*this, b); }
    __device__ __forceinline__ Field& operator*=(const Field& b) { return *this = mul(*this, b); }
};

/// BLS12-381 scalar field element (= blstrs::Scalar, 32 bytes).
typedef Field<FrParams> Fr;
/// BLS12-381 base field element (= blstrs::Fp, 48 bytes).
typedef Field<FpParams> Fp;

static_assert(sizeof(Fr) == 32, "Fr must match blst_fr");
static_assert(sizeof(Fp) == 48, "Fp must match blst_fp");

/// Element c0 + c1*u of Fp2 = Fp[u]/(u^2 + 1) (= blstrs::Fp2, 96 bytes).
struct alignas(16) Fp2 {
    Fp c0, c1;

    __device__ __forceinline__ static Fp2 zero() { return {Fp::zero(), Fp::zero()}; }
    __device__ __forceinline__ static Fp2 one() { return {Fp::one(), Fp::zero()}; }
    __device__ __forceinline__ static Fp2 load(const Fp2* p) {
        return {Fp::load(&p->c0), Fp::load(&p->c1)};
    }
    __device__ __forceinline__ void store(Fp2* p) const { c0.store(&p->c0); c1.store(&p->c1); }
    __device__ __forceinline__ bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    __device__ __forceinline__ bool is_one() const { return c0.is_one() && c1.is_zero(); }
    __device__ __forceinline__ friend bool operator==(const Fp2& a, const Fp2& b) {
        return a.c0 == b.c0 && a.c1 == b.c1;
    }
    __device__ __forceinline__ friend bool operator!=(const Fp2& a, const Fp2& b) { return !(a == b); }

    __device__ __forceinline__ static Fp2 add(const Fp2& a, const Fp2& b) { return {a.c0 + b.c0, a.c1 + b.c1}; }
    __device__ __forceinline__ static Fp2 sub(const Fp2& a, const Fp2& b) { return {a.c0 - b.c0, a.c1 - b.c1}; }
    __device__ __forceinline__ static Fp2 neg(const Fp2& a) { return {-a.c0, -a.c1}; }
    __device__ __forceinline__ static Fp2 dbl(const Fp2& a) { return {Fp::dbl(a.c0), Fp::dbl(a.c1)}; }
    /// Conjugate c0 - c1*u.
    __device__ __forceinline__ static Fp2 conj(const Fp2& a) { return {a.c0, -a.c1}; }
    /// Schoolbook with lazy reduction: (a0 b0 + a1 (-b1)) + (a0 b1 + a1 b0) u, each coordinate
    /// one `Fp::mul_add` (2 x 3 N^2 IMAD.WIDE, the same as Karatsuba's three products, but two
    /// reductions instead of three and no additions of unreduced sums).
    __device__ __forceinline__ static Fp2 mul(const Fp2& a, const Fp2& b) {
        return {Fp::mul_add(a.c0, b.c0, a.c1, -b.c1), Fp::mul_add(a.c0, b.c1, a.c1, b.c0)};
    }
    /// Karatsuba: (a0 b0 - a1 b1) + ((a0 + a1)(b0 + b1) - a0 b0 - a1 b1) u (the product before
    /// the lazy-reduction form; tests/gpu_field.rs op 11 keeps it checked).
    __device__ __forceinline__ static Fp2 mul_karatsuba(const Fp2& a, const Fp2& b) {
        Fp v0 = a.c0 * b.c0, v1 = a.c1 * b.c1;
        Fp s = (a.c0 + a.c1) * (b.c0 + b.c1);
        return {v0 - v1, s - v0 - v1};
    }
    /// a * b + c * d with one reduction per coordinate (two `Fp::mul_sum<4>`).
    __device__ __forceinline__ static Fp2 mul_add(const Fp2& a, const Fp2& b, const Fp2& c, const Fp2& d) {
        const Fp x0[4] = {a.c0, a.c1, c.c0, c.c1}, y0[4] = {b.c0, -b.c1, d.c0, -d.c1};
        const Fp y1[4] = {b.c1, b.c0, d.c1, d.c0};
        return {Fp::mul_sum<4>(x0, y0), Fp::mul_sum<4>(x0, y1)};
    }
    /// (a0 + a1)(a0 - a1) + 2 a0 a1 u.
    __device__ __forceinline__ static Fp2 sqr(const Fp2& a) {
        Fp t = a.c0 * a.c1;
        return {(a.c0 + a.c1) * (a.c0 - a.c1), Fp::dbl(t)};
    }
    /// a^-1 = conj(a) / (a0^2 + a1^2) with the norm's inverse by `Fp::inverse_vartime`
    /// (**variable time**, as there); the inverse of 0 is 0.
    __device__ __forceinline__ static Fp2 inverse_vartime(const Fp2& a) {
        Fp n = Fp::inverse_vartime(a.c0 * a.c0 + a.c1 * a.c1);
        return {a.c0 * n, -(a.c1 * n)};
    }
    /// Multiplies both coordinates by an Fp element.
    __device__ __forceinline__ static Fp2 mul_fp(const Fp2& a, const Fp& b) { return {a.c0 * b, a.c1 * b}; }
    /// a^-1 = conj(a) / (a0^2 + a1^2); the inverse of 0 is 0.
    __device__ __forceinline__ static Fp2 inverse(const Fp2& a) {
        Fp n = Fp::inverse(a.c0 * a.c0 + a.c1 * a.c1);
        return {a.c0 * n, -(a.c1 * n)};
    }
    __device__ __forceinline__ friend Fp2 operator+(const Fp2& a, const Fp2& b) { return add(a, b); }
    __device__ __forceinline__ friend Fp2 operator-(const Fp2& a, const Fp2& b) { return sub(a, b); }
    __device__ __forceinline__ friend Fp2 operator*(const Fp2& a, const Fp2& b) { return mul(a, b); }
    __device__ __forceinline__ Fp2 operator-() const { return neg(*this); }
};
static_assert(sizeof(Fp2) == 96, "Fp2 must match blst_fp2");

}  // namespace cuzk
