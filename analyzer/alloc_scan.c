/* alloc_scan.c - device memory live at the judged audit, grouped by the
 * library that asked for it: the first frame of the allocation's native
 * stack that is not the CUDA runtime, the driver, CUPTI or the shim (so
 * NCCL's buffers land under libnccl, cuBLAS's under libcublas, PyTorch's
 * caching allocator under libc10_cuda).  The same single pass over the
 * alloc table in time order also gives the memory-over-time series of the
 * plot.  A hash of live addresses keeps it linear in the events; API-call
 * stacks are looked up for the survivors only.  Nothing is sized by a count
 * read earlier: the series grows as rows come, bytes are range-checked and
 * sums saturate (tpa_model.h). */
#include "analyzer.h"

#include <stdlib.h>
#include <string.h>

typedef struct live_slot {
    int64_t address; /* 0: empty; -1: deleted */
    int64_t bytes;
    int64_t stack_id;    /* the record's own stack, else 0 */
    int64_t correlation; /* to find the API call's stack for survivors only */
    int is_device;       /* device, managed or vmm memory (by-library counts these) */
} live_slot_t;

typedef struct live_set {
    live_slot_t *v;
    size_t cap, used; /* used counts deleted slots too */
} live_set_t;

static size_t slot_of(const live_set_t *s, int64_t address) {
    uint64_t h = (uint64_t)address * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 17) & (s->cap - 1);
}

static int live_grow(live_set_t *s) {
    live_set_t n = {calloc(s->cap ? s->cap * 2 : 1024, sizeof(live_slot_t)), s->cap ? s->cap * 2 : 1024, 0};
    if (!n.v) return -1;
    for (size_t i = 0; i < s->cap; i++) {
        if (s->v[i].address <= 0) continue;
        size_t j = slot_of(&n, s->v[i].address);
        while (n.v[j].address) j = (j + 1) & (n.cap - 1);
        n.v[j] = s->v[i];
        n.used++;
    }
    free(s->v);
    *s = n;
    return 0;
}

/* Adds (or replaces) a live address; keeps *total the sum of live bytes. */
static int live_put(live_set_t *s, int64_t address, int64_t bytes, int is_device, int64_t stack_id, int64_t correlation,
                    int64_t *total) {
    if (address <= 0) return 0;
    if ((s->used + 1) * 2 > s->cap && live_grow(s)) return -1;
    size_t j = slot_of(s, address);
    while (s->v[j].address > 0 && s->v[j].address != address) j = (j + 1) & (s->cap - 1);
    if (s->v[j].address == address)
        *total = tpa_add_bytes(*total, -s->v[j].bytes);
    else
        s->used++;
    s->v[j] = (live_slot_t){address, bytes, stack_id, correlation, is_device};
    *total = tpa_add_bytes(*total, bytes);
    return 0;
}

/* Removes a live address; returns its bytes (0 when it was not live). */
static int64_t live_drop(live_set_t *s, int64_t address) {
    if (!s->cap || address <= 0) return 0;
    size_t j = slot_of(s, address);
    while (s->v[j].address) {
        if (s->v[j].address == address) {
            s->v[j].address = -1;
            return s->v[j].bytes;
        }
        j = (j + 1) & (s->cap - 1);
    }
    return 0;
}

/* Modules that only pass an allocation through. */
static int is_passthrough(const char *path) {
    static const char *PASS[] = {"libtpaudit.so", "libcupti.so", "libcuda.so", "libcudart.so", "libcudart_static"};
    for (size_t i = 0; i < sizeof PASS / sizeof *PASS; i++)
        if (strstr(path, PASS[i])) return 1;
    return 0;
}

/* Base name of the first non-passthrough module on the stack. */
static char *owner_of(sqlite3 *db, sqlite3_stmt *stack, int64_t stack_id) {
    char *owner = NULL;
    sqlite3_reset(stack);
    sqlite3_bind_int64(stack, 1, stack_id);
    if (sqlite3_step(stack) != SQLITE_ROW) return tpa_strdup("(no stack)");
    const unsigned char *ips = sqlite3_column_blob(stack, 1);
    int depth = sqlite3_column_int(stack, 0), bytes = sqlite3_column_bytes(stack, 1);
    if (depth > bytes / 8) depth = bytes / 8;
    if (depth > TPA_MAX_FRAMES) depth = TPA_MAX_FRAMES;
    for (int i = 0; i < depth && !owner; i++) {
        uint64_t ip = 0;
        for (int b = 7; b >= 0; b--) ip = (ip << 8) | ips[i * 8 + b];
        const char *path = tpa_module_path_of(db, ip);
        if (!path || is_passthrough(path)) continue;
        const char *base = strrchr(path, '/');
        owner = tpa_strdup(base ? base + 1 : path);
    }
    return owner ? owner : tpa_strdup("(unknown module)");
}

char *tpa_stack_library(sqlite3 *db, int64_t stack_id) {
    sqlite3_stmt *stack;
    if (!stack_id) return tpa_strdup("(no stack)");
    if (sqlite3_prepare_v2(db, "SELECT depth, ips FROM stack WHERE id=?1", -1, &stack, NULL) != SQLITE_OK) return NULL;
    char *owner = owner_of(db, stack, stack_id);
    sqlite3_finalize(stack);
    return owner;
}

