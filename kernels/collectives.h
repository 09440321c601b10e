/* collectives.h - the one interface tprt's ranks talk through: all-reduce
 * (sum, max) and barrier.  The CPU backend is POSIX shared memory between
 * forked processes (collectives_shm.c); the GPU backend (NCCL,
 * cuda/collectives_nccl.c) implements the same vtable plus device-buffer
 * calls (tprt_dev_ops).  Every call returns 0 or a negative status: a dead
 * peer or a timeout makes every later call fail instead of hanging. */
#ifndef TPRT_COLLECTIVES_H
#define TPRT_COLLECTIVES_H
#include <stddef.h>

enum tprt_reduce_op { TPRT_SUM = 0, TPRT_MAX = 1, TPRT_AVG = 2 /* device backends only */ };
enum tprt_dtype { TPRT_F32 = 0, TPRT_BF16 = 1 };
#define TPRT_COMM_EABORT   (-10) /* a peer died or aborted */
#define TPRT_COMM_ETIMEOUT (-11) /* a peer did not arrive in time */

typedef struct tprt_comm tprt_comm;
/* Device-buffer collectives (the NCCL backend; NULL for the shared-memory
 * one): all-reduce enqueued on the compute stream (CUDA's default stream),
 * and a wait for that stream that watches the peers (async errors, dead
 * ranks, the deadline) and aborts the communicator instead of hanging. */
typedef struct tprt_dev_ops {
    int (*allreduce)(tprt_comm *c, void *dev_buf, size_t n, int dtype, int op);
    int (*sync)(tprt_comm *c);
} tprt_dev_ops;
typedef struct tprt_comm_ops {
    int (*allreduce)(tprt_comm *c, float *buf, size_t n, int op);
    int (*barrier)(tprt_comm *c);
    void (*abort)(tprt_comm *c, int culprit_rank);
} tprt_comm_ops;

struct tprt_comm {
    int rank, world;
    const tprt_comm_ops *ops;
    void *impl;
    char error[160];         /* why the last failing call failed */
    const tprt_dev_ops *dev; /* NULL: host buffers only */
};

static inline int tprt_allreduce(tprt_comm *c, float *buf, size_t n, int op) {
    return c->world == 1 ? 0 : c->ops->allreduce(c, buf, n, op);
}
static inline int tprt_barrier(tprt_comm *c) { return c->world == 1 ? 0 : c->ops->barrier(c); }
static inline int tprt_allreduce_dev(tprt_comm *c, void *buf, size_t n, int dtype, int op) {
    return c->world == 1 ? 0 : c->dev->allreduce(c, buf, n, dtype, op);
}
static inline int tprt_dev_sync(tprt_comm *c) { return c->world == 1 || !c->dev ? 0 : c->dev->sync(c); }

/* Shared-memory backend.  tprt_shm_create maps the shared segment before
 * fork(); each child calls tprt_shm_attach with its rank. */
typedef struct tprt_shm tprt_shm;
tprt_shm *tprt_shm_create(int world, double timeout_s);
void tprt_shm_attach(tprt_shm *s, tprt_comm *c, int rank);
/* Marks rank `culprit` dead: every rank waiting in a collective fails. */
void tprt_shm_mark_dead(tprt_shm *s, int culprit);
#endif
