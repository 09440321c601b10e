/* attention_wgmma.cu - the fused attention on Hopper's warpgroup products
 * (wgmma.cuh), head size 64.  The backward, tprt's default there
 * (attention_fused.cu runs its D pass before it and its dq pass after it,
 * as for its own kernels), takes one block of one warpgroup per (head, 64-key
 * tile), in block_work's order, walks the 64-query tiles from the diagonal;
 * per tile, products of the whole group on swizzled shared tiles:
 * S^T = K Q^T and dP^T = V dO^T (64 keys x 64 queries), then P^T and
 * dS^T = P^T * (dP^T - D) in registers feed dv += P^T dO and dk += dS^T Q
 * straight from the registers; dS^T goes to shared memory for dq = dS K,
 * whose 64 x 64 fp32 tile is added into the dq partial sums (laid out head
 * by head) by one bulk reduction of the copy engine.  Unlike the mma.sync
 * kernels, each operand tile is read from shared memory once per product
 * rather than once per warp.  The next query tile streams in (cp.async, two
 * buffers) while this one is computed.  The forward, also the default
 * there, takes one block of one warpgroup per 64-query tile and walks the
 * key tiles with fa_fwd_k's online softmax, the next tile's S on the tensor
 * cores while this tile's softmax runs.  Built for sm_90a alone; elsewhere
 * the launchers say no and the caller keeps its mma.sync kernels. */
#include "attention_fused.cuh"
#include "tma.cuh"

#if defined(__CUDA_ARCH__) && !WG_ENABLED
#error "attention_wgmma.cu is built for sm_90a alone (kernels/CMakeLists.txt)"
#endif

