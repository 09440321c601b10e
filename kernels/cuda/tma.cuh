/* tma.cuh - Hopper's tensor memory accelerator for tprt's attention: a
 * 2-D tensor map over a row-major bf16 matrix whose boxes are 64 x 64
 * tiles in the tensor cores' 128-byte swizzle (the layout of wgmma.cuh),
 * and, on the device, the transaction barriers (mbarrier) that one thread
 * arms with the bytes it asks for and every thread of the block waits on,
 * the tile copies (one thread issues a whole tile) and 1-D bulk copies, and
 * the bulk reductions from shared memory into global fp32 (the attention
 * backward's dq tiles) with their waits.
 * For translation units built for sm_90a alone (attention_wgmma.cu). */
#ifndef TPRT_TMA_CUH
#define TPRT_TMA_CUH
#include "wgmma.cuh"
#include <cuda.h>
#include <cudaTypedefs.h>

#if defined(__CUDA_ARCH__) && !WG_ENABLED
#error "tma.cuh is for sm_90a device code alone"
#endif

namespace {

/* A map of `rows` x `cols` bf16 (row stride `ld` elements) at base, read in 64 x 64 swizzled boxes.
 * 0 when made; 1 when the driver cannot make it (the caller keeps its cp.async loads). */
static int tma_map_tiles(CUtensorMap *map, const void *base, unsigned long long rows, unsigned long long cols,
                         unsigned long long ld) {
    static PFN_cuTensorMapEncodeTiled_v12000 encode;
    static int looked;
    if (!looked) {
        looked = 1;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&encode, 12000, cudaEnableDefault,
                                             &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            encode = NULL;
        cudaGetLastError();
    }
    if (!encode || ((uintptr_t)base & 15) || (ld * 2) % 16) return 1;
    const cuuint64_t dims[2] = {cols, rows}, strides[1] = {ld * 2};
    const cuuint32_t box[2] = {64, 64}, step[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dims, strides, box, step,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS;
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(wg_saddr(bar)), "r"(count) : "memory");
}
/* the barriers just made visible to the copy engine (then a block barrier) */
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");
}
/* this thread's arrival, with `bytes` more to come from copies completing on bar */
__device__ __forceinline__ void mbar_expect(uint64_t *bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(wg_saddr(bar)), "r"(bytes)
                 : "memory");
}
/* `bytes` more to come on bar's current phase, without an arrival (copies that another thread's arrival covers) */
__device__ __forceinline__ void mbar_add_tx(uint64_t *bar, unsigned bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(wg_saddr(bar)), "r"(bytes)
                 : "memory");
}
/* until bar's phase `parity` (0, 1, 0, ... for its uses in turn) has completed */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, unsigned parity) {
    asm volatile("{\n.reg .pred done;\nTMA_WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra TMA_WAIT_%=;\n}\n" ::"r"(wg_saddr(bar)),
                 "r"(parity)
                 : "memory");
}
/* the 64 x 64 tile at (row, col) of map into dst (1024-byte aligned), completing on bar */
__device__ __forceinline__ void tma_tile(bf16 *dst, const CUtensorMap *map, int col, int row, uint64_t *bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::
            "r"(wg_saddr(dst)),
        "l"(map), "r"(col), "r"(row), "r"(wg_saddr(bar))
        : "memory");
}
/* `bytes` (a multiple of 16, both ends 16-byte aligned) from src into dst, completing on bar */
__device__ __forceinline__ void bulk_load(void *dst, const void *src, unsigned bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     wg_saddr(dst)),
                 "l"(src), "r"(bytes), "r"(wg_saddr(bar))
                 : "memory");
}
/* `bytes` of fp32 from shared src added into global dst by the copy engine (one thread issues it) */
__device__ __forceinline__ void bulk_add_f32(float *dst, const float *src, unsigned bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
                 "cp.async.bulk.commit_group;\n" ::"l"(dst),
                 "r"(wg_saddr(src)), "r"(bytes)
                 : "memory");
}
/* this thread's bulk additions have read their shared memory (read), or are done (all) */
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
} // namespace
#endif
