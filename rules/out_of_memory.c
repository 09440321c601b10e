/* out_of_memory.c - the rule of the out-of-memory kinds: an allocation
 * that failed for want of device memory (table oom), judged once per
 * process rather than at an audit.
 *
 * Which OOM ended the run: the process's last one, when the process did
 * not exit with status 0 (an error exit, or killed) and made no progress
 * after it (no optimizer-step sample, no step audit begun later).  Every
 * other OOM was caught and the program went on (a batch-size finder): a
 * warning.  Rows of the caching allocator's observer (source 'torch') stand
 * for the PyTorch OOM; the failed cudaMalloc the allocator made before it
 * (source 'cuda') is then a detail, and in a process whose probe was on, a
 * failed CUDA call alone counts only when it ended the run (the allocator
 * frees its cache and retries by itself).
 *
 * Why it ran out (docs/ANALYZER.md, "Out of memory"), in this order:
 *   - growth: a holder grew over the audits up to the OOM and no later one
 *     showed it bounded (its memory_growth finding, judged at the oom
 *     audit), even where the request also failed for fragmentation: what
 *     grew is what filled the device;
 *   - fragmentation: nothing grew, and the allocator had the bytes free,
 *     reserved, but in no one block (reserved_free >= requested >
 *     largest_free);
 *   - other memory: the device's bytes in use outside this process's
 *     allocator (total - free - reserved: other libraries, other processes)
 *     exceed what the allocator holds and would have fit the request;
 *   - the step's own peak: none of these, so the step itself needs more
 *     (activations saved for backward, by the modules that made them where
 *     the ledger tells them; the batch);
 *   a native OOM with no ledger: the allocation (its stack) itself. */
#include "out_of_memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "finding_details.h"
#include "frames.h"
#include "memory_growth.h"
#include "oom_held.h"

/* Caught OOMs listed one by one; the rest are counted in the last. */
#define TPA_OOM_LISTED_CAUGHT 3

static const tpa_kind_t *oom_kind(int error) {
    for (size_t k = 0; k < tpa_n_kinds; k++)
        if (tpa_kinds[k].oom && (tpa_kinds[k].severity == TPA_SEVERITY_ERROR) == error) return &tpa_kinds[k];
    return NULL;
}

static const tpa_kind_t *growth_kind(void) {
    for (size_t k = 0; k < tpa_n_kinds; k++)
        if (tpa_kinds[k].grows) return &tpa_kinds[k];
    return NULL;
}

static int64_t one_int(sqlite3 *db, const char *sql, int64_t a, int64_t fallback) {
    sqlite3_stmt *st;
    int64_t v = fallback;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, a);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
            v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return v;
}

static int has_table(sqlite3 *db, const char *name) {
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='%s' AND ?1=?1", name);
    return one_int(db, sql, 0, 0) > 0;
}

/* One oom row as read. */
typedef struct oom_row {
    int64_t id, ts, seq, device, requested, free_b, total_b, reserved_free, largest_free, audit_id, step, stack_id;
    char *source, *api, *py_stack;
} oom_row_t;

static int64_t col_or(sqlite3_stmt *st, int i, int64_t fallback) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? fallback : sqlite3_column_int64(st, i);
}

static void row_free(oom_row_t *o) {
    free(o->source);
    free(o->api);
    free(o->py_stack);
}

/* The rows that count, oldest first: the observer's when it has any, else
 * the CUDA calls' (only the last one when the probe was on). */
static size_t read_rows(sqlite3 *db, int probe_on, oom_row_t **out) {
    int torch_rows = one_int(db, "SELECT count(*) FROM oom WHERE source='torch' AND ?1=?1", 0, 0) > 0;
    char sql[600];
    snprintf(sql, sizeof sql,
             "SELECT id, ts_ns, seq, coalesce(device,-1), requested, free_bytes, total_bytes, reserved_free,"
             " largest_free, coalesce(audit_id,0), coalesce(step,-1), coalesce(stack_id,0), source, api, py_stack"
             " FROM oom WHERE %s ORDER BY ts_ns, id",
             torch_rows ? "source='torch'" : probe_on ? "id=(SELECT max(id) FROM oom)" : "1");
    sqlite3_stmt *st;
    size_t n = 0, cap = 0;
    oom_row_t *v = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            oom_row_t *g = realloc(v, cap * sizeof *g);
            if (!g) break;
            v = g;
        }
        oom_row_t *o = &v[n++];
        o->id = sqlite3_column_int64(st, 0);
        o->ts = sqlite3_column_int64(st, 1);
        o->seq = sqlite3_column_int64(st, 2);
        o->device = sqlite3_column_int64(st, 3);
        o->requested = tpa_sane_bytes(sqlite3_column_int64(st, 4));
        o->free_b = col_or(st, 5, -1);
        o->total_b = col_or(st, 6, -1);
        o->reserved_free = col_or(st, 7, -1);
        o->largest_free = col_or(st, 8, -1);
        o->audit_id = sqlite3_column_int64(st, 9);
        o->step = sqlite3_column_int64(st, 10);
        o->stack_id = sqlite3_column_int64(st, 11);
        o->source = tpa_column_text(st, 12);
        o->api = tpa_column_text(st, 13);
        o->py_stack = tpa_column_text(st, 14);
    }
    sqlite3_finalize(st);
    *out = v;
    return n;
}

