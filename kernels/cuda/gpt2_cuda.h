/* gpt2_cuda.h - tprt's GPT-2 on this rank's CUDA device, one rank per GPU
 * at TP=N (collectives through comm's device calls, the NCCL backend): bf16
 * working weights, fp32 grads, fp32 masters and AdamW state, bf16
 * activations, all in device memory, built from the host model and
 * optimizer after the TP policy sharded them (so this rank's shards, and the
 * buggy policy's stale tables, are on the device too).  The tpaudit facts of
 * a device tensor name "cuda:<device>" and its device pointer
 * (tprt_storage_hook).  Calls return 0, or -1 (CUDA) or a negative
 * collective status, with a reason in tprt_cuda_error(). */
#ifndef TPRT_GPT2_CUDA_H
#define TPRT_GPT2_CUDA_H
#include "model.h"
#include <stdio.h>

typedef struct tprt_cuda_model tprt_cuda_model;

/* 0 when a CUDA device is usable; else -1 and why in `why`. */
int tprt_cuda_available(char *why, size_t why_len);
/* The number of CUDA devices, or -1 and why in `why`.  Initializes CUDA:
 * never call it in a process that fork()s ranks afterwards. */
int tprt_cuda_device_count(char *why, size_t why_len);
const char *tprt_cuda_error(void);
/* Uploads m's params and o's masters, state and working tensors to GPU
 * `device`; activations of this rank's shard sizes for B x T. */
tprt_cuda_model *tprt_cuda_create(gpt2_model *m, tprt_adamw *o, int B, int T, int device);
void tprt_cuda_free(tprt_cuda_model *d);
void tprt_cuda_zero_grad(tprt_cuda_model *d);
/* Forward with targets (host arrays of B*T); the mean loss lands in m->loss by the time the
 * step (tprt_cuda_step) returns: at TP=1 the forward only queues its copy back. */
int tprt_cuda_forward(tprt_cuda_model *d, const int *tokens, const int *targets, tprt_comm *comm);
int tprt_cuda_backward(tprt_cuda_model *d, tprt_comm *comm);
/* TP>1: 0 when every replicated grad agrees across ranks (to 1e-4 of its
 * largest element: the device sums them with atomics), 1 (why) when not,
 * negative on a collective error. */
int tprt_cuda_check_replicated_grads(tprt_cuda_model *d, tprt_comm *comm, char *why, size_t why_len);
/* AdamW step on the device (adamw.c's semantics; at TP>1 the replicated
 * grads are averaged over the ranks first).  At TP>1 it waits for the
 * device; at TP=1 only for the forward's loss, and o->last_norm is set by
 * the next forward or by tprt_cuda_free (gpt2_cuda_host.c). */
int tprt_cuda_step(tprt_cuda_model *d, tprt_comm *comm);
/* Per-kind device time (cudaEvents) when TPRT_PROFILE=1: printed to stderr. */
void tprt_cuda_profile_report(const tprt_cuda_model *d, FILE *f);
#endif
