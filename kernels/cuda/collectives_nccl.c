/* collectives_nccl.c - the NCCL backend of collectives.h (all-reduce sum/max
 * and barrier on device buffers, one process and one GPU per rank), for a
 * TP>1 device path.  Compile-checked only: the device model (gpt2_cuda.c)
 * still runs TP=1 and nothing calls this yet.  The unique id is made before
 * fork() (ncclGetUniqueId starts no CUDA context) and shared with the ranks. */
#include "collectives_nccl.h"
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    ncclComm_t comm;
    cudaStream_t stream;
    float *one; /* a device float for the barrier */
} nccl_impl;

static int nccl_status(tprt_comm *c, ncclResult_t r, const char *what) {
    if (r == ncclSuccess && cudaStreamSynchronize(((nccl_impl *)c->impl)->stream) == cudaSuccess) return 0;
    snprintf(c->error, sizeof c->error, "%s: %s", what, r != ncclSuccess ? ncclGetErrorString(r) : "stream failed");
    return TPRT_COMM_EABORT;
}
static int nccl_allreduce(tprt_comm *c, float *buf, size_t n, int op) {
    nccl_impl *x = c->impl;
    return nccl_status(c, ncclAllReduce(buf, buf, n, ncclFloat, op == TPRT_MAX ? ncclMax : ncclSum, x->comm, x->stream),
                       "ncclAllReduce");
}
static int nccl_barrier(tprt_comm *c) { return nccl_allreduce(c, ((nccl_impl *)c->impl)->one, 1, TPRT_SUM); }
static void nccl_abort(tprt_comm *c, int culprit) {
    (void)culprit;
    ncclCommAbort(((nccl_impl *)c->impl)->comm);
}
static const tprt_comm_ops NCCL_OPS = {nccl_allreduce, nccl_barrier, nccl_abort};

/* Before fork(): the id every rank joins with. */
int tprt_nccl_unique_id(void *id_out, size_t len) {
    if (len < sizeof(ncclUniqueId)) return -1;
    return ncclGetUniqueId((ncclUniqueId *)id_out) == ncclSuccess ? 0 : -1;
}
/* In rank `rank`: GPU `rank`, joins the communicator of `world` ranks. */
int tprt_nccl_attach(tprt_comm *c, const void *id, int rank, int world) {
    nccl_impl *x = calloc(1, sizeof *x);
    if (!x) return -1;
    c->rank = rank, c->world = world, c->ops = &NCCL_OPS, c->impl = x, c->error[0] = 0;
    if (cudaSetDevice(rank) != cudaSuccess || cudaStreamCreate(&x->stream) != cudaSuccess ||
        cudaMalloc((void **)&x->one, sizeof(float)) != cudaSuccess)
        return -1;
    return ncclCommInitRank(&x->comm, world, *(const ncclUniqueId *)id, rank) == ncclSuccess ? 0 : -1;
}
void tprt_nccl_detach(tprt_comm *c) {
    nccl_impl *x = c->impl;
    if (!x) return;
    if (x->comm) ncclCommDestroy(x->comm);
    cudaFree(x->one);
    if (x->stream) cudaStreamDestroy(x->stream);
    free(x);
    c->impl = NULL;
}
