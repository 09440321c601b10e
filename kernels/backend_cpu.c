/* backend_cpu.c - the CPU backend of backend.h (the host model and
 * optimizer train in place: gpt2.c, adamw.c) and the table lookup. */
#include "backend.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    gpt2_model *m;
    tprt_adamw *o;
} cpu_state;

static int cpu_check(int tp, char *why, size_t why_len) {
    (void)tp, (void)why, (void)why_len;
    return 0;
}

static void *cpu_create(gpt2_model *m, tprt_adamw *o, int B, int T, int device) {
    (void)device;
    cpu_state *s = malloc(sizeof *s);
    if (!s || gpt2_alloc_acts(m, B, T)) {
        free(s);
        return NULL;
    }
    s->m = m, s->o = o;
    return s;
}

static void cpu_destroy(void *state) { free(state); }
static void cpu_zero_grad(void *state) { gpt2_zero_grad(((cpu_state *)state)->m); }

static int cpu_forward(void *state, const int *tokens, const int *targets, tprt_comm *c) {
    return gpt2_forward(((cpu_state *)state)->m, tokens, targets, c);
}

static int cpu_backward(void *state, tprt_comm *c) { return gpt2_backward(((cpu_state *)state)->m, c); }

static int cpu_check_grads(void *state, tprt_comm *c, char *why, size_t why_len) {
    return gpt2_check_replicated_grads(((cpu_state *)state)->m, c, why, why_len);
}

static int cpu_step(void *state, tprt_comm *c) {
    cpu_state *s = state;
    return tprt_adamw_step(s->o, s->m, c);
}

const tprt_backend tprt_backend_cpu = {
    "cpu",        cpu_check,       cpu_create, cpu_destroy, cpu_zero_grad, cpu_forward,
    cpu_backward, cpu_check_grads, cpu_step,   NULL,        NULL,
};

const tprt_backend *tprt_backend_named(const char *name) {
    const tprt_backend *const table[] = {&tprt_backend_cpu, &tprt_backend_cuda};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i] && !strcmp(table[i]->device, name)) return table[i];
    return NULL;
}
