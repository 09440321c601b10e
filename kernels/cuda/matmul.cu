/* matmul.cu - out = inp @ W^T + bias with W stored (OC, IC), row-major, and
 * its backward: bf16 operands, fp32 accumulation, weight grads accumulated
 * in fp32 (beta = 1).  Products go through cuBLASLt so the bias, the GELU
 * (forward, keeping its input) and the GELU gradient (backward) run in the
 * GEMM's epilogue; TPRT_MATMUL=cublas selects plain cublasGemmEx with the
 * separate bias and GELU kernels (kept for comparison, and the fallback when
 * cuBLASLt offers no algorithm).  Row-major X (R, K) is column-major K x R,
 * so each product is written for cuBLAS on the transposed matrices. */
#include "common.cuh"
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
static void *g_lt_ws;
static int g_lt_off; /* TPRT_MATMUL=cublas */
static int g_tune = LT_TUNE_DEFAULT;

extern "C" int cuda_blas_init(void) {
    if (g_blas) return 0;
    const char *e = getenv("TPRT_MATMUL");
    g_lt_off = e && !strcmp(e, "cublas");
    const char *tune = getenv("TPRT_MATMUL_TUNE");
    if (tune && *tune) g_tune = atoi(tune);
    if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS) return -1;
    if (!g_lt_off &&
        (cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS || cudaMalloc(&g_lt_ws, LT_WORKSPACE_BYTES) != cudaSuccess)) {
        g_lt_off = 1;       /* plain cuBLAS still works */
        cudaGetLastError(); /* a failed workspace cudaMalloc must not fail the next kernel's launch check */
    }
    return 0;
}
extern "C" void cuda_blas_shutdown(void) {
    if (g_blas) cublasDestroy(g_blas);
    if (g_lt) cublasLtDestroy(g_lt);
    cudaFree(g_lt_ws);
    g_blas = NULL, g_lt = NULL, g_lt_ws = NULL;
}

extern "C" int cuda_matmul_use_lt(int lt) {
    int was = !g_lt_off;
    if (cuda_blas_init()) return was;
    g_lt_off = !(lt && g_lt && g_lt_ws);
    return was;
}

/* One GEMM: D (m x n, ldd) = op(A) op(B) + beta D, then the epilogue; A, B bf16, D bf16 or fp32.
 * bias: m values (bf16); aux: the GELU input, m x n with ld ldd, written (GELU_AUX) or read (DGELU). */
typedef struct {
    bool ta, tb;
    int m, n, k, lda, ldb, ldd;
    cudaDataType dt;
    float beta;
    cublasLtEpilogue_t epi;
    const void *A, *B, *bias;
    void *D, *aux;
} gemm_call;

/* The algorithm cuBLASLt's heuristic picked for a shape, epilogue and pointer alignment. */
typedef struct {
    int ta, tb, m, n, k, lda, ldb, ldd, dt, acc, epi, align;
    int ok;
    cublasLtMatmulAlgo_t algo;
} lt_plan;
static lt_plan g_plans[LT_PLANS];
static int g_n_plans;

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

/* Descriptors of one call; false when cuBLASLt refuses one of them. */
typedef struct {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
} lt_descs;
static void lt_descs_free(lt_descs *x) {
    if (x->desc) cublasLtMatmulDescDestroy(x->desc);
    if (x->a) cublasLtMatrixLayoutDestroy(x->a);
    if (x->b) cublasLtMatrixLayoutDestroy(x->b);
    if (x->d) cublasLtMatrixLayoutDestroy(x->d);
}
static bool lt_descs_make(const gemm_call *c, lt_descs *x) {
    memset(x, 0, sizeof *x);
    cublasOperation_t ta = c->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType bt = CUDA_R_16BF;
    int64_t ld = c->ldd;
    bool ok = cublasLtMatmulDescCreate(&x->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
              set_attr(x->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) &&
              set_attr(x->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) &&
              set_attr(x->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &c->epi, sizeof c->epi) &&
              cublasLtMatrixLayoutCreate(&x->a, CUDA_R_16BF, c->ta ? c->k : c->m, c->ta ? c->m : c->k, c->lda) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&x->b, CUDA_R_16BF, c->tb ? c->n : c->k, c->tb ? c->k : c->n, c->ldb) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&x->d, c->dt, c->m, c->n, c->ldd) == CUBLAS_STATUS_SUCCESS;
    if (ok && c->bias)
        ok = set_attr(x->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c->bias, sizeof c->bias) &&
             set_attr(x->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
    if (ok && c->aux)
        ok = set_attr(x->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &c->aux, sizeof c->aux) &&
             set_attr(x->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld) &&
             set_attr(x->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &bt, sizeof bt);
    return ok;
}

