/* gemm_bench.c - times each matrix product of a tprt GPT-2 124M step on one
 * GPU through tprt's own launchers (matmul.cu), on both product paths
 * (cuBLASLt with epilogues, its algorithm timed among 8 candidates or its
 * heuristic's first pick; plain cublasGemmEx with separate kernels): the
 * four forward products of a layer and the LM head, each backward split in
 * its input grad, weight grad (fp32, accumulated) and bias grad (the
 * standalone kernel).  The LM head is timed at its vocab rounded up to a
 * multiple of 64, as tprt runs it, and at the odd 50257, to show what
 * padding saves.  Prints per product the median of 20 timed runs
 * (cudaEvents) after 3 warm-ups, its TFLOP/s (2*m*n*k over the time), and
 * the step's total (12 layers + the padded head).  A second table times the
 * bias grad of the four layers with a bias, old way and new ways in the same
 * run: the weight grad alone, then with the bias grad by the column kernel
 * (the old way), the tile kernel, the BGRADB epilogue into a scratch then
 * added (+=), and the epilogue written in place (dbias known zero); the
 * ratios are old / new; then each standalone kernel alone with its GB/s.
 * Not a test: it prints figures.
 * Usage: gemm_bench [BT [bias]]   (default BT 8192 = batch 8 x 1024;
 * "bias" prints the bias-grad table only) */
#include "tprt_cuda.h"
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 3
#define RUNS   20
enum { C = 768, VOCAB = 50257, LAYERS = 12 };

static void *dev_alloc(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        fprintf(stderr, "gemm_bench: cudaMalloc of %zu bytes failed\n", bytes);
        exit(1);
    }
    cudaMemset(p, 0, bytes); /* small values: zeros, the rate is not data-bound for this purpose */
    return p;
}
static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* One product to time: which launcher and its shape. */
typedef enum { FWD, FWD_GELU, DINP, DINP_GELU, DW, DBIAS, DW_BIAS } op_kind;
typedef struct {
    char name[48];
    op_kind op;
    int IC, OC, ld, bias;
    int per_step; /* how many times a step runs it */
} product;

/* A weight of the step: its shape, the launchers of its forward and input
 * grad (GELU fused or not), whether it has a bias, how often a step uses it. */
typedef struct {
    const char *name;
    int IC, OC, ld;
    op_kind fwd, dinp;
    int bias, per_step;
} weight;

static tprt_bf16 *g_in, *g_out, *g_w, *g_b, *g_aux;
static float *g_dw, *g_db;
static int g_BT;

static int launch(const product *p) {
    int BT = g_BT;
    switch (p->op) {
    case FWD: return cuda_matmul_forward(g_out, g_in, g_w, p->bias ? g_b : NULL, BT, p->IC, p->OC, p->ld);
    case FWD_GELU: return cuda_matmul_gelu_forward(g_out, g_aux, g_in, g_w, g_b, BT, p->IC, p->OC);
    case DINP: return cuda_matmul_backward_set(g_in, NULL, NULL, NULL, g_out, g_in, g_w, BT, p->IC, p->OC, p->ld);
    case DINP_GELU: return cuda_matmul_backward_set(g_in, g_aux, NULL, NULL, g_out, g_in, g_w, BT, p->IC, p->OC, p->ld);
    case DW: return cuda_matmul_backward_set(NULL, NULL, g_dw, NULL, g_out, g_in, g_w, BT, p->IC, p->OC, p->ld);
    case DBIAS: return cuda_bias_backward(g_db, g_out, BT, p->OC, p->ld);
    case DW_BIAS: return cuda_matmul_backward_set(NULL, NULL, g_dw, g_db, g_out, g_in, g_w, BT, p->IC, p->OC, p->ld);
    }
    return -1;
}

