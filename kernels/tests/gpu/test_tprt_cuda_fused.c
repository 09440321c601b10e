/* test_tprt_cuda_fused.c - the layernorm's paths, the fused residual +
 * layernorm, the one-pass cross-entropy and the multi-tensor AdamW against
 * the CPU references (layers.h, crossentropy.c, adamw.c's arithmetic), with
 * test_tprt_cuda.c's conventions (NaN-poisoned outputs, random initial
 * grads, relative errors).  Layernorm runs its vector path (C % 8 == 0,
 * aligned rows: full and partial 256-channel chunks, BT not a multiple of
 * the rows a block takes, several rows per warp in the backward) and its
 * scalar one (C % 8 != 0, rows 8 bytes off alignment, the scalar entry at
 * C = 768).  The multi-tensor AdamW must match cuda_adamw_update to the bit
 * over more tensors than one launch takes.  The layernorm backward's column
 * sums of dinp are checked against the sums of the dinp it stored, and the
 * cross-entropy runs with its row stash and without it (TPRT_CE_STASH=0). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "layers.h"
#include "model.h"
#include "tprt_cuda_check.h"
#include "tprt_cuda_paths.h"
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a device bf16 copy of h (NULL: poisoned) placed `off` elements into its buffer;
 * cudaFree(p - off) releases it */
static tprt_bf16 *dev_bf_at(const float *h, size_t n, size_t off) {
    float *t = NULL;
    if (h) {
        t = calloc(n + off, sizeof(float));
        memcpy(t + off, h, n * sizeof(float));
    }
    tprt_bf16 *d = (tprt_bf16 *)dev_bf(t, n + off) + off;
    free(t);
    return d;
}
static float *bf_weights(int C, float around) { /* around + U(-0.3, 0.3), rounded to bf16 */
    float *w = rnd((size_t)C, 0.3f, 0);
    for (int c = 0; c < C; c++) w[c] = tprt_bf2f(tprt_f2bf(around + w[c]));
    return w;
}

/* off: rows start `off` bf16 into their buffers (4: 8 bytes, the scalar path); scalar: call
 * the scalar entry directly */
static void test_layernorm(int BT, int C, size_t off, int scalar) {
    size_t n = (size_t)BT * C;
    char tag[48];
    snprintf(tag, sizeof tag, "C%d BT%d%s%s", C, BT, off ? " +8B" : "", scalar ? " scalar" : "");
    float *x = rnd(n, 2.0f, 1), *w = bf_weights(C, 1.0f), *b = bf_weights(C, 0.0f);
    for (size_t i = 0; i < n; i++) x[i] = tprt_bf2f(tprt_f2bf(x[i] + 0.5f)); /* a mean away from 0 */
    float *out = malloc(n * 4), *mean = malloc(BT * 4), *rstd = malloc(BT * 4);
    layernorm_forward(out, mean, rstd, x, w, b, BT, C);
    tprt_bf16 *dx = dev_bf_at(x, n, off), *dout = dev_bf_at(NULL, n, off);
    void *dw = dev_bf(w, C), *db = dev_bf(b, C);
    float *dmean = dev_f(NULL, BT), *drstd = dev_f(NULL, BT);
    sync_or_die("layernorm forward", scalar ? cuda_layernorm_forward_scalar(dout, dmean, drstd, dx, dw, db, BT, C)
                                            : cuda_layernorm_forward(dout, dmean, drstd, dx, dw, db, BT, C));
    float *got = host_bf(dout, n), *gm = host_f(dmean, BT), *gr = host_f(drstd, BT);
    check_tagged("ln fwd out", tag, got, out, n, BF_TOL);
    check_tagged("ln fwd mean", tag, gm, mean, BT, F32_TOL);
    check_tagged("ln fwd rstd", tag, gr, rstd, BT, F32_TOL);
    float *dy = rnd(n, 1.0f, 1), *dinp = rnd(n, 1.0f, 1), *gw = rnd(C, 1.0f, 0), *gb = rnd(C, 1.0f, 0);
    tprt_bf16 *ddy = dev_bf_at(dy, n, off), *ddinp = dev_bf_at(dinp, n, off);
    float *gs = rnd(C, 1.0f, 0), *dgw = dev_f(gw, C), *dgb = dev_f(gb, C), *dgs = dev_f(gs, C);
    sync_or_die("layernorm backward",
                scalar ? cuda_layernorm_backward_scalar(ddinp, dgw, dgb, dgs, ddy, dx, dw, dmean, drstd, BT, C)
                       : cuda_layernorm_backward(ddinp, dgw, dgb, dgs, ddy, dx, dw, dmean, drstd, BT, C));
    layernorm_backward(dinp, gw, gb, dy, x, w, mean, rstd, BT, C);
    float *h1 = host_bf(ddinp, n), *h2 = host_f(dgw, C), *h3 = host_f(dgb, C), *h4 = host_f(dgs, C);
    check_tagged("ln bwd dinp", tag, h1, dinp, n, BF_TOL);
    check_tagged("ln bwd dw", tag, h2, gw, C, 1e-3);
    check_tagged("ln bwd db", tag, h3, gb, C, 1e-3);
    for (int c = 0; c < C; c++) { /* dsum += the column sums of the dinp it stored */
        double t = gs[c];
        for (int r = 0; r < BT; r++) t += h1[(size_t)r * C + c];
        gs[c] = (float)t;
    }
    check_tagged("ln bwd dinp column sums", tag, h4, gs, C, 1e-3);
    cudaFree(dx - off), cudaFree(dout - off), cudaFree(dw), cudaFree(db), cudaFree(dmean), cudaFree(drstd);
    cudaFree(ddy - off), cudaFree(ddinp - off), cudaFree(dgw), cudaFree(dgb), cudaFree(dgs);
    free(x), free(w), free(b), free(out), free(mean), free(rstd), free(got), free(gm), free(gr), free(dy), free(dinp);
    free(gw), free(gb), free(gs), free(h1), free(h2), free(h3), free(h4);
}

