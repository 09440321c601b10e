/* test_tprt_cuda.c - every tprt CUDA kernel (kernels/cuda) against its CPU
 * reference (layers.h, crossentropy.c, adamw.c's arithmetic) on fresh random
 * inputs, forward and backward.  Inputs are rounded to bf16 first so both
 * sides see the same values; outputs are compared by ||gpu - cpu|| / ||cpu||
 * with bf16 tolerances (1e-2 for bf16 results, tighter for fp32 ones), NaN
 * never passing.  Forward outputs are poisoned (NaN) before each launch so
 * an unwritten element fails; backward outputs start from random values so
 * the accumulation (+=) is checked.  The fused (flash) attention is checked
 * at several shapes (T = 1, T not a multiple of its 64- or 128-row blocks,
 * head sizes 16..128) against the same CPU attention, in each forward block
 * shape (TPRT_ATTENTION_FWD_ROWS) and with each backward kernel
 * (TPRT_ATTENTION_BWD).  The layernorm's paths, the
 * fused residual+layernorm, the one-pass cross-entropy and the multi-tensor
 * AdamW are checked in test_tprt_cuda_fused.c, the helpers shared through
 * tprt_cuda_check.h.  Exit 77 (skip) without a GPU. */
#define _DEFAULT_SOURCE
#include "layers.h"
#include "model.h"
#include "tprt_cuda_check.h"
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void test_encoder(void) {
    int B = 3, T = 17, C = 40, BT = B * T, V = 100, v0 = 20, vl = 50;
    int *tok = malloc(sizeof(int) * BT), *dtok;
    for (int i = 0; i < BT; i++) tok[i] = (int)((frand() + 1.0f) * 0.5f * V) % V;
    float *wte = rnd((size_t)vl * C, 0.5f, 1), *wpe = rnd((size_t)T * C, 0.5f, 1),
          *ref = malloc(sizeof(float) * BT * C);
    cudaMalloc((void **)&dtok, sizeof(int) * BT);
    cudaMemcpy(dtok, tok, sizeof(int) * BT, cudaMemcpyHostToDevice);
    void *dwte = dev_bf(wte, (size_t)vl * C), *dwpe = dev_bf(wpe, (size_t)T * C), *dout = dev_bf(NULL, (size_t)BT * C);
    sync_or_die("encoder forward",
                cuda_encoder_forward(dout, dtok, dwte, v0, vl, BT, C) || cuda_pos_forward(dout, dwpe, B, T, C));
    encoder_forward(ref, tok, wte, v0, vl, BT, C);
    pos_forward(ref, wpe, B, T, C);
    float *got = host_bf(dout, (size_t)BT * C);
    check("encoder+pos forward", got, ref, (size_t)BT * C, BF_TOL);
    float *g = rnd((size_t)BT * C, 1.0f, 1), *gwte = rnd((size_t)vl * C, 1.0f, 0), *gwpe = rnd((size_t)T * C, 1.0f, 0);
    void *dg = dev_bf(g, (size_t)BT * C);
    float *dgwte = dev_f(gwte, (size_t)vl * C), *dgwpe = dev_f(gwpe, (size_t)T * C);
    sync_or_die("encoder backward",
                cuda_encoder_backward(dgwte, dg, dtok, v0, vl, BT, C) || cuda_pos_backward(dgwpe, dg, B, T, C));
    encoder_backward(gwte, g, tok, v0, vl, BT, C);
    pos_backward(gwpe, g, B, T, C);
    float *h1 = host_f(dgwte, (size_t)vl * C), *h2 = host_f(dgwpe, (size_t)T * C);
    check("encoder backward dwte", h1, gwte, (size_t)vl * C, F32_TOL);
    check("pos backward dwpe", h2, gwpe, (size_t)T * C, F32_TOL);
    cudaFree(dtok), cudaFree(dwte), cudaFree(dwpe), cudaFree(dout), cudaFree(dg), cudaFree(dgwte), cudaFree(dgwpe);
    free(tok), free(wte), free(wpe), free(ref), free(got), free(g), free(gwte), free(gwpe), free(h1), free(h2);
}

