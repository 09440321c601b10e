/* backend_cuda.c - the CUDA backend of backend.h: gpt2_cuda.h's device
 * model, one GPU per rank; at TP>1 its ranks join an NCCL rank group
 * (backend_nccl.c), when this build has one. */
#include "backend.h"
#include "gpt2_cuda.h"
#include <stdio.h>
#include <string.h>

static int cuda_check(int tp, char *why, size_t why_len) {
    if (tp != 1 && !&tprt_rank_group_nccl) {
        snprintf(why, why_len, "--tp %d: this build has no NCCL backend", tp);
        return -1;
    }
    /* TP>1: rank 0 counts the GPUs after fork() (a CUDA context must not cross a fork) */
    return tp == 1 ? tprt_cuda_available(why, why_len) : 0;
}

/* Weights, masters, state and activations move to the device; the host copies stay as built. */
static void *cuda_create(gpt2_model *m, tprt_adamw *o, int B, int T, int device) {
    m->B = B, m->T = T;
    return tprt_cuda_create(m, o, B, T, device);
}

static void cuda_destroy(void *state) {
    if (state) tprt_cuda_profile_report(state, stderr);
    tprt_cuda_free(state);
}

static void cuda_zero_grad(void *state) { tprt_cuda_zero_grad(state); }

static int cuda_forward(void *state, const int *tokens, const int *targets, tprt_comm *c) {
    return tprt_cuda_forward(state, tokens, targets, c);
}

static int cuda_backward(void *state, tprt_comm *c) { return tprt_cuda_backward(state, c); }

static int cuda_check_grads(void *state, tprt_comm *c, char *why, size_t why_len) {
    return tprt_cuda_check_replicated_grads(state, c, why, why_len);
}

static int cuda_step(void *state, tprt_comm *c) { return tprt_cuda_step(state, c); }

static void cuda_explain(const tprt_comm *c, const char *what, int rc) {
    (void)rc;
    fprintf(stderr, "tprt: rank %d: CUDA%s: %s\n", c->rank, strcmp(what, "setup") ? "" : " setup", tprt_cuda_error());
}

const tprt_backend tprt_backend_cuda = {
    "cuda",        cuda_check,       cuda_create, cuda_destroy, cuda_zero_grad,        cuda_forward,
    cuda_backward, cuda_check_grads, cuda_step,   cuda_explain, &tprt_rank_group_nccl,
};
