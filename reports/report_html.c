/*
 * report_html.c - the HTML report: one self-contained file (no script, no
 * external resource) that answers first and explains after. A verdict
 * banner, the findings table, one section per rank with its plots on
 * shared scales, each finding's detail with folded stacks, device memory by
 * library, and last, folded, the processes with nothing to report
 * (launchers). Every stored string goes through html_put (html_escape.c).
 */
#include "finding_kinds.h"
#include "html_page.h"

#include <stdlib.h>
#include <string.h>

typedef struct page {
    const tpa_report_t *r;
    html_paths_t paths;
    html_scale_t scale;
    tpa_finding_group_t *groups; /* the same finding on several ranks, shown once */
    size_t n_groups;
    size_t *order; /* groups (by their first finding): errors first, then by retained bytes */
    size_t *runs;  /* runs to show: ranks ascending, then unranked */
    size_t n_shown;
    size_t *quiet; /* runs with nothing to report, folded at the end */
    size_t n_quiet;
    size_t errors, warnings, audits;
    int64_t retained;
} page_t;

static const tpa_report_t *sort_report;

static const tpa_finding_group_t *sort_groups;

static int cmp_finding(const void *a, const void *b) {
    const tpa_finding_t *x = &sort_report->findings[sort_groups[*(const size_t *)a].first],
                        *y = &sort_report->findings[sort_groups[*(const size_t *)b].first];
    if (x->is_error != y->is_error) return y->is_error - x->is_error;
    if (x->retained_bytes != y->retained_bytes) return x->retained_bytes < y->retained_bytes ? 1 : -1;
    return (*(const size_t *)a > *(const size_t *)b) - (*(const size_t *)a < *(const size_t *)b);
}

static int cmp_run(const void *a, const void *b) {
    const tpa_run_t *x = &sort_report->runs[*(const size_t *)a], *y = &sort_report->runs[*(const size_t *)b];
    if (x->has_rank != y->has_rank) return y->has_rank - x->has_rank;
    int64_t kx = x->has_rank ? x->rank : x->pid, ky = y->has_rank ? y->rank : y->pid;
    return (kx > ky) - (kx < ky);
}

static size_t run_findings(const tpa_report_t *r, size_t run) {
    size_t n = 0;
    for (size_t i = 0; i < r->n_findings; i++) n += r->findings[i].run_index == run;
    return n;
}

static int64_t run_retained(const tpa_report_t *r, size_t run) {
    int64_t sum = 0;
    for (size_t i = 0; i < r->n_findings; i++)
        if (r->findings[i].run_index == run && r->findings[i].is_error && r->findings[i].retained_bytes > 0)
            sum += r->findings[i].retained_bytes;
    return sum;
}

static int page_init(page_t *pg, const tpa_report_t *r) {
    memset(pg, 0, sizeof *pg);
    pg->r = r;
    if (html_paths_init(&pg->paths, r) || html_scale_init(&pg->scale, r)) return -1;
    if (tpa_finding_groups(r, &pg->groups, &pg->n_groups)) return -1;
    pg->order = malloc((pg->n_groups + 1) * sizeof *pg->order);
    pg->runs = malloc((r->n_runs + 1) * sizeof *pg->runs);
    pg->quiet = malloc((r->n_runs + 1) * sizeof *pg->quiet);
    if (!pg->order || !pg->runs || !pg->quiet) return -1;
    for (size_t i = 0; i < pg->n_groups; i++) pg->order[i] = i;
    for (size_t i = 0; i < r->n_findings; i++) {
        if (r->findings[i].is_error) {
            pg->errors++;
            if (r->findings[i].retained_bytes > 0) pg->retained += r->findings[i].retained_bytes;
        } else
            pg->warnings++;
    }
    for (size_t i = 0; i < r->n_runs; i++) {
        const tpa_run_t *run = &r->runs[i];
        pg->audits += (size_t)(run->n_audits > 0 ? run->n_audits : 0);
        int quiet = !run->n_audits && !run->inconclusive && !run->n_points && !run_findings(r, i);
        if (quiet)
            pg->quiet[pg->n_quiet++] = i;
        else
            pg->runs[pg->n_shown++] = i;
    }
    sort_report = r;
    sort_groups = pg->groups;
    qsort(pg->order, pg->n_groups, sizeof *pg->order, cmp_finding);
    qsort(pg->runs, pg->n_shown, sizeof *pg->runs, cmp_run);
    qsort(pg->quiet, pg->n_quiet, sizeof *pg->quiet, cmp_run);
    return 0;
}

