/* gpt2_cuda_shared.c - what every file of tprt's device model calls, so
 * that they call each other in one direction (gpt2_cuda.c sets up and
 * frees, the passes and the step queue work, and all of them end here):
 * the error helpers and the message they leave, a host tensor's device
 * copy, and the marks of the per-kind cudaEvent profile. */
#include "gpt2_cuda_impl.h"
#include <stdio.h>

static char g_err[256];
const char *tprt_cuda_error(void) { return g_err; }
int tprt_cuda_fail(const char *what) {
    cudaError_t e = cudaGetLastError();
    snprintf(g_err, sizeof g_err, "%s: %s", what, e == cudaSuccess ? "failed" : cudaGetErrorString(e));
    return -1;
}
int tprt_cuda_comm_fail(const char *what, tprt_comm *c, int rc) {
    snprintf(g_err, sizeof g_err, "%s: %s", what, c->error[0] ? c->error : "collective failed");
    return rc;
}

void tprt_mark(tprt_cuda_model *d, int kind) {
    if (!d->profile || d->n_marks >= MAX_MARKS) return;
    cudaEventRecord(d->ev[d->n_marks], 0);
    d->ev_kind[d->n_marks++] = kind;
}
/* Closes the marks of this phase: the time between two marks goes to the first's kind. */
void tprt_marks_flush(tprt_cuda_model *d) {
    if (!d->profile || d->n_marks < 2) {
        d->n_marks = 0;
        return;
    }
    cudaEventSynchronize(d->ev[d->n_marks - 1]);
    for (int i = 0; i + 1 < d->n_marks; i++) {
        float ms = 0.0f;
        if (d->steps_seen >= PROFILE_SKIP && cudaEventElapsedTime(&ms, d->ev[i], d->ev[i + 1]) == cudaSuccess)
            d->kind_ms[d->ev_kind[i]] += ms;
    }
    d->n_marks = 0;
}

dev_tensor *tprt_dev_find(const tprt_cuda_model *d, const tprt_tensor *t) {
    for (int i = 0; i < d->n_dt; i++)
        if (d->dt[i].t == t) return &d->dt[i];
    return NULL;
}