/* ld > OC: the padding columns of dout hold NaN and must never be read. */
static void test_matmul(int ld_pad) {
    int BT = 70, IC = 96, OC = 130, ld = OC + ld_pad;
    char name[64];
    float *x = rnd((size_t)BT * IC, 1.0f, 1), *w = rnd((size_t)OC * IC, 0.2f, 1), *bias = rnd(OC, 0.5f, 1);
    float *ref = malloc(sizeof(float) * BT * OC);
    matmul_forward(ref, x, w, bias, BT, IC, OC);
    void *dx = dev_bf(x, (size_t)BT * IC), *dw = dev_bf(w, (size_t)OC * IC), *dbias = dev_bf(bias, OC);
    void *dout = dev_bf(NULL, (size_t)BT * ld);
    sync_or_die("matmul forward", cuda_matmul_forward(dout, dx, dw, dbias, BT, IC, OC, ld));
    float *full = host_bf(dout, (size_t)BT * ld), *got = malloc(sizeof(float) * BT * OC);
    for (int i = 0; i < BT; i++) memcpy(got + (size_t)i * OC, full + (size_t)i * ld, sizeof(float) * OC);
    snprintf(name, sizeof name, "matmul forward (ld %d)", ld);
    check(name, got, ref, (size_t)BT * OC, BF_TOL);
    float *dy = rnd((size_t)BT * OC, 1.0f, 1), *dyp = malloc(sizeof(float) * BT * ld);
    for (int i = 0; i < BT; i++)
        for (int j = 0; j < ld; j++) dyp[(size_t)i * ld + j] = j < OC ? dy[(size_t)i * OC + j] : NAN;
    float *dinp = rnd((size_t)BT * IC, 1.0f, 1), *gw = rnd((size_t)OC * IC, 1.0f, 0), *gb = rnd(OC, 1.0f, 0);
    void *ddy = dev_bf(dyp, (size_t)BT * ld), *ddinp = dev_bf(dinp, (size_t)BT * IC);
    float *dgw = dev_f(gw, (size_t)OC * IC), *dgb = dev_f(gb, OC);
    sync_or_die("matmul backward", cuda_matmul_backward(ddinp, dgw, dgb, ddy, dx, dw, BT, IC, OC, ld));
    matmul_backward(dinp, gw, gb, dy, x, w, BT, IC, OC);
    float *h1 = host_bf(ddinp, (size_t)BT * IC), *h2 = host_f(dgw, (size_t)OC * IC), *h3 = host_f(dgb, OC);
    snprintf(name, sizeof name, "matmul backward dinp (ld %d)", ld);
    check(name, h1, dinp, (size_t)BT * IC, BF_TOL);
    snprintf(name, sizeof name, "matmul backward dw (ld %d)", ld);
    check(name, h2, gw, (size_t)OC * IC, 1e-3);
    snprintf(name, sizeof name, "matmul backward dbias (ld %d)", ld);
    check(name, h3, gb, OC, 1e-3);
    cudaFree(dx), cudaFree(dw), cudaFree(dbias), cudaFree(dout), cudaFree(ddy), cudaFree(ddinp), cudaFree(dgw),
        cudaFree(dgb);
    free(x), free(w), free(bias), free(ref), free(full), free(got), free(dy), free(dyp), free(dinp), free(gw), free(gb);
    free(h1), free(h2), free(h3);
}

static void test_attention(void) {
    int B = 2, T = 33, NH = 3, hs = 16, Cl = NH * hs;
    size_t nq = (size_t)B * T * 3 * Cl, no = (size_t)B * T * Cl, na = (size_t)B * NH * T * T;
    float *qkv = rnd(nq, 1.0f, 1), *out = malloc(no * 4), *att = malloc(na * 4);
    attention_forward(out, att, qkv, B, T, Cl, NH);
    void *dqkv = dev_bf(qkv, nq), *dout = dev_bf(NULL, no), *datt = dev_bf(NULL, na), *scratch;
    cudaMalloc(&scratch, cuda_attention_scratch_bytes(B, T, Cl, NH));
    sync_or_die("attention forward", cuda_attention_forward(dout, datt, dqkv, scratch, B, T, Cl, NH));
    float *got = host_bf(dout, no), *gatt = host_bf(datt, na);
    check("attention forward out", got, out, no, BF_TOL);
    check("attention forward att", gatt, att, na, BF_TOL);
    float *dy = rnd(no, 1.0f, 1), *g = rnd(nq, 0.05f, 1);
    void *ddy = dev_bf(dy, no), *dg = dev_bf(g, nq);
    sync_or_die("attention backward", cuda_attention_backward(dg, ddy, dqkv, datt, scratch, B, T, Cl, NH));
    attention_backward(g, dy, qkv, att, B, T, Cl, NH);
    float *h = host_bf(dg, nq);
    check("attention backward dqkv", h, g, nq, 2e-2);
    cudaFree(dqkv), cudaFree(dout), cudaFree(datt), cudaFree(scratch), cudaFree(ddy), cudaFree(dg);
    free(qkv), free(out), free(att), free(got), free(gatt), free(dy), free(g), free(h);
}

