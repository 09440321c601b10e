/* test_tprt_cuda_wgmma.cu - the warpgroup products of wgmma.cuh against
 * products on the CPU, on random bf16 64 x 64 tiles: the three forms the
 * attention backward of attention_wgmma.cu uses (A . B^T and A^T . B with
 * both operands in swizzled shared tiles; A from an accumulator's registers
 * times B), and that the attention backward on them runs here.  Built for sm_90a alone (tests/gpu/CMakeLists.txt); on another
 * device the checks say why they do not run. */
extern "C" {
#include "tprt_cuda_check.h"
}
#include "wgmma.cuh"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

namespace {
/* (row, column) of accumulator element i of this thread */
__device__ int acc_row(int i) { return (threadIdx.x >> 5) * 16 + ((threadIdx.x & 31) >> 2) + 8 * ((i >> 1) & 1); }
__device__ int acc_col(int i) { return 8 * (i >> 2) + 2 * (threadIdx.x & 3) + (i & 1); }
__device__ void store_acc(float *out, const float d[32]) {
    for (int i = 0; i < 32; i++) out[acc_row(i) * 64 + acc_col(i)] = d[i];
}

/* out[0] = A . B^T, out[1] = A^T . B, out[2] = A . B (A through registers); A, B row-major 64 x 64 */
__global__ void wg_products_k(float *out, const bf16 *A, const bf16 *B) {
    __shared__ __align__(1024) bf16 sA[WG_TILE], sB[WG_TILE];
    for (int i = threadIdx.x; i < WG_TILE; i += blockDim.x)
        sA[wg_sw(i / 64, i % 64)] = A[i], sB[wg_sw(i / 64, i % 64)] = B[i];
    wg_proxy_fence();
    __syncthreads();
    float d[32], x[32];
    uint32_t a[4][4];
    wg_fence();
    wg_tile_abt(d, wg_desc(sA), wg_desc(sB));
    wg_commit();
    wg_wait<0>();
    wg_hold(d);
    store_acc(out, d);
    wg_fence();
    wg_tile_atb(d, wg_desc(sA), wg_desc(sB));
    wg_commit();
    wg_wait<0>();
    wg_hold(d);
    store_acc(out + WG_TILE, d);
    for (int i = 0; i < 32; i++) x[i] = __bfloat162float(A[acc_row(i) * 64 + acc_col(i)]), d[i] = 0.0f;
    wg_acc_to_a(a, x);
    wg_fence();
    wg_tile_rb(d, a, wg_desc(sB));
    wg_commit();
    wg_wait<0>();
    wg_hold(d);
    store_acc(out + 2 * WG_TILE, d);
}
} // namespace

extern "C" void run_wgmma_checks(void) {
    cudaFuncAttributes at;
    if (cudaFuncGetAttributes(&at, wg_products_k) != cudaSuccess) {
        cudaGetLastError();
        printf("skip: wgmma products (this device runs no sm_90a code)\n");
        return;
    }
    float *A = rnd(WG_TILE, 1.0f, 1), *B = rnd(WG_TILE, 1.0f, 1), *ref = (float *)malloc(3 * WG_TILE * sizeof(float));
    void *dA = dev_bf(A, WG_TILE), *dB = dev_bf(B, WG_TILE);
    float *dout = dev_f(NULL, 3 * WG_TILE);
    wg_products_k<<<1, 128>>>(dout, (const bf16 *)dA, (const bf16 *)dB);
    sync_or_die("wgmma products", cudaDeviceSynchronize() == cudaSuccess ? 0 : -1);
    for (int m = 0; m < 64; m++)
        for (int n = 0; n < 64; n++) {
            double abt = 0, atb = 0, ab = 0;
            for (int k = 0; k < 64; k++) {
                abt += (double)A[m * 64 + k] * B[n * 64 + k];
                atb += (double)A[k * 64 + m] * B[k * 64 + n];
                ab += (double)A[m * 64 + k] * B[k * 64 + n];
            }
            ref[m * 64 + n] = (float)abt, ref[WG_TILE + m * 64 + n] = (float)atb,
                         ref[2 * WG_TILE + m * 64 + n] = (float)ab;
        }
    float *got = host_f(dout, 3 * WG_TILE);
    static const char *const names[] = {"wgmma A.B^T (shared, K-major)", "wgmma A^T.B (shared, MN-major)",
                                        "wgmma A.B (A from registers, B MN-major)"};
    for (int f = 0; f < 3; f++) check(names[f], got + f * WG_TILE, ref + f * WG_TILE, WG_TILE, F32_TOL);
    char detail[64]; /* so TPRT_ATTENTION_BWD=wgmma's checks run that kernel, not the fallback */
    int r64 = cuda_attention_wgmma_ready(64), r32 = cuda_attention_wgmma_ready(32);
    snprintf(detail, sizeof detail, "head size 64: %d, 32: %d", r64, r32);
    check_that("wgmma attention backward available", r64 == 1 && r32 == 0, detail);
    cudaFree(dA), cudaFree(dB), cudaFree(dout);
    free(A), free(B), free(ref), free(got);
}