static float time_ms(const product *p) {
    cudaEvent_t a, b;
    float t[RUNS];
    cudaEventCreate(&a), cudaEventCreate(&b);
    for (int i = 0; i < WARMUP; i++) launch(p);
    for (int i = 0; i < RUNS; i++) {
        cudaEventRecord(a, 0);
        if (launch(p)) {
            fprintf(stderr, "gemm_bench: %s failed\n", p->name);
            exit(1);
        }
        cudaEventRecord(b, 0);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&t[i], a, b);
    }
    cudaEventDestroy(a), cudaEventDestroy(b);
    qsort(t, RUNS, sizeof t[0], cmp_float);
    return t[RUNS / 2];
}

/* The bias grad of one layer, the old way and the new ways (see the file's comment). */
static void bias_row(const weight *w, double *saved) {
    product p = {.op = DW, .IC = w->IC, .OC = w->OC, .ld = w->ld, .per_step = w->per_step};
    snprintf(p.name, sizeof p.name, "%s", w->name);
    cuda_matmul_use_lt(1);
    cuda_matmul_tune(8);
    float dw = time_ms(&p), ms[4], k[2];
    static const int modes[4] = {TPRT_BIAS_GRAD_COLUMN, TPRT_BIAS_GRAD_TILE, TPRT_BIAS_GRAD_EPILOGUE,
                                 TPRT_BIAS_GRAD_EPILOGUE};
    p.op = DW_BIAS;
    for (int v = 0; v < 4; v++) {
        int was = cuda_bias_grad_mode(modes[v]), fresh = cuda_matmul_grads_fresh(v == 3);
        ms[v] = time_ms(&p);
        cuda_matmul_grads_fresh(fresh), cuda_bias_grad_mode(was);
    }
    p.op = DBIAS;
    for (int v = 0; v < 2; v++) {
        int was = cuda_bias_grad_mode(modes[v]);
        k[v] = time_ms(&p);
        cuda_bias_grad_mode(was);
    }
    float best = ms[1] < ms[2] ? ms[1] : ms[2];
    best = best < ms[3] ? best : ms[3];
    *saved += (double)(ms[0] - best) * w->per_step;
    double gb = (double)g_BT * w->OC * 2 / 1e6; /* bytes of dout read, over ms: GB/s */
    printf("%-12s %8.4f | %8.4f | %8.4f %5.2fx | %8.4f %5.2fx | %8.4f %5.2fx || %8.4f %5.0f | %8.4f %5.0f %5.2fx\n",
           w->name, dw, ms[0], ms[1], ms[0] / ms[1], ms[2], ms[0] / ms[2], ms[3], ms[0] / ms[3], k[0], gb / k[0], k[1],
           gb / k[1], k[0] / k[1]);
}

static void bias_table(const weight *ws, int n) {
    printf("\nbias grad, BT %d: weight grad (cuBLASLt, tuned) alone, then with the bias grad; median ms; x = old/new\n",
           g_BT);
    printf("%-12s %8s | %8s | %8s %6s | %8s %6s | %8s %6s || %8s %5s | %8s %5s %6s\n", "layer", "dW only", "old col",
           "tile", "", "epi +=", "", "epi =", "", "col only", "GB/s", "tile", "GB/s", "");
    double saved = 0.0;
    long f0, r0, f1, r1;
    cuda_matmul_bias_grad_counts(&f0, &r0);
    for (int i = 0; i < n; i++)
        if (ws[i].bias) bias_row(&ws[i], &saved);
    cuda_matmul_bias_grad_counts(&f1, &r1);
    printf("per step (12 layers): the best new way saves %.3f ms over the old; epilogue calls %ld, refused %ld%s\n",
           saved, f1 - f0, r1 - r0, r1 > r0 ? " (refused: the epi columns are the GEMM + tile kernel)" : "");
}

