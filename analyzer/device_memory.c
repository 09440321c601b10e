/* device_memory.c - every device allocation and free that CUPTI recorded
 * (device, managed and VMM memory), in time order, for the memory viewer's
 * export: each allocation's native stack (its own, else its API call's) is
 * symbolized once per stack, and named by the library that asked for it as
 * the allocation scan names it; PyTorch's caching allocator (libc10_cuda,
 * libtorch, or no stack at all) gets no library name: its allocations are
 * the segments that tensors live in. */
#include "analyzer.h"

#include <stdlib.h>
#include <string.h>

/* The index of stack_id in m->stacks (symbolized on first sight); ids
 * seen so far are kept in ids (parallel to m->stacks). */
static int64_t stack_index(sqlite3 *db, tpa_device_memory_t *m, int64_t **ids, int64_t stack_id) {
    for (size_t i = 0; i < m->n_stacks; i++)
        if ((*ids)[i] == stack_id) return (int64_t)i;
    int64_t *idv = realloc(*ids, (m->n_stacks + 1) * sizeof *idv);
    if (!idv) return -2;
    *ids = idv;
    tpa_alloc_stack_t *v = realloc(m->stacks, (m->n_stacks + 1) * sizeof *v);
    if (!v) return -2;
    m->stacks = v;
    tpa_alloc_stack_t *s = &v[m->n_stacks];
    memset(s, 0, sizeof *s);
    tpa_symbolize_stack(db, stack_id, &s->frames);
    char *library = tpa_stack_library(db, stack_id);
    if (library && library[0] != '(' && strncmp(library, "libc10_cuda", 11) && strncmp(library, "libtorch", 8))
        s->library = library;
    else
        free(library);
    idv[m->n_stacks] = stack_id;
    return (int64_t)m->n_stacks++;
}

int tpa_read_device_memory(sqlite3 *db, tpa_device_memory_t **out) {
    tpa_device_memory_t *m = calloc(1, sizeof *m);
    if (!m) return -1;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        m->schema_version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db,
                           "SELECT a.ts_ns, a.op, a.address, a.bytes, a.device, a.stream,"
                           " CASE WHEN a.op='alloc' THEN COALESCE(a.stack_id, c.stack_id) END"
                           " FROM alloc a LEFT JOIN api_call c ON c.correlation = a.correlation"
                           " WHERE a.memkind IN ('device','managed','vmm') ORDER BY a.ts_ns, a.id",
                           -1, &st, NULL) != SQLITE_OK) {
        tpa_device_memory_free(m);
        return -1;
    }
    int64_t *ids = NULL;
    size_t cap = 0;
    int rc = 0;
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
        if (m->n_events == cap) {
            cap = cap ? cap * 2 : 256;
            tpa_segment_event_t *v = realloc(m->events, cap * sizeof *v);
            if (!v) {
                rc = -1;
                break;
            }
            m->events = v;
        }
        const char *op = (const char *)sqlite3_column_text(st, 1);
        tpa_segment_event_t *e = &m->events[m->n_events];
        *e = (tpa_segment_event_t){tpa_clamp_ts(sqlite3_column_int64(st, 0)),
                                   !op || strcmp(op, "alloc"),
                                   sqlite3_column_int64(st, 2),
                                   tpa_sane_bytes(sqlite3_column_int64(st, 3)),
                                   sqlite3_column_int64(st, 4),
                                   sqlite3_column_int64(st, 5),
                                   -1};
        if (e->device < 0 || e->device > 1023) e->device = 0;
        if (e->is_free) e->bytes = 0;
        if (!e->is_free && sqlite3_column_type(st, 6) != SQLITE_NULL) {
            e->stack = stack_index(db, m, &ids, sqlite3_column_int64(st, 6));
            if (e->stack == -2) rc = -1;
        }
        if (e->address > 0 && e->address <= INT64_MAX - TPA_MAX_BYTES) m->n_events++; /* addr + bytes fits */
    }
    sqlite3_finalize(st);
    free(ids);
    if (rc) {
        tpa_device_memory_free(m);
        return -1;
    }
    *out = m;
    return 0;
}
