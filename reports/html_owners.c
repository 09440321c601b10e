/*
 * html_owners.c - a rank's owner timeline in the HTML report: memory by
 * owner kind, stacked, at each audit (its ledger) and, on a GPU, at each
 * step sample and phase mark between audits, where the live bytes no audit
 * has attributed yet are a band of the part of the step that made them
 * (grey where no mark says) and the allocator's cache is what is reserved
 * beyond them.  One column per point, in time order (a run's
 * steps are what its reader counts in; a long pause before the exit audit
 * would squeeze a time axis).  Audits are ticks under their column, the
 * audits of error findings red lines.  Inline SVG, no script; at most
 * MAX_COLUMNS points are drawn (evenly chosen, the first and last kept).
 */
#include "finding_kinds.h"
#include "html_page.h"
#include "tpaudit.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum { W = 640, H = 200, PAD_L = 70, PAD_R = 14, PAD_T = 14, PAD_B = 30, MAX_COLUMNS = 600 };

static const struct owner_band {
    const char *kind, *label, *color;
} BANDS[] = {
    {"parameter", "parameters", "#4e79a7"},     {"gradient", "gradients", "#59a14f"},
    {"optimizer_state", "optimizer state", "#f28e2c"}, {"stale", "stale tensors", "#e15759"},
    {"held", "held by other objects", "#b07aa1"}, {"autograd", "autograd graphs", "#edc948"},
    {"unattributed", "unattributed", "#9c755f"},
    {TPAUDIT_PHASE_FORWARD, "made in forward (between audits)", "#76b7b2"},
    {TPAUDIT_PHASE_BACKWARD, "made in backward (between audits)", "#ff9da7"},
    {TPAUDIT_PHASE_OPTIMIZER_STEP, "made in the optimizer step (between audits)", "#ffbe7d"},
    {TPAUDIT_PHASE_OUTSIDE, "made outside a step (between audits)", "#bab0ac"},
    {TPAUDIT_MADE_UNKNOWN, "not yet attributed (between audits)", "#d0d0d0"}, {"allocator_cache", "allocator cache", "#e7e1dc"},
};
#define N_BANDS (sizeof BANDS / sizeof BANDS[0])
enum { BAND_UNATTRIBUTED = 6, BAND_FORWARD = 7, BAND_UNKNOWN = 11, BAND_CACHE = 12 };

static size_t band_of(const char *kind) {
    for (size_t b = 0; b < N_BANDS; b++)
        if (!strcmp(BANDS[b].kind, kind)) return b;
    return BAND_UNATTRIBUTED;
}

/* Each point's bytes by band: an audit's ledger; a sample or phase mark
 * keeps the last audit's owners, and splits its live and reserved bytes
 * into what they did not attribute, by the part of the step that made it
 * (tpa_split_transient), and the cache. */
static void fill_bands(const tpa_run_t *run, int use_samples, int64_t (*v)[N_BANDS], size_t *n_out,
                       const tpa_owner_point_t **at) {
    int64_t last[N_BANDS] = {0};
    size_t n = 0;
    for (size_t i = 0; i < run->n_owners; i++) {
        const tpa_owner_point_t *p = &run->owners[i];
        if (p->label && p->n_groups) {
            memset(last, 0, sizeof last);
            for (size_t g = 0; g < p->n_groups; g++) {
                size_t b = band_of(p->groups[g].owner_kind);
                last[b] = tpa_add_bytes(last[b], p->groups[g].bytes);
            }
            memcpy(v[n], last, sizeof last);
        } else if (p->label) { /* an audit without a ledger: a mark, its owners as before */
            memcpy(v[n], last, sizeof last);
        } else if (use_samples && p->live_bytes >= 0) {
            memcpy(v[n], last, sizeof last);
            for (size_t t = 0; t < p->n_transient; t++) {
                size_t b = band_of(p->transient[t].owner_kind);
                v[n][b] = tpa_add_bytes(v[n][b], p->transient[t].bytes);
            }
            if (p->reserved_bytes >= 0)
                v[n][BAND_CACHE] = p->reserved_bytes > p->live_bytes ? p->reserved_bytes - p->live_bytes : 0;
        } else {
            continue;
        }
        at[n++] = p;
    }
    *n_out = n;
}

/* The left edge of column i of n. */
static double px(size_t i, size_t n) { return PAD_L + (double)(W - PAD_L - PAD_R) * (double)i / (double)n; }
static double py(double bytes, double top) { return PAD_T + (H - PAD_T - PAD_B) * (1 - bytes / top); }

