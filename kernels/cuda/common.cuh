/* common.cuh - helpers shared by tprt's CUDA kernels: bf16 loads/stores
 * (scalar, and 128-bit: eight bf16 in one uint4), warp reductions, launch
 * sizes (the SM count, asked once), the launch status check, 2^x as the
 * hardware's approximate exp2 (exp(x) = 2^(x log2 e), as __expf takes it),
 * and the pieces of the column-sum kernels (the rows a block takes; its
 * lanes' sums into one atomic a column). */
#ifndef TPRT_CUDA_COMMON_CUH
#define TPRT_CUDA_COMMON_CUH
#include "tprt_cuda.h"
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;
#define BF(p)  (reinterpret_cast<bf16 *>(p))
#define CBF(p) (reinterpret_cast<const bf16 *>(p))

#define TPRT_LOG2E 1.4426950408889634f
/* 2^x in one MUFU instruction: .ftz takes subnormal inputs and results as zero, which the callers'
 * softmax terms lose nothing by (without it each call carries a range check and two predicated fixes) */
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float ldf(const bf16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ bf16 tobf(float x) { return __float2bfloat16_rn(x); }

/* 128-bit access: p must be 16-byte aligned.  Element 2i of a uint4 lies in the low half of
 * word i (little endian), so the unpack is a shift and a mask, exact. */
__device__ __forceinline__ uint4 ld_vec8(const bf16 *p) { return *reinterpret_cast<const uint4 *>(p); }
__device__ __forceinline__ void st_vec8(bf16 *p, uint4 v) { *reinterpret_cast<uint4 *>(p) = v; }
__device__ __forceinline__ void unpack2(unsigned w, float *f) {
    f[0] = __uint_as_float(w << 16);
    f[1] = __uint_as_float(w & 0xffff0000u);
}
__device__ __forceinline__ void unpack8(uint4 v, float f[8]) {
    unpack2(v.x, f), unpack2(v.y, f + 2), unpack2(v.z, f + 4), unpack2(v.w, f + 6);
}
__device__ __forceinline__ unsigned pack2(float lo, float hi) { /* round to nearest even, as tobf */
    return (unsigned)__bfloat16_as_ushort(tobf(lo)) | ((unsigned)__bfloat16_as_ushort(tobf(hi)) << 16);
}
__device__ __forceinline__ uint4 pack8(const float f[8]) {
    return make_uint4(pack2(f[0], f[1]), pack2(f[2], f[3]), pack2(f[4], f[5]), pack2(f[6], f[7]));
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* A column-sum block: 32 x COL_LANES threads over 256 columns, thread (tx, ty) holding the sums s[8] of
 * columns col0 + 8 tx .. + 7 over its row lane ty.  The lanes are summed in shared memory and each
 * column below ncols gets one atomic add into dst[column]; every thread of the block must call it. */
#define COL_LANES 8
#define COL_PAD   9 /* shared row stride per thread: 8 sums + 1, so the lanes' stores do not collide */
__device__ __forceinline__ void add_block_column_sums(float *dst, const float s[8], int col0, int ncols) {
    __shared__ float part[COL_LANES][32 * COL_PAD];
    const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
    for (int j = 0; j < 8; j++) part[ty][tx * COL_PAD + j] = s[j];
    __syncthreads();
    const int t = ty * 32 + tx; /* thread t sums column t of the block's 256 */
    if (col0 + t >= ncols) return;
    float v = 0.0f;
#pragma unroll
    for (int l = 0; l < COL_LANES; l++) v += part[l][(t / 8) * COL_PAD + t % 8];
    atomicAdd(&dst[col0 + t], v);
}

static inline unsigned grid_for(size_t n, int threads) {
    return (unsigned)((n + (size_t)threads - 1) / (size_t)threads);
}
static inline int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }
/* multiprocessors of the current device, asked once per process (1 when the query fails, so
 * that a grid sized from it stays valid) */
static inline int sm_count(void) {
    static int cached;
    if (!cached) {
        int dev = 0, n = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1)
            return 1;
        cached = n;
    }
    return cached;
}
/* Rows each block of a column-sum kernel takes: about eight blocks an SM over cols column blocks, at
 * least `least` rows, a multiple of `multiple` (least is one too). */
static inline long column_block_rows(long rows, unsigned cols, long least, long multiple) {
    long chunks = (long)sm_count() * 8 / (long)cols;
    if (chunks < 1) chunks = 1;
    long per = (rows + chunks - 1) / chunks;
    return per < least ? least : (per + multiple - 1) / multiple * multiple;
}
static inline int launch_ok(void) { return cudaGetLastError() == cudaSuccess ? 0 : -1; }
#endif
