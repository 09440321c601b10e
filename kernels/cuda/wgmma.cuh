/* wgmma.cuh - Hopper's warpgroup products (wgmma.mma_async, sm_90a) on
 * 64 x 64 bf16 tiles for tprt's attention: the tile layout in shared memory
 * (rows of 64 elements, 128 bytes, with the 16-byte chunks of row r swizzled
 * by r % 8: the tensor cores' 128-byte swizzle), the matrix descriptor of
 * such a tile, and 64 x 64 x 64 products with fp32 accumulators in the
 * m64n64k16 register layout (warp w of the group holds rows 16w..16w+15;
 * element i of a thread's 32 sits at row 16w + lane/4 + 8*((i/2)%2) and
 * column 8*(i/4) + 2*(lane%4) + i%2).  An operand is K-major (its rows run
 * along the product's M or N, 64 elements of K in each) or, transposed,
 * MN-major (rows run along K).  The group's 128 threads issue every call
 * together; wg_fence before products whose registers other code wrote,
 * wg_commit after them, wg_wait before their results are read.  Shared
 * memory written by plain stores or cp.async needs wg_proxy_fence (then a
 * barrier) before a product reads it.  Compiled for sm_90a only
 * (WG_ENABLED); for other targets the bodies are empty. */
#ifndef TPRT_WGMMA_CUH
#define TPRT_WGMMA_CUH
#include "common.cuh"
#include <stdint.h>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_ENABLED 1
#else
#define WG_ENABLED 0
#endif

#define WG_TILE       (64 * 64) /* elements of a tile */
#define WG_TILE_BYTES (WG_TILE * 2)

namespace {

__device__ __forceinline__ unsigned wg_saddr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

/* element offset of (r, c) in a swizzled tile (c < 64) */
__device__ __forceinline__ int wg_sw(int r, int c) { return r * 64 + ((((c >> 3) ^ r) & 7) << 3) + (c & 7); }

/* The descriptor of a swizzled tile (1024-byte aligned): start address, both byte offsets 1024 (eight rows:
 * the stride between 8-row groups, whichever of the two fields the layout reads; the other strides across
 * 64-element atoms, which a 64-wide tile never does), 128-byte swizzle.  A descriptor plus n / 16 starts n
 * bytes further on. */
__device__ __forceinline__ uint64_t wg_desc(const bf16 *tile) {
    return ((wg_saddr(tile) & 0x3FFFFu) >> 4) | (64ull << 16) | (64ull << 32) | (1ull << 62);
}

__device__ __forceinline__ void wg_fence() {
#if WG_ENABLED
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if WG_ENABLED
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void wg_wait() {
#if WG_ENABLED
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
/* plain stores and cp.async into shared memory made visible to the products (then a barrier) */
__device__ __forceinline__ void wg_proxy_fence() {
#if WG_ENABLED
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
/* the accumulator pinned in its registers across the asynchronous products (read only after wg_wait) */
__device__ __forceinline__ void wg_hold(float d[32]) {
#pragma unroll
    for (int i = 0; i < 32; i++) asm volatile("" : "+f"(d[i])::"memory");
}

#define WG_D32(d)                                                                                               \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),  \
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define WG_REGS32                                                                                                     \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
    "%24, %25, %26, %27, %28, %29, %30, %31}"

/* d (64 x 64) = (acc ? d : 0) + A . B over 16 of K, both operands from shared memory (descriptors);
 * TA, TB: 1 for an MN-major (transposed) operand */
template <int TA, int TB> __device__ __forceinline__ void wg_mma_ss(float d[32], uint64_t a, uint64_t b, int acc) {
#if WG_ENABLED
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_REGS32 ", %32, %33, p, 1, 1, %35, %36;\n}\n"
                 : WG_D32(d)
                 : "l"(a), "l"(b), "r"(acc), "n"(TA), "n"(TB));
#endif
}
/* the same with A (64 x 16) from registers in the mma A-fragment layout of each warp's 16 rows */
template <int TB> __device__ __forceinline__ void wg_mma_rs(float d[32], const uint32_t a[4], uint64_t b, int acc) {
#if WG_ENABLED
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_REGS32
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                 : WG_D32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc), "n"(TB));
#endif
}

/* a 16-of-K step's offset into a tile's descriptor: 32 bytes along a K-major row, 16 rows of an MN-major tile */
template <int T> __device__ __forceinline__ uint64_t wg_kstep(int ks) { return T ? ks * 16 * 128 / 16 : ks * 32 / 16; }

/* d = A . B^T: A (M x K) and B (N x K) K-major tiles, by descriptor */
__device__ __forceinline__ void wg_tile_abt(float d[32], uint64_t A, uint64_t B) {
#pragma unroll
    for (int ks = 0; ks < 4; ks++) wg_mma_ss<0, 0>(d, A + wg_kstep<0>(ks), B + wg_kstep<0>(ks), ks);
}
/* d = A^T . B: A stored K x M and B stored K x N, both MN-major */
__device__ __forceinline__ void wg_tile_atb(float d[32], uint64_t At, uint64_t B) {
#pragma unroll
    for (int ks = 0; ks < 4; ks++) wg_mma_ss<1, 1>(d, At + wg_kstep<1>(ks), B + wg_kstep<1>(ks), ks);
}
/* d += A . B: A (64 x 64) from registers (a[ks] the 16 columns from 16 ks), B stored K x N (MN-major) */
__device__ __forceinline__ void wg_tile_rb(float d[32], const uint32_t a[4][4], uint64_t B) {
#pragma unroll
    for (int ks = 0; ks < 4; ks++) wg_mma_rs<1>(d, a[ks], B + wg_kstep<1>(ks), 1);
}
/* an accumulator's 64 columns as the A fragments of the next product (bf16, rounded to nearest) */
__device__ __forceinline__ void wg_acc_to_a(uint32_t a[4][4], const float d[32]) {
#pragma unroll
    for (int ks = 0; ks < 4; ks++)
#pragma unroll
        for (int j = 0; j < 4; j++) a[ks][j] = pack2(d[8 * ks + 2 * j], d[8 * ks + 2 * j + 1]);
}
} // namespace
#endif
