/* gpt2_cuda_graph.c - the device work of a TP=1 forward and backward
 * replayed as CUDA graphs.  A step is about 330 kernels and products; queued
 * on a stream, each waits for the one before it to drain and then to be
 * launched, and a graph launches the same chain with less of that gap
 * between them (1.5 us a kernel on an H200 for 12-50 MB copies; the
 * figures are in docs/PERFORMANCE.md).
 * A phase's first call runs as it is (the products pick their algorithms
 * there, and that synchronizes); its second is captured from the compute
 * stream (the per-thread default stream) into a graph, which that call and
 * every later one launches.  What a phase queues must then be the same
 * every step: the same buffers, the same kernels; the host's side (the
 * batch into pinned memory, the waits and events on the loss and grad
 * norm, flags) stays outside the phase.  Graphs run only where the step is
 * asynchronous (TP=1), not while profiling (the marks are host events),
 * and not with TPRT_GRAPH=0.  With the weight-grad stream (TPRT_WGRAD_STREAM=1)
 * the capture follows its events onto that stream and back.  A capture that
 * fails turns them off with a warning, and that call's work then runs as it
 * is; with TPRT_GRAPH=1 it fails the step instead. */
#include "gpt2_cuda_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tprt_cuda_graphs_setup(tprt_cuda_model *d) {
    const char *e = getenv("TPRT_GRAPH");
    d->graphs = d->async && !d->profile && !(e && !strcmp(e, "0"));
    d->graphs_required = d->graphs && e && !strcmp(e, "1");
}

void tprt_cuda_graphs_free(tprt_cuda_model *d) {
    for (int p = 0; p < TPRT_PHASES; p++)
        if (d->phase_exec[p]) cudaGraphExecDestroy(d->phase_exec[p]);
    memset(d->phase_exec, 0, sizeof d->phase_exec);
}

/* The phase's work captured into a graph and instantiated; -1 when any of it fails (nothing ran). */
static int capture(tprt_cuda_model *d, int phase, tprt_phase_fn queue, tprt_comm *comm) {
    cudaGraph_t g = NULL;
    if (cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed) != cudaSuccess) return -1;
    int rc = queue(d, comm);
    if (cudaStreamEndCapture(cudaStreamPerThread, &g) != cudaSuccess || !g) rc = -1;
    if (!rc && cudaGraphInstantiate(&d->phase_exec[phase], g, 0) != cudaSuccess) d->phase_exec[phase] = NULL, rc = -1;
    if (g) cudaGraphDestroy(g);
    return rc;
}

int tprt_cuda_phase(tprt_cuda_model *d, int phase, tprt_phase_fn queue, tprt_comm *comm) {
    if (d->graphs && !d->phase_exec[phase] && d->phase_calls[phase]++ >= 1 && capture(d, phase, queue, comm)) {
        if (d->graphs_required) return tprt_cuda_fail("CUDA graph capture (TPRT_GRAPH=1)");
        fprintf(stderr, "tprt: CUDA graphs off: capture failed (%s); the steps run without them\n",
                cudaGetErrorString(cudaGetLastError())); /* read: not the next launch's error */
        d->graphs = 0;
    }
    if (!d->graphs || !d->phase_exec[phase]) return queue(d, comm);
    return cudaGraphLaunch(d->phase_exec[phase], cudaStreamPerThread) == cudaSuccess ? 0
                                                                                     : tprt_cuda_fail("graph launch");
}
