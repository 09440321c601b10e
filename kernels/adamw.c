/* adamw.c - tprt's mixed-precision AdamW, shaped like ColossalAI's
 * MixedPrecisionOptimizer: an fp32 master copy of every model parameter is
 * what the param groups hold, a master -> working map points back to the
 * model's (working) tensor, and exp_avg / exp_avg_sq state is keyed by the
 * master.  Weight decay (decoupled) applies to 2-D weights only (matmul
 * weights, wte, wpe), never to biases or layernorm parameters: group 0
 * decays, group 1 does not.  Grads are read from the working tensor; a
 * master whose working tensor got no grad in the last backward is skipped,
 * as PyTorch skips a param whose .grad is None. */
#include "model.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tprt_tensor *shadow(const tprt_tensor *t, const char *suffix, int copy) {
    char name[96];
    snprintf(name, sizeof name, "%s%s", t->name, suffix);
    tprt_tensor *s = tprt_tensor_new(name, t->ndim, t->local_shape, 0);
    if (!s) return NULL;
    for (int d = 0; d < t->ndim; d++) s->shape[d] = t->shape[d];
    s->shard = t->shard;
    if (copy) memcpy(s->data, t->data, t->numel * sizeof(float));
    return s;
}

tprt_adamw *tprt_adamw_create(gpt2_model *m, float lr, float weight_decay, float clip) {
    tprt_adamw *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->e = calloc((size_t)m->n_params, sizeof *o->e);
    if (!o->e) {
        free(o);
        return NULL;
    }
    o->lr = lr, o->beta1 = 0.9f, o->beta2 = 0.95f, o->eps = 1e-8f, o->weight_decay = weight_decay, o->clip = clip;
    for (int i = 0; i < m->n_params; i++, o->n++) {
        tprt_adamw_entry *e = &o->e[i];
        tprt_tensor *w = m->params[i];
        e->working = w;
        e->master = shadow(w, "", 1); /* same name as the param it mirrors */
        e->m = shadow(w, ".exp_avg", 0);
        e->v = shadow(w, ".exp_avg_sq", 0);
        e->decay = w->ndim == 2;
        e->group = e->decay ? 0 : 1;
        if (!e->master || !e->m || !e->v) {
            o->n++;
            tprt_adamw_free(o, m);
            return NULL;
        }
    }
    return o;
}

static void free_tensor(tprt_tensor *t) {
    if (!t) return;
    tprt_tensor_release(t);
    free(t);
}

void tprt_adamw_free(tprt_adamw *o, const gpt2_model *m) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) {
        free_tensor(o->e[i].master);
        free_tensor(o->e[i].m);
        free_tensor(o->e[i].v);
        /* a working tensor the model no longer holds is owned by the map alone */
        if (o->e[i].working && m && !gpt2_is_live(m, o->e[i].working)) free_tensor(o->e[i].working);
    }
    free(o->e);
    free(o);
}

int tprt_adamw_step(tprt_adamw *o, const gpt2_model *m, tprt_comm *comm) {
    double sharded = 0.0, replicated = 0.0;
    for (int i = 0; i < o->n; i++) {
        const tprt_tensor *w = o->e[i].working;
        if (!gpt2_has_grad(m, w)) continue;
        double s = 0.0;
        for (size_t k = 0; k < w->numel; k++) s += (double)w->grad[k] * w->grad[k];
        if (w->shard == TPRT_REPLICATED)
            replicated += s; /* the same on every rank: counted once */
        else
            sharded += s;
    }
    float part = (float)sharded;
    int rc = tprt_allreduce(comm, &part, 1, TPRT_SUM);
    if (rc) return rc;
    float norm = sqrtf(part + (float)replicated);
    float scale = (o->clip > 0.0f && norm > o->clip) ? o->clip / (norm + 1e-6f) : 1.0f;
    o->last_norm = norm;
    o->t++;
    float bc1 = 1.0f - powf(o->beta1, (float)o->t), bc2 = 1.0f - powf(o->beta2, (float)o->t);
    for (int i = 0; i < o->n; i++) {
        tprt_adamw_entry *e = &o->e[i];
        if (!gpt2_has_grad(m, e->working)) continue;
        const float *g = e->working->grad;
        float *p = e->master->data, *mo = e->m->data, *vo = e->v->data, *out = e->working->data;
        float decay = e->decay ? o->lr * o->weight_decay : 0.0f;
        for (size_t k = 0; k < e->master->numel; k++) {
            float gk = g[k] * scale;
            mo[k] = o->beta1 * mo[k] + (1.0f - o->beta1) * gk;
            vo[k] = o->beta2 * vo[k] + (1.0f - o->beta2) * gk * gk;
            float mh = mo[k] / bc1, vh = vo[k] / bc2;
            float x = p[k] - decay * p[k];
            x -= o->lr * mh / (sqrtf(vh) + o->eps);
            p[k] = x;
            out[k] = x; /* master -> working (both fp32 on the CPU) */
        }
    }
    return 0;
}
