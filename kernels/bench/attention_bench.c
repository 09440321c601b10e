/* attention_bench.c - times tprt's causal attention on GPT-2 124M's shape
 * (T = 1024, 12 heads of 64, bf16) at batch 8 and 128: the fused (flash
 * style) forward and backward of attention_fused.cu against the cuBLAS path
 * of attention.cu (what TPRT_ATTENTION=gemm selects) in the same run.  A
 * figure is the median of 50 timed runs (back to back, a cudaEvent between
 * each two) after 5 warm-ups, printed in milliseconds and in TFLOP/s of the
 * causal products (forward 4*B*NH*T*T*hs/2 FLOPs, backward 2.5 times that).
 * The forward (at head size 64 on sm_90 on warpgroup products) is also timed
 * as the mma.sync kernel (TPRT_ATTENTION_FWD=mma), with 128-query blocks and
 * with 64 (TPRT_ATTENTION_FWD_ROWS=64), each with its time over the
 * default's.  Then each backward variant (TPRT_ATTENTION_BWD=wgmma,
 * the default at head size 64 on sm_90; k64, the mma.sync kernel; k128;
 * k64 with TPRT_ATTENTION_BWD_BLOCKS=2, the registers it asks for;
 * TPRT_ATTENTION_GROUP=100000, every head's heaviest key tile first) with
 * the default's time over its own.  Last, the backward with c_attn's bias
 * grad (dqkv's column sums) added by its own kernels, as the model calls
 * it, against the backward followed by the standalone bias-grad kernel.
 * The fused backward writes dqkv, as the model calls it (the gemm path adds
 * into it, so its runs add up); the figures are times only.  Not a test: it
 * prints figures.
 * Usage: tprt_attention_bench [B ...]   (default 8 128) */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "tprt_cuda.h"
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 5
#define RUNS   50
enum { T = 1024, NH = 12, HS = 64, CL = NH * HS };

static int B;
static void *qkv, *out, *dout, *dqkv, *fscratch, *att, *gscratch;
static float *lse, *dbias;

static int fused_fwd(void) { return cuda_attention_fused_forward(out, lse, qkv, B, T, CL, NH); }
static int fused_bwd(void) {
    return cuda_attention_fused_backward(dqkv, dout, qkv, out, lse, fscratch, B, T, CL, NH, 0, NULL);
}
static int fused_bwd_bias(void) {
    return cuda_attention_fused_backward(dqkv, dout, qkv, out, lse, fscratch, B, T, CL, NH, 0, dbias);
}
static int fused_bwd_then_bias(void) { return fused_bwd() || cuda_bias_backward(dbias, dqkv, B * T, 3 * CL, 3 * CL); }
static int gemm_fwd(void) { return cuda_attention_forward(out, att, qkv, gscratch, B, T, CL, NH); }
static int gemm_bwd(void) { return cuda_attention_backward(dqkv, dout, qkv, att, gscratch, B, T, CL, NH); }

/* a device buffer, or NULL (with a message) when the memory is not there */
static void *dev_alloc(size_t bytes, const char *what) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        printf("attention_bench: B=%d: no room for %s (%zu bytes)\n", B, what, bytes);
        return NULL;
    }
    return p;
}
/* bf16 values uniform in [-a, a), from a fixed seed */
static int fill_bf16(void *d, size_t n, float a, uint64_t seed) {
    uint16_t *h = malloc(n * sizeof *h);
    if (!h) return -1;
    uint64_t r = seed;
    for (size_t i = 0; i < n; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        float f = (float)((r >> 40) * (1.0 / 8388608.0)) - 1.0f;
        h[i] = tprt_f2bf(a * f);
    }
    int rc = cudaMemcpy(d, h, n * sizeof *h, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
    free(h);
    return rc;
}

/* median milliseconds of RUNS runs of f, or a negative value when a run fails: the runs go back to back,
 * an event before each and one after the last, and are read once the stream has drained */
static double median_ms(int (*f)(void)) {
    cudaEvent_t ev[RUNS + 1];
    float t[RUNS];
    int failed = 0;
    for (int i = 0; i < WARMUP && !failed; i++) failed = f() != 0;
    for (int i = 0; i <= RUNS; i++) cudaEventCreate(&ev[i]);
    for (int i = 0; i < RUNS && !failed; i++) cudaEventRecord(ev[i], 0), failed = f() != 0;
    cudaEventRecord(ev[RUNS], 0);
    failed = failed || cudaEventSynchronize(ev[RUNS]) != cudaSuccess;
    for (int i = 0; i < RUNS && !failed; i++) cudaEventElapsedTime(&t[i], ev[i], ev[i + 1]);
    for (int i = 0; i <= RUNS; i++) cudaEventDestroy(ev[i]);
    if (failed) {
        printf("attention_bench: a run failed (%s)\n", cudaGetErrorString(cudaGetLastError()));
        return -1.0;
    }
    for (int i = 1; i < RUNS; i++) /* insertion sort */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            float x = t[j];
            t[j] = t[j - 1], t[j - 1] = x;
        }
    return 0.5 * (t[RUNS / 2 - 1] + t[RUNS / 2]);
}

