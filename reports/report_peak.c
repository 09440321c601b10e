/* report_peak.c - a run's peak of activations (the audit where the bytes a
 * step saved for backward, by the module that made them, add up to the
 * most) as the text and JSON reports and the gate's max-peak rule show it:
 * the step, the audit's label and the top modules (docs/REPORT.md). */
#include "escape.h"
#include "reports.h"
#include "tpa_model.h"
#include "tpaudit.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Modules the text report lists under the peak's line, and parts of the peak's moment. */
#define TEXT_PEAK_MODULES 5
#define TEXT_MOMENT_PARTS 8

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

/* "in the backward of step 2 (GPT2LMHeadModel)": the part of a step that reached the device's peak. */
static void device_peak_part(const tpa_run_t *run, char *buf, size_t len) {
    const char *phase = run->device_peak_phase;
    if (!phase) {
        snprintf(buf, len, "before the first phase mark");
        return;
    }
    const char *words = !strcmp(phase, TPAUDIT_PHASE_OPTIMIZER_STEP) ? "optimizer step"
                        : !strcmp(phase, TPAUDIT_PHASE_OUTSIDE)      ? "time outside a step"
                                                                     : phase;
    int n = snprintf(buf, len, "in the %s of step %" PRId64, tpa_term(words), run->device_peak_step);
    if (run->device_peak_owner && n > 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, " (%s)", tpa_term(run->device_peak_owner));
}

/* The device's peak under the peak section: where it was reached, and, where an audit was taken in that part or
 * just before it (the audit inside backward of `tpaudit run --peak`), what was allocated at it and what was made
 * after it. */
static void put_device_peak_text(FILE *out, const tpa_run_t *run) {
    char bytes[32], at[32], more[32], part[320];
    tpa_format_bytes(run->device_peak_bytes, bytes, sizeof bytes);
    device_peak_part(run, part, sizeof part);
    fprintf(out, "        device peak %s (max_memory_allocated), reached %s", bytes, part);
    if (run->device_peak_audit && run->device_peak_audit_bytes <= run->device_peak_bytes) {
        tpa_format_bytes(run->device_peak_audit_bytes, at, sizeof at);
        tpa_format_bytes(run->device_peak_bytes - run->device_peak_audit_bytes, more, sizeof more);
        fprintf(out, ": %s allocated at the audit \"%s\" of step %" PRId64 ", %s made after it (gradients and "
                "temporaries in flight)", at, tpa_term(run->device_peak_audit), run->device_peak_audit_step, more);
    }
    fputc('\n', out);
}

void tpa_moment_part_words(const tpa_moment_part_t *p, char *buf, size_t len) {
    if (p->owner && !strcmp(p->kind, "temporary")) { /* named by the backward mark that made it */
        snprintf(buf, len, "temporaries of the backward of %s", p->owner);
        return;
    }
    if (p->owner && !strcmp(p->kind, "made_in_backward")) {
        snprintf(buf, len, "made in the backward of %s, kept", p->owner);
        return;
    }
    static const struct {
        const char *kind, *words;
    } named[] = {{"parameter", "parameters of "},   {"gradient", "gradients of "},
                 {"optimizer_state", "state of "},  {"held", "held by "},
                 {"stale", "stale, held by "},      {"temporary", "temporaries freed before the step's next part"},
                 {"made_in_backward", "made in backward, kept"}, {"allocator_cache", "allocator cache"}};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (!strcmp(p->kind, named[i].kind)) {
            snprintf(buf, len, "%s%s", named[i].words, p->owner ? p->owner : "");
            return;
        }
    snprintf(buf, len, "%s", p->owner ? p->owner : p->kind);
}

/* The moment of the peak: the blocks live then by owner, from the probe's replay of the allocator's history. */
static void put_moment_text(FILE *out, const tpa_run_t *run) {
    char total[32], bytes[32], words[400];
    tpa_format_bytes(run->moment_bytes, total, sizeof total);
    fprintf(out, "        at the peak's moment in step %" PRId64 " (the allocator's history replayed): %s allocated",
            run->moment_step, total);
    if (run->device_peak_bytes > 0 && run->moment_bytes != run->device_peak_bytes)
        fprintf(out, " (%.1f%% of the device peak)", 100.0 * (double)run->moment_bytes / (double)run->device_peak_bytes);
    fputs(":\n", out);
    for (size_t i = 0; i < run->n_moment_parts && i < TEXT_MOMENT_PARTS; i++) {
        tpa_moment_part_words(&run->moment_parts[i], words, sizeof words);
        tpa_format_bytes(run->moment_parts[i].bytes, bytes, sizeof bytes);
        fprintf(out, "          %-50s %10s\n", tpa_term(words), bytes);
    }
    if (run->n_moment_parts > TEXT_MOMENT_PARTS) {
        int64_t rest = 0;
        for (size_t i = TEXT_MOMENT_PARTS; i < run->n_moment_parts; i++) rest += run->moment_parts[i].bytes;
        tpa_format_bytes(rest, bytes, sizeof bytes);
        snprintf(words, sizeof words, "... %zu more", run->n_moment_parts - TEXT_MOMENT_PARTS);
        fprintf(out, "          %-50s %10s\n", words, bytes);
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
    if (run->device_peak_bytes > 0) put_device_peak_text(out, run);
    if (run->moment_bytes > 0) put_moment_text(out, run);
}

static void put_moment_json(FILE *out, const tpa_run_t *run) {
    if (run->moment_bytes <= 0) {
        fputs("null", out);
        return;
    }
    fprintf(out, "{\"step\":%" PRId64 ",\"bytes\":%" PRId64 ",\"parts\":[", run->moment_step, run->moment_bytes);
    for (size_t i = 0; i < run->n_moment_parts; i++) {
        fputs(i ? ",{\"kind\":" : "{\"kind\":", out);
        tpa_put_json_string(out, run->moment_parts[i].kind);
        fputs(",\"owner\":", out);
        tpa_put_json_string_or_null(out, run->moment_parts[i].owner);
        fprintf(out, ",\"bytes\":%" PRId64 ",\"blocks\":%" PRId64 "}", run->moment_parts[i].bytes,
                run->moment_parts[i].blocks);
    }
    fputs("]}", out);
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
    fputs("],\"moment\":", out);
    put_moment_json(out, run);
    fputs(",\"device_peak\":", out);
    if (run->device_peak_bytes <= 0) {
        fputs("null}", out);
        return;
    }
    char reached[32] = "null";
    if (run->device_peak_step >= 0) snprintf(reached, sizeof reached, "%" PRId64, run->device_peak_step);
    fprintf(out, "{\"bytes\":%" PRId64 ",\"step\":%s,\"phase\":", run->device_peak_bytes, reached);
    tpa_put_json_string_or_null(out, run->device_peak_phase);
    fputs(",\"owner\":", out);
    tpa_put_json_string_or_null(out, run->device_peak_owner);
    fputs(",\"audit\":", out);
    tpa_put_json_string_or_null(out, run->device_peak_audit);
    if (run->device_peak_audit)
        fprintf(out, ",\"audit_step\":%" PRId64 ",\"audit_bytes\":%" PRId64 "}}", run->device_peak_audit_step,
                run->device_peak_audit_bytes);
    else
        fputs(",\"audit_step\":null,\"audit_bytes\":null}}", out);
}