namespace {
constexpr int WG_HS = 64;
/* shared: K, V, Q and dO (two buffers each), dS^T: 7 tiles; a tile's dq (fp32); logsumexp and D (two buffers
 * each); three transaction barriers (64 bytes); + alignment to 1024.  Three blocks fill an SM's 228 KiB. */
constexpr size_t WG_SMEM = 7 * WG_TILE_BYTES + WG_TILE * sizeof(float) + 4 * FA_TILE * sizeof(float) + 64 + 1024;

/* rows r0.. of one head (64 columns, row stride `stride`) into a swizzled tile by the block's 128 threads,
 * asynchronously; rows >= T zero.  Thread x copies chunk x % 8 of rows x / 8 + 16 j: a multiple of 8 apart,
 * so its chunk's swizzled place is the same in each. */
__device__ __forceinline__ void load_tile_sw(bf16 *dst, const bf16 *src, size_t stride, int r0, int T) {
    constexpr int STEP = FA_THREADS / 8;
    const int rr = threadIdx.x >> 3, c = (threadIdx.x & 7) * 8;
    bf16 *d = dst + wg_sw(rr, c);
    const bf16 *g = src + (size_t)(r0 + rr) * stride + c;
#pragma unroll
    for (int j = 0; j < FA_TILE / STEP; j++) {
        const bool ok = r0 + rr + j * STEP < T;
        cp16(d + j * STEP * 64, ok ? g + (size_t)j * STEP * stride : src, ok);
    }
}
/* the query tile q0..: Q, dO, and the rows' logsumexp and D (zero past T) */
__device__ __forceinline__ void load_query_sw(bf16 *sQ, bf16 *sO, float *sL, float *sD, const bf16 *qbase,
                                              const bf16 *dbase, const float *lse, const float *D, int C3, int Cl,
                                              int q0, int T) {
    load_tile_sw(sQ, qbase, C3, q0, T);
    load_tile_sw(sO, dbase, Cl, q0, T);
    load_query_rows(sL, sD, lse, D, q0, T);
}

/* key tile t of one head (K and V, from qkv's k part at base + Cl) into a stage: K then V */
__device__ __forceinline__ void load_kv_stage(bf16 *stage, const bf16 *base, int C3, int Cl, int t, int T) {
    load_tile_sw(stage, base + Cl, C3, t * FA_TILE, T);
    load_tile_sw(stage + WG_TILE, base + 2 * Cl, C3, t * FA_TILE, T);
}

/* TMA: key tile rows row.. of one head's K and V (qkv's columns Cl + col and 2 Cl + col) into kv and
 * kv + WG_TILE, on bar; one thread issues it (load_kv_stage's counterpart) */
__device__ __forceinline__ void tma_kv(bf16 *kv, const CUtensorMap *map, int Cl, int col, int row, uint64_t *bar) {
    mbar_expect(bar, 2 * WG_TILE_BYTES);
    tma_tile(kv, map, Cl + col, row, bar);
    tma_tile(kv + WG_TILE, map, 2 * Cl + col, row, bar);
}

/* Where a backward block's tiles come from, and what its copies complete on (TMA loads). */
struct bwd_src {
    const CUtensorMap *qkv, *dout; /* maps of qkv (B*T, 3 Cl) and dout (B*T, Cl) */
    const float *lrow, *drow;      /* this head's logsumexp and D rows */
    int row0, col;                 /* the head's first row (b * T), its first column (h * 64) */
};
/* TMA: query tile q0 (Q, dO, logsumexp and D rows) into buffer buf, on bars[buf]; one thread issues it */
__device__ __forceinline__ void tma_query(const bwd_src &src, bf16 *sQ, bf16 *sO, float *sL, float *sD, uint64_t *bars,
                                          int buf, int q0) {
    mbar_expect(&bars[buf], 2 * WG_TILE_BYTES + 2 * FA_TILE * sizeof(float));
    tma_tile(sQ + buf * WG_TILE, src.qkv, src.col, src.row0 + q0, &bars[buf]);
    tma_tile(sO + buf * WG_TILE, src.dout, src.col, src.row0 + q0, &bars[buf]);
    bulk_load(sL + buf * FA_TILE, src.lrow + q0, FA_TILE * sizeof(float), &bars[buf]);
    bulk_load(sD + buf * FA_TILE, src.drow + q0, FA_TILE * sizeof(float), &bars[buf]);
}

/* The backward of one key tile (the file's head says how), one block per (b*NH + h, key tile) in block_work's
 * order as fa_bwd_k.  Shared: K, V; Q, dO, logsumexp and D two buffers each; dS^T; the tile's dq; with TMA
 * (T a multiple of 64), the barriers its copies complete on: one a query buffer, one for K and V.  There one
 * thread issues each tile's copies instead of every thread its share of cp.async, and the wait on a buffer's
 * barrier replaces the block barrier at the top of each query tile. */
template <bool TMA>
__global__ void __launch_bounds__(FA_THREADS, 3)
    fa_bwd_wg_k(const __grid_constant__ CUtensorMap mqkv, const __grid_constant__ CUtensorMap mdout, bf16 *dqkv,
                float *dq, float *dbias, const bf16 *qkv, const bf16 *dout, const float *lse, const float *D, bool acc,
                int T, int NH, int BH, int group, float sl2, float scale) {
    extern __shared__ __align__(16) unsigned char fa_smem[];
    unsigned char *aligned = fa_smem + ((1024 - (wg_saddr(fa_smem) & 1023)) & 1023);
    bf16 *sK = reinterpret_cast<bf16 *>(aligned), *sV = sK + WG_TILE, *sQ = sV + WG_TILE, *sO = sQ + 2 * WG_TILE;
    bf16 *sS = sO + 2 * WG_TILE;
    float *sDq = reinterpret_cast<float *>(sS + WG_TILE), *sL = sDq + WG_TILE, *sD = sL + 2 * FA_TILE;
    uint64_t *bars = reinterpret_cast<uint64_t *>(sD + 2 * FA_TILE); /* TMA: query buffers 0 and 1; K and V */
    const int nqb = (T + FA_TILE - 1) / FA_TILE;
    int kb, bh;
    block_work(nqb, BH, group, &kb, &bh);
    const int b = bh / NH, h = bh % NH, Cl = NH * WG_HS, C3 = 3 * Cl;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t4 = lane & 3, r0 = warp * 16 + (lane >> 2);
    const int k0 = kb * FA_TILE + r0; /* this thread's key rows: k0, k0 + 8 */
    const bf16 *base = qkv + (size_t)b * T * C3 + h * WG_HS, *dbase = dout + (size_t)b * T * Cl + h * WG_HS;
    const float *lrow = lse + (size_t)bh * T, *drow = D + (size_t)bh * T;
    float *dqb = dq + (size_t)bh * T * WG_HS; /* this head's dq partial sums, (T, 64) */
    const bwd_src src = {&mqkv, &mdout, lrow, drow, b * T, h * WG_HS};
    if (TMA) {
        if (threadIdx.x == 0) {
            mbar_init(&bars[0], 1), mbar_init(&bars[1], 1), mbar_init(&bars[2], 1);
            mbar_init_fence();
            tma_kv(sK, &mqkv, Cl, src.col, src.row0 + kb * FA_TILE, &bars[2]); /* sV follows sK */
            tma_query(src, sQ, sO, sL, sD, bars, 0, kb * FA_TILE);
        }
        __syncthreads(); /* the barriers are made before anyone waits on them */
        mbar_wait(&bars[2], 0);
    } else {
        load_tile_sw(sK, base + Cl, C3, kb * FA_TILE, T);
        load_tile_sw(sV, base + 2 * Cl, C3, kb * FA_TILE, T);
        load_query_sw(sQ, sO, sL, sD, base, dbase, lrow, drow, C3, Cl, kb * FA_TILE, T);
        cp_commit();
    }
    const uint64_t dK = wg_desc(sK), dV = wg_desc(sV), dQ0 = wg_desc(sQ), dO0 = wg_desc(sO), dS = wg_desc(sS);
    float dk[32], dv[32];
#pragma unroll
    for (int i = 0; i < 32; i++) dk[i] = dv[i] = 0.0f;
    for (int qb = kb; qb < nqb; qb++) {
        const int cur = (qb - kb) & 1, q0 = qb * FA_TILE;
        /* the next tile into the buffer read two tiles ago: every product on it ended before the last barrier */
        if (TMA) {
            if (qb + 1 < nqb && threadIdx.x == 0) tma_query(src, sQ, sO, sL, sD, bars, cur ^ 1, q0 + FA_TILE);
            mbar_wait(&bars[cur], ((qb - kb) >> 1) & 1);
        } else {
            if (qb + 1 < nqb) {
                load_query_sw(sQ + (cur ^ 1) * WG_TILE, sO + (cur ^ 1) * WG_TILE, sL + (cur ^ 1) * FA_TILE,
                              sD + (cur ^ 1) * FA_TILE, base, dbase, lrow, drow, C3, Cl, q0 + FA_TILE, T);
                cp_commit();
                cp_wait<1>();
            } else {
                cp_wait<0>();
            }
            wg_proxy_fence();
            __syncthreads();
        }
        const uint64_t cQ = dQ0 + cur * (WG_TILE_BYTES / 16), cO = dO0 + cur * (WG_TILE_BYTES / 16);
        const float *cL = sL + cur * FA_TILE, *cD = sD + cur * FA_TILE;
        float s[32], dp[32];
        uint32_t pa[4][4], da[4][4];
        const bool edge = qb == kb || q0 + FA_TILE > T;
        wg_fence();
        wg_tile_abt(s, dK, cQ);  /* S^T = K Q^T */
        wg_tile_abt(dp, dV, cO); /* dP^T = V dO^T */
        wg_commit();
        wg_wait<0>();
        wg_hold(s), wg_hold(dp);
#pragma unroll
        for (int i = 0; i < 32; i++) {
            const int ql = 8 * (i >> 2) + 2 * t4 + (i & 1), q = q0 + ql, key = k0 + 8 * ((i >> 1) & 1);
            float p = ex2(s[i] * sl2 - cL[ql] * TPRT_LOG2E);
            if (edge && (q < key || q >= T)) p = 0.0f;
            s[i] = p;
            dp[i] = p * (dp[i] - cD[ql]);
        }
        wg_acc_to_a(pa, s);
        wg_acc_to_a(da, dp);
        wg_fence();
        wg_tile_rb(dv, pa, cO); /* dv += P^T dO */
        wg_tile_rb(dk, da, cQ); /* dk += dS^T Q */
        wg_commit();
#pragma unroll
        for (int n = 0; n < 8; n++) { /* dS^T (rows keys, columns queries) while those run; rows r0, r0 + 8 */
            uint32_t *w = reinterpret_cast<uint32_t *>(sS + wg_sw(r0, 8 * n + 2 * t4));
            w[0] = da[n >> 1][(n & 1) * 2];
            w[8 * 64 / 2] = da[n >> 1][(n & 1) * 2 + 1]; /* 8 rows on: the same swizzle */
        }
        wg_proxy_fence();
        if (threadIdx.x == 0) bulk_wait_read(); /* the last tile's dq addition has read sDq */
        __syncthreads();
        float dqt[32];
        wg_fence();
        wg_tile_atb(dqt, dS, dK); /* dq = dS K = (dS^T)^T K */
        wg_commit();
        wg_wait<0>();
        wg_hold(dqt), wg_hold(dk), wg_hold(dv);
        float *w = sDq + r0 * 64 + 2 * t4; /* this tile's dq, rows r0 and r0 + 8 */
#pragma unroll
        for (int n = 0; n < 8; n++) {
            *reinterpret_cast<float2 *>(w + 8 * n) = make_float2(dqt[4 * n], dqt[4 * n + 1]);
            *reinterpret_cast<float2 *>(w + 8 * 64 + 8 * n) = make_float2(dqt[4 * n + 2], dqt[4 * n + 3]);
        }
        wg_proxy_fence();
        __syncthreads();      /* every product on this tile's buffers and dS^T has ended; sDq is whole */
        if (threadIdx.x == 0) /* the tile's rows below T, added into the partial sums in one operation */
            bulk_add_f32(dqb + (size_t)q0 * WG_HS, sDq, (unsigned)min(FA_TILE, T - q0) * WG_HS * sizeof(float));
    }
    if (threadIdx.x == 0) bulk_wait_all(); /* before the block's shared memory goes */
    store_dk_dv<8>(dqkv + ((size_t)b * T + k0) * C3 + Cl + h * WG_HS + 2 * t4, reinterpret_cast<const float(*)[4]>(dk),
                   reinterpret_cast<const float(*)[4]>(dv), k0, T, C3, Cl, scale, acc,
                   dbias ? dbias + Cl + h * WG_HS + 2 * t4 : NULL);
}

/* What one forward block keeps across its key tiles: the shared tiles' descriptors and its rows. */
struct fwd_block {
    const bf16 *base;       /* this head's qkv, batch b, row 0, column h * 64 */
    const CUtensorMap *map; /* TMA: qkv's map (B*T, 3 Cl) */
    bf16 *sKV;              /* stage j: K, V at sKV + 2j tiles */
    uint64_t *bars;         /* TMA: stage j's copies complete on bars[j] */
    uint64_t dQ, dKV;
    int C3, Cl, T, nk, w0, r0, t4, row0, col; /* row0, col: the head's first row (b * T) and column (h * 64) */
    float sl2;
};
constexpr uint64_t WG_STAGE = 2 * WG_TILE_BYTES / 16; /* one stage of K and V in descriptor units */

/* TMA: key tile t's K and V into stage t % 3, issued by one thread */
__device__ __forceinline__ void tma_key_tile(const fwd_block &f, int t) {
    tma_kv(f.sKV + 2 * (t % 3) * WG_TILE, f.map, f.Cl, f.col, f.row0 + t * FA_TILE, &f.bars[t % 3]);
}

/* Key tile kb of a forward block: s holds its S; the next tile's S goes into sn on the tensor cores while
 * this tile's softmax runs, the one after starts loading, and o += P V. */
template <bool TMA>
__device__ __forceinline__ void fwd_key_tile(const fwd_block &f, int kb, float (&s)[32], float (&sn)[32],
                                             float (&o)[32], float m[2], float l[2]) {
    if (TMA) {
        __syncthreads(); /* every product on tile kb - 1's stage has ended */
        if (kb + 2 < f.nk && threadIdx.x == 0) tma_key_tile(f, kb + 2);
        if (kb + 1 < f.nk) mbar_wait(&f.bars[(kb + 1) % 3], ((kb + 1) / 3) & 1); /* key tile kb + 1 is in */
    } else {
        cp_wait<0>(); /* key tile kb + 1 is in */
        wg_proxy_fence();
        __syncthreads(); /* and every product on tile kb - 1's stage has ended */
        if (kb + 2 < f.nk) {
            load_kv_stage(f.sKV + 2 * ((kb + 2) % 3) * WG_TILE, f.base, f.C3, f.Cl, kb + 2, f.T);
            cp_commit();
        }
    }
    if (kb + 1 < f.nk) {
        wg_fence();
        wg_tile_abt(sn, f.dQ, f.dKV + ((kb + 1) % 3) * WG_STAGE); /* S of the next tile */
        wg_commit();
    }
    const bool edge = kb * FA_TILE + FA_TILE - 1 > f.w0 || kb * FA_TILE + FA_TILE > f.T;
    softmax_step<8>(reinterpret_cast<float(*)[4]>(s), reinterpret_cast<float(*)[4]>(o), m, l, edge, kb * FA_TILE, f.r0,
                    f.r0 + 8, f.T, f.sl2, f.t4);
    uint32_t pa[4][4];
    wg_acc_to_a(pa, s);
    wg_fence();
    wg_tile_rb(o, pa, f.dKV + (kb % 3) * WG_STAGE + WG_TILE_BYTES / 16); /* o += P V */
    wg_commit();
    wg_wait<0>();
    wg_hold(o), wg_hold(sn);
}

/* Forward: one block of one warpgroup per (b*NH + h, 64-query tile) in block_work's order, the heaviest
 * (last) tile of each head first; from 128 heads on the heads go in groups of 16, so that the heads in
 * flight keep their K and V in L2 (at batch 128 of 12 heads 1.24x the order of a 2-D grid, which is what
 * the order is below that).  Per key tile S = Q K^T, the online softmax of fa_fwd_k (softmax_step) and
 * o += P V with P straight from the registers.  The next tile's S runs on the tensor cores while this
 * tile's softmax runs: key tiles in three stages (this one, the next, whose S is issued, and the one
 * after, loading).  Shared: the Q tile, then three stages of [K tile, V tile]; with TMA (T a multiple of
 * 64), a barrier a stage that its copies complete on, one thread issuing them. */
template <bool TMA>
__global__ void __launch_bounds__(FA_THREADS, 3)
    fa_fwd_wg_k(const __grid_constant__ CUtensorMap mqkv, bf16 *out, float *lse, const bf16 *qkv, int T, int NH, int BH,
                int group, float sl2) {
    extern __shared__ __align__(16) unsigned char fa_smem[];
    unsigned char *aligned = fa_smem + ((1024 - (wg_saddr(fa_smem) & 1023)) & 1023);
    bf16 *sQ = reinterpret_cast<bf16 *>(aligned);
    const int nqb = (T + FA_TILE - 1) / FA_TILE;
    int rank, bh;
    block_work(nqb, BH, group, &rank, &bh);
    const int qb = nqb - 1 - rank; /* rank 0 the heaviest: the last query tile */
    const int b = bh / NH, h = bh % NH, lane = threadIdx.x & 31;
    fwd_block f;
    f.Cl = NH * WG_HS, f.C3 = 3 * f.Cl, f.T = T, f.t4 = lane & 3, f.sl2 = sl2;
    f.w0 = qb * FA_TILE, f.r0 = f.w0 + (threadIdx.x >> 5) * 16 + (lane >> 2);
    f.nk = min(nqb, qb + 1);
    f.base = qkv + (size_t)b * T * f.C3 + h * WG_HS;
    f.sKV = sQ + WG_TILE, f.dQ = wg_desc(sQ), f.dKV = wg_desc(f.sKV);
    f.map = &mqkv, f.bars = reinterpret_cast<uint64_t *>(sQ + 7 * WG_TILE), f.row0 = b * T, f.col = h * WG_HS;
    if (TMA) {
        if (threadIdx.x == 0) {
            mbar_init(&f.bars[0], 1), mbar_init(&f.bars[1], 1), mbar_init(&f.bars[2], 1);
            mbar_init_fence();
            mbar_add_tx(&f.bars[0], WG_TILE_BYTES); /* Q comes with key tile 0 */
            tma_tile(sQ, &mqkv, f.col, f.row0 + f.w0, &f.bars[0]);
            tma_key_tile(f, 0);
            if (f.nk > 1) tma_key_tile(f, 1);
        }
        __syncthreads(); /* the barriers are made before anyone waits on them */
        mbar_wait(&f.bars[0], 0);
    } else {
        load_tile_sw(sQ, f.base, f.C3, f.w0, T);
        load_kv_stage(f.sKV, f.base, f.C3, f.Cl, 0, T);
        cp_commit();
        if (f.nk > 1) load_kv_stage(f.sKV + 2 * WG_TILE, f.base, f.C3, f.Cl, 1, T);
        cp_commit(); /* perhaps empty: the waits below count groups */
        cp_wait<1>();
        wg_proxy_fence();
        __syncthreads();
    }
    float o[32], s[32], sn[32], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 32; i++) o[i] = sn[i] = 0.0f;
    wg_fence();
    wg_tile_abt(s, f.dQ, f.dKV); /* S of key tile 0 */
    wg_commit();
    wg_wait<0>();
    wg_hold(s);
    for (int kb = 0; kb < f.nk; kb++) {
        fwd_key_tile<TMA>(f, kb, s, sn, o, m, l);
#pragma unroll
        for (int i = 0; i < 32; i++) s[i] = sn[i];
    }
    fwd_finish<8>(out, lse + (size_t)bh * T, reinterpret_cast<const float(*)[4]>(o), m, l, f.r0, T,
                  (size_t)b * T * f.Cl + h * WG_HS + 2 * f.t4, f.Cl, f.t4);
}
} // namespace

