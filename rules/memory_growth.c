/* memory_growth.c - the rule of memory_growth: memory that one holder keeps
 * grows step over step in the steady state.
 *
 * The probe writes a ledger at each audit (table ledger: the bytes of each
 * owner of the live tensors, each storage counted once), and in a normal
 * run takes extra audits when its per-step samples show live bytes
 * growing.  This rule compares one holder (an owner of kind 'held', a
 * Python object's path, or 'autograd', the graph a tensor keeps) across
 * the steady-state audits up to the audit judged:
 *   - the steady state is every audit after step TPA_GROWTH_WARMUP_STEP
 *     (optimizer state made at step 1, the allocator's cache filling,
 *     library workspaces and compiled graphs all come before), with a
 *     ledger; an exit audit without a step counts at the last step sampled
 *     before it, and of two audits at one step the later counts;
 *   - the holder grows when it held bytes at TPA_GROWTH_MIN_AUDITS
 *     successive audits and they rose at each interval (a holder first
 *     seen later is judged from then, so its rate is not taken from
 *     nothing): one rise alone is a one-time cost (a first eval, an EMA copy
 *     made late), a fall is a bound (a cleared cache), flat is a full
 *     deque(maxlen=...);
 *   - the finding stands however the run went on after it grew: a holder
 *     that later held nothing (freed as its loop or function returned, or
 *     kept only by the frames of the exception that ended the run) still
 *     grew, and the run is judged on it.  It is withdrawn only when a later
 *     audit shows it bounded while steps went on: it held no more there
 *     than its most at an audit since it grew (it stopped growing or
 *     shrank), or nothing, with samples of later steps after it (cleared).
 * Its rate is the rise per step over the rising audits, up to the last of
 * them; below TPA_GROWTH_MIN_RATE it is no finding.  The steady state is
 * that up to the run's judged audit or, when the audits after it saw no
 * optimizer (its training function returned before the exit audit), up to
 * the last of those.
 * The creation line is the newest any audit recorded for the holder. */
#include "memory_growth.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_seen.h"
#include "owned_text.h"

static int table_exists(sqlite3 *db, const char *name) {
    sqlite3_stmt *st;
    int yes = 0;
    if (sqlite3_prepare_v2(db, "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type='table' AND name=?1)", -1, &st,
                           NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) yes = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    return yes;
}

/* The audits with a ledger up to `judged`, in order, each with the step it
 * saw (an exit audit, step -1, the step of the last sample before it; -1
 * when there is none), into *out; their count or -1. */
static int ledger_audits(sqlite3 *db, int64_t judged, tpa_steady_audit_t **out) {
    int samples = table_exists(db, "sample");
    const char *exit_step = samples ? "coalesce((SELECT s.step FROM sample s WHERE s.ts_ns <= a.begin_ns"
                                      " ORDER BY s.ts_ns DESC, s.rowid DESC LIMIT 1), -1)"
                                    : "-1";
    /* the last time the samples' step count began again (the probe's watch restarted: the next test
     * of a pytest session); the audits before it are another run's */
    const char *restart = samples ? "coalesce((SELECT max(ts_ns) FROM (SELECT ts_ns, step, lag(step) OVER"
                                    " (ORDER BY ts_ns, rowid) AS prev FROM sample WHERE ts_ns <= (SELECT begin_ns"
                                    " FROM audit WHERE id = ?1)) WHERE step <= prev), 0)"
                                  : "0";
    char sql[1400];
    snprintf(sql, sizeof sql,
             "SELECT a.id, CASE WHEN a.step >= 0 THEN a.step ELSE %s END, a.begin_ns FROM audit a"
             " WHERE a.id <= ?1 AND (a.end_ns IS NOT NULL OR a.id = ?1) AND a.begin_ns >= %s"
             " AND EXISTS (SELECT 1 FROM ledger l WHERE l.audit_id = a.id) ORDER BY a.id",
             exit_step, restart);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_int64(st, 1, judged);
    size_t n = 0, cap = 0;
    tpa_steady_audit_t *v = NULL;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < 1000000) {
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            tpa_steady_audit_t *grown = realloc(v, cap * sizeof *grown);
            if (!grown) break;
            v = grown;
        }
        v[n++] = (tpa_steady_audit_t){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                                      sqlite3_column_int64(st, 2)};
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        free(v);
        return -1;
    }
    *out = v;
    return (int)n;
}

/* The steady state of the audits that end at `judged`: back from it while
 * the steps do not fall (a fall is a step count that began again: a new
 * optimizer, the next test of a pytest session), those after warm-up, one
 * a step (the later). */
