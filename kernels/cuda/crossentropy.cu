/* crossentropy.cu - vocab-parallel softmax cross-entropy over bf16 logits
 * (one block per row), in the steps of crossentropy.c: row max, sum of
 * exponentials and target logit, mean loss; padded vocab columns (global
 * id >= vocab) are masked out of all of them and get a zero gradient.
 * At TP=1 the fused kernel does it all per row in two passes: one read for
 * the max and the sum at once (online: the sum is rescaled when the max
 * grows), one read-and-write that puts the gradient in place of the
 * logits; 128-bit loads and stores where the rows are 16-byte aligned.
 * Where a row fits in a block's shared memory (GPT-2's 50,304 bf16 columns
 * take 98 KiB: two rows an SM on Hopper), the first pass copies it there
 * whole (cp.async, every copy in flight at once) and the second reads it
 * back, so the logits cross DRAM once each way.  The exponentials are
 * 2^(x log2 e - max log2 e), one FMA and one ex2 each; a chunk of eight
 * columns with neither padding nor the target takes a branch-free path. */
#include "common.cuh"
#include <cfloat>
#include <cstdlib>
#include <cstring>

static __device__ int real_cols(int v0, int vl, int vocab) {
    int n = vocab - v0;
    return n < 0 ? 0 : n > vl ? vl : n;
}
/* gradient of column j: scale * (softmax - onehot), scale = dloss/BT, 0 on padding (j >= nv); the row's
 * max as m2 = max log2 e and k = scale / the row's sum of exponentials, so exp(x - max) is one FMA and an ex2 */
static __device__ __forceinline__ float ce_grad(float x, int j, int nv, int r, float m2, float k, float scale) {
    float g = j < nv ? ex2(fmaf(x, TPRT_LOG2E, -m2)) * k : 0.0f;
    return (j == r && j < nv) ? g - scale : g;
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
/* *loss = (sum of the block's acc) / BT, in a fixed order (CE_MEAN_THREADS threads) */
#define CE_MEAN_THREADS 256
static __device__ void store_mean(float *loss, double acc, int BT) {
    __shared__ double sh[CE_MEAN_THREADS];
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int w = CE_MEAN_THREADS / 2; w; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *loss = (float)(sh[0] / BT);
}
__global__ void ce_loss_k(float *loss, float *rowsum, const float *scratch, const float *rowmax, int BT) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < BT; i += blockDim.x) {
        rowsum[i] = scratch[i];
        acc += (double)(logf(scratch[i]) + rowmax[i] - scratch[BT + i]);
    }
    store_mean(loss, acc, BT);
}
__global__ void ce_mean_k(float *loss, const float *losses, int BT) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < BT; i += blockDim.x) acc += (double)losses[i];
    store_mean(loss, acc, BT);
}
__global__ void ce_bwd_k(bf16 *dlogits, const bf16 *logits, const float *rowmax, const float *rowsum,
                         const int *targets, int v0, int vl, int vocab, int BT, int ld, float dloss) {
    int i = blockIdx.x, nv = real_cols(v0, vl, vocab), r = targets[i] - v0;
    const bf16 *x = logits + (size_t)i * ld;
    bf16 *d = dlogits + (size_t)i * ld;
    float scale = dloss / (float)BT, k = scale / rowsum[i], m2 = rowmax[i] * TPRT_LOG2E;
    for (int j = threadIdx.x; j < vl; j += blockDim.x) d[j] = tobf(ce_grad(ldf(x, j), j, nv, r, m2, k, scale));
}

/* ---- fused, one rank holding the whole vocab ---- */

#define CE_FUSED_THREADS 512 /* three blocks (rows) per SM at once, two with the stash */
/* (m, s) <- the pair for the union of the elements behind (m, s) and (om, os), s a sum of
 * exp(x - m); -FLT_MAX with s = 0 stands for no element (exp(-FLT_MAX - m) is 0) */
