/* collectives_nccl.h - the NCCL backend of collectives.h (one GPU per rank);
 * compile-checked only, see collectives_nccl.c. */
#ifndef TPRT_COLLECTIVES_NCCL_H
#define TPRT_COLLECTIVES_NCCL_H
#include "collectives.h"
/* Before fork(): fills the NCCL unique id (len >= 128 bytes). */
int tprt_nccl_unique_id(void *id_out, size_t len);
/* In each rank: selects GPU `rank` and joins the communicator. */
int tprt_nccl_attach(tprt_comm *c, const void *id, int rank, int world);
void tprt_nccl_detach(tprt_comm *c);
#endif
