/* report_text.c - the text report: a summary a person reads in ten seconds
 * (verdict, retained bytes per rank, the findings in one line each), then
 * the details of each finding with its successor and stacks (printed as
 * Python prints a traceback, library frames folded: stack_view.c).  Every stored
 * string goes through tpa_term (no control byte reaches the terminal); a
 * missing rank is written "no rank".  The gate's verdict as text too. */
#include "finding_kinds.h"
#include "stack_view.h"
#include "reports.h"

#include <stdlib.h>
#include <string.h>

/* A stored string for the terminal, or `fallback` when it is missing. */
static const char *T(const char *s, const char *fallback) { return tpa_term(s ? s : fallback); }

static const char *rank_label(int has_rank, int64_t rank, char *buf, size_t len) {
    if (has_rank)
        snprintf(buf, len, "rank %lld", (long long)rank);
    else
        snprintf(buf, len, "no rank");
    return buf;
}

/* With several ranks, what the gate judges: each rank's own bytes, not their sum. */
static void put_most_per_rank(const tpa_report_t *r, FILE *out) {
    tpa_rank_group_t most;
    if (tpa_most_retained_group(r, &most) < 2) return;
    char bytes[32], who[48];
    tpa_format_bytes(most.retained, bytes, sizeof bytes);
    if (most.rank >= 0)
        snprintf(who, sizeof who, "rank %lld", (long long)most.rank);
    else
        snprintf(who, sizeof who, "pid %lld, no rank", (long long)most.pid);
    fprintf(out, "per rank (as the gate judges, each rank alone): at most %s retained on one rank (%s)\n", bytes, who);
}

