/*
 * report_json.c - the JSON report, format "tpaudit-report" version 1
 * (contract in docs/REPORT.md, schema docs/report.schema.json).  A missing
 * rank is null everywhere.  Output is deterministic: findings come
 * sorted, by_kind keys are sorted, by_rank follows the order of the
 * databases, and nothing about the time of the analysis is written.
 */
#include "finding_kinds.h"
#include "reports.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Writes a parsed JSON value again through the escaping writers, so what
 * goes out is valid JSON with valid UTF-8 whatever was stored. */
static void put_json_value(FILE *out, const tpa_json_t *v) {
    int64_t n;
    switch (tpa_json_type(v)) {
    case TPA_JSON_STRING: tpa_put_json_string(out, tpa_json_str(v)); break;
    case TPA_JSON_NUMBER:
        if (tpa_json_int(v, &n) == 0)
            fprintf(out, "%" PRId64, n);
        else
            fputs("null", out); /* only integers are stored */
        break;
    case TPA_JSON_ARRAY:
        fputc('[', out);
        for (size_t i = 0; i < tpa_json_len(v); i++) {
            if (i) fputc(',', out);
            put_json_value(out, tpa_json_at(v, i));
        }
        fputc(']', out);
        break;
    default: fputs("null", out);
    }
}

/* argv and shapes are stored as JSON arrays (of strings, of integers):
 * such an array is written as an array; anything else is written as the
 * stored text in a string, and a missing value as null. */
static void put_stored_array(FILE *out, const char *s, int want) {
    if (!s) {
        fputs("null", out);
        return;
    }
    tpa_json_t *v = tpa_json_parse(s, strlen(s));
    int ok = tpa_json_type(v) == TPA_JSON_ARRAY;
    int64_t n;
    for (size_t i = 0; ok && i < tpa_json_len(v); i++) {
        const tpa_json_t *e = tpa_json_at(v, i);
        ok = want == TPA_JSON_STRING ? tpa_json_type(e) == TPA_JSON_STRING : tpa_json_int(e, &n) == 0;
    }
    if (ok)
        put_json_value(out, v);
    else
        tpa_put_json_string(out, s);
    tpa_json_free(v);
}

static void put_shape(FILE *out, const char *s) { put_stored_array(out, s, TPA_JSON_NUMBER); }

static void put_rank(FILE *out, int has_rank, int64_t rank) {
    if (has_rank)
        fprintf(out, "%" PRId64, rank);
    else
        fputs("null", out);
}

static void put_opt_string(FILE *out, const char *s) {
    if (s)
        tpa_put_json_string(out, s);
    else
        fputs("null", out);
}

/* `key` (its text with the comma and colon) and then the value. */
static void put_key_string(FILE *out, const char *key, const char *s) {
    fputs(key, out);
    put_opt_string(out, s);
}

static void put_run(FILE *out, const tpa_run_t *run) {
    fputs("{\"file\":", out);
    tpa_put_json_string(out, run->file);
    fputs(",\"host\":", out);
    tpa_put_json_string(out, run->host);
    fprintf(out, ",\"pid\":%" PRId64 ",\"rank\":", run->pid);
    put_rank(out, run->has_rank, run->rank);
    fputs(",\"world_size\":", out);
    put_rank(out, run->has_world_size, run->world_size);
    fputs(",\"argv\":", out);
    put_stored_array(out, run->argv, TPA_JSON_STRING);
    fprintf(out, ",\"complete\":%s,\"dropped_events\":%" PRId64 ",\"cupti\":", run->complete ? "true" : "false",
            run->dropped_events);
    tpa_put_json_string(out, run->cupti);
    fputs(",\"python\":", out);
    tpa_put_json_string(out, run->python);
    fprintf(out, ",\"audits\":%d,\"inconclusive\":%s,\"why_inconclusive\":", run->n_audits,
            run->inconclusive ? "true" : "false");
    put_opt_string(out, run->inconclusive ? run->why_inconclusive : NULL);
    fputs(",\"audit_points\":[", out);
    for (size_t i = 0; i < run->n_marks; i++)
        fprintf(out, "%s{\"step\":%" PRId64 ",\"stale_bytes\":%" PRId64 "%s%s}", i ? "," : "", run->marks[i].step,
                run->marks[i].stale_bytes, run->marks[i].blind ? ",\"saw_model\":false" : "",
                run->marks[i].no_optimizer ? ",\"saw_optimizer\":false" : "");
    fputs("],\"memory_by_library\":[", out);
    for (size_t i = 0; i < run->n_by_library; i++) {
        fputs(i ? ",{\"library\":" : "{\"library\":", out);
        tpa_put_json_string(out, run->by_library[i].library);
        fprintf(out, ",\"bytes\":%" PRId64 ",\"allocations\":%" PRId64 "}", run->by_library[i].bytes,
                run->by_library[i].allocations);
    }
    fputc(']', out);
    tpa_put_ledger_json(out, run);
    tpa_put_peak_json(out, run);
    fputc('}', out);
}

