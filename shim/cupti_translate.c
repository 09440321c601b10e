/*
 * cupti_translate.c - CUPTI memory / memory-pool activity record ->
 * tpa_alloc_rec.  Pure functions (see cupti_translate.h).
 */

#include "cupti_translate.h"

int64_t tpa_cupti_ts(uint64_t cupti_ts, int64_t offset_ns) { return (int64_t)cupti_ts + offset_ns; }

static int memkind_of(const tpa_cupti_memory_rec *r) {
    if (r->memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID) return TPA_MEM_POOL;
    switch (r->memoryKind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return TPA_MEM_PINNED;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return TPA_MEM_MANAGED;
    default: return TPA_MEM_DEVICE;
    }
}

/* TPA_ALLOC or TPA_FREE when operation is the record's allocating or
 * releasing value, else 0 (an operation tpaudit does not keep). */
static int op_of(int operation, int allocating, int releasing) {
    return operation == allocating ? TPA_ALLOC : operation == releasing ? TPA_FREE : 0;
}

/* Sets *out to the fields every allocation record has, the rest zero. */
static void fill_common(struct tpa_alloc_rec *out, int op, uint64_t ts, int64_t offset_ns, uint64_t address,
                        uint64_t bytes, uint32_t device, uint32_t correlation) {
    *out = (struct tpa_alloc_rec){.op = op,
                                  .ts_ns = tpa_cupti_ts(ts, offset_ns),
                                  .address = address,
                                  .bytes = bytes,
                                  .device = (int)device,
                                  .correlation = correlation};
}

int tpa_cupti_translate_memory(const tpa_cupti_memory_rec *r, int64_t offset_ns, struct tpa_alloc_rec *out) {
    if (!r || !out || r->kind != CUPTI_ACTIVITY_KIND_MEMORY2) return 0;
    int op = op_of(r->memoryOperationType, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                   CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE);
    if (!op) return 0;
    fill_common(out, op, r->timestamp, offset_ns, r->address, r->bytes, r->deviceId, r->correlationId);
    out->memkind = memkind_of(r);
    out->context = r->contextId;
    out->stream = r->streamId;
    out->pool = out->memkind == TPA_MEM_POOL ? r->memoryPoolConfig.address : 0;
#if CUPTI_API_VERSION >= 130000
    out->label = r->source ? r->source : r->name;
#else
    out->label = r->name;
#endif
    return 1;
}

int tpa_cupti_translate_pool(const tpa_cupti_pool_rec *r, int64_t offset_ns, struct tpa_alloc_rec *out) {
    if (!r || !out || r->kind != CUPTI_ACTIVITY_KIND_MEMORY_POOL) return 0;
    int op = op_of(r->memoryPoolOperationType, CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED,
                   CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED);
    if (!op) return 0;
#if CUPTI_API_VERSION >= 130000
    if (r->isManagedPool) return 0;
#endif
    fill_common(out, op, r->timestamp, offset_ns, r->address, r->size, r->deviceId, r->correlationId);
    out->memkind = TPA_MEM_POOL;
    out->pool = r->address;
    out->label = "memory pool";
    return 1;
}