/* kernel k is in this build for this device and takes `bytes` of shared memory (asked once per kernel) */
template <typename K> static int wg_usable(K kernel, size_t bytes) {
    cudaFuncAttributes at;
    int ok = cudaFuncGetAttributes(&at, kernel) == cudaSuccess &&
             cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) == cudaSuccess;
    cudaGetLastError(); /* a refusal above is an answer, not a launch's error */
    return ok;
}
/* 1 when fa_bwd_wg_k is in this build for this device (asked once) */
static int wg_bwd_ready(void) {
    static int usable = -1;
    if (usable < 0) usable = wg_usable(fa_bwd_wg_k<false>, WG_SMEM) && wg_usable(fa_bwd_wg_k<true>, WG_SMEM);
    return usable;
}
/* the forward's shared memory (the Q tile, three stages of K and V, alignment), and 1 when its kernel is in
 * this build for this device (asked once) */
constexpr size_t WG_FWD_SMEM = 7 * WG_TILE_BYTES + 64 + 1024;
static int wg_fwd_ready(void) {
    static int usable = -1;
    if (usable < 0) usable = wg_usable(fa_fwd_wg_k<false>, WG_FWD_SMEM) && wg_usable(fa_fwd_wg_k<true>, WG_FWD_SMEM);
    return usable;
}