/* The same for a shape and for frames. */
static void put_key_shape(FILE *out, const char *key, const char *shape) {
    fputs(key, out);
    put_shape(out, shape);
}

static void put_key_frames(FILE *out, const char *key, const tpa_frames_t *fr, int native) {
    fputs(key, out);
    tpa_put_json_frames(out, fr, native);
}

static void put_finding(FILE *out, const tpa_finding_t *f) {
    fputs("{\"kind\":", out);
    tpa_put_json_string(out, f->kind);
    fprintf(out, ",\"severity\":\"%s\",\"rank\":", tpa_severity(f));
    put_rank(out, f->rank >= 0, f->rank);
    fprintf(out, ",\"step\":%" PRId64, f->step);
    if (f->label) put_key_string(out, ",\"label\":", f->label); /* only a label the program gave its audit */
    fputs(",\"holder\":{\"kind\":", out);
    put_opt_string(out, f->holder_kind);
    put_key_string(out, ",\"class\":", f->holder_class);
    put_key_string(out, ",\"path\":", f->holder_path);
    put_key_string(out, "},\"tensor\":{\"name\":", f->name);
    fputs(",\"aliases\":[", out);
    for (size_t i = 0; i < f->n_aliases; i++) {
        if (i) fputc(',', out);
        tpa_put_json_string(out, f->aliases[i]);
    }
    fputc(']', out);
    put_key_shape(out, ",\"shape\":", f->shape);
    put_key_shape(out, ",\"local_shape\":", f->local_shape);
    put_key_string(out, ",\"dtype\":", f->dtype);
    put_key_string(out, ",\"device\":", f->device);
    put_key_string(out, ",\"type\":", f->type);
    if (f->storage_offset > 0) /* left out when 0, as before views were recorded */
        fprintf(out, ",\"storage_offset\":%" PRId64, f->storage_offset);
    fprintf(out, "},\"retained_bytes\":%" PRId64 ",\"state_bytes\":%" PRId64 ",\"has_grad\":%s,\"successor\":",
            f->retained_bytes, f->state_bytes, f->has_grad ? "true" : "false");
    if (f->has_successor) {
        put_key_string(out, "{\"name\":", f->succ_name);
        put_key_shape(out, ",\"shape\":", f->succ_shape);
        put_key_shape(out, ",\"local_shape\":", f->succ_local_shape);
        put_key_string(out, ",\"relation\":", f->relation);
        fputc('}', out);
    } else {
        fputs("null", out);
    }
    put_key_frames(out, ",\"created_at\":", &f->created_at, 0);
    put_key_frames(out, ",\"replaced_at\":", &f->replaced_at, 0);
    fputs(",\"later_replacements\":[", out);
    for (size_t i = 0; i < f->n_later_replacements; i++) {
        put_key_string(out, i ? ",{\"name\":" : "{\"name\":", f->later_replacements[i].name);
        put_key_frames(out, ",\"at\":", &f->later_replacements[i].at, 0);
        fputc('}', out);
    }
    fputc(']', out);
    fputs(",\"allocation\":", out);
    if (f->has_allocation) {
        fprintf(out, "{\"address\":%" PRIu64 ",\"bytes\":%" PRId64 ",\"stack\":", f->alloc_address, f->alloc_bytes);
        tpa_put_json_frames(out, &f->alloc_stack, 1);
        fputc('}', out);
    } else {
        fputs("null", out);
    }
    tpa_put_growth_json(out, f);
    tpa_put_oom_json(out, f);
    put_key_string(out, ",\"message\":", f->message);
    fputc('}', out);
}

static int64_t kind_count(const tpa_report_t *r, const char *kind) {
    int64_t n = 0;
    for (size_t i = 0; i < r->n_findings; i++) n += strcmp(r->findings[i].kind, kind) == 0;
    return n;
}

/* Findings per kind, keys in sorted order, kinds without findings left out. */
static void put_by_kind(FILE *out, const tpa_report_t *r) {
    const char *last = NULL;
    for (int first = 1;; first = 0) {
        const tpa_kind_t *next = NULL;
        for (size_t k = 0; k < tpa_n_kinds; k++) {
            const tpa_kind_t *c = &tpa_kinds[k];
            int after = !last || strcmp(c->json_key, last) > 0;
            if (after && (!next || strcmp(c->json_key, next->json_key) < 0) && kind_count(r, c->name)) next = c;
        }
        if (!next) return;
        fprintf(out, "%s\"%s\":%" PRId64, first ? "" : ",", next->json_key, kind_count(r, next->name));
        last = next->json_key;
    }
}

