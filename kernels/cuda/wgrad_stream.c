/* wgrad_stream.c - the weight-grad stream of tprt's CUDA backward.  Between
 * cuda_wgrad_begin() and cuda_wgrad_join() a backward product's weight and
 * bias grads run on a second, non-blocking stream while the input grad (the
 * critical path: it feeds the layer below) goes on at once on the compute
 * stream (the per-thread default stream).  Each deferred weight grad waits for
 * an event that marks its inputs ready on the compute stream and records a
 * done event; its number (a ticket) lets the compute stream wait for it
 * before it overwrites a buffer that weight grad still reads.  Outside a
 * begin/join scope, when not asked for (TPRT_WGRAD_STREAM=1 or 0 overrides
 * the caller's default), or when the stream or its events cannot be made,
 * every weight grad runs on the compute stream and tickets are 0. */
#include "wgrad_stream.h"
#include <stdlib.h>
#include <string.h>

#define WGRAD_EVENTS 64 /* tickets in flight; the backward waits for each within a layer or two */

static cudaStream_t g_side;
static cudaEvent_t g_ready, g_done[WGRAD_EVENTS];
static int g_made, g_failed, g_active, g_in_call;
static long g_issued, g_waited; /* tickets issued, and the highest one the compute stream waited for */

static int wgrad_wanted(int by_default) {
    const char *e = getenv("TPRT_WGRAD_STREAM");
    if (e && !strcmp(e, "0")) return 0;
    if (e && !strcmp(e, "1")) return 1;
    return by_default;
}

/* The stream and its events, made once; 0 when they are there. */
static int wgrad_make(void) {
    if (g_made) return 0;
    if (g_failed) return -1;
    int lo = 0, hi = 0;
    cudaDeviceGetStreamPriorityRange(&lo, &hi); /* lo: the least urgent; the input grads keep the default */
    int ok = cudaStreamCreateWithPriority(&g_side, cudaStreamNonBlocking, lo) == cudaSuccess &&
             cudaEventCreateWithFlags(&g_ready, cudaEventDisableTiming) == cudaSuccess;
    for (int i = 0; ok && i < WGRAD_EVENTS; i++)
        ok = cudaEventCreateWithFlags(&g_done[i], cudaEventDisableTiming) == cudaSuccess;
    if (!ok) {
        cudaGetLastError(); /* a refused stream must not fail the next launch check */
        g_failed = 1;
        return -1;
    }
    g_made = 1;
    return 0;
}

int cuda_wgrad_begin(int by_default) {
    g_active = wgrad_wanted(by_default) && !wgrad_make();
    return g_active;
}

int cuda_wgrad_deferring(void) { return g_active; }

cudaStream_t cuda_wgrad_open(void) {
    if (!g_active) return 0;
    if (cudaEventRecord(g_ready, 0) != cudaSuccess || cudaStreamWaitEvent(g_side, g_ready, 0) != cudaSuccess) {
        cudaGetLastError();
        return 0; /* this one runs on the compute stream */
    }
    g_in_call = 1;
    return g_side;
}

int cuda_wgrad_close(void) {
    if (!g_in_call) return 0;
    g_in_call = 0;
    long t = g_issued + 1;
    if (cudaEventRecord(g_done[t % WGRAD_EVENTS], g_side) != cudaSuccess) return -1;
    g_issued = t;
    return 0;
}

long cuda_wgrad_last(void) { return g_active ? g_issued : 0; }

int cuda_wgrad_wait(long ticket) {
    if (ticket <= g_waited || ticket > g_issued) return 0; /* already waited for, or none */
    if (cudaStreamWaitEvent(0, g_done[ticket % WGRAD_EVENTS], 0) != cudaSuccess) return -1;
    g_waited = ticket;
    return 0;
}

int cuda_wgrad_join(void) {
    int rc = g_active ? cuda_wgrad_wait(g_issued) : 0;
    g_active = 0;
    return rc;
}
