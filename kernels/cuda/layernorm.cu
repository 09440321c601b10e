/* layernorm.cu - layer normalization over channels (eps 1e-5), statistics
 * and arithmetic in fp32, bf16 rounding only at the stores.
 * Vector path (C % 8 == 0, C <= 256 * TPRT_LN_VEC_CHUNKS, every pointer
 * 16-byte aligned): one warp per row holding the row in registers, 128-bit
 * loads and stores; in chunk k, lane l owns channels (k*32 + l)*8 .. +8.
 * The forward takes the mean, then the variance, from the registers; the
 * residual+layernorm forward first adds the residual and writes it.  The
 * backward's warps walk the rows grid-stride, each lane keeping dw/db of
 * its channels in registers; a block sums its warps' in shared memory and
 * adds them with one atomic per channel.  With dsum the backward also adds
 * the column sums of its result dinp into dsum: in the GPT-2 backward dinp is
 * the residual's grad, so those sums are the bias grad of the row-parallel
 * product whose output feeds that residual (each warp keeps its running sums
 * in its row of the shared slab, not in registers).  The grid is sized so every warp
 * gets the same number of rows within the blocks that fit on the GPU at
 * once.  Other shapes take the scalar kernels (one bf16 at a time). */
#include "common.cuh"
#include "tprt_cuda_paths.h"

#define LN_ROWS    TPRT_LN_ROWS_PER_BLOCK
#define LN_THREADS (LN_ROWS * 32)
#define LN_EPS     1e-5f

/* ---- scalar path ---- */

__global__ void layernorm_fwd_scalar_k(bf16 *out, float *mean, float *rstd, const bf16 *inp, const bf16 *w,
                                       const bf16 *b, int BT, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= BT) return;
    const bf16 *x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += ldf(x, c);
    float m = warp_sum(s) / C, v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = ldf(x, c) - m;
        v += d * d;
    }
    float r = rsqrtf(warp_sum(v) / C + LN_EPS);
    bf16 *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) o[c] = tobf((ldf(x, c) - m) * r * ldf(w, c) + ldf(b, c));
    if (lane == 0) mean[row] = m, rstd[row] = r;
}

__global__ void layernorm_bwd_scalar_k(bf16 *dinp, float *dw, float *db, float *dsum, const bf16 *dout, const bf16 *inp,
                                       const bf16 *w, const float *mean, const float *rstd, int BT, int C) {
    extern __shared__ float sh[]; /* dw[C], db[C], dsum[C] of this block */
    float *sdw = sh, *sdb = sh + C, *sds = sh + 2 * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) sdw[c] = sdb[c] = sds[c] = 0.0f;
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
            bf16 v = tobf(ldf(dx, c) + (ldf(w, c) * g - dmean - n * dnorm) * s);
            dx[c] = v;
            if (dsum) atomicAdd(&sds[c], __bfloat162float(v));
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        atomicAdd(&dw[c], sdw[c]);
        atomicAdd(&db[c], sdb[c]);
        if (dsum) atomicAdd(&dsum[c], sds[c]);
    }
}

extern "C" int cuda_layernorm_forward_scalar(tprt_bf16 *out, float *mean, float *rstd, const tprt_bf16 *inp,
                                             const tprt_bf16 *w, const tprt_bf16 *b, int BT, int C) {
    if (BT > 0)
        layernorm_fwd_scalar_k<<<grid_for((size_t)BT, LN_ROWS), LN_THREADS>>>(BF(out), mean, rstd, CBF(inp), CBF(w),
                                                                              CBF(b), BT, C);
    return launch_ok();
}
extern "C" int cuda_layernorm_backward_scalar(tprt_bf16 *dinp, float *dw, float *db, float *dsum, const tprt_bf16 *dout,
                                              const tprt_bf16 *inp, const tprt_bf16 *w, const float *mean,
                                              const float *rstd, int BT, int C) {
    if (BT <= 0) return 0;
    unsigned blocks = grid_for((size_t)BT, LN_ROWS * 8); /* about 8 rows a warp */
    if (blocks > 1024) blocks = 1024;
    layernorm_bwd_scalar_k<<<blocks, LN_THREADS, 3 * (size_t)C * sizeof(float)>>>(BF(dinp), dw, db, dsum, CBF(dout),
                                                                                  CBF(inp), CBF(w), mean, rstd, BT, C);
    return launch_ok();
}

