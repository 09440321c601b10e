/* backend.h - where a tprt rank computes: one table entry per device
 * ("cpu" always, backend_cpu.c; "cuda" when built, cuda/backend_cuda.c).
 * tprt_main.c trains through these calls only, so it has no per-device
 * branches.  A device whose ranks need their own communicator at TP>1 (the
 * CUDA one: NCCL, cuda/backend_nccl.c) names a rank group; the others use
 * the shared-memory collectives.  Calls return 0 or a status as the
 * functions they wrap do (collectives.h, model.h, gpt2_cuda.h). */
#ifndef TPRT_BACKEND_H
#define TPRT_BACKEND_H
#include "model.h"
#include <stdio.h>

/* Ranks that join their own communicator after fork() (one per GPU). */
typedef struct tprt_rank_group {
    /* Before fork(): maps what the ranks share; -1 on failure. */
    int (*prepare)(int world);
    /* Rank `rank` joins; sets *device (its GPU).  0 joined, 2 refused (rank 0
     * printed why, once), 1 failed (printed). */
    int (*join)(int rank, int world, double timeout_s, tprt_comm *c, int *device);
    void (*leave)(tprt_comm *c);
    void (*mark_dead)(int rank); /* async-signal-safe */
} tprt_rank_group;

typedef struct tprt_backend {
    const char *device; /* the --device name */
    /* Before fork(): 0 when this build and machine can train `tp` ranks here,
     * else -1 and why (printed after "--device <name>: "). */
    int (*check)(int tp, char *why, size_t why_len);
    /* This rank's working state for m and o (after the TP policy), batch B x T
     * on GPU `device`; NULL on failure (explain() says why). */
    void *(*create)(gpt2_model *m, tprt_adamw *o, int B, int T, int device);
    void (*destroy)(void *state); /* also prints the profile, if any */
    void (*zero_grad)(void *state);
    /* m->loss holds the forward's loss once step() returns (a device backend may still be
     * copying it back when forward() returns) */
    int (*forward)(void *state, const int *tokens, const int *targets, tprt_comm *c);
    int (*backward)(void *state, tprt_comm *c);
    int (*check_replicated_grads)(void *state, tprt_comm *c, char *why, size_t why_len);
    int (*step)(void *state, tprt_comm *c);
    /* Prints why call `what` (setup, forward, ...) failed with `rc`; NULL:
     * the comm's error, or "out of memory?". */
    void (*explain)(const tprt_comm *c, const char *what, int rc);
    const tprt_rank_group *group; /* NULL: shared-memory collectives at TP>1 */
} tprt_backend;

/* The backend of --device `name`; NULL when this build has none. */
const tprt_backend *tprt_backend_named(const char *name);

/* The entries (backend_cpu.c, cuda/backend_cuda.c, cuda/backend_nccl.c);
 * weak where a build may leave them out, so their address is then NULL. */
extern const tprt_backend tprt_backend_cpu;
extern const tprt_backend tprt_backend_cuda __attribute__((weak));
extern const tprt_rank_group tprt_rank_group_nccl __attribute__((weak));
#endif