/* The audits of the run's error findings: a red line each (one per audit). */
static void put_finding_lines(FILE *out, const tpa_report_t *r, size_t run_index, const tpa_owner_point_t *const *at,
                              size_t n) {
    size_t drawn = n;
    for (size_t i = 0; i < r->n_findings; i++) {
        const tpa_finding_t *f = &r->findings[i];
        if (f->run_index != run_index || !f->is_error) continue;
        size_t k = 0;
        while (k < n && !(at[k]->label && at[k]->step == f->step)) k++;
        if (k == n || k == drawn) continue;
        drawn = k;
        double x = (px(k, n) + px(k + 1, n)) / 2;
        html_fmt(out, "<g class=\"owner-finding\"><title>%s: %s</title>", tpa_kind_label(f->kind),
                 f->name ? f->name : f->holder_path ? f->holder_path : "");
        fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/></g>\n", x, x, PAD_T, H - PAD_B);
    }
}

/* The bands, stacked in BANDS' order; below[i] ends as column i's total. */
static void put_bands(FILE *out, int64_t (*v)[N_BANDS], size_t n, const int *used, double top, double *below) {
    for (size_t b = 0; b < N_BANDS; b++) {
        if (!used[b]) continue;
        fprintf(out, "<path class=\"band\" fill=\"%s\" d=\"M%.1f %.1f", BANDS[b].color, px(0, n),
                py(below[0] + (double)v[0][b], top));
        for (size_t i = 0; i < n; i++) { /* the top edge, a step per column */
            double y = py(below[i] + (double)v[i][b], top);
            fprintf(out, " L%.1f %.1f L%.1f %.1f", px(i, n), y, px(i + 1, n), y);
        }
        for (size_t i = n; i-- > 0;) /* the bottom edge back */
            fprintf(out, " L%.1f %.1f L%.1f %.1f", px(i + 1, n), py(below[i], top), px(i, n), py(below[i], top));
        html_fmt(out, " Z\"><title>%s</title></path>\n", BANDS[b].label);
        for (size_t i = 0; i < n; i++) below[i] += (double)v[i][b];
    }
}

enum { MOST_NAMED = 5 }; /* the largest parts a column's hover text names */

/* Whether group a comes after b, the largest first (then in the order made). */
static int comes_after(const tpa_owner_group_t *a, const tpa_owner_group_t *b) {
    return a->bytes < b->bytes || (a->bytes == b->bytes && a > b);
}

/* Over each sample or phase mark's column, a hover text naming what was made
 * between audits by part and module (the largest MOST_NAMED groups). */
static void put_made_by(FILE *out, const tpa_owner_point_t *const *at, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const tpa_owner_point_t *p = at[i];
        if (p->label || !p->n_transient) continue;
        fprintf(out, "<rect class=\"owner-made\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"><title>", px(i, n),
                PAD_T, px(i + 1, n) - px(i, n), H - PAD_T - PAD_B);
        if (p->step >= 0) fprintf(out, "step %" PRId64 ", ", p->step);
        html_fmt(out, "%s", p->phase ? "phase mark" : "step sample");
        if (p->phase) html_fmt(out, " %s%s%s", p->phase, p->phase_owner ? " of " : "", p->phase_owner ? p->phase_owner : "");
        fputs("; live, not yet attributed by an audit:", out);
        const tpa_owner_group_t *g = NULL; /* the last named: the next is the largest after it */
        for (size_t k = 0; k < MOST_NAMED && k < p->n_transient; k++) {
            const tpa_owner_group_t *best = NULL;
            for (const tpa_owner_group_t *t = p->transient; t < p->transient + p->n_transient; t++)
                if ((!g || comes_after(t, g)) && (!best || comes_after(best, t))) best = t;
            g = best;
            char bytes[32];
            tpa_format_bytes(g->bytes, bytes, sizeof bytes);
            int part = strcmp(g->owner_kind, TPAUDIT_MADE_UNKNOWN) != 0;
            html_fmt(out, "%s %s %s%s%s%s", k ? "," : "", bytes, part ? "made in " : "", g->owner_kind, g->owner ? " of " : "",
                     g->owner ? g->owner : "");
        }
        if (p->n_transient > MOST_NAMED) fprintf(out, ", %zu more", p->n_transient - MOST_NAMED);
        fputs("</title></rect>\n", out);
    }
}

