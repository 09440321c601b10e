/* layernorm.c - layer normalization over the channel dim, forward/backward. */
#include "layers.h"
#include <math.h>
#include <stddef.h>
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b, int BT,
                       int C) {
    for (int i = 0; i < BT; i++) {
        const float *x = inp + (size_t)i * C;
        float m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        float s = 1.0f / sqrtf(v / C + 1e-5f);
        for (int c = 0; c < C; c++) out[(size_t)i * C + c] = (x[c] - m) * s * w[c] + b[c];
        mean[i] = m;
        rstd[i] = s;
    }
}
void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                        const float *mean, const float *rstd, int BT, int C) {
    for (int i = 0; i < BT; i++) {
        const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
        float m = mean[i], s = rstd[i], dmean = 0, dnorm = 0;
        for (int c = 0; c < C; c++) {
            float dn = w[c] * dy[c];
            dmean += dn;
            dnorm += dn * (x[c] - m) * s;
        }
        dmean /= C;
        dnorm /= C;
        for (int c = 0; c < C; c++) {
            float n = (x[c] - m) * s;
            db[c] += dy[c];
            dw[c] += n * dy[c];
            dinp[(size_t)i * C + c] += (w[c] * dy[c] - dmean - n * dnorm) * s;
        }
    }
}
