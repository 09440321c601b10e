/* attention_fused.cuh - the device pieces of the kernels of
 * attention_fused.cu, attention_fused_bwd128.cu and attention_wgmma.cu: the
 * tile constants, bf16 mma.sync m16n8k16 with its ldmatrix operand loads (A
 * and B fragments, straight or transposed), the backward's pair of tile
 * products and one warp's step of a backward tile (P, dS, dk, dv; dS^T into
 * shared memory), the forward's online-softmax step and its finish (out and
 * logsumexp), the blocks' launch order, cp.async tile loads (16-byte, zero
 * fill past T; the backward's query tile with its logsumexp and D rows,
 * double buffered) and the accumulating stores (bf16 += in place, fp32
 * atomic adds); and the launchers of the 128-key backward of
 * attention_fused_bwd128.cu and of attention_wgmma.cu's kernels. */
#ifndef TPRT_ATTENTION_FUSED_CUH
#define TPRT_ATTENTION_FUSED_CUH
#include "common.cuh"
#include <stdint.h>
#include <stdlib.h>

#define FA_TILE      64
#define FA_THREADS   128
#define FA_GROUP     16  /* heads side by side in the backward's launch order (block_work) */
#define FA_GROUP_MIN 128 /* fewer heads than this: one group of all (see launch_group) */
#define FA_LN2       0.6931471805599453f

namespace {

__device__ __forceinline__ unsigned saddr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

/* d (16x8 fp32) += a (16x16 bf16, row) . b (16x8 bf16, col) */
__device__ __forceinline__ void mma(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void ldsm4(uint32_t r[4], const bf16 *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(saddr(p)));
}
__device__ __forceinline__ void ldsm4t(uint32_t r[4], const bf16 *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(saddr(p)));
}
/* lo += a . (b[0], b[1]), hi += a . (b[2], b[3]): the two n-tiles of a frag_b_* load */
__device__ __forceinline__ void mma2(float lo[4], float hi[4], const uint32_t a[4], const uint32_t b[4]) {
    mma(lo, a, b[0], b[1]);
    mma(hi, a, b[2], b[3]);
}
/* A operand, rows m0..m0+15 and columns k0..k0+15 of the row-major tile X (ld). */
__device__ __forceinline__ void frag_a(uint32_t a[4], const bf16 *X, int ld, int m0, int k0, int lane) {
    int mi = lane >> 3;
    ldsm4(a, X + (m0 + (lane & 7) + (mi & 1) * 8) * ld + k0 + (mi >> 1) * 8);
}
/* A operand, rows m0..m0+15 and columns k0..k0+15 of A = X^T, X row-major (ld): transposed on load. */
__device__ __forceinline__ void frag_a_t(uint32_t a[4], const bf16 *X, int ld, int m0, int k0, int lane) {
    int mi = lane >> 3;
    ldsm4t(a, X + (k0 + (mi >> 1) * 8 + (lane & 7)) * ld + m0 + (mi & 1) * 8);
}
/* B operands of two n-tiles (n0, n0+8) with B[k][n] = X[n][k]: b[0..1] for n0, b[2..3] for n0+8. */
__device__ __forceinline__ void frag_b_nk(uint32_t b[4], const bf16 *X, int ld, int n0, int k0, int lane) {
    int mi = lane >> 3;
    ldsm4(b, X + (n0 + (lane & 7) + (mi >> 1) * 8) * ld + k0 + (mi & 1) * 8);
}
/* B operands of two n-tiles with B[k][n] = X[k][n] (transposed on load). */
__device__ __forceinline__ void frag_b_kn(uint32_t b[4], const bf16 *X, int ld, int k0, int n0, int lane) {
    int mi = lane >> 3;
    ldsm4t(b, X + (k0 + (lane & 7) + (mi & 1) * 8) * ld + n0 + (mi >> 1) * 8);
}
/* The C layout of two adjacent 16x8 tiles as the A operand of a 16x16 step. */
__device__ __forceinline__ void c_to_a(uint32_t a[4], const float lo[4], const float hi[4]) {
    a[0] = pack2(lo[0], lo[1]), a[1] = pack2(lo[2], lo[3]), a[2] = pack2(hi[0], hi[1]), a[3] = pack2(hi[2], hi[3]);
}