/* The run ended badly (an error exit status or none: killed) and nothing
 * moved after the OOM at `ts`: it ended the run. */
static int ended_the_run(sqlite3 *db, int64_t ts) {
    int64_t status = one_int(db, "SELECT coalesce(exit_status, -1) FROM run WHERE ?1=?1", 0, -1);
    if (status == 0) return 0;
    return one_int(db,
                   "SELECT NOT EXISTS (SELECT 1 FROM sample WHERE ts_ns > ?1)"
                   " AND NOT EXISTS (SELECT 1 FROM audit WHERE label='step' AND begin_ns > ?1)",
                   ts, 0) != 0;
}

/* ---- who held the device at the oom audit ---- */

/* The growing holder at the oom audit (its memory_growth finding), in `g`; 1 found. */
static int growing_holder(sqlite3 *db, int64_t audit, int64_t rank, int64_t step, tpa_finding_t *g) {
    const tpa_kind_t *k = growth_kind();
    tpa_report_t scratch;
    memset(&scratch, 0, sizeof scratch);
    int found = 0;
    if (k && audit > 0 && tpa_growth_findings(db, k, audit, rank, step, &scratch) == 0) {
        size_t top = 0;
        for (size_t i = 1; i < scratch.n_findings; i++)
            if (scratch.findings[i].growth_per_step > scratch.findings[top].growth_per_step) top = i;
        if (scratch.n_findings) {
            *g = scratch.findings[top];
            memset(&scratch.findings[top], 0, sizeof scratch.findings[top]);
            found = 1;
        }
    }
    tpa_report_free(&scratch);
    if (found && !g->created_at.n && g->holder_path) { /* made at: from the latest audit that recorded it */
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db,
                               "SELECT created_at FROM ledger WHERE owner=?1 AND created_at IS NOT NULL"
                               " ORDER BY audit_id DESC LIMIT 1",
                               -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_text(st, 1, g->holder_path, -1, SQLITE_TRANSIENT);
            if (sqlite3_step(st) == SQLITE_ROW) tpa_parse_py_stack((const char *)sqlite3_column_text(st, 0), &g->created_at);
        }
        sqlite3_finalize(st);
    }
    return found;
}

/* The device the ledger rows of the OOM are read on: "cuda:N" when the audit
 * has rows for it, else any (a CPU stand-in). */
static void ledger_device(sqlite3 *db, const oom_row_t *o, char *dev, size_t len) {
    snprintf(dev, len, "cuda:%lld", (long long)(o->device < 0 ? 0 : o->device));
    sqlite3_stmt *st;
    int have = 0;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM ledger WHERE audit_id=?1 AND device=?2", -1, &st, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_int64(st, 1, o->audit_id);
        sqlite3_bind_text(st, 2, dev, -1, SQLITE_TRANSIENT);
        have = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > 0;
    }
    sqlite3_finalize(st);
    if (!have) dev[0] = 0;
}

/* ---- the finding ---- */

/* The process could use total_b: the device's bytes, or its cap under
 * set_per_process_memory_fraction (the observer then gives the cap, below
 * the device's free bytes). */
static const char *limit_words(const oom_row_t *o) {
    return o->free_b >= 0 && o->free_b < o->total_b ? "the device's" : "the process's cap of";
}

static void growth_cause(const oom_row_t *o, const tpa_held_sums_t *s, const tpa_finding_t *growth,
                         tpa_oom_text_t *t) {
    char a[32], b[32];
    const tpa_frame_t *at = tpa_first_user_frame(&growth->created_at);
    int64_t kept = s->grown >= 0 ? s->grown : growth->held_bytes;
    tpa_oom_add(t, "a holder kept growing: `%s` +%s/step since step %lld", growth->name ? growth->name : "?",
                tpa_oom_bytes(growth->growth_per_step, a, sizeof a), (long long)growth->growth_since_step);
    if (at && at->file) tpa_oom_add(t, ", made at %s:%ld", tpa_base_name(at->file), at->line);
    if (kept > 0 && o->total_b > 0)
        tpa_oom_add(t, ", holding %s, %.0f%% of %s %s", tpa_oom_bytes(kept, a, sizeof a), 100.0 * (double)kept / (double)o->total_b,
                    limit_words(o), tpa_oom_bytes(o->total_b, b, sizeof b));
    tpa_oom_add(t, " (its memory_growth finding)");
}

