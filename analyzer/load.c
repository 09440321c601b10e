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
    v[(*n)++] = tpa_strdup(p);
    return 0;
}

int tpa_collect_paths(int n, char **args, char ***files, size_t *n_files, char *why, size_t why_len) {
    *files = NULL;
    *n_files = 0;
    for (int i = 0; i < n; i++) {
        struct stat sb;
        if (stat(args[i], &sb) != 0) { snprintf(why, why_len, "%s: no such file or directory", args[i]); return -1; }
        if (!S_ISDIR(sb.st_mode)) { add_path(files, n_files, args[i]); continue; }
        DIR *d = opendir(args[i]);
        if (!d) { snprintf(why, why_len, "cannot read directory %s", args[i]); return -1; }
        size_t before = *n_files;
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t len = strlen(e->d_name);
            if (len < 4 || strcmp(e->d_name + len - 3, ".db")) continue;
            char full[4096];
            snprintf(full, sizeof full, "%s/%s", args[i], e->d_name);
            add_path(files, n_files, full);
        }
        closedir(d);
        if (*n_files == before) { snprintf(why, why_len, "%s holds no tpaudit databases (*.db)", args[i]); return -1; }
        qsort(*files + before, *n_files - before, sizeof **files, cmp_str);
    }
    if (!*n_files) { snprintf(why, why_len, "no databases given"); return -1; }
    return 0;
}

static char *text_col(sqlite3_stmt *st, int i) { return tpa_strdup((const char *)sqlite3_column_text(st, i)); }

/* Live bytes over time from alloc rows, downsampled to at most ~512 points. */
static int load_one(const char *file, tpa_report_t *r, char *why, size_t why_len) {
    sqlite3 *db;
    if (tpa_db_open(file, &db, why, why_len)) return -1;
    tpa_run_t *runs = realloc(r->runs, (r->n_runs + 1) * sizeof *runs);
    if (!runs) { sqlite3_close(db); return -1; }
    r->runs = runs;
    tpa_run_t *run = &r->runs[r->n_runs++];
    memset(run, 0, sizeof *run);
    const char *base = strrchr(file, '/');
    run->file = tpa_strdup(base ? base + 1 : file);
    run->headline_step = -1;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT host, pid, rank, world_size, argv, complete, dropped_events + cupti_dropped, cupti, python FROM run",
                           -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
        snprintf(why, why_len, "%s has no run row: not a tpaudit database", file);
        sqlite3_finalize(st);
        sqlite3_close(db);
        return -1;
    }
    run->host = text_col(st, 0);
    run->pid = sqlite3_column_int64(st, 1);
    run->has_rank = sqlite3_column_type(st, 2) != SQLITE_NULL;
    run->rank = run->has_rank ? sqlite3_column_int64(st, 2) : 0;
    run->has_world_size = sqlite3_column_type(st, 3) != SQLITE_NULL;
    run->world_size = sqlite3_column_int64(st, 3);
    run->argv = text_col(st, 4);
    run->complete = sqlite3_column_int(st, 5);
    run->dropped_events = sqlite3_column_int64(st, 6);
    run->cupti = text_col(st, 7);
    run->python = text_col(st, 8);
    sqlite3_finalize(st);

    int64_t audit = -1, begin = 0;
    if (sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM audit WHERE end_ns IS NOT NULL), "
                           "coalesce((SELECT max(a.id) FROM audit a WHERE a.end_ns IS NOT NULL AND EXISTS (SELECT 1 FROM ref r WHERE r.audit_id=a.id AND r.holder_kind='optimizer')),"
                           " (SELECT max(a.id) FROM audit a WHERE a.end_ns IS NOT NULL AND EXISTS (SELECT 1 FROM ref r WHERE r.audit_id=a.id)))", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        run->n_audits = sqlite3_column_int(st, 0);
        if (sqlite3_column_type(st, 1) != SQLITE_NULL) audit = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    if (audit > 0 && sqlite3_prepare_v2(db, "SELECT step, begin_ns FROM audit WHERE id=?1", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, audit);
        if (sqlite3_step(st) == SQLITE_ROW) { run->headline_step = sqlite3_column_int64(st, 0); begin = sqlite3_column_int64(st, 1); }
        sqlite3_finalize(st);
    }
    /* A process that never imported torch (python "idle: ...") or built no
     * optimizer, or a native program without audits, has no ownership to
     * check; one whose probe was switched off, or that built an optimizer and
     * never reached an audit, does. */
    int built_optimizer = 0;
    if (sqlite3_prepare_v2(db, "SELECT EXISTS (SELECT 1 FROM event WHERE kind='optimizer_created')", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        built_optimizer = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    int unaudited = run->n_audits == 0 && run->python &&
                    ((strcmp(run->python, "on") == 0 && built_optimizer) || strncmp(run->python, "off", 3) == 0);
    if (!run->complete || run->dropped_events > 0 || unaudited) {
        char why_off[200];
        snprintf(why_off, sizeof why_off, "no audit recorded (python probe %s)", run->python ? run->python : "?");
        run->inconclusive = 1;
        run->why_inconclusive = tpa_strdup(!run->complete ? "the run did not end cleanly (killed or still running)"
                                           : run->dropped_events > 0 ? "the run lost events"
                                           : strcmp(run->python, "on") == 0 ? "the run never reached an audit point"
                                                                            : why_off);
        r->inconclusive = 1;
    }
    if (tpa_scan_allocations(db, audit > 0 ? begin : INT64_MAX, run)) {
        snprintf(why, why_len, "%s: cannot query allocations: %s", file, sqlite3_errmsg(db));
        sqlite3_close(db);
        return -1;
    }
    /* Stale bytes at every closed audit with references, for the plot. */
    if (sqlite3_prepare_v2(db, "SELECT id, begin_ns, step FROM audit a WHERE end_ns IS NOT NULL ORDER BY id", -1, &st, NULL) == SQLITE_OK) {
        run->marks = calloc((size_t)run->n_audits + 1, sizeof *run->marks);
        while (run->marks && sqlite3_step(st) == SQLITE_ROW && run->n_marks < (size_t)run->n_audits) {
            tpa_audit_mark_t *m = &run->marks[run->n_marks++];
            m->ts_ns = sqlite3_column_int64(st, 1);
            m->step = sqlite3_column_int64(st, 2);
            tpa_report_t scratch;
            memset(&scratch, 0, sizeof scratch);
            if (tpa_findings_for_db(db, sqlite3_column_int64(st, 0), m->ts_ns, -1, m->step, 0, &scratch) == 0)
                for (size_t i = 0; i < scratch.n_findings; i++)
                    if (scratch.findings[i].is_error) m->stale_bytes += scratch.findings[i].retained_bytes;
            tpa_report_free(&scratch);
        }
        sqlite3_finalize(st);
    }
    int rc = 0;
    if (audit > 0) {
        size_t first = r->n_findings;
        rc = tpa_findings_for_db(db, audit, begin, run->has_rank ? run->rank : -1, run->headline_step, 1, r);
        for (size_t i = first; i < r->n_findings; i++) r->findings[i].run_index = r->n_runs - 1;
        if (rc) snprintf(why, why_len, "%s: cannot query: %s", file, sqlite3_errmsg(db));
    }
    sqlite3_close(db);
    return rc;
}

int tpa_analyze(char **files, size_t n_files, tpa_report_t *report, char *why, size_t why_len) {
    memset(report, 0, sizeof *report);
    for (size_t i = 0; i < n_files; i++)
        if (load_one(files[i], report, why, why_len)) return -1;
    return 0;
}