/* attention_fused.cu at B x T x NH heads of size hs: out and lse against the CPU forward (lse from its
 * scores), dqkv (+= into random grads, whole and by q / k / v part) against the CPU backward. */
/* dqkv of a fused backward (hg) against the CPU's (g), whole and by its q, k and v parts; tag names the kernel */
static void check_dqkv(const char *tag, const float *hg, const float *g, int B, int T, int NH, int hs) {
    int Cl = NH * hs, C3 = 3 * Cl;
    size_t no = (size_t)B * T * Cl;
    char name[112];
    float *pa = malloc(no * 4 + 4), *pr = malloc(no * 4 + 4);
    snprintf(name, sizeof name, "fused attn bwd %sdqkv B%d T%d NH%d hs%d", tag, B, T, NH, hs);
    check(name, hg, g, (size_t)B * T * C3, 2e-2);
    for (int part = 0; part < 3; part++) {
        for (size_t r = 0; r < (size_t)B * T; r++)
            for (int c = 0; c < Cl; c++) {
                pa[r * Cl + c] = hg[r * C3 + part * Cl + c];
                pr[r * Cl + c] = g[r * C3 + part * Cl + c];
            }
        snprintf(name, sizeof name, "fused attn bwd %sd%c T%d hs%d", tag, "qkv"[part], T, hs);
        check(name, pa, pr, no, 2e-2);
    }
    free(pa), free(pr);
}

/* up to two variables a kernel variant sets (a NULL name: none) */
typedef struct {
    const char *var, *value, *var2, *value2;
} env_pair;
static void env_pair_set(const env_pair *e) {
    if (e->var) setenv(e->var, e->value, 1);
    if (e->var2) setenv(e->var2, e->value2, 1);
}
static void env_pair_unset(const env_pair *e) {
    if (e->var) unsetenv(e->var);
    if (e->var2) unsetenv(e->var2);
}

/* The fused attention's shapes: B, T, NH heads of size hs, and the amplitude of the random q, k, v.  Among
 * them: T 300, a last 128-query block whose second 64 rows lie past T (and 128-key blocks); T 256, key blocks
 * ending at T; B 2 x T 128, T a multiple of 64 over two sequences (the TMA loads); T 320 at amplitude 6,
 * scores far apart, so that a row's max moves past the softmax's slack. */
typedef struct {
    int B, T, NH, hs;
    float amp;
} attention_shape;
static const attention_shape attention_shapes[] = {
    {2, 33, 3, 16, 1.0f},  {1, 1, 2, 64, 1.0f},   {2, 1, 2, 64, 1.0f},   {2, 100, 2, 64, 1.0f}, {1, 200, 2, 64, 1.0f},
    {2, 300, 2, 64, 1.0f}, {1, 256, 2, 64, 1.0f}, {2, 128, 3, 64, 1.0f}, {1, 320, 2, 64, 6.0f}, {2, 64, 2, 32, 1.0f},
    {1, 77, 3, 32, 1.0f},  {1, 130, 2, 16, 1.0f}, {1, 150, 2, 48, 1.0f}, {1, 77, 2, 96, 1.0f},  {1, 130, 1, 128, 1.0f},
};

