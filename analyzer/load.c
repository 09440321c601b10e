/* load.c - expands PATH arguments into database files and loads each
 * database's run row, audits, memory-over-time series and findings into
 * one report with all ranks merged. */
#include "analyzer.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

/* with_details 0: kinds and bytes only (no stacks, allocations or messages). */
int tpa_findings_for_db(sqlite3 *db, int64_t audit, int64_t audit_begin, int64_t rank, int64_t step, int with_details,
                        tpa_report_t *r);

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int add_path(char ***files, size_t *n, const char *p) {
    char **v = realloc(*files, (*n + 1) * sizeof *v);
    if (!v) return -1;
    *files = v;
    v[*n] = tpa_strdup(p);
    if (!v[*n]) return -1;
    (*n)++;
    return 0;
}

int tpa_collect_paths(int n, char **args, char ***files, size_t *n_files, char *why, size_t why_len) {
    *files = NULL;
    *n_files = 0;
    for (int i = 0; i < n; i++) {
        struct stat sb;
        if (stat(args[i], &sb) != 0) { snprintf(why, why_len, "%s: no such file or directory", args[i]); return -1; }
        if (!S_ISDIR(sb.st_mode)) {
            if (add_path(files, n_files, args[i])) { snprintf(why, why_len, "out of memory"); return -1; }
            continue;
        }
        DIR *d = opendir(args[i]);
        if (!d) { snprintf(why, why_len, "cannot read directory %s", args[i]); return -1; }
        size_t before = *n_files;
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t len = strlen(e->d_name);
            if (len < 4 || strcmp(e->d_name + len - 3, ".db")) continue;
            char full[4096];
            snprintf(full, sizeof full, "%s/%s", args[i], e->d_name);
            struct stat eb; /* a FIFO or device named *.db in a directory is not a database */
            if (stat(full, &eb) == 0 && !S_ISREG(eb.st_mode)) continue;
            if (add_path(files, n_files, full)) { closedir(d); snprintf(why, why_len, "out of memory"); return -1; }
        }
        closedir(d);
        if (*n_files == before) { snprintf(why, why_len, "%s holds no tpaudit databases (*.db)", args[i]); return -1; }
        qsort(*files + before, *n_files - before, sizeof **files, cmp_str);
    }
    if (!*n_files) { snprintf(why, why_len, "no databases given"); return -1; }
    return 0;
}

static char *text_col(sqlite3_stmt *st, int i) { return tpa_strdup((const char *)sqlite3_column_text(st, i)); }

static void sanitize_findings(tpa_report_t *r, size_t first) {
    for (size_t i = first; i < r->n_findings; i++) {
        tpa_finding_t *f = &r->findings[i];
        f->retained_bytes = tpa_sane_bytes(f->retained_bytes);
        f->state_bytes = tpa_sane_bytes(f->state_bytes);
        f->alloc_bytes = tpa_sane_bytes(f->alloc_bytes);
    }
}

/* One row of a query that returns a single integer (0 when it fails). */
static int64_t query_int(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st;
    int64_t v = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* Stale bytes at every closed audit, for the plot; grows with the rows it
 * reads (never sized by an earlier count). */
static void load_marks(sqlite3 *db, tpa_run_t *run) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT id, begin_ns, step FROM audit a WHERE end_ns IS NOT NULL ORDER BY id", -1, &st, NULL) != SQLITE_OK)
        return;
    size_t cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (run->n_marks == cap) {
            size_t grown = cap ? cap * 2 : 16;
            tpa_audit_mark_t *v = realloc(run->marks, grown * sizeof *v);
            if (!v) break;
            run->marks = v;
            cap = grown;
        }
        tpa_audit_mark_t *m = &run->marks[run->n_marks++];
        m->ts_ns = tpa_clamp_ts(sqlite3_column_int64(st, 1));
        m->step = sqlite3_column_int64(st, 2);
        m->stale_bytes = 0;
        tpa_report_t scratch;
        memset(&scratch, 0, sizeof scratch);
        if (tpa_findings_for_db(db, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), -1, m->step, 0, &scratch) == 0) {
            sanitize_findings(&scratch, 0);
            for (size_t i = 0; i < scratch.n_findings; i++)
                if (scratch.findings[i].is_error) m->stale_bytes = tpa_add_bytes(m->stale_bytes, scratch.findings[i].retained_bytes);
        }
        tpa_report_free(&scratch);
    }
    sqlite3_finalize(st);
}

/* Why a run cannot be judged, or NULL.  A process with no sign of an
 * optimizer (no optimizer_created event, no audit holding optimizer
 * references) has no ownership to check: it is never inconclusive, even
 * killed or with lost events (a launcher, a helper, a tool it ran).  One
 * whose probe was switched off, or went off after an internal error, cannot
 * say so: without an audit that saw an optimizer it is inconclusive.
 * Otherwise: it did not end cleanly, it lost events, or it never closed an
 * audit. */
static const char *inconclusive_reason(sqlite3 *db, const tpa_run_t *run, char *buf, size_t len) {
    int probe_off = run->python && strncmp(run->python, "off", 3) == 0;
    int built_optimizer =
        query_int(db, "SELECT EXISTS (SELECT 1 FROM event WHERE kind='optimizer_created') OR "
                      "EXISTS (SELECT 1 FROM ref WHERE holder_kind='optimizer')") != 0;
    if (!built_optimizer && !probe_off) return NULL;
    if (!run->complete) return "the run did not end cleanly (killed or still running)";
    if (run->dropped_events != 0) return "the run lost events";
    if (probe_off && (run->n_audits == 0 || !built_optimizer)) {
        snprintf(buf, len, "no audit saw an optimizer (python probe %s)", run->python);
        return buf;
    }
    if (run->n_audits > 0) return NULL;
    return "the run never reached an audit point";
}