static int steady_audits(sqlite3 *db, int64_t judged, tpa_steady_audit_t **out) {
    tpa_steady_audit_t *v = NULL;
    int n = ledger_audits(db, judged, &v);
    if (n <= 0) {
        free(v);
        return n;
    }
    int start = n - 1, floor = INT32_MAX;
    for (int i = n - 1; i >= 0; i--) {
        if (v[i].step < 0) continue; /* no sample before it: no step to count at */
        if (v[i].step > floor) break;
        floor = (int)(v[i].step < INT32_MAX ? v[i].step : INT32_MAX);
        start = i;
    }
    int m = 0;
    for (int i = start; i < n; i++) {
        if (v[i].step <= TPA_GROWTH_WARMUP_STEP) continue;
        if (m > 0 && v[m - 1].step == v[i].step) m--; /* of two audits at one step the later counts */
        v[m++] = v[i];
    }
    *out = v;
    return m;
}

int tpa_growth_steady_audits(sqlite3 *db, int64_t judged, tpa_steady_audit_t **out) {
    *out = NULL;
    if (!table_exists(db, "ledger")) return 0; /* schema version 1: no ledger, no growth */
    int n = steady_audits(db, judged, out);
    if (n > 0 && (*out)[n - 1].id != judged) n = 0; /* the audit judged is warm-up */
    if (n <= 0) {
        free(*out);
        *out = NULL;
    }
    return n;
}

size_t tpa_growth_rise_start(const int64_t *bytes, size_t n) {
    size_t first = n ? n - 1 : 0;
    while (first > 0 && bytes[first - 1] > 0 && bytes[first - 1] < bytes[first]) first--;
    return first;
}

void tpa_growth_rate(tpa_finding_t *f, const tpa_steady_audit_t *a, size_t first, size_t n, int64_t first_bytes) {
    int64_t steps = a[n - 1].step - a[first].step;
    f->growth_since_step = a[first].step;
    f->growth_per_step = steps > 0 ? (f->held_bytes - first_bytes) / steps : 0;
}

char *tpa_ledger_example(const char *shapes, const char *dtype, const char *device, int with_graph) {
    if (!shapes && !dtype) return NULL;
    char buf[512], shape[256] = "";
    /* the first of the shapes recorded, '[[4,256,50257],[4,256]]': "[4,256,50257]" */
    if (shapes && shapes[0] == '[' && shapes[1] == '[')
        snprintf(shape, sizeof shape, "%.*s", (int)strcspn(shapes + 1, "]") + 1, shapes + 1);
    else if (shapes)
        snprintf(shape, sizeof shape, "%.*s", (int)strcspn(shapes, " ;"), shapes);
    snprintf(buf, sizeof buf, "%s%s%s%s%s%s", shape, *shape && dtype ? " " : "", dtype ? dtype : "",
             device ? " " : "", device ? device : "", with_graph ? ", with grad_fn" : "");
    return tpa_strdup(buf);
}

/* The holder's path as the user wrote it: "__main__.kept" reads "kept". */
static char *user_path(const char *owner) {
    char *s = tpa_strdup(owner ? owner : "?"), *p;
    while (s && (p = strstr(s, "__main__.")) != NULL) memmove(p, p + 9, strlen(p + 9) + 1);
    return s;
}

/* "train.py:18 in main" or "train.py:18:main" lines, the user's line first,
 * into frames in that order. */
static void parse_created_at(const char *text, tpa_frames_t *out) {
    for (const char *line = text; line && *line;) {
        size_t len = strcspn(line, "\n");
        char tmp[1024], *in, *colon;
        snprintf(tmp, sizeof tmp, "%.*s", (int)(len < sizeof tmp ? len : sizeof tmp - 1), line);
        const char *function = NULL;
        if ((in = strstr(tmp, " in ")) != NULL) {
            *in = 0;
            function = in + 4;
        }
        colon = strrchr(tmp, ':');
        if (!function && colon && colon != tmp) { /* "file:line:function" */
            *colon = 0;
            function = colon + 1;
            colon = strrchr(tmp, ':');
        }
        if (colon && colon != tmp) {
            *colon = 0;
            tpa_frame_t *v = realloc(out->v, (out->n + 1) * sizeof *v);
            if (!v) return;
            out->v = v;
            v[out->n++] = (tpa_frame_t){.file = tpa_strdup(tmp), .line = strtol(colon + 1, NULL, 10),
                                        .function = tpa_strdup(function)};
        }
        line += len + (line[len] == '\n');
    }
}

