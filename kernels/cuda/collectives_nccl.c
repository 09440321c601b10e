/* collectives_nccl.c - the NCCL backend of collectives.h for tprt's device
 * path at TP>1: one process and one GPU per rank, all-reduces of device
 * buffers enqueued on CUDA's legacy default stream, which orders with the
 * per-thread default stream every tprt kernel runs on (both are blocking
 * streams; handed cudaStreamPerThread, whose stream depends on the calling
 * thread, NCCL gave a TP=2 loss of -inf on the H200), and one watchdog loop
 * for every wait: it
 * polls ncclCommGetAsyncError, the dead-rank word the launcher sets in the
 * shared page, and a deadline, and aborts the communicator (ncclCommAbort)
 * rather than hang.  The communicator is nonblocking (config.blocking = 0)
 * so that its init, too, can be watched and abandoned. */
#define _DEFAULT_SOURCE
#include "collectives_nccl.h"
#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

struct tprt_nccl_rdv {
    _Atomic int dead_rank; /* -1 while every rank is alive */
    _Atomic int verdict;   /* -1 until rank 0 published */
    int world, ndev;
    ncclUniqueId id;
};

typedef struct {
    ncclComm_t comm; /* NULL once aborted */
    tprt_nccl_rdv *rdv;
    float *one; /* a device float for the barrier */
    double timeout_s;
} nccl_impl;

#define NCCL_STREAM ((cudaStream_t)0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static void pause_a_bit(unsigned spin) {
    if (spin < 64) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
}

