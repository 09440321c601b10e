/* tprt_tensor.h - the tensor descriptor of tprt: a named fp32 parameter with
 * its global shape, its local shard shape, data and grad buffers.  The
 * descriptor's address is the tensor's identity (its tpaudit key). */
#ifndef TPRT_TENSOR_H
#define TPRT_TENSOR_H
#include <stddef.h>
#include <stdint.h>

enum tprt_shard_kind {
    TPRT_REPLICATED = 0, /* every rank holds the whole tensor */
    TPRT_SHARD_ROWS = 1, /* dim 0 split in N contiguous blocks (column-parallel) */
    TPRT_SHARD_COLS = 2, /* dim 1 split in N blocks (row-parallel) */
    TPRT_SHARD_QKV = 3,  /* dim 0 is [q|k|v]; each third split by heads */
    TPRT_SHARD_VOCAB = 4 /* dim 0 padded to a multiple of N, then split */
};

typedef struct tprt_tensor {
    char name[64];
    int ndim;
    int64_t shape[2];       /* global shape */
    int64_t local_shape[2]; /* this rank's shard */
    size_t numel;           /* local elements */
    float *data;            /* NULL once freed */
    float *grad;            /* NULL when the tensor takes no gradient */
    int shard;              /* enum tprt_shard_kind */
} tprt_tensor;

/* Allocates a descriptor with zeroed data (and a grad buffer if want_grad). */
tprt_tensor *tprt_tensor_new(const char *name, int ndim, const int64_t *shape, int want_grad);
/* Replaces the tensor's buffers by new ones of local_shape (keeps identity). */
int tprt_tensor_rebuffer(tprt_tensor *t, const int64_t *local_shape, float *data);
/* Frees data and grad; the descriptor stays (its key is never reused). */
void tprt_tensor_release(tprt_tensor *t);
/* Allocates a host buffer and records it as a tpaudit region. */
float *tprt_alloc_floats(size_t n, const char *label);
void tprt_free_floats(float *p);
#endif
