/* report_ledger.c - the memory ledger and memory growth as the text and
 * JSON reports and the verdict lines show them: a short table of owners per
 * rank, runs[].ledger in JSON, a memory_growth finding's growth object, and
 * the verdict's words "MEMORY GROWTH: `kept` +196 MiB/step". */
#include "finding_kinds.h"
#include "stack_view.h"
#include "tpa_model.h"

#include <inttypes.h>
#include <string.h>

/* Owners shown in the text table; the rest are summed on one line. */
#define TEXT_LEDGER_ROWS 10

const tpa_finding_t *tpa_top_growth(const tpa_report_t *r, size_t *n_growing) {
    const tpa_finding_t *top = NULL;
    size_t n = 0;
    for (size_t i = 0; i < r->n_findings; i++) {
        const tpa_finding_t *f = &r->findings[i];
        if (!f->is_error || !tpa_finding_grows(f)) continue;
        n++;
        if (!top || f->growth_per_step > top->growth_per_step) top = f;
    }
    if (n_growing) *n_growing = n;
    return top;
}

size_t tpa_count_stale_errors(const tpa_report_t *r) {
    size_t n = 0;
    for (size_t i = 0; i < r->n_findings; i++) n += r->findings[i].is_error && !tpa_finding_grows(&r->findings[i]) && !r->findings[i].oom;
    return n;
}

void tpa_format_growth_verdict(const tpa_report_t *r, char *buf, size_t len) {
    size_t n;
    const tpa_finding_t *top = tpa_top_growth(r, &n);
    buf[0] = 0;
    if (!top) return;
    const tpa_kind_t *k = tpa_kind_named(top->kind);
    char rate[32], more[64] = "";
    tpa_format_bytes(top->growth_per_step, rate, sizeof rate);
    if (n > 1) snprintf(more, sizeof more, " (and %zu more holder%s)", n - 1, n == 2 ? "" : "s");
    snprintf(buf, len, "%s: `%s` +%s/step%s", k && k->verdict ? k->verdict : top->kind, top->name ? top->name : "?",
             rate, more);
}

/* ---- text ---- */

void tpa_put_ledger_text(FILE *out, const tpa_run_t *run) {
    if (!run->has_ledger) return;
    char total[32], bytes[32], step[300] = "exit";
    tpa_format_bytes(run->ledger_total, total, sizeof total);
    if (run->headline_label) /* an audit the program labelled */
        snprintf(step, sizeof step, "audit \"%s\"", tpa_term(run->headline_label));
    else if (run->ledger_step >= 0)
        snprintf(step, sizeof step, "step %" PRId64, run->ledger_step);
    fprintf(out, "      memory ledger at %s: %s measured\n", step, total);
    int64_t rest = 0;
    size_t n_rest = 0;
    for (size_t i = 0; i < run->n_ledger; i++) {
        const tpa_ledger_row_t *row = &run->ledger[i];
        if (i >= TEXT_LEDGER_ROWS && strcmp(row->owner_kind, "unattributed")) {
            rest = tpa_add_bytes(rest, row->bytes);
            n_rest++;
            continue;
        }
        tpa_format_bytes(row->bytes, bytes, sizeof bytes);
        char tensors[32] = "";
        if (row->tensors) snprintf(tensors, sizeof tensors, "%" PRId64 " tensor%s", row->tensors, row->tensors == 1 ? "" : "s");
        fprintf(out, "        %-16s %-36s %10s %-12s %s\n", tpa_term(row->owner_kind), tpa_term(row->owner ? row->owner : "-"),
                bytes, tensors, tpa_term(row->example ? row->example : row->device));
    }
    if (n_rest) {
        tpa_format_bytes(rest, bytes, sizeof bytes);
        fprintf(out, "        ... %zu more owner%s, %s\n", n_rest, n_rest == 1 ? "" : "s", bytes);
    }
}

/* The growth watch's per-step samples in one line, for a run in which
 * growth was suspected or found: their first, least and last values. */
