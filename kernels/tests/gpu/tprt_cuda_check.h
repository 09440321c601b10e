/* tprt_cuda_check.h - what the checks of tprt's CUDA kernels share
 * (tprt_cuda_check.c): the seeded generator, random inputs rounded to bf16,
 * device copies (NaN-poisoned when there is no source), host copies, the
 * relative-error and bitwise checks and their tally, and the entry of each
 * file of checks (test_tprt_cuda.c runs them all and prints the count). */
#ifndef TPRT_CUDA_CHECK_H
#define TPRT_CUDA_CHECK_H
#include "tprt_cuda.h"
#include <stddef.h>
#include <stdint.h>

#define BF_TOL  1e-2
#define F32_TOL 1e-4

extern uint64_t g_rng;         /* the generator's state (seeded by main) */
extern int g_failed, g_checks; /* the tally */

float frand(void); /* uniform in [-1, 1) */
float *rnd(size_t n, float scale, int to_bf16);
void *dev_bf(const float *h, size_t n); /* device bf16 copy of h (poisoned, all bits set, when h is NULL) */
float *dev_f(const float *h, size_t n);
float *host_bf(const void *d, size_t n);
float *host_f(const float *d, size_t n);
void sync_or_die(const char *what, int rc);
/* ||a - ref|| / ||ref||, infinite when a holds a NaN */
double relerr(const float *a, const float *ref, size_t n);
void check(const char *name, const float *gpu, const float *ref, size_t n, double tol);
/* check() named "what tag" */
void check_tagged(const char *what, const char *tag, const float *gpu, const float *ref, size_t n, double tol);
/* the same bytes; names the first byte that differs */
void check_bits(const char *name, const void *a, const void *b, size_t bytes);
/* a yes/no check with a line of detail */
void check_that(const char *name, int ok, const char *detail);

/* Cross-entropy inputs: returns random logits (BT, vl) rounded to bf16; *padded gets the same
 * rows at stride ld with NaN past vl, *targets BT ids uniform in [0, vocab), *dtargets their
 * device copy.  ce_forward_cpu: crossentropy.c's forward on one rank. */
float *ce_inputs(int BT, int vl, int ld, int vocab, float **padded, int **targets, int **dtargets);
void ce_forward_cpu(float *loss, float *rowmax, float *rowsum, const float *logits, const int *targets, int v0, int vl,
                    int vocab, int BT);

/* test_tprt_cuda_fused.c: layernorm paths, residual+layernorm, one-pass cross-entropy, multi-tensor AdamW */
void run_fused_checks(void);
/* test_tprt_cuda_wgmma.cu: the warpgroup products of kernels/cuda/wgmma.cuh (skipped off sm_90) */
void run_wgmma_checks(void);
/* test_tprt_cuda_matmul.c: the GEMM epilogues (bias + GELU forward, overwriting backward with GELU gradient) */
void run_matmul_checks(void);
#endif
