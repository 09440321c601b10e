/* gelu.c - GELU (tanh approximation), forward and backward. */
#include "layers.h"
#include <math.h>
#include <stddef.h>
#define GELU_K 0.7978845608f
void gelu_forward(float *out, const float *inp, int n) {
    for (int i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
    }
}
void gelu_backward(float *dinp, const float *inp, const float *dout, int n) {
    for (int i = 0; i < n; i++) {
        float x = inp[i], u = GELU_K * (x + 0.044715f * x * x * x), th = tanhf(u);
        float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += dout[i] * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du);
    }
}