static int by_stack(const void *a, const void *b) {
    const live_slot_t *x = a, *y = b;
    return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

static int by_bytes_desc(const void *a, const void *b) {
    const tpa_lib_memory_t *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return strcmp(x->library, y->library);
}

static int add_to(tpa_run_t *run, const char *library, int64_t bytes) {
    for (size_t i = 0; i < run->n_by_library; i++)
        if (!strcmp(run->by_library[i].library, library)) {
            run->by_library[i].bytes = tpa_add_bytes(run->by_library[i].bytes, bytes);
            run->by_library[i].allocations++;
            return 0;
        }
    tpa_lib_memory_t *v = realloc(run->by_library, (run->n_by_library + 1) * sizeof *v);
    if (!v) return -1;
    run->by_library = v;
    v[run->n_by_library++] = (tpa_lib_memory_t){tpa_strdup(library), bytes, 1};
    return 0;
}

/* Survivors of the live set that are device memory, with their stacks. */
static live_slot_t *snapshot(const live_set_t *live, sqlite3_stmt *call, size_t *n_out) {
    live_slot_t *v = malloc((live->cap ? live->cap : 1) * sizeof *v);
    size_t n = 0;
    for (size_t i = 0; v && i < live->cap; i++) {
        live_slot_t slot = live->v[i];
        if (slot.address <= 0 || !slot.is_device) continue;
        if (!slot.stack_id && slot.correlation) {
            sqlite3_reset(call);
            sqlite3_bind_int64(call, 1, slot.correlation);
            if (sqlite3_step(call) == SQLITE_ROW) slot.stack_id = sqlite3_column_int64(call, 0);
        }
        v[n++] = slot;
    }
    *n_out = n;
    return v;
}

static int group_by_library(sqlite3 *db, live_slot_t *v, size_t n, sqlite3_stmt *stack, tpa_run_t *run) {
    if (!n) return 0; /* qsort must not see a NULL array */
    qsort(v, n, sizeof *v, by_stack);
    for (size_t i = 0; i < n;) {
        int64_t sid = v[i].stack_id;
        char *owner = sid ? owner_of(db, stack, sid) : tpa_strdup("(no stack)");
        if (!owner) return -1;
        for (; i < n && v[i].stack_id == sid; i++)
            if (add_to(run, owner, v[i].bytes)) {
                free(owner);
                return -1;
            }
        free(owner);
    }
    qsort(run->by_library, run->n_by_library, sizeof *run->by_library, by_bytes_desc);
    return 0;
}

static int add_point(tpa_run_t *run, size_t *cap, int64_t ts, int64_t bytes) {
    if (run->n_points == *cap) {
        size_t grown = *cap ? *cap * 2 : 256;
        tpa_point_t *v = realloc(run->points, grown * sizeof *v);
        if (!v) return -1;
        run->points = v;
        *cap = grown;
    }
    run->points[run->n_points++] = (tpa_point_t){ts, bytes < 0 ? 0 : bytes};
    return 0;
}

int tpa_scan_allocations(sqlite3 *db, int64_t at_ns, tpa_run_t *run) {
    sqlite3_stmt *scan = NULL, *stack = NULL, *call = NULL;
    live_set_t live = {0};
    live_slot_t *at = NULL;
    size_t n_at = 0, cap = 0;
    int64_t rows = 0, every, i = 0, live_bytes = 0, last_ts = 0;
    int rc = -1, taken = 0, pending = 0;
    /* The row count only picks the sampling stride (about 512 points). */
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM alloc", -1, &scan, NULL) != SQLITE_OK ||
        sqlite3_step(scan) != SQLITE_ROW)
        goto done;
    rows = sqlite3_column_int64(scan, 0);
    sqlite3_finalize(scan);
    scan = NULL;
    every = rows / 512 + 1;
    if (sqlite3_prepare_v2(
            db,
            "SELECT ts_ns, op, address, bytes, memkind IN ('device','managed','vmm'), coalesce(stack_id, 0), "
            "coalesce(correlation, 0) FROM alloc ORDER BY ts_ns, id",
            -1, &scan, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT depth, ips FROM stack WHERE id=?1", -1, &stack, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT stack_id FROM api_call WHERE correlation=?1", -1, &call, NULL) != SQLITE_OK)
        goto done;
    while (sqlite3_step(scan) == SQLITE_ROW) {
        int64_t ts = tpa_clamp_ts(sqlite3_column_int64(scan, 0));
        if (!taken && ts > at_ns) {
            at = snapshot(&live, call, &n_at);
            taken = 1;
        }
        const char *op = (const char *)sqlite3_column_text(scan, 1);
        int64_t address = sqlite3_column_int64(scan, 2), bytes = sqlite3_column_int64(scan, 3);
        bytes = tpa_sane_bytes(bytes);
        if (op && !strcmp(op, "free")) {
            live_bytes = tpa_add_bytes(live_bytes, -live_drop(&live, address));
        } else if (live_put(&live, address, bytes, sqlite3_column_int(scan, 4), sqlite3_column_int64(scan, 5),
                            sqlite3_column_int64(scan, 6), &live_bytes)) {
            goto done;
        }
        last_ts = ts;
        pending = 1;
        if (i++ % every == 0) {
            if (add_point(run, &cap, ts, live_bytes)) goto done;
            pending = 0;
        }
    }
    if (pending && add_point(run, &cap, last_ts, live_bytes)) goto done; /* the last row always */
    if (!taken) at = snapshot(&live, call, &n_at);
    if (!at || group_by_library(db, at, n_at, stack, run)) goto done;
    rc = 0;
done:
    sqlite3_finalize(scan);
    sqlite3_finalize(stack);
    sqlite3_finalize(call);
    free(live.v);
    free(at);
    return rc;
}