/* The fused attention at B x T x NH heads of size hs, in each forward kernel (TPRT_ATTENTION_FWD=mma, the
 * mma.sync kernel, with TPRT_ATTENTION_FWD_ROWS=64: blocks of 64 queries, and without: 128 up to head size
 * 64; then the default, at head size 64 on sm_90 attention_wgmma.cu's): out and lse (against the CPU scores'
 * logsumexp, in double); then from the default forward each backward kernel (the default: at head size 64 on sm_90
 * attention_wgmma.cu's, else the 64-key mma.sync kernel; TPRT_ATTENTION_BWD=k64, that mma.sync kernel, three
 * blocks an SM, heads in groups of 16; k128; k64 with TPRT_ATTENTION_BWD_BLOCKS=2; and the default with one
 * head a group, TPRT_ATTENTION_GROUP=1; the default without TMA loads, TPRT_ATTENTION_TMA=0): dqkv, added (+=) into random grads, against the CPU backward; the
 * default, k64 and k128 also written (=) over those grads, the model's call, against the CPU's grads alone;
 * with each, the bias grad the kernels add as they go into a random start (what they added against the CPU
 * grads' column sums). */
static void test_attention_fused(const attention_shape *shape) {
    const int B = shape->B, T = shape->T, NH = shape->NH, hs = shape->hs;
    static const struct {
        env_pair env;
        const char *tag;
    } fwd_env[] = {{{"TPRT_ATTENTION_FWD", "mma", "TPRT_ATTENTION_FWD_ROWS", "64"}, "mma 64-query blocks "},
                   {{"TPRT_ATTENTION_FWD", "mma", NULL, NULL}, "mma "},
                   {{NULL, NULL, NULL, NULL}, ""}};
    static const struct {
        env_pair env;    /* NULL names: the default */
        const char *tag; /* the checks' tag */
        int writes;      /* also checked writing (=) over the grads: a kernel of its own */
    } bwd_env[] = {{{NULL, NULL, NULL, NULL}, "", 1},
                   {{"TPRT_ATTENTION_BWD", "k64", NULL, NULL}, "k64 ", 1},
                   {{"TPRT_ATTENTION_BWD", "k128", NULL, NULL}, "k128 ", 1},
                   {{"TPRT_ATTENTION_BWD", "k64", "TPRT_ATTENTION_BWD_BLOCKS", "2"}, "BWD_BLOCKS=2 ", 0},
                   {{"TPRT_ATTENTION_GROUP", "1", NULL, NULL}, "GROUP=1 ", 0},
                   {{"TPRT_ATTENTION_TMA", "0", NULL, NULL}, "TMA=0 ", 1}};
    int Cl = NH * hs, C3 = 3 * Cl;
    size_t nq = (size_t)B * T * C3, no = (size_t)B * T * Cl, na = (size_t)B * NH * T * T, nl = (size_t)B * NH * T;
    char name[112], tag[32];
    float *qkv = rnd(nq, shape->amp, 1), *out = malloc(no * 4 + 4), *att = malloc(na * 4 + 4),
          *lse = malloc(nl * 4 + 4);
    double *sc = malloc((size_t)T * sizeof(double)), scale = 1.0 / sqrt((double)hs);
    attention_forward(out, att, qkv, B, T, Cl, NH);
    for (int bh = 0; bh < B * NH; bh++)
        for (int t = 0; t < T; t++) {
            const float *q = qkv + ((size_t)(bh / NH) * T + t) * C3 + (bh % NH) * hs;
            double mx = -1e300, sum = 0;
            for (int u = 0; u <= t; u++) {
                const float *k = qkv + ((size_t)(bh / NH) * T + u) * C3 + Cl + (bh % NH) * hs;
                double d = 0;
                for (int i = 0; i < hs; i++) d += (double)q[i] * k[i];
                sc[u] = d * scale, mx = sc[u] > mx ? sc[u] : mx;
            }
            for (int u = 0; u <= t; u++) sum += exp(sc[u] - mx);
            lse[(size_t)bh * T + t] = (float)(mx + log(sum));
        }
    void *dqkv = dev_bf(qkv, nq), *dout = dev_bf(NULL, no), *scratch;
    float *dlse = dev_f(NULL, nl);
    cudaMalloc(&scratch, cuda_attention_fused_scratch_bytes(B, T, Cl, NH));
    for (int f = 0; f < 3; f++) env_pair_unset(&fwd_env[f].env); /* the default as the default */
    for (int f = 0; f < 3; f++) { /* the default last: the backward starts from its out and lse */
        env_pair_set(&fwd_env[f].env);
        snprintf(tag, sizeof tag, "%s", fwd_env[f].tag);
        sync_or_die("fused attention forward", cuda_attention_fused_forward(dout, dlse, dqkv, B, T, Cl, NH));
        env_pair_unset(&fwd_env[f].env);
        float *got = host_bf(dout, no), *glse = host_f(dlse, nl);
        snprintf(name, sizeof name, "fused attn fwd %sout B%d T%d NH%d hs%d", tag, B, T, NH, hs);
        check(name, got, out, no, BF_TOL);
        snprintf(name, sizeof name, "fused attn fwd %slse T%d hs%d", tag, T, hs);
        check(name, glse, lse, nl, F32_TOL);
        free(got), free(glse);
    }
    float *dy = rnd(no, 1.0f, 1), *g0 = rnd(nq, 0.05f, 1), *g = malloc(nq * 4 + 4), *gset = calloc(nq + 1, 4);
    memcpy(g, g0, nq * 4);
    attention_backward(g, dy, qkv, att, B, T, Cl, NH);
    attention_backward(gset, dy, qkv, att, B, T, Cl, NH);
    void *ddy = dev_bf(dy, no);
    float *gb0 = rnd((size_t)C3, 1.0f, 0), *gb = malloc((size_t)C3 * 4);
    for (int c = 0; c < C3; c++) { /* the CPU grads' column sums */
        double sum = 0;
        for (size_t r = 0; r < (size_t)B * T; r++) sum += gset[r * C3 + c];
        gb[c] = (float)sum;
    }
    for (int k = 0; k < (int)(sizeof bwd_env / sizeof bwd_env[0]); k++) env_pair_unset(&bwd_env[k].env);
    /* every variant adds into random grads; the kernels of their own also write over them (the model's call) */
    for (int k = 0; k < (int)(sizeof bwd_env / sizeof bwd_env[0]); k++)
        for (int acc = 1; acc >= !bwd_env[k].writes; acc--) {
            env_pair_set(&bwd_env[k].env);
            void *dg = dev_bf(g0, nq);
            float *db = dev_f(gb0, (size_t)C3);
            sync_or_die("fused attention backward",
                        cuda_attention_fused_backward(dg, ddy, dqkv, dout, dlse, scratch, B, T, Cl, NH, acc, db));
            float *hg = host_bf(dg, nq), *hb = host_f(db, (size_t)C3);
            for (int c = 0; c < C3; c++) hb[c] -= gb0[c]; /* what the kernels added */
            snprintf(tag, sizeof tag, "%s%s", bwd_env[k].tag, acc ? "" : "(=) ");
            check_dqkv(tag, hg, acc ? g : gset, B, T, NH, hs);
            snprintf(name, sizeof name, "fused attn bwd %sdbias T%d NH%d hs%d", tag, T, NH, hs);
            check(name, hb, gb, (size_t)C3, 2e-2);
            cudaFree(dg), cudaFree(db), free(hg), free(hb);
            env_pair_unset(&bwd_env[k].env);
        }
    cudaFree(dqkv), cudaFree(dout), cudaFree(dlse), cudaFree(scratch), cudaFree(ddy);
    free(qkv), free(out), free(att), free(lse), free(sc), free(dy), free(g0), free(g), free(gset), free(gb0), free(gb);
}

