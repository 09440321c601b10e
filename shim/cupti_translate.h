/*
 * cupti_translate.h - pure translation of CUPTI memory activity records into
 * the shim's tpa_alloc_rec rows.  No CUPTI calls, no state: unit-testable on
 * a machine without a GPU.  The record struct versions follow the installed
 * CUPTI headers through a ladder on CUPTI_API_VERSION.
 */
#ifndef TPAUDIT_CUPTI_TRANSLATE_H
#define TPAUDIT_CUPTI_TRANSLATE_H

#include <cupti.h>

#include "cupti_contract.h"

#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityMemory4 tpa_cupti_memory_rec;
typedef CUpti_ActivityMemoryPool3 tpa_cupti_pool_rec;
#elif CUPTI_API_VERSION >= 17
typedef CUpti_ActivityMemory3 tpa_cupti_memory_rec;
typedef CUpti_ActivityMemoryPool2 tpa_cupti_pool_rec;
#else
#error "tpaudit needs CUPTI from CUDA 11.6 or later (CUpti_ActivityMemory3)"
#endif

/* Converts a CUPTI timestamp (already on tpa_now_ns's clock when the
 * timestamp callback is registered; `offset_ns` added otherwise). */
TPA_HIDDEN int64_t tpa_cupti_ts(uint64_t cupti_ts, int64_t offset_ns);

/* MEMORY2 record -> one alloc/free row.  Returns 1 when `out` holds a row,
 * 0 when the record is not an allocation or release (skipped). */
TPA_HIDDEN int tpa_cupti_translate_memory(const tpa_cupti_memory_rec *r, int64_t offset_ns, struct tpa_alloc_rec *out);

/* MEMORY_POOL record -> one row of memkind 'pool' for the pool's reserved
 * range (created -> alloc, destroyed -> free).  Trim records and pools of
 * managed memory yield 0. */
TPA_HIDDEN int tpa_cupti_translate_pool(const tpa_cupti_pool_rec *r, int64_t offset_ns, struct tpa_alloc_rec *out);

#endif /* TPAUDIT_CUPTI_TRANSLATE_H */
