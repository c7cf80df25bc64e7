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
//   infinity, P == Q, P == -Q) are handled by explicit branches. Each formula's Y3 = A B - C D
//   is one `F::mul_add(A, B, C, -D)` (two products, one Montgomery reduction).
//
// The code is generic over the field type F, which must provide (see field.cuh and the wrappers below):
//   F::zero(), F::one() (Montgomery 1), a + b, a - b, a * b, F::sqr(a), F::dbl(a) (= a + a),
//   F::mul_add(a, b, c, d) (= a b + c d),
//   a.is_zero(), a == b, -a (with -0 == 0), F::select(c, a, b) (c ? a : b, branch-free): the interface of
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
// Field wrappers for the point code: cuzk::Fp / cuzk::Fp2 (field.cuh) plus `select`, in two kinds
// that differ only in where the Fp Montgomery product lives:
//   FpX / Fp2X  the product out of line (one shared copy, `fp_mul_ool`): small code for the
//               kernels that run few additions (window sums, partials, tests);
//   FpI / Fp2I  the product inlined into every point formula: the bucket-accumulation kernels.
// History (H200, sm_90): with the 1,280-instruction `mul_cios`, inlining made the accumulation
// loop ~200 KB of straight-line code and warps stalled on instruction fetch (IPC 1.09), so the
// product went out of line. With the 480-instruction `mul_split` the inlined mixed addition is
// ~80 KB and avoids the call's argument moves and callee-saved spills: G2 accumulation 1.19 ->
// 0.72 s at 2^24, G1 2^26 -6 %; the window sums, inlined too, got 2x slower (10.5 -> 23.8 ms),
// hence the two kinds (BENCHMARKS.md, MSM section). Fp2 products and squares stay out of line
// in both kinds (two sums of two Fp products / two Fp products each). Same layout as the wrapped types, so device buffers of
// blstrs points can be read as affine_t of either kind.

/// Out-of-line Montgomery product in Fp (the one copy FpX's point operations call).
__device__ __noinline__ cuzk::Fp fp_mul_ool(cuzk::Fp a, cuzk::Fp b) { return cuzk::Fp::mul(a, b); }

/// Out-of-line a * b + c * d with one reduction (`cuzk::Fp::mul_add`), FpX's copy.
__device__ __noinline__ cuzk::Fp fp_mul_add_ool(cuzk::Fp a, cuzk::Fp b, cuzk::Fp c, cuzk::Fp d) {
    return cuzk::Fp::mul_add(a, b, c, d);
}

/// a * b + c * d of the wrapper kind (out of line or inlined), one reduction.
template <bool INL>
__device__ __forceinline__ cuzk::Fp fp_mul_add_k(const cuzk::Fp& a, const cuzk::Fp& b, const cuzk::Fp& c,
                                                 const cuzk::Fp& d) {
    if constexpr (INL)
        return cuzk::Fp::mul_add(a, b, c, d);
    else
        return fp_mul_add_ool(a, b, c, d);
}

/// The Fp product of the wrapper kind: out of line (`INL` = false) or inlined.
template <bool INL> __device__ __forceinline__ cuzk::Fp fp_mul_k(const cuzk::Fp& a, const cuzk::Fp& b) {
    if constexpr (INL)
        return cuzk::Fp::mul(a, b);
    else
        return fp_mul_ool(a, b);
}

/// cuzk::Fp with the product of kind `INL` (see above).
template <bool INL> struct alignas(16) FpT {
    cuzk::Fp v;
    __device__ __forceinline__ static FpT zero() { return {cuzk::Fp::zero()}; }
    __device__ __forceinline__ static FpT one() { return {cuzk::Fp::one()}; }
    __device__ __forceinline__ static FpT load(const FpT* p) { return {cuzk::Fp::load(&p->v)}; }
    __device__ __forceinline__ void store(FpT* p) const { v.store(&p->v); }
    __device__ __forceinline__ bool is_zero() const { return v.is_zero(); }
    __device__ __forceinline__ friend bool operator==(const FpT& a, const FpT& b) { return a.v == b.v; }
    __device__ __forceinline__ static FpT sqr(const FpT& a) { return {fp_mul_k<INL>(a.v, a.v)}; }
    /// a * b + c * d with one Montgomery reduction (lazy reduction, field.cuh `mul_sum`).
    __device__ __forceinline__ static FpT mul_add(const FpT& a, const FpT& b, const FpT& c, const FpT& d) {
        return {fp_mul_add_k<INL>(a.v, b.v, c.v, d.v)};
    }
    __device__ __forceinline__ static FpT dbl(const FpT& a) { return {cuzk::Fp::dbl(a.v)}; }
    __device__ __forceinline__ friend FpT operator+(const FpT& a, const FpT& b) { return {a.v + b.v}; }
    __device__ __forceinline__ friend FpT operator-(const FpT& a, const FpT& b) { return {a.v - b.v}; }
    __device__ __forceinline__ friend FpT operator*(const FpT& a, const FpT& b) { return {fp_mul_k<INL>(a.v, b.v)}; }
    __device__ __forceinline__ FpT operator-() const { return {-v}; }
    /// c ? a : b, limb by limb without a branch.
    __device__ __forceinline__ static FpT select(bool c, const FpT& a, const FpT& b) {
        FpT r;
#pragma unroll
        for (int i = 0; i < cuzk::Fp::N; i++) r.v.l[i] = c ? a.v.l[i] : b.v.l[i];
        return r;
    }
};
/// Fp, out-of-line product.
typedef FpT<false> FpX;
/// Fp, inlined product.
typedef FpT<true> FpI;
static_assert(sizeof(FpX) == 48 && sizeof(FpI) == 48, "FpX / FpI must match blst_fp");

