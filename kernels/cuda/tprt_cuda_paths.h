/* tprt_cuda_paths.h - what the kernel tests and the kernel benchmark name
 * beyond tprt_cuda.h (the model needs only that one): the row-scalar
 * layernorm kernels that cuda_layernorm_forward/backward fall back to, here
 * callable on their own at any C, and the launch sizes the multi-tensor
 * AdamW and the vector paths depend on. */
#ifndef TPRT_CUDA_PATHS_H
#define TPRT_CUDA_PATHS_H
#include "tprt_cuda.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Tensors one cuda_sumsq_multi / cuda_adamw_multi launch takes (its table stays under the
 * 4 KB of kernel parameters). */
#define TPRT_ADAMW_SLOTS_PER_LAUNCH 48

/* Rows one layernorm block takes (one warp each), and the widest row the vector path holds
 * in registers: C % 8 == 0 and C <= 256 * TPRT_LN_VEC_CHUNKS, every pointer 16-byte aligned;
 * other rows take the scalar kernels below. */
#define TPRT_LN_ROWS_PER_BLOCK 8
#define TPRT_LN_VEC_CHUNKS     4

/* The scalar layernorm (one warp per row, one bf16 at a time; the backward sums dw/db in
 * shared memory with atomics): the same semantics as cuda_layernorm_forward/backward. */
int cuda_layernorm_forward_scalar(tprt_bf16 *out, float *mean, float *rstd, const tprt_bf16 *inp, const tprt_bf16 *w,
                                  const tprt_bf16 *b, int BT, int C);
int cuda_layernorm_backward_scalar(tprt_bf16 *dinp, float *dw, float *db, float *dsum, const tprt_bf16 *dout,
                                   const tprt_bf16 *inp, const tprt_bf16 *w, const float *mean, const float *rstd,
                                   int BT, int C);

#ifdef __cplusplus
}
#endif
#endif