/* Audit ticks, finding lines, the byte scale and the first and last step. */
static void put_marks(FILE *out, const tpa_report_t *r, size_t run_index, const tpa_owner_point_t **at, size_t n,
                      const double *below, double top) {
    for (size_t i = 0; i < n; i++) {
        if (!at[i]->label) continue;
        double x = (px(i, n) + px(i + 1, n)) / 2;
        char bytes[32];
        tpa_format_bytes((int64_t)below[i], bytes, sizeof bytes);
        html_fmt(out, "<g class=\"owner-audit\"><title>audit %s", at[i]->label);
        fprintf(out, " at step %" PRId64 ": %s</title><line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/></g>\n",
                at[i]->step, bytes, x, x, H - PAD_B, H - PAD_B + 5);
    }
    put_finding_lines(out, r, run_index, at, n);
    char label[32];
    tpa_format_bytes((int64_t)top, label, sizeof label);
    fprintf(out, "<text class=\"tick y\" x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", PAD_L - 6, PAD_T + 4, label);
    fprintf(out, "<text class=\"tick y\" x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>", PAD_L - 6, H - PAD_B + 4);
    fprintf(out, "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>", PAD_L, W - PAD_R, H - PAD_B, H - PAD_B);
    for (int end = 0; end < 2; end++) {
        const tpa_owner_point_t *p = at[end ? n - 1 : 0];
        if (end && n == 1) break;
        if (p->step >= 0)
            snprintf(label, sizeof label, "step %" PRId64, p->step);
        else
            snprintf(label, sizeof label, "exit");
        fprintf(out, "<text class=\"tick x\" x=\"%.1f\" y=\"%d\" text-anchor=\"%s\">%s</text>",
                end ? px(n, n) : px(0, n), H - PAD_B + 18, end ? "end" : "start", label);
    }
}

void html_put_owner_timeline(FILE *out, const tpa_report_t *r, size_t run_index) {
    const tpa_run_t *run = &r->runs[run_index];
    if (!run->n_owners) return;
    int64_t(*v)[N_BANDS] = calloc(run->n_owners, sizeof *v);
    const tpa_owner_point_t **at = calloc(run->n_owners, sizeof *at);
    size_t n = 0;
    /* on the CPU a sample is malloc's bytes, not tensors': audits only */
    if (v && at) fill_bands(run, run->owner_device && !strncmp(run->owner_device, "cuda", 4), v, &n, at);
    if (n < 1) {
        free(v);
        free(at);
        return;
    }
    size_t stride = (n + MAX_COLUMNS - 1) / MAX_COLUMNS, m = 0;
    for (size_t i = 0; i < n; i++)
        if (i % stride == 0 || i + 1 == n) {
            memmove(v[m], v[i], sizeof v[i]);
            at[m++] = at[i];
        }
    n = m;
    double top = 1;
    int used[N_BANDS] = {0}, any = 0;
    for (size_t i = 0; i < n; i++) {
        double sum = 0;
        for (size_t b = 0; b < N_BANDS; b++) sum += (double)v[i][b], used[b] |= v[i][b] > 0, any |= v[i][b] > 0;
        if (sum > top) top = sum;
    }
    if (!any) { /* audits without a ledger (version 1): nothing to stack */
        free(v);
        free(at);
        return;
    }
    int between = 0;
    for (size_t b = BAND_FORWARD; b <= BAND_UNKNOWN; b++) between |= used[b];
    fputs("<figure class=\"owners\"><figcaption>Memory by owner", out);
    html_fmt(out, " on %s: each audit's ledger%s</figcaption>\n", run->owner_device,
             between ? "; between audits the step samples and phase marks (live, not yet attributed: by the part of the "
                       "step that made it, grey where no mark says)"
                     : "");
    fprintf(out, "<svg class=\"owner-timeline\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" width=\"%d\" "
                 "height=\"%d\" role=\"img\" aria-label=\"memory by owner over time\">\n", W, H, W, H);
    double below[MAX_COLUMNS + 1] = {0};
    put_bands(out, v, n, used, top, below);
    put_made_by(out, at, n);
    put_marks(out, r, run_index, at, n, below, top);
    fputs("</svg>\n<p class=\"owner-legend\">", out);
    for (size_t b = 0; b < N_BANDS; b++)
        if (used[b]) fprintf(out, "<span><i style=\"background:%s\"></i>%s</span> ", BANDS[b].color, BANDS[b].label);
    if (r->n_findings) fputs("<span><b class=\"finding-key\">&#x250A;</b> audit of a finding</span>", out);
    fputs("</p></figure>\n", out);
    free(v);
    free(at);
}
