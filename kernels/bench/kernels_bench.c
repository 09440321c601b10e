/* kernels_bench.c - times tprt's memory-bound CUDA kernels, the earlier
 * form against the new one, on GPT-2 124M's shapes: the scalar vs vector
 * layernorm forward and backward, residual then layernorm vs the fused
 * residual+layernorm, the three-step cross-entropy and its backward vs the
 * one-pass kernel and that kernel without and with its row stash, the
 * layernorm backward without and with the column sums of its dinp, and per-tensor vs multi-tensor grad norm and AdamW over
 * the model's 148 parameters.  A figure is the median of 50 timed runs
 * (cudaEvents around each) after 5 warm-ups, printed in microseconds and in
 * GB/s of the bytes the kernel has to move (each input read once, each
 * output written once).  Not a test: it prints figures.
 * Usage: kernels_bench [BT]   (default 8192 = batch 8 x 1024) */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "tprt_cuda.h"
#include "tprt_cuda_paths.h"
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 5
#define RUNS   50
enum { C = 768, VOCAB = 50257, LD = 50304, MAXT = 1024, LAYERS = 12, N_PARAMS = 4 + 12 * LAYERS };

static int BT;
static tprt_bf16 *x, *y, *res, *out, *dy, *dx, *w, *b, *logits;
static float *mean, *rstd, *dw, *db, *colsum, *rowmax, *rowsum, *scratch, *losses, *loss, *acc;
static int *targets;
static tprt_adamw_slot slots[N_PARAMS];
static size_t n_weights;

static void *dev_alloc(size_t bytes) {
    void *p;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        fprintf(stderr, "kernels_bench: cudaMalloc of %zu bytes failed\n", bytes);
        exit(1);
    }
    return p;
}
/* fills a device buffer with a repeating block of pseudo-random words (bf16 pairs in
 * [-2, 2) when bf16, else floats in [-1, 1)) */
static void fill(void *d, size_t bytes, int bf16) {
    enum { BLOCK = 1 << 20 };
    static uint32_t host[BLOCK];
    uint64_t r = 88172645463325252ULL;
    for (int i = 0; i < BLOCK; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        float f = (float)((r >> 40) * (1.0 / 8388608.0)) - 1.0f;
        if (bf16)
            host[i] = (uint32_t)tprt_f2bf(2 * f) | (uint32_t)tprt_f2bf(-f) << 16;
        else
            memcpy(&host[i], &f, 4);
    }
    for (size_t o = 0; o < bytes; o += sizeof host) {
        size_t n = bytes - o < sizeof host ? bytes - o : sizeof host;
        cudaMemcpy((char *)d + o, host, n, cudaMemcpyHostToDevice);
    }
}

/* GPT-2 124M's parameters as AdamW slots (fp32 master, grad, moments; bf16 working copy):
 * 2-D weights decay, vectors are replicated at TP > 1 */
static void make_slots(void) {
    size_t n[N_PARAMS];
    int k = 0, dims[N_PARAMS];
    n[k] = (size_t)VOCAB * C, dims[k++] = 2;
    n[k] = (size_t)MAXT * C, dims[k++] = 2;
    for (int l = 0; l < LAYERS; l++) {
        size_t layer[12] = {C, C, 3 * C * (size_t)C, 3 * C, (size_t)C * C,     C,  /* ln_1, qkv, attn proj */
                            C, C, 4 * C * (size_t)C, 4 * C, 4 * C * (size_t)C, C}; /* ln_2, fc, fc proj */
        for (int i = 0; i < 12; i++) n[k] = layer[i], dims[k++] = layer[i] > 4 * C ? 2 : 1;
    }
    n[k] = C, dims[k++] = 1;
    n[k] = C, dims[k++] = 1;
    for (int i = 0; i < N_PARAMS; i++) {
        tprt_adamw_slot s = {dev_alloc(n[i] * 4), dev_alloc(n[i] * 2), dev_alloc(n[i] * 4),
                             dev_alloc(n[i] * 4), dev_alloc(n[i] * 4), n[i],
                             dims[i] == 2,        dims[i] == 1};
        fill(s.master, n[i] * 4, 0), fill((void *)s.grad, n[i] * 4, 0);
        cudaMemset(s.m, 0, n[i] * 4), cudaMemset(s.v, 0, n[i] * 4);
        slots[i] = s;
        n_weights += n[i];
    }
}