static void page_free(page_t *pg) {
    html_paths_free(&pg->paths);
    html_scale_free(&pg->scale);
    tpa_finding_groups_free(pg->groups, pg->n_groups);
    free(pg->order);
    free(pg->runs);
    free(pg->quiet);
}

/* The verdict word and the heading, then the headline finding with where it
 * was replaced (or created). */
static void put_verdict(FILE *out, const page_t *pg) {
    const tpa_report_t *r = pg->r;
    const char *cls = pg->errors        ? "fail"
                      : r->inconclusive ? "inconclusive"
                      : pg->warnings    ? "warn"
                      : !pg->audits     ? "warn"
                                        : "clean";
    const char *word = pg->errors        ? "FAIL"
                       : r->inconclusive ? "INCONCLUSIVE"
                       : pg->warnings    ? "WARN"
                       : !pg->audits     ? "NO AUDIT"
                                         : "CLEAN";
    if (r->has_gate) {
        cls = r->gate_passed ? "clean" : "fail";
        word = r->gate_passed ? "PASS" : "FAIL";
    }
    fprintf(out, "<header class=\"banner %s\" id=\"verdict\"><div class=\"verdict\">%s</div><div>\n<h1>", cls, word);
    char growth[320]; /* "MEMORY GROWTH: `kept` +196 MiB/step" */
    tpa_format_growth_verdict(r, growth, sizeof growth);
    const tpa_finding_t *oom = tpa_top_oom(r);
    if (oom) {
        html_fmt(out, "OUT OF MEMORY: %s</h1>\n", oom->oom->cause_text ? oom->oom->cause_text : "?");
    } else if (growth[0] && !tpa_count_stale_errors(r)) {
        html_fmt(out, "%s</h1>\n", growth);
    } else if (r->n_findings) {
        fprintf(out, "%zu finding%s: ", r->n_findings, r->n_findings == 1 ? "" : "s");
        html_put_bytes(out, pg->retained);
        html_fmt(out, " retained by stale tensors%s%s</h1>\n", growth[0] ? "; " : "", growth);
    } else if (r->inconclusive) {
        fputs("No findings, but inconclusive: a process cannot be judged</h1>\n", out);
    } else if (pg->audits) {
        fputs("No findings: every tensor the optimizers hold is a live model parameter</h1>\n", out);
    } else {
        fputs("No process made an audit: nothing was checked</h1>\n", out);
    }
    if (!r->n_findings) return;
    const tpa_finding_t *top = oom ? oom : &r->findings[pg->groups[pg->order[0]].first];
    fputs("<p id=\"headline\">", out);
    html_put(out, top->message);
    const tpa_frame_t *at = html_first_user_frame(top->replaced_at.n ? &top->replaced_at : &top->created_at);
    if (at) {
        fputs(top->replaced_at.n ? " &mdash; replaced at " : " &mdash; created at ", out);
        html_put_frame(out, &pg->paths, at);
    }
    fputs("</p>\n", out);
}

/* The gate's rules, or what a strict gate would say. */
static void put_gate_line(FILE *out, const page_t *pg) {
    const tpa_report_t *r = pg->r;
    fputs("<p class=\"gate\">", out);
    if (r->has_gate) {
        for (size_t i = 0; i < r->n_rules; i++) {
            const tpa_gate_rule_t *g = &r->rules[i];
            fprintf(out, "%s%s ", i ? "; " : "gate: ", g->passed ? "ok" : "<b>FAIL</b>");
            html_put(out, g->rule);
        }
    } else if (r->inconclusive && !pg->errors) {
        fputs("<b>tpaudit gate</b> exits 3 (inconclusive) unless --allow-incomplete", out);
    } else {
        fprintf(out, "A strict gate (<code>tpaudit gate --max-retained 0 --max-findings 0</code>) %s",
                pg->errors ? "<b>fails: exit 1</b>" : "passes: exit 0");
    }
    fputs("</p>\n", out);
}