/* res = a + b (exactly the bf16 rounding of the fp32 sum), out = layernorm(res) */
static void test_residual_layernorm(int BT, int C, size_t off) {
    size_t n = (size_t)BT * C;
    char tag[48];
    snprintf(tag, sizeof tag, "C%d BT%d%s", C, BT, off ? " +8B" : "");
    float *a = rnd(n, 2.0f, 1), *b = rnd(n, 1.0f, 1), *res = malloc(n * 4), *w = bf_weights(C, 1.0f);
    float *bias = bf_weights(C, 0.0f), *out = malloc(n * 4), *mean = malloc(BT * 4), *rstd = malloc(BT * 4);
    for (size_t i = 0; i < n; i++) res[i] = tprt_bf2f(tprt_f2bf(a[i] + b[i]));
    layernorm_forward(out, mean, rstd, res, w, bias, BT, C);
    tprt_bf16 *da = dev_bf_at(a, n, off), *db = dev_bf_at(b, n, off), *dres = dev_bf_at(NULL, n, off);
    tprt_bf16 *dout = dev_bf_at(NULL, n, off);
    void *dw = dev_bf(w, C), *dbias = dev_bf(bias, C);
    float *dmean = dev_f(NULL, BT), *drstd = dev_f(NULL, BT);
    sync_or_die("residual+layernorm forward",
                cuda_residual_layernorm_forward(dres, dout, dmean, drstd, da, db, dw, dbias, BT, C));
    float *h1 = host_bf(dres, n), *h2 = host_bf(dout, n), *h3 = host_f(dmean, BT), *h4 = host_f(drstd, BT);
    check_tagged("res+ln res (exact)", tag, h1, res, n, 0.0);
    check_tagged("res+ln out", tag, h2, out, n, BF_TOL);
    check_tagged("res+ln mean", tag, h3, mean, BT, F32_TOL);
    check_tagged("res+ln rstd", tag, h4, rstd, BT, F32_TOL);
    cudaFree(da - off), cudaFree(db - off), cudaFree(dres - off), cudaFree(dout - off), cudaFree(dw), cudaFree(dbias);
    cudaFree(dmean), cudaFree(drstd);
    free(a), free(b), free(res), free(w), free(bias), free(out), free(mean), free(rstd), free(h1), free(h2), free(h3);
    free(h4);
}