/* the path switch: fused for head sizes 16..128 (multiples of 16) unless TPRT_ATTENTION=gemm */
static void test_attention_switch(void) {
    const char *old = getenv("TPRT_ATTENTION");
    char *keep = old ? strdup(old) : NULL;
    unsetenv("TPRT_ATTENTION");
    int a = cuda_attention_use_fused(768, 12), b = cuda_attention_use_fused(24 * 2, 2),
        c = cuda_attention_use_fused(1024, 4);
    setenv("TPRT_ATTENTION", "gemm", 1);
    int d = cuda_attention_use_fused(768, 12);
    if (keep)
        setenv("TPRT_ATTENTION", keep, 1), free(keep);
    else
        unsetenv("TPRT_ATTENTION");
    char detail[64];
    snprintf(detail, sizeof detail, "hs64 %d hs24 %d hs256 %d gemm %d", a, b, c, d);
    check_that("attention path switch", a == 1 && b == 0 && c == 0 && d == 0, detail);
}

static void test_pointwise(void) {
    size_t n = 4099;
    float *x = rnd(n, 3.0f, 1), *y = rnd(n, 1.0f, 1), *ref = malloc(n * 4);
    void *dx = dev_bf(x, n), *dy = dev_bf(y, n), *dout = dev_bf(NULL, n);
    sync_or_die("gelu forward", cuda_gelu_forward(dout, dx, n));
    gelu_forward(ref, x, (int)n);
    float *h = host_bf(dout, n);
    check("gelu forward", h, ref, n, BF_TOL);
    free(h);
    float *din = rnd(n, 1.0f, 1);
    void *ddin = dev_bf(din, n);
    sync_or_die("gelu backward", cuda_gelu_backward(ddin, dx, dy, n));
    gelu_backward(din, x, y, (int)n);
    h = host_bf(ddin, n);
    check("gelu backward", h, din, n, BF_TOL);
    free(h);
    cudaMemset(dout, 0xff, n * 2);
    sync_or_die("residual forward", cuda_residual_forward(dout, dx, dy, n));
    residual_forward(ref, x, y, (int)n);
    h = host_bf(dout, n);
    check("residual forward", h, ref, n, BF_TOL);
    free(h);
    float *da = rnd(n, 1.0f, 1), *db = rnd(n, 1.0f, 1);
    void *dda = dev_bf(da, n), *ddb = dev_bf(db, n);
    sync_or_die("residual backward", cuda_residual_backward(dda, ddb, dy, n));
    residual_backward(da, db, y, (int)n);
    float *h1 = host_bf(dda, n), *h2 = host_bf(ddb, n);
    check("residual backward da", h1, da, n, BF_TOL);
    check("residual backward db", h2, db, n, BF_TOL);
    cudaFree(dx), cudaFree(dy), cudaFree(dout), cudaFree(ddin), cudaFree(dda), cudaFree(ddb);
    free(x), free(y), free(ref), free(din), free(da), free(db), free(h1), free(h2);
}

