/* hostile_common.h - small helpers shared by the hostile-host programs:
 * one event or one audit through tpaudit.h (no-ops without the shim). */
#ifndef TPAUDIT_HOSTILE_COMMON_H
#define TPAUDIT_HOSTILE_COMMON_H

#include "tpaudit.h"

static inline void host_event(uint64_t key) {
    tpaudit_event_t e = TPAUDIT_INIT_EVENT;
    e.kind = TPAUDIT_EVENT_PARAM_CREATED;
    e.name = "hostile";
    e.new_key = key;
    tpaudit_record_event(&e);
}

/* One audit with one tensor, ended but not flushed. */
static inline void host_audit(int64_t step) {
    int64_t id = tpaudit_audit_begin("hostile", step);
    int64_t shape[1] = {4};
    tpaudit_tensor_t t = TPAUDIT_INIT_TENSOR;
    t.key = 7;
    t.name = "w";
    t.ndim = 1;
    t.shape = shape;
    t.storage_ptr = 4096;
    t.storage_bytes = 16;
    t.nbytes = 16;
    tpaudit_record_tensor(&t);
    tpaudit_audit_end(id);
}

#endif
