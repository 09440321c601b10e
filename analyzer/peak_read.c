/* peak_read.c - a run's peak of activations: of its finished audits whose
 * ledger tells saved-for-backward bytes by the deepest module whose forward
 * made them (TPAUDIT_SAVED_IN: rows "saved for backward in <module>" of a
 * graph no holder keeps, and the rows of a graph a holder keeps whose path
 * says it), the one where they add up to the most, with its step, its label and its
 * modules, the most bytes first, and what that audit's ledger counted by
 * owner kind (docs/ANALYZER.md, "The peak of activations"). */
#include <stdlib.h>

#include "analyzer.h"
#include "tpaudit.h"

/* `sql` prepared into *st with ?1 bound to the rows' owner prefix. 0, or -1. */
static int prepare_saved(sqlite3 *db, const char *sql, sqlite3_stmt **st) {
    if (sqlite3_prepare_v2(db, sql, -1, st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_text(*st, 1, TPAUDIT_SAVED_IN, -1, SQLITE_STATIC);
    return 0;
}

/* The module a ledger row of kind autograd tells, where it tells one: its
 * owner's or its path's text after ?1 (a held graph's row). */
#define MODULE_OF_ROW                                                                                               \
    "CASE WHEN substr(owner, 1, length(?1)) = ?1 THEN substr(owner, length(?1) + 1)"                            \
    " WHEN substr(path, 1, length(?1)) = ?1 THEN substr(path, length(?1) + 1) END"

/* The audit with the most saved bytes by module, into run; 0 when none, -1 when the query fails. */
static int64_t peak_audit(sqlite3 *db, tpa_run_t *run) {
    sqlite3_stmt *st;
    int64_t audit = 0;
    if (prepare_saved(db,
                      "SELECT a.id, a.step, a.label, sum(l.bytes) FROM ledger l JOIN audit a ON a.id = l.audit_id"
                      " WHERE a.end_ns IS NOT NULL AND l.owner_kind = 'autograd'"
                      " AND (substr(l.owner, 1, length(?1)) = ?1 OR substr(l.path, 1, length(?1)) = ?1)"
                      " GROUP BY a.id ORDER BY sum(l.bytes) DESC, a.id LIMIT 1",
                      &st))
        return -1;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 3) > 0) {
        audit = sqlite3_column_int64(st, 0);
        run->peak_step = sqlite3_column_int64(st, 1);
        run->peak_label = tpa_strdup((const char *)sqlite3_column_text(st, 2));
        run->peak_bytes = tpa_sane_bytes(sqlite3_column_int64(st, 3));
    }
    sqlite3_finalize(st);
    return audit;
}

/* Owner kinds of a peak's composition (its rows by module: "activations"). */
#define TPA_PEAK_PARTS 16

/* Statement `sql` (?1 the saved rows' prefix, ?2 the audit, ?3 `most`) run:
 * its rows (a name, bytes), at most `most`, into *rows. 0, or -1. */
static int named_bytes(sqlite3 *db, const char *sql, int64_t audit, size_t most, tpa_peak_module_t **rows, size_t *n) {
    sqlite3_stmt *st;
    if (prepare_saved(db, sql, &st)) return -1;
    sqlite3_bind_int64(st, 2, audit);
    sqlite3_bind_int64(st, 3, (int64_t)most);
    *rows = calloc(most, sizeof **rows);
    int rc = *rows ? 0 : -1;
    while (!rc && *n < most && sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        (*rows)[(*n)++] = (tpa_peak_module_t){tpa_strdup(name ? name : ""), tpa_sane_bytes(sqlite3_column_int64(st, 1))};
    }
    sqlite3_finalize(st);
    return rc;
}

/* The measured total of audit `audit` (its rows 'measured', summed over
 * devices) into *bytes, left as it is when it has none. 0, or -1. */
static int measured_total(sqlite3 *db, int64_t audit, int64_t *bytes) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT sum(bytes) FROM ledger WHERE audit_id = ?1 AND owner_kind = 'measured'", -1,
                           &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, audit);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        *bytes = tpa_sane_bytes(sqlite3_column_int64(st, 0));
    sqlite3_finalize(st);
    return 0;
}

/* The modules of audit `audit`, the most bytes first; what its ledger
 * counted by owner kind (the rows by module as activations; the measured
 * total is no owner, so not among them), and that total. 0, or -1. */
static int peak_rows(sqlite3 *db, int64_t audit, tpa_run_t *run) {
    if (named_bytes(db,
                    "SELECT " MODULE_OF_ROW " AS module, sum(bytes) FROM ledger WHERE audit_id = ?2"
                    " AND owner_kind = 'autograd' AND module IS NOT NULL"
                    " GROUP BY module ORDER BY sum(bytes) DESC, module LIMIT ?3",
                    audit, TPA_PEAK_MODULES, &run->peak_modules, &run->n_peak_modules) ||
        named_bytes(db,
                    "SELECT CASE WHEN owner_kind = 'autograd' AND " MODULE_OF_ROW " IS NOT NULL THEN 'activations'"
                    " ELSE owner_kind END AS part, sum(bytes) FROM ledger WHERE audit_id = ?2"
                    " AND owner_kind <> 'measured' GROUP BY part ORDER BY sum(bytes) DESC, part LIMIT ?3",
                    audit, TPA_PEAK_PARTS, &run->peak_parts, &run->n_peak_parts))
        return -1;
    return measured_total(db, audit, &run->peak_measured);
}

int tpa_read_peak(sqlite3 *db, tpa_run_t *run) {
    run->peak_step = -1;
    if (!tpa_has_ledger(db)) return 0; /* schema version 1: no ledger */
    int64_t audit = peak_audit(db, run);
    if (audit <= 0) return (int)audit;
    run->has_peak = 1;
    return peak_rows(db, audit, run);
}
