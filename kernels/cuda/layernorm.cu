/* layernorm.cu - layer normalization over channels: one warp per row;
 * the backward sums dw/db of a block's rows in shared memory, then adds
 * them to the fp32 grads with one atomic per channel and block. */
#include "common.cuh"

__global__ void layernorm_fwd_k(bf16 *out, float *mean, float *rstd, const bf16 *inp, const bf16 *w, const bf16 *b,
                                int BT, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= BT) return;
    const bf16 *x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += ldf(x, c);
    float m = warp_sum(s) / C, v = 0.0f;
    for (int c = lane; c < C; c += 32) { float d = ldf(x, c) - m; v += d * d; }
    float r = rsqrtf(warp_sum(v) / C + 1e-5f);
    bf16 *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) o[c] = tobf((ldf(x, c) - m) * r * ldf(w, c) + ldf(b, c));
    if (lane == 0) mean[row] = m, rstd[row] = r;
}

__global__ void layernorm_bwd_k(bf16 *dinp, float *dw, float *db, const bf16 *dout, const bf16 *inp, const bf16 *w,
                                const float *mean, const float *rstd, int BT, int C) {
    extern __shared__ float sh[]; /* dw[C], db[C] of this block */
    float *sdw = sh, *sdb = sh + C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) sdw[c] = sdb[c] = 0.0f;
    __syncthreads();
    int warps = blockDim.x / 32, lane = threadIdx.x % 32;
    for (int row = blockIdx.x * warps + threadIdx.x / 32; row < BT; row += gridDim.x * warps) {
        const bf16 *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
        float m = mean[row], s = rstd[row], dmean = 0.0f, dnorm = 0.0f;
        for (int c = lane; c < C; c += 32) {
            float dn = ldf(w, c) * ldf(dy, c);
            dmean += dn;
            dnorm += dn * (ldf(x, c) - m) * s;
        }
        dmean = warp_sum(dmean) / C;
        dnorm = warp_sum(dnorm) / C;
        bf16 *dx = dinp + (size_t)row * C;
        for (int c = lane; c < C; c += 32) {
            float g = ldf(dy, c), n = (ldf(x, c) - m) * s;
            atomicAdd(&sdb[c], g);
            atomicAdd(&sdw[c], n * g);
            dx[c] = tobf(ldf(dx, c) + (ldf(w, c) * g - dmean - n * dnorm) * s);
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        atomicAdd(&dw[c], sdw[c]);
        atomicAdd(&db[c], sdb[c]);
    }
}

extern "C" int cuda_layernorm_forward(tprt_bf16 *out, float *mean, float *rstd, const tprt_bf16 *inp, const tprt_bf16 *w,
                                      const tprt_bf16 *b, int BT, int C) {
    if (BT > 0) layernorm_fwd_k<<<grid_for((size_t)BT, 8), 256>>>(BF(out), mean, rstd, CBF(inp), CBF(w), CBF(b), BT, C);
    return launch_ok();
}
extern "C" int cuda_layernorm_backward(tprt_bf16 *dinp, float *dw, float *db, const tprt_bf16 *dout, const tprt_bf16 *inp,
                                       const tprt_bf16 *w, const float *mean, const float *rstd, int BT, int C) {
    if (BT <= 0) return 0;
    unsigned blocks = grid_for((size_t)BT, 8 * 8); /* 8 warps, about 8 rows each */
    if (blocks > 1024) blocks = 1024;
    layernorm_bwd_k<<<blocks, 256, 2 * (size_t)C * sizeof(float)>>>(BF(dinp), dw, db, CBF(dout), CBF(inp), CBF(w), mean,
                                                                     rstd, BT, C);
    return launch_ok();
}
