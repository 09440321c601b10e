/* growth_series.c - what a growth run's plot and text line show: the
 * probe's per-step samples (table sample), the step growth was first
 * suspected (the run's first growth audit) and the bytes the holder of the
 * run's fastest memory_growth finding kept at each audit (table ledger).
 * The samples are downsampled to at most MAX_SAMPLES (every k-th, the last
 * always); their first, least and last values are of every sample. */
#include <stdlib.h>
#include <string.h>

#include "analyzer.h"
#include "findings.h"
#include "owned_text.h"

enum { MAX_SAMPLES = 2000 };

static int table_exists(sqlite3 *db, const char *name) {
    sqlite3_stmt *st;
    int yes = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?1", -1, &st, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        yes = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    return yes;
}

static int read_samples(sqlite3 *db, tpa_growth_series_t *g) {
    int64_t total = tpa_query_int(db, "SELECT count(*) FROM sample");
    if (total <= 0) return 0;
    int64_t every = total > MAX_SAMPLES ? (total + MAX_SAMPLES - 1) / MAX_SAMPLES : 1;
    size_t cap = (size_t)(total / every + 2);
    g->samples = calloc(cap, sizeof *g->samples);
    if (!g->samples) return -1;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT step, live_bytes, device FROM sample ORDER BY ts_ns, rowid", -1, &st, NULL) !=
        SQLITE_OK)
        return -1;
    int64_t i = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        tpa_step_bytes_t v = {sqlite3_column_int64(st, 0), tpa_sane_bytes(sqlite3_column_int64(st, 1))};
        if (i == 0) {
            g->device = tpa_column_text(st, 2);
            g->first_step = g->least_step = v.step, g->first_bytes = g->least_bytes = v.bytes;
        }
        if (v.bytes < g->least_bytes) g->least_step = v.step, g->least_bytes = v.bytes;
        g->last_step = v.step, g->last_bytes = v.bytes;
        if (i % every == 0 || i + 1 == total) {
            if (g->n_samples == cap) break;
            g->samples[g->n_samples++] = v;
        }
        i++;
    }
    sqlite3_finalize(st);
    if (g->n_samples && g->samples[g->n_samples - 1].step != g->last_step && g->n_samples < cap)
        g->samples[g->n_samples++] = (tpa_step_bytes_t){g->last_step, g->last_bytes};
    return 0;
}

/* The holder's bytes at each closed audit that has it, at the step the audit
 * saw (an exit audit: the last sample's before it). */
static int read_held(sqlite3 *db, tpa_growth_series_t *g) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT CASE WHEN a.step >= 0 THEN a.step ELSE coalesce((SELECT s.step FROM sample s"
                           " WHERE s.ts_ns <= a.begin_ns ORDER BY s.ts_ns DESC, s.rowid DESC LIMIT 1), -1) END,"
                           " sum(l.bytes) FROM audit a JOIN ledger l ON l.audit_id = a.id"
                           " WHERE a.end_ns IS NOT NULL AND l.owner = ?1 AND l.owner_kind IN ('held','autograd')"
                           " GROUP BY a.id ORDER BY a.id",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, g->holder, -1, SQLITE_STATIC);
    size_t cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (g->n_held == cap) {
            cap = cap ? cap * 2 : 16;
            tpa_step_bytes_t *v = realloc(g->held, cap * sizeof *v);
            if (!v) break;
            g->held = v;
        }
        g->held[g->n_held++] = (tpa_step_bytes_t){sqlite3_column_int64(st, 0),
                                                  tpa_sane_bytes(sqlite3_column_int64(st, 1))};
    }
    sqlite3_finalize(st);
    return 0;
}

int tpa_read_growth_series(sqlite3 *db, tpa_report_t *r, size_t run_index) {
    tpa_growth_series_t *g = &r->runs[run_index].growth;
    if (!table_exists(db, "sample")) return 0;
    if (read_samples(db, g)) return -1;
    g->suspected_step = tpa_query_int(db, "SELECT coalesce(min(step), 0) FROM audit WHERE label='growth' AND step >= 0");
    const tpa_finding_t *fastest = NULL;
    for (size_t i = 0; i < r->n_findings; i++) {
        const tpa_finding_t *f = &r->findings[i];
        if (f->run_index == run_index && f->holder_kind && strcmp(f->holder_kind, "object") == 0 && f->holder_path &&
            f->growth_per_step > 0 && (!fastest || f->growth_per_step > fastest->growth_per_step))
            fastest = f;
    }
    if (!fastest || !table_exists(db, "ledger")) return 0;
    g->holder = tpa_strdup(fastest->holder_path);
    return g->holder ? read_held(db, g) : -1;
}
