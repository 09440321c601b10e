/* gpt2_cuda_host.c - the host's side of a step on tprt's device model: the
 * batch going in and the loss and grad norm coming back.  At TP=1 the host
 * never waits for the device to drain: the batch is staged in pinned memory
 * and copied asynchronously (the last step's copy has long landed: the step
 * waited for the loss recorded after it), and the loss and the
 * squared grad norm are copied back into pinned memory behind events.  The
 * host waits only for the loss, at the end of the step, when the device is
 * already running the backward and the optimizer queued behind it; the grad
 * norm is read at the end of the next forward, or when the model is freed.
 * So the device always has the next kernels queued.  The forward stages the
 * batch (host work), queues its copies and the loss's copy back (stream
 * work, which a graph can hold: gpt2_cuda_graph.c), then records the events
 * after them.  At TP>1 (the step
 * waits on a watched collective sync), with TPRT_STEP_SYNC=1, or when the
 * pinned memory cannot be had, every copy is a blocking one, as before. */
#include "gpt2_cuda_impl.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void tprt_cuda_host_staging(tprt_cuda_model *d) {
    const char *e = getenv("TPRT_STEP_SYNC");
    size_t n = (size_t)d->B * d->T;
    d->async = 0;
    if (d->m->tp_world != 1 || (e && !strcmp(e, "1"))) return;
    int ok = cudaHostAlloc((void **)&d->pinned_stats, 3 * sizeof(float), cudaHostAllocDefault) == cudaSuccess &&
             cudaEventCreateWithFlags(&d->loss_ready, cudaEventDisableTiming) == cudaSuccess &&
             cudaEventCreateWithFlags(&d->norm_ready, cudaEventDisableTiming) == cudaSuccess;
    ok = ok && cudaHostAlloc((void **)&d->pinned_batch, 2 * n * sizeof(int), cudaHostAllocDefault) == cudaSuccess &&
         cudaEventCreateWithFlags(&d->batch_sent, cudaEventDisableTiming) == cudaSuccess;
    if (!ok) {
        cudaGetLastError(); /* the blocking copies need none of it */
        tprt_cuda_host_staging_free(d);
        return;
    }
    d->async = 1;
}

void tprt_cuda_host_staging_free(tprt_cuda_model *d) {
    if (d->norm_pending) tprt_cuda_take_norm(d);
    cudaFreeHost(d->pinned_stats);
    cudaFreeHost(d->pinned_batch);
    if (d->batch_sent) cudaEventDestroy(d->batch_sent);
    d->pinned_batch = NULL, d->batch_sent = NULL;
    if (d->loss_ready) cudaEventDestroy(d->loss_ready);
    if (d->norm_ready) cudaEventDestroy(d->norm_ready);
    d->pinned_stats = NULL, d->loss_ready = NULL, d->norm_ready = NULL, d->async = 0;
}

int tprt_cuda_stage_batch(tprt_cuda_model *d, const int *tokens, const int *targets) {
    size_t bytes = (size_t)d->B * d->T * sizeof(int);
    if (!d->async)
        return cudaMemcpy(d->tok, tokens, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
                       cudaMemcpy(d->tgt, targets, bytes, cudaMemcpyHostToDevice) != cudaSuccess
                   ? -1
                   : 0;
    char *p = (char *)d->pinned_batch;
    if (cudaEventSynchronize(d->batch_sent) != cudaSuccess) return -1; /* the last copy has left */
    memcpy(p, tokens, bytes);
    memcpy(p + bytes, targets, bytes);
    return 0;
}

int tprt_cuda_queue_batch(tprt_cuda_model *d) {
    size_t bytes = (size_t)d->B * d->T * sizeof(int);
    const char *p = (const char *)d->pinned_batch;
    if (!d->async) return 0;
    return cudaMemcpyAsync(d->tok, p, bytes, cudaMemcpyHostToDevice, 0) != cudaSuccess ||
                   cudaMemcpyAsync(d->tgt, p + bytes, bytes, cudaMemcpyHostToDevice, 0) != cudaSuccess
               ? -1
               : 0;
}

/* n floats from the device into pinned memory on the compute stream */
static int queue_copy_back(float *pinned, const float *dev, int n) {
    return cudaMemcpyAsync(pinned, dev, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, 0) != cudaSuccess ? -1 : 0;
}
/* `ready` recorded after a queued copy back, which is then pending */
static int mark_copied(cudaEvent_t ready, int *pending) {
    if (cudaEventRecord(ready, 0) != cudaSuccess) return -1;
    *pending = 1;
    return 0;
}
/* 1 when a copy_back was pending and has landed, 0 when none was pending, -1 on a device error
 * (also any earlier kernel's failure) */
static int landed(cudaEvent_t ready, int *pending) {
    if (!*pending) return 0;
    *pending = 0;
    return cudaEventSynchronize(ready) == cudaSuccess ? 1 : -1;
}

int tprt_cuda_queue_loss(tprt_cuda_model *d) { return d->async ? queue_copy_back(d->pinned_stats, d->loss, 1) : 0; }

int tprt_cuda_forward_queued(tprt_cuda_model *d) {
    if (d->async)
        return cudaEventRecord(d->batch_sent, 0) != cudaSuccess ? -1 : mark_copied(d->loss_ready, &d->loss_pending);
    return cudaMemcpy(&d->m->loss, d->loss, sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess ? -1 : 0;
}

int tprt_cuda_take_loss(tprt_cuda_model *d) {
    int rc = landed(d->loss_ready, &d->loss_pending);
    if (rc == 1) d->m->loss = d->pinned_stats[0];
    return rc < 0 ? -1 : 0;
}

int tprt_cuda_send_norm(tprt_cuda_model *d) {
    if (d->async)
        return queue_copy_back(d->pinned_stats + 1, d->norm2, 2) ? -1 : mark_copied(d->norm_ready, &d->norm_pending);
    float n2[2];
    if (cudaMemcpy(n2, d->norm2, sizeof n2, cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
    d->o->last_norm = sqrtf(n2[0] + n2[1]);
    return 0;
}

int tprt_cuda_take_norm(tprt_cuda_model *d) {
    int rc = landed(d->norm_ready, &d->norm_pending);
    if (rc == 1) d->o->last_norm = sqrtf(d->pinned_stats[1] + d->pinned_stats[2]);
    return rc < 0 ? -1 : 0;
}
