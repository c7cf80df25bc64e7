// cuzk — small kernels that expose single field operations, for tests/gpu_field.rs.
// One thread per element; `op` selects the operation (codes below, mirrored in the test):
//   0 add  1 sub  2 mul  3 sqr  4 neg  5 inverse  6 to_mont  7 from_mont  8 eq (out = 1 or 0)
//   9 dbl  10 is_zero (out = 1 or 0)  11 mul_cios  12 mul_wide  13 mul_split (11-13: Fr and Fp
//   only; `mul`, op 2, is mul_split)
//   14 a*b + (a+b)*b by one `mul_add` (lazy reduction; all three fields)
//   15 a*a + a*b + b*b + (a+b)*(a+b) by one `mul_sum<4>` (Fp only: Fr allows K <= 2)
//   16 inverse_vartime (the binary extended Euclidean inversion; all three fields)
//   Fp2: 11 Karatsuba (the product before the lazy-reduction `mul`)
// For Fp2, to_mont/from_mont (6, 7) are not defined and leave the output untouched.
#include "field.cuh"

namespace cuzk {
namespace test {

template <class F>
__device__ __forceinline__ F field_op(int op, const F& a, const F& b) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return F::sqr(a);
        case 4: return -a;
        case 5: return F::inverse(a);
        case 6: return F::to_mont(a);
        case 7: return F::from_mont(a);
        case 8: return (a == b) ? F::one() : F::zero();
        case 9: return F::dbl(a);
        case 10: return a.is_zero() ? F::one() : F::zero();
        case 11: return F::mul_cios(a, b);
        case 12: return F::mul_wide(a, b);
        case 13: return F::mul_split(a, b);
        case 14: return F::mul_add(a, b, a + b, b);
        case 15:
            if constexpr (F::SUM_MAX >= 4) {
                const F s = a + b;
                const F x[4] = {a, a, b, s}, y[4] = {a, b, b, s};
                return F::template mul_sum<4>(x, y);
            } else {
                return a;
            }
        case 16: return F::inverse_vartime(a);
        default: return a;
    }
}

__device__ __forceinline__ Fp2 fp2_op(int op, const Fp2& a, const Fp2& b) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return Fp2::sqr(a);
        case 4: return -a;
        case 5: return Fp2::inverse(a);
        case 8: return (a == b) ? Fp2::one() : Fp2::zero();
        case 9: return Fp2::dbl(a);
        case 10: return a.is_zero() ? Fp2::one() : Fp2::zero();
        case 11: return Fp2::mul_karatsuba(a, b);
        case 14: return Fp2::mul_add(a, b, a + b, b);
        case 16: return Fp2::inverse_vartime(a);
        default: return a;
    }
}

}  // namespace test
}  // namespace cuzk

/// out[i] = op(a[i], b[i]) over Fr, i < n.
extern "C" __global__ void cuzk_test_fr_op(int op, const cuzk::Fr* a, const cuzk::Fr* b,
                                           cuzk::Fr* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    cuzk::test::field_op(op, cuzk::Fr::load(a + i), cuzk::Fr::load(b + i)).store(out + i);
}

/// out[i] = op(a[i], b[i]) over Fp, i < n.
extern "C" __global__ void cuzk_test_fp_op(int op, const cuzk::Fp* a, const cuzk::Fp* b,
                                           cuzk::Fp* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    cuzk::test::field_op(op, cuzk::Fp::load(a + i), cuzk::Fp::load(b + i)).store(out + i);
}

/// out[i] = op(a[i], b[i]) over Fp2, i < n.
extern "C" __global__ void cuzk_test_fp2_op(int op, const cuzk::Fp2* a, const cuzk::Fp2* b,
                                            cuzk::Fp2* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (op == 6 || op == 7) return;
    cuzk::test::fp2_op(op, cuzk::Fp2::load(a + i), cuzk::Fp2::load(b + i)).store(out + i);
}

