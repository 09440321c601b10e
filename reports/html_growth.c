/*
 * html_growth.c - the plot of a growth run in the HTML report, as inline
 * SVG over the optimizer steps: the probe's per-step samples as a line
 * (device bytes allocated, or malloc's bytes in use on the CPU), drawn
 * above their least value (so a rise of a few MiB over a process of
 * hundreds shows), the bytes of the fastest-growing holder at each audit
 * as dots on the same scale,
 * the warm-up steps shaded and the step growth was first suspected marked.
 * Every dot has a <title> with its figures.
 */
#include "html_page.h"

#include <stdio.h>

#include "memory_growth.h"

static double step_x(double step, int64_t last) {
    return LEFT + INNER_W * (step - 1) / (double)(last > 1 ? last - 1 : 1);
}

static void put_step_axis(FILE *out, int64_t last) {
    int64_t every = 1;
    while (last / every > 10) every = every == 1 ? 2 : every == 2 ? 5 : every * 2;
    double right = -1e9;
    for (int64_t step = 1; step <= last; step += (step == 1 && every > 1 ? every - 1 : every)) {
        char label[32];
        double x = step_x((double)step, last);
        snprintf(label, sizeof label, "%lld", (long long)step);
        fprintf(out, "<line class=\"tickmark\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>", x, x, PLOT_H - BOTTOM,
                PLOT_H - BOTTOM + 4);
        html_put_x_label(out, x, PLOT_H - BOTTOM + 16, "tick x", label, &right, PLOT_W + 6);
    }
    fprintf(out, "\n<text class=\"axis-title\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">optimizer step</text>\n",
            LEFT + INNER_W / 2, PLOT_H - 6);
}

/* The warm-up steps shaded, and the step of the first suspicion as a line. */
static void put_phases(FILE *out, const tpa_growth_series_t *g, int64_t last) {
    double x0 = LEFT, x1 = step_x(TPA_GROWTH_WARMUP_STEP + 0.5, last);
    if (x1 > PLOT_W - RIGHT) x1 = PLOT_W - RIGHT;
    fprintf(out,
            "<g class=\"warmup\"><title>warm-up: steps 1-%d, never judged for growth</title>"
            "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%.1f\"/>"
            "<text class=\"mark-label\" x=\"%.1f\" y=\"%d\">warm-up</text></g>\n",
            TPA_GROWTH_WARMUP_STEP, (int)x0, TOP, x1 - x0, INNER_H, x0 + 4, TOP + 12);
    if (g->suspected_step > 0 && g->suspected_step <= last) {
        double x = step_x((double)g->suspected_step, last);
        fprintf(out,
                "<g class=\"suspected\"><title>growth first suspected at step %lld: growth audits from here</title>"
                "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>"
                "<text class=\"mark-label\" x=\"%.1f\" y=\"%d\">suspected, step %lld</text></g>\n",
                (long long)g->suspected_step, x, x, TOP, PLOT_H - BOTTOM, x + 4, TOP - 4,
                (long long)g->suspected_step);
    }
}

static void put_samples(FILE *out, const html_axis_t *a, const tpa_growth_series_t *g, int64_t last) {
    fputs("<polyline class=\"samples\" points=\"", out);
    for (size_t i = 0; i < g->n_samples; i++)
        if (g->samples[i].step >= 1)
            fprintf(out, "%.1f,%.1f ", step_x((double)g->samples[i].step, last),
                    html_y_of(a, (double)(g->samples[i].bytes - g->least_bytes)));
    fputs("\"/>\n", out);
    char first[32], least[32], lastb[32];
    tpa_format_bytes(g->first_bytes, first, sizeof first);
    tpa_format_bytes(g->least_bytes, least, sizeof least);
    tpa_format_bytes(g->last_bytes, lastb, sizeof lastb);
    fprintf(out, "<title>each step: first %s (step %lld), least %s (step %lld), last %s (step %lld)</title>\n", first,
            (long long)g->first_step, least, (long long)g->least_step, lastb, (long long)g->last_step);
}

static void put_held(FILE *out, const html_axis_t *a, const tpa_growth_series_t *g, int64_t last) {
    fputs("<polyline class=\"held\" points=\"", out);
    for (size_t i = 0; i < g->n_held; i++)
        if (g->held[i].step >= 1)
            fprintf(out, "%.1f,%.1f ", step_x((double)g->held[i].step, last), html_y_of(a, (double)g->held[i].bytes));
    fputs("\"/>\n", out);
    for (size_t i = 0; i < g->n_held; i++) {
        if (g->held[i].step < 1) continue;
        char bytes[32];
        tpa_format_bytes(g->held[i].bytes, bytes, sizeof bytes);
        fputs("<g class=\"held\"><title>", out);
        html_put(out, g->holder);
        fprintf(out, " at the audit of step %lld: %s</title><circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/></g>\n",
                (long long)g->held[i].step, bytes, step_x((double)g->held[i].step, last),
                html_y_of(a, (double)g->held[i].bytes));
    }
}

enum { LEGEND_X = LEFT + 150 };

static void put_legend(FILE *out, const tpa_growth_series_t *g, int on_cpu) {
    char least[32];
    tpa_format_bytes(g->least_bytes, least, sizeof least);
    fprintf(out, "<g class=\"legend\"><line class=\"samples\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>"
                 "<text x=\"%d\" y=\"%d\">%s, each step, above its least (%s)</text>",
            LEGEND_X, LEGEND_X + 20, TOP + 12, TOP + 12, LEGEND_X + 24, TOP + 16,
            on_cpu ? "malloc's bytes in use" : "device bytes allocated", least);
    if (g->n_held) {
        fprintf(out, "<circle class=\"held\" cx=\"%d\" cy=\"%d\" r=\"4\"/><text x=\"%d\" y=\"%d\">", LEGEND_X + 10,
                TOP + 28, LEGEND_X + 24, TOP + 32);
        html_put(out, g->holder);
        fputs(" at each audit</text>", out);
    }
    fputs("</g>\n", out);
}

void html_put_growth_plot(FILE *out, const tpa_run_t *run) {
    const tpa_growth_series_t *g = &run->growth;
    if (!g->n_samples) return;
    int64_t last = 1, max = 0;
    for (size_t i = 0; i < g->n_samples; i++) {
        if (g->samples[i].step > last) last = g->samples[i].step;
        if (g->samples[i].bytes - g->least_bytes > max) max = g->samples[i].bytes - g->least_bytes;
    }
    for (size_t i = 0; i < g->n_held; i++) {
        if (g->held[i].step > last) last = g->held[i].step;
        if (g->held[i].bytes > max) max = g->held[i].bytes;
    }
    int on_cpu = g->device && g->device[0] == 'c' && g->device[1] == 'p';
    html_axis_t a = html_bytes_axis(max);
    html_svg_open(out, "growth", "memory at each optimizer step and what the growing holder kept at each audit");
    html_put_y_axis(out, &a, on_cpu ? "bytes (malloc in use: above its least)" : "bytes (allocated: above its least)");
    put_phases(out, g, last);
    put_step_axis(out, last);
    put_samples(out, &a, g, last);
    put_held(out, &a, g, last);
    put_legend(out, g, on_cpu);
    fputs("</svg>\n", out);
}

int html_growth_without_stale(const tpa_run_t *run) {
    if (!run->growth.n_held) return 0;
    for (size_t i = 0; i < run->n_marks; i++)
        if (run->marks[i].stale_bytes > 0) return 0;
    return 1;
}