/* Counts of findings, processes, ranks and audits, then why each
 * inconclusive run is. */
static void put_banner_facts(FILE *out, const page_t *pg) {
    const tpa_report_t *r = pg->r;
    size_t inconclusive = 0;
    char runs[160];
    for (size_t i = 0; i < r->n_runs; i++) inconclusive += r->runs[i].inconclusive;
    tpa_describe_runs(r, runs, sizeof runs);
    fprintf(out, "<p class=\"facts\">%zu error%s, %zu warning%s &middot; %s", pg->errors, pg->errors == 1 ? "" : "s",
            pg->warnings, pg->warnings == 1 ? "" : "s", runs);
    tpa_rank_group_t most;
    if (pg->retained > 0 && tpa_most_retained_group(r, &most) > 1) { /* the gate judges each rank alone */
        fputs(" &middot; at most ", out);
        html_put_bytes(out, most.retained);
        fputs(" on one rank (what the gate judges)", out);
    }
    fprintf(out, " &middot; %zu audit%s &middot; %zu inconclusive run%s", pg->audits, pg->audits == 1 ? "" : "s",
            inconclusive, inconclusive == 1 ? "" : "s");
    if (pg->paths.root) {
        fputs(" &middot; paths relative to <code>", out);
        html_put(out, pg->paths.root);
        fputs("</code>", out);
    }
    fputs("</p>\n", out);
    if (!inconclusive) return;
    fputs("<ul class=\"inconclusive-list\">\n", out);
    for (size_t i = 0; i < r->n_runs; i++) {
        if (!r->runs[i].inconclusive) continue;
        fputs("<li><b>", out);
        html_put_run_name(out, &r->runs[i]);
        fputs("</b> is inconclusive: ", out);
        html_put(out, r->runs[i].why_inconclusive ? r->runs[i].why_inconclusive : "incomplete");
        fputs("</li>\n", out);
    }
    fputs("</ul>\n", out);
}

static void put_banner(FILE *out, const page_t *pg) {
    put_verdict(out, pg);
    put_gate_line(out, pg);
    put_banner_facts(out, pg);
    fputs(
        "</div></header>\n<nav><a href=\"#findings\">Findings</a><a href=\"#ranks\">Ranks</a><a href=\"#details\">Details</a>"
        "<a href=\"#memory\">Memory by library</a>",
        out);
    if (pg->n_quiet) fputs("<a href=\"#quiet\">Other processes</a>", out);
    fputs("</nav>\n", out);
}

/* Where a group of findings is: its ranks ("ranks 0-7"), or its process. */
static void put_rank_cell(FILE *out, const page_t *pg, const tpa_finding_group_t *g) {
    const tpa_finding_t *f = &pg->r->findings[g->first];
    char ranks[96];
    tpa_format_group_ranks(pg->r, g, ranks, sizeof ranks);
    if (g->n > 1)
        html_put(out, ranks);
    else if (f->rank >= 0)
        fprintf(out, "rank %lld", (long long)f->rank);
    else if (f->run_index < pg->r->n_runs)
        html_put_run_name(out, &pg->r->runs[f->run_index]);
    else
        fputs("?", out);
}

/* The tensor's other names, model order, after its name: " also a, b". */
static void put_aliases(FILE *out, const tpa_finding_t *f) {
    for (size_t i = 0; i < f->n_aliases; i++) {
        fputs(i ? ", " : " <small class=\"aliases\">also ", out);
        html_put(out, f->aliases[i]);
    }
    if (f->n_aliases) fputs("</small>", out);
}