/* ---- vector path ---- */

/* first channel of chunk k of a lane; chunks at or past C hold nothing */
__device__ __forceinline__ int ln_chan(int k, int lane) { return (k * 32 + lane) * 8; }

/* v = a lane's chunks of a row (zeros past C) */
template <int K> __device__ __forceinline__ void ln_load(uint4 (&v)[K], const bf16 *row, int C, int lane) {
#pragma unroll
    for (int k = 0; k < K; k++) v[k] = ln_chan(k, lane) < C ? ld_vec8(row + ln_chan(k, lane)) : make_uint4(0, 0, 0, 0);
}

/* K chunks of 256 channels per row; ADD: the row is a + b (rounded to bf16, written to res) */
template <int K, bool ADD>
__global__ void __launch_bounds__(LN_THREADS)
    ln_fwd_vec_k(bf16 *res, bf16 *out, float *mean, float *rstd, const bf16 *a, const bf16 *b, const bf16 *w,
                 const bf16 *bias, int BT, int C) {
    int row = blockIdx.x * LN_ROWS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= BT) return;
    size_t base = (size_t)row * C;
    uint4 xv[K], wv[K], bv[K];
    ln_load(xv, a + base, C, lane);
    ln_load(wv, w, C, lane);
    ln_load(bv, bias, C, lane);
    float s = 0.0f, v = 0.0f, f[8];
    if (ADD) {
        uint4 yv[K];
        ln_load(yv, b + base, C, lane);
#pragma unroll
        for (int k = 0; k < K; k++) {
            if (ln_chan(k, lane) >= C) continue;
            float g[8];
            unpack8(xv[k], f);
            unpack8(yv[k], g);
#pragma unroll
            for (int i = 0; i < 8; i++) f[i] += g[i];
            xv[k] = pack8(f);
            st_vec8(res + base + ln_chan(k, lane), xv[k]);
        }
    }
#pragma unroll
    for (int k = 0; k < K; k++) {
        if (ln_chan(k, lane) >= C) continue;
        unpack8(xv[k], f);
#pragma unroll
        for (int i = 0; i < 8; i++) s += f[i];
    }
    float m = warp_sum(s) / C;
#pragma unroll
    for (int k = 0; k < K; k++) {
        if (ln_chan(k, lane) >= C) continue;
        unpack8(xv[k], f);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            float d = f[i] - m;
            v += d * d;
        }
    }
    float r = rsqrtf(warp_sum(v) / C + LN_EPS);
#pragma unroll
    for (int k = 0; k < K; k++) {
        int c = ln_chan(k, lane);
        if (c >= C) continue;
        float wf[8], bf[8];
        unpack8(xv[k], f);
        unpack8(wv[k], wf);
        unpack8(bv[k], bf);
#pragma unroll
        for (int i = 0; i < 8; i++) f[i] = (f[i] - m) * r * wf[i] + bf[i];
        st_vec8(out + base + c, pack8(f));
    }
    if (lane == 0) mean[row] = m, rstd[row] = r;
}

/* A lane's eight channels from chunk k (c = ln_chan(k, lane)) in its warp's row of the slab
 * [LN_ROWS][C] floats (C % 8 == 0: 32-byte aligned). */
__device__ __forceinline__ float4 *ln_slab_at(float *slab, int c, int C) {
    return reinterpret_cast<float4 *>(slab + (size_t)(threadIdx.x / 32) * C + c);
}
/* Adds the slab's column sums to dst, one atomic per channel (after every warp wrote its row). */
__device__ __forceinline__ void ln_slab_add(const float *slab, float *dst, int C) {
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float t = 0.0f;
        for (int w = 0; w < LN_ROWS; w++) t += slab[(size_t)w * C + c];
        atomicAdd(dst + c, t);
    }
    __syncthreads(); /* the slab is rewritten next */
}
/* Adds the block's per-lane sums acc (channels as ln_chan) to dst through the slab. */
template <int K>
__device__ __forceinline__ void ln_block_add(float *slab, const float (&acc)[K][8], float *dst, int C) {
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int k = 0; k < K; k++) {
        int c = ln_chan(k, lane);
        if (c >= C) continue;
        float4 *p = ln_slab_at(slab, c, C);
        p[0] = make_float4(acc[k][0], acc[k][1], acc[k][2], acc[k][3]);
        p[1] = make_float4(acc[k][4], acc[k][5], acc[k][6], acc[k][7]);
    }
    ln_slab_add(slab, dst, C);
}