/* The tiles come in by TMA where T allows (a multiple of 64) unless TPRT_ATTENTION_TMA=0 (asked at each
 * launch, as the other attention switches are, so that one process can run both) */
static bool tma_wanted(void) {
    const char *e = getenv("TPRT_ATTENTION_TMA");
    return !(e && !strcmp(e, "0"));
}

/* qkv's map (B*T rows of 3 * NH heads) for the TMA kernels: 0 when made and wanted, with T a multiple of 64;
 * else 1 (the map zeroed), and the kernels take their cp.async loads */
static int qkv_map(CUtensorMap *map, const bf16 *qkv, int B, int T, int NH) {
    const unsigned long long cols = 3ull * NH * WG_HS;
    memset(map, 0, sizeof *map);
    return !tma_wanted() || T % FA_TILE || tma_map_tiles(map, qkv, (unsigned long long)B * T, cols, cols);
}

extern "C" int cuda_attention_wgmma_ready(int hs) { return hs == WG_HS && wg_bwd_ready() && wg_fwd_ready(); }

int fa_bwd_wg_launch(int hs, bf16 *dqkv, float *dq, float *dbias, const bf16 *qkv, const bf16 *dout, const float *lse,
                     const float *D, int B, int T, int NH, float sl2, float scale, bool acc) {
    if (!cuda_attention_wgmma_ready(hs)) return 1;
    const int BH = B * NH;
    CUtensorMap mq, mo;
    memset(&mo, 0, sizeof mo);
    const bool tma = !qkv_map(&mq, qkv, B, T, NH) && !(((uintptr_t)lse | (uintptr_t)D) & 15) &&
                     !tma_map_tiles(&mo, dout, (unsigned long long)B * T, NH * WG_HS, NH * WG_HS);
    auto kernel = tma ? fa_bwd_wg_k<true> : fa_bwd_wg_k<false>;
    kernel<<<(unsigned)(BH * ((T + FA_TILE - 1) / FA_TILE)), FA_THREADS, WG_SMEM>>>(
        mq, mo, dqkv, dq, dbias, qkv, dout, lse, D, acc, T, NH, BH, launch_group(BH), sl2, scale);
    return launch_ok();
}

int fa_fwd_wg_launch(int hs, bf16 *out, float *lse, const bf16 *qkv, int B, int T, int NH, float sl2) {
    if (!cuda_attention_wgmma_ready(hs)) return 1;
    const int BH = B * NH, nqb = (T + FA_TILE - 1) / FA_TILE;
    CUtensorMap mq;
    auto kernel = qkv_map(&mq, qkv, B, T, NH) ? fa_fwd_wg_k<false> : fa_fwd_wg_k<true>;
    kernel<<<(unsigned)(BH * nqb), FA_THREADS, WG_FWD_SMEM>>>(mq, out, lse, qkv, T, NH, BH, launch_group(BH), sl2);
    return launch_ok();
}
