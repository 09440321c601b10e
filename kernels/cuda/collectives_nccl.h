/* collectives_nccl.h - the NCCL backend of collectives.h: one process and
 * one GPU per rank, all-reduces of fp32/bf16 device buffers on the compute
 * stream, and a watchdog (async NCCL errors, ranks marked dead by the
 * launcher, a deadline) that aborts the communicator instead of hanging.
 * Rank 0 makes the NCCL unique id after fork() and hands it to the other
 * ranks through a shared page mapped before fork() (tprt_nccl_rdv). */
#ifndef TPRT_COLLECTIVES_NCCL_H
#define TPRT_COLLECTIVES_NCCL_H
#include "collectives.h"

typedef struct tprt_nccl_rdv tprt_nccl_rdv;
/* Before fork(): the shared page (touches neither CUDA nor NCCL). NULL on failure. */
tprt_nccl_rdv *tprt_nccl_rdv_create(int world);
/* Async-signal-safe: rank `culprit` died or failed; every rank's watchdog aborts. */
void tprt_nccl_mark_dead(tprt_nccl_rdv *s, int culprit);
/* Rank 0: publishes its verdict (0: go on, else the status the other ranks
 * exit with, silently) and, for 0, a fresh NCCL unique id and the device
 * count.  -1 (and why) when the id cannot be made; the others then fail. */
int tprt_nccl_publish(tprt_nccl_rdv *s, int verdict, int ndev, char *why, size_t why_len);
/* Ranks > 0: rank 0's verdict and device count; 1 with why on a timeout. */
int tprt_nccl_wait(tprt_nccl_rdv *s, double timeout_s, int *ndev, char *why, size_t why_len);
/* Each rank: selects GPU `device` and joins the communicator of `world`
 * ranks (nonblocking init, watched).  0, or -1 with the reason in c->error
 * (this rank is then marked dead so the others stop waiting). */
int tprt_nccl_attach(tprt_comm *c, tprt_nccl_rdv *s, int rank, int world, int device, double timeout_s);
/* Finalizes and destroys the communicator (nothing left after an abort). */
void tprt_nccl_detach(tprt_comm *c);
/* TPRT_ALLOW_SHARED_GPU: NCCL refuses two ranks of one communicator on one
 * GPU ("Duplicate GPU detected"); a distinct NCCL_HOSTID per rank makes each
 * rank look like its own host, so they talk over loopback sockets (slow,
 * for testing).  Call before any NCCL call of this process. */
void tprt_nccl_shared_gpu_env(int rank);
#endif
