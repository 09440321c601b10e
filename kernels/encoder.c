/* encoder.c - token embedding (vocab-parallel: a rank holds rows [v0,v0+vl))
 * and position embedding, forward and backward. */
#include "layers.h"
#include <string.h>
void encoder_forward(float *out, const int *tok, const float *wte, int v0, int vl, int BT, int C) {
    for (int i = 0; i < BT; i++) {
        int r = tok[i] - v0;
        if (r >= 0 && r < vl)
            memcpy(out + (size_t)i * C, wte + (size_t)r * C, sizeof(float) * C);
        else
            memset(out + (size_t)i * C, 0, sizeof(float) * C);
    }
}
void encoder_backward(float *dwte, const float *dout, const int *tok, int v0, int vl, int BT, int C) {
    for (int i = 0; i < BT; i++) {
        int r = tok[i] - v0;
        if (r < 0 || r >= vl) continue;
        for (int c = 0; c < C; c++) dwte[(size_t)r * C + c] += dout[(size_t)i * C + c];
    }
}
void pos_forward(float *out, const float *wpe, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) out[((size_t)b * T + t) * C + c] += wpe[(size_t)t * C + c];
}
void pos_backward(float *dwpe, const float *dout, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) dwpe[(size_t)t * C + c] += dout[((size_t)b * T + t) * C + c];
}
