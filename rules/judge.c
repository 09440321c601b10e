/* judge.c - the policy over one database's findings: which audit a run is
 * judged by, when it is inconclusive, the stale bytes of every audit, and
 * the headline findings (those of the judged audit, with details). */
#include "findings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void sanitize_findings(tpa_report_t *r, size_t first) {
    for (size_t i = first; i < r->n_findings; i++) {
        tpa_finding_t *f = &r->findings[i];
        f->retained_bytes = tpa_sane_bytes(f->retained_bytes);
        f->state_bytes = tpa_sane_bytes(f->state_bytes);
        f->alloc_bytes = tpa_sane_bytes(f->alloc_bytes);
    }
}

/* One row of a query that returns a single integer (0 when it fails). */
int64_t tpa_query_int(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st;
    int64_t v = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* Stale bytes at every closed audit, for the plot, and which audits saw an
 * optimizer but not the model (so judged nothing); grows with the rows it
 * reads (never sized by an earlier count). */
void tpa_judge_marks(sqlite3 *db, tpa_run_t *run, int64_t known_audit, int64_t known_bytes) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT id, begin_ns, step, " TPA_AUDIT_SAW_OPTIMIZER("a.id") " AND NOT " TPA_AUDIT_SAW_MODEL(
                               "a.id") ", NOT " TPA_AUDIT_SAW_OPTIMIZER("a.id") " FROM audit a WHERE end_ns IS NOT NULL "
                                       "ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
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
        m->blind = sqlite3_column_int(st, 3); /* judges nothing: its findings queries call nothing stale */
        m->no_optimizer = sqlite3_column_int(st, 4);
        if (sqlite3_column_int64(st, 0) == known_audit) { /* the judged audit: its findings are already read */
            m->stale_bytes = known_bytes;
            continue;
        }
        tpa_report_t scratch;
        memset(&scratch, 0, sizeof scratch);
        if (tpa_findings_for_db(db, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), -1, m->step, 0,
                                &scratch) == 0) {
            sanitize_findings(&scratch, 0);
            for (size_t i = 0; i < scratch.n_findings; i++)
                if (scratch.findings[i].is_error)
                    m->stale_bytes = tpa_add_bytes(m->stale_bytes, scratch.findings[i].retained_bytes);
        }
        tpa_report_free(&scratch);
    }
    sqlite3_finalize(st);
}

static int probe_off(const tpa_run_t *run) { return run->python && strncmp(run->python, "off", 3) == 0; }

/* No probe could say that this process built no optimizer: its Python probe
 * was off or never started, or it is a native process that did not end and
 * closed no audit (killed before its records were committed: they may have
 * died with it). */
int tpa_judge_unvouched(const tpa_run_t *run) {
    int native = !run->python || strcmp(run->python, "n/a") == 0;
    return probe_off(run) || (native && !run->complete && run->n_audits == 0);
}

/* Why a run cannot be judged, or NULL.  A process with no sign of an
 * optimizer (no optimizer_created event, no audit holding optimizer
 * references) has no ownership to check: it is never inconclusive, even
 * killed or with lost events (a launcher, a helper, a tool it ran), unless
 * nothing vouches for that (tpa_judge_unvouched).  One whose probe was
 * switched off, or went off after an internal error, cannot say so: without
 * an audit that saw an optimizer it is inconclusive.  Otherwise: it did not
 * end cleanly, it lost events, it never closed an audit, or no audit that
 * saw an optimizer saw the model too (such an audit calls nothing stale, so
 * it proves nothing either way). */
static const char *inconclusive_reason(sqlite3 *db, const tpa_run_t *run, char *buf, size_t len) {
    int off = probe_off(run);
    int built_optimizer = tpa_query_int(db, "SELECT EXISTS (SELECT 1 FROM event WHERE kind='optimizer_created') OR "
                                        "EXISTS (SELECT 1 FROM ref WHERE holder_kind='optimizer')") != 0;
    if (!built_optimizer && !tpa_judge_unvouched(run)) return NULL;
    if (!built_optimizer && !off)
        return "the process ended before its first audit was committed (killed?): its records may have died with it";
    if (!run->complete) return "the run did not end cleanly (killed or still running)";
    if (run->dropped_events != 0) return "the run lost events";
    if (off && (run->n_audits == 0 || !built_optimizer)) {
        snprintf(buf, len, "no audit saw an optimizer (python probe %s)", run->python);
        return buf;
    }
    if (run->n_audits == 0) return "the run never reached an audit point";
    if (tpa_query_int(db, "SELECT EXISTS (SELECT 1 FROM audit a WHERE a.end_ns IS NOT NULL AND " TPA_AUDIT_SAW_OPTIMIZER(
                          "a.id") ") AND NOT EXISTS (SELECT 1 FROM audit a WHERE a.end_ns IS NOT NULL AND " TPA_AUDIT_SAW_OPTIMIZER("a.id") " AND " TPA_AUDIT_SAW_MODEL("a.id") ")"))
        return "no audit that saw an optimizer saw a model parameter";
    return NULL;
}

