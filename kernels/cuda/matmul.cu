/* matmul.cu - out = inp @ W^T + bias with W stored (OC, IC), row-major, and
 * its backward: bf16 operands, fp32 accumulation, weight and bias grads
 * accumulated in fp32.  Products go through cuBLASLt so the bias, the GELU
 * (forward, keeping its input), the GELU gradient and the bias gradient
 * (backward) run in the GEMM's epilogue; each product shape keeps its
 * descriptors, layouts and picked algorithm, so a call after the first
 * only sets its pointers and launches.  TPRT_MATMUL=cublas selects plain
 * cublasGemmEx with the separate bias, GELU and bias-grad kernels (kept for
 * comparison, and the fallback whenever cuBLASLt refuses a call).
 * Row-major X (R, K) is column-major K x R, so each product is written for
 * cuBLAS on the transposed matrices. */
#include "bias_grad.cuh"
#include "common.cuh"
#include "wgrad_stream.h"
#include <cublasLt.h>
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

#define LT_WORKSPACE_BYTES (32u << 20)
#define LT_PLANS           96
#define LT_TUNE_MAX        16
#define LT_TUNE_DEFAULT    8 /* candidates timed per shape; TPRT_MATMUL_TUNE overrides */

static cublasHandle_t g_blas;
static cublasLtHandle_t g_lt;
static void *g_lt_ws, *g_lt_ws_side; /* the second: weight grads on the stream of wgrad_stream.c */
static int g_lt_off;                 /* TPRT_MATMUL=cublas */
static int g_tune = LT_TUNE_DEFAULT;
static int g_bias_mode;     /* TPRT_BIAS_GRAD_FUSED, _EPILOGUE, _TILE or _COLUMN (env TPRT_BIAS_GRAD) */
static int g_grads_fresh;   /* cuda_matmul_grads_fresh(): dw is written (beta 0), the epilogue may write dbias */
static float *g_bg_scratch; /* an epilogue's bias grad before it is added into dbias */
static int g_bg_scratch_n;
static long g_bg_fused, g_bg_refused;

/* The stream handle for cuBLAS: a library takes 0 as the legacy stream, so the compute stream (this
 * build's per-thread default stream) is named. */
static cudaStream_t blas_stream(cudaStream_t st) { return st ? st : cudaStreamPerThread; }

static int bias_mode_of(const char *e) {
    /* not the weight grad's BGRADB epilogue by default: on an H200 it made the weight grad slower than
     * the tile kernel costs (kernels/bench/gemm_bench.c, kernels/docs/TPRT.md) */
    if (e && !strcmp(e, "epilogue")) return TPRT_BIAS_GRAD_EPILOGUE;
    if (e && !strcmp(e, "column")) return TPRT_BIAS_GRAD_COLUMN;
    if (e && !strcmp(e, "tile")) return TPRT_BIAS_GRAD_TILE;
    return TPRT_BIAS_GRAD_FUSED;
}

extern "C" int cuda_blas_init(void) {
    if (g_blas) return 0;
    const char *e = getenv("TPRT_MATMUL");
    g_lt_off = e && !strcmp(e, "cublas");
    const char *tune = getenv("TPRT_MATMUL_TUNE");
    if (tune && *tune) g_tune = atoi(tune);
    g_bias_mode = bias_mode_of(getenv("TPRT_BIAS_GRAD"));
    if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(g_blas, blas_stream(0)) != CUBLAS_STATUS_SUCCESS)
        return -1;
    if (!g_lt_off &&
        (cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS || cudaMalloc(&g_lt_ws, LT_WORKSPACE_BYTES) != cudaSuccess)) {
        g_lt_off = 1;       /* plain cuBLAS still works */
        cudaGetLastError(); /* a failed workspace cudaMalloc must not fail the next kernel's launch check */
    }
    return 0;
}

extern "C" int cuda_matmul_use_lt(int lt) {
    if (cuda_blas_init()) return !g_lt_off;
    int was = !g_lt_off; /* after the init, which reads TPRT_MATMUL */
    g_lt_off = !(lt && g_lt && g_lt_ws);
    return was;
}

/* One GEMM: D (m x n, ldd) = op(A) op(B) + beta D, then the epilogue; A, B bf16, D bf16 or fp32.
 * bias: m values (bf16), or with BGRADB the n sums of op(B) over k (fp32, written);
 * aux: the GELU input, m x n with ld ldd, written (GELU_AUX) or read (DGELU). */