static void row(const char *name, double fused, double gemm, double flops) {
    printf("B=%-4d %-9s fused %8.3f ms %6.1f TFLOP/s", B, name, fused, flops / fused * 1e-9);
    if (gemm > 0)
        printf(" | gemm %8.3f ms %6.1f TFLOP/s | gemm/fused %5.2fx\n", gemm, flops / gemm * 1e-9, gemm / fused);
    else
        printf(" | gemm: skip\n");
}

/* every backward variant (its variables set for its run, then put back as they were): its ms, TFLOP/s, the
 * fused forward + it, and the default's time over its own (above 1: faster than the default) */
static const char *const bwd_variants[][4] = {{"TPRT_ATTENTION_BWD", "wgmma", NULL, NULL},
                                              {"TPRT_ATTENTION_BWD", "k64", NULL, NULL},
                                              {"TPRT_ATTENTION_BWD", "k128", NULL, NULL},
                                              {"TPRT_ATTENTION_BWD", "k64", "TPRT_ATTENTION_BWD_BLOCKS", "2"},
                                              {"TPRT_ATTENTION_GROUP", "100000", NULL, NULL}};
/* var=value (nothing for a NULL var); returns what it was, for env_put_back */
static char *env_set(const char *var, const char *value) {
    const char *e = var ? getenv(var) : NULL;
    char *keep = e ? strdup(e) : NULL;
    if (var) setenv(var, value, 1);
    return keep;
}
static void env_put_back(const char *var, char *keep) {
    if (keep)
        setenv(var, keep, 1), free(keep);
    else if (var)
        unsetenv(var);
}
/* the median of f with v[0]=v[1] and v[2]=v[3] (a NULL name sets nothing), both put back as they were */
static double median_with(int (*f)(void), const char *const v[4]) {
    char *k0 = env_set(v[0], v[1]), *k2 = env_set(v[2], v[3]);
    double t = median_ms(f);
    env_put_back(v[2], k2), env_put_back(v[0], k0);
    return t;
}
static int bench_bwd_modes(double ff, double bwd_flops) {
    double base = -1.0;
    int rc = 0;
    for (int m = 0; m < (int)(sizeof bwd_variants / sizeof bwd_variants[0]); m++) {
        const char *const *v = bwd_variants[m];
        char label[64];
        double t = median_with(fused_bwd, v);
        if (t < 0) {
            rc = -1;
            continue;
        }
        if (m == 0) base = t;
        snprintf(label, sizeof label, "%s=%s%s%s%s%s", v[0], v[1], v[2] ? " " : "", v[2] ? v[2] : "", v[2] ? "=" : "",
                 v[2] ? v[3] : "");
        printf("B=%-4d backward  %-32s %8.3f ms %6.1f TFLOP/s | fwd+bwd %8.3f ms", B, label, t, bwd_flops / t * 1e-9,
               ff + t);
        if (base > 0)
            printf(" | default/that %5.2fx\n", base / t);
        else
            printf("\n");
    }
    return rc;
}