/* The two 16 x 64 tile products the backward needs, for this
 * warp's 16 rows: s = A1 . B1^T and dp = A2 . B2^T over the head size (KS
 * steps of 16), fp32 accumulators in mma C layout: the backward passes
 * (K, V ; Q, dO). */
template <int KS>
__device__ __forceinline__ void two_tile_products(float s[8][4], float dp[8][4], const bf16 *A1, const bf16 *A2,
                                                  const bf16 *B1, const bf16 *B2, int ld, int warp, int lane) {
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
        uint32_t a1[4], a2[4];
        frag_a(a1, A1, ld, warp * 16, ks * 16, lane);
        frag_a(a2, A2, ld, warp * 16, ks * 16, lane);
#pragma unroll
        for (int np = 0; np < 4; np++) {
            uint32_t b1[4], b2[4];
            frag_b_nk(b1, B1, ld, np * 16, ks * 16, lane);
            frag_b_nk(b2, B2, ld, np * 16, ks * 16, lane);
            mma2(s[2 * np], s[2 * np + 1], a1, b1);
            mma2(dp[2 * np], dp[2 * np + 1], a2, b2);
        }
    }
}

/* dS^T (C layout, this warp's 16 key rows) as bf16 rows warp*16.. of sS (ld LS): rows keys, columns queries */
__device__ __forceinline__ void store_ds_t(bf16 *sS, int LS, const float ds[8][4], int warp, int lane) {
    bf16 *w = sS + (warp * 16 + (lane >> 2)) * LS + 2 * (lane & 3);
#pragma unroll
    for (int n = 0; n < 8; n++) {
        *reinterpret_cast<uint32_t *>(w + n * 8) = pack2(ds[n][0], ds[n][1]);
        *reinterpret_cast<uint32_t *>(w + 8 * LS + n * 8) = pack2(ds[n][2], ds[n][3]);
    }
}

/* One warp's part of a backward tile: its 16 keys (rows warp*16.. of sK, sV; k0 and k0 + 8 this thread's)
 * against the 64 queries from q0 (cQ, cO; their logsumexp cL and D cD): P^T and dS^T = P^T * (dP^T - D),
 * masked with edge (a query before the key, or at T and beyond); dv += P^T dO and dk += dS^T Q, and dS^T
 * stored into sS (store_ds_t). */
template <int HS>
__device__ __forceinline__ void bwd_warp_tile(float dk[HS / 8][4], float dv[HS / 8][4], bf16 *sS, int LS,
                                              const bf16 *sK, const bf16 *sV, const bf16 *cQ, const bf16 *cO,
                                              const float *cL, const float *cD, bool edge, int q0, int k0, int T,
                                              float sl2, int warp, int lane) {
    constexpr int LD = HS + 8, KS = HS / 16, NO = HS / 8;
    const int t4 = lane & 3, k1 = k0 + 8;
    float s[8][4], dp[8][4];
    two_tile_products<KS>(s, dp, sK, sV, cQ, cO, LD, warp, lane);
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int ql = n * 8 + 2 * t4 + (e & 1), q = q0 + ql, key = e < 2 ? k0 : k1;
            float p = ex2(s[n][e] * sl2 - cL[ql] * TPRT_LOG2E);
            if (edge && (q < key || q >= T)) p = 0.0f;
            s[n][e] = p;
            dp[n][e] = p * (dp[n][e] - cD[ql]);
        }
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        uint32_t pa[4], da[4];
        c_to_a(pa, s[2 * kk], s[2 * kk + 1]);
        c_to_a(da, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
        for (int np = 0; np < NO / 2; np++) {
            uint32_t bo[4], bq[4];
            frag_b_kn(bo, cO, LD, kk * 16, np * 16, lane);
            frag_b_kn(bq, cQ, LD, kk * 16, np * 16, lane);
            mma2(dv[2 * np], dv[2 * np + 1], pa, bo);
            mma2(dk[2 * np], dk[2 * np + 1], da, bq);
        }
    }
    store_ds_t(sS, LS, dp, warp, lane);
}

