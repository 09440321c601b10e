/* step_phases.c - who made the memory live between audits: at each step
 * sample and phase mark, the live bytes beyond what the last audit's ledger
 * attributed are split by the part of the step that made them.  Bytes that
 * grew after a phase mark ("forward" of a root module, "backward",
 * "optimizer_step", "outside") are that part's; bytes that shrank are
 * given back newest first, as a step frees its activations and
 * temporaries in the reverse order it made them.  Growth before any mark
 * (a run without them, or before the first) is "unknown".  An audit with a
 * ledger attributes everything live, so the split starts again there. */
#include "analyzer.h"
#include "tpaudit.h"

#include <stdlib.h>
#include <string.h>

typedef struct made {
    const char *phase, *owner; /* the point's strings (run->owners outlives the split) */
    int64_t bytes;
} made_t;

typedef struct stack {
    made_t *v;
    size_t n, cap;
    int64_t total;
} made_stack_t;

static int same(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static int grow(made_stack_t *s, const char *phase, const char *owner, int64_t bytes) {
    s->total += bytes;
    if (s->n && same(s->v[s->n - 1].phase, phase) && same(s->v[s->n - 1].owner, owner)) {
        s->v[s->n - 1].bytes += bytes;
        return 0;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        made_t *v = realloc(s->v, cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (made_t){phase, owner, bytes};
    return 0;
}

static void shrink(made_stack_t *s, int64_t bytes) {
    s->total -= bytes;
    while (bytes > 0 && s->n) {
        made_t *top = &s->v[s->n - 1];
        int64_t taken = top->bytes < bytes ? top->bytes : bytes;
        top->bytes -= taken;
        bytes -= taken;
        if (!top->bytes) s->n--;
    }
}

/* p's transient groups: the stack's bytes summed by phase and owner, in the order first made. */
static int copy_out(const made_stack_t *s, tpa_owner_point_t *p) {
    if (!s->n) return 0;
    p->transient = calloc(s->n, sizeof *p->transient);
    if (!p->transient) return -1;
    for (size_t i = 0; i < s->n; i++) {
        size_t j = 0;
        while (j < p->n_transient &&
               !(same(p->transient[j].owner_kind, s->v[i].phase) && same(p->transient[j].owner, s->v[i].owner)))
            j++;
        if (j == p->n_transient) {
            p->transient[j].owner_kind = tpa_strdup(s->v[i].phase);
            p->transient[j].owner = s->v[i].owner ? tpa_strdup(s->v[i].owner) : NULL;
            p->n_transient++;
        }
        p->transient[j].bytes += s->v[i].bytes;
    }
    return 0;
}

int tpa_split_transient(tpa_run_t *run) {
    made_stack_t s = {0};
    int64_t attributed = 0;
    const char *phase = TPAUDIT_MADE_UNKNOWN, *owner = NULL; /* the part running since the last mark */
    int rc = 0;
    for (size_t i = 0; !rc && i < run->n_owners; i++) {
        tpa_owner_point_t *p = &run->owners[i];
        if (p->label) {
            if (!p->n_groups) continue; /* an audit without a ledger changes no owner */
            attributed = 0;
            for (size_t g = 0; g < p->n_groups; g++)
                if (strcmp(p->groups[g].owner_kind, "allocator_cache"))
                    attributed = tpa_add_bytes(attributed, p->groups[g].bytes);
            s.n = 0;
            s.total = 0;
            continue;
        }
        if (p->live_bytes < 0) continue;
        int64_t live = p->live_bytes > attributed ? p->live_bytes - attributed : 0;
        if (live > s.total)
            rc = grow(&s, phase, owner, live - s.total);
        else
            shrink(&s, s.total - live);
        if (!rc) rc = copy_out(&s, p);
        if (p->phase) {
            phase = p->phase;
            owner = p->phase_owner;
        }
    }
    free(s.v);
    return rc;
}
