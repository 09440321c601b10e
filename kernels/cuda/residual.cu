/* residual.cu - residual connection out = a + b and its (accumulating) backward. */
#include "common.cuh"

__global__ void residual_fwd_k(bf16 *out, const bf16 *a, const bf16 *b, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = tobf(ldf(a, i) + ldf(b, i));
}
__global__ void residual_bwd_k(bf16 *da, bf16 *db, const bf16 *dout, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = ldf(dout, i);
    da[i] = tobf(ldf(da, i) + g);
    db[i] = tobf(ldf(db, i) + g);
}
extern "C" int cuda_residual_forward(tprt_bf16 *out, const tprt_bf16 *a, const tprt_bf16 *b, size_t n) {
    if (n) residual_fwd_k<<<grid_for(n, 256), 256>>>(BF(out), CBF(a), CBF(b), n);
    return launch_ok();
}
extern "C" int cuda_residual_backward(tprt_bf16 *da, tprt_bf16 *db, const tprt_bf16 *dout, size_t n) {
    if (n) residual_bwd_k<<<grid_for(n, 256), 256>>>(BF(da), BF(db), CBF(dout), n);
    return launch_ok();
}
