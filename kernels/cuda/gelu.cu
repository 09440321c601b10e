/* gelu.cu - GELU, tanh approximation, forward and (accumulating) backward,
 * and the in-place form of the backward that matmul.cu uses when cuBLASLt
 * cannot apply the GELU gradient in its epilogue. */
#include "common.cuh"
#define GELU_K 0.7978845608f

__device__ __forceinline__ float gelu_of(float x) {
    return 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
}
/* d gelu(x) / dx */
__device__ __forceinline__ float gelu_slope(float x) {
    float th = tanhf(GELU_K * (x + 0.044715f * x * x * x));
    float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

__global__ void gelu_fwd_k(bf16 *out, const bf16 *inp, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = tobf(gelu_of(ldf(inp, i)));
}
__global__ void gelu_bwd_k(bf16 *dinp, const bf16 *inp, const bf16 *dout, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) dinp[i] = tobf(ldf(dinp, i) + ldf(dout, i) * gelu_slope(ldf(inp, i)));
}
__global__ void gelu_scale_k(bf16 *d, const bf16 *pre, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) d[i] = tobf(ldf(d, i) * gelu_slope(ldf(pre, i)));
}
extern "C" int cuda_gelu_forward(tprt_bf16 *out, const tprt_bf16 *inp, size_t n) {
    if (n) gelu_fwd_k<<<grid_for(n, 256), 256>>>(BF(out), CBF(inp), n);
    return launch_ok();
}
extern "C" int cuda_gelu_backward(tprt_bf16 *dinp, const tprt_bf16 *inp, const tprt_bf16 *dout, size_t n) {
    if (n) gelu_bwd_k<<<grid_for(n, 256), 256>>>(BF(dinp), CBF(inp), CBF(dout), n);
    return launch_ok();
}
extern "C" int cuda_gelu_scale_by_slope(tprt_bf16 *d, const tprt_bf16 *pre, size_t n) {
    if (n) gelu_scale_k<<<grid_for(n, 256), 256>>>(BF(d), CBF(pre), n);
    return launch_ok();
}
