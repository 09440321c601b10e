/* test_tprt_cuda_matmul.c - checks of matmul.cu's epilogues against the CPU
 * references (matmul.c, gelu.c): the forward with bias and GELU in the GEMM
 * (the GELU's input kept), and the backward that writes the input grad
 * instead of adding to it, with and without the GELU gradient in its
 * epilogue; each on both product paths (cuBLASLt, and plain cuBLAS with the
 * separate kernels), and on cuBLASLt with each way of taking the bias grad
 * (the weight grad's BGRADB epilogue, the tile kernel, the column kernel;
 * the default, fused, takes the tile kernel here).
 * The input grad starts NaN-poisoned, so a product that reads it instead of
 * overwriting it fails; dw and dbias start random, so their accumulation is
 * checked, except in the "fresh" checks where dbias starts at zero and the
 * epilogue may write it in place.  OC 130 has no cuBLASLt GELU epilogue (the
 * stride of its GELU input is not a multiple of 8): it checks the fallback
 * within the cuBLASLt path.  The standalone bias grad is checked against a
 * column sum on shapes the tile kernel takes (several row chunks, a partial
 * column block, a padded row stride) and on one it leaves to the column
 * kernel (OC 130).  At three GPT-2 layer shapes (BT 4096) the epilogue's
 * bias grad and weight grad are checked against those of the tile-kernel
 * path, so the algorithms cuBLASLt picks at real sizes are covered too. */
#include "layers.h"
#include "tprt_cuda_check.h"
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *copy_of(const float *a, size_t n) {
    float *b = malloc(n * sizeof(float) + 4);
    memcpy(b, a, n * sizeof(float));
    return b;
}

/* y = gelu(x W1^T + b1): out and pre against the CPU */
static void check_gelu_forward(const char *tag, int BT, int IC, int OC, void **d_out, void **d_pre, float **h_out,
                               float **h_pre) {
    size_t no = (size_t)BT * OC;
    float *x = rnd((size_t)BT * IC, 1.0f, 1), *w = rnd((size_t)OC * IC, 0.2f, 1), *b = rnd(OC, 0.5f, 1);
    float *pre = malloc(no * 4), *out = malloc(no * 4);
    matmul_forward(pre, x, w, b, BT, IC, OC);
    gelu_forward(out, pre, (int)no);
    void *dx = dev_bf(x, (size_t)BT * IC), *dw = dev_bf(w, (size_t)OC * IC), *db = dev_bf(b, OC);
    *d_out = dev_bf(NULL, no), *d_pre = dev_bf(NULL, no);
    sync_or_die("matmul + gelu forward", cuda_matmul_gelu_forward(*d_out, *d_pre, dx, dw, db, BT, IC, OC));
    *h_pre = host_bf(*d_pre, no), *h_out = host_bf(*d_out, no);
    check_tagged("matmul+gelu forward pre", tag, *h_pre, pre, no, BF_TOL);
    check_tagged("matmul+gelu forward out", tag, *h_out, out, no, BF_TOL);
    cudaFree(dx), cudaFree(dw), cudaFree(db);
    free(x), free(w), free(b), free(pre), free(out);
}

