/* crossentropy.cu - vocab-parallel softmax cross-entropy over bf16 logits
 * (one block per row), in the steps of crossentropy.c: row max, sum of
 * exponentials and target logit, mean loss; padded vocab columns (global
 * id >= vocab) are masked out of all of them and get a zero gradient. */
#include "common.cuh"
#include <cfloat>

static __device__ int real_cols(int v0, int vl, int vocab) {
    int n = vocab - v0;
    return n < 0 ? 0 : n > vl ? vl : n;
}
/* block-wide reduction of 256 threads (op 0 sum, 1 max) */
static __device__ float block_reduce(float v, int op) {
    __shared__ float sh[8];
    v = op ? warp_max(v) : warp_sum(v);
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    float r = sh[0];
    for (int i = 1; i < (int)(blockDim.x / 32); i++) r = op ? fmaxf(r, sh[i]) : r + sh[i];
    __syncthreads();
    return r;
}

__global__ void ce_rowmax_k(float *rowmax, const bf16 *logits, int v0, int vl, int vocab, int ld) {
    const bf16 *x = logits + (size_t)blockIdx.x * ld;
    int nv = real_cols(v0, vl, vocab);
    float mx = -FLT_MAX;
    for (int j = threadIdx.x; j < nv; j += blockDim.x) mx = fmaxf(mx, ldf(x, j));
    mx = block_reduce(mx, 1);
    if (threadIdx.x == 0) rowmax[blockIdx.x] = mx;
}
__global__ void ce_rowsum_k(float *scratch, const bf16 *logits, const float *rowmax, const int *targets, int v0, int vl,
                            int vocab, int BT, int ld) {
    int i = blockIdx.x, nv = real_cols(v0, vl, vocab);
    const bf16 *x = logits + (size_t)i * ld;
    float mx = rowmax[i], s = 0.0f;
    for (int j = threadIdx.x; j < nv; j += blockDim.x) s += __expf(ldf(x, j) - mx);
    s = block_reduce(s, 0);
    if (threadIdx.x == 0) {
        int r = targets[i] - v0;
        scratch[i] = s;
        scratch[BT + i] = (r >= 0 && r < nv) ? ldf(x, r) : 0.0f;
    }
}
__global__ void ce_loss_k(float *loss, float *rowsum, const float *scratch, const float *rowmax, int BT) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < BT; i += blockDim.x) {
        rowsum[i] = scratch[i];
        acc += (double)(logf(scratch[i]) + rowmax[i] - scratch[BT + i]);
    }
    __shared__ double sh[256];
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *loss = (float)(sh[0] / BT);
}
__global__ void ce_bwd_k(bf16 *dlogits, const bf16 *logits, const float *rowmax, const float *rowsum, const int *targets,
                         int v0, int vl, int vocab, int BT, int ld, float dloss) {
    int i = blockIdx.x, nv = real_cols(v0, vl, vocab), r = targets[i] - v0;
    const bf16 *x = logits + (size_t)i * ld;
    bf16 *d = dlogits + (size_t)i * ld;
    float scale = dloss / (float)BT, inv = 1.0f / rowsum[i], mx = rowmax[i];
    for (int j = threadIdx.x; j < vl; j += blockDim.x) {
        float g = j < nv ? __expf(ldf(x, j) - mx) * inv * scale : 0.0f;
        if (j == r && j < nv) g -= scale;
        d[j] = tobf(g);
    }
}

extern "C" int cuda_ce_rowmax(float *rowmax, const tprt_bf16 *logits, int v0, int vl, int vocab, int BT, int ld) {
    if (BT > 0) ce_rowmax_k<<<BT, 256>>>(rowmax, CBF(logits), v0, vl, vocab, ld);
    return launch_ok();
}
extern "C" int cuda_ce_rowsum(float *scratch, const tprt_bf16 *logits, const float *rowmax, const int *targets, int v0,
                              int vl, int vocab, int BT, int ld) {
    if (BT > 0) ce_rowsum_k<<<BT, 256>>>(scratch, CBF(logits), rowmax, targets, v0, vl, vocab, BT, ld);
    return launch_ok();
}
extern "C" int cuda_ce_loss(float *loss, float *rowsum, const float *scratch, const float *rowmax, int BT) {
    ce_loss_k<<<1, 256>>>(loss, rowsum, scratch, rowmax, BT);
    return launch_ok();
}
extern "C" int cuda_crossentropy_backward(tprt_bf16 *dlogits, const tprt_bf16 *logits, const float *rowmax,
                                          const float *rowsum, const int *targets, int v0, int vl, int vocab, int BT,
                                          int ld, float dloss) {
    if (BT > 0)
        ce_bwd_k<<<BT, 256>>>(BF(dlogits), CBF(logits), rowmax, rowsum, targets, v0, vl, vocab, BT, ld, dloss);
    return launch_ok();
}
