/* gelu.cu - GELU, tanh approximation, forward and (accumulating) backward. */
#include "common.cuh"
#define GELU_K 0.7978845608f

__global__ void gelu_fwd_k(bf16 *out, const bf16 *inp, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = ldf(inp, i);
    out[i] = tobf(0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x))));
}
__global__ void gelu_bwd_k(bf16 *dinp, const bf16 *inp, const bf16 *dout, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = ldf(inp, i), th = tanhf(GELU_K * (x + 0.044715f * x * x * x));
    float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
    float g = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
    dinp[i] = tobf(ldf(dinp, i) + ldf(dout, i) * g);
}
extern "C" int cuda_gelu_forward(tprt_bf16 *out, const tprt_bf16 *inp, size_t n) {
    if (n) gelu_fwd_k<<<grid_for(n, 256), 256>>>(BF(out), CBF(inp), n);
    return launch_ok();
}
extern "C" int cuda_gelu_backward(tprt_bf16 *dinp, const tprt_bf16 *inp, const tprt_bf16 *dout, size_t n) {
    if (n) gelu_bwd_k<<<grid_for(n, 256), 256>>>(BF(dinp), CBF(inp), CBF(dout), n);
    return launch_ok();
}