/* The online softmax of one key tile for one 16-row m-tile: its scores s (C layout) become probabilities,
 * the running max m (in log2 units: score * sl2) and sum l of the thread's two rows r0, r1 move on and the
 * output o is rescaled when the max moves far enough.  Keys from c0; with edge, keys after the row or at T
 * and beyond are masked.  The max is taken over the raw scores (sl2 > 0 keeps their order), so each
 * probability is one FMA and one ex2. */
#define SOFTMAX_SLACK 8.0f /* log2 units: a stale max leaves each term below 256 */
template <int NO>
__device__ __forceinline__ void softmax_step(float s[8][4], float o[NO][4], float m[2], float l[2], bool edge, int c0,
                                             int r0, int r1, int T, float sl2, int t4) {
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            if (edge) {
                int col = c0 + n * 8 + 2 * t4 + (e & 1), row = e < 2 ? r0 : r1;
                if (col > row || col >= T) s[n][e] = -INFINITY;
            }
            if (e < 2)
                mx0 = fmaxf(mx0, s[n][e]);
            else
                mx1 = fmaxf(mx1, s[n][e]);
        }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    mx0 *= sl2, mx1 *= sl2;
    /* A row's max moves (and its sum and output are rescaled) only when this tile's max passes it by more
     * than SOFTMAX_SLACK: below that the terms stay under 2^SOFTMAX_SLACK and o / l is the same, and the
     * rescale is skipped while no row of the warp needs it. */
    const bool up0 = mx0 > m[0] + SOFTMAX_SLACK, up1 = mx1 > m[1] + SOFTMAX_SLACK;
    if (__any_sync(0xffffffffu, up0 || up1)) {
        const float a0 = up0 ? ex2(m[0] - mx0) : 1.0f, a1 = up1 ? ex2(m[1] - mx1) : 1.0f;
        if (up0) m[0] = mx0;
        if (up1) m[1] = mx1;
        l[0] *= a0, l[1] *= a1;
#pragma unroll
        for (int n = 0; n < NO; n++) o[n][0] *= a0, o[n][1] *= a0, o[n][2] *= a1, o[n][3] *= a1;
    }
    const float u0 = m[0] == -INFINITY ? 0.0f : m[0], u1 = m[1] == -INFINITY ? 0.0f : m[1];
#pragma unroll
    for (int n = 0; n < 8; n++) {
        s[n][0] = ex2(fmaf(s[n][0], sl2, -u0)), s[n][1] = ex2(fmaf(s[n][1], sl2, -u0));
        s[n][2] = ex2(fmaf(s[n][2], sl2, -u1)), s[n][3] = ex2(fmaf(s[n][3], sl2, -u1));
        l[0] += s[n][0] + s[n][1], l[1] += s[n][2] + s[n][3];
    }
}

/* The end of a forward m-tile: the running sums l of the thread's rows r0, r0 + 8 summed over the quad,
 * out (from element `off` of out: batch, row 0, head, this thread's column; row stride Cl) = o / l, and with
 * t4 == 0 the rows' natural-log logsumexp of the scaled scores into lrow; rows at T and beyond left alone. */