static __device__ __forceinline__ void maxsum_merge(float &m, float &s, float om, float os) {
    float nm = fmaxf(m, om);
    s = s * __expf(m - nm) + os * __expf(om - nm);
    m = nm;
}
/* (m, s) with 8 more finite elements; exp(f - nm) as 2^(f log2 e - nm log2 e), one FMA each */
static __device__ __forceinline__ void maxsum_add8(float &m, float &s, const float f[8]) {
    float vm = f[0];
#pragma unroll
    for (int i = 1; i < 8; i++) vm = fmaxf(vm, f[i]);
    float nm = fmaxf(m, vm), t = 0.0f, nm2 = nm * TPRT_LOG2E;
#pragma unroll
    for (int i = 0; i < 8; i++) t += ex2(fmaf(f[i], TPRT_LOG2E, -nm2));
    s = s * __expf(m - nm) + t;
    m = nm;
}
/* every thread ends with the block's (max, sum); one call per kernel (its shared pairs stay) */
static __device__ void block_maxsum(float &m, float &s) {
    __shared__ float shm[32], shs[32];
    for (int o = 16; o; o >>= 1)
        maxsum_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) shm[threadIdx.x / 32] = m, shs[threadIdx.x / 32] = s;
    __syncthreads();
    m = lane < warps ? shm[lane] : -FLT_MAX;
    s = lane < warps ? shs[lane] : 0.0f;
    for (int o = 16; o; o >>= 1)
        maxsum_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
}

/* VEC: rows 16-byte aligned (ld % 8 == 0, aligned base): 8 columns per load and store, CE_UNROLL
 * loads in flight per thread, the columns past the last multiple of 8 one at a time. */
#define CE_UNROLL 4
#define CE_STEP   (8 * CE_FUSED_THREADS) /* columns one round of 128-bit loads covers */
static __device__ __forceinline__ void load_round(uint4 (&u)[CE_UNROLL], const bf16 *x, int j0, int end) {
#pragma unroll
    for (int q = 0; q < CE_UNROLL; q++)
        if (j0 + q * CE_STEP < end) u[q] = ld_vec8(x + j0 + q * CE_STEP);
}
/* 16 bytes global -> shared without a register (cp.async, sm_80 on), and the wait for this thread's copies */
static __device__ __forceinline__ void stash_copy16(uint4 *dst, const bf16 *src) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
#else
    *dst = ld_vec8(src);
#endif
}
static __device__ __forceinline__ void stash_wait(void) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

/* STASH (with VEC): the row's first vl8 columns kept in dynamic shared memory between the passes */
template <bool VEC, bool STASH>
__global__ void __launch_bounds__(CE_FUSED_THREADS, STASH ? 2 : 3)
    ce_fused_k(float *losses, bf16 *logits, const int *targets, int vl, int vocab, int BT, int ld, float dloss) {
    extern __shared__ uint4 ce_row[];
    int i = blockIdx.x, nv = real_cols(0, vl, vocab), r = targets[i], t = threadIdx.x;
    bf16 *x = logits + (size_t)i * ld;
    /* the target logit is read before block_maxsum's barrier, so before any thread writes */
    float target = (t == 0 && r >= 0 && r < nv) ? ldf(x, r) : 0.0f, m = -FLT_MAX, s = 0.0f, f[8];
    int nv8 = VEC ? nv / 8 * 8 : 0, vl8 = VEC ? vl / 8 * 8 : 0;
    if (STASH) { /* the whole row in flight at once, straight into shared memory; each thread reads back its own */
        for (int j = 8 * t; j < vl8; j += CE_STEP) stash_copy16(&ce_row[j / 8], x + j);
        stash_wait();
        for (int j = 8 * t; j < nv8; j += CE_STEP) unpack8(ce_row[j / 8], f), maxsum_add8(m, s, f);
    } else {
        for (int j0 = 8 * t; j0 < nv8; j0 += CE_UNROLL * CE_STEP) {
            uint4 u[CE_UNROLL];
            load_round(u, x, j0, nv8);
#pragma unroll
            for (int q = 0; q < CE_UNROLL; q++)
                if (j0 + q * CE_STEP < nv8) unpack8(u[q], f), maxsum_add8(m, s, f);
        }
    }
    for (int j = nv8 + t; j < nv; j += CE_FUSED_THREADS) maxsum_merge(m, s, ldf(x, j), 1.0f);
    block_maxsum(m, s);
    float scale = dloss / (float)BT, m2 = m * TPRT_LOG2E, k = scale / s;
    if (t == 0) losses[i] = logf(s) + m - target;
    for (int j0 = 8 * t; j0 < vl8; j0 += CE_UNROLL * CE_STEP) {
        uint4 u[CE_UNROLL];
        if (STASH) {
#pragma unroll
            for (int q = 0; q < CE_UNROLL; q++)
                if (j0 + q * CE_STEP < vl8) u[q] = ce_row[(j0 + q * CE_STEP) / 8];
        } else {
            load_round(u, x, j0, vl8);
        }
#pragma unroll
        for (int q = 0; q < CE_UNROLL; q++) {
            int j = j0 + q * CE_STEP;
            if (j >= vl8) continue;
            unpack8(u[q], f);
            if (j + 8 <= nv && (unsigned)(r - j) >= 8u) { /* no padding and not the target: softmax * scale */
#pragma unroll
                for (int c = 0; c < 8; c++) f[c] = ex2(fmaf(f[c], TPRT_LOG2E, -m2)) * k;
            } else {
#pragma unroll
                for (int c = 0; c < 8; c++) f[c] = ce_grad(f[c], j + c, nv, r, m2, k, scale);
            }
            st_vec8(x + j, pack8(f));
        }
    }
    for (int j = vl8 + t; j < vl; j += CE_FUSED_THREADS) x[j] = tobf(ce_grad(ldf(x, j), j, nv, r, m2, k, scale));
}