/* Retained bytes, or "+196.0 MiB/step" for a finding that grows. */
static void put_bytes_or_rate(FILE *out, const tpa_finding_t *f) {
    char rate[48];
    if (!tpa_finding_grows(f)) {
        html_put_bytes(out, f->retained_bytes);
        return;
    }
    tpa_format_growth_bytes(f, rate, sizeof rate);
    html_put(out, rate);
}

static void put_findings_table(FILE *out, const page_t *pg) {
    const tpa_report_t *r = pg->r;
    fputs("<h2 id=\"findings\">Findings</h2>\n", out);
    if (!r->n_findings) {
        fprintf(out, "<p class=\"note\">None in %zu audit%s.</p>\n", pg->audits, pg->audits == 1 ? "" : "s");
        return;
    }
    fputs(
        "<table id=\"findings-table\"><colgroup><col style=\"width:2.5%\"><col style=\"width:6%\"><col style=\"width:6.5%\">"
        "<col style=\"width:10.5%\"><col style=\"width:14%\"><col style=\"width:6.5%\"><col style=\"width:14%\">"
        "<col style=\"width:14%\"><col style=\"width:26%\"></colgroup>\n<thead><tr><th>#</th><th>severity</th><th>where</th>"
        "<th>kind</th><th>tensor</th><th class=\"num\">retained</th><th>held by</th><th>replaced at</th><th>message</th></tr>"
        "</thead><tbody>\n",
        out);
    for (size_t i = 0; i < pg->n_groups; i++) {
        const tpa_finding_group_t *g = &pg->groups[pg->order[i]];
        const tpa_finding_t *f = &r->findings[g->first];
        fprintf(out, "<tr><td><a href=\"#f%zu\">%zu</a></td><td><span class=\"sev %s\">%s</span>%s</td><td>", i + 1,
                i + 1, tpa_severity(f), tpa_severity(f), f->is_new ? " <span class=\"new\">new</span>" : "");
        put_rank_cell(out, pg, g);
        html_fmt(out, "</td><td>%s</td><td><span class=\"tensor\">%s</span>", tpa_kind_label(f->kind),
                 f->name ? f->name : "(unnamed)");
        put_aliases(out, f);
        html_fmt(out, " <code>%s</code></td><td class=\"num\">", f->shape);
        put_bytes_or_rate(out, f);
        if (g->n > 1) fputs("<br><small>each</small>", out); /* the column is narrow and does not wrap */
        html_fmt(out, "</td><td>%s <code>%s</code></td><td>", f->holder_class, f->holder_path);
        const tpa_frame_t *at = html_first_user_frame(f->replaced_at.n ? &f->replaced_at : &f->created_at);
        if (at) {
            if (!f->replaced_at.n) fputs("(created) ", out);
            html_put_frame(out, &pg->paths, at);
        }
        fputs("</td><td>", out);
        html_put(out, f->message);
        fputs("</td></tr>\n", out);
    }
    fputs("</tbody></table>\n", out);
}

static void put_fact(FILE *out, const char *term) { fprintf(out, "<dt>%s</dt><dd>", term); }

/* The replacements after the first (replaced_at), each a stack. */
static void put_later_replacements(FILE *out, const page_t *pg, const tpa_finding_t *f) {
    for (size_t i = 0; i < f->n_later_replacements; i++) {
        char title[640];
        const char *name = f->later_replacements[i].name;
        snprintf(title, sizeof title, "replaced again, as %s, at", name ? name : "(unnamed)");
        html_put_stack(out, &pg->paths, title, &f->later_replacements[i].at);
    }
}