/* One vocab slice [v0, v0+vl) of a `vocab`-wide softmax; rows of stride ld. */
static void test_crossentropy(int v0, int vl, int vocab, int ld) {
    int BT = 24;
    char name[80];
    float *xp;
    int *tgt, *dtgt;
    float *x = ce_inputs(BT, vl, ld, vocab, &xp, &tgt, &dtgt);
    float loss, *rmax = malloc(BT * 4), *rsum = malloc(BT * 4);
    ce_forward_cpu(&loss, rmax, rsum, x, tgt, v0, vl, vocab, BT);
    void *dx = dev_bf(xp, (size_t)BT * ld);
    float *drmax = dev_f(NULL, BT), *drsum = dev_f(NULL, BT), *dscr = dev_f(NULL, 2 * BT), *dloss = dev_f(NULL, 1);
    sync_or_die("crossentropy forward", cuda_ce_rowmax(drmax, dx, v0, vl, vocab, BT, ld) ||
                                            cuda_ce_rowsum(dscr, dx, drmax, dtgt, v0, vl, vocab, BT, ld) ||
                                            cuda_ce_loss(dloss, drsum, dscr, drmax, BT));
    float *h1 = host_f(drmax, BT), *h2 = host_f(drsum, BT), *h3 = host_f(dloss, 1);
    snprintf(name, sizeof name, "crossentropy loss (v0 %d vl %d)", v0, vl);
    check(name, h3, &loss, 1, F32_TOL);
    check("crossentropy rowmax", h1, rmax, BT, F32_TOL);
    check("crossentropy rowsum", h2, rsum, BT, F32_TOL);
    float *dref = malloc(sizeof(float) * BT * vl);
    crossentropy_backward(dref, x, rmax, rsum, tgt, v0, vl, vocab, BT, 1.0f);
    sync_or_die("crossentropy backward",
                cuda_crossentropy_backward(dx, dx, drmax, drsum, dtgt, v0, vl, vocab, BT, ld, 1.0f));
    float *full = host_bf(dx, (size_t)BT * ld), *got = malloc(sizeof(float) * BT * vl);
    for (int i = 0; i < BT; i++) memcpy(got + (size_t)i * vl, full + (size_t)i * ld, sizeof(float) * vl);
    check("crossentropy backward (in place)", got, dref, (size_t)BT * vl, BF_TOL);
    cudaFree(dtgt), cudaFree(dx), cudaFree(drmax), cudaFree(drsum), cudaFree(dscr), cudaFree(dloss);
    free(x), free(xp), free(tgt), free(rmax), free(rsum), free(h1), free(h2), free(h3), free(dref), free(full);
    free(got);
}

