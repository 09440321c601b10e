/* tprt_cuda_check.c - the helpers the tprt kernel checks share
 * (declared in tprt_cuda_check.h). */
#include "tprt_cuda_check.h"
#include "model.h"
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t g_rng;
float frand(void) {
    g_rng = g_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((g_rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
int g_failed, g_checks;

float *rnd(size_t n, float scale, int to_bf16) {
    float *h = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) {
        h[i] = frand() * scale;
        if (to_bf16) h[i] = tprt_bf2f(tprt_f2bf(h[i]));
    }
    return h;
}
void *dev_bf(const float *h, size_t n) {
    void *d;
    if (cudaMalloc(&d, n * 2 + 2) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        exit(1);
    }
    if (!h) {
        cudaMemset(d, 0xff, n * 2);
        return d;
    }
    tprt_bf16 *t = malloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++) t[i] = tprt_f2bf(h[i]);
    cudaMemcpy(d, t, n * 2, cudaMemcpyHostToDevice);
    free(t);
    return d;
}
float *dev_f(const float *h, size_t n) {
    float *d;
    if (cudaMalloc((void **)&d, n * 4 + 4) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        exit(1);
    }
    if (h)
        cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice);
    else
        cudaMemset(d, 0xff, n * 4);
    return d;
}
float *host_bf(const void *d, size_t n) {
    tprt_bf16 *t = malloc(n * 2 + 2);
    float *h = malloc(n * 4 + 4);
    cudaMemcpy(t, d, n * 2, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; i++) h[i] = tprt_bf2f(t[i]);
    free(t);
    return h;
}
float *host_f(const float *d, size_t n) {
    float *h = malloc(n * 4 + 4);
    cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost);
    return h;
}
void sync_or_die(const char *what, int rc) {
    cudaError_t e = cudaDeviceSynchronize();
    if (rc || e != cudaSuccess) {
        fprintf(stderr, "FAIL %s: launcher rc %d, %s\n", what, rc, cudaGetErrorString(e));
        exit(1);
    }
}
double relerr(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isinf(a[i])) return INFINITY;
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
void check_that(const char *name, int ok, const char *detail) {
    g_checks++;
    g_failed += !ok;
    printf("%-4s %-34s %s\n", ok ? "ok" : "FAIL", name, detail);
}
void check(const char *name, const float *gpu, const float *ref, size_t n, double tol) {
    char detail[64];
    double e = relerr(gpu, ref, n);
    snprintf(detail, sizeof detail, "rel err %.3e (tol %.0e)", e, tol);
    check_that(name, e <= tol, detail);
}
void check_tagged(const char *what, const char *tag, const float *gpu, const float *ref, size_t n, double tol) {
    char name[128];
    snprintf(name, sizeof name, "%s %s", what, tag);
    check(name, gpu, ref, n, tol);
}
void check_bits(const char *name, const void *a, const void *b, size_t bytes) {
    const unsigned char *x = a, *y = b;
    char detail[80];
    size_t i = 0;
    while (i < bytes && x[i] == y[i]) i++;
    if (i == bytes)
        snprintf(detail, sizeof detail, "bitwise equal (%zu bytes)", bytes);
    else
        snprintf(detail, sizeof detail, "first difference at byte %zu of %zu", i, bytes);
    check_that(name, i == bytes, detail);
}

float *ce_inputs(int BT, int vl, int ld, int vocab, float **padded, int **targets, int **dtargets) {
    float *x = rnd((size_t)BT * vl, 4.0f, 1), *xp = malloc(sizeof(float) * BT * ld);
    for (int i = 0; i < BT; i++)
        for (int j = 0; j < ld; j++) xp[(size_t)i * ld + j] = j < vl ? x[(size_t)i * vl + j] : NAN;
    int *tgt = malloc(sizeof(int) * BT);
    for (int i = 0; i < BT; i++) tgt[i] = (int)((frand() + 1.0f) * 0.5f * vocab) % vocab;
    if (cudaMalloc((void **)dtargets, sizeof(int) * BT) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        exit(1);
    }
    cudaMemcpy(*dtargets, tgt, sizeof(int) * BT, cudaMemcpyHostToDevice);
    *padded = xp, *targets = tgt;
    return x;
}
void ce_forward_cpu(float *loss, float *rowmax, float *rowsum, const float *logits, const int *targets, int v0, int vl,
                    int vocab, int BT) {
    tprt_comm one;
    memset(&one, 0, sizeof one);
    one.world = 1;
    float *scratch = malloc(2 * sizeof(float) * BT);
    crossentropy_forward(loss, rowmax, rowsum, scratch, logits, targets, v0, vl, vocab, BT, &one);
    free(scratch);
}
