/* verdict_judge.c - the finding rules' judgement of one audit, inside the
 * shim: the finding queries of rules/findings.c (the static library
 * tpaudit_findings_pic) run on the writer's own connection, and what they
 * find becomes the verdict's lines.  Native stacks are named with dladdr()
 * on this process's own addresses. */
#include <dlfcn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"
#include "frames.h"
#include "verdict.h"

/* The addresses of stack `id`, at most `max`; their count. */
static int stack_ips(sqlite3 *db, int64_t id, uint64_t *ips, int max) {
    sqlite3_stmt *st;
    int n = 0;
    if (sqlite3_prepare_v2(db, "SELECT ips FROM stack WHERE id=?1", -1, &st, NULL) != SQLITE_OK) return 0;
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *blob = sqlite3_column_blob(st, 0);
        for (n = 0; blob && n < max && n < sqlite3_column_bytes(st, 0) / 8; n++) {
            ips[n] = 0;
            for (int b = 7; b >= 0; b--) ips[n] = (ips[n] << 8) | blob[n * 8 + b];
        }
    }
    sqlite3_finalize(st);
    return n;
}

/* A tpa_symbolize_fn: the frames of stack `stack_id`, named by dladdr(). */
static int symbolize_here(sqlite3 *db, int64_t stack_id, tpa_frames_t *out) {
    static uint64_t ips[TPA_MAX_FRAMES]; /* the writer thread's */
    int depth = stack_ips(db, stack_id, ips, TPA_MAX_FRAMES);
    out->n = 0;
    out->v = depth > 0 ? calloc((size_t)depth, sizeof *out->v) : NULL;
    for (int i = 0; out->v && i < depth; i++) {
        tpa_frame_t *frame = &out->v[out->n++];
        Dl_info info;
        frame->address = ips[i];
        if (dladdr((void *)(uintptr_t)ips[i], &info) && info.dli_fname) {
            frame->module = tpa_strdup(info.dli_fname);
            frame->function = tpa_strdup(info.dli_sname);
            frame->address = ips[i] - (uint64_t)(uintptr_t)info.dli_fbase;
        }
    }
    return 0;
}

/* The audit's place for the line: "step 3", "exit" or "audit \"label\"",
 * with the rank when there are several; its begin time and rank. */
struct audit_row {
    char where[320];
    int64_t begin_ns, rank, step;
};

