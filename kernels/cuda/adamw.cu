/* adamw.cu - the optimizer on the device: squared grad norms (block
 * partials added atomically) and the AdamW update of an fp32 master with
 * global-norm clipping, written back to the bf16 working copy.  Same
 * arithmetic as adamw.c, in fp32. */
#include "common.cuh"

__global__ void sumsq_k(float *acc, const float *g, size_t n) {
    float s = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += g[i] * g[i];
    __shared__ float sh[8];
    s = warp_sum(s);
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < (int)(blockDim.x / 32); i++) s += sh[i];
        atomicAdd(acc, s);
    }
}
__global__ void adamw_k(float *p, bf16 *out, const float *g, float *mo, float *vo, size_t n, const float *acc, float clip,
                        float lr, float b1, float b2, float eps, float decay, float bc1, float bc2) {
    size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (k >= n) return;
    float norm = sqrtf(acc[0] + acc[1]);
    float scale = (clip > 0.0f && norm > clip) ? clip / (norm + 1e-6f) : 1.0f;
    float gk = g[k] * scale;
    float m = b1 * mo[k] + (1.0f - b1) * gk, v = b2 * vo[k] + (1.0f - b2) * gk * gk;
    mo[k] = m;
    vo[k] = v;
    float x = p[k] - decay * p[k];
    x -= lr * (m / bc1) / (sqrtf(v / bc2) + eps);
    p[k] = x;
    out[k] = tobf(x);
}

extern "C" int cuda_sumsq(float *acc, const float *g, size_t n) {
    unsigned blocks = grid_for(n, 256 * 8);
    if (blocks > 1024) blocks = 1024;
    if (n) sumsq_k<<<blocks, 256>>>(acc, g, n);
    return launch_ok();
}
extern "C" int cuda_adamw_update(float *master, tprt_bf16 *working, const float *g, float *m, float *v, size_t n,
                                 const float *acc, float clip, float lr, float beta1, float beta2, float eps, float decay,
                                 float bc1, float bc2) {
    if (n) adamw_k<<<grid_for(n, 256), 256>>>(master, BF(working), g, m, v, n, acc, clip, lr, beta1, beta2, eps, decay, bc1, bc2);
    return launch_ok();
}