/* What the step's own peak tells the user to do. */
static const char DOES_NOT_FIT[] = "the step does not fit (a smaller batch, activation checkpointing)";

/* The step's own peak: its activations by the modules that made them (the
 * largest group) where the ledger tells them, of its tensors in flight. */
static void step_peak_cause(const tpa_held_sums_t *s, tpa_oom_text_t *t) {
    char a[32];
    int64_t bytes = tpa_add_bytes(s->held, tpa_add_bytes(s->autograd, s->unattributed));
    const char *in_flight = tpa_oom_bytes(bytes, a, sizeof a);
    if (s->activations[0])
        tpa_oom_add(t, "the step's own peak: activations of %s, of the %s its tensors in flight hold, and nothing "
                       "grew; %s",
                    s->activations, in_flight, DOES_NOT_FIT);
    else
        tpa_oom_add(t, "the step's own peak: its tensors in flight (activations, those saved for backward) hold %s "
                       "and nothing grew; %s",
                    in_flight, DOES_NOT_FIT);
}

/* The request would have fit in the allocator's reserved-but-free bytes but in none of its blocks. */
static int fragmented(const oom_row_t *o) {
    return o->reserved_free >= 0 && o->largest_free >= 0 && o->reserved_free >= o->requested &&
           o->largest_free < o->requested;
}

/* The request alone is more than the process could ever use (the device's bytes or its cap). */
static int over_limit(const oom_row_t *o) {
    return o->total_b > 0 && o->requested > o->total_b;
}

/* Why it ran out, the first that holds: a holder that grew, a request over
 * the limit, fragmentation, memory outside the allocator, the step's own
 * peak, the allocation. */
static void choose_cause(const oom_row_t *o, const tpa_held_sums_t *s, const tpa_finding_t *growth, int64_t outside,
                         tpa_oom_t *x) {
    char a[32], b[32], c[32], d[32], e[32];
    tpa_oom_text_t t = {{0}, 0};
    if (growth) {
        x->cause = tpa_strdup("growth");
        growth_cause(o, s, growth, &t);
    } else if (over_limit(o)) {
        x->cause = tpa_strdup("too_large");
        tpa_oom_add(&t, "the request alone, %s, is more than %s %s: it fails whatever the program frees (see its "
                        "stack for the size asked)",
                    tpa_oom_bytes(o->requested, a, sizeof a), limit_words(o), tpa_oom_bytes(o->total_b, b, sizeof b));
    } else if (fragmented(o)) {
        x->cause = tpa_strdup("fragmentation");
        tpa_oom_add(&t, "fragmentation: the allocator had %s reserved but free, %s more than the %s asked, but its "
                        "largest free block is %s, %s short; set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                    tpa_oom_bytes(o->reserved_free, a, sizeof a), tpa_oom_bytes(o->reserved_free - o->requested, b, sizeof b),
                    tpa_oom_bytes(o->requested, c, sizeof c), tpa_oom_bytes(o->largest_free, d, sizeof d),
                    tpa_oom_bytes(o->requested - o->largest_free, e, sizeof e));
    } else if (outside >= 0 && outside > s->measured && outside >= o->requested) {
        x->cause = tpa_strdup("other_memory");
        tpa_oom_add(&t, "memory held outside this process's PyTorch allocator: %s in use on the device by other "
                        "libraries or other processes",
                    tpa_oom_bytes(outside, a, sizeof a));
    } else if (s->has_ledger) {
        x->cause = tpa_strdup("step_peak");
        step_peak_cause(s, &t);
    } else {
        x->cause = tpa_strdup("allocation");
        tpa_oom_add(&t, "the allocation itself: %s asked by %s needs more than the device had free (see its stack)",
                    tpa_oom_bytes(o->requested, a, sizeof a), o->api ? o->api : "the program");
    }
    x->cause_text = tpa_strdup(t.v);
}

