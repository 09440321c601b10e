/* gemm_bench.c - times each matrix product of a tprt GPT-2 124M step on one
 * GPU through tprt's own launchers (matmul.cu), on both product paths
 * (cuBLASLt with epilogues, its algorithm timed among 8 candidates or its
 * heuristic's first pick; plain cublasGemmEx with separate kernels): the
 * four forward products of a layer and the LM head, each backward split in
 * its input grad, weight grad (fp32, accumulated) and bias grad, and the
 * LM head again with its vocab rounded up to a multiple of 64 to show what
 * the odd 50257 costs.  Prints per product the median of 20 timed runs
 * (cudaEvents) after 3 warm-ups, its TFLOP/s (2*m*n*k over the time), and
 * the step's total (12 layers + LM head).  Not a test: it prints figures.
 * Usage: gemm_bench [BT]   (default 8192 = batch 8 x 1024) */
#include "tprt_cuda.h"
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

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
typedef enum { FWD, FWD_GELU, DINP, DINP_GELU, DW, DBIAS } op_kind;
typedef struct {
    const char *name;
    op_kind op;
    int IC, OC, ld, bias;
    int per_step; /* how many times a step runs it */
} product;

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

int main(int argc, char **argv) {
    g_BT = argc > 1 ? atoi(argv[1]) : 8192;
    int V64 = (VOCAB + 63) / 64 * 64, H = 4 * C;
    if (g_BT <= 0 || cuda_blas_init()) {
        fprintf(stderr, "gemm_bench: usage gemm_bench [BT], and a GPU\n");
        return 2;
    }
    const product ps[] = {
        {"c_attn fwd (+bias)", FWD, C, 3 * C, 3 * C, 1, LAYERS},
        {"attn.c_proj fwd (+bias)", FWD, C, C, C, 1, LAYERS},
        {"c_fc fwd (+bias+gelu)", FWD_GELU, C, H, H, 1, LAYERS},
        {"mlp.c_proj fwd (+bias)", FWD, H, C, C, 1, LAYERS},
        {"lm_head fwd (V 50257)", FWD, C, VOCAB, V64, 0, 1},
        {"lm_head fwd (V 50304)", FWD, C, V64, V64, 0, 0},
        {"c_attn dinp", DINP, C, 3 * C, 3 * C, 0, LAYERS},
        {"attn.c_proj dinp", DINP, C, C, C, 0, LAYERS},
        {"c_fc dinp", DINP, C, H, H, 0, LAYERS},
        {"mlp.c_proj dinp (*gelu')", DINP_GELU, H, C, C, 0, LAYERS},
        {"lm_head dinp (V 50257)", DINP, C, VOCAB, V64, 0, 1},
        {"lm_head dinp (V 50304)", DINP, C, V64, V64, 0, 0},
        {"c_attn dw (fp32 +=)", DW, C, 3 * C, 3 * C, 0, LAYERS},
        {"attn.c_proj dw", DW, C, C, C, 0, LAYERS},
        {"c_fc dw", DW, C, H, H, 0, LAYERS},
        {"mlp.c_proj dw", DW, H, C, C, 0, LAYERS},
        {"lm_head dw (V 50257)", DW, C, VOCAB, V64, 0, 1},
        {"lm_head dw (V 50304)", DW, C, V64, V64, 0, 0},
        {"c_attn dbias", DBIAS, C, 3 * C, 3 * C, 0, LAYERS},
        {"attn.c_proj dbias", DBIAS, C, C, C, 0, LAYERS},
        {"c_fc dbias", DBIAS, C, H, H, 0, LAYERS},
        {"mlp.c_proj dbias", DBIAS, H, C, C, 0, LAYERS},
    };
    size_t BT = (size_t)g_BT, most = BT * (size_t)V64;
    g_in = dev_alloc(BT * H * 2), g_out = dev_alloc(most * 2), g_aux = dev_alloc(BT * H * 2);
    g_w = dev_alloc((size_t)V64 * C * 2), g_b = dev_alloc((size_t)V64 * 2);
    g_dw = dev_alloc((size_t)V64 * C * 4), g_db = dev_alloc((size_t)V64 * 4);
    printf("BT %d, C %d; median of %d runs after %d warm-ups (cudaEvents); TFLOP/s = 2 m n k / time\n", g_BT, C, RUNS,
           WARMUP);
    printf("%-28s %9s %7s | %9s %7s | %9s %7s\n", "product", "lt-tuned", "TFLOP/s", "lt-first", "TFLOP/s", "plain",
           "TFLOP/s");
    double step[3] = {0, 0, 0};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        const product *p = &ps[i];
        double flop = p->op == DBIAS ? 0.0 : 2.0 * (double)BT * p->IC * p->OC;
        float ms[3];
        for (int v = 0; v < 3; v++) { /* cuBLASLt timing 8 candidates, cuBLASLt's first pick, plain cuBLAS */
            cuda_matmul_use_lt(v < 2);
            cuda_matmul_tune(v == 0 ? 8 : 1);
            ms[v] = time_ms(p);
            step[v] += (double)ms[v] * p->per_step;
        }
        printf("%-28s %9.4f %7.1f | %9.4f %7.1f | %9.4f %7.1f\n", p->name, ms[0], flop / ms[0] / 1e9, ms[1],
               flop / ms[1] / 1e9, ms[2], flop / ms[2] / 1e9);
    }
    printf("%-28s %9.3f %7s | %9.3f %7s | %9.3f\n", "step total ms (12 layers+head)", step[0], "", step[1], "",
           step[2]);
    cuda_blas_shutdown();
    return 0;
}
