/* gpt2_cuda.h - tprt's GPT-2 on one CUDA device (TP=1): bf16 working
 * weights, fp32 grads, fp32 masters and AdamW state, bf16 activations, all
 * in device memory, built from the host model and optimizer after the TP
 * policy ran (so the buggy policy's stale tables are on the device too).
 * The tpaudit facts of a device tensor name "cuda:0" and its device
 * pointer (tprt_storage_hook).  Calls return 0, or -1 with a reason in
 * tprt_cuda_error(). */
#ifndef TPRT_GPT2_CUDA_H
#define TPRT_GPT2_CUDA_H
#include "model.h"
#include <stdio.h>

typedef struct tprt_cuda_model tprt_cuda_model;

/* 0 when a CUDA device is usable; else -1 and why in `why`. */
int tprt_cuda_available(char *why, size_t why_len);
const char *tprt_cuda_error(void);
/* Uploads m's params and o's masters, state and working tensors; activations for B x T. */
tprt_cuda_model *tprt_cuda_create(gpt2_model *m, tprt_adamw *o, int B, int T);
void tprt_cuda_free(tprt_cuda_model *d);
void tprt_cuda_zero_grad(tprt_cuda_model *d);
/* Forward with targets (host arrays of B*T); the mean loss lands in m->loss. */
int tprt_cuda_forward(tprt_cuda_model *d, const int *tokens, const int *targets, tprt_comm *comm);
int tprt_cuda_backward(tprt_cuda_model *d, tprt_comm *comm);
/* AdamW step on the device (adamw.c's semantics); waits for the device. */
int tprt_cuda_step(tprt_cuda_model *d, tprt_comm *comm);
/* Per-kind device time (cudaEvents) when TPRT_PROFILE=1: printed to stderr. */
void tprt_cuda_profile_report(const tprt_cuda_model *d, FILE *f);
#endif
