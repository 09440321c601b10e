/* collectives_shm.c - shared-memory collectives between forked ranks.  A
 * barrier is a generation counter; an all-reduce copies each rank's chunk
 * into its slot, and every rank sums the slots in rank order, so all ranks
 * get bit-identical results.  Waits poll an abort flag and a deadline. */
#define _DEFAULT_SOURCE
#include "collectives.h"
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define SLOT_FLOATS (1u << 20)

struct tprt_shm {
    _Atomic int arrived;
    _Atomic int generation;
    _Atomic int dead_rank; /* -1 while everyone is alive */
    int world;
    double timeout_s;
    float slots[]; /* world * SLOT_FLOATS */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

tprt_shm *tprt_shm_create(int world, double timeout_s) {
    size_t bytes = sizeof(tprt_shm) + (size_t)world * SLOT_FLOATS * sizeof(float);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    tprt_shm *s = p;
    atomic_store(&s->arrived, 0);
    atomic_store(&s->generation, 0);
    atomic_store(&s->dead_rank, -1);
    s->world = world;
    s->timeout_s = timeout_s;
    return s;
}

void tprt_shm_mark_dead(tprt_shm *s, int culprit) {
    int expected = -1;
    atomic_compare_exchange_strong(&s->dead_rank, &expected, culprit);
}

static int shm_barrier(tprt_comm *c) {
    tprt_shm *s = c->impl;
    int dead = atomic_load(&s->dead_rank);
    if (dead >= 0) goto aborted;
    int gen = atomic_load(&s->generation);
    if (atomic_fetch_add(&s->arrived, 1) == s->world - 1) {
        atomic_store(&s->arrived, 0);
        atomic_fetch_add(&s->generation, 1);
        return 0;
    }
    double deadline = now_s() + s->timeout_s;
    for (unsigned spin = 0; atomic_load(&s->generation) == gen; spin++) {
        if ((dead = atomic_load(&s->dead_rank)) >= 0) goto aborted;
        if (spin > 64) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
            if ((spin & 255) == 0 && now_s() > deadline) {
                snprintf(c->error, sizeof c->error, "collective timed out after %.0f s waiting for the other ranks",
                         s->timeout_s);
                tprt_shm_mark_dead(s, c->rank);
                return TPRT_COMM_ETIMEOUT;
            }
        } else {
            sched_yield();
        }
    }
    return 0;
aborted:
    snprintf(c->error, sizeof c->error, "collective aborted: rank %d died or failed", dead);
    return TPRT_COMM_EABORT;
}

static int shm_allreduce(tprt_comm *c, float *buf, size_t n, int op) {
    tprt_shm *s = c->impl;
    for (size_t off = 0; off < n; off += SLOT_FLOATS) {
        size_t len = n - off < SLOT_FLOATS ? n - off : SLOT_FLOATS;
        memcpy(s->slots + (size_t)c->rank * SLOT_FLOATS, buf + off, len * sizeof(float));
        int rc = shm_barrier(c);
        if (rc) return rc;
        for (size_t i = 0; i < len; i++) {
            float acc = s->slots[i];
            for (int r = 1; r < s->world; r++) {
                float v = s->slots[(size_t)r * SLOT_FLOATS + i];
                acc = op == TPRT_MAX ? (v > acc ? v : acc) : acc + v;
            }
            buf[off + i] = acc;
        }
        if ((rc = shm_barrier(c))) return rc;
    }
    return 0;
}

static void shm_abort(tprt_comm *c, int culprit) { tprt_shm_mark_dead(c->impl, culprit); }

static const tprt_comm_ops shm_ops = {shm_allreduce, shm_barrier, shm_abort};

void tprt_shm_attach(tprt_shm *s, tprt_comm *c, int rank) {
    memset(c, 0, sizeof *c);
    c->rank = rank;
    c->world = s->world;
    c->ops = &shm_ops;
    c->impl = s;
}
