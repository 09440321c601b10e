/* peak_moment.c - what held the device's memory at the moment of a step's
 * peak, as the probe found it (python/tpaudit/_peak_moment.py, table
 * peak_part): each window of the allocator's history from an audit inside
 * backward wrote a `measured` row (its peak's allocated bytes) and then its
 * parts, in that order; the window read is the one with the most bytes on
 * the device (the first on a tie), and its parts add up to them (the
 * allocator's cache beside). */
#include "analyzer.h"

#include <stdlib.h>
#include <string.h>

static void drop_parts(tpa_run_t *run) {
    for (size_t i = 0; i < run->n_moment_parts; i++) {
        free(run->moment_parts[i].kind);
        free(run->moment_parts[i].owner);
    }
    free(run->moment_parts);
    run->moment_parts = NULL;
    run->n_moment_parts = 0;
}

/* The window whose measured row is at `from` (a rowid): its rows up to the next measured one. */
static int read_window(sqlite3 *db, tpa_run_t *run, int64_t from) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT owner_kind, owner, bytes, blocks FROM peak_part WHERE rowid > ?1 AND device ="
                           " (SELECT device FROM peak_part WHERE rowid = ?1) ORDER BY rowid",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, from);
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *kind = sqlite3_column_text(st, 0);
        if (!kind || !strcmp((const char *)kind, "measured")) break; /* the next window */
        if (run->n_moment_parts == cap) {
            size_t more = cap ? 2 * cap : 16;
            tpa_moment_part_t *grown = realloc(run->moment_parts, more * sizeof *grown);
            if (!grown) break;
            run->moment_parts = grown;
            cap = more;
        }
        tpa_moment_part_t *p = &run->moment_parts[run->n_moment_parts++];
        p->kind = tpa_strdup((const char *)kind);
        p->owner = tpa_column_text(st, 1);
        p->bytes = tpa_sane_bytes(sqlite3_column_int64(st, 2));
        p->blocks = sqlite3_column_int64(st, 3);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        drop_parts(run);
        return -1;
    }
    return 0;
}

int tpa_read_peak_moment(sqlite3 *db, tpa_run_t *run, const char *device) {
    if (!tpa_query_int(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='peak_part'")) return 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT rowid, step, bytes FROM peak_part WHERE owner_kind = 'measured'"
                           " AND (?1 IS NULL OR device = ?1) ORDER BY bytes DESC, rowid LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    if (device) sqlite3_bind_text(st, 1, device, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    int64_t from = 0;
    if (rc == SQLITE_ROW) {
        from = sqlite3_column_int64(st, 0);
        run->moment_step = sqlite3_column_int64(st, 1);
        run->moment_bytes = tpa_sane_bytes(sqlite3_column_int64(st, 2));
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) return 0;
    if (rc != SQLITE_ROW) return -1;
    return read_window(db, run, from);
}
