/*
 * html_plot.c - the per-rank plots of the HTML report, as hand-written
 * inline SVG: device memory over time (when CUPTI recorded allocations) and
 * stale bytes at each audit step (always). Every rank is drawn on the same
 * scales (time range, bytes, steps), so ranks compare at a glance. Axis
 * labels are thinned so that none overlap; every mark and bar has a <title>
 * tooltip with its exact figures.
 */
#include "html_page.h"

#include <stdlib.h>
#include <string.h>


static int cmp_step(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    if (x < 0) x = INT64_MAX; /* the exit audit sorts last */
    if (y < 0) y = INT64_MAX;
    return (x > y) - (x < y);
}

int html_scale_init(html_scale_t *s, const tpa_report_t *r) {
    memset(s, 0, sizeof *s);
    size_t total = 0;
    for (size_t i = 0; i < r->n_runs; i++) total += r->runs[i].n_marks;
    s->steps = malloc((total + 1) * sizeof *s->steps);
    if (!s->steps) return -1;
    for (size_t i = 0; i < r->n_runs; i++) {
        const tpa_run_t *run = &r->runs[i];
        for (size_t k = 0; k < run->n_marks; k++) {
            int64_t step = run->marks[k].step < 0 ? -1 : run->marks[k].step;
            int known = 0;
            for (size_t j = 0; j < s->n_steps && !known; j++) known = s->steps[j] == step;
            if (!known) s->steps[s->n_steps++] = step;
            if (run->marks[k].stale_bytes > s->stale_max) s->stale_max = run->marks[k].stale_bytes;
        }
        if (!run->n_points) continue;
        int64_t a = run->points[0].ts_ns, b = run->points[run->n_points - 1].ts_ns;
        for (size_t k = 0; k < run->n_marks; k++) {
            if (run->marks[k].ts_ns < a) a = run->marks[k].ts_ns;
            if (run->marks[k].ts_ns > b) b = run->marks[k].ts_ns;
        }
        if (!s->any_memory || a < s->t0_ns) s->t0_ns = a;
        if (!s->any_memory || b > s->t1_ns) s->t1_ns = b;
        s->any_memory = 1;
        for (size_t k = 0; k < run->n_points; k++)
            if (run->points[k].bytes > s->mem_max) s->mem_max = run->points[k].bytes;
    }
    qsort(s->steps, s->n_steps, sizeof *s->steps, cmp_step);
    return 0;
}

void html_scale_free(html_scale_t *s) {
    free(s->steps);
    s->steps = NULL;
}

/* A nice tick spacing (1, 2 or 5 times a power of ten of unit) for about
 * `ticks` intervals up to max; *unit receives the unit it is counted in. */
static double nice_step(double max, double unit_base, int n_units, int ticks, double *unit) {
    *unit = 1;
    for (int i = 1; i < n_units && max >= *unit * unit_base; i++) *unit *= unit_base;
    double raw = max / *unit / ticks, mag = 1;
    if (raw <= 0) raw = 1;
    while (mag * 10 <= raw) mag *= 10;
    while (mag > raw) mag /= 10;
    double norm = raw / mag, step = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10;
    return step * mag * *unit;
}

html_axis_t html_bytes_axis(int64_t max) {
    static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    html_axis_t a;
    double m = max > 1024 ? (double)max : 1024;
    a.step = nice_step(m, 1024, 5, 4, &a.unit);
    int u = 0;
    for (double x = a.unit; x >= 1024 && u < 4; x /= 1024) u++;
    a.unit_name = names[u];
    int n = (int)(m / a.step);
    if (n * a.step < m) n++;
    a.top = n * a.step;
    return a;
}

double html_y_of(const html_axis_t *a, double v) {
    if (v < 0) v = 0;
    if (v > a->top) v = a->top;
    return TOP + INNER_H - INNER_H * v / a->top;
}

void html_svg_open(FILE *out, const char *cls, const char *label) {
    fprintf(
        out,
        "<svg class=\"plot %s\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
        "role=\"img\" aria-label=\"",
        cls, PLOT_W, PLOT_H, PLOT_W, PLOT_H);
    html_put(out, label);
    fputs("\">\n", out);
}

