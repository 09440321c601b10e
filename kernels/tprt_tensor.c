/* tprt_tensor.c - allocation of tprt tensors; every host buffer is recorded
 * as a tpaudit region so the analyzer can attribute its bytes. */
#include "tprt_tensor.h"
#include "tpaudit.h"
#include <stdlib.h>
#include <string.h>

float *tprt_alloc_floats(size_t n, const char *label) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) return NULL;
    tpaudit_region_t r = TPAUDIT_INIT_REGION;
    r.op = TPAUDIT_REGION_ALLOC;
    r.address = (uint64_t)(uintptr_t)p;
    r.bytes = (uint64_t)n * sizeof(float);
    r.label = label;
    r.capture_native = 1;
    tpaudit_record_region(&r);
    return p;
}

void tprt_free_floats(float *p) {
    if (!p) return;
    tpaudit_region_t r = TPAUDIT_INIT_REGION;
    r.op = TPAUDIT_REGION_FREE;
    r.address = (uint64_t)(uintptr_t)p;
    tpaudit_record_region(&r);
    free(p);
}

tprt_tensor *tprt_tensor_new(const char *name, int ndim, const int64_t *shape, int want_grad) {
    tprt_tensor *t = calloc(1, sizeof(*t));
    if (!t) return NULL;
    strncpy(t->name, name, sizeof(t->name) - 1);
    t->ndim = ndim;
    t->numel = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = t->local_shape[d] = shape[d];
        t->numel *= (size_t)shape[d];
    }
    t->data = tprt_alloc_floats(t->numel, "tprt.param");
    t->grad = want_grad ? tprt_alloc_floats(t->numel, "tprt.grad") : NULL;
    if (!t->data || (want_grad && !t->grad)) {
        tprt_tensor_release(t);
        free(t);
        return NULL;
    }
    return t;
}

int tprt_tensor_rebuffer(tprt_tensor *t, const int64_t *local_shape, float *data) {
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)local_shape[d];
    int want_grad = t->grad != NULL;
    tprt_free_floats(t->grad);
    tprt_free_floats(t->data);
    t->data = data;
    t->grad = want_grad ? tprt_alloc_floats(n, "tprt.grad") : NULL;
    for (int d = 0; d < t->ndim; d++) t->local_shape[d] = local_shape[d];
    t->numel = n;
    return (want_grad && !t->grad) ? -1 : 0;
}

void tprt_tensor_release(tprt_tensor *t) {
    tprt_free_floats(t->data);
    tprt_free_floats(t->grad);
    t->data = t->grad = NULL;
}
