/* owner_timeline.c - memory by owner over a run, for the HTML report's owner
 * timeline and the memory viewer's export: at each closed audit the ledger's
 * groups of one device (the probe's rows: parameters by module, gradients,
 * optimizer state, stale tensors, holders, the autograd graph, the
 * allocator's cache, unattributed), and between audits the probe's step
 * samples and phase marks (live and reserved bytes), which say how much is
 * live but not who holds it (step_phases.c tells which part of a step made
 * it). */
#include "analyzer.h"
#include "tpaudit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int has_table(sqlite3 *db, const char *name) {
    sqlite3_stmt *st;
    int found = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?1", -1, &st, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

static const char *text(sqlite3_stmt *st, int col) { return (const char *)sqlite3_column_text(st, col); }

/* The device the timeline follows: the CUDA device measured most, else the one measured most. */
static char *main_device(sqlite3 *db) {
    sqlite3_stmt *st;
    char *device = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT device FROM ledger WHERE owner_kind='measured' GROUP BY device"
                           " ORDER BY device LIKE 'cuda%' DESC, max(bytes) DESC, device LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return NULL;
    if (sqlite3_step(st) == SQLITE_ROW && text(st, 0)) device = tpa_strdup(text(st, 0));
    sqlite3_finalize(st);
    return device;
}

static tpa_owner_point_t *new_point(tpa_run_t *run, size_t *cap) {
    if (run->n_owners == *cap) {
        size_t n = *cap ? *cap * 2 : 64;
        tpa_owner_point_t *v = realloc(run->owners, n * sizeof *v);
        if (!v) return NULL;
        run->owners = v;
        *cap = n;
    }
    tpa_owner_point_t *p = &run->owners[run->n_owners++];
    memset(p, 0, sizeof *p);
    p->step = -1;
    p->measured = p->live_bytes = p->reserved_bytes = -1;
    return p;
}

/* A group's owner: the ledger's, and for an autograd group told by module its
 * module too ("autograd graph of __main__.loss, saved for backward in
 * transformer.h.0.mlp"), so each module's activations are a group of their own. */
static char *group_owner(sqlite3_stmt *st) {
    const char *kind = text(st, 1), *owner = text(st, 2), *path = text(st, 3);
    if (!kind || strcmp(kind, "autograd") || !path || strncmp(path, TPAUDIT_SAVED_IN, strlen(TPAUDIT_SAVED_IN)))
        return tpa_strdup(owner);
    size_t n = (owner ? strlen(owner) : 0) + strlen(path) + 3;
    char *both = malloc(n);
    if (both) snprintf(both, n, "%s, %s", owner ? owner : "autograd", path);
    return both;
}

static int add_group(tpa_owner_point_t *p, sqlite3_stmt *st) {
    tpa_owner_group_t *v = realloc(p->groups, (p->n_groups + 1) * sizeof *v);
    if (!v) return -1;
    p->groups = v;
    const char *kind = text(st, 1);
    int by_module = kind && !strcmp(kind, "autograd");
    v[p->n_groups++] = (tpa_owner_group_t){tpa_strdup(kind ? kind : "unattributed"),
                                          group_owner(st),
                                          by_module ? NULL : tpa_strdup(text(st, 3)),
                                          tpa_strdup(text(st, 4)),
                                          tpa_sane_bytes(sqlite3_column_int64(st, 5)),
                                          sqlite3_column_int64(st, 6)};
    return 0;
}

