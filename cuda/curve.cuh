// cuda/curve.cuh -- BLS12-381 G1 and G2 point arithmetic for the GPU.
//
// Point types (all coordinates in Montgomery form, the layout of blst / blstrs):
//   affine_t<F>   {x, y}           == blst_p1_affine (F = Fp, 96 B) / blst_p2_affine (F = Fp2, 192 B).
//                                    The point at infinity is x = y = 0 (blst's encoding; (0,0) is not
//                                    on y^2 = x^3 + b since b != 0).
//   jacobian_t<F> {x, y, z}        == blst_p1 / blst_p2: (X/Z^2, Y/Z^3); infinity is z = 0.
//   xyzz_t<F>     {X, Y, ZZ, ZZZ}  extended Jacobian ("XYZZ") accumulators: x = X/ZZ, y = Y/ZZZ with
//                                    ZZ^3 = ZZZ^2; infinity is ZZ = 0 (kept as all-zero).
//
// Formulas: Explicit-Formulas Database (Bernstein, Lange), short Weierstrass a = 0, XYZZ coordinates:
//   add-2008-s (12M + 2S), madd-2008-s (8M + 2S), dbl-2008-s-1 (6M + 3S), mdbl-2008-s-1;
//   https://hyperelliptic.org/EFD/g1p/auto-shortw-xyzz.html . The exceptional cases (an input at
//   infinity, P == Q, P == -Q) are handled by explicit branches.
//
// The code is generic over the field type F, which must provide (see field.cuh / the host model):
//   F::zero(), F::one() (Montgomery 1), a + b, a - b, a * b, F::sqr(a), F::dbl(a) (= a + a),
//   a.is_zero(), -a (with -0 == 0), F::select(c, a, b) (c ? a : b, branch-free): the interface of
//   the FpX / Fp2X wrappers below (cuzk::Fp / cuzk::Fp2 of field.cuh plus select).
// CUZK_HD marks functions usable on the device (and, in the host simulation build, on the host).
#pragma once

#ifndef CUZK_HD
#if defined(__CUDACC__)
#define CUZK_HD __device__ __forceinline__
#else
#define CUZK_HD inline
#endif
#endif
// Rare or cold paths (doubling inside an addition, scalar multiples of bucket sums) are kept out of
// line: inlining every copy of a ~10k-instruction point operation multiplies the compile time and
// the register pressure of the hot loops.
#ifndef CUZK_COLD
#if defined(__CUDACC__)
#define CUZK_COLD __device__ __noinline__
#else
#define CUZK_COLD inline
#endif
#endif

