/* audit.c - reports who holds which tensor through tpaudit.h, with the
 * facts the Python probe gives for PyTorch (python/tpaudit/_facts.py): the
 * model's live params (holder module), the optimizer's param groups and
 * state (holder optimizer) and the master -> working map (holder wrapper).
 * A tensor's key is its tprt_tensor descriptor's address.  Audit points
 * follow TPAUDIT_AUDIT, as the shim parses it: before the optimizer update of
 * the named steps, as the probe's step pre-hook does, and at the end. */
#define _DEFAULT_SOURCE
#include "model.h"
#include "tpaudit.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shim parses TPAUDIT_AUDIT; without the shim there is nowhere to audit to. */
int tprt_audit_wanted(int step) { return tpaudit_audit_wants(step) == 1; }

int (*tprt_storage_hook)(const tprt_tensor *t, tprt_storage *s);

/* Tensors already recorded in the open audit (each once). */
typedef struct {
    const tprt_tensor *seen[4096];
    int n;
} audit_ctx; /* 4 per param at most */

static void tensor_facts(audit_ctx *a, const tprt_tensor *t, const char *type, int requires_grad, int has_grad) {
    for (int i = 0; i < a->n; i++)
        if (a->seen[i] == t) return;
    if (a->n < (int)(sizeof a->seen / sizeof *a->seen)) a->seen[a->n++] = t;
    tpaudit_tensor_t x = TPAUDIT_INIT_TENSOR;
    x.key = (uint64_t)(uintptr_t)t;
    x.name = t->name;
    x.ndim = t->ndim;
    x.shape = t->shape;
    x.local_ndim = t->ndim;
    x.local_shape = t->local_shape;
    x.dtype = "float32";
    x.device = "cpu";
    x.storage_ptr = (uint64_t)(uintptr_t)t->data;
    x.storage_bytes = t->data ? t->numel * sizeof(float) : 0;
    x.nbytes = x.storage_bytes;
    tprt_storage dev;
    if (tprt_storage_hook && !tprt_storage_hook(t, &dev)) { /* held by the device backend */
        x.dtype = dev.dtype;
        x.device = dev.device;
        x.storage_ptr = dev.ptr;
        x.storage_bytes = x.nbytes = dev.bytes;
    }
    x.requires_grad = requires_grad;
    x.has_grad = has_grad;
    x.type = type;
    tpaudit_record_tensor(&x);
}

static void ref(int kind, const char *cls, const void *holder, const char *path, int role, const void *t,
                const void *peer) {
    tpaudit_ref_t r = TPAUDIT_INIT_REF;
    r.holder_kind = kind;
    r.holder_class = cls;
    r.holder_id = (uint64_t)(uintptr_t)holder;
    r.path = path;
    r.role = role;
    r.tensor_key = (uint64_t)(uintptr_t)t;
    r.peer_key = (uint64_t)(uintptr_t)peer;
    tpaudit_record_ref(&r);
}

#define MODEL_CLASS   "tprt.GPT2LMHeadModel"
#define OPT_CLASS     "AdamW"
#define WRAPPER_CLASS "MixedPrecisionOptimizer"

void tprt_audit(const gpt2_model *m, const tprt_adamw *o, const char *label, int step) {
    int64_t id = tpaudit_audit_begin(label, step);
    if (id < 0) return;
    static audit_ctx a; /* large: not on the stack */
    a.n = 0;
    char path[160];
    for (int i = 0; i < m->n_params; i++) {
        const tprt_tensor *t = m->params[i];
        tensor_facts(&a, t, "tprt.param", t->grad != NULL, gpt2_has_grad(m, t));
        ref(TPAUDIT_HOLDER_MODULE, MODEL_CLASS, m, t->name, TPAUDIT_ROLE_PARAM, t, NULL);
    }
    ref(TPAUDIT_HOLDER_MODULE, MODEL_CLASS, m, "lm_head.weight", TPAUDIT_ROLE_PARAM, m->params[0], NULL); /* tied */
    if (o) {
        int in_group[2] = {0, 0};
        for (int i = 0; i < o->n; i++) {
            const tprt_adamw_entry *e = &o->e[i];
            tensor_facts(&a, e->master, "tprt.master", 1, 0);
            snprintf(path, sizeof path, "param_groups[%d].params[%d]", e->group, in_group[e->group]++);
            ref(TPAUDIT_HOLDER_OPTIMIZER, OPT_CLASS, o->e, path, TPAUDIT_ROLE_GROUP_PARAM, e->master, NULL);
        }
        for (int i = 0; i < o->n; i++) {
            const tprt_adamw_entry *e = &o->e[i];
            const tprt_tensor *st[2] = {e->m, e->v};
            const char *field[2] = {"exp_avg", "exp_avg_sq"};
            for (int k = 0; k < 2; k++) {
                tensor_facts(&a, st[k], "tprt.state", 0, 0);
                snprintf(path, sizeof path, "state[%s].%s", e->master->name, field[k]);
                ref(TPAUDIT_HOLDER_OPTIMIZER, OPT_CLASS, o->e, path, TPAUDIT_ROLE_STATE, st[k], e->master);
            }
        }
        for (int i = 0; i < o->n; i++) {
            const tprt_adamw_entry *e = &o->e[i];
            tensor_facts(&a, e->working, "tprt.param", e->working->grad != NULL, gpt2_has_grad(m, e->working));
            snprintf(path, sizeof path, "master_to_working_map[%d]", i);
            ref(TPAUDIT_HOLDER_WRAPPER, WRAPPER_CLASS, o, path, TPAUDIT_ROLE_MAP_ENTRY, e->working, e->master);
        }
    }
    tpaudit_audit_end(id);
}

void tprt_audit_replaced(const gpt2_model *m, const tprt_tensor *old_t, const tprt_tensor *new_t, const char *detail) {
    tpaudit_event_t ev = TPAUDIT_INIT_EVENT;
    ev.kind = TPAUDIT_EVENT_PARAM_CREATED;
    ev.name = new_t->name;
    ev.holder_class = MODEL_CLASS;
    ev.holder_id = (uint64_t)(uintptr_t)m;
    ev.new_key = (uint64_t)(uintptr_t)new_t;
    ev.capture_native = 1;
    tpaudit_record_event(&ev);
    ev.kind = TPAUDIT_EVENT_PARAM_REPLACED;
    ev.old_key = (uint64_t)(uintptr_t)old_t;
    ev.detail = detail;
    tpaudit_record_event(&ev);
}

void tprt_audit_created(const tprt_adamw *o) {
    tpaudit_event_t ev = TPAUDIT_INIT_EVENT;
    ev.kind = TPAUDIT_EVENT_OPTIMIZER_CREATED;
    ev.name = WRAPPER_CLASS;
    ev.holder_class = WRAPPER_CLASS;
    ev.holder_id = (uint64_t)(uintptr_t)o;
    ev.capture_native = 1;
    tpaudit_record_event(&ev);
}