/* The audits, each with its ledger groups on `device` (none when NULL). */
static int read_audits(sqlite3 *db, const char *device, tpa_run_t *run, size_t *cap) {
    sqlite3_stmt *audits, *groups = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT id, label, step, begin_ns FROM audit WHERE end_ns IS NOT NULL ORDER BY begin_ns, id",
                           -1, &audits, NULL) != SQLITE_OK)
        return -1;
    if (device && sqlite3_prepare_v2(db,
                           /* an autograd row's path is the module that made its bytes ("saved for
                            * backward in transformer.h.0.mlp"): a group of its own, by module */
                           "SELECT audit_id, owner_kind, owner, max(path), max(created_at), sum(bytes), sum(tensors)"
                           " FROM ledger WHERE audit_id=?1 AND device=?2"
                           " GROUP BY owner_kind, owner, CASE WHEN owner_kind = 'autograd' THEN path END"
                           " ORDER BY owner_kind, owner, max(path)",
                           -1, &groups, NULL) != SQLITE_OK) {
        sqlite3_finalize(audits);
        return -1;
    }
    int rc = 0;
    while (!rc && sqlite3_step(audits) == SQLITE_ROW) {
        tpa_owner_point_t *p = new_point(run, cap);
        if (!p) {
            rc = -1;
            break;
        }
        p->ts_ns = tpa_clamp_ts(sqlite3_column_int64(audits, 3));
        p->step = sqlite3_column_int64(audits, 2);
        p->label = tpa_strdup(text(audits, 1) ? text(audits, 1) : "?");
        if (!groups) continue;
        sqlite3_reset(groups);
        sqlite3_bind_int64(groups, 1, sqlite3_column_int64(audits, 0));
        sqlite3_bind_text(groups, 2, device, -1, SQLITE_STATIC);
        while (!rc && sqlite3_step(groups) == SQLITE_ROW) {
            if (text(groups, 1) && !strcmp(text(groups, 1), "measured"))
                p->measured = tpa_sane_bytes(sqlite3_column_int64(groups, 5));
            else
                rc = add_group(p, groups);
        }
    }
    sqlite3_finalize(groups);
    sqlite3_finalize(audits);
    return rc;
}

/* The step samples, or (marks) the phase marks: live and reserved bytes at a moment. */
static int read_samples(sqlite3 *db, const char *device, int marks, tpa_run_t *run, size_t *cap) {
    sqlite3_stmt *st;
    const char *sql = marks ? "SELECT step, ts_ns, live_bytes, reserved_bytes, phase, owner FROM phase_mark WHERE device=?1"
                            : "SELECT step, ts_ns, live_bytes, reserved_bytes FROM sample WHERE device=?1";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_text(st, 1, device, -1, SQLITE_STATIC);
    int rc = 0;
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
        tpa_owner_point_t *p = new_point(run, cap);
        if (!p) {
            rc = -1;
            break;
        }
        p->step = sqlite3_column_int64(st, 0);
        p->ts_ns = tpa_clamp_ts(sqlite3_column_int64(st, 1));
        p->live_bytes = tpa_sane_bytes(sqlite3_column_int64(st, 2));
        if (sqlite3_column_type(st, 3) != SQLITE_NULL) p->reserved_bytes = tpa_sane_bytes(sqlite3_column_int64(st, 3));
        if (!marks) continue;
        p->phase = tpa_strdup(text(st, 4) ? text(st, 4) : "?");
        if (text(st, 5)) p->phase_owner = tpa_strdup(text(st, 5));
    }
    sqlite3_finalize(st);
    return rc;
}

/* Time order; at one time an audit after a sample (the sample is taken before the step's audit). */
static int by_time(const void *a, const void *b) {
    const tpa_owner_point_t *x = a, *y = b;
    if (x->ts_ns != y->ts_ns) return x->ts_ns < y->ts_ns ? -1 : 1;
    return (x->label != NULL) - (y->label != NULL);
}

int tpa_read_owner_timeline(sqlite3 *db, tpa_run_t *run) {
    /* version 1 (no ledger, no samples) or no ledger row: the audits alone, on no device */
    char *device = has_table(db, "ledger") ? main_device(db) : NULL;
    size_t cap = 0;
    int rc = read_audits(db, device, run, &cap);
    if (!rc && device && has_table(db, "sample")) rc = read_samples(db, device, 0, run, &cap);
    if (!rc && device && has_table(db, "phase_mark")) rc = read_samples(db, device, 1, run, &cap);
    if (run->n_owners) qsort(run->owners, run->n_owners, sizeof *run->owners, by_time);
    if (!rc) rc = tpa_split_transient(run);
    run->owner_device = device;
    return rc;
}