static int load_one(const char *file, tpa_report_t *r, char *why, size_t why_len) {
    sqlite3 *db;
    if (tpa_db_open(file, &db, why, why_len)) return -1;
    tpa_run_t *runs = realloc(r->runs, (r->n_runs + 1) * sizeof *runs);
    if (!runs) { tpa_db_close(db); snprintf(why, why_len, "out of memory"); return -1; }
    r->runs = runs;
    tpa_run_t *run = &r->runs[r->n_runs++];
    memset(run, 0, sizeof *run);
    const char *base = strrchr(file, '/');
    run->file = tpa_strdup(base ? base + 1 : file);
    run->headline_step = -1;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT host, pid, rank, world_size, argv, complete, dropped_events, cupti_dropped, cupti, python FROM run",
                           -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
        snprintf(why, why_len, "%s has no run row: not a tpaudit database", file);
        sqlite3_finalize(st);
        tpa_db_close(db);
        return -1;
    }
    run->host = text_col(st, 0);
    run->pid = sqlite3_column_int64(st, 1);
    if (run->pid < 0 || run->pid > INT32_MAX) run->pid = 0;
    /* A rank outside [0, 2^31) or a world size outside [1, 2^31] is no rank. */
    int64_t rank = sqlite3_column_int64(st, 2), world = sqlite3_column_int64(st, 3);
    run->has_rank = sqlite3_column_type(st, 2) == SQLITE_INTEGER && rank >= 0 && rank < INT32_MAX;
    run->rank = run->has_rank ? rank : 0;
    run->has_world_size = sqlite3_column_type(st, 3) == SQLITE_INTEGER && world >= 1 && world <= INT32_MAX;
    run->world_size = run->has_world_size ? world : 0;
    run->argv = text_col(st, 4);
    run->complete = sqlite3_column_int64(st, 5) == 1;
    int64_t dropped = sqlite3_column_int64(st, 6), cupti_dropped = sqlite3_column_int64(st, 7);
    run->dropped_events = dropped < 0 || cupti_dropped < 0 ? INT64_MAX : tpa_add_bytes(dropped, cupti_dropped);
    run->cupti = text_col(st, 8);
    run->python = text_col(st, 9);
    sqlite3_finalize(st);

    int64_t audit = -1, begin = 0;
    if (sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM audit WHERE end_ns IS NOT NULL), "
                           "coalesce((SELECT max(a.id) FROM audit a WHERE a.end_ns IS NOT NULL AND EXISTS (SELECT 1 FROM ref r WHERE r.audit_id=a.id AND r.holder_kind='optimizer')),"
                           " (SELECT max(a.id) FROM audit a WHERE a.end_ns IS NOT NULL AND EXISTS (SELECT 1 FROM ref r WHERE r.audit_id=a.id)))", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        int64_t n = sqlite3_column_int64(st, 0);
        run->n_audits = n > INT32_MAX ? INT32_MAX : (int)n;
        if (sqlite3_column_type(st, 1) != SQLITE_NULL) audit = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    if (audit > 0 && sqlite3_prepare_v2(db, "SELECT step, begin_ns FROM audit WHERE id=?1", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, audit);
        if (sqlite3_step(st) == SQLITE_ROW) { run->headline_step = sqlite3_column_int64(st, 0); begin = sqlite3_column_int64(st, 1); }
        sqlite3_finalize(st);
    }
    char why_off[200];
    const char *reason = inconclusive_reason(db, run, why_off, sizeof why_off);
    if (reason) {
        run->inconclusive = 1;
        run->why_inconclusive = tpa_strdup(reason);
        r->inconclusive = 1;
    }
    if (tpa_scan_allocations(db, audit > 0 ? begin : INT64_MAX, run)) {
        snprintf(why, why_len, "%s: cannot query allocations: %s", file, sqlite3_errmsg(db));
        tpa_db_close(db);
        return -1;
    }
    load_marks(db, run);
    int rc = 0;
    if (audit > 0) {
        size_t first = r->n_findings;
        rc = tpa_findings_for_db(db, audit, begin, run->has_rank ? run->rank : -1, run->headline_step, 1, r);
        sanitize_findings(r, first);
        for (size_t i = first; i < r->n_findings; i++) r->findings[i].run_index = r->n_runs - 1;
        if (rc) snprintf(why, why_len, "%s: cannot query: %s", file, sqlite3_errmsg(db));
    }
    tpa_db_close(db);
    return rc;
}

int tpa_analyze(char **files, size_t n_files, tpa_report_t *report, char *why, size_t why_len) {
    memset(report, 0, sizeof *report);
    for (size_t i = 0; i < n_files; i++)
        if (load_one(files[i], report, why, why_len)) return -1;
    return 0;
}

int tpa_load_inputs(int n, char **paths, int json_ok, tpa_report_t *r, char *why, size_t why_len) {
    memset(r, 0, sizeof *r);
    if (json_ok && n == 1 && tpa_is_json_report(paths[0])) return tpa_read_json_report(paths[0], r, why, why_len);
    char **files;
    size_t n_files;
    if (tpa_collect_paths(n, paths, &files, &n_files, why, why_len)) return -1;
    int rc = tpa_analyze(files, n_files, r, why, why_len);
    for (size_t i = 0; i < n_files; i++) free(files[i]);
    free(files);
    return rc;
}
