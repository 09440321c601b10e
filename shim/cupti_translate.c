/*
 * cupti_translate.c - CUPTI memory / memory-pool activity record ->
 * tpa_alloc_rec.  Pure functions (see cupti_translate.h).
 */
#include <string.h>

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

int tpa_cupti_translate_memory(const tpa_cupti_memory_rec *r, int64_t offset_ns, struct tpa_alloc_rec *out) {
    if (!r || !out || r->kind != CUPTI_ACTIVITY_KIND_MEMORY2) return 0;
    memset(out, 0, sizeof *out);
    if (r->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
        out->op = TPA_ALLOC;
    else if (r->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
        out->op = TPA_FREE;
    else
        return 0;
    out->ts_ns = tpa_cupti_ts(r->timestamp, offset_ns);
    out->memkind = memkind_of(r);
    out->address = r->address;
    out->bytes = r->bytes;
    out->device = (int)r->deviceId;
    out->context = r->contextId;
    out->stream = r->streamId;
    out->pool = out->memkind == TPA_MEM_POOL ? r->memoryPoolConfig.address : 0;
    out->correlation = r->correlationId;
#if CUPTI_API_VERSION >= 130000
    out->label = r->source ? r->source : r->name;
#else
    out->label = r->name;
#endif
    return 1;
}

int tpa_cupti_translate_pool(const tpa_cupti_pool_rec *r, int64_t offset_ns, struct tpa_alloc_rec *out) {
    if (!r || !out || r->kind != CUPTI_ACTIVITY_KIND_MEMORY_POOL) return 0;
    memset(out, 0, sizeof *out);
    if (r->memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED)
        out->op = TPA_ALLOC;
    else if (r->memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED)
        out->op = TPA_FREE;
    else
        return 0;
#if CUPTI_API_VERSION >= 130000
    if (r->isManagedPool) return 0;
#endif
    out->ts_ns = tpa_cupti_ts(r->timestamp, offset_ns);
    out->memkind = TPA_MEM_POOL;
    out->address = r->address;
    out->bytes = r->size;
    out->device = (int)r->deviceId;
    out->pool = r->address;
    out->correlation = r->correlationId;
    out->label = "memory pool";
    return 1;
}