typedef struct {
    bool ta, tb;
    int m, n, k, lda, ldb, ldd;
    cudaDataType dt;
    float beta;
    cublasLtEpilogue_t epi;
    const void *A, *B, *bias;
    void *D, *aux;
    cudaStream_t st; /* the compute stream (0), or the weight-grad stream */
} gemm_call;

/* Descriptors of one product shape; the pointers in them are set per call. */
typedef struct {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
} lt_descs;

/* A product shape, epilogue and pointer alignment: its descriptors and the algorithm picked. */
typedef struct {
    int ta, tb, m, n, k, lda, ldb, ldd, dt, acc, epi, align, bias_align;
    int ok;
    lt_descs x;
    cublasLtMatmulAlgo_t algo;
} lt_plan;
static lt_plan g_plans[LT_PLANS];
static int g_n_plans;

static void lt_descs_free(lt_descs *x) {
    if (x->desc) cublasLtMatmulDescDestroy(x->desc);
    if (x->a) cublasLtMatrixLayoutDestroy(x->a);
    if (x->b) cublasLtMatrixLayoutDestroy(x->b);
    if (x->d) cublasLtMatrixLayoutDestroy(x->d);
    memset(x, 0, sizeof *x);
}
static void lt_plans_forget(void) {
    for (int i = 0; i < g_n_plans; i++) lt_descs_free(&g_plans[i].x);
    g_n_plans = 0;
}

extern "C" void cuda_blas_shutdown(void) {
    lt_plans_forget();
    if (g_blas) cublasDestroy(g_blas);
    if (g_lt) cublasLtDestroy(g_lt);
    cudaFree(g_lt_ws);
    cudaFree(g_lt_ws_side);
    cudaFree(g_bg_scratch);
    g_blas = NULL, g_lt = NULL, g_lt_ws = NULL, g_lt_ws_side = NULL, g_bg_scratch = NULL, g_bg_scratch_n = 0;
}

static int align_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int b = 256;
    while (b > 2 && a % (uintptr_t)b) b /= 2;
    return b;
}
static int call_align(const gemm_call *c) {
    int a = align_of(c->A), b = align_of(c->B), d = align_of(c->D);
    int r = a < b ? a : b;
    r = r < d ? r : d;
    if (c->aux && align_of(c->aux) < r) r = align_of(c->aux);
    return r;
}

static bool set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t a, const void *v, size_t n) {
    return cublasLtMatmulDescSetAttribute(desc, a, v, n) == CUBLAS_STATUS_SUCCESS;
}
/* This call's bias and aux pointers on its shape's descriptor. */
static bool lt_set_pointers(const gemm_call *c, cublasLtMatmulDesc_t desc) {
    return (!c->bias || set_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c->bias, sizeof c->bias)) &&
           (!c->aux || set_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &c->aux, sizeof c->aux));
}

/* Descriptors of one call; false when cuBLASLt refuses one of them. */
static bool lt_descs_make(const gemm_call *c, lt_descs *x) {
    memset(x, 0, sizeof *x);
    cublasOperation_t ta = c->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType bt = CUDA_R_16BF, gt = CUDA_R_32F; /* the bias (bf16) or bias grad (fp32, D's type) */
    int64_t ld = c->ldd;
    bool ok = cublasLtMatmulDescCreate(&x->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
              set_attr(x->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) &&
              set_attr(x->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) &&
              set_attr(x->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &c->epi, sizeof c->epi) &&
              cublasLtMatrixLayoutCreate(&x->a, CUDA_R_16BF, c->ta ? c->k : c->m, c->ta ? c->m : c->k, c->lda) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&x->b, CUDA_R_16BF, c->tb ? c->n : c->k, c->tb ? c->k : c->n, c->ldb) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&x->d, c->dt, c->m, c->n, c->ldd) == CUBLAS_STATUS_SUCCESS &&
              lt_set_pointers(c, x->desc);
    if (ok && c->bias) {
        const cudaDataType *t = c->epi == CUBLASLT_EPILOGUE_BGRADB ? &gt : &bt;
        ok = set_attr(x->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, t, sizeof *t);
    }
    if (ok && c->aux)
        ok = set_attr(x->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld) &&
             set_attr(x->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &bt, sizeof bt);
    return ok;
}

/* Time one candidate on this call (1 warm-up, LT_TUNE_RUNS timed), on D or, when the call
 * accumulates into D, on a scratch copy of D's shape so the real D is left as it was (a bias
 * grad is written, not added, so running it again leaves the same values).
 * Returns milliseconds, or -1 when the algorithm fails. */