/* One entry per rank; a process without a rank is its own entry (with its
 * pid), as the gate judges it (tpa_rank_groups). */
static void put_by_rank(FILE *out, const tpa_report_t *r) {
    tpa_rank_group_t *g;
    size_t n;
    if (tpa_rank_groups(r, 0, &g, &n)) return;
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "%s{\"rank\":", i ? "," : "");
        put_rank(out, g[i].rank >= 0, g[i].rank);
        fputs(",\"pid\":", out);
        put_rank(out, g[i].rank < 0, g[i].pid);
        fprintf(out, ",\"retained_bytes\":%" PRId64 "}", g[i].retained);
    }
    free(g);
}

/* What a gate rule measures: bytes (max-retained, max-peak), bytes per
 * step (max-growth) or findings (max-findings). */
static const char *rule_unit(const char *rule) {
    return !strcmp(rule, "max-retained") || !strcmp(rule, "max-peak") ? "bytes"
           : !strcmp(rule, "max-growth")                            ? "bytes/step"
                                                                    : "findings";
}

/* The gate's rules as a JSON array; the gate's own document (`document`)
 * adds each rule's unit and outcome in words. */
static void put_gate_rules(FILE *out, const tpa_report_t *r, int document) {
    fputc('[', out);
    for (size_t i = 0; i < r->n_rules; i++) {
        const tpa_gate_rule_t *g = &r->rules[i];
        fprintf(out, "%s{\"rule\":", i ? (document ? ",\n" : ",") : (document ? "\n" : ""));
        tpa_put_json_string(out, g->rule);
        fprintf(out, ",\"limit\":%" PRId64 ",\"measured\":%" PRId64 ",\"rank\":", g->limit, g->measured);
        put_rank(out, g->rank >= 0, g->rank);
        fputs(",\"pid\":", out);
        put_rank(out, g->pid != 0, g->pid);
        fprintf(out, ",\"passed\":%s", g->passed ? "true" : "false");
        if (document) fprintf(out, ",\"unit\":\"%s\",\"outcome\":\"%s\"", rule_unit(g->rule), g->passed ? "passed" : "failed");
        if (document && g->peak) { /* max-peak: the largest modules of the peak it measured */
            fputs(",\"modules\":", out);
            tpa_put_peak_modules_json(out, g->peak, TPA_GATE_PEAK_MODULES);
        }
        fputc('}', out);
    }
    fputc(']', out);
}

static void put_gate(FILE *out, const tpa_report_t *r) {
    if (!r->has_gate) {
        fputs("null", out);
        return;
    }
    fprintf(out, "{\"passed\":%s,\"rules\":", r->gate_passed ? "true" : "false");
    put_gate_rules(out, r, 0);
    fputc('}', out);
}

int tpa_render_gate_json(const tpa_report_t *r, FILE *out) {
    fprintf(out, "{\"format\":\"tpaudit-gate\",\"version\":1,\"outcome\":\"%s\",\"passed\":%s,\"rules\":",
            r->gate_inconclusive ? "inconclusive" : r->gate_passed ? "passed" : "failed",
            r->gate_passed && !r->gate_inconclusive ? "true" : "false");
    put_gate_rules(out, r, 1);
    fputs("}\n", out);
    return ferror(out) ? -1 : 0;
}

int tpa_render_json(const tpa_report_t *r, FILE *out) {
    fputs("{\"format\":\"tpaudit-report\",\"version\":1,\n\"runs\":[", out);
    for (size_t i = 0; i < r->n_runs; i++) {
        fputs(i ? ",\n" : "\n", out);
        put_run(out, &r->runs[i]);
    }
    fputs("],\n\"findings\":[", out);
    int64_t total = 0, state_total = 0;
    for (size_t i = 0; i < r->n_findings; i++) {
        fputs(i ? ",\n" : "\n", out);
        put_finding(out, &r->findings[i]);
        if (r->findings[i].is_error) {
            total = tpa_add_bytes(total, r->findings[i].retained_bytes);
            state_total = tpa_add_bytes(state_total, r->findings[i].state_bytes);
        }
    }
    fprintf(out, "],\n\"totals\":{\"retained_bytes\":%" PRId64 ",\"state_bytes\":%" PRId64 ",\"by_kind\":{", total,
            state_total);
    put_by_kind(out, r);
    fputs("},\"by_rank\":[", out);
    put_by_rank(out, r);
    fputs("]},\n\"gate\":", out);
    put_gate(out, r);
    fputs("}\n", out);
    return ferror(out) ? -1 : 0;
}