/* The next layer's backward, dinp = (dy W2) [* gelu'(pre)], from the GPU's own act and pre. */
static void check_backward_set(const char *tag, int with_gelu, int fresh, int BT, int IC, void *d_act, void *d_pre,
                               const float *act, const float *pre) {
    int OC = 64;
    size_t ni = (size_t)BT * IC;
    char what[64];
    float *w = rnd((size_t)OC * IC, 0.2f, 1), *dy = rnd((size_t)BT * OC, 1.0f, 1);
    /* fresh: the device's dw starts as junk that must be overwritten, the CPU's at 0; dbias at 0 on both */
    float *gw = fresh ? calloc((size_t)OC * IC, 4) : rnd((size_t)OC * IC, 1.0f, 0);
    float *gb = fresh ? calloc(OC, 4) : rnd(OC, 1.0f, 0), *junk = rnd((size_t)OC * IC, 1.0f, 0);
    float *dact = calloc(ni, 4), *dinp = calloc(ni, 4);
    void *dw = dev_bf(w, (size_t)OC * IC), *ddy = dev_bf(dy, (size_t)BT * OC), *ddinp = dev_bf(NULL, ni);
    float *dgw = dev_f(fresh ? junk : gw, (size_t)OC * IC), *dgb = dev_f(gb, OC);
    int was = cuda_matmul_grads_fresh(fresh);
    sync_or_die("matmul backward_set",
                cuda_matmul_backward_set(ddinp, with_gelu ? d_pre : NULL, dgw, dgb, ddy, d_act, dw, BT, IC, OC, OC));
    cuda_matmul_grads_fresh(was);
    matmul_backward(dact, gw, gb, dy, act, w, BT, IC, OC); /* gw, gb accumulate on the CPU too */
    if (with_gelu)
        gelu_backward(dinp, pre, dact, (int)ni);
    else
        memcpy(dinp, dact, ni * 4);
    float *h1 = host_bf(ddinp, ni), *h2 = host_f(dgw, (size_t)OC * IC), *h3 = host_f(dgb, OC);
    snprintf(what, sizeof what, "backward_set dinp%s", with_gelu ? "*gelu'" : "");
    check_tagged(what, tag, h1, dinp, ni, BF_TOL);
    check_tagged(fresh ? "backward_set dw (fresh)" : "backward_set dw", tag, h2, gw, (size_t)OC * IC, 1e-3);
    check_tagged(fresh ? "backward_set dbias (fresh)" : "backward_set dbias", tag, h3, gb, OC, 1e-3);
    cudaFree(dw), cudaFree(ddy), cudaFree(ddinp), cudaFree(dgw), cudaFree(dgb);
    free(w), free(dy), free(gw), free(gb), free(junk), free(dact), free(dinp), free(h1), free(h2), free(h3);
}

static const char *const mode_names[] = {"epilogue", "tile", "column", "fused"};

static void check_epilogues(int lt, int OC, int bias_mode) {
    int BT = 70, IC = 96, was = cuda_matmul_use_lt(lt), was_mode = cuda_bias_grad_mode(bias_mode);
    char tag[64];
    snprintf(tag, sizeof tag, "(%s, OC %d, bias grad %s)", lt ? "cuBLASLt" : "plain", OC, mode_names[bias_mode]);
    void *d_out, *d_pre;
    float *h_out, *h_pre;
    check_gelu_forward(tag, BT, IC, OC, &d_out, &d_pre, &h_out, &h_pre);
    float *act = copy_of(h_out, (size_t)BT * OC), *pre = copy_of(h_pre, (size_t)BT * OC);
    check_backward_set(tag, 1, 0, BT, OC, d_out, d_pre, act, pre);
    check_backward_set(tag, 0, 0, BT, OC, d_out, d_pre, act, pre);
    check_backward_set(tag, 0, 1, BT, OC, d_out, d_pre, act, pre);
    cudaFree(d_out), cudaFree(d_pre);
    free(h_out), free(h_pre), free(act), free(pre);
    cuda_bias_grad_mode(was_mode);
    cuda_matmul_use_lt(was);
}

/* cuda_bias_backward: dbias (random start) += dout's column sums, dout (BT, OC) at row stride ld. */
static void check_bias_grad(int bias_mode, int BT, int OC, int ld) {
    float *dy = rnd((size_t)BT * ld, 1.0f, 1), *gb = rnd(OC, 1.0f, 0);
    void *ddy = dev_bf(dy, (size_t)BT * ld);
    float *dgb = dev_f(gb, OC);
    int was = cuda_bias_grad_mode(bias_mode);
    sync_or_die("bias backward", cuda_bias_backward(dgb, ddy, BT, OC, ld));
    cuda_bias_grad_mode(was);
    for (int o = 0; o < OC; o++) {
        double s = gb[o];
        for (int r = 0; r < BT; r++) s += dy[(size_t)r * ld + o];
        gb[o] = (float)s;
    }
    float *h = host_f(dgb, OC);
    char tag[64];
    snprintf(tag, sizeof tag, "(%s, BT %d, OC %d, ld %d)", mode_names[bias_mode], BT, OC, ld);
    check_tagged("bias backward", tag, h, gb, OC, 1e-4);
    cudaFree(ddy), cudaFree(dgb);
    free(dy), free(gb), free(h);
}

