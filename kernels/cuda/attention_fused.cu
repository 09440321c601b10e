/* attention_fused.cu - memory-efficient (flash-style) causal self-attention
 * for tprt's CUDA backend.  Never stores the T x T matrix: the forward walks
 * key tiles with an online softmax and keeps only the per-row logsumexp of
 * the scaled scores (fp32, (B, NH, T)); the backward recomputes each tile's
 * probabilities from q, k, out and that logsumexp.  One backward block per
 * key tile (64 keys; 128, 8 warps, with TPRT_ATTENTION_BWD=k128: the kernel
 * of attention_fused_bwd128.cu) walks its query tiles: dk, dv in registers,
 * dq as fp32 partial sums added atomically into the scratch, which a last
 * pass scales into dqkv.  At head size 64 on sm_90 both directions run
 * attention_wgmma.cu's kernels (on warpgroup products) instead, unless
 * TPRT_ATTENTION_FWD=mma or TPRT_ATTENTION_BWD=k64 / k128 asks for these.
 * dqkv is written (=), or added into (+=) when the caller asks.  Given the
 * bias grad of the product that made qkv, the backward adds dqkv's column
 * sums into it as it writes them: each backward block its k and v columns
 * (warp shuffles, then one red.v2 a column pair a warp), the dq pass the q
 * columns (one atomic a column a block).
 * Tiles stream into shared memory with cp.async, double buffered (the next
 * key or query tile loads while the current one is computed).
 * bf16 operands on the tensor cores (mma.sync m16n8k16, operands through
 * ldmatrix), fp32 accumulation and softmax; P and dS are rounded to bf16
 * only as mma operands.  Tiles of 64 queries x 64 keys, 4 warps of 16 rows
 * each; the forward gives each warp two such 16-row tiles (blocks of 128
 * queries) up to head size 64 (env TPRT_ATTENTION_FWD_ROWS=64 keeps one);
 * key tiles above the diagonal are never visited, the diagonal (and the
 * tile holding T) is masked.  Head sizes: multiples of 16 up to 128.
 * q, k, v are read in place from qkv (B, T, 3*Cl) = [q|k|v], head h at
 * columns h*hs; dqkv is written or accumulated in that layout, out written
 * as (B, T, Cl). */
#include "attention_fused.cuh"
#include <stdlib.h>
#include <string.h>

