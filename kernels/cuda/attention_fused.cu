/* attention_fused.cu - memory-efficient (flash-style) causal self-attention
 * for tprt's CUDA backend.  Never stores the T x T matrix: the forward walks
 * key tiles with an online softmax and keeps only the per-row logsumexp of
 * the scaled scores (fp32, (B, NH, T)); the backward recomputes each tile's
 * probabilities from q, k, out and that logsumexp.  One backward kernel per
 * key tile walks its query tiles: dk, dv in registers, dq as fp32 partial
 * sums added atomically into the scratch, which a last pass scales into
 * dqkv.  Tiles stream into shared memory with cp.async, double buffered
 * (the next key or query tile loads while the current one is computed).
 * bf16 operands on the tensor cores (mma.sync m16n8k16, operands through
 * ldmatrix), fp32 accumulation and softmax; P and dS are rounded to bf16
 * only as mma operands.  Tiles of 64 queries x 64 keys, 4 warps of 16 rows
 * each; key tiles above the diagonal are never visited, the diagonal (and
 * the tile holding T) is masked.  Head sizes: multiples of 16 up to 128.
 * q, k, v are read in place from qkv (B, T, 3*Cl) = [q|k|v], head h at
 * columns h*hs; dqkv is accumulated (+=) in that layout, out written as
 * (B, T, Cl). */
#include "common.cuh"
#include <stdint.h>
#include <stdlib.h>

#define FA_TILE    64
#define FA_THREADS 128
#define FA_LOG2E   1.4426950408889634f
#define FA_LN2     0.6931471805599453f

namespace {

__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
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
            mma(s[2 * np], a1, b1[0], b1[1]);
            mma(s[2 * np + 1], a1, b1[2], b1[3]);
            mma(dp[2 * np], a2, b2[0], b2[1]);
            mma(dp[2 * np + 1], a2, b2[2], b2[3]);
        }
    }
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
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

/* rows r0..r0+63 (stride `stride` elements) of one head into a 64 x (HS+8) tile, asynchronously; rows >= T
 * are zero */
template <int HS> __device__ __forceinline__ void load_tile(bf16 *dst, const bf16 *src, size_t stride, int r0, int T) {
    constexpr int CH = HS / 8, LD = HS + 8;
#pragma unroll
    for (int i = threadIdx.x; i < FA_TILE * CH; i += FA_THREADS) {
        int r = i / CH, c = i % CH;
        bool ok = r0 + r < T;
        cp16(dst + r * LD + c * 8, src + (size_t)(ok ? r0 + r : 0) * stride + c * 8, ok);
    }
}
/* dst (two bf16 at an even column) += (x, y) */
__device__ __forceinline__ void add2(bf16 *dst, float x, float y) {
    uint32_t *p = reinterpret_cast<uint32_t *>(dst);
    float o[2];
    unpack2(*p, o);
    *p = pack2(o[0] + x, o[1] + y);
}
/* dst (two fp32 at an even column, global) += (x, y), atomically */
__device__ __forceinline__ void red2(float *dst, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float2 *>(dst), make_float2(x, y));
#else
    atomicAdd(dst, x), atomicAdd(dst + 1, y);
#endif
}

/* Forward: one block per (b*NH + h, query tile); grid y runs the heaviest (last) query tiles first.
 * Shared: K and V tiles, two buffers each; Q passes through K's second buffer. */