/* The y axis: gridlines and labels in the axis' unit, and its title. */
void html_put_y_axis(FILE *out, const html_axis_t *a, const char *title) {
    int n = (int)(a->top / a->step + 0.5);
    for (int i = 0; i <= n; i++) {
        double v = i * a->step, y = html_y_of(a, v);
        fprintf(out, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>", LEFT, PLOT_W - RIGHT, y, y);
        if (i)
            fprintf(out, "<text class=\"tick y\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g %s</text>\n", LEFT - 6,
                    y + 4, v / a->unit, a->unit_name);
        else
            fprintf(out, "<text class=\"tick y\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">0</text>\n", LEFT - 6, y + 4);
    }
    fprintf(out, "<text class=\"axis-title\" x=\"%d\" y=\"%d\">%s</text>\n", 4, TOP - 12, title);
    fprintf(
        out,
        "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/><line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n",
        LEFT, LEFT, TOP, PLOT_H - BOTTOM, LEFT, PLOT_W - RIGHT, PLOT_H - BOTTOM, PLOT_H - BOTTOM);
}

/* Where a label of text centred at x goes, kept inside the plot. */
double html_label_x(double x, const char *text, double *half) {
    *half = CHAR_W * (double)strlen(text) / 2;
    if (x - *half < LEFT - 3) x = LEFT - 3 + *half; /* clear of the y axis' "0" */
    if (x + *half > PLOT_W - 2) x = PLOT_W - 2 - *half;
    return x;
}

/* A label centred at x unless it would overlap the previous one (whose
 * right edge is *right) or pass limit, where a label kept for last
 * begins; returns whether it was drawn. */
int html_put_x_label(FILE *out, double x, double y, const char *cls, const char *text, double *right, double limit) {
    double half;
    x = html_label_x(x, text, &half);
    if (x - half < *right + 6 || x + half > limit - 6) return 0;
    fprintf(out, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>", cls, x, y, text);
    *right = x + half;
    return 1;
}

static void step_name(int64_t step, char *buf, size_t len) {
    if (step < 0)
        snprintf(buf, len, "exit");
    else
        snprintf(buf, len, "%lld", (long long)step);
}

/* The time axis in seconds (or ms) since the first record of any rank. */
static void put_time_axis(FILE *out, double span) {
    double tunit;
    double tstep = nice_step(span / 1e9, 1000, 1, 6, &tunit);
    int ms = span < 2e9;
    if (ms) tstep = nice_step(span / 1e6, 1000, 1, 6, &tunit);
    double right = -1e9;
    for (double v = 0; v <= (ms ? span / 1e6 : span / 1e9) * 1.0001; v += tstep) {
        double x = LEFT + INNER_W * v / (ms ? span / 1e6 : span / 1e9);
        char label[32];
        snprintf(label, sizeof label, "%g %s", v, ms ? "ms" : "s");
        fprintf(out, "<line class=\"tickmark\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>", x, x, PLOT_H - BOTTOM,
                PLOT_H - BOTTOM + 4);
        html_put_x_label(out, x, PLOT_H - BOTTOM + 16, "tick x", label, &right, PLOT_W + 6);
    }
    fprintf(
        out,
        "\n<text class=\"axis-title\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">time since the first record of any rank</text>\n",
        LEFT + INNER_W / 2, PLOT_H - 6);
}

/* The x of time `ts_ns` on the shared time range. */
static double time_x(const html_scale_t *s, double span, int64_t ts_ns) {
    return LEFT + INNER_W * ((double)ts_ns - (double)s->t0_ns) / span;
}

/* Live bytes as a step function, filled. */
static void put_memory_area(FILE *out, const html_axis_t *a, const html_scale_t *s, double span, const tpa_run_t *run) {
    fprintf(out, "<path class=\"area\" d=\"M%d %.1f", LEFT, html_y_of(a, 0));
    for (size_t i = 0; i < run->n_points; i++)
        fprintf(out, " H%.1f V%.1f", time_x(s, span, run->points[i].ts_ns), html_y_of(a, (double)run->points[i].bytes));
    fprintf(out, " H%.1f V%.1f Z\"/>\n", time_x(s, span, run->points[run->n_points - 1].ts_ns), html_y_of(a, 0));
}

/* "step N", or "exit" for the exit audit. */
static void mark_label(const tpa_audit_mark_t *m, char *label, size_t len) {
    char name[32];
    step_name(m->step, name, sizeof name);
    snprintf(label, len, m->step < 0 ? "%s" : "step %s", name);
}

/* Audit marks: a dashed line each, labelled where there is room (the last
 * mark, often the exit audit, always), and the stale bytes as a dot on the
 * same byte scale. */
static void put_audit_marks(FILE *out, const html_axis_t *a, const html_scale_t *s, double span, const tpa_run_t *run) {
    double right = -1e9, last_left = PLOT_W + 6;
    for (size_t i = 0; i < run->n_marks; i++) {
        const tpa_audit_mark_t *m = &run->marks[i];
        double x = time_x(s, span, m->ts_ns);
        char label[40], bytes[32];
        mark_label(m, label, sizeof label);
        tpa_format_bytes(m->stale_bytes, bytes, sizeof bytes);
        fprintf(out, "<g class=\"mark%s%s\"><title>%saudit %s at %.3f s: %s stale</title>",
                m->stale_bytes > 0 ? " stale" : "", m->oom ? " oom" : "", m->oom ? "OUT OF MEMORY here: " : "", label,
                ((double)m->ts_ns - (double)s->t0_ns) / 1e9, bytes);
        fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>", x, x, TOP, PLOT_H - BOTTOM);
        fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\"/>", x, html_y_of(a, (double)m->stale_bytes));
        if (i + 1 == run->n_marks)
            last_left = PLOT_W + 6;
        else if (i == 0) {
            const tpa_audit_mark_t *l = &run->marks[run->n_marks - 1];
            char llabel[40];
            double half;
            mark_label(l, llabel, sizeof llabel);
            last_left = html_label_x(time_x(s, span, l->ts_ns), llabel, &half) - half;
        }
        html_put_x_label(out, x, TOP - 2, "mark-label", label, &right, last_left);
        fputs("</g>\n", out);
    }
}

void html_put_memory_plot(FILE *out, const html_scale_t *s, const tpa_run_t *run) {
    if (!run->n_points || !s->any_memory) return;
    html_axis_t a = html_bytes_axis(s->mem_max);
    double span = (double)s->t1_ns - (double)s->t0_ns;
    if (span <= 0) span = 1;
    html_svg_open(out, "memory", "device memory over time");
    html_put_y_axis(out, &a, "live device memory");
    put_time_axis(out, span);
    put_memory_area(out, &a, s, span, run);
    put_audit_marks(out, &a, s, span, run);
    fputs("</svg>\n", out);
}

void html_put_stale_plot(FILE *out, const html_scale_t *s, const tpa_run_t *run) {
    if (!run->n_marks || !s->n_steps) return;
    html_axis_t a = html_bytes_axis(s->stale_max);
    html_svg_open(out, "stale", "stale bytes at each audit step");
    html_put_y_axis(out, &a, "stale bytes held by optimizers");
    double slot = INNER_W / (double)s->n_steps, bar = slot * 0.6 > 48 ? 48 : slot * 0.6;
    if (bar < 1) bar = 1;
    double right = -1e9, half, last_left;
    char name[32];
    step_name(s->steps[s->n_steps - 1], name, sizeof name); /* the last step (often exit) is always labelled */
    last_left = html_label_x(LEFT + slot * ((double)s->n_steps - 0.5), name, &half) - half;
    for (size_t i = 0; i < s->n_steps; i++) {
        double cx = LEFT + slot * ((double)i + 0.5);
        step_name(s->steps[i], name, sizeof name);
        html_put_x_label(out, cx, PLOT_H - BOTTOM + 16, "tick x", name, &right,
                    i + 1 == s->n_steps ? PLOT_W + 6 : last_left);
        const tpa_audit_mark_t *m = NULL;
        for (size_t k = 0; k < run->n_marks; k++)
            if ((run->marks[k].step < 0 ? -1 : run->marks[k].step) == s->steps[i]) m = &run->marks[k];
        if (!m) continue;
        char bytes[32];
        tpa_format_bytes(m->stale_bytes, bytes, sizeof bytes);
        double y = html_y_of(&a, (double)m->stale_bytes), base = html_y_of(&a, 0);
        if (base - y < 2) y = base - 2; /* a clean audit still shows as a sliver */
        fprintf(
            out,
            "<rect class=\"bar%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>%s%s: %s%s</title></rect>\n",
            m->stale_bytes > 0 ? " stale" : "", cx - bar / 2, y, bar, base - y, s->steps[i] < 0 ? "" : "step ", name,
            m->blind ? "not judged (no model parameter seen)" : bytes, m->blind ? "" : " stale");
    }
    fprintf(out, "<text class=\"axis-title\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">audit step</text>\n",
            LEFT + INNER_W / 2, PLOT_H - 6);
    fputs("</svg>\n", out);
}