#define LT_TUNE_RUNS 3
static float lt_time(const gemm_call *c, const lt_descs *x, const cublasLtMatmulAlgo_t *algo, void *D) {
    const float one = 1.0f;
    cudaEvent_t e0, e1;
    float ms = -1.0f;
    if (cudaEventCreate(&e0) != cudaSuccess) return -1.0f;
    if (cudaEventCreate(&e1) != cudaSuccess) {
        cudaEventDestroy(e0);
        return -1.0f;
    }
    for (int i = 0; i <= LT_TUNE_RUNS; i++) {
        if (i == 1) cudaEventRecord(e0, 0);
        if (cublasLtMatmul(g_lt, x->desc, &one, c->A, x->a, c->B, x->b, &c->beta, D, x->d, D, x->d, algo, g_lt_ws,
                           LT_WORKSPACE_BYTES, blas_stream(0)) != CUBLAS_STATUS_SUCCESS)
            break;
        if (i == LT_TUNE_RUNS) {
            cudaEventRecord(e1, 0);
            if (cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess)
                ms /= LT_TUNE_RUNS;
        }
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    cudaGetLastError(); /* a refused candidate leaves no error behind */
    return ms;
}

/* The fastest of the heuristic's first g_tune candidates for this call (the first one when
 * g_tune is 1 or timing is impossible). */
static int lt_pick(const gemm_call *c, const lt_descs *x, cublasLtMatmulPreference_t pref, cublasLtMatmulAlgo_t *out) {
    cublasLtMatmulHeuristicResult_t h[LT_TUNE_MAX];
    int found = 0, want = g_tune < 1 ? 1 : g_tune > LT_TUNE_MAX ? LT_TUNE_MAX : g_tune;
    if (cublasLtMatmulAlgoGetHeuristic(g_lt, x->desc, x->a, x->b, x->d, x->d, pref, want, h, &found) !=
            CUBLAS_STATUS_SUCCESS ||
        found < 1)
        return 0;
    *out = h[0].algo;
    if (found == 1) return 1;
    size_t bytes = (size_t)c->ldd * (size_t)c->n * (c->dt == CUDA_R_32F ? 4 : 2);
    void *D = c->D, *scratch = NULL;
    if (c->beta != 0.0f) {
        if (cudaMalloc(&scratch, bytes) != cudaSuccess) {
            cudaGetLastError();
            return 1;
        }
        D = scratch;
    }
    float best = -1.0f;
    cudaDeviceSynchronize(); /* timed alone: no deferred weight grad runs beside the candidates */
    for (int i = 0; i < found; i++) {
        float ms = lt_time(c, x, &h[i].algo, D);
        if (ms >= 0.0f && (best < 0.0f || ms < best)) best = ms, *out = h[i].algo;
    }
    cudaFree(scratch);
    return 1;
}

/* The plan of a call's shape, made (descriptors, algorithm) on first sight; NULL when the cache is full. */
static lt_plan *lt_plan_for(const gemm_call *c) {
    lt_plan key;
    memset(&key, 0, sizeof key);
    key.ta = c->ta, key.tb = c->tb, key.m = c->m, key.n = c->n, key.k = c->k, key.lda = c->lda, key.ldb = c->ldb;
    key.ldd = c->ldd, key.dt = (int)c->dt, key.acc = c->beta != 0.0f, key.epi = (int)c->epi, key.align = call_align(c);
    key.bias_align = c->bias ? align_of(c->bias) : 0; /* the heuristic reads the bias pointer's alignment */
    for (int i = 0; i < g_n_plans; i++)
        if (!memcmp(&g_plans[i], &key, offsetof(lt_plan, ok))) return &g_plans[i];
    if (g_n_plans == LT_PLANS) return NULL;
    lt_plan *p = &g_plans[g_n_plans++];
    *p = key;
    if (!lt_descs_make(c, &p->x)) return p; /* ok 0: this shape takes the plain path */
    cublasLtMatmulPreference_t pref;
    size_t ws = LT_WORKSPACE_BYTES;
    uint32_t al = (uint32_t)key.align;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return p;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al);
    p->ok = lt_pick(c, &p->x, pref, &p->algo);
    cublasLtMatmulPreferenceDestroy(pref);
    return p;
}

