/* attention.cu - causal multi-head self-attention: q, k, v are permuted to
 * (B, NH, T, hs), scores and products go through cuBLAS strided batched
 * GEMMs (bf16 in, fp32 accumulation), the causal softmax is a kernel (one
 * warp per row).  att keeps the probabilities (bf16) for the backward.
 * scratch: q, k, v | y or dy | dq, dk, dv (bf16, B*T*Cl each),
 *          scores or datt (fp32, B*NH*T*T), dscores (bf16, B*NH*T*T).
 * The backend's default is attention_fused.cu (no T x T buffers); this path
 * runs with TPRT_ATTENTION=gemm, for comparison. */
#include "common.cuh"

extern "C" int tprt_cuda_gemm_batched(bool ta, bool tb, int m, int n, int k, float alpha, const void *A, int lda,
                                      long long sa, const void *B, int ldb, long long sb, float beta, void *C,
                                      int c_fp32, int ldc, long long sc, int batch);

static size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

extern "C" size_t cuda_attention_scratch_bytes(int B, int T, int Cl, int NH) {
    size_t btc = align256((size_t)B * T * Cl * sizeof(bf16)), tt = (size_t)B * NH * T * T;
    return 7 * btc + align256(tt * sizeof(float)) + align256(tt * sizeof(bf16));
}

typedef struct {
    bf16 *q, *k, *v, *y, *dq, *dk, *dv, *dpre;
    float *pre;
} scratch_t;
static scratch_t carve(void *base, int B, int T, int Cl, int NH) {
    size_t btc = align256((size_t)B * T * Cl * sizeof(bf16)), tt = (size_t)B * NH * T * T;
    char *p = (char *)base;
    scratch_t s;
    bf16 **parts[7] = {&s.q, &s.k, &s.v, &s.y, &s.dq, &s.dk, &s.dv};
    for (int i = 0; i < 7; i++) *parts[i] = (bf16 *)(p + i * btc);
    s.pre = (float *)(p + 7 * btc);
    s.dpre = (bf16 *)(p + 7 * btc + align256(tt * sizeof(float)));
    return s;
}

/* qkv (B, T, 3, NH, hs) -> q, k, v (B, NH, T, hs) */
__global__ void split_heads_k(bf16 *q, bf16 *k, bf16 *v, const bf16 *qkv, int B, int T, int NH, int hs) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x, n = (size_t)B * NH * T * hs;
    if (i >= n) return;
    int e = (int)(i % hs), t = (int)((i / hs) % T), h = (int)((i / ((size_t)hs * T)) % NH);
    int b = (int)(i / ((size_t)hs * T * NH)), Cl = NH * hs;
    size_t src = ((size_t)b * T + t) * 3 * Cl + (size_t)h * hs + e;
    q[i] = qkv[src];
    k[i] = qkv[src + Cl];
    v[i] = qkv[src + 2 * Cl];
}
/* x (B, T, NH*hs) <-> y (B, NH, T, hs); to_heads picks the direction */
__global__ void heads_k(bf16 *heads, bf16 *flat, int B, int T, int NH, int hs, int to_heads) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x, n = (size_t)B * NH * T * hs;
    if (i >= n) return;
    int e = (int)(i % hs), t = (int)((i / hs) % T), h = (int)((i / ((size_t)hs * T)) % NH);
    int b = (int)(i / ((size_t)hs * T * NH));
    size_t f = ((size_t)b * T + t) * NH * hs + (size_t)h * hs + e;
    if (to_heads)
        heads[i] = flat[f];
    else
        flat[f] = heads[i];
}
/* dqkv (B, T, 3, NH, hs) += dq, dk, dv (B, NH, T, hs) */
__global__ void merge_heads_k(bf16 *dqkv, const bf16 *dq, const bf16 *dk, const bf16 *dv, int B, int T, int NH,
                              int hs) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x, n = (size_t)B * NH * T * hs;
    if (i >= n) return;
    int e = (int)(i % hs), t = (int)((i / hs) % T), h = (int)((i / ((size_t)hs * T)) % NH);
    int b = (int)(i / ((size_t)hs * T * NH)), Cl = NH * hs;
    size_t dst = ((size_t)b * T + t) * 3 * Cl + (size_t)h * hs + e;
    dqkv[dst] = tobf(ldf(dqkv, dst) + ldf(dq, i));
    dqkv[dst + Cl] = tobf(ldf(dqkv, dst + Cl) + ldf(dk, i));
    dqkv[dst + 2 * Cl] = tobf(ldf(dqkv, dst + 2 * Cl) + ldf(dv, i));
}
/* rows of (B*NH*T, T); row r is query t = r % T: keeps u <= t, zeros the rest */
__global__ void softmax_causal_k(bf16 *att, const float *pre, int rows, int T) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= rows) return;
    int t = r % T;
    const float *x = pre + (size_t)r * T;
    bf16 *a = att + (size_t)r * T;
    float mx = -INFINITY, s = 0.0f;
    for (int u = lane; u <= t; u += 32) mx = fmaxf(mx, x[u]);
    mx = warp_max(mx);
    for (int u = lane; u <= t; u += 32) s += __expf(x[u] - mx);
    float inv = 1.0f / warp_sum(s);
    for (int u = lane; u < T; u += 32) a[u] = tobf(u <= t ? __expf(x[u] - mx) * inv : 0.0f);
}
/* dpre = att * (datt - sum(att * datt)) on u <= t, 0 elsewhere */
__global__ void softmax_causal_bwd_k(bf16 *dpre, const bf16 *att, const float *datt, int rows, int T) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= rows) return;
    int t = r % T;
    const bf16 *a = att + (size_t)r * T;
    const float *g = datt + (size_t)r * T;
    float dot = 0.0f;
    for (int u = lane; u <= t; u += 32) dot += ldf(a, u) * g[u];
    dot = warp_sum(dot);
    bf16 *d = dpre + (size_t)r * T;
    for (int u = lane; u < T; u += 32) d[u] = tobf(u <= t ? ldf(a, u) * (g[u] - dot) : 0.0f);
}