/* Time one candidate on this call (1 warm-up, LT_TUNE_RUNS timed), on D or, when the call
 * accumulates into D, on a scratch copy of D's shape so the real D is left as it was.
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
                           LT_WORKSPACE_BYTES, 0) != CUBLAS_STATUS_SUCCESS)
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
    for (int i = 0; i < found; i++) {
        float ms = lt_time(c, x, &h[i].algo, D);
        if (ms >= 0.0f && (best < 0.0f || ms < best)) best = ms, *out = h[i].algo;
    }
    cudaFree(scratch);
    return 1;
}

/* The cached plan of a call, picking its algorithm on first sight; NULL when the cache is full. */
static lt_plan *lt_plan_for(const gemm_call *c, const lt_descs *x) {
    lt_plan key;
    memset(&key, 0, sizeof key);
    key.ta = c->ta, key.tb = c->tb, key.m = c->m, key.n = c->n, key.k = c->k, key.lda = c->lda, key.ldb = c->ldb;
    key.ldd = c->ldd, key.dt = (int)c->dt, key.acc = c->beta != 0.0f, key.epi = (int)c->epi, key.align = call_align(c);
    for (int i = 0; i < g_n_plans; i++)
        if (!memcmp(&g_plans[i], &key, offsetof(lt_plan, ok))) return &g_plans[i];
    if (g_n_plans == LT_PLANS) return NULL;
    lt_plan *p = &g_plans[g_n_plans++];
    *p = key;
    cublasLtMatmulPreference_t pref;
    size_t ws = LT_WORKSPACE_BYTES;
    uint32_t al = (uint32_t)key.align;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return p;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al);
    p->ok = lt_pick(c, x, pref, &p->algo);
    cublasLtMatmulPreferenceDestroy(pref);
    return p;
}

extern "C" int cuda_matmul_tune(int candidates) {
    int was = g_tune;
    g_tune = candidates;
    g_n_plans = 0; /* plans are picked again */
    return was;
}

/* 0 done, 1 cuBLASLt cannot do this call (the caller falls back), -1 failed. */
static int lt_gemm(const gemm_call *c) {
    if (g_lt_off) return 1;
    lt_descs x;
    int rc = 1;
    if (lt_descs_make(c, &x)) {
        lt_plan *p = lt_plan_for(c, &x);
        const float one = 1.0f;
        if (p && p->ok) {
            rc = cublasLtMatmul(g_lt, x.desc, &one, c->A, x.a, c->B, x.b, &c->beta, c->D, x.d, c->D, x.d, &p->algo,
                                g_lt_ws, LT_WORKSPACE_BYTES, 0) == CUBLAS_STATUS_SUCCESS
                     ? 0
                     : 1;
            if (rc) p->ok = 0; /* refused at launch: this shape takes the plain path from now on */
        }
    }
    lt_descs_free(&x);
    return rc;
}

/* The same product through cublasGemmEx, without an epilogue. */
static int plain_gemm(const gemm_call *c) {
    const float one = 1.0f;
    cublasStatus_t s = cublasGemmEx(g_blas, c->ta ? CUBLAS_OP_T : CUBLAS_OP_N, c->tb ? CUBLAS_OP_T : CUBLAS_OP_N, c->m,
                                    c->n, c->k, &one, c->A, CUDA_R_16BF, c->lda, c->B, CUDA_R_16BF, c->ldb, &c->beta,
                                    c->D, c->dt, c->ldd, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
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
/* columns by x, row chunks by y; one atomic per (column, chunk) */
__global__ void bias_bwd_k(float *dbias, const bf16 *dout, int BT, int OC, int ld, int rows_per) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OC) return;
    int r0 = blockIdx.y * rows_per, r1 = min(BT, r0 + rows_per);
    float s = 0.0f;
    for (int r = r0; r < r1; r++) s += ldf(dout, (size_t)r * ld + o);
    atomicAdd(&dbias[o], s);
}

extern "C" int cuda_bias_add(tprt_bf16 *out, const tprt_bf16 *bias, int BT, int OC, int ld) {
    size_t n = (size_t)BT * OC;
    if (n) bias_add_k<<<grid_for(n, 256), 256>>>(BF(out), CBF(bias), BT, OC, ld);
    return launch_ok();
}
extern "C" int cuda_bias_backward(float *dbias, const tprt_bf16 *dout, int BT, int OC, int ld) {
    if (BT <= 0 || OC <= 0) return 0;
    int rows_per = 64;
    dim3 grid(grid_for((size_t)OC, 128), grid_for((size_t)BT, rows_per));
    bias_bwd_k<<<grid, 128>>>(dbias, CBF(dout), BT, OC, ld, rows_per);
    return launch_ok();
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
/* dW^T (IC x OC) += inp^T (IC x BT) . dout (BT x OC), fp32 */
static int weight_grad(float *dw, const tprt_bf16 *dout, const tprt_bf16 *inp, int BT, int IC, int OC, int ld) {
    gemm_call c;
    memset(&c, 0, sizeof c);
    c.tb = true, c.m = IC, c.n = OC, c.k = BT, c.A = inp, c.lda = IC, c.B = dout, c.ldb = ld, c.D = dw,
    c.dt = CUDA_R_32F;
    c.ldd = IC, c.beta = 1.0f, c.epi = CUBLASLT_EPILOGUE_DEFAULT;
    int rc = lt_gemm(&c);
    return rc <= 0 ? rc : plain_gemm(&c);
}

/* The backward products: the input grad added into dinp (beta 1) or
 * written over it (beta 0, GELU's gradient fused when pre_gelu is given),
 * the weight and bias grads always added. */
static int backward(tprt_bf16 *dinp, const tprt_bf16 *pre_gelu, float beta, float *dw, float *dbias,
                    const tprt_bf16 *dout, const tprt_bf16 *inp, const tprt_bf16 *w, int BT, int IC, int OC, int ld) {
    if (cuda_blas_init()) return -1;
    if (dinp && input_grad(dinp, pre_gelu, dout, w, BT, IC, OC, ld, beta)) return -1;
    if (dw && weight_grad(dw, dout, inp, BT, IC, OC, ld)) return -1;
    return dbias ? cuda_bias_backward(dbias, dout, BT, OC, ld) : launch_ok();
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