/* up to 3 chunks (C <= 768) two blocks fit an SM without spilling; 4 chunks need 1 block */
template <int K>
__global__ void __launch_bounds__(LN_THREADS, K <= 3 ? 2 : 1)
    ln_bwd_vec_k(bf16 *dinp, float *dw, float *db, float *dsum, const bf16 *dout, const bf16 *inp, const bf16 *w,
                 const float *mean, const float *rstd, int BT, int C) {
    extern __shared__ float4 ln_slab[]; /* [LN_ROWS][C] floats */
    float *slab = reinterpret_cast<float *>(ln_slab);
    int lane = threadIdx.x % 32;
    float adw[K][8], adb[K][8];
    uint4 wv[K];
    ln_load(wv, w, C, lane);
#pragma unroll
    for (int k = 0; k < K; k++) {
#pragma unroll
        for (int i = 0; i < 8; i++) adw[k][i] = adb[k][i] = 0.0f;
        int c = ln_chan(k, lane);
        if (dsum && c < C) { /* this warp's running column sums of dinp */
            float4 *p = ln_slab_at(slab, c, C);
            p[0] = p[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
    for (int row = blockIdx.x * LN_ROWS + threadIdx.x / 32; row < BT; row += gridDim.x * LN_ROWS) {
        size_t base = (size_t)row * C;
        uint4 xv[K], gv[K], dv[K];
        ln_load(xv, inp + base, C, lane);
        ln_load(gv, dout + base, C, lane);
        ln_load(dv, dinp + base, C, lane);
        float m = mean[row], s = rstd[row], dmean = 0.0f, dnorm = 0.0f, x[8], g[8], wf[8];
#pragma unroll
        for (int k = 0; k < K; k++) {
            if (ln_chan(k, lane) >= C) continue;
            unpack8(xv[k], x), unpack8(gv[k], g), unpack8(wv[k], wf);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                float dn = wf[i] * g[i];
                dmean += dn;
                dnorm += dn * (x[i] - m) * s;
            }
        }
        dmean = warp_sum(dmean) / C;
        dnorm = warp_sum(dnorm) / C;
#pragma unroll
        for (int k = 0; k < K; k++) {
            int c = ln_chan(k, lane);
            if (c >= C) continue;
            float d[8];
            unpack8(xv[k], x), unpack8(gv[k], g), unpack8(wv[k], wf), unpack8(dv[k], d);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                float n = (x[i] - m) * s;
                adb[k][i] += g[i];
                adw[k][i] += n * g[i];
                d[i] += (wf[i] * g[i] - dmean - n * dnorm) * s;
            }
            uint4 dnew = pack8(d);
            st_vec8(dinp + base + c, dnew);
            if (dsum) { /* the stored (bf16) values, as a separate bias grad would read them */
                float4 *p = ln_slab_at(slab, c, C), lo = p[0], hi = p[1];
                unpack8(dnew, d);
                p[0] = make_float4(lo.x + d[0], lo.y + d[1], lo.z + d[2], lo.w + d[3]);
                p[1] = make_float4(hi.x + d[4], hi.y + d[5], hi.z + d[6], hi.w + d[7]);
            }
        }
    }
    if (dsum) ln_slab_add(slab, dsum, C);
    ln_block_add<K>(slab, adb, db, C);
    ln_block_add<K>(slab, adw, dw, C);
}

static int ln_vec_fits(int C) { return C > 0 && C % 8 == 0 && C <= 256 * TPRT_LN_VEC_CHUNKS; }
static int ln_chunks(int C) { return (C + 255) / 256; }

/* launches the instance of K = ln_chunks(C) (K counts down from TPRT_LN_VEC_CHUNKS) */
template <int K, bool ADD>
static void ln_fwd_vec(bf16 *res, bf16 *out, float *mean, float *rstd, const bf16 *a, const bf16 *b, const bf16 *w,
                       const bf16 *bias, int BT, int C) {
    if constexpr (K > 1) {
        if (ln_chunks(C) < K) return ln_fwd_vec<K - 1, ADD>(res, out, mean, rstd, a, b, w, bias, BT, C);
    }
    ln_fwd_vec_k<K, ADD><<<grid_for((size_t)BT, LN_ROWS), LN_THREADS>>>(res, out, mean, rstd, a, b, w, bias, BT, C);
}

template <int K>
static void ln_bwd_vec(bf16 *dinp, float *dw, float *db, float *dsum, const bf16 *dout, const bf16 *inp, const bf16 *w,
                       const float *mean, const float *rstd, int BT, int C) {
    if constexpr (K > 1) {
        if (ln_chunks(C) < K) return ln_bwd_vec<K - 1>(dinp, dw, db, dsum, dout, inp, w, mean, rstd, BT, C);
    }
    static int per_sm; /* resident blocks per SM (2..4 wanted), asked once per instance */
    if (!per_sm) {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, ln_bwd_vec_k<K>, LN_THREADS,
                                                          (size_t)LN_ROWS * 256 * K * sizeof(float)) != cudaSuccess) {
            cudaGetLastError(); /* the query failed: launch anyway with one block per SM */
            n = 1;
        }
        per_sm = n < 1 ? 1 : n > 4 ? 4 : n;
    }
    long long warps = (long long)per_sm * sm_count() * LN_ROWS;
    long long per_warp = (BT + warps - 1) / warps; /* rows each warp walks */
    unsigned blocks = (unsigned)((BT + per_warp * LN_ROWS - 1) / (per_warp * LN_ROWS));
    ln_bwd_vec_k<K><<<blocks, LN_THREADS, (size_t)LN_ROWS * C * sizeof(float)>>>(dinp, dw, db, dsum, dout, inp, w, mean,
                                                                                 rstd, BT, C);
}