void tpa_put_samples_text(FILE *out, const tpa_run_t *run) {
    const tpa_growth_series_t *g = &run->growth;
    if (!g->n_samples || (!g->n_held && g->suspected_step <= 0)) return;
    char first[32], least[32], last[32];
    tpa_format_bytes(g->first_bytes, first, sizeof first);
    tpa_format_bytes(g->least_bytes, least, sizeof least);
    tpa_format_bytes(g->last_bytes, last, sizeof last);
    int on_cpu = g->device && strncmp(g->device, "cpu", 3) == 0;
    fprintf(out, "      memory each step (%s, %s): first %s at step %" PRId64 ", least %s at step %" PRId64
                 ", last %s at step %" PRId64 "\n",
            on_cpu ? "malloc in use" : "device bytes allocated", tpa_term(g->device ? g->device : "?"), first,
            g->first_step, least, g->least_step, last, g->last_step);
}

/* ---- JSON ---- */

void tpa_put_ledger_json(FILE *out, const tpa_run_t *run) {
    if (!run->has_ledger) {
        fputs(",\"ledger\":null,\"ledger_total\":null", out);
        return;
    }
    fputs(",\"ledger\":[", out);
    for (size_t i = 0; i < run->n_ledger; i++) {
        const tpa_ledger_row_t *row = &run->ledger[i];
        fputs(i ? ",{\"device\":" : "{\"device\":", out);
        tpa_put_json_string_or_null(out, row->device);
        fputs(",\"owner_kind\":", out);
        tpa_put_json_string_or_null(out, row->owner_kind);
        fputs(",\"owner\":", out);
        tpa_put_json_string_or_null(out, row->owner);
        fprintf(out, ",\"bytes\":%" PRId64 ",\"tensors\":%" PRId64 ",\"example\":", row->bytes, row->tensors);
        tpa_put_json_string_or_null(out, row->example);
        fputc('}', out);
    }
    fprintf(out, "],\"ledger_total\":%" PRId64, run->ledger_total);
}

void tpa_put_growth_json(FILE *out, const tpa_finding_t *f) {
    if (!tpa_finding_grows(f)) return;
    fprintf(out, ",\"bytes\":%" PRId64 ",\"growth\":{\"bytes_per_step\":%" PRId64 ",\"since_step\":%" PRId64
                 ",\"example\":",
            f->held_bytes, f->growth_per_step, f->growth_since_step);
    tpa_put_json_string_or_null(out, f->example);
    fputs(",\"created_at\":", out);
    const tpa_frame_t *at = tpa_first_user_frame(&f->created_at);
    if (at && at->file) {
        char line[1200];
        snprintf(line, sizeof line, "%s:%ld in %s", at->file, at->line, at->function ? at->function : "?");
        tpa_put_json_string(out, line);
    } else {
        fputs("null", out);
    }
    fputc('}', out);
}

/* ---- a growth finding in the text report ---- */

void tpa_format_growth_bytes(const tpa_finding_t *f, char *buf, size_t len) {
    char rate[32];
    tpa_format_bytes(f->growth_per_step, rate, sizeof rate);
    snprintf(buf, len, "+%s/step", rate);
}

void tpa_put_growth_text(FILE *out, const tpa_paths_t *paths, const tpa_finding_t *f) {
    char held[32], rate[48];
    tpa_format_bytes(f->held_bytes, held, sizeof held);
    tpa_format_growth_bytes(f, rate, sizeof rate);
    fprintf(out, "      holder: %s, %s at this audit, %s since step %" PRId64 "\n",
            tpa_term(f->holder_path ? f->holder_path : "?"), held, rate, f->growth_since_step);
    if (f->example) fprintf(out, "      keeps: %s\n", tpa_term(f->example));
    if (f->created_at.n && !f->created_at.v[0].file) { /* a library's native stack */
        tpa_put_text_stack(out, paths, "allocated at", &f->created_at);
        return;
    }
    for (size_t i = 0; i < f->created_at.n; i++) { /* as recorded: the user's line first */
        const tpa_frame_t *at = &f->created_at.v[i];
        fprintf(out, "%s%s:%ld in %s\n", i ? "        " : "      created at: ", tpa_term(at->file ? at->file : "?"),
                at->line, tpa_term(at->function ? at->function : "?"));
    }
}