namespace cuzk_curve {

#if defined(__CUDACC__)
// ---------------------------------------------------------------------------------------------
// Field wrappers for the point code: cuzk::Fp / cuzk::Fp2 (field.cuh) with the Montgomery product
// kept out of line. One product is ~1,250 SASS instructions on sm_90 (each madc becomes IMAD +
// IADD3.X); a mixed addition has 10 of them, so inlining made the accumulation loop ~200 KB of
// straight-line code, far more than the instruction cache: warps then stall on instruction fetch
// (measured: IPC 1.09 on an H200). With one shared copy the hot code stays cached. Same layout as
// the wrapped types, so device buffers of blstrs points can be read as affine_t<FpX> / <Fp2X>.

/// Out-of-line Montgomery product in Fp (the one copy every point operation calls).
__device__ __noinline__ cuzk::Fp fp_mul_ool(cuzk::Fp a, cuzk::Fp b) { return cuzk::Fp::mul(a, b); }

/// cuzk::Fp with an out-of-line product.
struct alignas(16) FpX {
    cuzk::Fp v;
    __device__ __forceinline__ static FpX zero() { return {cuzk::Fp::zero()}; }
    __device__ __forceinline__ static FpX one() { return {cuzk::Fp::one()}; }
    __device__ __forceinline__ static FpX load(const FpX* p) { return {cuzk::Fp::load(&p->v)}; }
    __device__ __forceinline__ void store(FpX* p) const { v.store(&p->v); }
    __device__ __forceinline__ bool is_zero() const { return v.is_zero(); }
    __device__ __forceinline__ static FpX sqr(const FpX& a) { return {fp_mul_ool(a.v, a.v)}; }
    __device__ __forceinline__ static FpX dbl(const FpX& a) { return {cuzk::Fp::dbl(a.v)}; }
    __device__ __forceinline__ friend FpX operator+(const FpX& a, const FpX& b) { return {a.v + b.v}; }
    __device__ __forceinline__ friend FpX operator-(const FpX& a, const FpX& b) { return {a.v - b.v}; }
    __device__ __forceinline__ friend FpX operator*(const FpX& a, const FpX& b) { return {fp_mul_ool(a.v, b.v)}; }
    __device__ __forceinline__ FpX operator-() const { return {-v}; }
    /// c ? a : b, limb by limb without a branch.
    __device__ __forceinline__ static FpX select(bool c, const FpX& a, const FpX& b) {
        FpX r;
#pragma unroll
        for (int i = 0; i < cuzk::Fp::N; i++) r.v.l[i] = c ? a.v.l[i] : b.v.l[i];
        return r;
    }
};
static_assert(sizeof(FpX) == 48, "FpX must match blst_fp");

struct Fp2X;
__device__ __noinline__ Fp2X fp2_mul_ool(Fp2X a, Fp2X b);
__device__ __noinline__ Fp2X fp2_sqr_ool(Fp2X a);

/// cuzk::Fp2 arithmetic (same formulas as field.cuh: Karatsuba product, complex squaring) on top
/// of the out-of-line Fp product; the Fp2 product and square are out of line too.
struct alignas(16) Fp2X {
    FpX c0, c1;
    __device__ __forceinline__ static Fp2X zero() { return {FpX::zero(), FpX::zero()}; }
    __device__ __forceinline__ static Fp2X one() { return {FpX::one(), FpX::zero()}; }
    __device__ __forceinline__ static Fp2X load(const Fp2X* p) { return {FpX::load(&p->c0), FpX::load(&p->c1)}; }
    __device__ __forceinline__ void store(Fp2X* p) const {
        c0.store(&p->c0);
        c1.store(&p->c1);
    }
    __device__ __forceinline__ bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    __device__ __forceinline__ static Fp2X sqr(const Fp2X& a) { return fp2_sqr_ool(a); }
    __device__ __forceinline__ static Fp2X dbl(const Fp2X& a) { return {FpX::dbl(a.c0), FpX::dbl(a.c1)}; }
    __device__ __forceinline__ friend Fp2X operator+(const Fp2X& a, const Fp2X& b) { return {a.c0 + b.c0, a.c1 + b.c1}; }
    __device__ __forceinline__ friend Fp2X operator-(const Fp2X& a, const Fp2X& b) { return {a.c0 - b.c0, a.c1 - b.c1}; }
    __device__ __forceinline__ friend Fp2X operator*(const Fp2X& a, const Fp2X& b) { return fp2_mul_ool(a, b); }
    __device__ __forceinline__ Fp2X operator-() const { return {-c0, -c1}; }
    /// c ? a : b without a branch.
    __device__ __forceinline__ static Fp2X select(bool c, const Fp2X& a, const Fp2X& b) {
        return {FpX::select(c, a.c0, b.c0), FpX::select(c, a.c1, b.c1)};
    }
};
static_assert(sizeof(Fp2X) == 96, "Fp2X must match blst_fp2");

/// Karatsuba: (a0 b0 - a1 b1) + ((a0 + a1)(b0 + b1) - a0 b0 - a1 b1) u (u^2 = -1).
__device__ __noinline__ Fp2X fp2_mul_ool(Fp2X a, Fp2X b) {
    FpX v0 = a.c0 * b.c0, v1 = a.c1 * b.c1;
    FpX s = (a.c0 + a.c1) * (b.c0 + b.c1);
    return {v0 - v1, s - v0 - v1};
}

/// (a0 + a1)(a0 - a1) + 2 a0 a1 u.
__device__ __noinline__ Fp2X fp2_sqr_ool(Fp2X a) {
    FpX t = a.c0 * a.c1;
    return {(a.c0 + a.c1) * (a.c0 - a.c1), FpX::dbl(t)};
}
#endif

/// Affine point, blst layout; infinity is all-zero.
template <class F> struct affine_t {
    F x, y;
};

/// Jacobian point, blst layout (blst_p1 / blst_p2); infinity is z == 0.
template <class F> struct jacobian_t {
    F x, y, z;
};

/// XYZZ accumulator (x = X/ZZ, y = Y/ZZZ); infinity is ZZ == 0, stored as all-zero.
template <class F> struct xyzz_t {
    F X, Y, ZZ, ZZZ;
};

/// Loads an affine point with the field's vector loads (16-byte aligned storage).
template <class F> CUZK_HD affine_t<F> load_affine(const affine_t<F>* p) {
    affine_t<F> r;
    r.x = F::load(&p->x);
    r.y = F::load(&p->y);
    return r;
}

/// Loads an XYZZ point (16-byte aligned storage).
template <class F> CUZK_HD xyzz_t<F> load_xyzz(const xyzz_t<F>* p) {
    xyzz_t<F> r;
    r.X = F::load(&p->X);
    r.Y = F::load(&p->Y);
    r.ZZ = F::load(&p->ZZ);
    r.ZZZ = F::load(&p->ZZZ);
    return r;
}

/// Stores an XYZZ point (16-byte aligned storage).
template <class F> CUZK_HD void store_xyzz(xyzz_t<F>* p, const xyzz_t<F>& v) {
    v.X.store(&p->X);
    v.Y.store(&p->Y);
    v.ZZ.store(&p->ZZ);
    v.ZZZ.store(&p->ZZZ);
}

/// Stores a Jacobian point (blst_p1 / blst_p2 layout).
template <class F> CUZK_HD void store_jacobian(jacobian_t<F>* p, const jacobian_t<F>& v) {
    v.x.store(&p->x);
    v.y.store(&p->y);
    v.z.store(&p->z);
}

template <class F> CUZK_HD bool is_inf(const affine_t<F>& a) { return a.x.is_zero() && a.y.is_zero(); }

template <class F> CUZK_HD bool is_inf(const xyzz_t<F>& p) { return p.ZZ.is_zero(); }

template <class F> CUZK_HD xyzz_t<F> xyzz_inf() {
    xyzz_t<F> r;
    r.X = F::zero();
    r.Y = F::zero();
    r.ZZ = F::zero();
    r.ZZZ = F::zero();
    return r;
}

/// (x, y) -> (x, y, 1, 1); infinity -> infinity.
template <class F> CUZK_HD xyzz_t<F> xyzz_from_affine(const affine_t<F>& a) {
    if (is_inf(a)) return xyzz_inf<F>();
    xyzz_t<F> r;
    r.X = a.x;
    r.Y = a.y;
    r.ZZ = F::one();
    r.ZZZ = F::one();
    return r;
}

/// -P (the negation of infinity is infinity since -0 == 0).
template <class F> CUZK_HD xyzz_t<F> xyzz_neg(const xyzz_t<F>& p) {
    xyzz_t<F> r = p;
    r.Y = -p.Y;
    return r;
}

/// 2P, dbl-2008-s-1. A point with Y = 0 (2-torsion, not in G1/G2) gives ZZ = 0, i.e. infinity.
template <class F> CUZK_COLD xyzz_t<F> xyzz_dbl(const xyzz_t<F>& p) {
    if (is_inf(p)) return p;
    F U = F::dbl(p.Y);
    F V = F::sqr(U);
    F W = U * V;
    F S = p.X * V;
    F M = F::sqr(p.X);
    M = M + F::dbl(M);
    xyzz_t<F> r;
    r.X = F::sqr(M) - F::dbl(S);
    r.Y = M * (S - r.X) - W * p.Y;
    r.ZZ = V * p.ZZ;
    r.ZZZ = W * p.ZZZ;
    if (r.ZZ.is_zero()) return xyzz_inf<F>();
    return r;
}

/// 2A for an affine A != infinity, mdbl-2008-s-1 (ZZ1 = ZZZ1 = 1).
template <class F> CUZK_COLD xyzz_t<F> xyzz_dbl_affine(const F& x, const F& y) {
    F U = F::dbl(y);
    F V = F::sqr(U);
    F W = U * V;
    F S = x * V;
    F M = F::sqr(x);
    M = M + F::dbl(M);
    xyzz_t<F> r;
    r.X = F::sqr(M) - F::dbl(S);
    r.Y = M * (S - r.X) - W * y;
    r.ZZ = V;
    r.ZZZ = W;
    if (r.ZZ.is_zero()) return xyzz_inf<F>();
    return r;
}

/// P + A for an affine A given as (x, y) known not to be infinity (madd-2008-s).
/// Handles P == infinity, P == A (doubling) and P == -A (infinity). P == infinity takes no branch:
/// the formula runs on P = 0 and the result is replaced by (x, y, 1, 1) with selects, so that a
/// warp whose lanes start new bucket runs at different times stays converged (the branch made
/// warps split: 22 of 32 lanes active on average, measured on an H200).
template <class F> CUZK_HD xyzz_t<F> xyzz_add_affine_noinf(const xyzz_t<F>& p, const F& x2, const F& y2) {
    const bool p_inf = is_inf(p);
    F U2 = x2 * p.ZZ;
    F S2 = y2 * p.ZZZ;
    F P = U2 - p.X;
    F R = S2 - p.Y;
    if (!p_inf && P.is_zero()) {
        if (R.is_zero()) return xyzz_dbl_affine(x2, y2);
        return xyzz_inf<F>();
    }
    F PP = F::sqr(P);
    F PPP = P * PP;
    F Q = p.X * PP;
    xyzz_t<F> r;
    r.X = F::sqr(R) - PPP - F::dbl(Q);
    r.Y = R * (Q - r.X) - p.Y * PPP;
    r.ZZ = p.ZZ * PP;
    r.ZZZ = p.ZZZ * PPP;
    const F one = F::one();
    r.X = F::select(p_inf, x2, r.X);
    r.Y = F::select(p_inf, y2, r.Y);
    r.ZZ = F::select(p_inf, one, r.ZZ);
    r.ZZZ = F::select(p_inf, one, r.ZZZ);
    return r;
}

/// P + A (or P - A when `negate`), A affine in blst encoding (infinity = all-zero is skipped).
template <class F> CUZK_HD xyzz_t<F> xyzz_add_affine(const xyzz_t<F>& p, const affine_t<F>& a, bool negate) {
    if (is_inf(a)) return p;
    F y = negate ? -a.y : a.y;
    return xyzz_add_affine_noinf(p, a.x, y);
}

/// P + Q, add-2008-s, with all exceptional cases.
template <class F> CUZK_HD xyzz_t<F> xyzz_add(const xyzz_t<F>& p, const xyzz_t<F>& q) {
    if (is_inf(p)) return q;
    if (is_inf(q)) return p;
    F U1 = p.X * q.ZZ;
    F U2 = q.X * p.ZZ;
    F S1 = p.Y * q.ZZZ;
    F S2 = q.Y * p.ZZZ;
    F P = U2 - U1;
    F R = S2 - S1;
    if (P.is_zero()) {
        if (R.is_zero()) return xyzz_dbl(p);
        return xyzz_inf<F>();
    }
    F PP = F::sqr(P);
    F PPP = P * PP;
    F Q = U1 * PP;
    xyzz_t<F> r;
    r.X = F::sqr(R) - PPP - F::dbl(Q);
    r.Y = R * (Q - r.X) - S1 * PPP;
    r.ZZ = p.ZZ * q.ZZ * PP;
    r.ZZZ = p.ZZZ * q.ZZZ * PPP;
    return r;
}

/// Out-of-line P + Q for cold call sites (one compiled copy instead of an inlined one per site).
template <class F> CUZK_COLD xyzz_t<F> xyzz_add_ool(const xyzz_t<F>& p, const xyzz_t<F>& q) { return xyzz_add(p, q); }

/// Out-of-line P +/- A for cold call sites.
template <class F> CUZK_COLD xyzz_t<F> xyzz_add_affine_ool(const xyzz_t<F>& p, const affine_t<F>& a, bool negate) {
    return xyzz_add_affine(p, a, negate);
}

/// XYZZ -> Jacobian without inversion: with z = ZZZ/ZZ, Jacobian Z := ZZZ = z^3 gives
/// X_J = x Z^2 = X ZZ^2 and Y_J = y Z^3 = Y ZZZ^2. Infinity -> (0, 0, 0) (blst: z == 0).
template <class F> CUZK_HD jacobian_t<F> xyzz_to_jacobian(const xyzz_t<F>& p) {
    jacobian_t<F> r;
    if (is_inf(p)) {
        r.x = F::zero();
        r.y = F::zero();
        r.z = F::zero();
        return r;
    }
    r.x = p.X * F::sqr(p.ZZ);
    r.y = p.Y * F::sqr(p.ZZZ);
    r.z = p.ZZZ;
    return r;
}

/// k * P by left-to-right double-and-add over the low `bits` bits of k (k < 2^32; variable time,
/// used only for public bucket offsets).
template <class F> CUZK_COLD xyzz_t<F> xyzz_mul_u32(const xyzz_t<F>& p, unsigned k, int bits) {
    xyzz_t<F> r = xyzz_inf<F>();
    for (int i = bits - 1; i >= 0; i--) {
        r = xyzz_dbl(r);
        if ((k >> i) & 1) r = xyzz_add_ool(r, p);
    }
    return r;
}

}  // namespace cuzk_curve
