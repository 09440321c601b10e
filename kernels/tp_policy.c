/* tp_policy.c - tprt's tensor-parallel policies, applied after the
 * optimizer exists (the order that makes the bug).  Both pad the vocab to a
 * multiple of N and shard every non-replicated tensor for this rank.
 * fixed: in place (tprt_tensor_rebuffer keeps the descriptor, so the key
 *   the optimizer holds stays the model's), masters and state too.
 * buggy: as ColossalAI's policy does, the embedding is replaced by a NEW
 *   padded, sharded tensor; the optimizer's param group, master, map entry
 *   and state keep the old full table, and the new shard is never trained.
 *   The other tensors are sharded in place, so the rest still trains. */
#include "model.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows, row width and the rows of rank r's block, by shard kind. */
static int64_t row_width(int ndim, const int64_t *shape) { return ndim == 2 ? shape[1] : 1; }

float *tp_shard_copy(const float *full, int ndim, const int64_t *shape, int shard, int padded_rows, int r, int N,
                     int64_t *local) {
    int64_t R = shape[0], W = row_width(ndim, shape);
    local[0] = R;
    if (ndim == 2) local[1] = W;
    switch (shard) {
    case TPRT_SHARD_ROWS: local[0] = R / N; break;
    case TPRT_SHARD_QKV: local[0] = R / N; break;
    case TPRT_SHARD_VOCAB: local[0] = padded_rows / N; break;
    case TPRT_SHARD_COLS: local[1] = W / N; break;
    default: break;
    }
    size_t n = (size_t)local[0] * (size_t)(ndim == 2 ? local[1] : 1);
    float *out = tprt_alloc_floats(n, "tprt.param");
    if (!out) return NULL;
    if (shard == TPRT_SHARD_COLS) {
        for (int64_t i = 0; i < R; i++)
            memcpy(out + i * local[1], full + i * W + r * local[1], sizeof(float) * (size_t)local[1]);
    } else if (shard == TPRT_SHARD_QKV) {
        int64_t per = R / 3 / N; /* rows of this rank's heads in each of q, k, v */
        for (int s = 0; s < 3; s++)
            memcpy(out + s * per * W, full + (s * (R / 3) + r * per) * W, sizeof(float) * (size_t)(per * W));
    } else {
        int64_t first = shard == TPRT_REPLICATED ? 0 : r * local[0];
        for (int64_t i = 0; i < local[0]; i++) /* vocab padding rows (>= R) stay 0 */
            if (first + i < R) memcpy(out + i * W, full + (first + i) * W, sizeof(float) * (size_t)W);
    }
    return out;
}

int64_t tp_local_index(int ndim, const int64_t *shape, int shard, int padded_rows, int r, int N, int64_t gi) {
    int64_t R = shape[0], W = row_width(ndim, shape), g = gi / W, c = gi % W, per;
    switch (shard) {
    case TPRT_SHARD_ROWS:
    case TPRT_SHARD_VOCAB:
        per = (shard == TPRT_SHARD_ROWS ? R : padded_rows) / N;
        return g / per == r ? (g - r * per) * W + c : -1;
    case TPRT_SHARD_COLS: per = W / N; return c / per == r ? g * per + (c - r * per) : -1;
    case TPRT_SHARD_QKV: {
        int64_t third = R / 3, s = g / third, in = g % third;
        per = third / N;
        return in / per == r ? (s * per + in - r * per) * W + c : -1;
    }
    default: return gi;
    }
}

static int shard_in_place(tprt_tensor *t, int padded_rows, int r, int N) {
    if (t->shard == TPRT_REPLICATED) return 0;
    int64_t local[2];
    float *buf = tp_shard_copy(t->data, t->ndim, t->shape, t->shard, padded_rows, r, N, local);
    if (!buf) return -1;
    if (t->shard == TPRT_SHARD_VOCAB) t->shape[0] = padded_rows;
    return tprt_tensor_rebuffer(t, local, buf);
}

/* buggy: a new descriptor holding the padded shard (as a new nn.Parameter would). */
static tprt_tensor *new_vocab_shard(const tprt_tensor *old, int padded_rows, int r, int N) {
    int64_t local[2];
    float *buf = tp_shard_copy(old->data, old->ndim, old->shape, old->shard, padded_rows, r, N, local);
    if (!buf) return NULL;
    tprt_tensor *t = tprt_tensor_new(old->name, old->ndim, local, 1);
    if (!t) {
        tprt_free_floats(buf);
        return NULL;
    }
    memcpy(t->data, buf, t->numel * sizeof(float));
    tprt_free_floats(buf);
    t->shape[0] = padded_rows;
    t->shape[1] = old->shape[1];
    t->shard = old->shard;
    return t;
}

int tp_policy_apply(gpt2_model *m, tprt_adamw *o, int policy, tprt_comm *comm) {
    int N = comm->world, r = comm->rank, V = m->cfg.vocab;
    int Vp = (V + N - 1) / N * N;
    m->tp_world = N, m->tp_rank = r, m->padded_vocab = Vp;
    for (int i = 0; i < m->n_params; i++) {
        tprt_tensor *t = m->params[i];
        if (t->shard == TPRT_SHARD_VOCAB && policy == TPRT_POLICY_BUGGY) {
            tprt_tensor *nt = new_vocab_shard(t, Vp, r, N);
            if (!nt) return -1;
            m->params[i] = nt; /* the optimizer still holds t (map) and its master */
            char detail[160];
            snprintf(detail, sizeof detail,
                     "Embedding(%d, %lld) -> VocabParallelEmbedding(%d, %lld), %d-way shard [%lld, %lld)", V,
                     (long long)t->shape[1], Vp, (long long)t->shape[1], N, (long long)(r * (Vp / N)),
                     (long long)((r + 1) * (Vp / N)));
            tprt_audit_replaced(m, t, nt, detail);
            continue;
        }
        if (shard_in_place(t, Vp, r, N)) return -1;
        for (int k = 0; o && k < o->n; k++) {
            tprt_adamw_entry *e = &o->e[k];
            if (e->working != t) continue;
            if (shard_in_place(e->master, Vp, r, N) || shard_in_place(e->m, Vp, r, N) || shard_in_place(e->v, Vp, r, N))
                return -1;
        }
    }
    return 0;
}