template <int NO>
__device__ __forceinline__ void fwd_finish(bf16 *out, float *lrow, const float o[NO][4], const float m[2],
                                           const float l[2], int r0, int T, size_t off, int Cl, int t4) {
    float l0 = l[0], l1 = l[1];
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = 1.0f / l0, i1 = 1.0f / l1;
    const int r1 = r0 + 8;
    bf16 *o0 = out + off + (size_t)r0 * Cl, *o1 = o0 + (size_t)8 * Cl;
#pragma unroll
    for (int n = 0; n < NO; n++) {
        if (r0 < T) *reinterpret_cast<uint32_t *>(o0 + n * 8) = pack2(o[n][0] * i0, o[n][1] * i0);
        if (r1 < T) *reinterpret_cast<uint32_t *>(o1 + n * 8) = pack2(o[n][2] * i1, o[n][3] * i1);
    }
    if (t4 == 0) {
        if (r0 < T) lrow[r0] = (m[0] + log2f(l0)) * FA_LN2;
        if (r1 < T) lrow[r1] = (m[1] + log2f(l1)) * FA_LN2;
    }
}

/* A block's tile rank and head in the launch order of a 1-D grid of ntiles * BH blocks: the heads
 * in groups of `group`, each group tile rank by tile rank (rank 0 the heaviest, with the most tiles
 * to walk) and its heads side by side within a rank.  The blocks in flight then share a few heads,
 * whose tiles and dq partial sums stay in L2; group >= BH is the order of a 2-D grid with the heads
 * by x (every head's heaviest tile first). */
__device__ __forceinline__ void block_work(int ntiles, int BH, int group, int *rank, int *bh) {
    const int per = ntiles * group, g = (int)blockIdx.x / per, r = (int)blockIdx.x - g * per;
    const int gh = min(group, BH - g * group);
    *rank = r / gh, *bh = g * group + r % gh;
}
/* The group of block_work for BH heads: TPRT_ATTENTION_GROUP when set (>= 1); else FA_GROUP from
 * FA_GROUP_MIN heads on, and below that one group of all.  On an H200 the backward at 96 heads (batch 8
 * of 12) was 1.04x faster with every head's heaviest tile first (a few waves: the tail weighs more),
 * at 1536 heads 1.26x faster in groups of 16 (L2 misses weigh more; kernels/bench/attention_bench.c). */
static inline int launch_group(int BH) {
    const char *e = getenv("TPRT_ATTENTION_GROUP");
    int g = e && *e ? atoi(e) : BH < FA_GROUP_MIN ? BH : FA_GROUP;
    if (g < 1) g = FA_GROUP;
    return g < BH ? g : BH;
}