/* The fused cross-entropy at TP=1 over rows of stride ld: vocab real columns, vl - vocab
 * padding columns (zero gradient, never in the softmax), ld - vl columns past the logits
 * (NaN: never read, left as they are). */
static void test_ce_fused(int BT, int vl, int vocab, int ld, float dloss) {
    char name[96], tag[48], detail[96];
    const char *stash = getenv("TPRT_CE_STASH");
    snprintf(tag, sizeof tag, "vl%d vocab%d ld%d%s", vl, vocab, ld, stash && !strcmp(stash, "0") ? " two reads" : "");
    size_t nx = (size_t)BT * vl, np = (size_t)BT * ld;
    float *xp, loss, *rmax = malloc(BT * 4), *rsum = malloc(BT * 4), *lref = malloc(BT * 4);
    int *tgt, *dtgt;
    float *x = ce_inputs(BT, vl, ld, vocab, &xp, &tgt, &dtgt);
    ce_forward_cpu(&loss, rmax, rsum, x, tgt, 0, vl, vocab, BT);
    for (int i = 0; i < BT; i++) lref[i] = logf(rsum[i]) + rmax[i] - x[(size_t)i * vl + tgt[i]];
    float *dref = malloc(nx * 4);
    crossentropy_backward(dref, x, rmax, rsum, tgt, 0, vl, vocab, BT, dloss);
    void *dx = dev_bf(xp, np);
    float *dlosses = dev_f(NULL, BT), *dmean = dev_f(NULL, 1);
    sync_or_die("fused cross-entropy", cuda_crossentropy_fused(dlosses, dx, dtgt, vl, vocab, BT, ld, dloss) ||
                                           cuda_ce_mean(dmean, dlosses, BT));
    float *hl = host_f(dlosses, BT), *hm = host_f(dmean, 1), *full = host_bf(dx, np), *got = malloc(nx * 4);
    check_tagged("ce fused losses", tag, hl, lref, BT, F32_TOL);
    check_tagged("ce fused mean loss", tag, hm, &loss, 1, F32_TOL);
    for (int i = 0; i < BT; i++) memcpy(got + (size_t)i * vl, full + (size_t)i * ld, sizeof(float) * vl);
    check_tagged("ce fused dlogits", tag, got, dref, nx, BF_TOL);
    tprt_bf16 *raw = malloc(np * 2);
    cudaMemcpy(raw, dx, np * 2, cudaMemcpyDeviceToHost);
    size_t pad_bad = 0, past_bad = 0;
    for (int i = 0; i < BT; i++)
        for (int j = vocab; j < ld; j++) {
            tprt_bf16 v = raw[(size_t)i * ld + j];
            if (j < vl)
                pad_bad += v != 0; /* +0 exactly */
            else
                past_bad += v != tprt_f2bf(NAN);
        }
    snprintf(detail, sizeof detail, "%zu pad grads not +0, %zu columns past vl changed", pad_bad, past_bad);
    snprintf(name, sizeof name, "ce fused padding %s", tag);
    check_that(name, pad_bad == 0 && past_bad == 0, detail);
    cudaFree(dtgt), cudaFree(dx), cudaFree(dlosses), cudaFree(dmean);
    free(x), free(xp), free(tgt), free(rmax), free(rsum), free(lref), free(dref), free(hl), free(hm);
    free(full), free(got), free(raw);
}

/* cuda_ce_mean over more rows than its block has threads */
static void test_ce_mean(int BT) {
    float *l = rnd((size_t)BT, 5.0f, 0), ref;
    double s = 0;
    for (int i = 0; i < BT; i++) s += l[i];
    ref = (float)(s / BT);
    float *dl = dev_f(l, BT), *dm = dev_f(NULL, 1);
    sync_or_die("ce mean", cuda_ce_mean(dm, dl, BT));
    float *h = host_f(dm, 1);
    char name[64];
    snprintf(name, sizeof name, "ce mean of %d rows", BT);
    check(name, h, &ref, 1, F32_TOL);
    cudaFree(dl), cudaFree(dm);
    free(l), free(h);
}