tprt_nccl_rdv *tprt_nccl_rdv_create(int world) {
    void *p = mmap(NULL, sizeof(tprt_nccl_rdv), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    tprt_nccl_rdv *s = p;
    atomic_store(&s->dead_rank, -1);
    atomic_store(&s->verdict, -1);
    s->world = world;
    return s;
}

void tprt_nccl_mark_dead(tprt_nccl_rdv *s, int culprit) {
    int expected = -1;
    if (s) atomic_compare_exchange_strong(&s->dead_rank, &expected, culprit);
}

int tprt_nccl_publish(tprt_nccl_rdv *s, int verdict, int ndev, char *why, size_t why_len) {
    int rc = 0;
    s->ndev = ndev;
    if (verdict == 0) {
        ncclResult_t r = ncclGetUniqueId(&s->id);
        if (r != ncclSuccess) {
            snprintf(why, why_len, "ncclGetUniqueId: %s", ncclGetErrorString(r));
            verdict = 1, rc = -1;
        }
    }
    atomic_store(&s->verdict, verdict); /* release: id and ndev are visible first */
    return rc;
}

int tprt_nccl_wait(tprt_nccl_rdv *s, double timeout_s, int *ndev, char *why, size_t why_len) {
    double deadline = now_s() + timeout_s;
    int v;
    for (unsigned spin = 0; (v = atomic_load(&s->verdict)) < 0; spin++) {
        if (atomic_load(&s->dead_rank) >= 0) {
            snprintf(why, why_len, "rank %d died before NCCL init", atomic_load(&s->dead_rank));
            return 1;
        }
        if (now_s() > deadline) {
            snprintf(why, why_len, "no NCCL id from rank 0 within %.0f s", timeout_s);
            return 1;
        }
        pause_a_bit(spin);
    }
    *ndev = s->ndev;
    why[0] = 0;
    return v;
}

/* ---- the watchdog ---- */
static void abort_comm(nccl_impl *x) {
    if (!x->comm) return;
    ncclCommAbort(x->comm);
    x->comm = NULL;
}
static int fail(tprt_comm *c, int rc, const char *fmt, const char *what, const char *detail) {
    nccl_impl *x = c->impl;
    snprintf(c->error, sizeof c->error, fmt, what, detail);
    tprt_nccl_mark_dead(x->rdv, c->rank);
    abort_comm(x);
    return rc;
}
static int nccl_fail(tprt_comm *c, const char *what, ncclResult_t r) {
    char detail[120];
    const char *last = ((nccl_impl *)c->impl)->comm ? ncclGetLastError(((nccl_impl *)c->impl)->comm) : "";
    snprintf(detail, sizeof detail, "%s%s%s", ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
    return fail(c, TPRT_COMM_EABORT, "%s: %s", what, detail);
}

enum { UNTIL_NCCL_SETTLED, UNTIL_STREAM_IDLE };
/* Waits for NCCL's pending work (init, enqueue, finalize), or for NCCL's stream and this thread's compute
 * stream to go idle. */
static int watch(tprt_comm *c, int until, const char *what) {
    nccl_impl *x = c->impl;
    double deadline = now_s() + x->timeout_s;
    for (unsigned spin = 0;; spin++) {
        if (!x->comm) {
            snprintf(c->error, sizeof c->error, "%s: the communicator was aborted", what);
            return TPRT_COMM_EABORT;
        }
        ncclResult_t ar = ncclSuccess, q = ncclCommGetAsyncError(x->comm, &ar);
        if (q != ncclSuccess) ar = q;
        if (ar != ncclSuccess && ar != ncclInProgress) return nccl_fail(c, what, ar);
        if (until == UNTIL_NCCL_SETTLED && ar == ncclSuccess) return 0;
        if (until == UNTIL_STREAM_IDLE) {
            cudaError_t e = cudaStreamQuery(NCCL_STREAM);
            if (e == cudaSuccess) e = cudaStreamQuery(cudaStreamPerThread);
            if (e == cudaSuccess) return 0;
            if (e != cudaErrorNotReady) return fail(c, TPRT_COMM_EABORT, "%s: %s", what, cudaGetErrorString(e));
        }
        int dead = atomic_load(&x->rdv->dead_rank);
        if (dead >= 0) {
            snprintf(c->error, sizeof c->error, "collective aborted: rank %d died or failed", dead);
            abort_comm(x);
            return TPRT_COMM_EABORT;
        }
        if ((spin & 255) == 0 && now_s() > deadline) {
            char t[48];
            snprintf(t, sizeof t, "%.0f s", x->timeout_s);
            return fail(c, TPRT_COMM_ETIMEOUT, "%s timed out after %s waiting for the other ranks", what, t);
        }
        pause_a_bit(spin);
    }
}
static int settle(tprt_comm *c, ncclResult_t r, const char *what) {
    if (r == ncclInProgress) return watch(c, UNTIL_NCCL_SETTLED, what);
    return r == ncclSuccess ? 0 : nccl_fail(c, what, r);
}

/* ---- the vtables ---- */
static int dev_allreduce(tprt_comm *c, void *buf, size_t n, int dtype, int op) {
    nccl_impl *x = c->impl;
    if (!x->comm) {
        snprintf(c->error, sizeof c->error, "ncclAllReduce: the communicator was aborted");
        return TPRT_COMM_EABORT;
    }
    ncclRedOp_t o = op == TPRT_MAX ? ncclMax : op == TPRT_AVG ? ncclAvg : ncclSum;
    ncclDataType_t t = dtype == TPRT_BF16 ? ncclBfloat16 : ncclFloat32;
    return settle(c, ncclAllReduce(buf, buf, n, t, o, x->comm, NCCL_STREAM), "ncclAllReduce");
}
static int dev_sync(tprt_comm *c) { return watch(c, UNTIL_STREAM_IDLE, "device sync"); }
/* The vtable's host-style calls take device buffers here, and wait. */
static int nccl_allreduce(tprt_comm *c, float *buf, size_t n, int op) {
    int rc = dev_allreduce(c, buf, n, TPRT_F32, op);
    return rc ? rc : dev_sync(c);
}
static int nccl_barrier(tprt_comm *c) { return nccl_allreduce(c, ((nccl_impl *)c->impl)->one, 1, TPRT_SUM); }
static void nccl_abort(tprt_comm *c, int culprit) {
    nccl_impl *x = c->impl;
    tprt_nccl_mark_dead(x->rdv, culprit);
    abort_comm(x);
}
static const tprt_comm_ops NCCL_OPS = {nccl_allreduce, nccl_barrier, nccl_abort};
static const tprt_dev_ops NCCL_DEV_OPS = {dev_allreduce, dev_sync};

int tprt_nccl_attach(tprt_comm *c, tprt_nccl_rdv *s, int rank, int world, int device, double timeout_s) {
    memset(c, 0, sizeof *c);
    c->rank = rank, c->world = world, c->ops = &NCCL_OPS, c->dev = &NCCL_DEV_OPS;
    nccl_impl *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(c->error, sizeof c->error, "out of memory");
        tprt_nccl_mark_dead(s, rank);
        return -1;
    }
    c->impl = x, x->rdv = s, x->timeout_s = timeout_s;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaMalloc((void **)&x->one, sizeof(float));
    if (e == cudaSuccess) e = cudaMemset(x->one, 0, sizeof(float));
    if (e != cudaSuccess) {
        snprintf(c->error, sizeof c->error, "GPU %d: %s", device, cudaGetErrorString(e));
        tprt_nccl_mark_dead(s, rank);
        return -1;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&x->comm, world, s->id, rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) x->comm = NULL;
    return settle(c, r, "NCCL init") ? -1 : 0;
}

void tprt_nccl_detach(tprt_comm *c) {
    nccl_impl *x = c->impl;
    if (!x) return;
    if (x->comm && !settle(c, ncclCommFinalize(x->comm), "NCCL finalize") && x->comm) {
        ncclCommDestroy(x->comm);
        x->comm = NULL;
    }
    abort_comm(x); /* a finalize that failed */
    cudaFree(x->one);
    free(x);
    c->impl = NULL;
}

void tprt_nccl_shared_gpu_env(int rank) {
    char id[64];
    snprintf(id, sizeof id, "tprt-shared-gpu-rank-%d", rank);
    setenv("NCCL_HOSTID", id, 1); /* must differ per rank */
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
    setenv("NCCL_NET", "Socket", 0);
    setenv("NCCL_IB_DISABLE", "1", 0);
    setenv("NCCL_P2P_DISABLE", "1", 0);
    setenv("NCCL_SHM_DISABLE", "1", 0);
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    setenv("NCCL_MNNVL_ENABLE", "0", 0);
}