extern "C" int cuda_attention_forward(tprt_bf16 *out, tprt_bf16 *att, const tprt_bf16 *qkv, void *scratch, int B, int T,
                                      int Cl, int NH) {
    int hs = Cl / NH, BH = B * NH, rows = BH * T;
    size_t n = (size_t)B * T * Cl;
    long long sq = (long long)T * hs, st = (long long)T * T;
    float scale = 1.0f / sqrtf((float)hs);
    scratch_t s = carve(scratch, B, T, Cl, NH);
    if (!n) return 0;
    split_heads_k<<<grid_for(n, 256), 256>>>(s.q, s.k, s.v, CBF(qkv), B, T, NH, hs);
    /* pre(t, u) = scale q_t . k_u: column-major pre^T (u x t) = K (op T of k) . Q^T */
    if (tprt_cuda_gemm_batched(true, false, T, T, hs, scale, s.k, hs, sq, s.q, hs, sq, 0.0f, s.pre, 1, T, st, BH))
        return -1;
    softmax_causal_k<<<grid_for((size_t)rows, 8), 256>>>(BF(att), s.pre, rows, T);
    /* y = att @ v: y^T (hs x t) = V^T . att^T */
    if (tprt_cuda_gemm_batched(false, false, hs, T, T, 1.0f, s.v, hs, sq, att, T, st, 0.0f, s.y, 0, hs, sq, BH))
        return -1;
    heads_k<<<grid_for(n, 256), 256>>>(s.y, BF(out), B, T, NH, hs, 0);
    return launch_ok();
}

extern "C" int cuda_attention_backward(tprt_bf16 *dqkv, const tprt_bf16 *dout, const tprt_bf16 *qkv,
                                       const tprt_bf16 *att, void *scratch, int B, int T, int Cl, int NH) {
    int hs = Cl / NH, BH = B * NH, rows = BH * T;
    size_t n = (size_t)B * T * Cl;
    long long sq = (long long)T * hs, st = (long long)T * T;
    float scale = 1.0f / sqrtf((float)hs);
    scratch_t s = carve(scratch, B, T, Cl, NH);
    if (!n) return 0;
    split_heads_k<<<grid_for(n, 256), 256>>>(s.q, s.k, s.v, CBF(qkv), B, T, NH, hs);
    heads_k<<<grid_for(n, 256), 256>>>(s.y, (bf16 *)dout, B, T, NH, hs, 1); /* s.y holds dy (B, NH, T, hs) */
    /* datt(t, u) = dy_t . v_u (fp32, in the scores buffer) */
    if (tprt_cuda_gemm_batched(true, false, T, T, hs, 1.0f, s.v, hs, sq, s.y, hs, sq, 0.0f, s.pre, 1, T, st, BH))
        return -1;
    /* dv = att^T @ dy: dv^T (hs x u) = dy^T . att */
    if (tprt_cuda_gemm_batched(false, true, hs, T, T, 1.0f, s.y, hs, sq, att, T, st, 0.0f, s.dv, 0, hs, sq, BH))
        return -1;
    softmax_causal_bwd_k<<<grid_for((size_t)rows, 8), 256>>>(s.dpre, CBF(att), s.pre, rows, T);
    /* dq = scale dpre @ k: dq^T = K^T . dpre^T */
    if (tprt_cuda_gemm_batched(false, false, hs, T, T, scale, s.k, hs, sq, s.dpre, T, st, 0.0f, s.dq, 0, hs, sq, BH))
        return -1;
    /* dk = scale dpre^T @ q: dk^T = Q^T . dpre */
    if (tprt_cuda_gemm_batched(false, true, hs, T, T, scale, s.q, hs, sq, s.dpre, T, st, 0.0f, s.dk, 0, hs, sq, BH))
        return -1;
    merge_heads_k<<<grid_for(n, 256), 256>>>(BF(dqkv), s.dq, s.dk, s.dv, B, T, NH, hs);
    return launch_ok();
}