/* AdamW over N_SLOTS tensors of mixed sizes (tiny, n % 4 != 0, over one sumsq chunk, starts off alignment,
 * an empty one) laid out in shared arrays: multi against per-tensor, to the bit. */
#define N_SLOTS (2 * TPRT_ADAMW_SLOTS_PER_LAUNCH + 7)
static void test_adamw_multi(void) {
    static const size_t sizes[] = {1, 3, 4, 5, 8, 17, 768, 1027, 2304, 4096, 4099, 0, 50001, 65536, 196608, 131075};
    const int n_sizes = (int)(sizeof sizes / sizeof sizes[0]);
    size_t off[N_SLOTS], len[N_SLOTS], total = 0;
    int decay[N_SLOTS], repl[N_SLOTS];
    for (int i = 0; i < N_SLOTS; i++) {
        if (i % 2 == 0) total = (total + 3) / 4 * 4; /* 16-byte aligned start */
        if (i % 5 == 0) total += 1;                  /* 4 bytes off */
        off[i] = total, len[i] = sizes[i % n_sizes], total += len[i];
        decay[i] = i % 3 != 0, repl[i] = i % 4 == 1;
    }
    float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, clip = 1.0f;
    float bc1 = 1.0f - powf(b1, 3.0f), bc2 = 1.0f - powf(b2, 3.0f);
    float *p = rnd(total, 1.0f, 0), *g = rnd(total, 0.1f, 0), *m = rnd(total, 0.01f, 0), *v = rnd(total, 1e-4f, 0);
    for (size_t k = 0; k < total; k++) v[k] = fabsf(v[k]);
    float *pa = dev_f(p, total), *ma = dev_f(m, total), *va = dev_f(v, total), *dg = dev_f(g, total);
    float *pb = dev_f(p, total), *mb = dev_f(m, total), *vb = dev_f(v, total);
    tprt_bf16 *wa = dev_bf(NULL, total), *wb = dev_bf(NULL, total);
    float *acc_multi = dev_f(NULL, 2), *acc_one = dev_f(NULL, 2);
    cudaMemset(acc_multi, 0, 8), cudaMemset(acc_one, 0, 8);
    tprt_adamw_slot slots[N_SLOTS];
    double s[2] = {0, 0};
    int rc = 0;
    for (int i = 0; i < N_SLOTS; i++) {
        tprt_adamw_slot t = {pa + off[i], wa + off[i], dg + off[i], ma + off[i],
                             va + off[i], len[i],      decay[i],    repl[i]};
        slots[i] = t;
        rc |= cuda_sumsq(acc_one + repl[i], dg + off[i], len[i]);
        for (size_t k = off[i]; k < off[i] + len[i]; k++) s[repl[i]] += (double)g[k] * g[k];
    }
    sync_or_die("sumsq per tensor", rc);
    sync_or_die("sumsq multi", cuda_sumsq_multi(acc_multi, slots, N_SLOTS));
    float *h_multi = host_f(acc_multi, 2), *h_one = host_f(acc_one, 2), s_ref[2] = {(float)s[0], (float)s[1]};
    check("sumsq_multi vs cuda_sumsq", h_multi, h_one, 2, 1e-5);
    check("sumsq_multi vs CPU", h_multi, s_ref, 2, F32_TOL);
    for (int i = 0; i < N_SLOTS; i++)
        rc |= cuda_adamw_update(pb + off[i], wb + off[i], dg + off[i], mb + off[i], vb + off[i], len[i], acc_one, clip,
                                lr, b1, b2, eps, decay[i] ? lr * wd : 0.0f, bc1, bc2);
    sync_or_die("adamw per tensor", rc);
    sync_or_die("adamw multi", cuda_adamw_multi(slots, N_SLOTS, acc_one, clip, lr, b1, b2, eps, wd, bc1, bc2));
    float *arrays[3][2] = {{pa, pb}, {ma, mb}, {va, vb}};
    const char *names[3] = {"adamw_multi master (bits)", "adamw_multi exp_avg (bits)", "adamw_multi exp_avg_sq (bits)"};
    for (int a = 0; a < 3; a++) {
        float *x = host_f(arrays[a][0], total), *y = host_f(arrays[a][1], total);
        check_bits(names[a], x, y, total * 4);
        free(x), free(y);
    }
    tprt_bf16 *xa = malloc(total * 2), *xb = malloc(total * 2);
    cudaMemcpy(xa, wa, total * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(xb, wb, total * 2, cudaMemcpyDeviceToHost);
    check_bits("adamw_multi working (bits)", xa, xb, total * 2);
    float norm = sqrtf(h_one[0] + h_one[1]), scale = norm > clip ? clip / (norm + 1e-6f) : 1.0f;
    for (int i = 0; i < N_SLOTS; i++)
        for (size_t k = off[i]; k < off[i] + len[i]; k++) {
            float gk = g[k] * scale, dec = decay[i] ? lr * wd : 0.0f;
            m[k] = b1 * m[k] + (1.0f - b1) * gk;
            v[k] = b2 * v[k] + (1.0f - b2) * gk * gk;
            float x = p[k] - dec * p[k];
            p[k] = x - lr * (m[k] / bc1) / (sqrtf(v[k] / bc2) + eps);
        }
    float *hp = host_f(pa, total);
    check("adamw_multi master vs CPU", hp, p, total, 1e-6);
    /* cuda_zero_multi over the even slots (more than one launch's worth): their grads become 0, the odd
     * slots' and the gaps between them stay as they were */
    tprt_adamw_slot even[N_SLOTS];
    int n_even = 0;
    for (int i = 0; i < N_SLOTS; i += 2) {
        even[n_even++] = (tprt_adamw_slot){.grad = dg + off[i], .n = len[i]};
        memset(g + off[i], 0, len[i] * sizeof(float));
    }
    sync_or_die("zero multi", cuda_zero_multi(even, n_even));
    float *hg = host_f(dg, total);
    check_bits("zero_multi grads (bits)", hg, g, total * 4);
    free(hg);
    cudaFree(pa), cudaFree(ma), cudaFree(va), cudaFree(dg), cudaFree(pb), cudaFree(mb), cudaFree(vb), cudaFree(wa);
    cudaFree(wb), cudaFree(acc_multi), cudaFree(acc_one);
    free(p), free(g), free(m), free(v), free(h_multi), free(h_one), free(xa), free(xb), free(hp);
}

void run_fused_checks(void) {
    test_layernorm(37, 96, 0, 0);    /* one partial chunk */
    test_layernorm(203, 768, 0, 0);  /* GPT-2: three full chunks */
    test_layernorm(3001, 768, 0, 0); /* several rows per warp in the backward */
    test_layernorm(203, 768, 0, 1);
    test_layernorm(203, 768, 4, 0); /* unaligned rows: scalar */
    test_layernorm(45, 1024, 0, 0);
    test_layernorm(37, 64, 0, 0); /* tiny */
    test_layernorm(1001, 72, 0, 0);
    test_layernorm(37, 100, 0, 0);  /* C % 8 != 0: scalar */
    test_layernorm(29, 2304, 0, 0); /* wider than the vector path: scalar */
    test_residual_layernorm(203, 768, 0);
    test_residual_layernorm(37, 64, 0);
    test_residual_layernorm(37, 100, 0);
    test_residual_layernorm(45, 768, 4);
    test_ce_fused(24, 1000, 990, 1024, 1.0f);
    test_ce_fused(7, 1003, 1001, 1008, 0.5f);
    test_ce_fused(9, 500, 497, 501, 1.0f); /* ld % 8 != 0: scalar */
    test_ce_fused(4, 50304, 50257, 50304, 1.0f);
    char detail[64]; /* so the checks above ran the stash, GPT-2's rows included */
    int gpt2 = cuda_crossentropy_stash_ready(50304);
    snprintf(detail, sizeof detail, "50,304 columns: %d", gpt2);
    check_that("cross-entropy row stash available", gpt2 == 1, detail);
    setenv("TPRT_CE_STASH", "0", 1); /* the kernel that reads each row twice (the stash's fallback) */
    test_ce_fused(24, 1000, 990, 1024, 1.0f);
    test_ce_fused(4, 50304, 50257, 50304, 1.0f);
    unsetenv("TPRT_CE_STASH");
    test_ce_mean(1000);
    test_adamw_multi();
}