static void setup(void) {
    size_t act = (size_t)BT * C * 2, lg = (size_t)BT * LD * 2;
    tprt_bf16 **acts[] = {&x, &y, &res, &out, &dy, &dx};
    for (int i = 0; i < 6; i++) *acts[i] = dev_alloc(act), fill(*acts[i], act, 1);
    w = dev_alloc(C * 2), b = dev_alloc(C * 2), fill(w, C * 2, 1), fill(b, C * 2, 1);
    float **stats[] = {&mean, &rstd, &rowmax, &rowsum, &losses};
    for (int i = 0; i < 5; i++) *stats[i] = dev_alloc((size_t)BT * 4);
    scratch = dev_alloc((size_t)BT * 8), loss = dev_alloc(4), acc = dev_alloc(8);
    dw = dev_alloc(C * 4), db = dev_alloc(C * 4), colsum = dev_alloc(C * 4);
    cudaMemset(dw, 0, C * 4), cudaMemset(db, 0, C * 4), cudaMemset(acc, 0, 8);
    logits = dev_alloc(lg), fill(logits, lg, 1);
    int *t = malloc(sizeof(int) * BT);
    for (int i = 0; i < BT; i++) t[i] = (int)(((unsigned)i * 2654435761u) % VOCAB);
    targets = dev_alloc(sizeof(int) * BT);
    cudaMemcpy(targets, t, sizeof(int) * BT, cudaMemcpyHostToDevice);
    free(t);
    cuda_layernorm_forward(out, mean, rstd, x, w, b, BT, C); /* statistics for the backward */
    make_slots();
}