/* The verdict line and one line per run with its retained bytes. */
static void put_summary(const tpa_report_t *r, FILE *out) {
    size_t errors = 0, warnings = 0;
    int64_t total = 0, state_total = 0;
    for (size_t i = 0; i < r->n_findings; i++) {
        if (r->findings[i].is_error)
            errors++;
        else
            warnings++;
        if (r->findings[i].is_error) total = tpa_add_bytes(total, r->findings[i].retained_bytes);
        state_total = tpa_add_bytes(state_total, r->findings[i].state_bytes);
    }
    char bytes[32], state[96] = "";
    if (state_total > 0) {
        tpa_format_bytes(state_total, bytes, sizeof bytes);
        snprintf(state, sizeof state, " (plus %s of their optimizer state)", bytes);
    }
    tpa_format_bytes(total, bytes, sizeof bytes);
    char runs[160];
    tpa_describe_runs(r, runs, sizeof runs);
    fprintf(out, "tpaudit report: %s, %zu error%s, %zu warning%s, %s retained by stale tensors%s\n", runs, errors,
            errors == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s", bytes, state);
    /* the order of the HTML banner and `run`'s line: errors (stale, growth), inconclusive, warnings, clean */
    char growth[320]; /* "MEMORY GROWTH: `kept` +196 MiB/step" */
    tpa_format_growth_verdict(r, growth, sizeof growth);
    size_t stale = tpa_count_stale_errors(r);
    const char *why = NULL;
    for (size_t i = 0; i < r->n_runs && r->inconclusive && !why; i++)
        if (r->runs[i].inconclusive) why = T(r->runs[i].why_inconclusive, "?");
    const tpa_finding_t *oom = tpa_top_oom(r);
    if (oom) /* the one-screen answer; stale tensors or growth follow on their own line */
        fprintf(out, "verdict: %s\n", T(oom->message, ""));
    if (stale)
        fprintf(out, "verdict: STALE TENSORS - optimizers hold tensors the model replaced%s%s\n", growth[0] ? "; " : "",
                T(growth, ""));
    else if (growth[0])
        fprintf(out, "verdict: %s\n", T(growth, ""));
    else if (oom)
        return;
    else if (r->inconclusive)
        fprintf(out, "verdict: INCONCLUSIVE - %s (gate exits 3)\n", why ? why : "a run cannot be judged");
    else if (warnings)
        fputs("verdict: warnings only\n", out);
    else
        fputs("verdict: clean - every tensor the optimizers hold is a live model parameter\n", out);
    if (total > 0) put_most_per_rank(r, out);
}

/* The helper processes folded under run i, on one line. */
static void put_helpers(const tpa_report_t *r, size_t i, FILE *out) {
    size_t n = 0;
    for (size_t k = 0; k < r->n_runs; k++) {
        if (r->runs[k].helper_of != i + 1) continue;
        fprintf(out, "%s%lld", n++ ? ", " : "      helper processes (no model or optimizer): pid ",
                (long long)r->runs[k].pid);
    }
    if (n) fputc('\n', out);
}

static void put_run(const tpa_report_t *r, size_t i, int64_t retained, int any_helper, FILE *out) {
    const tpa_run_t *run = &r->runs[i];
    char rank[32], bytes[32], step[320];
    if (run->helper_of) return; /* shown under its run */
    tpa_format_bytes(retained, bytes, sizeof bytes);
    if (!run->n_audits)
        snprintf(step, sizeof step, "never audited");
    else if (run->headline_label)
        snprintf(step, sizeof step, "audited at \"%s\"", T(run->headline_label, ""));
    else if (run->headline_step < 0)
        snprintf(step, sizeof step, "audited at exit");
    else
        snprintf(step, sizeof step, "audited step %lld", (long long)run->headline_step);
    fprintf(out, "  %-8s %s pid %lld: %s retained, %s, cupti %s, python %s%s%s\n",
            rank_label(run->has_rank, run->rank, rank, sizeof rank), T(run->host, "?"), (long long)run->pid, bytes,
            step, T(run->cupti, "?"), T(run->python, "?"), run->inconclusive ? "; INCONCLUSIVE: " : "",
            run->inconclusive ? T(run->why_inconclusive, "") : "");
    for (size_t k = 0; k < run->n_by_library && k < 6; k++) {
        tpa_format_bytes(run->by_library[k].bytes, bytes, sizeof bytes);
        fprintf(out, "%s%s %s in %lld",
                k ? ", " : "      device memory by library: ", T(run->by_library[k].library, "?"), bytes,
                (long long)run->by_library[k].allocations);
    }
    if (run->n_by_library) fputs(run->n_by_library > 6 ? ", ...\n" : "\n", out);
    tpa_put_samples_text(out, run);
    tpa_put_ledger_text(out, run);
    tpa_put_peak_text(out, run);
    if (any_helper) put_helpers(r, i, out);
}

static void put_details(const tpa_finding_t *f, size_t number, const char *ranks, const tpa_paths_t *paths, FILE *out) {
    char bytes[32], where[320];
    if (f->label)
        snprintf(where, sizeof where, "audit \"%s\"", T(f->label, ""));
    else
        snprintf(where, sizeof where, "step %lld", (long long)f->step);
    fprintf(out, "  [%zu] %s (%s), %s, %s\n      %s\n", number, T(tpa_kind_label(f->kind), "?"), tpa_severity(f), ranks,
            where, T(f->message, ""));
    if (tpa_finding_grows(f)) {
        tpa_put_growth_text(out, paths, f);
        return;
    }
    if (f->oom) {
        tpa_put_oom_text(out, paths, f);
        return;
    }
    fprintf(out, "      tensor: %s %s local %s %s on %s (%s), grad %s; held at %s %s\n", T(f->name, "(unnamed)"),
            T(f->shape, ""), T(f->local_shape, ""), T(f->dtype, ""), T(f->device, "?"), T(f->type, "?"),
            f->has_grad ? "yes" : "never", T(f->holder_class, ""), T(f->holder_path, ""));
    for (size_t i = 0; i < f->n_aliases; i++) /* its other names, model order */
        fprintf(out, "%s%s%s", i ? ", " : "      also named: ", T(f->aliases[i], ""), i + 1 < f->n_aliases ? "" : "\n");
    if (tpa_finding_is_view(f)) {
        char view[160];
        tpa_format_view(f, view, sizeof view);
        fprintf(out, "      view: %s\n", view);
    }
    if (f->has_successor)
        fprintf(out, "      successor: %s %s local %s: %s\n", T(f->succ_name, ""), T(f->succ_shape, ""),
                T(f->succ_local_shape, ""), T(f->relation, ""));
    if (f->has_allocation) {
        tpa_format_bytes(f->alloc_bytes, bytes, sizeof bytes);
        fprintf(out, "      allocation: 0x%llx, %s\n", (unsigned long long)f->alloc_address, bytes);
    }
    tpa_put_text_stack(out, paths, "created at", &f->created_at);
    tpa_put_text_stack(out, paths, "replaced at", &f->replaced_at);
    for (size_t i = 0; i < f->n_later_replacements; i++) { /* replaced_at is the first */
        char title[320];
        snprintf(title, sizeof title, "replaced again, as %s, at", T(f->later_replacements[i].name, "(unnamed)"));
        tpa_put_text_stack(out, paths, title, &f->later_replacements[i].at);
    }
    tpa_put_text_stack(out, paths, "allocated at", &f->alloc_stack);
}

/* Each run's line, with the retained bytes of its error findings. */
static int put_runs(const tpa_report_t *r, FILE *out) {
    int64_t *retained = calloc(r->n_runs ? r->n_runs : 1, sizeof *retained);
    int any_helper = 0;
    if (!retained) return -1;
    for (size_t j = 0; j < r->n_findings; j++)
        if (r->findings[j].run_index < r->n_runs && r->findings[j].is_error)
            retained[r->findings[j].run_index] =
                tpa_add_bytes(retained[r->findings[j].run_index], r->findings[j].retained_bytes);
    for (size_t i = 0; i < r->n_runs; i++) any_helper |= r->runs[i].helper_of != 0;
    for (size_t i = 0; i < r->n_runs; i++) put_run(r, i, retained[i], any_helper, out);
    free(retained);
    return 0;
}

/* The findings, the same finding on several ranks once ("ranks 0-7",
 * its bytes "each"), then their details (of the group's first finding). */
static int put_findings(const tpa_report_t *r, const tpa_finding_group_t *g, size_t n, FILE *out) {
    char ranks[96], bytes[48];
    fputs("\nfindings:\n", out);
    for (size_t i = 0; i < n; i++) {
        const tpa_finding_t *f = &r->findings[g[i].first];
        tpa_format_group_ranks(r, &g[i], ranks, sizeof ranks);
        if (tpa_finding_grows(f))
            tpa_format_growth_bytes(f, bytes, sizeof bytes - 5);
        else
            tpa_format_bytes(f->retained_bytes, bytes, sizeof bytes);
        if (g[i].n > 1) strcat(bytes, " each");
        fprintf(out, "  %-7s %-8s %-20s %-32s %-14s %s\n", tpa_severity(f), ranks, T(tpa_kind_label(f->kind), "?"),
                T(f->name, "(unnamed)"), T(f->shape, ""), bytes);
    }
    tpa_paths_t paths;
    if (tpa_paths_init(&paths, r)) {
        tpa_paths_free(&paths);
        return -1;
    }
    fputs("\ndetails:\n", out);
    for (size_t i = 0; i < n; i++) {
        tpa_format_group_ranks(r, &g[i], ranks, sizeof ranks);
        put_details(&r->findings[g[i].first], i + 1, ranks, &paths, out);
    }
    tpa_paths_free(&paths);
    return 0;
}

int tpa_render_text(const tpa_report_t *r, FILE *out) {
    put_summary(r, out);
    if (put_runs(r, out)) return -1;
    if (!r->n_findings) return ferror(out) ? -1 : 0;
    tpa_finding_group_t *g;
    size_t n;
    if (tpa_finding_groups(r, &g, &n)) return -1;
    int rc = put_findings(r, g, n, out);
    tpa_finding_groups_free(g, n);
    return rc || ferror(out) ? -1 : 0;
}

int tpa_render_gate_text(const tpa_report_t *r, FILE *out) {
    for (size_t i = 0; i < r->n_rules; i++) {
        const tpa_gate_rule_t *g = &r->rules[i];
        char lim[32], got[32], rank[32];
        if (!strcmp(g->rule, "max-retained") || !strcmp(g->rule, "max-growth") || !strcmp(g->rule, "max-peak")) {
            tpa_format_bytes(g->limit, lim, sizeof lim - 8);
            tpa_format_bytes(g->measured, got, sizeof got - 8);
            if (!strcmp(g->rule, "max-growth")) strcat(lim, "/step"), strcat(got, "/step");
        } else {
            snprintf(lim, sizeof lim, "%lld", (long long)g->limit);
            snprintf(got, sizeof got, "%lld", (long long)g->measured);
        }
        if (g->rank >= 0)
            snprintf(rank, sizeof rank, "rank %lld", (long long)g->rank);
        else if (g->pid)
            snprintf(rank, sizeof rank, "pid %lld (no rank)", (long long)g->pid);
        else
            snprintf(rank, sizeof rank, "all ranks");
        char modules[560] = "", top[600] = "";
        if (g->peak && g->peak->n_peak_modules) { /* max-peak: its largest modules */
            tpa_format_peak_modules(g->peak, TPA_GATE_PEAK_MODULES, modules, sizeof modules);
            snprintf(top, sizeof top, "; top: %s", modules);
        }
        fprintf(out, "gate: %-4s %s on %s: measured %s, limit %s%s%s\n", g->passed ? "ok" : "FAIL", g->rule, rank, got,
                lim, g->passed ? "" : " (over the limit)", top);
    }
    fprintf(out, "gate: %s\n", r->gate_inconclusive ? "inconclusive" : r->gate_passed ? "passed" : "FAILED");
    return ferror(out) ? -1 : 0;
}
