/* attention.c - causal multi-head self-attention over this rank's heads. */
#include "layers.h"
#include <math.h>
#include <stddef.h>
void attention_forward(float *out, float *att, const float *qkv, int B, int T, int Cl, int NH) {
    int hs = Cl / NH, C3 = 3 * Cl;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                float *a = att + (((size_t)b * NH + h) * T + t) * T, mx = -1e30f, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * T + u) * C3 + Cl + h * hs;
                    float s = 0;
                    for (int i = 0; i < hs; i++) s += q[i] * k[i];
                    a[u] = s * scale;
                    if (a[u] > mx) mx = a[u];
                }
                for (int u = 0; u <= t; u++) sum += (a[u] = expf(a[u] - mx));
                for (int u = 0; u < T; u++) a[u] = u <= t ? a[u] / sum : 0.0f;
                float *o = out + ((size_t)b * T + t) * Cl + h * hs;
                for (int i = 0; i < hs; i++) o[i] = 0;
                for (int u = 0; u <= t; u++) {
                    const float *v = qkv + ((size_t)b * T + u) * C3 + 2 * Cl + h * hs;
                    for (int i = 0; i < hs; i++) o[i] += a[u] * v[i];
                }
            }
}
void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int Cl,
                        int NH) {
    int hs = Cl / NH, C3 = 3 * Cl;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *a = att + (((size_t)b * NH + h) * T + t) * T;
                const float *dO = dout + ((size_t)b * T + t) * Cl + h * hs;
                const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                float *dq = dqkv + ((size_t)b * T + t) * C3 + h * hs;
                float da[T > 0 ? T : 1], dot = 0;
                for (int u = 0; u <= t; u++) {
                    const float *v = qkv + ((size_t)b * T + u) * C3 + 2 * Cl + h * hs;
                    float *dv = dqkv + ((size_t)b * T + u) * C3 + 2 * Cl + h * hs;
                    float s = 0;
                    for (int i = 0; i < hs; i++) {
                        s += dO[i] * v[i];
                        dv[i] += a[u] * dO[i];
                    }
                    da[u] = s;
                    dot += s * a[u];
                }
                for (int u = 0; u <= t; u++) {
                    float ds = a[u] * (da[u] - dot) * scale;
                    const float *k = qkv + ((size_t)b * T + u) * C3 + Cl + h * hs;
                    float *dk = dqkv + ((size_t)b * T + u) * C3 + Cl + h * hs;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += ds * k[i];
                        dk[i] += ds * q[i];
                    }
                }
            }
}
