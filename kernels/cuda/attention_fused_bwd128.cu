/* attention_fused_bwd128.cu - the fused attention backward with 128 keys a
 * block, the one TPRT_ATTENTION_BWD=k128 selects (attention_fused.cu runs
 * the D pass before it and the dq pass after it, as for its own 64-key
 * kernel).  8 warps of 16 keys each walk the 64-query tiles from the
 * diagonal: each Q, dO tile loaded once feeds 128 keys, and the dq partial
 * sums of a query tile take one fp32 atomic add per 128 keys instead of per
 * 64.  Per warp, as in fa_bwd_k (bwd_warp_tile): S^T = K Q^T and dP^T = V dO^T (16 keys x
 * 64 queries), dv += P^T dO and dk += dS^T Q in registers; dS^T (128 x 64)
 * goes through shared memory, then warp w takes query rows 16*(w%4).. and
 * every other 16-column group of the head from w/4 for dq += dS K.  A warp
 * whose keys all lie after every query of the tile skips its products (its
 * dS^T rows are written as zero).  The next query tile streams in (cp.async,
 * two buffers) while this one is computed. */
#include "attention_fused.cuh"

namespace {
constexpr int KB = 2 * FA_TILE, NT = 2 * FA_THREADS; /* keys a block, threads a block */

/* Shared: K, V (128 rows); Q, dO two buffers each (64 rows); dS^T (128 x 72); logsumexp and D, two buffers.
 * One block per (head, block of 128 keys) in block_work's order, the first (heaviest: the most query
 * tiles) of each head first. */
template <int HS>
__global__ void __launch_bounds__(NT)
    fa_bwd128_k(bf16 *dqkv, float *dq, float *dbias, const bf16 *qkv, const bf16 *dout, const float *lse,
                const float *D, bool acc, int T, int NH, int BH, int group, float sl2, float scale) {
    constexpr int LD = HS + 8, KS = HS / 16, NO = HS / 8, TL = FA_TILE * LD, LS = FA_TILE + 8;
    extern __shared__ __align__(16) unsigned char fa_smem[];
    bf16 *sK = reinterpret_cast<bf16 *>(fa_smem), *sV = sK + 2 * TL, *sQ = sV + 2 * TL, *sO = sQ + 2 * TL;
    bf16 *sS = sO + 2 * TL;
    float *sL = reinterpret_cast<float *>(sS + KB * LS), *sD = sL + 2 * FA_TILE;
    int kb, bh;
    block_work((T + KB - 1) / KB, BH, group, &kb, &bh);
    const int nqb = (T + FA_TILE - 1) / FA_TILE, qb0 = 2 * kb, b = bh / NH, h = bh % NH;
    const int Cl = NH * HS, C3 = 3 * Cl, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t4 = lane & 3;
    const int wk = kb * KB + warp * 16, k0 = wk + (lane >> 2); /* this thread's key rows: k0, k0 + 8 */
    const bf16 *base = qkv + (size_t)b * T * C3 + h * HS, *dbase = dout + (size_t)b * T * Cl + h * HS;
    const float *lrow = lse + (size_t)bh * T, *drow = D + (size_t)bh * T;
    float *dqb = dq + (size_t)bh * T * HS + 2 * t4;
    load_tile<HS, NT, KB>(sK, base + Cl, C3, kb * KB, T);
    load_tile<HS, NT, KB>(sV, base + 2 * Cl, C3, kb * KB, T);
    load_query_tile<HS, NT>(sQ, sO, sL, sD, base, dbase, lrow, drow, C3, Cl, qb0 * FA_TILE, T);
    cp_commit();
    float dk[NO][4] = {}, dv[NO][4] = {};
    for (int qb = qb0, cur = 0; qb < nqb; qb++, cur ^= 1) {
        next_query_tile<HS, NT>(sQ, sO, sL, sD, cur, base, dbase, lrow, drow, C3, Cl, qb, nqb, T);
        const bf16 *cQ = sQ + cur * TL, *cO = sO + cur * TL;
        const float *cL = sL + cur * FA_TILE, *cD = sD + cur * FA_TILE;
        if (wk <= qb * FA_TILE + FA_TILE - 1) { /* else every key of this warp lies after every query */
            const bool edge = qb <= qb0 + 1 || qb * FA_TILE + FA_TILE > T;
            bwd_warp_tile<HS>(dk, dv, sS, LS, sK, sV, cQ, cO, cL, cD, edge, qb * FA_TILE, k0, T, sl2, warp, lane);
        } else {
            const float zero[8][4] = {};
            store_ds_t(sS, LS, zero, warp, lane);
        }
        __syncthreads();
        /* dq rows mr.. (16 queries) over all 128 keys, 16-column groups g = warp/4, warp/4 + 2, ... */
        const int mr = (warp & 3) * 16, gw = warp >> 2;
        constexpr int NG = (KS + 1) / 2; /* the most groups a warp takes */
        float acc[NG][2][4];
#pragma unroll
        for (int j = 0; j < NG; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[j][0][e] = acc[j][1][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KB / 16; kk++) {
            uint32_t da[4];
            frag_a_t(da, sS, LS, mr, kk * 16, lane);
#pragma unroll
            for (int j = 0; j < NG; j++)
                if (gw + 2 * j < KS) {
                    uint32_t bk[4];
                    frag_b_kn(bk, sK, LD, kk * 16, (gw + 2 * j) * 16, lane);
                    mma2(acc[j][0], acc[j][1], da, bk);
                }
        }
        const int q0 = qb * FA_TILE + mr + (lane >> 2), q1 = q0 + 8;
        float *d0 = dqb + (size_t)q0 * HS, *d1 = d0 + (size_t)8 * HS;
#pragma unroll
        for (int j = 0; j < NG; j++)
            if (gw + 2 * j < KS)
#pragma unroll
                for (int x = 0; x < 2; x++) {
                    const int c = (gw + 2 * j) * 16 + x * 8;
                    if (q0 < T) red2(d0 + c, acc[j][x][0], acc[j][x][1]);
                    if (q1 < T) red2(d1 + c, acc[j][x][2], acc[j][x][3]);
                }
    }
    store_dk_dv<NO>(dqkv + ((size_t)b * T + k0) * C3 + Cl + h * HS + 2 * t4, dk, dv, k0, T, C3, Cl, scale, acc,
                    dbias ? dbias + Cl + h * HS + 2 * t4 : NULL);
}

template <int HS>
int launch(bf16 *dqkv, float *dq, float *dbias, const bf16 *qkv, const bf16 *dout, const float *lse, const float *D,
           int B, int T, int NH, float sl2, float scale, bool acc) {
    constexpr int LD = HS + 8;
    const size_t sm = (size_t)(8 * FA_TILE * LD + KB * (FA_TILE + 8)) * sizeof(bf16) + 4 * FA_TILE * sizeof(float);
    if (sm > 48 * 1024 &&
        cudaFuncSetAttribute(fa_bwd128_k<HS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm) != cudaSuccess)
        return -1;
    const int BH = B * NH;
    fa_bwd128_k<HS><<<(unsigned)(BH * ((T + KB - 1) / KB)), NT, sm>>>(dqkv, dq, dbias, qkv, dout, lse, D, acc, T, NH,
                                                                      BH, launch_group(BH), sl2, scale);
    return launch_ok();
}
} // namespace

int fa_bwd128_launch(int hs, bf16 *dqkv, float *dq, float *dbias, const bf16 *qkv, const bf16 *dout, const float *lse,
                     const float *D, int B, int T, int NH, float sl2, float scale, bool acc) {
    switch (hs) {
    case 16: return launch<16>(dqkv, dq, dbias, qkv, dout, lse, D, B, T, NH, sl2, scale, acc);
    case 32: return launch<32>(dqkv, dq, dbias, qkv, dout, lse, D, B, T, NH, sl2, scale, acc);
    case 48: return launch<48>(dqkv, dq, dbias, qkv, dout, lse, D, B, T, NH, sl2, scale, acc);
    case 64: return launch<64>(dqkv, dq, dbias, qkv, dout, lse, D, B, T, NH, sl2, scale, acc);
    case 80: return launch<80>(dqkv, dq, dbias, qkv, dout, lse, D, B, T, NH, sl2, scale, acc);
    case 96: return launch<96>(dqkv, dq, dbias, qkv, dout, lse, D, B, T, NH, sl2, scale, acc);
    case 112: return launch<112>(dqkv, dq, dbias, qkv, dout, lse, D, B, T, NH, sl2, scale, acc);
    case 128: return launch<128>(dqkv, dq, dbias, qkv, dout, lse, D, B, T, NH, sl2, scale, acc);
    default: return -1;
    }
}
