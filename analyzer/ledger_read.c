/* ledger_read.c - the memory ledger of the judged audit into the run: the
 * probe's rows (table ledger, one per owner group and device), then, where
 * CUPTI measured the device's memory, one row per other library holding
 * device memory (the allocation scan's bytes by library, PyTorch's own
 * allocator aside: the probe's rows and its cache cover that), and what is
 * left of the measured total, unattributed.  The measured total of a device
 * is what CUPTI saw live there, else the probe's 'measured' row. */
#include "memory_growth.h"

#include <stdlib.h>
#include <string.h>

#include "analyzer.h"

static int add_row(tpa_run_t *run, const char *device, const char *kind, const char *owner, int64_t bytes,
                   int64_t tensors, char *example) {
    tpa_ledger_row_t *v = realloc(run->ledger, (run->n_ledger + 1) * sizeof *v);
    if (!v) {
        free(example);
        return -1;
    }
    run->ledger = v;
    v[run->n_ledger++] = (tpa_ledger_row_t){tpa_strdup(device), tpa_strdup(kind), tpa_strdup(owner),
                                            tpa_sane_bytes(bytes), tensors < 0 ? 0 : tensors, example};
    return 0;
}

/* PyTorch's caching allocator (its blocks are the probe's rows and cache). */
static int is_torch_allocator(const char *library) {
    return !strncmp(library, "libc10_cuda", 11) || !strncmp(library, "libtorch", 8);
}

/* The probe's rows of audit `audit`, by device then bytes; the measured
 * totals per device into totals (devices[i] owns totals[i]). */
static int read_probe_rows(sqlite3 *db, int64_t audit, tpa_run_t *run, char ***devices, int64_t **totals,
                           size_t *n_devices) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT device, owner_kind, owner, sum(bytes), sum(tensors), max(shapes), max(dtype),"
                           " max(with_graph) FROM ledger WHERE audit_id=?1 AND owner_kind <> 'unattributed'"
                           " GROUP BY device, owner_kind, owner ORDER BY device, owner_kind = 'measured' DESC,"
                           " sum(bytes) DESC, owner_kind, owner",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, audit);
    int rc = 0;
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
        const char *device = (const char *)sqlite3_column_text(st, 0), *kind = (const char *)sqlite3_column_text(st, 1);
        int64_t bytes = sqlite3_column_int64(st, 3);
        if (!device) device = "?";
        if (!*n_devices || strcmp((*devices)[*n_devices - 1], device)) {
            char **d = realloc(*devices, (*n_devices + 1) * sizeof *d);
            int64_t *t = d ? realloc(*totals, (*n_devices + 1) * sizeof *t) : NULL;
            if (d) *devices = d;
            if (t) *totals = t;
            if (!d || !t) return -1;
            (*devices)[*n_devices] = tpa_strdup(device);
            (*totals)[(*n_devices)++] = -1; /* none measured yet */
        }
        if (kind && !strcmp(kind, "measured")) {
            (*totals)[*n_devices - 1] = tpa_sane_bytes(bytes);
            continue;
        }
        char *example = tpa_ledger_example((const char *)sqlite3_column_text(st, 5),
                                           (const char *)sqlite3_column_text(st, 6), device, sqlite3_column_int(st, 7));
        rc = add_row(run, device, kind ? kind : "?", (const char *)sqlite3_column_text(st, 2), bytes,
                     sqlite3_column_int64(st, 4), example);
    }
    sqlite3_finalize(st);
    return rc;
}

/* The device CUPTI's memory is put under: the one CUDA device of the
 * probe's rows, else "cuda". */
static const char *cuda_device(char **devices, size_t n) {
    const char *found = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strncmp(devices[i], "cuda", 4)) {
            if (found) return "cuda";
            found = devices[i];
        }
    return found ? found : "cuda";
}

int tpa_has_ledger(sqlite3 *db) {
    sqlite3_stmt *st;
    int has_table = 0;
    if (sqlite3_prepare_v2(db, "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type='table' AND name='ledger')", -1,
                           &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        has_table = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return has_table;
}

int tpa_read_ledger(sqlite3 *db, int64_t audit, tpa_run_t *run) {
    if (!tpa_has_ledger(db) || !audit) return 0; /* schema version 1, or no audit: no ledger */
    char **devices = NULL;
    int64_t *totals = NULL;
    size_t n_devices = 0;
    int rc = read_probe_rows(db, audit, run, &devices, &totals, &n_devices);
    run->has_ledger = !rc && n_devices > 0;
    run->ledger_step = run->headline_step;
    /* CUPTI's measure of device memory: the other libraries' rows, and the total */
    const char *cuda = cuda_device(devices, n_devices);
    int64_t cupti_total = 0;
    for (size_t i = 0; run->has_ledger && i < run->n_by_library; i++) {
        const tpa_lib_memory_t *lib = &run->by_library[i];
        cupti_total = tpa_add_bytes(cupti_total, lib->bytes);
        /* "(no stack)", "(unknown module)": no library to name, so unattributed */
        if (!rc && !is_torch_allocator(lib->library) && lib->library[0] != '(')
            rc = add_row(run, cuda, "library", lib->library, lib->bytes, 0, NULL);
    }
    for (size_t d = 0; run->has_ledger && !rc && d < n_devices; d++) {
        int64_t total = run->n_by_library && !strcmp(devices[d], cuda) ? cupti_total : totals[d], sum = 0;
        for (size_t i = 0; i < run->n_ledger; i++)
            if (!strcmp(run->ledger[i].device, devices[d])) sum = tpa_add_bytes(sum, run->ledger[i].bytes);
        if (total < 0) total = sum; /* nothing measured: the rows are the total */
        run->ledger_total = tpa_add_bytes(run->ledger_total, total);
        if (total > sum) rc = add_row(run, devices[d], "unattributed", NULL, total - sum, 0, NULL);
    }
    for (size_t d = 0; d < n_devices; d++) free(devices[d]);
    free(devices);
    free(totals);
    return rc;
}