namespace {

/* Forward: one block per (b*NH + h, block of 64*MT queries), grid y runs the heaviest (last) blocks first
 * (the backward's grouped order, block_work, measured slower here);
 * each warp takes MT m-tiles of 16 rows, so that each K and V fragment feeds MT products.  Shared: two
 * stages of [K tile, V tile]; Q passes through the second stage before the key tiles start. */
template <int HS, int MT>
__global__ void __launch_bounds__(FA_THREADS)
    fa_fwd_k(bf16 *out, float *lse, const bf16 *qkv, int T, int NH, float sl2) {
    constexpr int LD = HS + 8, KS = HS / 16, NO = HS / 8, TL = FA_TILE * LD, BM = FA_TILE * MT, WR = 16 * MT;
    extern __shared__ __align__(16) unsigned char fa_smem[];
    bf16 *sm = reinterpret_cast<bf16 *>(fa_smem); /* stage j: K at sm + 2j*TL, V at sm + (2j+1)*TL */
    const int qb = gridDim.y - 1 - blockIdx.y, bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int Cl = NH * HS, C3 = 3 * Cl, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t4 = lane & 3;
    const int w0 = qb * BM + warp * WR; /* this warp's first query row */
    const int nk = min((T + FA_TILE - 1) / FA_TILE, (qb * BM + BM - 1) / FA_TILE + 1);
    const bf16 *base = qkv + (size_t)b * T * C3 + h * HS;
#pragma unroll
    for (int j = 0; j < MT; j++) load_tile<HS>(sm + (2 + j) * TL, base, C3, qb * BM + j * FA_TILE, T);
    cp_commit();
    load_tile<HS>(sm, base + Cl, C3, 0, T);
    load_tile<HS>(sm + TL, base + 2 * Cl, C3, 0, T);
    cp_commit();
    cp_wait<1>();
    __syncthreads();
    uint32_t qf[MT][KS][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        const int r = warp * WR + mt * 16;
#pragma unroll
        for (int ks = 0; ks < KS; ks++) frag_a(qf[mt][ks], sm + (2 + r / FA_TILE) * TL, LD, r % FA_TILE, ks * 16, lane);
    }
    __syncthreads(); /* the second stage is free again */
    float o[MT][NO][4], m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;
#pragma unroll
        for (int n = 0; n < NO; n++) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
    }
    for (int kb = 0; kb < nk; kb++) {
        const bf16 *cK = sm + 2 * (kb & 1) * TL, *cV = cK + TL;
        if (kb + 1 < nk) { /* the next key tile streams in while this one is computed */
            bf16 *nK = sm + 2 * ((kb + 1) & 1) * TL;
            load_tile<HS>(nK, base + Cl, C3, (kb + 1) * FA_TILE, T);
            load_tile<HS>(nK + TL, base + 2 * Cl, C3, (kb + 1) * FA_TILE, T);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        if (kb * FA_TILE < w0 + WR) { /* else every key of the tile lies after every row of this warp */
            float s[MT][8][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < 8; n++) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++)
#pragma unroll
                for (int np = 0; np < 4; np++) {
                    uint32_t bb[4];
                    frag_b_nk(bb, cK, LD, np * 16, ks * 16, lane);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) { mma2(s[mt][2 * np], s[mt][2 * np + 1], qf[mt][ks], bb); }
                }
            const bool edge = kb * FA_TILE + FA_TILE - 1 > w0 || kb * FA_TILE + FA_TILE > T;
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                const int r0 = w0 + mt * 16 + (lane >> 2);
                softmax_step<NO>(s[mt], o[mt], m[mt], l[mt], edge, kb * FA_TILE, r0, r0 + 8, T, sl2, t4);
            }
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                uint32_t pa[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) c_to_a(pa[mt], s[mt][2 * kk], s[mt][2 * kk + 1]);
#pragma unroll
                for (int np = 0; np < NO / 2; np++) {
                    uint32_t bb[4];
                    frag_b_kn(bb, cV, LD, kk * 16, np * 16, lane);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) { mma2(o[mt][2 * np], o[mt][2 * np + 1], pa[mt], bb); }
                }
            }
        }
        __syncthreads(); /* this stage is loaded again two tiles on */
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        fwd_finish<NO>(out, lse + (size_t)bh * T, o[mt], m[mt], l[mt], w0 + mt * 16 + (lane >> 2), T,
                       (size_t)b * T * Cl + h * HS + 2 * t4, Cl, t4);
}

/* Before the backward, per row t of head bh: D[bh*T + t] = dout_t . out_t over the head, and the row's dq
 * partial sums (fp32, head by head: (B, NH, T, hs)) zeroed.  Eight lanes per row, 16-byte loads. */
