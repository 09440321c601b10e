/* matmul.c - out = inp @ W^T + bias with W stored (OC, IC), and backward. */
#include "layers.h"
#include <stddef.h>
void matmul_forward(float *out, const float *inp, const float *w, const float *bias, int BT, int IC, int OC) {
    for (int i = 0; i < BT; i++) {
        const float *x = inp + (size_t)i * IC;
        for (int o = 0; o < OC; o++) {
            const float *wr = w + (size_t)o * IC;
            float acc = bias ? bias[o] : 0.0f;
            for (int k = 0; k < IC; k++) acc += x[k] * wr[k];
            out[(size_t)i * OC + o] = acc;
        }
    }
}
void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w, int BT,
                     int IC, int OC) {
    for (int i = 0; i < BT; i++) {
        const float *dy = dout + (size_t)i * OC, *x = inp + (size_t)i * IC;
        float *dx = dinp + (size_t)i * IC;
        for (int o = 0; o < OC; o++) {
            float g = dy[o];
            if (g == 0.0f) continue;
            const float *wr = w + (size_t)o * IC;
            float *dwr = dw + (size_t)o * IC;
            for (int k = 0; k < IC; k++) {
                dx[k] += g * wr[k];
                dwr[k] += g * x[k];
            }
        }
    }
    if (dbias) bias_backward(dbias, dout, BT, OC);
}
void bias_add(float *out, const float *bias, int BT, int OC) {
    for (int i = 0; i < BT; i++)
        for (int o = 0; o < OC; o++) out[(size_t)i * OC + o] += bias[o];
}
void bias_backward(float *dbias, const float *dout, int BT, int OC) {
    for (int i = 0; i < BT; i++)
        for (int o = 0; o < OC; o++) dbias[o] += dout[(size_t)i * OC + o];
}