void tpa_judge_inconclusive(sqlite3 *db, tpa_run_t *run, tpa_report_t *r) {
    char why_off[200];
    const char *reason = inconclusive_reason(db, run, why_off, sizeof why_off);
    if (!reason) return;
    run->inconclusive = 1;
    run->why_inconclusive = tpa_strdup(reason);
    r->inconclusive = 1;
}

/* The python field's "; unjudged: " list and its "parts off: " list. */
static const char UNJUDGED[] = "; unjudged: ", PARTS_OFF[] = "parts off: ";

void tpa_judge_parts_off(tpa_run_t *run, tpa_report_t *r) {
    const char *unjudged = run->python ? strstr(run->python, UNJUDGED) : NULL;
    if (!unjudged || run->inconclusive) return;
    for (size_t i = 0; i < r->n_findings; i++)
        if (r->findings[i].is_error) return;
    unjudged += sizeof UNJUDGED - 1;
    const char *parts = strstr(unjudged, PARTS_OFF);
    int verdicts = (int)strcspn(unjudged, ";");
    char buf[400];
    snprintf(buf, sizeof buf, "python probe parts off (%s): no clean verdict on %.*s", parts ? parts + sizeof PARTS_OFF - 1 : "?",
             verdicts, unjudged);
    run->inconclusive = 1;
    run->why_inconclusive = tpa_strdup(buf);
    r->inconclusive = 1;
}

tpa_judged_audit_t tpa_judge_audit(sqlite3 *db, tpa_run_t *run) {
    tpa_judged_audit_t a = {-1, 0};
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(
            db,
            "SELECT (SELECT count(*) FROM audit WHERE end_ns IS NOT NULL), "
            "coalesce((SELECT max(a.id) FROM audit a WHERE a.end_ns IS NOT NULL AND " TPA_AUDIT_SAW_OPTIMIZER("a.id")
            " AND " TPA_AUDIT_SAW_MODEL("a.id") "),"
            " (SELECT max(a.id) FROM audit a WHERE a.end_ns IS NOT NULL AND " TPA_AUDIT_SAW_OPTIMIZER("a.id") "),"
            " (SELECT max(a.id) FROM audit a WHERE a.end_ns IS NOT NULL AND EXISTS (SELECT 1 FROM ref r WHERE r.audit_id=a.id)))",
            -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        int64_t n = sqlite3_column_int64(st, 0);
        run->n_audits = n > INT32_MAX ? INT32_MAX : (int)n;
        if (sqlite3_column_type(st, 1) != SQLITE_NULL) a.id = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    if (a.id > 0 &&
        sqlite3_prepare_v2(db, "SELECT step, begin_ns, label FROM audit WHERE id=?1", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, a.id);
        if (sqlite3_step(st) == SQLITE_ROW) {
            run->headline_step = sqlite3_column_int64(st, 0);
            a.begin_ns = sqlite3_column_int64(st, 1);
            /* a label the program gave its audit (tpaudit.audit(label=...)) goes to every report;
             * the probe's own are step, exit and growth (an audit taken when memory grows) */
            const char *label = (const char *)sqlite3_column_text(st, 2);
            if (label && *label && strcmp(label, "step") && strcmp(label, "exit") && strcmp(label, "growth"))
                run->headline_label = tpa_strdup(label);
        }
        sqlite3_finalize(st);
    }
    if (a.id <= 0) a.id = 0;
    return a;
}

int tpa_judge_headline(sqlite3 *db, const tpa_judged_audit_t *audit, int details, size_t run_index, tpa_report_t *r) {
    if (!audit->id) return 0;
    const tpa_run_t *run = &r->runs[run_index];
    size_t first = r->n_findings;
    int rc = tpa_findings_for_db(db, audit->id, audit->begin_ns, run->has_rank ? run->rank : -1, run->headline_step,
                                 details, r);
    sanitize_findings(r, first);
    for (size_t i = first; i < r->n_findings; i++) {
        r->findings[i].run_index = run_index;
        r->findings[i].label = tpa_strdup(run->headline_label);
    }
    return rc;
}