static void read_audit(sqlite3 *db, int64_t audit, struct audit_row *a) {
    sqlite3_stmt *st;
    a->begin_ns = 0;
    a->rank = a->step = -1;
    snprintf(a->where, sizeof a->where, "audit %lld", (long long)audit);
    if (sqlite3_prepare_v2(db, "SELECT label, step, begin_ns, rank, world_size FROM audit WHERE id=?1", -1, &st,
                           NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, audit);
    if (sqlite3_step(st) == SQLITE_ROW) {
        const char *label = (const char *)sqlite3_column_text(st, 0);
        a->step = sqlite3_column_int64(st, 1);
        a->begin_ns = sqlite3_column_int64(st, 2);
        int ranked = sqlite3_column_type(st, 3) != SQLITE_NULL && sqlite3_column_int64(st, 4) > 1;
        a->rank = sqlite3_column_type(st, 3) != SQLITE_NULL ? sqlite3_column_int64(st, 3) : -1;
        char rank[48] = "";
        if (ranked) snprintf(rank, sizeof rank, " (rank %lld)", (long long)a->rank);
        if (a->step >= 0)
            snprintf(a->where, sizeof a->where, "step %lld%s", (long long)a->step, rank);
        else if (label && !strcmp(label, "exit"))
            snprintf(a->where, sizeof a->where, "exit%s", rank);
        else
            snprintf(a->where, sizeof a->where, "audit \"%.200s\"%s", label ? label : "", rank);
    }
    sqlite3_finalize(st);
}

/* "file:line in function", "function (module+0xoffset)" or "module+0xoffset" of the first
 * user frame, as the reports pick it (stack_view.c); "" when there is none. */
static void first_frame(const tpa_frames_t *fr, char *buf, size_t len) {
    buf[0] = 0;
    const tpa_frame_t *f = tpa_first_user_frame(fr);
    if (!f) return;
    if (f->file)
        snprintf(buf, len, "%s:%ld in %s", f->file, f->line, f->function ? f->function : "?");
    else if (f->function)
        snprintf(buf, len, "%s (%s+0x%llx)", f->function, f->module ? f->module : "?", (unsigned long long)f->address);
    else /* a static function: tpaudit report names it from the debug info */
        snprintf(buf, len, "%s+0x%llx", f->module ? f->module : "?", (unsigned long long)f->address);
}

/* Appends `s` with tabs and newlines made spaces, then `end`. */
static void put_field(char *line, size_t cap, size_t *used, const char *s, char end) {
    for (; s && *s && *used + 2 < cap; s++) line[(*used)++] = (*s == '\t' || *s == '\n' || *s == '\r') ? ' ' : *s;
    if (*used + 1 < cap) line[(*used)++] = end;
}

/* One finding's line of the text, kept only when it fits whole. */
static void add_text(struct tpa_verdict_result *out, const tpa_finding_t *f, const char *replaced) {
    char line[4096], bytes[32];
    size_t used = 0;
    snprintf(bytes, sizeof bytes, "%lld", (long long)tpa_sane_bytes(f->retained_bytes));
    const char *fields[] = {f->kind, f->is_error ? "error" : "warning", f->name, bytes, replaced, f->message};
    size_t n = sizeof fields / sizeof *fields;
    for (size_t i = 0; i < n; i++) put_field(line, sizeof line, &used, fields[i], i + 1 < n ? '\t' : '\n');
    if (line[used - 1] != '\n' || out->text_len + used + 1 > sizeof out->text) return;
    memcpy(out->text + out->text_len, line, used);
    out->text_len += used;
    out->text[out->text_len] = 0;
}

static void summarize(const tpa_report_t *r, const struct audit_row *a, struct tpa_verdict_result *out) {
    const tpa_finding_t *first = NULL;
    char first_replaced[1100] = "";
    for (size_t i = 0; i < r->n_findings; i++) {
        const tpa_finding_t *f = &r->findings[i];
        char replaced[1100];
        first_frame(&f->replaced_at, replaced, sizeof replaced);
        out->n_findings++;
        if (f->is_error) {
            out->n_errors++;
            out->retained_bytes = tpa_add_bytes(out->retained_bytes, tpa_sane_bytes(f->retained_bytes));
            if (!first) {
                first = f;
                memcpy(first_replaced, replaced, sizeof replaced);
            }
        }
        add_text(out, f, replaced);
    }
    if (!first) return;
    char more[96] = "", total[32];
    tpa_format_bytes(out->retained_bytes, total, sizeof total);
    if (out->n_errors > 1) snprintf(more, sizeof more, "; %d errors, %s retained at this audit", out->n_errors, total);
    snprintf(out->line, sizeof out->line, "at %s: %s: %s%s%s%s", a->where, first->kind,
             first->message ? first->message : "", first_replaced[0] ? "; replaced at " : "", first_replaced, more);
}

/* The audit saw an optimizer but not the model: its queries called nothing stale. */
static int is_blind(sqlite3 *db, int64_t audit) {
    sqlite3_stmt *st;
    int blind = 0;
    if (sqlite3_prepare_v2(db, "SELECT " TPA_AUDIT_SAW_OPTIMIZER("?1") " AND NOT " TPA_AUDIT_SAW_MODEL("?1"), -1, &st,
                           NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, audit);
        if (sqlite3_step(st) == SQLITE_ROW) blind = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    return blind;
}

int tpa_verdict_judge(sqlite3 *db, int64_t audit, struct tpa_verdict_result *out) {
    out->audit_id = audit;
    out->n_findings = out->n_errors = 0;
    out->blind = 0;
    out->retained_bytes = 0;
    out->text_len = 0;
    out->text[0] = out->line[0] = 0;
    struct audit_row a;
    read_audit(db, audit, &a);
    char why[256];
    /* The generic masters span every audit so far: worked out again for each
     * judged audit, into the connection's temporary database (in memory). */
    if (sqlite3_exec(db, "PRAGMA temp_store=MEMORY;DROP TABLE IF EXISTS temp.generic_master", NULL, NULL, NULL) !=
            SQLITE_OK ||
        tpa_findings_prepare_audit(db, audit, why, sizeof why) != 0)
        return -1;
    tpa_report_t r;
    memset(&r, 0, sizeof r);
    r.symbolize = symbolize_here;
    int rc = tpa_findings_for_db(db, audit, a.begin_ns, a.rank, a.step, TPA_DETAILS_EVENTS, &r);
    sqlite3_exec(db, "DROP TABLE IF EXISTS temp.generic_master", NULL, NULL, NULL);
    if (rc == 0) summarize(&r, &a, out);
    if (rc == 0) out->blind = is_blind(db, audit);
    tpa_report_free(&r);
    return rc;
}