extern "C" int cuda_matmul_tune(int candidates) {
    int was = g_tune;
    g_tune = candidates;
    lt_plans_forget(); /* plans are picked again */
    return was;
}

/* 0 done, 1 cuBLASLt cannot do this call (the caller falls back). */
static int lt_gemm(const gemm_call *c) {
    if (g_lt_off) return 1;
    lt_plan *p = lt_plan_for(c);
    if (!p || !p->ok || !lt_set_pointers(c, p->x.desc)) return 1;
    const float one = 1.0f;
    if (cublasLtMatmul(g_lt, p->x.desc, &one, c->A, p->x.a, c->B, p->x.b, &c->beta, c->D, p->x.d, c->D, p->x.d,
                       &p->algo, c->st ? g_lt_ws_side : g_lt_ws, LT_WORKSPACE_BYTES,
                       blas_stream(c->st)) == CUBLAS_STATUS_SUCCESS)
        return 0;
    p->ok = 0; /* refused at launch: this shape takes the plain path from now on */
    return 1;
}

/* The same product through cublasGemmEx, without an epilogue. */
static int plain_gemm(const gemm_call *c) {
    const float one = 1.0f;
    if (c->st && cublasSetStream(g_blas, c->st) != CUBLAS_STATUS_SUCCESS) return -1; /* else the compute stream */
    cublasStatus_t s = cublasGemmEx(g_blas, c->ta ? CUBLAS_OP_T : CUBLAS_OP_N, c->tb ? CUBLAS_OP_T : CUBLAS_OP_N, c->m,
                                    c->n, c->k, &one, c->A, CUDA_R_16BF, c->lda, c->B, CUDA_R_16BF, c->ldb, &c->beta,
                                    c->D, c->dt, c->ldd, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (c->st) cublasSetStream(g_blas, blas_stream(0));
    return s == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}

__global__ void bias_add_k(bf16 *out, const bf16 *bias, int BT, int OC, int ld) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * OC) return;
    size_t r = i / OC;
    int o = (int)(i % OC);
    bf16 *p = out + r * ld + o;
    *p = tobf(__bfloat162float(*p) + ldf(bias, o));
}
extern "C" int cuda_bias_add(tprt_bf16 *out, const tprt_bf16 *bias, int BT, int OC, int ld) {
    size_t n = (size_t)BT * OC;
    if (n) bias_add_k<<<grid_for(n, 256), 256>>>(BF(out), CBF(bias), BT, OC, ld);
    return launch_ok();
}
/* The standalone bias grad on stream st: the tile kernel where it fits (the column kernel in
 * TPRT_BIAS_GRAD_COLUMN). */
static int bias_backward_on(float *dbias, const tprt_bf16 *dout, int BT, int OC, int ld, cudaStream_t st) {
    if (BT <= 0 || OC <= 0) return 0;
    if (g_bias_mode != TPRT_BIAS_GRAD_COLUMN && bias_grad_tile_fits(CBF(dout), OC, ld))
        return bias_grad_tile(dbias, CBF(dout), BT, OC, ld, st);
    return bias_grad_column(dbias, CBF(dout), BT, OC, ld, st);
}
extern "C" int cuda_bias_backward(float *dbias, const tprt_bf16 *dout, int BT, int OC, int ld) {
    return bias_backward_on(dbias, dout, BT, OC, ld, 0);
}

extern "C" int cuda_bias_grad_mode(int mode) {
    if (cuda_blas_init()) return g_bias_mode;
    int was = g_bias_mode; /* after the init, which reads TPRT_BIAS_GRAD */
    if (mode >= 0) g_bias_mode = mode;
    return was;
}
extern "C" int cuda_matmul_grads_fresh(int fresh) {
    int was = g_grads_fresh;
    g_grads_fresh = fresh;
    return was;
}
extern "C" void cuda_matmul_bias_grad_counts(long *fused, long *refused) {
    *fused = g_bg_fused, *refused = g_bg_refused;
}

/* Where the epilogue writes a bias grad of n values that is then added into dbias; NULL without memory. */
static float *bias_grad_scratch(int n) {
    if (n > g_bg_scratch_n) {
        cudaFree(g_bg_scratch);
        g_bg_scratch = NULL, g_bg_scratch_n = 0;
        if (cudaMalloc((void **)&g_bg_scratch, (size_t)n * sizeof(float)) != cudaSuccess) {
            cudaGetLastError();
            g_bg_scratch = NULL;
            return NULL;
        }
        g_bg_scratch_n = n;
    }
    return g_bg_scratch;
}