/// Throughput probe for benches/ntt.rs: each thread runs two independent chains of `iters`
/// Fr multiplications on its element and writes the result back (2*iters muls per thread).
/// product: 0 Fr::mul_cios, 1 Fr::mul_wide, 2 Fr::mul_split (src/gpu/kernels/ntt.rs PassProduct).
template <class M>
static __device__ __forceinline__ void fr_mul_chain(cuzk::Fr& x, cuzk::Fr& y, const cuzk::Fr& z, unsigned iters, M m) {
    for (unsigned k = 0; k < iters; k++) {
        x = m(x, z);
        y = m(y, z);
    }
}
extern "C" __global__ void cuzk_test_fr_mul_chain(cuzk::Fr* data, unsigned n, unsigned iters, int product) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    cuzk::Fr x = cuzk::Fr::load(data + i), y = x + cuzk::Fr::one(), z = x;
    if (product == 2)
        fr_mul_chain(x, y, z, iters, [](const cuzk::Fr& a, const cuzk::Fr& b) { return cuzk::Fr::mul_split(a, b); });
    else if (product == 1)
        fr_mul_chain(x, y, z, iters, [](const cuzk::Fr& a, const cuzk::Fr& b) { return cuzk::Fr::mul_wide(a, b); });
    else
        fr_mul_chain(x, y, z, iters, [](const cuzk::Fr& a, const cuzk::Fr& b) { return cuzk::Fr::mul_cios(a, b); });
    (x + y).store(data + i);
}

// ---------------------------------------------------------------------------------------------
// Point-addition cost probe for benches/msm.rs (`CUZK_BENCH_MSM_AFFINE`): the bucket
// accumulation's XYZZ mixed addition against affine additions batched by Montgomery's trick
// (one inversion per `k` additions, "batch affine"), same inputs, G1, inlined products.
#include "curve.cuh"

namespace cuzk {
namespace test {
typedef cuzk_curve::FpI PF;
typedef cuzk_curve::affine_t<PF> PA;
typedef cuzk_curve::xyzz_t<PF> PX;

/// mode 0: acc[t] += q[t + i T] for i < k by madd-2008-s (one XYZZ accumulator per thread, as
/// the accumulation loop). mode 1: out[j] = p[j] + q[j] (affine) for j = t + i T, i < k, the k
/// denominators q.x - p.x of a thread inverted together: prefix products (1 product each, kept
/// in `scratch`), one Fermat inversion, then per element 2 products to peel its inverse and 3
/// for lambda, x3, y3.
__device__ __forceinline__ void add_probe(unsigned t, unsigned T, unsigned k, int mode, const PA* p, const PA* q,
                                          PX* acc, PA* out, PF* scratch) {
    if (mode == 0) {
        PX a = cuzk_curve::load_xyzz(acc + t);
        for (unsigned i = 0; i < k; i++) {
            const PA b = cuzk_curve::load_affine(q + t + (size_t)i * T);
            a = cuzk_curve::xyzz_add_affine_noinf(a, b.x, b.y);
        }
        cuzk_curve::store_xyzz(acc + t, a);
        return;
    }
    PF prod = PF::one();
    for (unsigned i = 0; i < k; i++) {
        const size_t j = t + (size_t)i * T;
        prod = prod * (PF::load(&q[j].x) - PF::load(&p[j].x));
        prod.store(scratch + j);
    }
    PF inv = {Fp::inverse(prod.v)};
    for (unsigned i = k; i-- > 0;) {
        const size_t j = t + (size_t)i * T;
        const PA a = cuzk_curve::load_affine(p + j), b = cuzk_curve::load_affine(q + j);
        const PF d = b.x - a.x;
        const PF inv_j = i ? inv * PF::load(scratch + j - T) : inv;
        inv = inv * d;
        const PF lambda = (b.y - a.y) * inv_j;
        PA r;
        r.x = PF::sqr(lambda) - a.x - b.x;
        r.y = lambda * (a.x - r.x) - a.y;
        r.x.store(&out[j].x);
        r.y.store(&out[j].y);
    }
}
}  // namespace test
}  // namespace cuzk

/// See cuzk::test::add_probe (mode 0 / 1); T threads (t < T), k elements each; both at the
/// accumulation kernel's occupancy (5 blocks of 128 threads per SM, <= 96 registers).
extern "C" __global__ void __launch_bounds__(128, 5) cuzk_test_g1_add_probe_xyzz(
    const cuzk::test::PA* p, const cuzk::test::PA* q, cuzk::test::PX* acc, cuzk::test::PA* out,
    cuzk::test::PF* scratch, unsigned T, unsigned k) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < T) cuzk::test::add_probe(t, T, k, 0, p, q, acc, out, scratch);
}
extern "C" __global__ void __launch_bounds__(128, 5) cuzk_test_g1_add_probe_affine(
    const cuzk::test::PA* p, const cuzk::test::PA* q, cuzk::test::PX* acc, cuzk::test::PA* out,
    cuzk::test::PF* scratch, unsigned T, unsigned k) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < T) cuzk::test::add_probe(t, T, k, 1, p, q, acc, out, scratch);
}