static void put_finding_detail(FILE *out, const page_t *pg, size_t number, const tpa_finding_group_t *g) {
    const tpa_finding_t *f = &pg->r->findings[g->first];
    fprintf(out, "<article class=\"finding %s\" id=\"f%zu\"><h3>%zu. <span class=\"sev %s\">%s</span> ",
            tpa_severity(f), number, number, tpa_severity(f), tpa_severity(f));
    html_fmt(out, "%s &middot; <span class=\"tensor\">%s</span> <code>%s</code> &middot; ", tpa_kind_label(f->kind),
             f->name, f->shape);
    put_bytes_or_rate(out, f);
    fputs(g->n > 1 ? " each &middot; " : " &middot; ", out);
    put_rank_cell(out, pg, g);
    html_fmt(out, "</h3>\n<p>%s</p>\n<dl>", f->message);
    html_fmt(out, "<dt>tensor</dt><dd>%s <code>%s</code>, local <code>%s</code> %s on %s (%s), grad %s</dd>\n", f->name,
             f->shape, f->local_shape, f->dtype, f->device, f->type, f->has_grad ? "yes" : "never");
    if (f->n_aliases) {
        put_fact(out, "also named");
        for (size_t i = 0; i < f->n_aliases; i++) {
            if (i) fputs(", ", out);
            html_put(out, f->aliases[i]);
        }
        fputs("</dd>\n", out);
    }
    if (tpa_finding_is_view(f)) {
        char view[160];
        tpa_format_view(f, view, sizeof view);
        put_fact(out, "view");
        html_put(out, view);
        fputs("</dd>\n", out);
    }
    html_fmt(out, "<dt>held by</dt><dd>%s %s <code>%s</code></dd>\n", f->holder_kind, f->holder_class, f->holder_path);
    if (f->has_successor)
        html_fmt(out, "<dt>successor</dt><dd>%s <code>%s</code>: %s</dd>\n", f->succ_name, f->succ_shape, f->relation);
    if (f->state_bytes > 0) {
        put_fact(out, "optimizer state");
        html_put_bytes(out, f->state_bytes);
        fputs(" kept for it as well</dd>\n", out);
    }
    put_fact(out, f->label ? "audit" : "audit step");
    if (f->label)
        html_fmt(out, "&ldquo;%s&rdquo;", f->label);
    else if (f->step < 0)
        fputs("exit", out);
    else
        fprintf(out, "%lld", (long long)f->step);
    fputs("</dd>\n", out);
    if (f->has_allocation) {
        put_fact(out, "allocation");
        html_put_bytes(out, f->alloc_bytes);
        fprintf(out, " at 0x%llx</dd>\n", (unsigned long long)f->alloc_address);
    }
    fputs("</dl>\n<div class=\"stacks\">\n", out);
    html_put_stack(out, &pg->paths, "replaced at", &f->replaced_at);
    put_later_replacements(out, pg, f);
    html_put_stack(out, &pg->paths, "created at", &f->created_at);
    html_put_stack(out, &pg->paths, "allocated at", &f->alloc_stack);
    fputs("</div></article>\n", out);
}

static void put_run_facts(FILE *out, const page_t *pg, size_t index) {
    const tpa_run_t *run = &pg->r->runs[index];
    fputs("<p class=\"facts\"><code>", out);
    html_put_argv(out, run->argv);
    html_fmt(out, "</code><br>host %s", run->host);
    fprintf(out, ", pid %lld", (long long)run->pid);
    if (run->has_world_size) fprintf(out, ", world size %lld", (long long)run->world_size);
    fprintf(out, " &middot; %d audit%s", run->n_audits, run->n_audits == 1 ? "" : "s");
    if (run->n_audits) {
        if (run->headline_label)
            html_fmt(out, ", judged at audit &ldquo;%s&rdquo;", run->headline_label);
        else if (run->headline_step < 0)
            fputs(", judged at exit", out);
        else
            fprintf(out, ", judged at step %lld", (long long)run->headline_step);
    }
    fputs(" &middot; ", out);
    html_put_bytes(out, run_retained(pg->r, index));
    fprintf(out, " retained, %zu finding%s &middot; CUPTI ", run_findings(pg->r, index),
            run_findings(pg->r, index) == 1 ? "" : "s");
    html_put(out, run->cupti);
    fputs(" &middot; python ", out);
    html_put(out, run->python);
    if (run->dropped_events)
        fprintf(out, " &middot; <span class=\"badge bad\">%lld events dropped</span>", (long long)run->dropped_events);
    if (!run->complete) fputs(" &middot; <span class=\"badge bad\">did not end cleanly</span>", out);
    if (run->inconclusive) {
        fputs(" &middot; <span class=\"badge bad\">inconclusive: ", out);
        html_put(out, run->why_inconclusive);
        fputs("</span>", out);
    }
    fputs("</p>\n", out);
}