/* The stash's bytes for rows of vl columns when a block may have them, else 0 (the limit asked once). */
static size_t ce_stash_bytes(int vl) {
    static int optin = -1; /* the most dynamic shared memory the stash kernel may opt in to */
    if (optin < 0) {
        int dev = 0, v = 0;
        cudaFuncAttributes fa;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
            cudaFuncGetAttributes(&fa, ce_fused_k<true, true>) != cudaSuccess ||
            (v -= (int)fa.sharedSizeBytes) <= 0 || /* its static shared memory counts against the limit */
            cudaFuncSetAttribute(ce_fused_k<true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, v) !=
                cudaSuccess) {
            cudaGetLastError(); /* no stash: the two-read kernel runs */
            v = 0;
        }
        optin = v;
    }
    const char *e = getenv("TPRT_CE_STASH"); /* 0: the two-read kernel, for comparison */
    size_t bytes = (size_t)(vl / 8) * sizeof(uint4);
    return (e && !strcmp(e, "0")) || bytes > (size_t)optin ? 0 : bytes;
}
extern "C" int cuda_crossentropy_stash_ready(int vl) { return vl >= 8 && ce_stash_bytes(vl) > 0; }

extern "C" int cuda_crossentropy_fused(float *losses, tprt_bf16 *logits, const int *targets, int vl, int vocab, int BT,
                                       int ld, float dloss) {
    if (BT <= 0) return launch_ok();
    size_t stash = ld % 8 == 0 && aligned16(logits) ? ce_stash_bytes(vl) : 0;
    if (stash)
        ce_fused_k<true, true><<<BT, CE_FUSED_THREADS, stash>>>(losses, BF(logits), targets, vl, vocab, BT, ld, dloss);
    else if (ld % 8 == 0 && aligned16(logits))
        ce_fused_k<true, false><<<BT, CE_FUSED_THREADS>>>(losses, BF(logits), targets, vl, vocab, BT, ld, dloss);
    else
        ce_fused_k<false, false><<<BT, CE_FUSED_THREADS>>>(losses, BF(logits), targets, vl, vocab, BT, ld, dloss);
    return launch_ok();
}
extern "C" int cuda_ce_mean(float *loss, const float *losses, int BT) {
    ce_mean_k<<<1, CE_MEAN_THREADS>>>(loss, losses, BT);
    return launch_ok();
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
    ce_loss_k<<<1, CE_MEAN_THREADS>>>(loss, rowsum, scratch, rowmax, BT);
    return launch_ok();
}
extern "C" int cuda_crossentropy_backward(tprt_bf16 *dlogits, const tprt_bf16 *logits, const float *rowmax,
                                          const float *rowsum, const int *targets, int v0, int vl, int vocab, int BT,
                                          int ld, float dloss) {
    if (BT > 0) ce_bwd_k<<<BT, 256>>>(BF(dlogits), CBF(logits), rowmax, rowsum, targets, v0, vl, vocab, BT, ld, dloss);
    return launch_ok();
}
