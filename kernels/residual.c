/* residual.c - residual connection out = a + b, and its backward. */
#include "layers.h"
void residual_forward(float *out, const float *a, const float *b, int n) {
    for (int i = 0; i < n; i++) out[i] = a[i] + b[i];
}
void residual_backward(float *da, float *db, const float *dout, int n) {
    for (int i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}
