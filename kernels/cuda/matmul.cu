/* matmul.cu - out = inp @ W^T + bias with W stored (OC, IC), row-major, and
 * its backward, through cublasGemmEx: bf16 operands, fp32 accumulation
 * (CUBLAS_COMPUTE_32F); weight grads accumulate in fp32 (beta = 1).
 * Row-major X (R, K) is column-major K x R, so each product is written for
 * cuBLAS on the transposed matrices. */
#include "common.cuh"
#include <cublas_v2.h>

static cublasHandle_t g_blas;

extern "C" int cuda_blas_init(void) {
    if (g_blas) return 0;
    return cublasCreate(&g_blas) == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}
extern "C" void cuda_blas_shutdown(void) {
    if (g_blas) cublasDestroy(g_blas);
    g_blas = NULL;
}

/* C (m x n, ldc) = alpha op(A) op(B) + beta C, A/B bf16, C bf16 or fp32 */
static int gemm(bool ta, bool tb, int m, int n, int k, float alpha, const void *A, int lda, const void *B, int ldb,
                float beta, void *C, cudaDataType ct, int ldc) {
    if (cuda_blas_init()) return -1;
    cublasStatus_t s = cublasGemmEx(g_blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha,
                                    A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &beta, C, ct, ldc, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}

__global__ void bias_add_k(bf16 *out, const bf16 *bias, int BT, int OC, int ld) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * OC) return;
    size_t r = i / OC;
    int o = (int)(i % OC);
    bf16 *p = out + r * ld + o;
    *p = tobf(__bfloat162float(*p) + ldf(bias, o));
}
/* columns by x, row chunks by y; one atomic per (column, chunk) */
__global__ void bias_bwd_k(float *dbias, const bf16 *dout, int BT, int OC, int ld, int rows_per) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OC) return;
    int r0 = blockIdx.y * rows_per, r1 = min(BT, r0 + rows_per);
    float s = 0.0f;
    for (int r = r0; r < r1; r++) s += ldf(dout, (size_t)r * ld + o);
    atomicAdd(&dbias[o], s);
}

extern "C" int cuda_bias_add(tprt_bf16 *out, const tprt_bf16 *bias, int BT, int OC, int ld) {
    size_t n = (size_t)BT * OC;
    if (n) bias_add_k<<<grid_for(n, 256), 256>>>(BF(out), CBF(bias), BT, OC, ld);
    return launch_ok();
}
extern "C" int cuda_bias_backward(float *dbias, const tprt_bf16 *dout, int BT, int OC, int ld) {
    if (BT <= 0 || OC <= 0) return 0;
    int rows_per = 64;
    dim3 grid(grid_for((size_t)OC, 128), grid_for((size_t)BT, rows_per));
    bias_bwd_k<<<grid, 128>>>(dbias, CBF(dout), BT, OC, ld, rows_per);
    return launch_ok();
}

extern "C" int cuda_matmul_forward(tprt_bf16 *out, const tprt_bf16 *inp, const tprt_bf16 *w, const tprt_bf16 *bias, int BT,
                                   int IC, int OC, int ld) {
    /* out^T (OC x BT) = W (OC x IC: W^T stored) . inp^T (IC x BT) */
    if (gemm(true, false, OC, BT, IC, 1.0f, w, IC, inp, IC, 0.0f, out, CUDA_R_16BF, ld)) return -1;
    return bias ? cuda_bias_add(out, bias, BT, OC, ld) : launch_ok();
}

extern "C" int cuda_matmul_backward(tprt_bf16 *dinp, float *dw, float *dbias, const tprt_bf16 *dout, const tprt_bf16 *inp,
                                    const tprt_bf16 *w, int BT, int IC, int OC, int ld) {
    /* dinp^T (IC x BT) += W^T (IC x OC) . dout^T (OC x BT) */
    if (dinp && gemm(false, false, IC, BT, OC, 1.0f, w, IC, dout, ld, 1.0f, dinp, CUDA_R_16BF, IC)) return -1;
    /* dW^T (IC x OC) += inp^T (IC x BT) . dout (BT x OC) */
    if (dw && gemm(false, true, IC, OC, BT, 1.0f, inp, IC, dout, ld, 1.0f, dw, CUDA_R_32F, IC)) return -1;
    return dbias ? cuda_bias_backward(dbias, dout, BT, OC, ld) : launch_ok();
}

/* Strided batched product for attention.cu (same conventions). */
extern "C" int tprt_cuda_gemm_batched(bool ta, bool tb, int m, int n, int k, float alpha, const void *A, int lda,
                                      long long sa, const void *B, int ldb, long long sb, float beta, void *C,
                                      int c_fp32, int ldc, long long sc, int batch) {
    if (cuda_blas_init()) return -1;
    cublasStatus_t s = cublasGemmStridedBatchedEx(
        g_blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A, CUDA_R_16BF, lda, sa, B,
        CUDA_R_16BF, ldb, sb, &beta, C, c_fp32 ? CUDA_R_32F : CUDA_R_16BF, ldc, sc, batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}