static void test_adamw(void) {
    size_t n = 5003;
    float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, decay = lr * 0.1f, clip = 1.0f;
    int t = 3;
    float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
    float *p = rnd(n, 1.0f, 0), *g = rnd(n, 0.1f, 0), *m = rnd(n, 0.01f, 0), *v = rnd(n, 1e-4f, 0);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    float *dp = dev_f(p, n), *dgr = dev_f(g, n), *dm = dev_f(m, n), *dv = dev_f(v, n), *acc = dev_f(NULL, 2);
    void *dwork = dev_bf(NULL, n);
    cudaMemset(acc, 0, 8);
    sync_or_die("sumsq", cuda_sumsq(acc, dgr, n / 2) || cuda_sumsq(acc + 1, dgr + n / 2, n - n / 2));
    double s0 = 0, s1 = 0;
    for (size_t i = 0; i < n; i++) *(i < n / 2 ? &s0 : &s1) += (double)g[i] * g[i];
    float ref2[2] = {(float)s0, (float)s1}, *h2 = host_f(acc, 2);
    check("adamw sumsq (2 accumulators)", h2, ref2, 2, F32_TOL);
    sync_or_die("adamw", cuda_adamw_update(dp, dwork, dgr, dm, dv, n, acc, clip, lr, b1, b2, eps, decay, bc1, bc2));
    float norm = sqrtf(h2[0] + h2[1]), scale = norm > clip ? clip / (norm + 1e-6f) : 1.0f;
    float *work = malloc(n * 4);
    for (size_t k = 0; k < n; k++) {
        float gk = g[k] * scale;
        m[k] = b1 * m[k] + (1.0f - b1) * gk;
        v[k] = b2 * v[k] + (1.0f - b2) * gk * gk;
        float x = p[k] - decay * p[k];
        x -= lr * (m[k] / bc1) / (sqrtf(v[k] / bc2) + eps);
        p[k] = x;
        work[k] = tprt_bf2f(tprt_f2bf(x));
    }
    float *hp = host_f(dp, n), *hm = host_f(dm, n), *hv = host_f(dv, n), *hw = host_bf(dwork, n);
    check("adamw master", hp, p, n, 1e-6);
    check("adamw exp_avg", hm, m, n, 1e-6);
    check("adamw exp_avg_sq", hv, v, n, 1e-6);
    check("adamw working (bf16)", hw, work, n, BF_TOL);
    cudaFree(dp), cudaFree(dgr), cudaFree(dm), cudaFree(dv), cudaFree(acc), cudaFree(dwork);
    free(p), free(g), free(m), free(v), free(h2), free(work), free(hp), free(hm), free(hv), free(hw);
}

int main(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        printf("skip: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    const char *s = getenv("TPRT_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    g_rng = seed;
    printf("seed %llu (TPRT_TEST_SEED repeats it)\n", (unsigned long long)seed);
    if (cuda_blas_init()) {
        fprintf(stderr, "cublasCreate failed\n");
        return 1;
    }
    test_encoder();
    test_matmul(0);
    test_matmul(6);
    test_attention();
    test_attention_switch();
    run_wgmma_checks();
    for (size_t i = 0; i < sizeof attention_shapes / sizeof attention_shapes[0]; i++)
        test_attention_fused(&attention_shapes[i]);
    test_pointwise();
    test_crossentropy(0, 1000, 990, 1024);
    test_crossentropy(500, 500, 990, 512);
    test_adamw();
    run_fused_checks();
    run_matmul_checks();
    cuda_blas_shutdown();
    printf("%d of %d checks passed\n", g_checks - g_failed, g_checks);
    return g_failed ? 1 : 0;
}