template <bool INL> struct Fp2T;
template <bool INL> __device__ __noinline__ Fp2T<INL> fp2_mul_ool(Fp2T<INL> a, Fp2T<INL> b);
template <bool INL> __device__ __noinline__ Fp2T<INL> fp2_sqr_ool(Fp2T<INL> a);
template <bool INL> __device__ __noinline__ Fp2T<INL> fp2_mul_add_ool(Fp2T<INL> a, Fp2T<INL> b, Fp2T<INL> c, Fp2T<INL> d);

/// cuzk::Fp2 arithmetic (same formulas as field.cuh: lazy-reduction product, complex squaring) on top
/// of FpT<INL>; the Fp2 product and square are out of line in both kinds.
template <bool INL> struct alignas(16) Fp2T {
    typedef FpT<INL> B;
    B c0, c1;
    __device__ __forceinline__ static Fp2T zero() { return {B::zero(), B::zero()}; }
    __device__ __forceinline__ static Fp2T one() { return {B::one(), B::zero()}; }
    __device__ __forceinline__ static Fp2T load(const Fp2T* p) { return {B::load(&p->c0), B::load(&p->c1)}; }
    __device__ __forceinline__ void store(Fp2T* p) const {
        c0.store(&p->c0);
        c1.store(&p->c1);
    }
    __device__ __forceinline__ bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    __device__ __forceinline__ friend bool operator==(const Fp2T& a, const Fp2T& b) {
        return a.c0 == b.c0 && a.c1 == b.c1;
    }
    __device__ __forceinline__ static Fp2T sqr(const Fp2T& a) { return fp2_sqr_ool<INL>(a); }
    /// a * b + c * d, one reduction per coordinate (two sums of four Fp products).
    __device__ __forceinline__ static Fp2T mul_add(const Fp2T& a, const Fp2T& b, const Fp2T& c, const Fp2T& d) {
        return fp2_mul_add_ool<INL>(a, b, c, d);
    }
    __device__ __forceinline__ static Fp2T dbl(const Fp2T& a) { return {B::dbl(a.c0), B::dbl(a.c1)}; }
    __device__ __forceinline__ friend Fp2T operator+(const Fp2T& a, const Fp2T& b) { return {a.c0 + b.c0, a.c1 + b.c1}; }
    __device__ __forceinline__ friend Fp2T operator-(const Fp2T& a, const Fp2T& b) { return {a.c0 - b.c0, a.c1 - b.c1}; }
    __device__ __forceinline__ friend Fp2T operator*(const Fp2T& a, const Fp2T& b) { return fp2_mul_ool<INL>(a, b); }
    __device__ __forceinline__ Fp2T operator-() const { return {-c0, -c1}; }
    /// c ? a : b without a branch.
    __device__ __forceinline__ static Fp2T select(bool c, const Fp2T& a, const Fp2T& b) {
        return {B::select(c, a.c0, b.c0), B::select(c, a.c1, b.c1)};
    }
};
/// Fp2 over FpX.
typedef Fp2T<false> Fp2X;
/// Fp2 over FpI.
typedef Fp2T<true> Fp2I;
static_assert(sizeof(Fp2X) == 96 && sizeof(Fp2I) == 96, "Fp2X / Fp2I must match blst_fp2");

/// (a0 b0 - a1 b1) + (a0 b1 + a1 b0) u (u^2 = -1), each coordinate one lazy-reduction
/// `mul_add` (cuzk::Fp2::mul's form; it replaced Karatsuba, see BENCHMARKS.md).
template <bool INL> __device__ __noinline__ Fp2T<INL> fp2_mul_ool(Fp2T<INL> a, Fp2T<INL> b) {
    return {FpT<INL>::mul_add(a.c0, b.c0, a.c1, -b.c1), FpT<INL>::mul_add(a.c0, b.c1, a.c1, b.c0)};
}

/// a * b + c * d in Fp2: each coordinate is a sum of four Fp products with one reduction.
template <bool INL>
__device__ __noinline__ Fp2T<INL> fp2_mul_add_ool(Fp2T<INL> a, Fp2T<INL> b, Fp2T<INL> c, Fp2T<INL> d) {
    const cuzk::Fp x0[4] = {a.c0.v, a.c1.v, c.c0.v, c.c1.v};
    const cuzk::Fp y0[4] = {b.c0.v, (-b.c1).v, d.c0.v, (-d.c1).v};
    const cuzk::Fp y1[4] = {b.c1.v, b.c0.v, d.c1.v, d.c0.v};
    return {{cuzk::Fp::mul_sum<4>(x0, y0)}, {cuzk::Fp::mul_sum<4>(x0, y1)}};
}

/// (a0 + a1)(a0 - a1) + 2 a0 a1 u.
template <bool INL> __device__ __noinline__ Fp2T<INL> fp2_sqr_ool(Fp2T<INL> a) {
    FpT<INL> t = a.c0 * a.c1;
    return {(a.c0 + a.c1) * (a.c0 - a.c1), FpT<INL>::dbl(t)};
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
    r.Y = F::mul_add(M, S - r.X, W, -p.Y);
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
    r.Y = F::mul_add(M, S - r.X, W, -y);
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
    r.Y = F::mul_add(R, Q - r.X, p.Y, -PPP);
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
    r.Y = F::mul_add(R, Q - r.X, S1, -PPP);
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