/* one batch size: the fused pair always, the gemm pair where its T x T buffers fit */
static int bench(int batch) {
    B = batch;
    size_t nq = (size_t)B * T * 3 * CL, no = (size_t)B * T * CL;
    double fwd_flops = 4.0 * B * NH * (double)T * T * HS / 2, bwd_flops = 2.5 * fwd_flops;
    qkv = dev_alloc(nq * 2, "qkv"), dqkv = dev_alloc(nq * 2, "dqkv");
    out = dev_alloc(no * 2, "out"), dout = dev_alloc(no * 2, "dout");
    lse = dev_alloc((size_t)B * NH * T * sizeof(float), "lse");
    fscratch = dev_alloc(cuda_attention_fused_scratch_bytes(B, T, CL, NH), "fused scratch");
    dbias = dev_alloc(3 * CL * sizeof(float), "bias grad");
    int rc = -1;
    if (!qkv || !dqkv || !out || !dout || !lse || !fscratch || !dbias || fill_bf16(qkv, nq, 1.0f, 1) ||
        fill_bf16(dout, no, 1.0f, 2) || fill_bf16(dqkv, nq, 0.0f, 3))
        goto done;
    double ff = median_ms(fused_fwd), fb = fused_fwd() ? -1.0 : median_ms(fused_bwd), gf = -1.0, gb = -1.0;
    if (ff < 0 || fb < 0) goto done;
    /* the forward's other kernels: mma.sync with 128-query blocks, and with 64 (one 16-row tile a warp) */
    static const char *const mma_fwd[4] = {"TPRT_ATTENTION_FWD", "mma", NULL, NULL};
    static const char *const mma_fwd64[4] = {"TPRT_ATTENTION_FWD", "mma", "TPRT_ATTENTION_FWD_ROWS", "64"};
    double fmma = median_with(fused_fwd, mma_fwd), f64 = median_with(fused_fwd, mma_fwd64);
    att = dev_alloc((size_t)B * NH * T * T * 2, "gemm probabilities");
    gscratch = att ? dev_alloc(cuda_attention_scratch_bytes(B, T, CL, NH), "gemm scratch") : NULL;
    if (att && gscratch) {
        gf = median_ms(gemm_fwd);
        gb = gf < 0 || gemm_fwd() ? -1.0 : median_ms(gemm_bwd);
    }
    row("forward", ff, gf, fwd_flops);
    if (fmma > 0)
        printf("B=%-4d %-9s fused %8.3f ms %6.1f TFLOP/s (TPRT_ATTENTION_FWD=mma) | fused/that %5.2fx\n", B, "forward",
               fmma, fwd_flops / fmma * 1e-9, fmma / ff);
    if (f64 > 0)
        printf("B=%-4d %-9s fused %8.3f ms %6.1f TFLOP/s (FWD=mma, FWD_ROWS=64) | fused/that %5.2fx\n", B, "forward",
               f64, fwd_flops / f64 * 1e-9, f64 / ff);
    row("backward", fb, gb, bwd_flops);
    row("fwd+bwd", ff + fb, gf > 0 && gb > 0 ? gf + gb : -1.0, fwd_flops + bwd_flops);
    rc = bench_bwd_modes(ff, bwd_flops);
    double in = median_ms(fused_bwd_bias), then = median_ms(fused_bwd_then_bias);
    if (in < 0 || then < 0) rc = -1;
    printf("B=%-4d backward with the bias grad: in its kernels %8.3f ms | then the tile kernel %8.3f ms | that/in "
           "%5.2fx\n",
           B, in, then, then / in);
done:
    cudaFree(qkv), cudaFree(dqkv), cudaFree(out), cudaFree(dout), cudaFree(lse), cudaFree(fscratch), cudaFree(dbias);
    cudaFree(att), cudaFree(gscratch);
    qkv = dqkv = out = dout = fscratch = att = gscratch = NULL, lse = dbias = NULL;
    return rc;
}

int main(int argc, char **argv) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("attention_bench: skip: no CUDA device\n");
        return 0;
    }
    printf("causal attention, T=%d, %d heads of %d, bf16; median of %d runs after %d warm-ups\n", T, NH, HS, RUNS,
           WARMUP);
    int fails = 0;
    if (argc > 1)
        for (int i = 1; i < argc; i++) fails += atoi(argv[i]) > 0 ? bench(atoi(argv[i])) != 0 : 1;
    else
        fails = (bench(8) != 0) + (bench(128) != 0);
    return fails ? 1 : 0;
}