static char *verdict_line(const tpa_kind_t *k, const oom_row_t *o, const tpa_run_t *run, const tpa_oom_t *x) {
    char a[32], b[32], c[32], rank[48] = "";
    tpa_oom_text_t t = {{0}, 0};
    if (run->has_rank) snprintf(rank, sizeof rank, " (rank %lld)", (long long)run->rank);
    if (k->verdict) tpa_oom_add(&t, "%s", k->verdict);
    else tpa_oom_add(&t, "out of memory, caught");
    if (o->step >= 0) tpa_oom_add(&t, " at step %lld", (long long)o->step);
    tpa_oom_add(&t, "%s: asked %s", rank, tpa_oom_bytes(o->requested, a, sizeof a));
    if (o->free_b >= 0 && o->total_b >= 0 && o->free_b < o->total_b)
        tpa_oom_add(&t, ", %s free of %s", tpa_oom_bytes(o->free_b, b, sizeof b), tpa_oom_bytes(o->total_b, c, sizeof c));
    else if (o->total_b >= 0) /* set_per_process_memory_fraction: the cap, not the device */
        tpa_oom_add(&t, ", over the process's cap of %s", tpa_oom_bytes(o->total_b, c, sizeof c));
    tpa_oom_add(&t, ".");
    if (x->held && *x->held) tpa_oom_add(&t, " Held: %s.", x->held);
    if (x->outside_bytes > 0) tpa_oom_add(&t, " Outside the allocator: %s.", tpa_oom_bytes(x->outside_bytes, a, sizeof a));
    tpa_oom_add(&t, " Cause: %s.", x->cause_text);
    if (x->count > 1) tpa_oom_add(&t, " (%lld OOMs in this process, %lld caught)", (long long)x->count, (long long)x->caught);
    return tpa_strdup(t.v);
}

static int one_finding(sqlite3 *db, const tpa_kind_t *k, const oom_row_t *o, const tpa_run_t *run, int64_t count,
                       int64_t caught, tpa_symbolize_fn symbolize, tpa_report_t *r) {
    tpa_finding_t f, growth;
    int64_t rank = run->has_rank ? run->rank : -1;
    memset(&f, 0, sizeof f);
    memset(&growth, 0, sizeof growth);
    tpa_oom_t *x = calloc(1, sizeof *x);
    if (!x) return -1;
    int grew = growing_holder(db, o->audit_id, rank, o->step, &growth);
    tpa_held_sums_t sums;
    tpa_oom_text_t held = {{0}, 0};
    char ledger_dev[32] = "";
    int64_t ledger_audit = has_table(db, "ledger") ? o->audit_id : 0;
    if (ledger_audit > 0) ledger_device(db, o, ledger_dev, sizeof ledger_dev);
    tpa_oom_held(db, ledger_audit, ledger_dev, o->largest_free, grew ? &growth : NULL, &sums, &held);
    x->source = tpa_strdup(o->source);
    x->api = tpa_strdup(o->api);
    x->device = o->device;
    x->requested = o->requested;
    x->free_bytes = o->free_b;
    x->total_bytes = o->total_b;
    x->reserved_free = o->reserved_free;
    x->largest_free = o->largest_free;
    x->audit_id = o->audit_id;
    x->count = count;
    x->caught = caught;
    x->outside_bytes = -1;
    if (sums.has_ledger && o->free_b >= 0 && o->total_b >= 0 && o->free_b < o->total_b) {
        int64_t outside = o->total_b - o->free_b - sums.measured;
        x->outside_bytes = outside > 0 ? outside : 0;
    }
    x->held = tpa_strdup(held.v);
    choose_cause(o, &sums, grew ? &growth : NULL, x->outside_bytes, x);
    tpa_parse_py_stack(o->py_stack, &x->py_stack);
    if (symbolize && o->stack_id > 0) symbolize(db, o->stack_id, &x->native_stack);
    char dev[32];
    snprintf(dev, sizeof dev, o->device >= 0 ? "cuda:%lld" : "device", (long long)o->device);
    f.kind = tpa_strdup(k->name);
    f.is_error = k->severity == TPA_SEVERITY_ERROR;
    f.rank = rank;
    f.step = o->step;
    f.key = (uint64_t)o->seq;
    f.holder_kind = tpa_strdup(k->holder_fallback);
    f.name = tpa_strdup(dev);
    f.device = tpa_strdup(dev);
    f.oom = x;
    f.message = verdict_line(k, o, run, x);
    tpa_finding_free(&growth);
    if (tpa_report_add_finding(r, &f)) {
        tpa_finding_free(&f);
        return -1;
    }
    return 0;
}

