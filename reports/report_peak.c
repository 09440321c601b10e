/* report_peak.c - a run's peak of activations (the audit where the bytes a
 * step saved for backward, by the module that made them, add up to the
 * most) as the text and JSON reports and the gate's max-peak rule show it:
 * the step, the audit's label and the top modules (docs/REPORT.md). */
#include "escape.h"
#include "reports.h"
#include "tpa_model.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Modules the text report lists under the peak's line. */
#define TEXT_PEAK_MODULES 5

void tpa_format_peak_modules(const tpa_run_t *run, size_t most, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < run->n_peak_modules && i < most && at < len; i++) {
        char bytes[32];
        tpa_format_bytes(run->peak_modules[i].bytes, bytes, sizeof bytes);
        int n = snprintf(buf + at, len - at, "%s%s %s", i ? ", " : "", tpa_term(run->peak_modules[i].module), bytes);
        if (n < 0) break;
        at += (size_t)n;
    }
}

void tpa_put_peak_text(FILE *out, const tpa_run_t *run) {
    if (!run->has_peak) return;
    char total[32], bytes[32], when[320] = "";
    tpa_format_bytes(run->peak_bytes, total, sizeof total);
    if (run->peak_step >= 0) snprintf(when, sizeof when, "step %" PRId64 ", ", run->peak_step);
    size_t at = strlen(when);
    snprintf(when + at, sizeof when - at, "audit \"%s\"", tpa_term(run->peak_label ? run->peak_label : "?"));
    fprintf(out, "      peak of activations at %s: %s saved for backward, by the module that made it:\n", when, total);
    for (size_t i = 0; i < run->n_peak_modules && i < TEXT_PEAK_MODULES; i++) {
        tpa_format_bytes(run->peak_modules[i].bytes, bytes, sizeof bytes);
        fprintf(out, "        %-52s %10s\n", tpa_term(run->peak_modules[i].module), bytes);
    }
    if (run->n_peak_modules > TEXT_PEAK_MODULES)
        fprintf(out, "        ... %zu more module%s\n", run->n_peak_modules - TEXT_PEAK_MODULES,
                run->n_peak_modules - TEXT_PEAK_MODULES == 1 ? "" : "s");
    if (!run->n_peak_parts) return;
    tpa_format_bytes(run->peak_measured, total, sizeof total);
    fprintf(out, "        at that audit %s measured:", total);
    for (size_t i = 0; i < run->n_peak_parts; i++) {
        tpa_format_bytes(run->peak_parts[i].bytes, bytes, sizeof bytes);
        fprintf(out, "%s %s %s", i ? "," : "", tpa_term(run->peak_parts[i].module), bytes);
    }
    fputc('\n', out);
}

void tpa_put_peak_modules_json(FILE *out, const tpa_run_t *run, size_t most) {
    fputc('[', out);
    for (size_t i = 0; i < run->n_peak_modules && i < most; i++) {
        fputs(i ? ",{\"module\":" : "{\"module\":", out);
        tpa_put_json_string(out, run->peak_modules[i].module);
        fprintf(out, ",\"bytes\":%" PRId64 "}", run->peak_modules[i].bytes);
    }
    fputc(']', out);
}

void tpa_put_peak_json(FILE *out, const tpa_run_t *run) {
    fputs(",\"peak\":", out);
    if (!run->has_peak) {
        fputs("null", out);
        return;
    }
    char step[32] = "null";
    if (run->peak_step >= 0) snprintf(step, sizeof step, "%" PRId64, run->peak_step);
    fprintf(out, "{\"step\":%s,\"label\":", step);
    tpa_put_json_string(out, run->peak_label ? run->peak_label : "");
    fprintf(out, ",\"bytes\":%" PRId64 ",\"modules\":", run->peak_bytes);
    tpa_put_peak_modules_json(out, run, TPA_PEAK_MODULES);
    fprintf(out, ",\"measured\":%" PRId64 ",\"composition\":[", run->peak_measured);
    for (size_t i = 0; i < run->n_peak_parts; i++) {
        fputs(i ? ",{\"kind\":" : "{\"kind\":", out);
        tpa_put_json_string(out, run->peak_parts[i].module);
        fprintf(out, ",\"bytes\":%" PRId64 "}", run->peak_parts[i].bytes);
    }
    fputs("]}", out);
}
