/* crossentropy.c - vocab-parallel softmax cross-entropy: every rank holds
 * the logits of its vocab slice only; the row max, the sum of exponentials
 * and the target logit are all-reduced, padded vocab entries are masked. */
#include "model.h"
#include <float.h>
#include <math.h>
#include <string.h>

/* Number of real (unpadded) vocab entries in [v0, v0+vl). */
static int real_cols(int v0, int vl, int vocab) {
    int n = vocab - v0;
    return n < 0 ? 0 : n > vl ? vl : n;
}

int crossentropy_forward(float *loss, float *rowmax, float *rowsum, float *scratch, const float *logits,
                         const int *targets, int v0, int vl, int vocab, int BT, tprt_comm *comm) {
    int nv = real_cols(v0, vl, vocab);
    for (int i = 0; i < BT; i++) {
        const float *x = logits + (size_t)i * vl;
        float mx = -FLT_MAX;
        for (int j = 0; j < nv; j++) mx = x[j] > mx ? x[j] : mx;
        rowmax[i] = mx;
    }
    int rc = tprt_allreduce(comm, rowmax, (size_t)BT, TPRT_MAX);
    if (rc) return rc;
    /* scratch[0..BT): local sum of exp; scratch[BT..2BT): target logit (0 off-slice) */
    for (int i = 0; i < BT; i++) {
        const float *x = logits + (size_t)i * vl;
        float s = 0.0f;
        for (int j = 0; j < nv; j++) s += expf(x[j] - rowmax[i]);
        scratch[i] = s;
        int r = targets[i] - v0;
        scratch[BT + i] = (r >= 0 && r < nv) ? x[r] : 0.0f;
    }
    if ((rc = tprt_allreduce(comm, scratch, 2 * (size_t)BT, TPRT_SUM))) return rc;
    double total = 0.0;
    for (int i = 0; i < BT; i++) {
        rowsum[i] = scratch[i];
        total += (double)(logf(scratch[i]) + rowmax[i] - scratch[BT + i]);
    }
    *loss = (float)(total / BT);
    return 0;
}

void crossentropy_backward(float *dlogits, const float *logits, const float *rowmax, const float *rowsum,
                           const int *targets, int v0, int vl, int vocab, int BT, float dloss) {
    int nv = real_cols(v0, vl, vocab);
    float scale = dloss / (float)BT;
    for (int i = 0; i < BT; i++) {
        const float *x = logits + (size_t)i * vl;
        float *d = dlogits + (size_t)i * vl, inv = 1.0f / rowsum[i];
        for (int j = 0; j < nv; j++) d[j] = expf(x[j] - rowmax[i]) * inv * scale;
        if (nv < vl) memset(d + nv, 0, sizeof(float) * (size_t)(vl - nv));
        int r = targets[i] - v0;
        if (r >= 0 && r < nv) d[r] -= scale;
    }
}