/* The holder's bytes at audit `id` (all devices), 0 when it held none there. */
static int64_t bytes_at(sqlite3_stmt *q, int64_t id, const unsigned char *kind, const unsigned char *owner) {
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_text(q, 2, (const char *)kind, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(q, 3, (const char *)owner, -1, SQLITE_TRANSIENT);
    return sqlite3_step(q) == SQLITE_ROW ? tpa_sane_bytes(sqlite3_column_int64(q, 0)) : 0;
}

/* The newest creation stack any audit up to `audit` recorded for the holder
 * (malloc'd text), or NULL. */
static char *created_at_of(sqlite3 *db, int64_t audit, const unsigned char *kind, const unsigned char *owner) {
    sqlite3_stmt *st;
    char *text = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT created_at FROM ledger WHERE audit_id <= ?1 AND owner_kind = ?2 AND owner = ?3"
                           " AND created_at IS NOT NULL AND created_at <> '' ORDER BY audit_id DESC, bytes DESC LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_int64(st, 1, audit);
    sqlite3_bind_text(st, 2, (const char *)kind, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, (const char *)owner, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW) text = tpa_column_text(st, 0);
    sqlite3_finalize(st);
    return text;
}

/* Candidate row `c` (owner_kind, owner, bytes, tensors, shapes, dtype,
 * device, with_graph, created_at) as a finding grown over audits[first..n). */
static void make_finding(sqlite3 *db, sqlite3_stmt *c, const tpa_kind_t *k, const tpa_steady_audit_t *a, size_t first,
                         size_t n, int64_t first_bytes, int64_t rank, int64_t step, tpa_finding_t *f) {
    memset(f, 0, sizeof *f);
    f->kind = tpa_strdup(k->name);
    f->is_error = k->severity == TPA_SEVERITY_ERROR;
    f->rank = rank;
    f->step = step;
    f->holder_kind = tpa_strdup("object");
    f->holder_path = tpa_column_text(c, 1);
    f->name = user_path(f->holder_path);
    f->held_bytes = tpa_sane_bytes(sqlite3_column_int64(c, 2));
    f->dtype = tpa_column_text(c, 5);
    f->device = tpa_column_text(c, 6);
    f->example = tpa_ledger_example((const char *)sqlite3_column_text(c, 4), f->dtype, f->device,
                                    sqlite3_column_int(c, 7));
    const unsigned char *made = sqlite3_column_text(c, 8);
    if (made && *made) {
        parse_created_at((const char *)made, &f->created_at);
    } else { /* recorded by an earlier audit (the judged one, at exit, records none) */
        char *earlier = created_at_of(db, a[n - 1].id, sqlite3_column_text(c, 0), sqlite3_column_text(c, 1));
        parse_created_at(earlier, &f->created_at);
        free(earlier);
    }
    tpa_growth_rate(f, a, first, n, first_bytes);
}

/* The audit growth is judged at: `audit`, or the last of the closed audits
 * with a ledger that follow it while none of them saw an optimizer. */
static int64_t growth_audit(sqlite3 *db, int64_t audit) {
    sqlite3_stmt *st;
    int64_t id = audit;
    if (sqlite3_prepare_v2(db,
                           "SELECT max(a.id) FROM audit a WHERE a.id > ?1 AND a.end_ns IS NOT NULL"
                           " AND EXISTS (SELECT 1 FROM ledger l WHERE l.audit_id = a.id)"
                           " AND NOT EXISTS (SELECT 1 FROM audit b WHERE b.id > ?1 AND b.id <= a.id"
                           " AND b.end_ns IS NOT NULL AND " TPA_AUDIT_SAW_OPTIMIZER("b.id") ")",
                           -1, &st, NULL) != SQLITE_OK)
        return audit;
    sqlite3_bind_int64(st, 1, audit);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return id;
}

/* Whether findings[from..] of r name the holder `owner` already. */
static int named_since(const tpa_report_t *r, size_t from, const unsigned char *owner) {
    for (size_t i = from; i < r->n_findings; i++)
        if (r->findings[i].holder_path && strcmp(r->findings[i].holder_path, (const char *)owner) == 0) return 1;
    return 0;
}

/* Whether steps went on after audit `a`: a sample of a later step was taken after it began. */
static int steps_went_on(sqlite3_stmt *later, const tpa_steady_audit_t *a) {
    if (!later) return 0;
    sqlite3_reset(later);
    sqlite3_bind_int64(later, 1, a->begin_ns);
    sqlite3_bind_int64(later, 2, a->step);
    return sqlite3_step(later) == SQLITE_ROW && sqlite3_column_int(later, 0);
}

/* Whether the holder, grown up to audit a[end], is shown bounded by a later
 * audit while steps went on: it held no more there than its most at any
 * audit from a[end] on before it (it stopped growing, or shrank), or held
 * nothing there and the loop went on stepping after it (it was cleared).
 * An audit where it held nothing after which no step came (freed as its
 * loop or function returned, or kept only where the walk cannot see: the
 * exit audit after an uncaught exception) bounds nothing. */
static int bounded_after(sqlite3_stmt *q, sqlite3_stmt *later, const tpa_steady_audit_t *a, size_t end, size_t n,
                         const unsigned char *kind, const unsigned char *owner, int64_t at_end) {
    int64_t most = at_end;
    for (size_t i = end + 1; i < n; i++) {
        int64_t b = bytes_at(q, a[i].id, kind, owner);
        if ((b > 0 && b <= most) || (b == 0 && steps_went_on(later, &a[i]))) return 1;
        if (b > most) most = b;
    }
    return 0;
}

/* The growth findings over the steady state a[0..n): each holder whose
 * bytes rose over TPA_GROWTH_MIN_AUDITS audits ending at some a[end] and
 * that no later audit shows bounded, judged at the latest such end (holders
 * named by findings[from..] already left out). */
static int growth_over(sqlite3 *db, const tpa_kind_t *k, const tpa_steady_audit_t *a, size_t n, int64_t rank,
                       int64_t step, tpa_report_t *r, size_t from) {
    sqlite3_stmt *c = NULL, *q = NULL, *went_on = NULL;
    int rc = 0;
    if (table_exists(db, "sample") &&
        sqlite3_prepare_v2(db, "SELECT EXISTS (SELECT 1 FROM sample WHERE ts_ns > ?1 AND step > ?2)", -1, &went_on,
                           NULL) != SQLITE_OK)
        went_on = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT owner_kind, owner, sum(bytes), sum(tensors), max(shapes), max(dtype), max(device),"
                           " max(with_graph), max(created_at) FROM ledger WHERE audit_id=?1"
                           " AND owner_kind IN ('held','autograd') AND owner IS NOT NULL"
                           " GROUP BY owner_kind, owner ORDER BY sum(bytes) DESC, owner",
                           -1, &c, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT coalesce(sum(bytes), 0) FROM ledger WHERE audit_id=?1 AND owner_kind=?2 AND owner=?3",
                           -1, &q, NULL) != SQLITE_OK)
        rc = -1;
    for (size_t end = n; !rc && end-- >= TPA_GROWTH_MIN_AUDITS;) {
        sqlite3_reset(c);
        sqlite3_bind_int64(c, 1, a[end].id);
        while (sqlite3_step(c) == SQLITE_ROW) {
            const unsigned char *kind = sqlite3_column_text(c, 0), *owner = sqlite3_column_text(c, 1);
            if (named_since(r, from, owner)) continue;
            int64_t at_end = tpa_sane_bytes(sqlite3_column_int64(c, 2)), later = at_end, earlier = 0;
            size_t first = end;
            while (first > 0 && (earlier = bytes_at(q, a[first - 1].id, kind, owner)) > 0 && earlier < later) {
                first--;
                later = earlier;
            }
            if (end + 1 - first < TPA_GROWTH_MIN_AUDITS || bounded_after(q, went_on, a, end, n, kind, owner, at_end))
                continue;
            tpa_finding_t f;
            /* a finding whose rise ended before the last audit is that audit's: its step and bytes */
            make_finding(db, c, k, a, first, end + 1, later, rank, end + 1 == n ? step : a[end].step, &f);
            if (f.growth_per_step < TPA_GROWTH_MIN_RATE || tpa_report_add_finding(r, &f)) tpa_finding_free(&f);
        }
    }
    sqlite3_finalize(c);
    sqlite3_finalize(q);
    sqlite3_finalize(went_on);
    return rc;
}

int tpa_growth_findings(sqlite3 *db, const tpa_kind_t *k, int64_t audit, int64_t rank, int64_t step,
                        tpa_report_t *r) {
    /* Over the steady state up to the last audit after the run's judged one
     * (a holder kept to exit), or up to the judged one. */
    int64_t judged = growth_audit(db, audit);
    tpa_steady_audit_t *a = NULL;
    int n = tpa_growth_steady_audits(db, judged, &a);
    int rc = n < 0 ? -1 : 0;
    if (n >= TPA_GROWTH_MIN_AUDITS)
        rc = growth_over(db, k, a, (size_t)n, rank, judged != audit ? a[n - 1].step : step, r, r->n_findings);
    free(a);
    return rc;
}