extern "C" int cuda_layernorm_forward(tprt_bf16 *out, float *mean, float *rstd, const tprt_bf16 *inp,
                                      const tprt_bf16 *w, const tprt_bf16 *b, int BT, int C) {
    if (!ln_vec_fits(C) || !aligned16(out) || !aligned16(inp) || !aligned16(w) || !aligned16(b))
        return cuda_layernorm_forward_scalar(out, mean, rstd, inp, w, b, BT, C);
    if (BT > 0) ln_fwd_vec<TPRT_LN_VEC_CHUNKS, false>(NULL, BF(out), mean, rstd, CBF(inp), NULL, CBF(w), CBF(b), BT, C);
    return launch_ok();
}

extern "C" int cuda_residual_layernorm_forward(tprt_bf16 *res, tprt_bf16 *out, float *mean, float *rstd,
                                               const tprt_bf16 *a, const tprt_bf16 *b, const tprt_bf16 *w,
                                               const tprt_bf16 *bias, int BT, int C) {
    if (!ln_vec_fits(C) || !aligned16(res) || !aligned16(out) || !aligned16(a) || !aligned16(b) || !aligned16(w) ||
        !aligned16(bias)) {
        if (BT <= 0) return launch_ok();
        if (cuda_residual_forward(res, a, b, (size_t)BT * C)) return -1;
        return cuda_layernorm_forward(out, mean, rstd, res, w, bias, BT, C);
    }
    if (BT > 0)
        ln_fwd_vec<TPRT_LN_VEC_CHUNKS, true>(BF(res), BF(out), mean, rstd, CBF(a), CBF(b), CBF(w), CBF(bias), BT, C);
    return launch_ok();
}

extern "C" int cuda_layernorm_backward(tprt_bf16 *dinp, float *dw, float *db, float *dsum, const tprt_bf16 *dout,
                                       const tprt_bf16 *inp, const tprt_bf16 *w, const float *mean, const float *rstd,
                                       int BT, int C) {
    if (!ln_vec_fits(C) || !aligned16(dinp) || !aligned16(dout) || !aligned16(inp) || !aligned16(w))
        return cuda_layernorm_backward_scalar(dinp, dw, db, dsum, dout, inp, w, mean, rstd, BT, C);
    if (BT > 0) ln_bwd_vec<TPRT_LN_VEC_CHUNKS>(BF(dinp), dw, db, dsum, CBF(dout), CBF(inp), CBF(w), mean, rstd, BT, C);
    return launch_ok();
}