template <int HS>
__global__ void __launch_bounds__(FA_THREADS)
    fa_fwd_k(bf16 *out, float *lse, const bf16 *qkv, int T, int NH, float sl2) {
    constexpr int LD = HS + 8, KS = HS / 16, NO = HS / 8, TL = FA_TILE * LD;
    extern __shared__ __align__(16) unsigned char fa_smem[];
    bf16 *sK = reinterpret_cast<bf16 *>(fa_smem), *sV = sK + 2 * TL;
    const int qb = gridDim.y - 1 - blockIdx.y, bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int Cl = NH * HS, C3 = 3 * Cl, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t4 = lane & 3;
    const int r0 = qb * FA_TILE + warp * 16 + (lane >> 2), r1 = r0 + 8; /* this thread's two query rows */
    const bf16 *base = qkv + (size_t)b * T * C3 + h * HS;
    load_tile<HS>(sK + TL, base, C3, qb * FA_TILE, T);
    cp_commit();
    load_tile<HS>(sK, base + Cl, C3, 0, T);
    load_tile<HS>(sV, base + 2 * Cl, C3, 0, T);
    cp_commit();
    cp_wait<1>();
    __syncthreads();
    uint32_t qf[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ks++) frag_a(qf[ks], sK + TL, LD, warp * 16, ks * 16, lane);
    __syncthreads(); /* K's second buffer is free again */
    float o[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    for (int kb = 0; kb <= qb; kb++) {
        const bf16 *cK = sK + (kb & 1) * TL, *cV = sV + (kb & 1) * TL;
        if (kb < qb) { /* the next key tile streams in while this one is computed */
            load_tile<HS>(sK + ((kb + 1) & 1) * TL, base + Cl, C3, (kb + 1) * FA_TILE, T);
            load_tile<HS>(sV + ((kb + 1) & 1) * TL, base + 2 * Cl, C3, (kb + 1) * FA_TILE, T);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        float s[8][4];
#pragma unroll
        for (int n = 0; n < 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
#pragma unroll
            for (int np = 0; np < 4; np++) {
                uint32_t bb[4];
                frag_b_nk(bb, cK, LD, np * 16, ks * 16, lane);
                mma(s[2 * np], qf[ks], bb[0], bb[1]);
                mma(s[2 * np + 1], qf[ks], bb[2], bb[3]);
            }
        const bool edge = kb == qb;
        float mx0 = m0, mx1 = m1;
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float x = s[n][e] * sl2;
                if (edge) {
                    int col = kb * FA_TILE + n * 8 + 2 * t4 + (e & 1), row = e < 2 ? r0 : r1;
                    if (col > row || col >= T) x = -INFINITY;
                }
                s[n][e] = x;
                if (e < 2)
                    mx0 = fmaxf(mx0, x);
                else
                    mx1 = fmaxf(mx1, x);
            }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float u0 = mx0 == -INFINITY ? 0.0f : mx0, u1 = mx1 == -INFINITY ? 0.0f : mx1;
        const float a0 = ex2(m0 - u0), a1 = ex2(m1 - u1);
        m0 = mx0, m1 = mx1;
        l0 *= a0, l1 *= a1;
#pragma unroll
        for (int n = 0; n < NO; n++) o[n][0] *= a0, o[n][1] *= a0, o[n][2] *= a1, o[n][3] *= a1;
#pragma unroll
        for (int n = 0; n < 8; n++) {
            s[n][0] = ex2(s[n][0] - u0), s[n][1] = ex2(s[n][1] - u0);
            s[n][2] = ex2(s[n][2] - u1), s[n][3] = ex2(s[n][3] - u1);
            l0 += s[n][0] + s[n][1], l1 += s[n][2] + s[n][3];
        }
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t pa[4];
            c_to_a(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
            for (int np = 0; np < NO / 2; np++) {
                uint32_t bb[4];
                frag_b_kn(bb, cV, LD, kk * 16, np * 16, lane);
                mma(o[2 * np], pa, bb[0], bb[1]);
                mma(o[2 * np + 1], pa, bb[2], bb[3]);
            }
        }
        __syncthreads(); /* this buffer is loaded again two tiles on */
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = 1.0f / l0, i1 = 1.0f / l1;
    bf16 *o0 = out + ((size_t)b * T + r0) * Cl + h * HS + 2 * t4, *o1 = o0 + (size_t)8 * Cl;
#pragma unroll
    for (int n = 0; n < NO; n++) {
        if (r0 < T) *reinterpret_cast<uint32_t *>(o0 + n * 8) = pack2(o[n][0] * i0, o[n][1] * i0);
        if (r1 < T) *reinterpret_cast<uint32_t *>(o1 + n * 8) = pack2(o[n][2] * i1, o[n][3] * i1);
    }
    if (t4 == 0) { /* natural-log logsumexp of the scaled scores */
        if (r0 < T) lse[(size_t)bh * T + r0] = (m0 + log2f(l0)) * FA_LN2;
        if (r1 < T) lse[(size_t)bh * T + r1] = (m1 + log2f(l1)) * FA_LN2;
    }
}

/* Before the backward, per row t of head bh: D[bh*T + t] = dout_t . out_t over the head, and the row's dq
 * partial sums (fp32, laid out as out: (B, T, Cl)) zeroed.  Eight lanes per row, 16-byte loads. */
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
        float4 *z = reinterpret_cast<float4 *>(dq + off);
        for (int c = sub; c < hs / 4; c += 8) z[c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    for (int o = 1; o < 8; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (ok && !sub) D[r] = s;
}

/* The query tile q0.. of one head into buffer `buf`: Q, dO, and the rows' logsumexp and D (zero past T). */
template <int HS>
__device__ __forceinline__ void load_query_tile(bf16 *sQ, bf16 *sO, float *sL, float *sD, const bf16 *qbase,
                                                const bf16 *dbase, const float *lse, const float *D, int C3, int Cl,
                                                int q0, int T) {
    load_tile<HS>(sQ, qbase, C3, q0, T);
    load_tile<HS>(sO, dbase, Cl, q0, T);
    const int i = threadIdx.x & (FA_TILE - 1), q = q0 + i;
    if (threadIdx.x < FA_TILE)
        cp4(sL + i, lse + (q < T ? q : 0), q < T);
    else
        cp4(sD + i, D + (q < T ? q : 0), q < T);
}

/* The backward of one key tile: one block per (b*NH + h, key tile), the heaviest (first) first; walks the
 * query tiles from the diagonal, the next one loading while this one is computed.  Per warp the
 * transposed products S^T = K Q^T, dP^T = V dO^T (16 keys x 64 queries) give dv += P^T dO and
 * dk += dS^T Q in registers; dS^T goes through shared memory so that each warp then takes 16 query rows
 * of dS K and adds them (fp32, atomically) to the dq partial sums.
 * Shared: K, V; Q, dO two buffers each; dS^T (64 x 72); logsumexp and D, two buffers. */
template <int HS>
__global__ void __launch_bounds__(FA_THREADS)
    fa_bwd_k(bf16 *dqkv, float *dq, const bf16 *qkv, const bf16 *dout, const float *lse, const float *D, int T, int NH,
             float sl2, float scale) {
    constexpr int LD = HS + 8, KS = HS / 16, NO = HS / 8, TL = FA_TILE * LD, LS = FA_TILE + 8;
    extern __shared__ __align__(16) unsigned char fa_smem[];
    bf16 *sK = reinterpret_cast<bf16 *>(fa_smem), *sV = sK + TL, *sQ = sV + TL, *sO = sQ + 2 * TL, *sS = sO + 2 * TL;
    float *sL = reinterpret_cast<float *>(sS + FA_TILE * LS), *sD = sL + 2 * FA_TILE;
    const int kb = blockIdx.y, nqb = gridDim.y, bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int Cl = NH * HS, C3 = 3 * Cl, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t4 = lane & 3;
    const int k0 = kb * FA_TILE + warp * 16 + (lane >> 2), k1 = k0 + 8; /* this thread's two key rows */
    const bf16 *base = qkv + (size_t)b * T * C3 + h * HS, *dbase = dout + (size_t)b * T * Cl + h * HS;
    const float *lrow = lse + (size_t)bh * T, *drow = D + (size_t)bh * T;
    float *dqb = dq + (size_t)b * T * Cl + h * HS + 2 * t4;
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
        if (qb + 1 < nqb) { /* the buffer read two tiles ago: free since the second barrier below */
            load_query_tile<HS>(sQ + (cur ^ 1) * TL, sO + (cur ^ 1) * TL, sL + (cur ^ 1) * FA_TILE,
                                sD + (cur ^ 1) * FA_TILE, base, dbase, lrow, drow, C3, Cl, (qb + 1) * FA_TILE, T);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        const bf16 *cQ = sQ + cur * TL, *cO = sO + cur * TL;
        const float *cL = sL + cur * FA_TILE, *cD = sD + cur * FA_TILE;
        float s[8][4], dp[8][4];
        two_tile_products<KS>(s, dp, sK, sV, cQ, cO, LD, warp, lane);
        const bool edge = qb == kb || qb * FA_TILE + FA_TILE > T;
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int ql = n * 8 + 2 * t4 + (e & 1), q = qb * FA_TILE + ql, key = e < 2 ? k0 : k1;
                float p = ex2(s[n][e] * sl2 - cL[ql] * FA_LOG2E);
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
                mma(dv[2 * np], pa, bo[0], bo[1]);
                mma(dv[2 * np + 1], pa, bo[2], bo[3]);
                mma(dk[2 * np], da, bq[0], bq[1]);
                mma(dk[2 * np + 1], da, bq[2], bq[3]);
            }
        }
        bf16 *w = sS + (warp * 16 + (lane >> 2)) * LS + 2 * t4; /* dS^T: rows keys, columns queries */
#pragma unroll
        for (int n = 0; n < 8; n++) {
            *reinterpret_cast<uint32_t *>(w + n * 8) = pack2(dp[n][0], dp[n][1]);
            *reinterpret_cast<uint32_t *>(w + 8 * LS + n * 8) = pack2(dp[n][2], dp[n][3]);
        }
        __syncthreads();
        uint32_t da[4][4]; /* dS rows warp*16.., all 64 keys, as A operands */
#pragma unroll
        for (int kk = 0; kk < 4; kk++) frag_a_t(da[kk], sS, LS, warp * 16, kk * 16, lane);
        const int q0 = qb * FA_TILE + warp * 16 + (lane >> 2), q1 = q0 + 8;
        float *d0 = dqb + (size_t)q0 * Cl, *d1 = d0 + (size_t)8 * Cl;
#pragma unroll
        for (int np = 0; np < NO / 2; np++) {
            float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                uint32_t bk[4];
                frag_b_kn(bk, sK, LD, kk * 16, np * 16, lane);
                mma(acc[0], da[kk], bk[0], bk[1]);
                mma(acc[1], da[kk], bk[2], bk[3]);
            }
#pragma unroll
            for (int j = 0; j < 2; j++) {
                if (q0 < T) red2(d0 + np * 16 + j * 8, acc[j][0], acc[j][1]);
                if (q1 < T) red2(d1 + np * 16 + j * 8, acc[j][2], acc[j][3]);
            }
        }
    }
    bf16 *g0 = dqkv + ((size_t)b * T + k0) * C3 + Cl + h * HS + 2 * t4, *g1 = g0 + (size_t)8 * C3;
#pragma unroll
    for (int n = 0; n < NO; n++) {
        if (k0 < T) add2(g0 + n * 8, dk[n][0] * scale, dk[n][1] * scale), add2(g0 + Cl + n * 8, dv[n][0], dv[n][1]);
        if (k1 < T) add2(g1 + n * 8, dk[n][2] * scale, dk[n][3] * scale), add2(g1 + Cl + n * 8, dv[n][2], dv[n][3]);
    }
}

/* dqkv's q part += scale * the dq partial sums, eight elements a thread */
__global__ void fa_bwd_dq_add_k(bf16 *dqkv, const float *dq, size_t n8, int Cl, float scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    size_t e = i * 8, row = e / (size_t)Cl, col = e % (size_t)Cl;
    bf16 *g = dqkv + row * 3 * (size_t)Cl + col;
    float4 x = reinterpret_cast<const float4 *>(dq + e)[0], y = reinterpret_cast<const float4 *>(dq + e)[1];
    float f[8];
    unpack8(ld_vec8(g), f);
    f[0] += scale * x.x, f[1] += scale * x.y, f[2] += scale * x.z, f[3] += scale * x.w;
    f[4] += scale * y.x, f[5] += scale * y.y, f[6] += scale * y.z, f[7] += scale * y.w;
    st_vec8(g, pack8(f));
}

template <typename K> int smem_opt_in(K kernel, size_t bytes) { /* above 48 KiB the kernel must opt in */
    if (bytes <= 48 * 1024) return 0;
    return -(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != cudaSuccess);
}

template <int HS> int fwd_launch(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int NH, float sl2) {
    size_t sm = (size_t)4 * FA_TILE * (HS + 8) * sizeof(bf16); /* K, V: two buffers each */
    if (smem_opt_in(fa_fwd_k<HS>, sm)) return -1;
    dim3 grid((unsigned)(B * NH), (unsigned)((T + FA_TILE - 1) / FA_TILE)); /* heads by x, tiles by y */
    fa_fwd_k<HS><<<grid, FA_THREADS, sm>>>(out, lse, qkv, T, NH, sl2);
    return launch_ok();
}
template <int HS>
int bwd_launch(bf16 *dqkv, float *dq, const bf16 *qkv, const bf16 *dout, const float *lse, const float *D, int B, int T,
               int NH, float sl2, float scale) {
    size_t sm = (6 * FA_TILE * (HS + 8) + FA_TILE * (FA_TILE + 8)) * sizeof(bf16) + 4 * FA_TILE * sizeof(float);
    size_t n8 = (size_t)B * T * NH * HS / 8;
    if (smem_opt_in(fa_bwd_k<HS>, sm)) return -1;
    dim3 grid((unsigned)(B * NH), (unsigned)((T + FA_TILE - 1) / FA_TILE)); /* heads by x, tiles by y */
    fa_bwd_k<HS><<<grid, FA_THREADS, sm>>>(dqkv, dq, qkv, dout, lse, D, T, NH, sl2, scale);
    fa_bwd_dq_add_k<<<grid_for(n8, 256), 256>>>(dqkv, dq, n8, NH * HS, scale);
    return launch_ok();
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

/* the scratch: D (B*NH*T fp32), then at a 256-byte boundary the dq partial sums (B, T, Cl) fp32, sized
 * for the largest head size since the head size is not known here */
static size_t dot_bytes(int B, int T, int NH) { return ((size_t)B * NH * T * sizeof(float) + 255) & ~(size_t)255; }
extern "C" size_t cuda_attention_fused_scratch_bytes(int B, int T, int NH) {
    return dot_bytes(B, T, NH) + (size_t)B * NH * T * 128 * sizeof(float) + 256;
}

extern "C" int cuda_attention_fused_forward(tprt_bf16 *out, float *lse, const tprt_bf16 *qkv, int B, int T, int Cl,
                                            int NH) {
    if (!cuda_attention_fused_supported(Cl, NH)) return -1;
    if ((size_t)B * T * Cl == 0) return 0;
    int hs = Cl / NH;
    float sl2 = FA_LOG2E / sqrtf((float)hs);
#define FA_FWD(H) fwd_launch<H>(BF(out), lse, CBF(qkv), B, T, NH, sl2)
    FA_SWITCH(hs, FA_FWD)
#undef FA_FWD
}

extern "C" int cuda_attention_fused_backward(tprt_bf16 *dqkv, const tprt_bf16 *dout, const tprt_bf16 *qkv,
                                             const tprt_bf16 *out, const float *lse, void *scratch, int B, int T,
                                             int Cl, int NH) {
    if (!cuda_attention_fused_supported(Cl, NH)) return -1;
    if ((size_t)B * T * Cl == 0) return 0;
    int hs = Cl / NH, rows = B * NH * T;
    float scale = 1.0f / sqrtf((float)hs), sl2 = FA_LOG2E * scale, *D = (float *)scratch;
    float *dq = (float *)((char *)scratch + dot_bytes(B, T, NH));
    fa_bwd_dot_k<<<grid_for((size_t)rows, 32), 256>>>(D, dq, CBF(out), CBF(dout), B, T, NH, hs);
#define FA_BWD(H) bwd_launch<H>(BF(dqkv), dq, CBF(qkv), CBF(dout), lse, D, B, T, NH, sl2, scale)
    FA_SWITCH(hs, FA_BWD)
#undef FA_BWD
}
