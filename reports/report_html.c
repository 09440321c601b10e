/* report_html.c - one self-contained HTML file: a summary, an inline SVG
 * memory-over-time plot per rank (live allocated bytes, audit points and
 * the stale bytes marked) and the findings table with stacks. Every string
 * from a database goes through tpa_put_xml_escaped. */
#include "tpa_model.h"

static void put_plot(FILE *out, const tpa_run_t *run) {
    const double w = 720, h = 200, pad = 40;
    fprintf(out, "<h3>rank %lld: memory over time</h3>\n", (long long)(run->has_rank ? run->rank : -1));
    if (!run->n_points) {
        fputs("<p class=\"note\">no allocation records (CUPTI ", out);
        tpa_put_xml_escaped(out, run->cupti);
        fputs(")</p>\n", out);
        if (run->n_marks) fputs("<table class=\"audits\"><tr><th>audit at step</th><th>stale bytes</th></tr>\n", out);
        for (size_t i = 0; i < run->n_marks; i++) {
            char b[32];
            tpa_format_bytes(run->marks[i].stale_bytes, b, sizeof b);
            if (run->marks[i].step < 0) fprintf(out, "<tr><td>exit</td><td>%s</td></tr>\n", b);
            else fprintf(out, "<tr><td>%lld</td><td>%s</td></tr>\n", (long long)run->marks[i].step, b);
        }
        if (run->n_marks) fputs("</table>\n", out);
        return;
    }
    int64_t t0 = run->points[0].ts_ns, t1 = run->points[run->n_points - 1].ts_ns, peak = 1;
    for (size_t i = 0; i < run->n_points; i++) if (run->points[i].bytes > peak) peak = run->points[i].bytes;
    for (size_t i = 0; i < run->n_marks; i++) if (run->marks[i].ts_ns > t1) t1 = run->marks[i].ts_ns;
    if (t1 <= t0) t1 = t0 + 1;
    fprintf(out, "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" role=\"img\">\n", w + pad, h + pad);
    fprintf(out, "<polyline fill=\"none\" stroke=\"#2463a6\" stroke-width=\"1.5\" points=\"");
    for (size_t i = 0; i < run->n_points; i++)
        fprintf(out, "%.1f,%.1f ", pad + w * (double)(run->points[i].ts_ns - t0) / (double)(t1 - t0),
                h - h * (double)run->points[i].bytes / (double)peak + 5);
    fputs("\"/>\n", out);
    for (size_t i = 0; i < run->n_marks; i++) {
        double x = pad + w * (double)(run->marks[i].ts_ns - t0) / (double)(t1 - t0);
        char b[32];
        tpa_format_bytes(run->marks[i].stale_bytes, b, sizeof b);
        fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"5\" y2=\"%.0f\" stroke=\"#c0392b\" stroke-dasharray=\"4\"/>", x, x, h + 5);
        fprintf(out, "<text x=\"%.1f\" y=\"%.0f\" font-size=\"11\" fill=\"#c0392b\">step %lld, stale %s</text>\n", x + 3, 16.0 + 12 * (double)(i % 3),
                (long long)run->marks[i].step, b);
    }
    char peak_s[32];
    tpa_format_bytes(peak, peak_s, sizeof peak_s);
    fprintf(out, "<text x=\"2\" y=\"14\" font-size=\"11\">%s</text><text x=\"2\" y=\"%.0f\" font-size=\"11\">0</text>\n", peak_s, h + 5);
    fputs("</svg>\n", out);
    if (!run->n_by_library) return;
    fputs("<table class=\"libs\"><tr><th>library that allocated</th><th>live device memory at the audit</th><th>allocations</th></tr>\n", out);
    for (size_t i = 0; i < run->n_by_library; i++) {
        char b[32];
        tpa_format_bytes(run->by_library[i].bytes, b, sizeof b);
        fputs("<tr><td>", out);
        tpa_put_xml_escaped(out, run->by_library[i].library);
        fprintf(out, "</td><td>%s</td><td>%lld</td></tr>\n", b, (long long)run->by_library[i].allocations);
    }
    fputs("</table>\n", out);
}

static void put_frames(FILE *out, const tpa_frames_t *fr) {
    for (size_t i = 0; i < fr->n; i++) {
        tpa_put_xml_escaped(out, fr->v[i].file ? fr->v[i].file : fr->v[i].module);
        fprintf(out, ":%ld ", fr->v[i].line);
        tpa_put_xml_escaped(out, fr->v[i].function);
        fputs("<br>", out);
    }
}

int tpa_render_html(const tpa_report_t *r, FILE *out) {
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tpaudit report</title>\n<style>"
          "body{font:14px sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;"
          "vertical-align:top}th{background:#eee}.error{color:#c0392b;font-weight:bold}.warning{color:#b7950b}.note{color:#666}"
          "</style></head><body>\n<h1>tpaudit report</h1>\n", out);
    int64_t total = 0;
    size_t errors = 0;
    for (size_t i = 0; i < r->n_findings; i++) if (r->findings[i].is_error) { errors++; total += r->findings[i].retained_bytes; }
    char b[32];
    tpa_format_bytes(total, b, sizeof b);
    fprintf(out, "<p id=\"summary\">%zu runs, %zu findings (%zu errors), %s retained by stale tensors.%s</p>\n", r->n_runs, r->n_findings,
            errors, b, r->inconclusive ? " <span class=\"error\">Inconclusive: a run is incomplete.</span>" : "");
    for (size_t i = 0; i < r->n_runs; i++) put_plot(out, &r->runs[i]);
    fputs("<h2>Findings</h2>\n<table id=\"findings\"><tr><th>severity</th><th>rank</th><th>kind</th><th>tensor</th><th>shape</th>"
          "<th>retained</th><th>holder</th><th>successor</th><th>created at</th><th>replaced at</th><th>message</th></tr>\n", out);
    for (size_t i = 0; i < r->n_findings; i++) {
        const tpa_finding_t *f = &r->findings[i];
        tpa_format_bytes(f->retained_bytes, b, sizeof b);
        fprintf(out, "<tr><td class=\"%s\">%s</td><td>%lld</td><td>", tpa_severity(f), tpa_severity(f), (long long)f->rank);
        tpa_put_xml_escaped(out, f->kind);
        fputs("</td><td>", out);
        tpa_put_xml_escaped(out, f->name);
        fputs("</td><td>", out);
        tpa_put_xml_escaped(out, f->shape);
        fprintf(out, "</td><td>%s</td><td>", b);
        tpa_put_xml_escaped(out, f->holder_class);
        fputs(" ", out);
        tpa_put_xml_escaped(out, f->holder_path);
        fputs("</td><td>", out);
        if (f->has_successor) { tpa_put_xml_escaped(out, f->succ_name); fputs(": ", out); tpa_put_xml_escaped(out, f->relation); }
        fputs("</td><td>", out);
        put_frames(out, &f->created_at);
        fputs("</td><td>", out);
        put_frames(out, &f->replaced_at);
        fputs("</td><td>", out);
        tpa_put_xml_escaped(out, f->message);
        fputs("</td></tr>\n", out);
    }
    fputs("</table>\n</body></html>\n", out);
    return ferror(out) ? -1 : 0;
}