static void put_ranks(FILE *out, const page_t *pg) {
    fputs("<h2 id=\"ranks\">Ranks</h2>\n", out);
    if (pg->n_shown > 1)
        fputs("<p class=\"note\">Every rank's plots share one time range and one byte scale.</p>\n", out);
    fputs("<div class=\"ranks\">\n", out);
    for (size_t i = 0; i < pg->n_shown; i++) {
        const tpa_run_t *run = &pg->r->runs[pg->runs[i]];
        fprintf(out, "<section class=\"rank%s\" id=\"run-%zu\"><h3>", run->n_points ? " wide" : "", pg->runs[i]);
        html_put_run_name(out, run);
        fputs("</h3>\n", out);
        put_run_facts(out, pg, pg->runs[i]);
        fputs("<div class=\"plots\">\n", out);
        html_put_memory_plot(out, &pg->scale, run);
        html_put_growth_plot(out, run);
        if (!html_growth_without_stale(run)) html_put_stale_plot(out, &pg->scale, run);
        fputs("</div>\n", out);
        html_put_owner_timeline(out, pg->r, pg->runs[i]);
        html_put_ledger(out, run);
        html_put_peak(out, run);
        if (!run->n_points && !run->growth.n_samples) {
            fputs("<p class=\"note\">No device memory over time: no allocation records (CUPTI ", out);
            html_put(out, run->cupti);
            fputs(").</p>\n", out);
        }
        if (!run->n_marks) fputs("<p class=\"note\">No closed audit: no stale bytes to plot.</p>\n", out);
        fputs("</section>\n", out);
    }
    fputs("</div>\n", out);
}

static void put_quiet(FILE *out, const page_t *pg) {
    if (!pg->n_quiet) return;
    fprintf(
        out,
        "<details id=\"quiet\"><summary>%zu process%s with nothing to report (launchers, helpers: no audit, no findings)"
        "</summary>\n<table><thead><tr><th>process</th><th>command</th><th>python</th><th>CUPTI</th></tr></thead><tbody>\n",
        pg->n_quiet, pg->n_quiet == 1 ? "" : "es");
    for (size_t i = 0; i < pg->n_quiet; i++) {
        const tpa_run_t *run = &pg->r->runs[pg->quiet[i]];
        fputs("<tr><td>", out);
        html_put_run_name(out, run);
        html_fmt(out, " on %s</td><td><code>", run->host);
        html_put_argv(out, run->argv);
        html_fmt(out, "</code></td><td>%s</td><td>%s</td></tr>\n", run->python, run->cupti);
    }
    fputs("</tbody></table></details>\n", out);
}

int tpa_render_html(const tpa_report_t *r, FILE *out) {
    page_t pg;
    if (page_init(&pg, r)) {
        page_free(&pg);
        return -1;
    }
    fprintf(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>tpaudit: %s</title>\n<style>\n%s</style>"
        "</head><body>\n",
        pg.errors         ? "FAIL"
        : r->inconclusive ? "INCONCLUSIVE"
        : r->n_findings   ? "WARN"
                          : "clean",
        html_stylesheet);
    put_banner(out, &pg);
    put_findings_table(out, &pg);
    put_ranks(out, &pg);
    if (r->n_findings) {
        fputs("<h2 id=\"details\">Details</h2>\n", out);
        for (size_t i = 0; i < pg.n_groups; i++) put_finding_detail(out, &pg, i + 1, &pg.groups[pg.order[i]]);
    }
    int rc = html_put_memory_by_library(out, r, pg.runs, pg.n_shown);
    put_quiet(out, &pg);
    fputs("<footer>tpaudit report of ", out);
    for (size_t i = 0; i < r->n_runs; i++) {
        if (i) fputs(", ", out);
        html_put(out, r->runs[i].file);
    }
    fputs("</footer>\n</body></html>\n", out);
    page_free(&pg);
    return rc || ferror(out) ? -1 : 0;
}