int tpa_oom_findings(sqlite3 *db, const tpa_run_t *run, tpa_symbolize_fn symbolize, tpa_report_t *r) {
    if (!has_table(db, "oom")) return 0; /* schema version 1 and 2: no OOMs recorded */
    int probe_on = run->python && !strcmp(run->python, "on");
    oom_row_t *rows = NULL;
    size_t n = read_rows(db, probe_on, &rows);
    int rc = 0;
    if (n) {
        int64_t all = one_int(db, "SELECT max(seq) FROM oom WHERE ?1=?1", 0, (int64_t)n);
        int fatal = ended_the_run(db, rows[n - 1].ts);
        if (probe_on && !fatal && rows[n - 1].source && strcmp(rows[n - 1].source, "torch")) n = 0;
        int64_t count = (int64_t)n > all ? (int64_t)n : all, caught = (int64_t)n - fatal;
        if (caught < 0) caught = 0;
        const tpa_kind_t *dead = oom_kind(1), *warn = oom_kind(0);
        if (fatal && dead && n) rc = one_finding(db, dead, &rows[n - 1], run, count, caught, symbolize, r);
        for (size_t i = 0; !rc && warn && i + (size_t)fatal < n && i < TPA_OOM_LISTED_CAUGHT; i++)
            rc = one_finding(db, warn, &rows[i], run, count, caught, symbolize, r);
    }
    for (size_t i = 0; rows && i < n; i++) row_free(&rows[i]);
    free(rows);
    return rc;
}

int tpa_oom_judge_at(sqlite3 *db, tpa_run_t *run, tpa_judged_audit_t *audit) {
    if (!has_table(db, "oom")) return 0;
    int probe_on = run->python && !strcmp(run->python, "on");
    oom_row_t *rows = NULL;
    size_t n = read_rows(db, probe_on, &rows);
    int64_t id = n && rows[n - 1].audit_id > 0 && ended_the_run(db, rows[n - 1].ts) ? rows[n - 1].audit_id : 0;
    for (size_t i = 0; i < n; i++) row_free(&rows[i]);
    free(rows);
    sqlite3_stmt *st;
    int moved = 0;
    if (id && sqlite3_prepare_v2(db, "SELECT step, begin_ns, label FROM audit WHERE id=?1 AND end_ns IS NOT NULL", -1,
                                 &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, id);
        if (sqlite3_step(st) == SQLITE_ROW) {
            audit->id = id;
            audit->begin_ns = sqlite3_column_int64(st, 1);
            run->headline_step = sqlite3_column_int64(st, 0);
            free(run->headline_label);
            run->headline_label = tpa_column_text(st, 2);
            moved = 1;
        }
        sqlite3_finalize(st);
    }
    return moved;
}

void tpa_oom_last_samples(sqlite3 *db, tpa_run_t *run) {
    if (!run->inconclusive || run->complete || !has_table(db, "sample")) return;
    sqlite3_stmt *st;
    tpa_oom_text_t t = {{0}, 0};
    tpa_oom_add(&t, "%s", run->why_inconclusive ? run->why_inconclusive : "the run did not end cleanly");
    if (sqlite3_prepare_v2(db,
                           "SELECT step, device, live_bytes, reserved_bytes FROM sample ORDER BY ts_ns DESC LIMIT 3",
                           -1, &st, NULL) != SQLITE_OK)
        return;
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        char live[32], reserved[32];
        const char *device = (const char *)sqlite3_column_text(st, 1);
        tpa_oom_add(&t, "%s step %lld %s live on %s", n++ ? ";" : "; its last samples (killed by the OOM killer?):",
            (long long)sqlite3_column_int64(st, 0), tpa_oom_bytes(tpa_sane_bytes(sqlite3_column_int64(st, 2)), live, sizeof live),
            device ? device : "?");
        if (sqlite3_column_type(st, 3) != SQLITE_NULL)
            tpa_oom_add(&t, " (%s reserved)", tpa_oom_bytes(tpa_sane_bytes(sqlite3_column_int64(st, 3)), reserved, sizeof reserved));
    }
    sqlite3_finalize(st);
    if (!n) return;
    free(run->why_inconclusive);
    run->why_inconclusive = tpa_strdup(t.v);
}

void tpa_oom_marks(sqlite3 *db, tpa_run_t *run) {
    sqlite3_stmt *st;
    if (!run->n_marks || sqlite3_prepare_v2(db, "SELECT begin_ns FROM audit WHERE label='oom' AND end_ns IS NOT NULL", -1,
                                            &st, NULL) != SQLITE_OK)
        return;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t ts = tpa_clamp_ts(sqlite3_column_int64(st, 0));
        for (size_t i = 0; i < run->n_marks; i++)
            if (run->marks[i].ts_ns == ts) run->marks[i].oom = 1;
    }
    sqlite3_finalize(st);
}
