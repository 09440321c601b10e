/* struct_size_host.c - an older caller against the current shim: it passes
 * each record with struct_size cut before the last field (as a caller built
 * with an older tpaudit.h would), in a buffer of exactly that size, with the
 * bytes after it never written.  Every call must succeed; the database must
 * hold the fields given and leave the missing ones empty
 * (test_shim_contracts.py checks it). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpaudit.h"

/* A copy of *full cut to `size` bytes, in its own allocation of that size. */
static void *older(const void *full, size_t size) {
    void *p = malloc(size);
    if (!p) exit(2);
    memcpy(p, full, size);
    memcpy(p, &size, sizeof size);
    return p;
}

int main(void) {
    int fails = 0;
    int64_t audit = tpaudit_audit_begin("older", 1);
    if (audit < 1) return fprintf(stderr, "audit_begin: %lld\n", (long long)audit), 1;

    int64_t shape[2] = {4, 8};
    tpaudit_tensor_t t = TPAUDIT_INIT_TENSOR;
    t.key = 7, t.name = "older.weight", t.ndim = 2, t.shape = shape, t.dtype = "float32";
    t.device = "cpu", t.nbytes = 128, t.requires_grad = 1, t.type = "NOT-SENT";
    void *tp = older(&t, offsetof(tpaudit_tensor_t, type));
    fails += tpaudit_record_tensor(tp) != TPAUDIT_OK;

    tpaudit_ref_t r = TPAUDIT_INIT_REF;
    r.holder_kind = TPAUDIT_HOLDER_MODULE, r.holder_class = "Older", r.holder_id = 1;
    r.path = "weight", r.role = TPAUDIT_ROLE_PARAM, r.tensor_key = 7, r.peer_key = 99;
    void *rp = older(&r, offsetof(tpaudit_ref_t, peer_key));
    fails += tpaudit_record_ref(rp) != TPAUDIT_OK;

    tpaudit_event_t e = TPAUDIT_INIT_EVENT;
    e.kind = TPAUDIT_EVENT_PARAM_REPLACED, e.name = "older.weight", e.old_key = 7, e.new_key = 8;
    e.detail = "older caller", e.py_stack = "NOT-SENT";
    void *ep = older(&e, offsetof(tpaudit_event_t, py_stack));
    fails += tpaudit_record_event(ep) != TPAUDIT_OK;

    size_t too_small = sizeof(size_t) - 1;
    void *bad = older(&t, sizeof(size_t));
    memcpy(bad, &too_small, sizeof too_small);
    fails += tpaudit_record_tensor(bad) != TPAUDIT_EINVAL;

    fails += tpaudit_audit_end(audit) != TPAUDIT_OK;
    fails += tpaudit_flush() != TPAUDIT_OK;
    free(tp), free(rp), free(ep), free(bad);
    if (fails) fprintf(stderr, "%d calls failed\n", fails);
    return fails ? 1 : 0;
}
