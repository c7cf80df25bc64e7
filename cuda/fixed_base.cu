// cuda/fixed_base.cu -- fixed-base scalar multiplication s_i * G for BLS12-381 G1 and G2 (host
// side: src/gpu/kernels/fixed_base.rs), for Groth16 parameter generation.
//
// Table: W windows of w bits (W * w >= 255); table[k * (2^w - 1) + d - 1] = d * 2^(w k) * G in
// affine form (blst layout, Montgomery), built on the device from the W window bases 2^(w k) * G.
// Multiplication: one thread per scalar; s * G = sum over the windows k of table[k][digit_k(s)],
// at most W mixed additions (no doublings), accumulated in XYZZ and stored in Jacobian form
// (= blstrs::G1Projective / G2Projective); the host normalizes to affine.
//
// Buffers: scalars n x 4 x u64 (blstrs::Scalar, Montgomery, `mont` = 1; or canonical, `mont` = 0),
// bases W x affine_t<F>, table W (2^w - 1) x affine_t<F>, out n x jacobian_t<F>.
#include "field.cuh"
#include "msm.cuh"

namespace cuzk_fixed_base {

using namespace cuzk_curve;
typedef unsigned int u32;
typedef unsigned long long u64;

/// a^-1 (0 for 0) of the point-arithmetic field wrappers of curve.cuh.
__device__ __forceinline__ FpX inv(const FpX& a) { return {cuzk::Fp::inverse(a.v)}; }
__device__ __forceinline__ Fp2X inv(const Fp2X& a) {
    cuzk::Fp2 b;
    b.c0 = a.c0.v;
    b.c1 = a.c1.v;
    cuzk::Fp2 r = cuzk::Fp2::inverse(b);
    return {{r.c0}, {r.c1}};
}

/// Bits [lo, lo + w) of the canonical scalar s (w <= 32).
__device__ __forceinline__ u32 digit(const u64 s[4], u32 lo, u32 w) {
    const u32 limb = lo / 64, off = lo % 64;
    u64 v = s[limb] >> off;
    if (off + w > 64 && limb < 3) v |= s[limb + 1] << (64 - off);
    return (u32)(v & ((1ull << w) - 1));
}

template <class F>
__device__ __forceinline__ void table_body(u32 t, const affine_t<F>* bases, u32 windows, u32 w,
                                           affine_t<F>* table) {
    const u32 digits = (1u << w) - 1;
    if (t >= windows * digits) return;
    const u32 k = t / digits, d = t % digits + 1;
    const xyzz_t<F> p = xyzz_mul_u32(xyzz_from_affine(load_affine(bases + k)), d, (int)w);
    affine_t<F> a;
    if (is_inf(p)) {
        a.x = F::zero();
        a.y = F::zero();
    } else {
        // x = X / ZZ, y = Y / ZZZ with one inversion of ZZ * ZZZ.
        const F i = inv(p.ZZ * p.ZZZ);
        a.x = p.X * (i * p.ZZZ);
        a.y = p.Y * (i * p.ZZ);
    }
    a.x.store(&table[t].x);
    a.y.store(&table[t].y);
}

template <class F>
__device__ __forceinline__ void mul_body(u32 i, const u64* scalars, u32 n, u32 mont, const affine_t<F>* table,
                                         u32 windows, u32 w, jacobian_t<F>* out) {
    if (i >= n) return;
    u64 s[4];
    cuzk_msm::load_scalar(scalars, i, mont, s);
    const u32 digits = (1u << w) - 1;
    xyzz_t<F> r = xyzz_inf<F>();
    for (u32 k = 0; k < windows; k++) {
        const u32 d = digit(s, k * w, w);
        if (d != 0) r = xyzz_add_affine_ool(r, load_affine(table + (u64)k * digits + d - 1), false);
    }
    store_jacobian(out + i, xyzz_to_jacobian(r));
}

}  // namespace cuzk_fixed_base

#define CUZK_FIXED_BASE_KERNELS(SUF, F)                                                                        \
    /** table[t] = (t % D + 1) * bases[t / D] (affine), t < windows * D, D = 2^w - 1. */                     \
    extern "C" __global__ void cuzk_fixed_base_table_##SUF(const cuzk_curve::affine_t<F>* bases, unsigned windows, \
                                                          unsigned w, cuzk_curve::affine_t<F>* table) {        \
        cuzk_fixed_base::table_body<F>(blockIdx.x * blockDim.x + threadIdx.x, bases, windows, w, table);     \
    }                                                                                                          \
    /** out[i] = scalars[i] * G (Jacobian), i < n, from G's window table. */                                  \
    extern "C" __global__ void cuzk_fixed_base_mul_##SUF(const unsigned long long* scalars, unsigned n,       \
                                                        unsigned mont, const cuzk_curve::affine_t<F>* table,   \
                                                        unsigned windows, unsigned w,                          \
                                                        cuzk_curve::jacobian_t<F>* out) {                      \
        cuzk_fixed_base::mul_body<F>(blockIdx.x * blockDim.x + threadIdx.x, scalars, n, mont, table, windows, \
                                     w, out);                                                                  \
    }

CUZK_FIXED_BASE_KERNELS(g1, cuzk_curve::FpX)
CUZK_FIXED_BASE_KERNELS(g2, cuzk_curve::Fp2X)