/* out^T (OC x BT) = W (OC x IC: W^T stored) . inp^T (IC x BT), with an epilogue */
static gemm_call forward_call(tprt_bf16 *out, const tprt_bf16 *inp, const tprt_bf16 *w, int BT, int IC, int OC,
                              int ld) {
    gemm_call c;
    memset(&c, 0, sizeof c);
    c.ta = true, c.m = OC, c.n = BT, c.k = IC, c.A = w, c.lda = IC, c.B = inp, c.ldb = IC, c.D = out,
    c.dt = CUDA_R_16BF;
    c.ldd = ld, c.epi = CUBLASLT_EPILOGUE_DEFAULT;
    return c;
}

extern "C" int cuda_matmul_forward(tprt_bf16 *out, const tprt_bf16 *inp, const tprt_bf16 *w, const tprt_bf16 *bias,
                                   int BT, int IC, int OC, int ld) {
    if (cuda_blas_init()) return -1;
    gemm_call c = forward_call(out, inp, w, BT, IC, OC, ld);
    if (bias) c.epi = CUBLASLT_EPILOGUE_BIAS, c.bias = bias;
    int rc = lt_gemm(&c);
    if (rc <= 0) return rc;
    if (plain_gemm(&c)) return -1;
    return bias ? cuda_bias_add(out, bias, BT, OC, ld) : launch_ok();
}

extern "C" int cuda_matmul_gelu_forward(tprt_bf16 *out, tprt_bf16 *pre, const tprt_bf16 *inp, const tprt_bf16 *w,
                                        const tprt_bf16 *bias, int BT, int IC, int OC) {
    if (cuda_blas_init()) return -1;
    gemm_call c = forward_call(out, inp, w, BT, IC, OC, OC);
    c.epi = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX, c.bias = bias, c.aux = pre;
    int rc = lt_gemm(&c);
    if (rc <= 0) return rc;
    c.D = pre; /* fallback: the product into pre, bias, then GELU into out */
    if (plain_gemm(&c) || (bias && cuda_bias_add(pre, bias, BT, OC, OC))) return -1;
    return cuda_gelu_forward(out, pre, (size_t)BT * OC);
}

/* dinp^T (IC x BT) = W^T (IC x OC) . dout^T (OC x BT) + beta dinp^T, then the epilogue */
static int input_grad(tprt_bf16 *dinp, const tprt_bf16 *pre_gelu, const tprt_bf16 *dout, const tprt_bf16 *w, int BT,
                      int IC, int OC, int ld, float beta) {
    gemm_call c;
    memset(&c, 0, sizeof c);
    c.m = IC, c.n = BT, c.k = OC, c.A = w, c.lda = IC, c.B = dout, c.ldb = ld, c.D = dinp, c.dt = CUDA_R_16BF,
    c.ldd = IC;
    c.beta = beta, c.epi = pre_gelu ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT;
    c.aux = (void *)pre_gelu;
    int rc = lt_gemm(&c);
    if (rc <= 0) return rc;
    if (plain_gemm(&c)) return -1;
    return pre_gelu ? cuda_gelu_scale_by_slope(dinp, pre_gelu, (size_t)BT * IC) : launch_ok();
}
/* dW^T (IC x OC) += inp^T (IC x BT) . dout (BT x OC), fp32, or = while the grads are fresh
 * (cuda_matmul_grads_fresh); with dbias, the bias grad (dout summed over BT: op(B)'s k) in the same
 * GEMM's BGRADB epilogue when cuBLASLt takes it, written into dbias while the grads are fresh, else
 * into a scratch then added; *bias_done says it ran. */
static int weight_grad(float *dw, float *dbias, const tprt_bf16 *dout, const tprt_bf16 *inp, int BT, int IC, int OC,
                       int ld, int *bias_done, cudaStream_t st) {
    gemm_call c;
    memset(&c, 0, sizeof c);
    c.st = st, c.tb = true, c.m = IC, c.n = OC, c.k = BT, c.A = inp, c.lda = IC, c.B = dout, c.ldb = ld, c.D = dw,
    c.dt = CUDA_R_32F;
    c.ldd = IC, c.beta = g_grads_fresh ? 0.0f : 1.0f, c.epi = CUBLASLT_EPILOGUE_DEFAULT;
    *bias_done = 0;
    float *dst = !dbias || g_lt_off || g_bias_mode != TPRT_BIAS_GRAD_EPILOGUE ? NULL
                 : g_grads_fresh                                              ? dbias
                                                                              : bias_grad_scratch(OC);
    if (dst) {
        gemm_call e = c;
        e.epi = CUBLASLT_EPILOGUE_BGRADB, e.bias = dst;
        if (!lt_gemm(&e)) {
            g_bg_fused++, *bias_done = 1;
            return dst == dbias ? 0 : bias_grad_acc(dbias, dst, OC, st);
        }
        g_bg_refused++;
    }
    int rc = lt_gemm(&c);
    return rc <= 0 ? rc : plain_gemm(&c);
}

