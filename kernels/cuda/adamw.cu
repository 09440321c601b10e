/* adamw.cu - the optimizer on the device: squared grad norms (block
 * partials added atomically) and the AdamW update of an fp32 master with
 * global-norm clipping, written back to the bf16 working copy.  Same
 * arithmetic as adamw.c, in fp32, every operation rounded on its own (no
 * fused multiply-add), so the per-tensor and multi-tensor kernels agree to
 * the bit and both match the CPU's order.
 * The same table zeroes the grads before a backward (cuda_zero_multi).
 * Multi-tensor: one launch per TPRT_ADAMW_SLOTS_PER_LAUNCH tensors; the
 * table (pointers, sizes, the first block of each tensor) travels in the
 * kernel parameters and a block finds its tensor by binary search of the
 * block starts.  A tensor takes float4 loads when n % 4 == 0 and its
 * arrays are aligned, else one float at a time. */
#include "common.cuh"
#include "tprt_cuda_paths.h"

#define ADAMW_THREADS 256
#define ADAMW_CHUNK   (4 * ADAMW_THREADS)  /* elements of one update block */
#define SUMSQ_UNROLL  4                    /* float4 loads in flight per thread */
#define SUMSQ_CHUNK   65536                /* elements of one sumsq block (one atomic each) */
#define ZERO_CHUNK    (16 * ADAMW_THREADS) /* elements of one zeroing block: four float4 stores a thread */

/* acc += the block's sum of s */
static __device__ void block_sum_add(float *acc, float s) {
    __shared__ float sh[ADAMW_THREADS / 32];
    s = warp_sum(s);
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < ADAMW_THREADS / 32; i++) s += sh[i];
        atomicAdd(acc, s);
    }
}

__global__ void __launch_bounds__(ADAMW_THREADS) sumsq_k(float *acc, const float *g, size_t n) {
    float s = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += g[i] * g[i];
    block_sum_add(acc, s);
}

/* the clip scale from the squared norms acc[0] + acc[1] */
static __device__ __forceinline__ float clip_scale(const float *acc, float clip) {
    float norm = __fsqrt_rn(__fadd_rn(acc[0], acc[1]));
    return (clip > 0.0f && norm > clip) ? __fdiv_rn(clip, __fadd_rn(norm, 1e-6f)) : 1.0f;
}
struct adamw_hyper {
    float lr, b1, b2, eps, bc1, bc2;
};
/* one element: m, v and the master p updated in place, the new master returned */
static __device__ __forceinline__ float adamw_elem(float &p, float g, float &m, float &v, float scale, float decay,
                                                   const adamw_hyper &h) {
    float gk = __fmul_rn(g, scale);
    m = __fadd_rn(__fmul_rn(h.b1, m), __fmul_rn(__fsub_rn(1.0f, h.b1), gk));
    v = __fadd_rn(__fmul_rn(h.b2, v), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, h.b2), gk), gk));
    float x = __fsub_rn(p, __fmul_rn(decay, p));
    float step = __fdiv_rn(__fmul_rn(h.lr, __fdiv_rn(m, h.bc1)), __fadd_rn(__fsqrt_rn(__fdiv_rn(v, h.bc2)), h.eps));
    p = __fsub_rn(x, step);
    return p;
}

__global__ void __launch_bounds__(ADAMW_THREADS)
    adamw_k(float *p, bf16 *out, const float *g, float *mo, float *vo, size_t n, const float *acc, float clip,
            float decay, adamw_hyper h) {
    size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (k >= n) return;
    out[k] = tobf(adamw_elem(p[k], g[k], mo[k], vo[k], clip_scale(acc, clip), decay, h));
}

extern "C" int cuda_sumsq(float *acc, const float *g, size_t n) {
    unsigned blocks = grid_for(n, ADAMW_THREADS * 8);
    if (blocks > 1024) blocks = 1024;
    if (n) sumsq_k<<<blocks, ADAMW_THREADS>>>(acc, g, n);
    return launch_ok();
}
extern "C" int cuda_adamw_update(float *master, tprt_bf16 *working, const float *g, float *m, float *v, size_t n,
                                 const float *acc, float clip, float lr, float beta1, float beta2, float eps,
                                 float decay, float bc1, float bc2) {
    adamw_hyper h = {lr, beta1, beta2, eps, bc1, bc2};
    if (n) adamw_k<<<grid_for(n, ADAMW_THREADS), ADAMW_THREADS>>>(master, BF(working), g, m, v, n, acc, clip, decay, h);
    return launch_ok();
}