/* At a GPT-2 layer's shape (the algorithms cuBLASLt picks there, split or not): the weight grad
 * with its bias grad in the epilogue (added, and both written in place while the grads are fresh)
 * against the same grads with the bias grad by the tile kernel, itself checked against the CPU above. */
static void check_bias_epilogue_at(int BT, int IC, int OC) {
    size_t nw = (size_t)OC * IC;
    float *x = rnd((size_t)BT * IC, 1.0f, 1), *dy = rnd((size_t)BT * OC, 1.0f, 1), *gw = rnd(nw, 1.0f, 0);
    float *gb = rnd(OC, 1.0f, 0), *zero = calloc(OC, 4), *ref_w = NULL, *ref_b = NULL;
    void *dx = dev_bf(x, (size_t)BT * IC), *ddy = dev_bf(dy, (size_t)BT * OC);
    char tag[64];
    snprintf(tag, sizeof tag, "(BT %d, IC %d, OC %d)", BT, IC, OC);
    for (int v = 0; v < 3; v++) { /* tile kernel (reference), epilogue +=, epilogue written in place */
        float *dgw = dev_f(gw, nw), *dgb = dev_f(v == 2 ? zero : gb, OC);
        int was = cuda_bias_grad_mode(v ? TPRT_BIAS_GRAD_EPILOGUE : TPRT_BIAS_GRAD_TILE),
            fresh = cuda_matmul_grads_fresh(v == 2);
        sync_or_die("bias grad epilogue",
                    cuda_matmul_backward_set(NULL, NULL, dgw, dgb, ddy, dx, NULL, BT, IC, OC, OC));
        cuda_matmul_grads_fresh(fresh), cuda_bias_grad_mode(was);
        float *hw = host_f(dgw, nw), *hb = host_f(dgb, OC);
        if (v == 2) { /* written, not added: the same totals as the added ones once the start is added */
            for (int o = 0; o < OC; o++) hb[o] += gb[o];
            for (size_t i = 0; i < nw; i++) hw[i] += gw[i];
        }
        if (!v) {
            ref_w = hw, ref_b = hb;
        } else {
            check_tagged(v == 1 ? "epilogue dbias (+=) vs tile" : "epilogue dbias (in place) vs tile", tag, hb, ref_b,
                         OC, 1e-4);
            check_tagged("epilogue dw vs tile's", tag, hw, ref_w, nw, 1e-4);
            free(hw), free(hb);
        }
        cudaFree(dgw), cudaFree(dgb);
    }
    cudaFree(dx), cudaFree(ddy);
    free(x), free(dy), free(gw), free(gb), free(zero), free(ref_w), free(ref_b);
}

void run_matmul_checks(void) {
    check_epilogues(1, 128, TPRT_BIAS_GRAD_FUSED);
    check_epilogues(1, 128, TPRT_BIAS_GRAD_EPILOGUE);
    check_epilogues(1, 130, TPRT_BIAS_GRAD_EPILOGUE);
    check_epilogues(1, 128, TPRT_BIAS_GRAD_TILE);
    check_epilogues(1, 128, TPRT_BIAS_GRAD_COLUMN);
    check_epilogues(0, 128, TPRT_BIAS_GRAD_EPILOGUE);
    check_bias_epilogue_at(4096, 768, 2304); /* c_attn */
    check_bias_epilogue_at(4096, 768, 3072); /* c_fc */
    check_bias_epilogue_at(4096, 3072, 768); /* mlp.c_proj (attn.c_proj: IC 768) */
    long fused, refused;
    cuda_matmul_bias_grad_counts(&fused, &refused);
    printf("bias grad in the weight grad's epilogue: %ld calls, refused by cuBLASLt: %ld\n", fused, refused);
    for (int m = TPRT_BIAS_GRAD_TILE; m <= TPRT_BIAS_GRAD_COLUMN; m++) {
        check_bias_grad(m, 70, 64, 64);
        check_bias_grad(m, 3000, 520, 528); /* tile: 3 column blocks, the last partial; several row chunks */
        check_bias_grad(m, 333, 130, 130);  /* tile does not fit: the column kernel */
    }
}
