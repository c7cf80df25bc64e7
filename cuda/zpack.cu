// cuda/zpack.cu -- a witness's aux vector expanded on the device from its packed form (host
// side: src/gpu/kernels/zpack.rs).
//
// The packed form of n values (Fr, Montgomery form) is one 3-word group per 32 values:
//   meta[3w]     bit i set: value 32w + i is not 0
//   meta[3w + 1] bit i set: value 32w + i is neither 0 nor 1 (then its bit in meta[3w] is set too)
//   meta[3w + 2] how many values before 32w are neither 0 nor 1 (the rank of the group's first)
// and vals: the values that are neither 0 nor 1, in index order.
// A 32 GiB PoRep partition has 1.3 % other values: this is ~1/40 of the dense 32 n bytes.

#include "field.cuh"

using cuzk::Fr;

/// dst[i] for i < n from the packed form (see the file header): 0, 1 (Montgomery form) or
/// vals[rank]. Any grid (grid-stride); meta holds 3 * ceil(n / 32) words.
extern "C" __global__ void cuzk_zpack_expand(Fr* dst, const uint32_t* meta, const Fr* vals,
                                             uint64_t n) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const uint64_t w = i >> 5;
        const uint32_t bit = 1u << (i & 31);
        const uint32_t nz = meta[3 * w], big = meta[3 * w + 1];
        Fr v;
        if (!(nz & bit)) {
            v = Fr::zero();
        } else if (!(big & bit)) {
            v = Fr::one();
        } else {
            const uint32_t rank = meta[3 * w + 2] + __popc(big & (bit - 1));
            v = Fr::load(vals + rank);
        }
        v.store(dst + i);
    }
}
