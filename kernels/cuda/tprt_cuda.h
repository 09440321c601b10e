/* tprt_cuda.h - the CUDA kernels of tprt, one .cu file per layer, callable
 * from C.  Semantics follow the CPU reference (layers.h, crossentropy.c,
 * adamw.c): backward functions accumulate (+=), where a function does not say it writes (the
 * *_set products, the fused attention's model call, fresh grads).  Activations and weights are
 * bf16 (tprt_bf16, raw bits), parameter grads, optimizer state, norms and
 * layernorm/softmax statistics fp32.  Every launcher runs on the default
 * stream and returns 0, or -1 when a launch or cuBLAS call failed. */
#ifndef TPRT_CUDA_H
#define TPRT_CUDA_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t tprt_bf16; /* bfloat16 bits */

/* Host conversions (round to nearest even; NaN stays NaN). */
static inline tprt_bf16 tprt_f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (tprt_bf16)(u >> 16);
}
static inline float tprt_bf2f(tprt_bf16 b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* cast.cu: conversions on the device */
int cuda_f32_to_bf16(tprt_bf16 *out, const float *in, size_t n);
int cuda_bf16_to_f32(float *out, const tprt_bf16 *in, size_t n);

/* encoder.cu: out[bt] = wte[tok - v0] for v0 <= tok < v0+vl, else 0; out += wpe[t] */
int cuda_encoder_forward(tprt_bf16 *out, const int *tok, const tprt_bf16 *wte, int v0, int vl, int BT, int C);
int cuda_encoder_backward(float *dwte, const tprt_bf16 *dout, const int *tok, int v0, int vl, int BT, int C);
int cuda_pos_forward(tprt_bf16 *out, const tprt_bf16 *wpe, int B, int T, int C);
int cuda_pos_backward(float *dwpe, const tprt_bf16 *dout, int B, int T, int C);

/* layernorm.cu (eps 1e-5) */
int cuda_layernorm_forward(tprt_bf16 *out, float *mean, float *rstd, const tprt_bf16 *inp, const tprt_bf16 *w,
                           const tprt_bf16 *b, int BT, int C);
/* dinp += the input grad, dw/db += the weight and bias grads; dsum (may be NULL) += the column
 * sums of the updated dinp (in tprt's backward, a row-parallel product's bias grad). */
int cuda_layernorm_backward(tprt_bf16 *dinp, float *dw, float *db, float *dsum, const tprt_bf16 *dout,
                            const tprt_bf16 *inp, const tprt_bf16 *w, const float *mean, const float *rstd, int BT,
                            int C);
/* res = a + b, then out = layernorm(res): a residual add fused into the layernorm after it
 * (res may not alias a or b). */
int cuda_residual_layernorm_forward(tprt_bf16 *res, tprt_bf16 *out, float *mean, float *rstd, const tprt_bf16 *a,
                                    const tprt_bf16 *b, const tprt_bf16 *w, const tprt_bf16 *bias, int BT, int C);

/* matmul.cu: out(BT,OC) = inp(BT,IC) @ W(OC,IC)^T + bias through cuBLAS
 * (bf16 operands, fp32 accumulation); `ld` is the row stride of out / dout
 * (>= OC; the LM head pads it).  bias, dinp, dw, dbias may be NULL. */
int cuda_blas_init(void);
void cuda_blas_shutdown(void);
int cuda_matmul_forward(tprt_bf16 *out, const tprt_bf16 *inp, const tprt_bf16 *w, const tprt_bf16 *bias, int BT, int IC,
                        int OC, int ld);
int cuda_matmul_backward(tprt_bf16 *dinp, float *dw, float *dbias, const tprt_bf16 *dout, const tprt_bf16 *inp,
                         const tprt_bf16 *w, int BT, int IC, int OC, int ld);
/* pre = inp @ W^T + bias (row stride OC), out = gelu(pre): bias and GELU in the GEMM's epilogue. */
int cuda_matmul_gelu_forward(tprt_bf16 *out, tprt_bf16 *pre, const tprt_bf16 *inp, const tprt_bf16 *w,
                             const tprt_bf16 *bias, int BT, int IC, int OC);
/* The backward without the input grad's accumulation: dinp = dout @ W is overwritten (no
 * zeroing needed), times gelu'(pre_gelu) elementwise when pre_gelu is non-NULL (the GELU
 * backward of the layer that fed inp, in the epilogue; pre_gelu has dinp's shape (BT, IC));
 * dw and dbias still accumulate. */
int cuda_matmul_backward_set(tprt_bf16 *dinp, const tprt_bf16 *pre_gelu, float *dw, float *dbias, const tprt_bf16 *dout,
                             const tprt_bf16 *inp, const tprt_bf16 *w, int BT, int IC, int OC, int ld);
/* Which path the products take: 1 cuBLASLt with epilogues (default), 0 plain cublasGemmEx with
 * separate bias and GELU kernels (also env TPRT_MATMUL=cublas); returns the previous one. */
int cuda_matmul_use_lt(int lt);
/* How many of cuBLASLt's candidate algorithms are timed, once per product shape, to pick the
 * fastest (default 8, env TPRT_MATMUL_TUNE; 1 takes the heuristic's first); returns the previous
 * count and forgets the picks made so far. */
int cuda_matmul_tune(int candidates);
int cuda_bias_add(tprt_bf16 *out, const tprt_bf16 *bias, int BT, int OC, int ld);
/* dbias += dout summed over its BT rows (the tile kernel where OC, ld are multiples of 8). */
int cuda_bias_backward(float *dbias, const tprt_bf16 *dout, int BT, int OC, int ld);
/* How the bias grads are taken.  FUSED (the default): the model takes c_attn's from the attention
 * backward as it makes dqkv (cuda_attention_fused_backward's dbias); the tile kernel for the rest, and
 * for every call here.  TILE: the standalone tile kernel for all, c_attn's too.  EPILOGUE: in the weight grad's cuBLASLt epilogue (BGRADB; the tile kernel when
 * cuBLASLt refuses).  COLUMN: the column kernel.  Env TPRT_BIAS_GRAD=fused|tile|epilogue|column.
 * Returns the previous mode; a negative mode only asks. */
enum { TPRT_BIAS_GRAD_EPILOGUE = 0, TPRT_BIAS_GRAD_TILE = 1, TPRT_BIAS_GRAD_COLUMN = 2, TPRT_BIAS_GRAD_FUSED = 3 };
int cuda_bias_grad_mode(int mode);
/* 1: until it is set to 0, every dw given to a backward holds no grad yet (its contents are
 * overwritten: the weight grad is written, beta 0) and every dbias holds zeros, and each gets one
 * call's grad, so an epilogue writes dbias in place instead of into a scratch that is then added;
 * returns the previous setting (0 at start). */
int cuda_matmul_grads_fresh(int fresh);
/* Backward calls whose bias grad ran in the epilogue, and those where cuBLASLt refused it. */
void cuda_matmul_bias_grad_counts(long *fused, long *refused);

/* attention.cu: causal attention over NH heads of qkv (B,T,3*Cl) = [q|k|v];
 * att (B,NH,T,T) keeps the probabilities for the backward; scratch holds
 * cuda_attention_scratch_bytes() bytes (shared by all layers). */
size_t cuda_attention_scratch_bytes(int B, int T, int Cl, int NH);
int cuda_attention_forward(tprt_bf16 *out, tprt_bf16 *att, const tprt_bf16 *qkv, void *scratch, int B, int T, int Cl,
                           int NH);
int cuda_attention_backward(tprt_bf16 *dqkv, const tprt_bf16 *dout, const tprt_bf16 *qkv, const tprt_bf16 *att,
                            void *scratch, int B, int T, int Cl, int NH);

/* attention_fused.cu: the same attention without the T x T matrix (flash
 * style: tiled online softmax, tensor cores).  The forward writes out and
 * lse (B,NH,T) fp32, the natural-log logsumexp of each row's scaled scores;
 * the backward recomputes the probabilities from qkv, out, dout and lse
 * and accumulates into dqkv; scratch holds
 * cuda_attention_fused_scratch_bytes() bytes.  Head size Cl/NH: a multiple
 * of 16 up to 128 (cuda_attention_fused_supported); other sizes return -1.
 * cuda_attention_use_fused: supported and env TPRT_ATTENTION is not "gemm"
 * (the cuBLAS path above, kept for comparison). */
int cuda_attention_fused_supported(int Cl, int NH);
int cuda_attention_use_fused(int Cl, int NH);
size_t cuda_attention_fused_scratch_bytes(int B, int T, int Cl, int NH);
int cuda_attention_fused_forward(tprt_bf16 *out, float *lse, const tprt_bf16 *qkv, int B, int T, int Cl, int NH);
/* accumulate: dqkv += the grads (as cuda_attention_backward); 0: dqkv = the grads, its old contents never read.
 * dbias (3*Cl fp32, or NULL): += the grads summed over their B*T rows, the bias grad of the product whose
 * output was qkv (what cuda_bias_backward would add from dqkv). */
int cuda_attention_fused_backward(tprt_bf16 *dqkv, const tprt_bf16 *dout, const tprt_bf16 *qkv, const tprt_bf16 *out,
                                  const float *lse, void *scratch, int B, int T, int Cl, int NH, int accumulate,
                                  float *dbias);
/* attention_wgmma.cu: 1 when the attention on Hopper's warpgroup products runs here for head size hs (64,
 * an sm_90 device, this build): then its forward and backward are the defaults (env TPRT_ATTENTION_FWD=mma,
 * TPRT_ATTENTION_BWD=k64 or k128 pick the mma.sync ones) */
int cuda_attention_wgmma_ready(int hs);

/* gelu.cu (tanh approximation) */
int cuda_gelu_forward(tprt_bf16 *out, const tprt_bf16 *inp, size_t n);
int cuda_gelu_backward(tprt_bf16 *dinp, const tprt_bf16 *inp, const tprt_bf16 *dout, size_t n);
/* d *= gelu'(pre), in place */
int cuda_gelu_scale_by_slope(tprt_bf16 *d, const tprt_bf16 *pre, size_t n);

/* residual.cu */
int cuda_residual_forward(tprt_bf16 *out, const tprt_bf16 *a, const tprt_bf16 *b, size_t n);
int cuda_residual_backward(tprt_bf16 *da, tprt_bf16 *db, const tprt_bf16 *dout, size_t n);

/* crossentropy.cu: vocab-parallel, in the three steps of crossentropy.c so
 * a multi-rank caller can all-reduce between them.  logits (BT, vl), row
 * stride ld; columns >= vocab - v0 are padding. */
int cuda_ce_rowmax(float *rowmax, const tprt_bf16 *logits, int v0, int vl, int vocab, int BT, int ld);
/* scratch[0..BT): sum of exp(x - rowmax); scratch[BT..2BT): target logit (0 off-slice) */
int cuda_ce_rowsum(float *scratch, const tprt_bf16 *logits, const float *rowmax, const int *targets, int v0, int vl,
                   int vocab, int BT, int ld);
/* rowsum = scratch[0..BT); *loss = mean(log(sum) + max - target logit) (device float) */
int cuda_ce_loss(float *loss, float *rowsum, const float *scratch, const float *rowmax, int BT);
/* dlogits = dloss * (softmax - onehot) / BT; may alias logits */
int cuda_crossentropy_backward(tprt_bf16 *dlogits, const tprt_bf16 *logits, const float *rowmax, const float *rowsum,
                               const int *targets, int v0, int vl, int vocab, int BT, int ld, float dloss);

/* The whole cross-entropy in one kernel when one rank holds the whole vocab (v0 = 0,
 * vl >= vocab): per row one read for the max and the sum of exponentials (online), one
 * read-and-write that replaces the logits by dloss * (softmax - onehot) / BT in place
 * (padding columns 0); losses[i] = log(sum) + max - target logit.  The logits are gone
 * afterwards: the backward then has nothing left to do. */
int cuda_crossentropy_fused(float *losses, tprt_bf16 *logits, const int *targets, int vl, int vocab, int BT, int ld,
                            float dloss);
/* 1 when that kernel keeps rows of vl columns in shared memory between its two passes (16-byte aligned
 * rows), so each logit is read once; TPRT_CE_STASH=0 turns the stash off */
int cuda_crossentropy_stash_ready(int vl);
/* *loss = mean of losses[0..BT), summed in double in a fixed order */
int cuda_ce_mean(float *loss, const float *losses, int BT);

/* adamw.cu: *acc += sum(g^2); AdamW on an fp32 master with the clip scale
 * from the squared norms acc[0] + acc[1], master -> bf16 working copy.
 * decay = lr * weight_decay (0 for no decay), bc1/bc2 the bias corrections. */
int cuda_sumsq(float *acc, const float *g, size_t n);
int cuda_adamw_update(float *master, tprt_bf16 *working, const float *g, float *m, float *v, size_t n, const float *acc,
                      float clip, float lr, float beta1, float beta2, float eps, float decay, float bc1, float bc2);
/* Multi-tensor forms: one launch per TPRT_ADAMW_SLOTS_PER_LAUNCH tensors (the table travels in
 * the kernel's parameters, so no device table is allocated).  sumsq adds each slot's sum of
 * squares to acc[slot.replicated]; update applies cuda_adamw_update's arithmetic to every
 * slot, decay = lr * weight_decay where slot.decay is set, else 0. */
typedef struct {
    float *master;
    tprt_bf16 *working;
    const float *grad;
    float *m, *v;
    size_t n;
    int decay;      /* weight decay applies (group 0) */
    int replicated; /* counted in acc[1] instead of acc[0] */
} tprt_adamw_slot;
int cuda_sumsq_multi(float *acc, const tprt_adamw_slot *slots, int n_slots);
int cuda_adamw_multi(const tprt_adamw_slot *slots, int n_slots, const float *acc, float clip, float lr, float beta1,
                     float beta2, float eps, float weight_decay, float bc1, float bc2);
/* Zeroes each slot's grad (n floats; the other fields are not read), in as few launches as
 * the multi-tensor forms above. */
int cuda_zero_multi(const tprt_adamw_slot *slots, int n_slots);

#ifdef __cplusplus
}
#endif
#endif
