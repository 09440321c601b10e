/* layers.h - CPU reference kernels of tprt, one file per layer (llm.c
 * shape): forward and backward; backward functions accumulate (+=). */
#ifndef TPRT_LAYERS_H
#define TPRT_LAYERS_H
#include <stdint.h>
/* encoder.c: out[bt] = wte[tok - v0] if v0 <= tok < v0 + vl, else 0 */
void encoder_forward(float *out, const int *tok, const float *wte, int v0, int vl, int BT, int C);
void encoder_backward(float *dwte, const float *dout, const int *tok, int v0, int vl, int BT, int C);
void pos_forward(float *out, const float *wpe, int B, int T, int C);
void pos_backward(float *dwpe, const float *dout, int B, int T, int C);
/* layernorm.c */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b, int BT,
                       int C);
void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                        const float *mean, const float *rstd, int BT, int C);
/* matmul.c: out(BT,OC) = inp(BT,IC) @ W(OC,IC)^T + bias (bias may be NULL) */
void matmul_forward(float *out, const float *inp, const float *w, const float *bias, int BT, int IC, int OC);
void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w, int BT,
                     int IC, int OC);
void bias_add(float *out, const float *bias, int BT, int OC);
void bias_backward(float *dbias, const float *dout, int BT, int OC);
/* attention.c: qkv (B,T,3*Cl) laid out [q|k|v], NH heads of size hs = Cl/NH */
void attention_forward(float *out, float *att, const float *qkv, int B, int T, int Cl, int NH);
void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int Cl,
                        int NH);
/* gelu.c (tanh approximation) */
void gelu_forward(float *out, const float *inp, int n);
void gelu_backward(float *dinp, const float *inp, const float *dout, int n);
/* residual.c */
void residual_forward(float *out, const float *a, const float *b, int n);
void residual_backward(float *da, float *db, const float *dout, int n);
#endif
