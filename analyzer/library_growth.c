/* library_growth.c - memory_growth of a library: device memory that one
 * library other than PyTorch's caching allocator (NCCL, cuBLAS, a native
 * extension) keeps growing across the steady-state audits, from CUPTI's
 * allocation records.  The same steady state, rise rule and floor as a
 * holder's (rules/memory_growth.c); the bytes of each library at an audit
 * are the device allocations live when it began, by the library the scan
 * names for their stack (alloc_scan.c).  Judged by the CLI only: the shim's
 * in-process verdict does not name modules. */
#include <stdlib.h>
#include <string.h>

#include "analyzer.h"
#include "memory_growth.h"

/* One library's bytes at each steady-state audit, and its newest live stack. */
typedef struct lib_series {
    char *library;
    int64_t *bytes;
    int64_t newest_stack;
} lib_series_t;

typedef struct lib_table {
    lib_series_t *v;
    size_t n;
    size_t n_audits;
} lib_table_t;

static lib_series_t *series_of(lib_table_t *t, const char *library) {
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].library, library)) return &t->v[i];
    lib_series_t *v = realloc(t->v, (t->n + 1) * sizeof *v);
    if (!v) return NULL;
    t->v = v;
    lib_series_t *s = &t->v[t->n];
    s->bytes = calloc(t->n_audits, sizeof *s->bytes);
    s->library = tpa_strdup(library);
    s->newest_stack = 0;
    if (!s->bytes || !s->library) {
        free(s->bytes), free(s->library);
        return NULL;
    }
    t->n++;
    return s;
}

/* PyTorch's caching allocator (the ledger's own rows) and memory no
 * library can be named for are not judged here. */
static int judged_library(const char *library) {
    return library[0] != '(' && strncmp(library, "libc10_cuda", 11) && strncmp(library, "libtorch", 8);
}

/* Device memory live at `at_ns`, by stack: (stack id, bytes, newest alloc's stack). */
static const char LIVE_BY_STACK_SQL[] =
    "SELECT coalesce(a.stack_id, (SELECT c.stack_id FROM api_call c WHERE c.correlation=a.correlation), 0) s,"
    " sum(a.bytes) FROM alloc a WHERE a.op<>'free' AND a.memkind IN ('device','managed','vmm') AND a.ts_ns<=?1"
    " AND NOT EXISTS (SELECT 1 FROM alloc b WHERE b.op='free' AND b.address=a.address AND b.id>a.id AND b.ts_ns<=?1)"
    " GROUP BY s ORDER BY max(a.id)";

/* Adds the bytes live at audit i to the table; the stacks' libraries are
 * named once each (names[], by stack id, grown as met). */
static int add_audit(sqlite3 *db, sqlite3_stmt *st, lib_table_t *t, size_t i, int64_t at_ns) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, at_ns);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t stack = sqlite3_column_int64(st, 0);
        char *library = tpa_stack_library(db, stack);
        if (!library) return -1;
        lib_series_t *s = judged_library(library) ? series_of(t, library) : NULL;
        if (s) {
            s->bytes[i] = tpa_add_bytes(s->bytes[i], tpa_sane_bytes(sqlite3_column_int64(st, 1)));
            s->newest_stack = stack;
        }
        free(library);
    }
    return rc == SQLITE_DONE ? 0 : -1;
}

static const tpa_kind_t *growing_kind(void) {
    for (size_t k = 0; k < tpa_n_kinds; k++)
        if (tpa_kinds[k].grows) return &tpa_kinds[k];
    return NULL;
}

static int push_growth(sqlite3 *db, const lib_series_t *s, const tpa_steady_audit_t *a, size_t first, size_t n,
                       size_t run_index, int details, tpa_report_t *r) {
    const tpa_kind_t *k = growing_kind();
    const tpa_run_t *run = &r->runs[run_index];
    tpa_finding_t f;
    memset(&f, 0, sizeof f);
    f.kind = tpa_strdup(k->name);
    f.is_error = k->severity == TPA_SEVERITY_ERROR;
    f.rank = run->has_rank ? run->rank : -1;
    f.run_index = run_index;
    f.step = run->headline_step;
    f.label = tpa_strdup(run->headline_label);
    f.holder_kind = tpa_strdup("library");
    f.holder_path = tpa_strdup(s->library);
    f.name = tpa_strdup(s->library);
    f.device = tpa_strdup("cuda");
    f.example = tpa_strdup("device memory");
    f.held_bytes = s->bytes[n - 1];
    tpa_growth_rate(&f, a, first, n, s->bytes[first]);
    if (f.growth_per_step < TPA_GROWTH_MIN_RATE) {
        tpa_finding_free(&f);
        return 0;
    }
    if (details) {
        tpa_symbolize_stack(db, s->newest_stack, &f.created_at);
        f.message = tpa_finding_message(&f, k);
    }
    if (tpa_report_add_finding(r, &f)) {
        tpa_finding_free(&f);
        return -1;
    }
    return 0;
}

int tpa_library_growth(sqlite3 *db, int64_t audit, size_t run_index, int details, tpa_report_t *r) {
    tpa_steady_audit_t *a = NULL;
    int n = audit && growing_kind() ? tpa_growth_steady_audits(db, audit, &a) : 0;
    if (n < TPA_GROWTH_MIN_AUDITS) {
        free(a);
        return n < 0 ? -1 : 0;
    }
    lib_table_t t = {NULL, 0, (size_t)n};
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, LIVE_BY_STACK_SQL, -1, &st, NULL) == SQLITE_OK ? 0 : -1;
    for (size_t i = 0; !rc && i < (size_t)n; i++) rc = add_audit(db, st, &t, i, a[i].begin_ns);
    sqlite3_finalize(st);
    for (size_t j = 0; !rc && j < t.n; j++) {
        size_t first = tpa_growth_rise_start(t.v[j].bytes, (size_t)n);
        if ((size_t)n - first >= TPA_GROWTH_MIN_AUDITS)
            rc = push_growth(db, &t.v[j], a, first, (size_t)n, run_index, details, r);
    }
    for (size_t j = 0; j < t.n; j++) free(t.v[j].library), free(t.v[j].bytes);
    free(t.v);
    free(a);
    return rc;
}
