/* collectives.h - the one interface tprt's ranks talk through: all-reduce
 * (sum, max) and barrier.  The CPU backend is POSIX shared memory between
 * forked processes (collectives_shm.c); a GPU backend (NCCL) implements the
 * same vtable.  Every call returns 0 or a negative status: a dead peer or a
 * timeout makes every later call fail instead of hanging. */
#ifndef TPRT_COLLECTIVES_H
#define TPRT_COLLECTIVES_H
#include <stddef.h>

enum tprt_reduce_op { TPRT_SUM = 0, TPRT_MAX = 1 };
#define TPRT_COMM_EABORT (-10)   /* a peer died or aborted */
#define TPRT_COMM_ETIMEOUT (-11) /* a peer did not arrive in time */

typedef struct tprt_comm tprt_comm;
typedef struct tprt_comm_ops {
    int (*allreduce)(tprt_comm *c, float *buf, size_t n, int op);
    int (*barrier)(tprt_comm *c);
    void (*abort)(tprt_comm *c, int culprit_rank);
} tprt_comm_ops;

struct tprt_comm {
    int rank, world;
    const tprt_comm_ops *ops;
    void *impl;
    char error[160]; /* why the last failing call failed */
};

static inline int tprt_allreduce(tprt_comm *c, float *buf, size_t n, int op) {
    return c->world == 1 ? 0 : c->ops->allreduce(c, buf, n, op);
}
static inline int tprt_barrier(tprt_comm *c) { return c->world == 1 ? 0 : c->ops->barrier(c); }

/* Shared-memory backend.  tprt_shm_create maps the shared segment before
 * fork(); each child calls tprt_shm_attach with its rank. */
typedef struct tprt_shm tprt_shm;
tprt_shm *tprt_shm_create(int world, double timeout_s);
void tprt_shm_attach(tprt_shm *s, tprt_comm *c, int rank);
/* Marks rank `culprit` dead: every rank waiting in a collective fails. */
void tprt_shm_mark_dead(tprt_shm *s, int culprit);
#endif
