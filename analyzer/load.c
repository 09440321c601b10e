/* load.c - reads each database: its run row, then (through judge.c) the
 * judged audit, the allocation scan, the audit marks and the headline
 * findings, into one report with all ranks merged. */
#include "findings.h"

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

/* The run row into `run`; -1 when there is none. */
static int read_run_row(sqlite3 *db, tpa_run_t *run) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(
            db,
            "SELECT host, pid, rank, world_size, argv, complete, dropped_events, cupti_dropped, cupti, python FROM run",
            -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return -1;
    }
    run->host = tpa_column_text(st, 0);
    run->pid = sqlite3_column_int64(st, 1);
    if (run->pid < 0 || run->pid > INT32_MAX) run->pid = 0;
    /* A rank outside [0, 2^31) or a world size outside [1, 2^31] is no rank. */
    int64_t rank = sqlite3_column_int64(st, 2), world = sqlite3_column_int64(st, 3);
    run->has_rank = sqlite3_column_type(st, 2) == SQLITE_INTEGER && rank >= 0 && rank < INT32_MAX;
    run->rank = run->has_rank ? rank : 0;
    run->has_world_size = sqlite3_column_type(st, 3) == SQLITE_INTEGER && world >= 1 && world <= INT32_MAX;
    run->world_size = run->has_world_size ? world : 0;
    run->argv = tpa_column_text(st, 4);
    run->complete = sqlite3_column_int64(st, 5) == 1;
    int64_t dropped = sqlite3_column_int64(st, 6), cupti_dropped = sqlite3_column_int64(st, 7);
    run->dropped_events = dropped < 0 || cupti_dropped < 0 ? INT64_MAX : tpa_add_bytes(dropped, cupti_dropped);
    run->cupti = tpa_column_text(st, 8);
    run->python = tpa_column_text(st, 9);
    sqlite3_finalize(st);
    return 0;
}

static int load_one(const char *file, tpa_report_t *r, char *why, size_t why_len) {
    sqlite3 *db;
    if (tpa_db_open(file, &db, why, why_len)) return -1;
    tpa_run_t *runs = realloc(r->runs, (r->n_runs + 1) * sizeof *runs);
    if (!runs) {
        tpa_db_close(db);
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    r->runs = runs;
    size_t run_index = r->n_runs++;
    tpa_run_t *run = &r->runs[run_index];
    memset(run, 0, sizeof *run);
    const char *base = strrchr(file, '/');
    run->file = tpa_strdup(base ? base + 1 : file);
    run->headline_step = -1;
    if (read_run_row(db, run)) {
        snprintf(why, why_len, "%s has no run row: not a tpaudit database", file);
        tpa_db_close(db);
        return -1;
    }
    char sql_why[256];
    if (tpa_findings_prepare(db, sql_why, sizeof sql_why)) {
        snprintf(why, why_len, "%s: cannot query: %s", file, sql_why);
        tpa_db_close(db);
        return -1;
    }
    tpa_judged_audit_t audit = tpa_judge_audit(db, run);
    tpa_judge_inconclusive(db, run, r);
    if (tpa_scan_allocations(db, audit.id ? audit.begin_ns : INT64_MAX, run)) {
        snprintf(why, why_len, "%s: cannot query allocations: %s", file, sqlite3_errmsg(db));
        tpa_db_close(db);
        return -1;
    }
    tpa_judge_marks(db, run);
    int rc = tpa_judge_headline(db, &audit, run_index, r);
    if (rc) snprintf(why, why_len, "%s: cannot query: %s", file, sqlite3_errmsg(db));
    tpa_db_close(db);
    return rc;
}

int tpa_analyze(char **files, size_t n_files, tpa_report_t *report, char *why, size_t why_len) {
    memset(report, 0, sizeof *report);
    for (size_t i = 0; i < n_files; i++)
        if (load_one(files[i], report, why, why_len)) return -1;
    return 0;
}