/* ---- the timed forms ---- */
static int ln_fwd_scalar(void) { return cuda_layernorm_forward_scalar(out, mean, rstd, x, w, b, BT, C); }
static int ln_fwd_vector(void) { return cuda_layernorm_forward(out, mean, rstd, x, w, b, BT, C); }
static int ln_bwd_scalar(void) { return cuda_layernorm_backward_scalar(dx, dw, db, NULL, dy, x, w, mean, rstd, BT, C); }
static int ln_bwd_vector(void) { return cuda_layernorm_backward(dx, dw, db, NULL, dy, x, w, mean, rstd, BT, C); }
static int ln_bwd_colsum(void) { return cuda_layernorm_backward(dx, dw, db, colsum, dy, x, w, mean, rstd, BT, C); }
static int res_then_ln(void) {
    return cuda_residual_forward(res, x, y, (size_t)BT * C) ||
           cuda_layernorm_forward(out, mean, rstd, res, w, b, BT, C);
}
static int res_ln_fused(void) { return cuda_residual_layernorm_forward(res, out, mean, rstd, x, y, w, b, BT, C); }
/* the logits are overwritten by their gradient each run; the work per run stays the same */
static int ce_steps(void) {
    return cuda_ce_rowmax(rowmax, logits, 0, VOCAB, VOCAB, BT, LD) ||
           cuda_ce_rowsum(scratch, logits, rowmax, targets, 0, VOCAB, VOCAB, BT, LD) ||
           cuda_ce_loss(loss, rowsum, scratch, rowmax, BT) ||
           cuda_crossentropy_backward(logits, logits, rowmax, rowsum, targets, 0, VOCAB, VOCAB, BT, LD, 1.0f);
}
static int ce_fused(void) {
    return cuda_crossentropy_fused(losses, logits, targets, VOCAB, VOCAB, BT, LD, 1.0f) ||
           cuda_ce_mean(loss, losses, BT);
}
static int ce_fused_two_reads(void) { /* the kernel without the row stash */
    setenv("TPRT_CE_STASH", "0", 1);
    int rc = ce_fused();
    unsetenv("TPRT_CE_STASH");
    return rc;
}
static int sumsq_each(void) {
    for (int i = 0; i < N_PARAMS; i++)
        if (cuda_sumsq(acc + slots[i].replicated, slots[i].grad, slots[i].n)) return -1;
    return 0;
}
static int sumsq_multi(void) { return cuda_sumsq_multi(acc, slots, N_PARAMS); }
static int adamw_each(void) {
    for (int i = 0; i < N_PARAMS; i++) {
        const tprt_adamw_slot *s = &slots[i];
        if (cuda_adamw_update(s->master, s->working, s->grad, s->m, s->v, s->n, acc, 1.0f, 6e-4f, 0.9f, 0.95f, 1e-8f,
                              s->decay ? 6e-4f * 0.1f : 0.0f, 0.1f, 0.05f))
            return -1;
    }
    return 0;
}
static int adamw_multi(void) {
    return cuda_adamw_multi(slots, N_PARAMS, acc, 1.0f, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}
/* median microseconds of RUNS runs of f */
static double median_us(int (*f)(void), const char *what) {
    cudaEvent_t e0, e1;
    float t[RUNS];
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    for (int i = 0; i < WARMUP + RUNS; i++) {
        cudaEventRecord(e0, 0);
        int rc = f();
        cudaEventRecord(e1, 0);
        if (rc || cudaEventSynchronize(e1) != cudaSuccess) {
            fprintf(stderr, "kernels_bench: %s failed (%s)\n", what, cudaGetErrorString(cudaGetLastError()));
            exit(1);
        }
        if (i >= WARMUP) cudaEventElapsedTime(&t[i - WARMUP], e0, e1);
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    qsort(t, RUNS, sizeof t[0], cmp_float);
    return 500.0 * (t[RUNS / 2 - 1] + t[RUNS / 2]); /* ms -> us, mean of the middle two */
}
/* one line: old and new form with the bytes each has to move */
static void compare(const char *name, int (*old)(void), double old_bytes, int (*new_)(void), double new_bytes) {
    double a = median_us(old, name), b = median_us(new_, name);
    printf("%-40s %9.1f %7.0f | %9.1f %7.0f | %5.2fx\n", name, a, old_bytes / a * 1e-3, b, new_bytes / b * 1e-3, a / b);
}

int main(int argc, char **argv) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("skip: no CUDA device\n");
        return 0;
    }
    BT = argc > 1 ? atoi(argv[1]) : 8192;
    if (BT < 1) {
        fprintf(stderr, "usage: kernels_bench [BT]\n");
        return 2;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    setup();
    double act = (double)BT * C * 2, stats = (double)BT * 8, lg = (double)BT * VOCAB * 2, nw = (double)n_weights;
    printf("%s, %d SMs; BT %d, C %d, vocab %d (ld %d), %zu AdamW parameters in %d tensors\n", prop.name,
           prop.multiProcessorCount, BT, C, VOCAB, LD, n_weights, N_PARAMS);
    printf("median of %d runs after %d warm-ups; GB/s of the bytes each form must move\n", RUNS, WARMUP);
    printf("%-40s %9s %7s | %9s %7s | %6s\n", "kernel (old -> new)", "old us", "GB/s", "new us", "GB/s", "ratio");
    compare("layernorm fwd (scalar -> vector)", ln_fwd_scalar, 2 * act + stats, ln_fwd_vector, 2 * act + stats);
    compare("layernorm bwd (scalar -> vector)", ln_bwd_scalar, 4 * act + stats, ln_bwd_vector, 4 * act + stats);
    compare("layernorm bwd, + dinp's column sums", ln_bwd_vector, 4 * act + stats, ln_bwd_colsum, 4 * act + stats);
    compare("residual, layernorm -> fused", res_then_ln, 5 * act + stats, res_ln_fused, 4 * act + stats);
    compare("cross-entropy 3 steps + bwd -> fused", ce_steps, 4 * lg, ce_fused_two_reads, 3 * lg);
    compare("cross-entropy fused, two reads -> stash", ce_fused_two_reads, 3 * lg, ce_fused, 2 * lg);
    compare("grad norm per tensor -> multi", sumsq_each, 4 * nw, sumsq_multi, 4 * nw);
    compare("AdamW per tensor -> multi", adamw_each, 30 * nw, adamw_multi, 30 * nw);
    return 0;
}
