/* common.cuh - helpers shared by tprt's CUDA kernels: bf16 loads/stores,
 * warp reductions, launch sizes and the launch status check. */
#ifndef TPRT_CUDA_COMMON_CUH
#define TPRT_CUDA_COMMON_CUH
#include "tprt_cuda.h"
#include <cuda_bf16.h>
#include <cuda_runtime.h>

typedef __nv_bfloat16 bf16;
#define BF(p) (reinterpret_cast<bf16 *>(p))
#define CBF(p) (reinterpret_cast<const bf16 *>(p))

__device__ __forceinline__ float ldf(const bf16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ bf16 tobf(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

static inline unsigned grid_for(size_t n, int threads) { return (unsigned)((n + (size_t)threads - 1) / (size_t)threads); }
static inline int launch_ok(void) { return cudaGetLastError() == cudaSuccess ? 0 : -1; }
#endif