/* 16 bytes global -> shared without the registers; ok == false zero-fills (src is not read) */
__device__ __forceinline__ void cp16(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr(dst)), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp4(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(saddr(dst)), "l"(src), "r"(ok ? 4 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/* wait until at most N of this thread's committed groups are still in flight */
template <int N> __device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* rows r0..r0+R-1 (stride `stride` elements) of one head into an R x (HS+8) tile by a block of NT threads,
 * asynchronously; rows >= T are zero */
template <int HS, int NT = FA_THREADS, int R = FA_TILE>
__device__ __forceinline__ void load_tile(bf16 *dst, const bf16 *src, size_t stride, int r0, int T) {
    constexpr int CH = HS / 8, LD = HS + 8;
#pragma unroll
    for (int i = threadIdx.x; i < R * CH; i += NT) {
        int r = i / CH, c = i % CH;
        bool ok = r0 + r < T;
        cp16(dst + r * LD + c * 8, src + (size_t)(ok ? r0 + r : 0) * stride + c * 8, ok);
    }
}
/* A query tile's logsumexp and D rows q0.. into sL and sD (zero past T), by the block's first 2 * FA_TILE
 * threads, asynchronously. */
__device__ __forceinline__ void load_query_rows(float *sL, float *sD, const float *lse, const float *D, int q0, int T) {
    const int i = threadIdx.x & (FA_TILE - 1), q = q0 + i;
    if (threadIdx.x < FA_TILE)
        cp4(sL + i, lse + (q < T ? q : 0), q < T);
    else if (threadIdx.x < 2 * FA_TILE)
        cp4(sD + i, D + (q < T ? q : 0), q < T);
}
/* The query tile q0.. of one head into one buffer, by a block of NT threads: Q, dO, and the rows'
 * logsumexp and D (zero past T). */
template <int HS, int NT = FA_THREADS>
__device__ __forceinline__ void load_query_tile(bf16 *sQ, bf16 *sO, float *sL, float *sD, const bf16 *qbase,
                                                const bf16 *dbase, const float *lse, const float *D, int C3, int Cl,
                                                int q0, int T) {
    load_tile<HS, NT>(sQ, qbase, C3, q0, T);
    load_tile<HS, NT>(sO, dbase, Cl, q0, T);
    load_query_rows(sL, sD, lse, D, q0, T);
}
/* The top of a backward block's walk over query tiles: tile qb + 1 (if below nqb) starts loading into buffer
 * cur ^ 1 (free: read two tiles ago, before that tile's second barrier), tile qb (buffer cur) is waited for,
 * and the block meets.  Buffers: Q, dO of FA_TILE * (HS + 8), logsumexp and D of FA_TILE. */
template <int HS, int NT>
__device__ __forceinline__ void next_query_tile(bf16 *sQ, bf16 *sO, float *sL, float *sD, int cur, const bf16 *qbase,
                                                const bf16 *dbase, const float *lse, const float *D, int C3, int Cl,
                                                int qb, int nqb, int T) {
    constexpr int TL = FA_TILE * (HS + 8);
    const int nx = cur ^ 1;
    if (qb + 1 < nqb) {
        load_query_tile<HS, NT>(sQ + nx * TL, sO + nx * TL, sL + nx * FA_TILE, sD + nx * FA_TILE, qbase, dbase, lse, D,
                                C3, Cl, (qb + 1) * FA_TILE, T);
        cp_commit();
        cp_wait<1>();
    } else {
        cp_wait<0>();
    }
    __syncthreads();
}
/* dst (two bf16 at an even column) += (x, y) */
__device__ __forceinline__ void add2(bf16 *dst, float x, float y) {
    uint32_t *p = reinterpret_cast<uint32_t *>(dst);
    float o[2];
    unpack2(*p, o);
    *p = pack2(o[0] + x, o[1] + y);
}
/* dst (two bf16 at an even column) = (x, y), or += with acc */
__device__ __forceinline__ void put2(bf16 *dst, float x, float y, bool acc) {
    if (acc)
        add2(dst, x, y);
    else
        *reinterpret_cast<uint32_t *>(dst) = pack2(x, y);
}
/* dst (two fp32 at an even column, global) += (x, y), atomically */
__device__ __forceinline__ void red2(float *dst, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float2 *>(dst), make_float2(x, y));
#else
    atomicAdd(dst, x), atomicAdd(dst + 1, y);
#endif
}
/* db's k and v parts (db: the k part at this thread's columns; v Cl further) += the column sums of scale * dk
 * and of dv over this warp's key rows below T.  The warp's eight row lanes (lane / 4) hold the same columns:
 * with NO a multiple of 8 their sums are reduce-scattered (three exchanges, each lane keeping half of what
 * is left), so row lane g ends with the sums of n-tiles g, g + 8, ..., each one red.v2 a column pair: a
 * warp adds 64 columns in one instruction.  Other NO: every lane sums every tile, and lane g adds those
 * with n = g (mod 8). */
template <int NO>
__device__ __forceinline__ void add_dk_dv_sums(float *db, const float dk[NO][4], const float dv[NO][4], bool lo,
                                               bool hi, int Cl, float scale) {
    const int lane = threadIdx.x & 31, g = lane >> 2;
    float s[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++) {
        s[n][0] = (lo ? dk[n][0] : 0.0f) + (hi ? dk[n][2] : 0.0f),
        s[n][1] = (lo ? dk[n][1] : 0.0f) + (hi ? dk[n][3] : 0.0f);
        s[n][2] = (lo ? dv[n][0] : 0.0f) + (hi ? dv[n][2] : 0.0f),
        s[n][3] = (lo ? dv[n][1] : 0.0f) + (hi ? dv[n][3] : 0.0f);
    }
    if constexpr (NO % 8 == 0) {
#pragma unroll
        for (int bit = 4; bit >= 2; bit--) { /* lane bit 4, 3, 2 is bit 2, 1, 0 of g; tiles half apart pair up */
            const int half = 1 << (bit - 2);
            const bool up = (lane >> bit) & 1; /* keeps the upper tile of each pair, sends the lower */
#pragma unroll
            for (int n = 0; n < NO; n++)
                if ((n & 7) < half)
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        const float keep = up ? s[n + half][j] : s[n][j], send = up ? s[n][j] : s[n + half][j];
                        s[n][j] = keep + __shfl_xor_sync(0xffffffffu, send, 1 << bit);
                    }
        }
#pragma unroll
        for (int n = 0; n < NO; n += 8) /* slot n now holds n-tile n + g */
            red2(db + (n + g) * 8, s[n][0] * scale, s[n][1] * scale), red2(db + Cl + (n + g) * 8, s[n][2], s[n][3]);
    } else {
#pragma unroll
        for (int n = 0; n < NO; n++) {
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int m = 4; m < 32; m <<= 1) s[n][j] += __shfl_xor_sync(0xffffffffu, s[n][j], m);
            if ((n & 7) == g)
                red2(db + n * 8, s[n][0] * scale, s[n][1] * scale), red2(db + Cl + n * 8, s[n][2], s[n][3]);
        }
    }
}
/* dqkv's k and v rows k0 and k0 + 8 (from g0, the k part's row k0 at this thread's columns; v Cl further)
 * = scale * dk and dv, or += with acc; rows at T and beyond left alone.  With db (the bias grad's k part at
 * this thread's columns, as add_dk_dv_sums takes it; NULL: none) the column sums are added there too. */
