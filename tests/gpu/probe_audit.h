/* probe_audit.h - the audit the GPU probe programs record: one audit in
 * which an optimizer holds a float32 tensor "probe.table" that no model
 * holds, over `bytes` of device memory at `storage`, so the report must
 * name it and place it in the allocation that holds it. */
#ifndef TPA_PROBE_AUDIT_H
#define TPA_PROBE_AUDIT_H

#include <stdint.h>

#include "tpaudit.h"

static void probe_audit_stale_table(const char *label, const void *storage, uint64_t bytes, int ndim,
                                    const int64_t *shape) {
    int64_t audit = tpaudit_audit_begin(label, 1);
    tpaudit_tensor_t t = TPAUDIT_INIT_TENSOR;
    t.key = 1;
    t.name = "probe.table";
    t.ndim = ndim;
    t.shape = shape;
    t.dtype = "float32";
    t.device = "cuda:0";
    t.storage_ptr = (uint64_t)(uintptr_t)storage;
    t.storage_bytes = bytes;
    t.nbytes = bytes;
    t.requires_grad = 1;
    tpaudit_record_tensor(&t);
    tpaudit_ref_t r = TPAUDIT_INIT_REF;
    r.holder_kind = TPAUDIT_HOLDER_OPTIMIZER;
    r.holder_class = "probe.Optimizer";
    r.holder_id = 1;
    r.path = "param_groups[0].params[0]";
    r.role = TPAUDIT_ROLE_GROUP_PARAM;
    r.tensor_key = 1;
    tpaudit_record_ref(&r);
    tpaudit_audit_end(audit);
}

#endif
