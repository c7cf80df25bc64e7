// cuda/spmv.cu -- sparse matrix-vector products y = M.z of the compiled R1CS over Fr, and the
// R1CS check a o b = c (host side: src/gpu/kernels/spmv.rs).
//
// Matrices are CSR (src/circuit/csr.rs): row j's entries are row_ptr[j] .. row_ptr[j+1] of
// col / coeff (u32 each). col indexes z = (input || aux): c < num_inputs is input[c], otherwise
// aux[c - num_inputs]. coeff indexes the circuit's coefficient table (Fr, Montgomery form);
// index 0 is +1 and index 1 is -1, summed with an add / a sub, every other index costs one
// Montgomery product. Rows of the PoRep circuits have 1 to ~40 entries, most 1 to 3.
//
// A block of rows streamed from host memory (a card too small to keep the matrices) keeps its
// row_ptr entries as they are in the whole matrix: col and coeff then hold entries base ..
// of the whole matrix's, and entry k is read at k - base (base = 0 for a resident matrix).
//
// Schemes: G consecutive lanes of a warp share a row (G = 1: one row per thread; G = 32: one
// warp per row), each lane summing every G-th entry, then a shuffle reduction inside the group.
// Field addition is exact, so every G gives the same (canonical) result as the CPU's
// sequential sum. Launch: any grid, blockDim a multiple of 32 (grid-stride over rows).
#include "field.cuh"

namespace cuzk {
namespace spmv {

/// z[c] for z = (input || aux).
__device__ __forceinline__ Fr load_z(const Fr* input, uint32_t num_inputs, const Fr* aux, uint32_t c) {
    return c < num_inputs ? Fr::load(input + c) : Fr::load(aux + (c - num_inputs));
}

/// acc + coeffs[k] * v, with the +1 / -1 entries (k = 0 / 1) as an add / a sub.
__device__ __forceinline__ Fr add_term(const Fr& acc, const Fr& v, uint32_t k, const Fr* coeffs) {
    if (k == 0) return acc + v;
    if (k == 1) return acc - v;
    return acc + v * Fr::load(coeffs + k);
}

template <unsigned G>
__device__ __forceinline__ void spmv_body(Fr* y, const uint32_t* row_ptr, const uint32_t* col,
                                          const uint32_t* coeff, uint32_t base, const Fr* coeffs,
                                          const Fr* input, uint32_t num_inputs, const Fr* aux,
                                          uint32_t rows) {
    static_assert(G >= 1 && G <= 32 && (32 % G) == 0, "group size divides a warp");
    const uint32_t lane = threadIdx.x % G;
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t groups = (uint64_t)gridDim.x * blockDim.x / G;
    // The first row of this thread's warp: every lane of a warp runs the same iterations, so
    // the shuffles below see the whole warp (rows past the end compute an empty sum).
    const uint64_t warp_group0 = (tid - (threadIdx.x % 32)) / G;
    const uint64_t my = tid / G - warp_group0;
    for (uint64_t j0 = warp_group0; j0 < rows; j0 += groups) {
        const uint64_t j = j0 + my;
        const bool active = j < rows;
        const uint32_t s = active ? row_ptr[j] : 0, e = active ? row_ptr[j + 1] : 0;
        Fr acc = Fr::zero();
        for (uint32_t k = s + lane; k < e; k += G)
            acc = add_term(acc, load_z(input, num_inputs, aux, col[k - base]), coeff[k - base], coeffs);
        if (G > 1) {
#pragma unroll
            for (unsigned off = G / 2; off > 0; off /= 2) {
                Fr o;
#pragma unroll
                for (int i = 0; i < Fr::N; i++) o.l[i] = __shfl_down_sync(0xffffffffu, acc.l[i], off, G);
                acc = acc + o;
            }
        }
        if (active && lane == 0) acc.store(y + j);
    }
}

}  // namespace spmv
}  // namespace cuzk

using cuzk::Fr;

/// y[j] = sum over row j of coeffs[coeff[e - base]] * z[col[e - base]], j < rows; one row per
/// thread.
/// y holds >= rows elements; input num_inputs, aux the rest of z (see the file header).
extern "C" __global__ void cuzk_spmv_g1(Fr* y, const uint32_t* row_ptr, const uint32_t* col,
                                        const uint32_t* coeff, uint32_t base, const Fr* coeffs,
                                        const Fr* input, uint32_t num_inputs, const Fr* aux,
                                        uint32_t rows) {
    cuzk::spmv::spmv_body<1>(y, row_ptr, col, coeff, base, coeffs, input, num_inputs, aux, rows);
}

/// As cuzk_spmv_g1, four lanes per row.
extern "C" __global__ void cuzk_spmv_g4(Fr* y, const uint32_t* row_ptr, const uint32_t* col,
                                        const uint32_t* coeff, uint32_t base, const Fr* coeffs,
                                        const Fr* input, uint32_t num_inputs, const Fr* aux,
                                        uint32_t rows) {
    cuzk::spmv::spmv_body<4>(y, row_ptr, col, coeff, base, coeffs, input, num_inputs, aux, rows);
}

/// As cuzk_spmv_g1, one warp per row.
extern "C" __global__ void cuzk_spmv_g32(Fr* y, const uint32_t* row_ptr, const uint32_t* col,
                                        const uint32_t* coeff, uint32_t base, const Fr* coeffs,
                                        const Fr* input, uint32_t num_inputs, const Fr* aux,
                                        uint32_t rows) {
    cuzk::spmv::spmv_body<32>(y, row_ptr, col, coeff, base, coeffs, input, num_inputs, aux, rows);
}

/// R1CS check: *first_bad = min(*first_bad, j) for every row j < rows with a[j] * b[j] != c[j]
/// (all canonical Montgomery form, as the SpMV writes them). The host sets *first_bad to
/// 0xffffffff first; it stays so when every row holds. Any grid (grid-stride).
extern "C" __global__ void cuzk_r1cs_check(const Fr* a, const Fr* b, const Fr* c, uint32_t rows,
                                           uint32_t* first_bad) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < rows; j += stride) {
        if (Fr::load(a + j) * Fr::load(b + j) != Fr::load(c + j)) atomicMin(first_bad, (uint32_t)j);
    }
}
