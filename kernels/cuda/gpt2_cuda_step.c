/* gpt2_cuda_step.c - the optimizer side of tprt's device model: the check
 * that replicated grads agree across ranks, their sync, and the AdamW step
 * (adamw.c's semantics: masters whose working tensor got no grad are
 * skipped, so the buggy policy's stale master and its live shard stay
 * untrained, as on the CPU).  On the GPU the replicated grads (layernorms,
 * wpe, row-parallel biases) are summed with fp32 atomics in an order that
 * differs between ranks, so at TP>1 they agree to rounding, not bit for
 * bit: the check allows 1e-4 of the tensor's largest grad, and the step
 * first averages them (ncclAvg) so every rank applies the same update; the
 * replicated part of the squared grad norm is averaged for the same reason. */
#include "gpt2_cuda_impl.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define REPLICATED_TOL 1e-4f

static int replicated_with_grad(const gpt2_model *m, const tprt_tensor *t) {
    return t->shard == TPRT_REPLICATED && gpt2_has_grad(m, t);
}

/* Max and -min over the ranks of one grad (2n floats of scratch): the spread and the scale. */
static int spread_of(const dev_tensor *x, float *host, float *dev, tprt_comm *comm, float *spread, float *scale) {
    size_t n = x->numel;
    TRY(cudaMemcpy(host, x->grad, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess, "replicated grad check");
    for (size_t k = 0; k < n; k++) host[n + k] = -host[k];
    TRY(cudaMemcpy(dev, host, 2 * n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess, "replicated grad check");
    COMM(tprt_allreduce_dev(comm, dev, 2 * n, TPRT_F32, TPRT_MAX), "replicated grad check");
    COMM(tprt_dev_sync(comm), "replicated grad check");
    TRY(cudaMemcpy(host, dev, 2 * n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess, "replicated grad check");
    *spread = 0.0f, *scale = 0.0f;
    for (size_t k = 0; k < n; k++) {
        float hi = host[k], lo = -host[n + k];
        *spread = fmaxf(*spread, hi - lo);
        *scale = fmaxf(*scale, fmaxf(fabsf(hi), fabsf(lo)));
    }
    return 0;
}

int tprt_cuda_check_replicated_grads(tprt_cuda_model *d, tprt_comm *comm, char *why, size_t why_len) {
    const gpt2_model *m = d->m;
    size_t most = 0;
    for (int i = 0; i < m->n_params; i++)
        if (replicated_with_grad(m, m->params[i]) && m->params[i]->numel > most) most = m->params[i]->numel;
    if (comm->world == 1 || !most) return 0;
    COMM(tprt_dev_sync(comm), "replicated grad check");
    float *host = malloc(2 * most * sizeof(float)), *dev = NULL;
    if (!host || cudaMalloc((void **)&dev, 2 * most * sizeof(float)) != cudaSuccess) {
        free(host);
        return tprt_cuda_fail("replicated grad check scratch");
    }
    int rc = 0;
    for (int i = 0; i < m->n_params && !rc; i++) {
        const tprt_tensor *t = m->params[i];
        float spread = 0.0f, scale = 0.0f;
        if (!replicated_with_grad(m, t)) continue;
        if ((rc = spread_of(tprt_dev_find(d, t), host, dev, comm, &spread, &scale))) break;
        if (spread > REPLICATED_TOL * scale) {
            snprintf(why, why_len, "%s: grad differs across ranks by %.3g (largest grad %.3g)", t->name, (double)spread,
                     (double)scale);
            rc = 1;
        }
    }
    cudaFree(dev);
    free(host);
    return rc;
}

/* TP>1: every rank takes the mean of the replicated grads (fp32, ncclAvg). */
static int sync_replicated(tprt_cuda_model *d, tprt_comm *comm) {
    const gpt2_model *m = d->m;
    if (m->tp_world == 1) return 0;
    for (int i = 0; i < m->n_params; i++) {
        if (!replicated_with_grad(m, m->params[i])) continue;
        dev_tensor *x = tprt_dev_find(d, m->params[i]);
        COMM(tprt_allreduce_dev(comm, x->grad, x->numel, TPRT_F32, TPRT_AVG), "replicated grads");
    }
    return 0;
}

int tprt_cuda_step(tprt_cuda_model *d, tprt_comm *comm) {
    tprt_adamw *o = d->o;
    const gpt2_model *m = d->m;
    if (m->tp_world > 1) tprt_mark(d, K_COMM);
    PASS(sync_replicated(d, comm));
    tprt_mark(d, K_ADAMW);
    cudaMemsetAsync(d->norm2, 0, 2 * sizeof(float), 0);
    int n = 0; /* the entries whose working tensor got a grad, as one multi-tensor table */
    for (int i = 0; i < o->n; i++) {
        tprt_adamw_entry *e = &o->e[i];
        if (!gpt2_has_grad(m, e->working)) continue;
        dev_tensor *w = tprt_dev_find(d, e->working), *p = tprt_dev_find(d, e->master), *mo = tprt_dev_find(d, e->m),
                   *vo = tprt_dev_find(d, e->v);
        tprt_adamw_slot *s = &d->slots[n++];
        s->master = p->data, s->working = w->data, s->grad = w->grad, s->m = mo->data, s->v = vo->data, s->n = p->numel;
        s->decay = e->decay != 0;
        s->replicated = e->working->shard == TPRT_REPLICATED; /* norm2[1], counted once; norm2[0] is all-reduced */
    }
    TRY(cuda_sumsq_multi(d->norm2, d->slots, n), "grad norm");
    if (m->tp_world > 1) {
        tprt_mark(d, K_COMM);
        COMM(tprt_allreduce_dev(comm, d->norm2, 1, TPRT_F32, TPRT_SUM), "grad norm");
        COMM(tprt_allreduce_dev(comm, d->norm2 + 1, 1, TPRT_F32, TPRT_AVG), "grad norm"); /* same bits everywhere */
        tprt_mark(d, K_ADAMW);
    } else if (d->async) {
        TRY(tprt_cuda_send_norm(d), "grad norm");
    }
    o->t++;
    float bc1 = 1.0f - powf(o->beta1, (float)o->t), bc2 = 1.0f - powf(o->beta2, (float)o->t);
    TRY(cuda_adamw_multi(d->slots, n, d->norm2, o->clip, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, bc1, bc2),
        "adamw");
    tprt_mark(d, K_OTHER);
    if (d->async) { /* TP=1: only the forward's loss is waited for; the device goes on with this step */
        TRY(tprt_cuda_take_loss(d), "loss");
    } else {
        COMM(tprt_dev_sync(comm), "optimizer step");
        TRY(tprt_cuda_send_norm(d), "grad norm");
    }
    tprt_mark(d, K_OTHER);
    tprt_marks_flush(d);
    if (d->steps_seen++ >= PROFILE_SKIP) d->steps_profiled++;
    return 0;
}