__global__ void fa_bwd_dot_k(float *D, float *dq, const bf16 *out, const bf16 *dout, int B, int T, int NH, int hs) {
    const int r = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 3), sub = threadIdx.x & 7;
    const bool ok = r < B * NH * T;
    float s = 0.0f;
    if (ok) {
        int t = r % T, bh = r / T, b = bh / NH, h = bh % NH;
        size_t off = ((size_t)b * T + t) * NH * hs + (size_t)h * hs;
        for (int c = sub; c < hs / 8; c += 8) {
            float x[8], y[8];
            unpack8(ld_vec8(out + off + c * 8), x), unpack8(ld_vec8(dout + off + c * 8), y);
#pragma unroll
            for (int i = 0; i < 8; i++) s += x[i] * y[i];
        }
        float4 *z = reinterpret_cast<float4 *>(dq + (size_t)r * hs);
        for (int c = sub; c < hs / 4; c += 8) z[c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    for (int o = 1; o < 8; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (ok && !sub) D[r] = s;
}

/* The backward of one key tile: one block per (b*NH + h, key tile) in block_work's order, the heaviest
 * (first) tile of each head first; walks the
 * query tiles from the diagonal, the next one loading while this one is computed.  Per warp the
 * transposed products S^T = K Q^T, dP^T = V dO^T (16 keys x 64 queries) give dv += P^T dO and
 * dk += dS^T Q in registers; dS^T goes through shared memory so that each warp then takes 16 query rows
 * of dS K and adds them (fp32, atomically) to the dq partial sums.
 * Shared: K, V; Q, dO two buffers each; dS^T (64 x 72); logsumexp and D, two buffers.  MINB: the blocks
 * an SM is to hold (3 bounds the registers to 168 at the cost of a few spills; see bwd_launch). */
template <int HS, int MINB>
__global__ void __launch_bounds__(FA_THREADS, MINB)
    fa_bwd_k(bf16 *dqkv, float *dq, float *dbias, const bf16 *qkv, const bf16 *dout, const float *lse, const float *D,
             bool acc, int T, int NH, int BH, int group, float sl2, float scale) {
    constexpr int LD = HS + 8, NO = HS / 8, TL = FA_TILE * LD, LS = FA_TILE + 8;
    extern __shared__ __align__(16) unsigned char fa_smem[];
    bf16 *sK = reinterpret_cast<bf16 *>(fa_smem), *sV = sK + TL, *sQ = sV + TL, *sO = sQ + 2 * TL, *sS = sO + 2 * TL;
    float *sL = reinterpret_cast<float *>(sS + FA_TILE * LS), *sD = sL + 2 * FA_TILE;
    const int nqb = (T + FA_TILE - 1) / FA_TILE;
    int kb, bh;
    block_work(nqb, BH, group, &kb, &bh);
    const int b = bh / NH, h = bh % NH;
    const int Cl = NH * HS, C3 = 3 * Cl, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t4 = lane & 3;
    const int k0 = kb * FA_TILE + warp * 16 + (lane >> 2); /* this thread's key rows: k0, k0 + 8 */
    const bf16 *base = qkv + (size_t)b * T * C3 + h * HS, *dbase = dout + (size_t)b * T * Cl + h * HS;
    const float *lrow = lse + (size_t)bh * T, *drow = D + (size_t)bh * T;
    float *dqb = dq + (size_t)bh * T * HS + 2 * t4;
    load_tile<HS>(sK, base + Cl, C3, kb * FA_TILE, T);
    load_tile<HS>(sV, base + 2 * Cl, C3, kb * FA_TILE, T);
    load_query_tile<HS>(sQ, sO, sL, sD, base, dbase, lrow, drow, C3, Cl, kb * FA_TILE, T);
    cp_commit();
    float dk[NO][4], dv[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;
    for (int qb = kb; qb < nqb; qb++) {
        const int cur = (qb - kb) & 1;
        next_query_tile<HS, FA_THREADS>(sQ, sO, sL, sD, cur, base, dbase, lrow, drow, C3, Cl, qb, nqb, T);
        const bf16 *cQ = sQ + cur * TL, *cO = sO + cur * TL;
        const float *cL = sL + cur * FA_TILE, *cD = sD + cur * FA_TILE;
        const bool edge = qb == kb || qb * FA_TILE + FA_TILE > T;
        bwd_warp_tile<HS>(dk, dv, sS, LS, sK, sV, cQ, cO, cL, cD, edge, qb * FA_TILE, k0, T, sl2, warp, lane);
        __syncthreads();
        uint32_t da[4][4]; /* dS rows warp*16.., all 64 keys, as A operands */
#pragma unroll
        for (int kk = 0; kk < 4; kk++) frag_a_t(da[kk], sS, LS, warp * 16, kk * 16, lane);
        const int q0 = qb * FA_TILE + warp * 16 + (lane >> 2), q1 = q0 + 8;
        float *d0 = dqb + (size_t)q0 * HS, *d1 = d0 + (size_t)8 * HS;
#pragma unroll
        for (int np = 0; np < NO / 2; np++) {
            float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                uint32_t bk[4];
                frag_b_kn(bk, sK, LD, kk * 16, np * 16, lane);
                mma2(acc[0], acc[1], da[kk], bk);
            }
#pragma unroll
            for (int j = 0; j < 2; j++) {
                if (q0 < T) red2(d0 + np * 16 + j * 8, acc[j][0], acc[j][1]);
                if (q1 < T) red2(d1 + np * 16 + j * 8, acc[j][2], acc[j][3]);
            }
        }
    }
    store_dk_dv<NO>(dqkv + ((size_t)b * T + k0) * C3 + Cl + h * HS + 2 * t4, dk, dv, k0, T, C3, Cl, scale, acc,
                    dbias ? dbias + Cl + h * HS + 2 * t4 : NULL);
}

/* dqkv's q part = scale * the dq partial sums, or += with acc.  A block of 32 x COL_LANES threads covers
 * 256 columns of a chunk of rows, each thread eight columns on every COL_LANES-th row.  With dbias, the
 * column sums of what it adds (scale * dq) go into dbias's q part (add_block_column_sums). */
__global__ void __launch_bounds__(32 * COL_LANES)
    fa_bwd_dq_add_k(bf16 *dqkv, float *dbias, const float *dq, int BT, int T, int NH, int hs, float scale, bool acc,
                    int rows_per) {
    const int Cl = NH * hs, col = (blockIdx.x * 32 + threadIdx.x) * 8;
    const int r0 = blockIdx.y * rows_per, r1 = min(BT, r0 + rows_per);
    float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (col < Cl) {
        const int h = col / hs, c = col - h * hs;
        for (int r = r0 + threadIdx.y; r < r1; r += COL_LANES) {
            const int b = r / T, t = r - b * T;
            const float *src = dq + (((size_t)b * NH + h) * T + t) * hs + c;
            const float4 x = reinterpret_cast<const float4 *>(src)[0], y = reinterpret_cast<const float4 *>(src)[1];
            const float add[8] = {scale * x.x, scale * x.y, scale * x.z, scale * x.w,
                                  scale * y.x, scale * y.y, scale * y.z, scale * y.w};
            bf16 *g = dqkv + (size_t)r * 3 * Cl + col;
            float f[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            if (acc) unpack8(ld_vec8(g), f);
#pragma unroll
            for (int j = 0; j < 8; j++) f[j] += add[j], s[j] += add[j];
            st_vec8(g, pack8(f));
        }
    }
    if (dbias) add_block_column_sums(dbias, s, blockIdx.x * 256, Cl);
}
/* the dq pass over B*T rows: about eight blocks an SM, each over a chunk of rows (a multiple of COL_LANES) */
static int dq_pass(bf16 *dqkv, float *dbias, const float *dq, int B, int T, int NH, int hs, float scale, bool acc) {
    const int BT = B * T, Cl = NH * hs;
    const unsigned cols = grid_for((size_t)Cl / 8, 32);
    const long rows_per = column_block_rows(BT, cols, COL_LANES, COL_LANES);
    dim3 grid(cols, grid_for((size_t)BT, (int)rows_per)), block(32, COL_LANES);
    fa_bwd_dq_add_k<<<grid, block>>>(dqkv, dbias, dq, BT, T, NH, hs, scale, acc, (int)rows_per);
    return launch_ok();
}

template <typename K> int smem_opt_in(K kernel, size_t bytes) { /* above 48 KiB the kernel must opt in */
    if (bytes <= 48 * 1024) return 0;
    return -(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != cudaSuccess);
}

template <int HS, int MT> int fwd_launch_mt(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int NH, float sl2) {
    constexpr int BM = FA_TILE * MT;
    size_t sm = (size_t)4 * FA_TILE * (HS + 8) * sizeof(bf16); /* K, V: two stages */
    if (smem_opt_in(fa_fwd_k<HS, MT>, sm)) return -1;
    dim3 grid((unsigned)(B * NH), (unsigned)((T + BM - 1) / BM)); /* heads by x, query blocks by y */
    fa_fwd_k<HS, MT><<<grid, FA_THREADS, sm>>>(out, lse, qkv, T, NH, sl2);
    return launch_ok();
}
/* At head size 64 on sm_90 attention_wgmma.cu's forward unless TPRT_ATTENTION_FWD=mma; else (or then) two
 * m-tiles a warp (blocks of 128 queries) up to head size 64, unless TPRT_ATTENTION_FWD_ROWS=64 */
template <int HS> int fwd_launch(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int NH, float sl2) {
    const char *e = getenv("TPRT_ATTENTION_FWD_ROWS"), *f = getenv("TPRT_ATTENTION_FWD");
    if (!f || strcmp(f, "mma")) {
        int wg = fa_fwd_wg_launch(HS, out, lse, qkv, B, T, NH, sl2);
        if (wg <= 0) return wg;
    }
    if (e && !strcmp(e, "64")) return fwd_launch_mt<HS, 1>(out, lse, qkv, B, T, NH, sl2);
    return fwd_launch_mt<HS, (HS <= 64 ? 2 : 1)>(out, lse, qkv, B, T, NH, sl2);
}
/* the backward kernel, read at each call: TPRT_ATTENTION_BWD=k64 the 64-key fa_bwd_k, 0; k128
 * (attention_fused_bwd128.cu) 1; anything else (unset, wgmma) 2, attention_wgmma.cu's where it runs
 * (head size 64 on sm_90), else fa_bwd_k */
static int bwd_mode(void) {
    const char *e = getenv("TPRT_ATTENTION_BWD");
    return !e ? 2 : !strcmp(e, "k64") ? 0 : !strcmp(e, "k128") ? 1 : 2;
}
/* fa_bwd_k's blocks per SM up to head size 64: 3 (168 registers), or with TPRT_ATTENTION_BWD_BLOCKS=2 the
 * registers it asks for (239 at head size 64: two blocks); above 64 always the latter */
static int bwd_blocks(void) {
    const char *e = getenv("TPRT_ATTENTION_BWD_BLOCKS");
    return e && !strcmp(e, "2") ? 2 : 3;
}
template <int HS, int MINB>
int bwd_k_launch(bf16 *dqkv, float *dq, float *dbias, const bf16 *qkv, const bf16 *dout, const float *lse,
                 const float *D, bool acc, int B, int T, int NH, float sl2, float scale, size_t sm) {
    if (smem_opt_in(fa_bwd_k<HS, MINB>, sm)) return -1;
    const int BH = B * NH;
    fa_bwd_k<HS, MINB><<<(unsigned)(BH * ((T + FA_TILE - 1) / FA_TILE)), FA_THREADS, sm>>>(
        dqkv, dq, dbias, qkv, dout, lse, D, acc, T, NH, BH, launch_group(BH), sl2, scale);
    return 0;
}
/* the mma.sync kernel TPRT_ATTENTION_BWD and TPRT_ATTENTION_BWD_BLOCKS pick (fa_bwd_k but for k128) */
template <int HS>
int mma_bwd_launch(int mode, bf16 *dqkv, float *dq, float *dbias, const bf16 *qkv, const bf16 *dout, const float *lse,
                   const float *D, bool acc, int B, int T, int NH, float sl2, float scale) {
    size_t sm = (6 * FA_TILE * (HS + 8) + FA_TILE * (FA_TILE + 8)) * sizeof(bf16) + 4 * FA_TILE * sizeof(float);
    if (mode == 1) return fa_bwd128_launch(HS, dqkv, dq, dbias, qkv, dout, lse, D, B, T, NH, sl2, scale, acc);
    if (HS <= 64 && bwd_blocks() == 3)
        return bwd_k_launch<HS, 3>(dqkv, dq, dbias, qkv, dout, lse, D, acc, B, T, NH, sl2, scale, sm);
    return bwd_k_launch<HS, 1>(dqkv, dq, dbias, qkv, dout, lse, D, acc, B, T, NH, sl2, scale, sm);
}
/* the backward kernel (the wgmma one where asked and it runs here), then the dq pass */
template <int HS>
int bwd_launch(bf16 *dqkv, float *dq, float *dbias, const bf16 *qkv, const bf16 *dout, const float *lse, const float *D,
               bool acc, int B, int T, int NH, float sl2, float scale) {
    const int mode = bwd_mode();
    const int wg = mode == 2 ? fa_bwd_wg_launch(HS, dqkv, dq, dbias, qkv, dout, lse, D, B, T, NH, sl2, scale, acc) : 1;
    if (wg < 0 || (wg == 1 && mma_bwd_launch<HS>(mode, dqkv, dq, dbias, qkv, dout, lse, D, acc, B, T, NH, sl2, scale)))
        return -1;
    return dq_pass(dqkv, dbias, dq, B, T, NH, HS, scale, acc);
}
} // namespace

#define FA_SWITCH(hs, CALL)     \
    switch (hs) {               \
    case 16: return CALL(16);   \
    case 32: return CALL(32);   \
    case 48: return CALL(48);   \
    case 64: return CALL(64);   \
    case 80: return CALL(80);   \
    case 96: return CALL(96);   \
    case 112: return CALL(112); \
    case 128: return CALL(128); \
    default: return -1;         \
    }

extern "C" int cuda_attention_fused_supported(int Cl, int NH) {
    if (NH < 1 || Cl % NH) return 0;
    int hs = Cl / NH;
    return hs >= 16 && hs <= 128 && hs % 16 == 0;
}

extern "C" int cuda_attention_use_fused(int Cl, int NH) {
    const char *e = getenv("TPRT_ATTENTION");
    if (e && !strcmp(e, "gemm")) return 0;
    return cuda_attention_fused_supported(Cl, NH);
}

/* the scratch: D (B*NH*T fp32), then at a 256-byte boundary the dq partial sums (B, NH, T, hs) fp32 */
static size_t dot_bytes(int B, int T, int NH) { return ((size_t)B * NH * T * sizeof(float) + 255) & ~(size_t)255; }
extern "C" size_t cuda_attention_fused_scratch_bytes(int B, int T, int Cl, int NH) {
    return dot_bytes(B, T, NH) + (size_t)B * T * Cl * sizeof(float) + 256;
}

extern "C" int cuda_attention_fused_forward(tprt_bf16 *out, float *lse, const tprt_bf16 *qkv, int B, int T, int Cl,
                                            int NH) {
    if (!cuda_attention_fused_supported(Cl, NH)) return -1;
    if ((size_t)B * T * Cl == 0) return 0;
    int hs = Cl / NH;
    float sl2 = TPRT_LOG2E / sqrtf((float)hs);
#define FA_FWD(H) fwd_launch<H>(BF(out), lse, CBF(qkv), B, T, NH, sl2)
    FA_SWITCH(hs, FA_FWD)
#undef FA_FWD
}

extern "C" int cuda_attention_fused_backward(tprt_bf16 *dqkv, const tprt_bf16 *dout, const tprt_bf16 *qkv,
                                             const tprt_bf16 *out, const float *lse, void *scratch, int B, int T,
                                             int Cl, int NH, int accumulate, float *dbias) {
    if (!cuda_attention_fused_supported(Cl, NH)) return -1;
    if ((size_t)B * T * Cl == 0) return 0;
    int hs = Cl / NH, rows = B * NH * T;
    float scale = 1.0f / sqrtf((float)hs), sl2 = TPRT_LOG2E * scale, *D = (float *)scratch;
    float *dq = (float *)((char *)scratch + dot_bytes(B, T, NH));
    fa_bwd_dot_k<<<grid_for((size_t)rows, 32), 256>>>(D, dq, CBF(out), CBF(dout), B, T, NH, hs);
#define FA_BWD(H) bwd_launch<H>(BF(dqkv), dq, dbias, CBF(qkv), CBF(dout), lse, D, accumulate != 0, B, T, NH, sl2, scale)
    FA_SWITCH(hs, FA_BWD)
#undef FA_BWD
}