/* The stream for this call's weight and bias grads: the weight-grad stream while the backward
 * defers them (wgrad_stream.c) and its workspace can be had, else the compute stream (0). */
static cudaStream_t weight_grad_stream(void) {
    if (!cuda_wgrad_deferring()) return 0;
    if (!g_lt_off && !g_lt_ws_side && cudaMalloc(&g_lt_ws_side, LT_WORKSPACE_BYTES) != cudaSuccess) {
        cudaGetLastError();
        g_lt_ws_side = NULL;
        return 0;
    }
    return cuda_wgrad_open();
}

/* The weight and bias grads of one backward on stream st. */
static int weight_and_bias_grads(float *dw, float *dbias, const tprt_bf16 *dout, const tprt_bf16 *inp, int BT, int IC,
                                 int OC, int ld, cudaStream_t st) {
    int bias_done = 0;
    if (dw && weight_grad(dw, dbias, dout, inp, BT, IC, OC, ld, &bias_done, st)) return -1;
    return dbias && !bias_done ? bias_backward_on(dbias, dout, BT, OC, ld, st) : 0;
}

/* The backward products: the input grad added into dinp (beta 1) or
 * written over it (beta 0, GELU's gradient fused when pre_gelu is given),
 * the weight and bias grads added (written while the grads are fresh): after the input grad on the
 * compute stream, or first issued on the weight-grad stream when the
 * backward defers them (their inputs marked ready before the input grad
 * is issued, so the two products may run side by side). */
static int backward(tprt_bf16 *dinp, const tprt_bf16 *pre_gelu, float beta, float *dw, float *dbias,
                    const tprt_bf16 *dout, const tprt_bf16 *inp, const tprt_bf16 *w, int BT, int IC, int OC, int ld) {
    if (cuda_blas_init()) return -1;
    cudaStream_t st = dw || dbias ? weight_grad_stream() : 0;
    if (st) {
        int rc = weight_and_bias_grads(dw, dbias, dout, inp, BT, IC, OC, ld, st);
        if (cuda_wgrad_close() || rc) return -1;
    }
    if (dinp && input_grad(dinp, pre_gelu, dout, w, BT, IC, OC, ld, beta)) return -1;
    if (!st && weight_and_bias_grads(dw, dbias, dout, inp, BT, IC, OC, ld, 0)) return -1;
    return launch_ok();
}

extern "C" int cuda_matmul_backward(tprt_bf16 *dinp, float *dw, float *dbias, const tprt_bf16 *dout,
                                    const tprt_bf16 *inp, const tprt_bf16 *w, int BT, int IC, int OC, int ld) {
    return backward(dinp, NULL, 1.0f, dw, dbias, dout, inp, w, BT, IC, OC, ld);
}

extern "C" int cuda_matmul_backward_set(tprt_bf16 *dinp, const tprt_bf16 *pre_gelu, float *dw, float *dbias,
                                        const tprt_bf16 *dout, const tprt_bf16 *inp, const tprt_bf16 *w, int BT, int IC,
                                        int OC, int ld) {
    return backward(dinp, pre_gelu, 0.0f, dw, dbias, dout, inp, w, BT, IC, OC, ld);
}

/* Strided batched product for attention.cu (same conventions). */
extern "C" int tprt_cuda_gemm_batched(bool ta, bool tb, int m, int n, int k, float alpha, const void *A, int lda,
                                      long long sa, const void *B, int ldb, long long sb, float beta, void *C,
                                      int c_fp32, int ldc, long long sc, int batch) {
    if (cuda_blas_init()) return -1;
    cublasStatus_t s = cublasGemmStridedBatchedEx(
        g_blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, A, CUDA_R_16BF, lda,
        sa, B, CUDA_R_16BF, ldb, sb, &beta, C, c_fp32 ? CUDA_R_32F : CUDA_R_16BF, ldc, sc, batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}