template <int NO>
__device__ __forceinline__ void store_dk_dv(bf16 *g0, const float dk[NO][4], const float dv[NO][4], int k0, int T,
                                            size_t C3, int Cl, float scale, bool acc, float *db) {
    bf16 *g1 = g0 + 8 * C3;
#pragma unroll
    for (int n = 0; n < NO; n++) {
        if (k0 < T)
            put2(g0 + n * 8, dk[n][0] * scale, dk[n][1] * scale, acc), put2(g0 + Cl + n * 8, dv[n][0], dv[n][1], acc);
        if (k0 + 8 < T)
            put2(g1 + n * 8, dk[n][2] * scale, dk[n][3] * scale, acc), put2(g1 + Cl + n * 8, dv[n][2], dv[n][3], acc);
    }
    if (db) add_dk_dv_sums<NO>(db, dk, dv, k0 < T, k0 + 8 < T, Cl, scale);
}

} // namespace

/* attention_fused_bwd128.cu: the backward kernel with 128 keys a block (8 warps), launched for head size hs
 * (16..128, a multiple of 16); the dq partial sums and D as fa_bwd_k takes them, dk and dv written into
 * dqkv, or added with acc.  0, or -1. */
int fa_bwd128_launch(int hs, bf16 *dqkv, float *dq, float *dbias, const bf16 *qkv, const bf16 *dout, const float *lse,
                     const float *D, int B, int T, int NH, float sl2, float scale, bool acc);
/* attention_wgmma.cu: the backward on warpgroup products (head size 64, sm_90a), as fa_bwd128_launch takes
 * it.  0 launched, 1 not for this head size, build or device (the caller's kernel then runs), -1 failed. */
int fa_bwd_wg_launch(int hs, bf16 *dqkv, float *dq, float *dbias, const bf16 *qkv, const bf16 *dout, const float *lse,
                     const float *D, int B, int T, int NH, float sl2, float scale, bool acc);
/* attention_wgmma.cu: the forward on warpgroup products (head size 64, sm_90a), as fwd_launch takes it;
 * 0, 1 or -1 as fa_bwd_wg_launch */
int fa_fwd_wg_launch(int hs, bf16 *out, float *lse, const bf16 *qkv, int B, int T, int NH, float sl2);
#endif
