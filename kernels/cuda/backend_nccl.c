/* backend_nccl.c - the NCCL rank group of backend.h (the CUDA backend at
 * TP>1): rank 0, with CUDA untouched before the fork, counts the GPUs,
 * refuses too few and hands the NCCL unique id to the others through a page
 * mapped before fork() (collectives_nccl.h). */
#include "backend.h"
#include "collectives_nccl.h"
#include "gpt2_cuda.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tprt_nccl_rdv *g_rdv; /* the NCCL id and the dead-rank word */

static int nccl_prepare(int world) { return (g_rdv = tprt_nccl_rdv_create(world)) ? 0 : -1; }

static int shared_gpu_allowed(void) {
    const char *v = getenv("TPRT_ALLOW_SHARED_GPU");
    return v && !strcmp(v, "1");
}

/* Rank 0's verdict on `world` ranks over `ndev` GPUs: 0 go on, 2 refused (printed). */
static int rank0_verdict(int world, int ndev, const char *why) {
    if (ndev < 0) return fprintf(stderr, "tprt: --device cuda: %s\n", why), 2;
    if (ndev < world && !shared_gpu_allowed()) {
        fprintf(stderr,
                "tprt: --tp %d needs %d GPUs, this machine has %d (NCCL refuses two ranks of one communicator on "
                "one GPU; TPRT_ALLOW_SHARED_GPU=1 tries it anyway, over loopback sockets)\n",
                world, world, ndev);
        return 2;
    }
    if (ndev < world) {
        fprintf(stderr,
                "tprt: TPRT_ALLOW_SHARED_GPU=1: %d ranks on %d GPU(s), one NCCL_HOSTID per rank, loopback "
                "sockets (slow; for testing)\n",
                world, ndev);
        tprt_nccl_shared_gpu_env(0);
    }
    return 0;
}

static int nccl_join(int r, int world, double timeout_s, tprt_comm *c, int *device) {
    char why[200] = "";
    int ndev = 0, verdict;
    memset(c, 0, sizeof *c);
    if (r == 0) {
        ndev = tprt_cuda_device_count(why, sizeof why);
        verdict = rank0_verdict(world, ndev, why);
        if (tprt_nccl_publish(g_rdv, verdict, ndev, why, sizeof why)) {
            fprintf(stderr, "tprt: rank 0: %s\n", why);
            return 1;
        }
        if (verdict) return verdict;
    } else {
        verdict = tprt_nccl_wait(g_rdv, timeout_s, &ndev, why, sizeof why);
        if (verdict) {
            if (why[0]) fprintf(stderr, "tprt: rank %d: %s\n", r, why);
            return verdict;
        }
        if (ndev < world) tprt_nccl_shared_gpu_env(r);
    }
    *device = r % ndev;
    if (tprt_nccl_attach(c, g_rdv, r, world, *device, timeout_s)) {
        fprintf(stderr, "tprt: rank %d: GPU %d: %s\n", r, *device, c->error);
        tprt_nccl_detach(c);
        return 1;
    }
    return 0;
}

static void nccl_mark_dead(int r) { tprt_nccl_mark_dead(g_rdv, r); }

const tprt_rank_group tprt_rank_group_nccl = {nccl_prepare, nccl_join, tprt_nccl_detach, nccl_mark_dead};