int main(int argc, char **argv) {
    g_BT = argc > 1 ? atoi(argv[1]) : 8192;
    int bias_only = argc > 2 && !strcmp(argv[2], "bias");
    int V64 = (VOCAB + 63) / 64 * 64, H = 4 * C;
    if (g_BT <= 0 || cuda_blas_init()) {
        fprintf(stderr, "gemm_bench: usage gemm_bench [BT], and a GPU\n");
        return 2;
    }
    const weight weights[] = {
        {"c_attn", C, 3 * C, 3 * C, FWD, DINP, 1, LAYERS},     {"attn.c_proj", C, C, C, FWD, DINP, 1, LAYERS},
        {"c_fc", C, H, H, FWD_GELU, DINP, 1, LAYERS},          {"mlp.c_proj", H, C, C, FWD, DINP_GELU, 1, LAYERS},
        {"lm_head (V 50257)", C, VOCAB, V64, FWD, DINP, 0, 0}, /* what the odd vocab would cost; not in the total */
        {"lm_head (V 50304)", C, V64, V64, FWD, DINP, 0, 1},   /* the padded head tprt runs */
    };
    enum { NW = sizeof weights / sizeof weights[0] };
    static const char *const pass_names[] = {"fwd", "dinp", "dw", "dbias"};
    static const char *const op_notes[] = {
        [FWD] = "", [FWD_GELU] = " (+gelu)", [DINP] = "", [DINP_GELU] = " (*gelu')", [DW] = " (fp32 +=)", [DBIAS] = ""};
    product ps[4 * NW];
    int n = 0;
    for (int pass = 0; pass < 4; pass++) /* every forward, then every input grad, weight grad, bias grad */
        for (int i = 0; i < NW; i++) {
            const weight *w = &weights[i];
            if (pass == 3 && !w->bias) continue;
            op_kind op = pass == 0 ? w->fwd : pass == 1 ? w->dinp : pass == 2 ? DW : DBIAS;
            product *p = &ps[n++];
            *p = (product){
                .op = op, .IC = w->IC, .OC = w->OC, .ld = w->ld, .bias = pass == 0 && w->bias, .per_step = w->per_step};
            snprintf(p->name, sizeof p->name, "%s %s%s", w->name, pass_names[pass], op_notes[op]);
        }
    size_t BT = (size_t)g_BT, most = BT * (size_t)V64;
    g_in = dev_alloc(BT * H * 2), g_out = dev_alloc(most * 2), g_aux = dev_alloc(BT * H * 2);
    g_w = dev_alloc((size_t)V64 * C * 2), g_b = dev_alloc((size_t)V64 * 2);
    g_dw = dev_alloc((size_t)V64 * C * 4), g_db = dev_alloc((size_t)V64 * 4);
    printf("BT %d, C %d; median of %d runs after %d warm-ups (cudaEvents); TFLOP/s = 2 m n k / time\n", g_BT, C, RUNS,
           WARMUP);
    if (bias_only) n = 0;
    if (n)
        printf("%-31s %9s %7s | %9s %7s | %9s %7s\n", "product", "lt-tuned", "TFLOP/s", "lt-first", "TFLOP/s", "plain",
               "TFLOP/s");
    double step[3] = {0, 0, 0};
    for (int i = 0; i < n; i++) {
        const product *p = &ps[i];
        double flop = p->op == DBIAS ? 0.0 : 2.0 * (double)BT * p->IC * p->OC;
        float ms[3];
        for (int v = 0; v < 3; v++) { /* cuBLASLt timing 8 candidates, cuBLASLt's first pick, plain cuBLAS */
            cuda_matmul_use_lt(v < 2);
            cuda_matmul_tune(v == 0 ? 8 : 1);
            ms[v] = time_ms(p);
            step[v] += (double)ms[v] * p->per_step;
        }
        printf("%-31s %9.4f %7.1f | %9.4f %7.1f | %9.4f %7.1f\n", p->name, ms[0], flop / ms[0] / 1e9, ms[1],
               flop / ms[1] / 1e9, ms[2], flop / ms[2] / 1e9);
    }
    if (n)
        printf("%-31s %9.3f %7s | %9.3f %7s | %9.3f\n", "step total ms (12 layers+head)", step[0], "", step[1], "",
               step[2]);
    bias_table(weights, NW);
    cuda_blas_shutdown();
    return 0;
}
