/* by_library.c - device memory live at the judged audit, grouped by the
 * library that asked for it: the first frame of the allocation's native
 * stack that is not the CUDA runtime, the driver, CUPTI or the shim (so
 * NCCL's buffers land under libnccl, cuBLAS's under libcublas, PyTorch's
 * caching allocator under libc10_cuda).  One pass over the alloc table in
 * time order with a hash of live addresses: linear in the events. */
#include "analyzer.h"

#include <stdlib.h>
#include <string.h>

typedef struct live_slot {
    int64_t address; /* 0: empty; -1: deleted */
    int64_t bytes;
    int64_t stack_id;
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

static int live_put(live_set_t *s, int64_t address, int64_t bytes, int64_t stack_id) {
    if ((s->used + 1) * 2 > s->cap && live_grow(s)) return -1;
    size_t j = slot_of(s, address);
    while (s->v[j].address > 0 && s->v[j].address != address) j = (j + 1) & (s->cap - 1);
    if (s->v[j].address != address) s->used++;
    s->v[j] = (live_slot_t){address, bytes, stack_id};
    return 0;
}

static void live_drop(live_set_t *s, int64_t address) {
    if (!s->cap) return;
    size_t j = slot_of(s, address);
    while (s->v[j].address) {
        if (s->v[j].address == address) { s->v[j].address = -1; return; }
        j = (j + 1) & (s->cap - 1);
    }
}

/* Modules that only pass an allocation through. */
static int is_passthrough(const char *path) {
    static const char *PASS[] = {"libtpaudit.so", "libcupti.so", "libcuda.so", "libcudart.so", "libcudart_static"};
    for (size_t i = 0; i < sizeof PASS / sizeof *PASS; i++)
        if (strstr(path, PASS[i])) return 1;
    return 0;
}

/* Base name of the first non-passthrough module on the stack. */
static char *owner_of(sqlite3_stmt *stack, sqlite3_stmt *mod, int64_t stack_id) {
    char *owner = NULL;
    sqlite3_reset(stack);
    sqlite3_bind_int64(stack, 1, stack_id);
    if (sqlite3_step(stack) != SQLITE_ROW) return tpa_strdup("(no stack)");
    const unsigned char *ips = sqlite3_column_blob(stack, 1);
    int depth = sqlite3_column_int(stack, 0), bytes = sqlite3_column_bytes(stack, 1);
    if (depth > bytes / 8) depth = bytes / 8;
    for (int i = 0; i < depth && !owner; i++) {
        uint64_t ip = 0;
        for (int b = 7; b >= 0; b--) ip = (ip << 8) | ips[i * 8 + b];
        sqlite3_reset(mod);
        sqlite3_bind_int64(mod, 1, (int64_t)ip);
        if (sqlite3_step(mod) != SQLITE_ROW) continue;
        const char *path = (const char *)sqlite3_column_text(mod, 0);
        if (!path || is_passthrough(path)) continue;
        const char *base = strrchr(path, '/');
        owner = tpa_strdup(base ? base + 1 : path);
    }
    return owner ? owner : tpa_strdup("(unknown module)");
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
            run->by_library[i].bytes += bytes;
            run->by_library[i].allocations++;
            return 0;
        }
    tpa_lib_memory_t *v = realloc(run->by_library, (run->n_by_library + 1) * sizeof *v);
    if (!v) return -1;
    run->by_library = v;
    v[run->n_by_library++] = (tpa_lib_memory_t){tpa_strdup(library), bytes, 1};
    return 0;
}

int tpa_memory_by_library(sqlite3 *db, int64_t at_ns, tpa_run_t *run) {
    sqlite3_stmt *scan = NULL, *stack = NULL, *mod = NULL;
    live_set_t live = {0};
    int rc = -1;
    if (sqlite3_prepare_v2(db,
            "SELECT op, address, bytes, coalesce(stack_id, (SELECT c.stack_id FROM api_call c WHERE c.correlation=a.correlation)) "
            "FROM alloc a WHERE ts_ns<=?1 AND memkind IN ('device','managed','vmm') ORDER BY ts_ns, id",
            -1, &scan, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT depth, ips FROM stack WHERE id=?1", -1, &stack, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT path FROM module WHERE low<=?1 AND ?1<high ORDER BY id DESC LIMIT 1", -1, &mod, NULL) != SQLITE_OK)
        goto done;
    sqlite3_bind_int64(scan, 1, at_ns);
    while (sqlite3_step(scan) == SQLITE_ROW) {
        const char *op = (const char *)sqlite3_column_text(scan, 0);
        int64_t address = sqlite3_column_int64(scan, 1);
        if (address <= 0) continue;
        if (op && !strcmp(op, "free")) { live_drop(&live, address); continue; }
        int64_t sid = sqlite3_column_type(scan, 3) == SQLITE_NULL ? 0 : sqlite3_column_int64(scan, 3);
        if (live_put(&live, address, sqlite3_column_int64(scan, 2), sid)) goto done;
    }
    /* Sort the live allocations by stack, then name each distinct stack once. */
    size_t n = 0;
    for (size_t i = 0; i < live.cap; i++)
        if (live.v[i].address > 0) live.v[n++] = live.v[i];
    qsort(live.v, n, sizeof *live.v, by_stack);
    for (size_t i = 0; i < n;) {
        int64_t sid = live.v[i].stack_id;
        char *owner = sid ? owner_of(stack, mod, sid) : tpa_strdup("(no stack)");
        if (!owner) goto done;
        for (; i < n && live.v[i].stack_id == sid; i++)
            if (add_to(run, owner, live.v[i].bytes)) { free(owner); goto done; }
        free(owner);
    }
    qsort(run->by_library, run->n_by_library, sizeof *run->by_library, by_bytes_desc);
    rc = 0;
done:
    sqlite3_finalize(scan);
    sqlite3_finalize(stack);
    sqlite3_finalize(mod);
    free(live.v);
    return rc;
}