/* ---- multi-tensor ---- */

struct adamw_job {
    float *p, *m, *v;
    bf16 *out;
    const float *g;
    size_t n;
    float decay; /* lr * weight_decay, or 0 */
    int acc;     /* sumsq: index into acc */
    int vec;     /* float4 path */
};
struct adamw_batch {
    adamw_job job[TPRT_ADAMW_SLOTS_PER_LAUNCH];
    unsigned start[TPRT_ADAMW_SLOTS_PER_LAUNCH + 1]; /* first block of each job; start[n] = the grid */
    int n;
};
static_assert(sizeof(adamw_batch) + 64 < 4096, "the AdamW table must fit the kernel parameters");

/* the job of block `blk`: the last one starting at or before it (so never an empty one) */
static __device__ __forceinline__ int batch_job(const adamw_batch &b, unsigned blk) {
    int lo = 0, hi = b.n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (b.start[mid] <= blk)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* a block sums the squares of its chunk [lo, hi) of its tensor */
__global__ void __launch_bounds__(ADAMW_THREADS) sumsq_multi_k(float *acc, const adamw_batch b) {
    int s = batch_job(b, blockIdx.x);
    const float *g = b.job[s].g;
    size_t lo = (size_t)(blockIdx.x - b.start[s]) * SUMSQ_CHUNK, hi = lo + SUMSQ_CHUNK;
    if (hi > b.job[s].n) hi = b.job[s].n;
    float sum = 0.0f;
    if (b.job[s].vec) { /* lo and hi are multiples of 4 */
        const float4 *g4 = reinterpret_cast<const float4 *>(g);
        for (size_t i = lo / 4 + threadIdx.x; i < hi / 4; i += SUMSQ_UNROLL * ADAMW_THREADS) {
            float4 q[SUMSQ_UNROLL];
#pragma unroll
            for (int u = 0; u < SUMSQ_UNROLL; u++)
                q[u] = i + u * ADAMW_THREADS < hi / 4 ? g4[i + u * ADAMW_THREADS] : make_float4(0, 0, 0, 0);
#pragma unroll
            for (int u = 0; u < SUMSQ_UNROLL; u++)
                sum += q[u].x * q[u].x + q[u].y * q[u].y + q[u].z * q[u].z + q[u].w * q[u].w;
        }
    } else {
#pragma unroll 4
        for (size_t i = lo + threadIdx.x; i < hi; i += ADAMW_THREADS) sum += g[i] * g[i];
    }
    block_sum_add(acc + b.job[s].acc, sum);
}

__global__ void __launch_bounds__(ADAMW_THREADS)
    adamw_multi_k(const adamw_batch b, const float *acc, float clip, adamw_hyper h) {
    int s = batch_job(b, blockIdx.x);
    const adamw_job &j = b.job[s];
    size_t base = (size_t)(blockIdx.x - b.start[s]) * ADAMW_CHUNK;
    float scale = clip_scale(acc, clip), decay = j.decay;
    if (j.vec) { /* n % 4 == 0: a quad lies wholly inside or outside */
        size_t k = base + 4 * (size_t)threadIdx.x;
        if (k >= j.n) return;
        float4 p = *reinterpret_cast<float4 *>(j.p + k), g = *reinterpret_cast<const float4 *>(j.g + k);
        float4 m = *reinterpret_cast<float4 *>(j.m + k), v = *reinterpret_cast<float4 *>(j.v + k);
        float o[4] = {adamw_elem(p.x, g.x, m.x, v.x, scale, decay, h), adamw_elem(p.y, g.y, m.y, v.y, scale, decay, h),
                      adamw_elem(p.z, g.z, m.z, v.z, scale, decay, h), adamw_elem(p.w, g.w, m.w, v.w, scale, decay, h)};
        *reinterpret_cast<float4 *>(j.p + k) = p;
        *reinterpret_cast<float4 *>(j.m + k) = m;
        *reinterpret_cast<float4 *>(j.v + k) = v;
        *reinterpret_cast<uint2 *>(j.out + k) = make_uint2(pack2(o[0], o[1]), pack2(o[2], o[3]));
        return;
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        size_t k = base + threadIdx.x + (size_t)i * ADAMW_THREADS;
        if (k < j.n) j.out[k] = tobf(adamw_elem(j.p[k], j.g[k], j.m[k], j.v[k], scale, decay, h));
    }
}

/* Fills b with the non-empty slots from *next on (at most a table's worth, a block for each
 * `chunk` elements) and advances *next; returns the grid, 0 when no slot is left, -1 when a
 * tensor needs more blocks than a grid holds. */
static long long fill_batch(adamw_batch *b, const tprt_adamw_slot *slots, int n_slots, int *next, size_t chunk,
                            float lr_decay) {
    long long grid = 0;
    memset(b, 0, sizeof *b);
    for (; *next < n_slots && b->n < TPRT_ADAMW_SLOTS_PER_LAUNCH; ++*next) {
        const tprt_adamw_slot *s = &slots[*next];
        if (!s->n) continue;
        size_t nb = (s->n + chunk - 1) / chunk;
        if (nb > 0x7fffffffu) return -1;
        if (grid + nb > 0x7fffffffLL) break; /* the next launch takes it */
        adamw_job *j = &b->job[b->n];
        j->p = s->master, j->m = s->m, j->v = s->v, j->out = BF(s->working), j->g = s->grad, j->n = s->n;
        j->decay = s->decay ? lr_decay : 0.0f;
        j->acc = s->replicated ? 1 : 0;
        j->vec = s->n % 4 == 0 && aligned16(s->master) && aligned16(s->grad) && aligned16(s->m) && aligned16(s->v) &&
                 ((uintptr_t)s->working & 7u) == 0;
        b->start[b->n++] = (unsigned)grid;
        grid += nb;
    }
    b->start[b->n] = (unsigned)grid;
    return grid;
}
extern "C" int cuda_sumsq_multi(float *acc, const tprt_adamw_slot *slots, int n_slots) {
    adamw_batch b;
    for (int next = 0; next < n_slots;) {
        long long grid = fill_batch(&b, slots, n_slots, &next, SUMSQ_CHUNK, 0.0f);
        if (grid < 0) return -1;
        if (grid) sumsq_multi_k<<<(unsigned)grid, ADAMW_THREADS>>>(acc, b);
        if (launch_ok()) return -1;
    }
    return 0;
}
/* a block zeroes its chunk of its slot's grad (the table's g, which only this kernel writes) */
__global__ void __launch_bounds__(ADAMW_THREADS) zero_multi_k(const adamw_batch b) {
    int s = batch_job(b, blockIdx.x);
    float *g = const_cast<float *>(b.job[s].g);
    size_t lo = (size_t)(blockIdx.x - b.start[s]) * ZERO_CHUNK, hi = lo + ZERO_CHUNK;
    if (hi > b.job[s].n) hi = b.job[s].n;
    if (b.job[s].vec) { /* lo and hi are multiples of 4 */
        float4 *g4 = reinterpret_cast<float4 *>(g);
        for (size_t i = lo / 4 + threadIdx.x; i < hi / 4; i += ADAMW_THREADS) g4[i] = make_float4(0, 0, 0, 0);
    } else {
        for (size_t i = lo + threadIdx.x; i < hi; i += ADAMW_THREADS) g[i] = 0.0f;
    }
}
extern "C" int cuda_zero_multi(const tprt_adamw_slot *slots, int n_slots) {
    adamw_batch b;
    for (int next = 0; next < n_slots;) {
        long long grid = fill_batch(&b, slots, n_slots, &next, ZERO_CHUNK, 0.0f);
        if (grid < 0) return -1;
        if (grid) zero_multi_k<<<(unsigned)grid, ADAMW_THREADS>>>(b);
        if (launch_ok()) return -1;
    }
    return 0;
}
extern "C" int cuda_adamw_multi(const tprt_adamw_slot *slots, int n_slots, const float *acc, float clip, float lr,
                                float beta1, float beta2, float eps, float weight_decay, float bc1, float bc2) {
    adamw_batch b;
    adamw_hyper h = {lr, beta1, beta2, eps, bc1, bc2};
    for (int next = 0; next < n_slots;) {
        long long grid = fill_batch(&b, slots, n_slots, &next, ADAMW_CHUNK, lr * weight_decay);
        if (grid < 0) return -1;
        if (grid) adamw_multi_k<<<(unsigned)grid, ADAMW_THREADS>>>(b, acc, clip, h);
        if (launch_ok()) return -1;
    }
    return 0;
}
