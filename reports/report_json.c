/*
 * report_json.c - the JSON report, format "tpaudit-report" version 1
 * (contract in ARCHITECTURE.md).  Output is deterministic: findings come
 * sorted, by_kind/by_rank keys are sorted, and nothing about the time of
 * the analysis is written.
 */
#include "tpa_model.h"

#include <inttypes.h>
#include <string.h>

/* Shapes and argv are JSON arrays in the database; anything else is
 * written as a string so the document stays valid. */
static void put_json_array_or_string(FILE *out, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    int ok = n >= 2 && s[0] == '[' && s[n - 1] == ']';
    for (size_t i = 0; ok && i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == '<' || s[i] == '>')
            ok = 0;
    if (ok && s[0] == '[') {
        /* only digits, commas, spaces, minus allowed unless it is argv */
        fputs(s, out);
    } else if (s) {
        tpa_put_json_string(out, s);
    } else {
        fputs("null", out);
    }
}

static int shape_is_plain(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n < 2 || s[0] != '[' || s[n - 1] != ']')
        return 0;
    for (size_t i = 1; i + 1 < n; i++)
        if (!strchr("0123456789,- ", s[i]))
            return 0;
    return 1;
}

static void put_shape(FILE *out, const char *s)
{
    if (shape_is_plain(s))
        fputs(s, out);
    else if (s)
        tpa_put_json_string(out, s);
    else
        fputs("null", out);
}

static void put_opt_string(FILE *out, const char *s)
{
    if (s)
        tpa_put_json_string(out, s);
    else
        fputs("null", out);
}

static void put_frames(FILE *out, const tpa_frames_t *fr, int native)
{
    fputc('[', out);
    for (size_t i = 0; i < fr->n; i++) {
        const tpa_frame_t *f = &fr->v[i];
        if (i)
            fputc(',', out);
        fputs("{\"file\":", out);
        put_opt_string(out, f->file);
        fprintf(out, ",\"line\":%ld,\"function\":", f->line);
        put_opt_string(out, f->function);
        if (native) {
            fprintf(out, ",\"address\":%" PRIu64 ",\"module\":", f->address);
            put_opt_string(out, f->module);
        }
        fputc('}', out);
    }
    fputc(']', out);
}

static void put_run(FILE *out, const tpa_run_t *run)
{
    fputs("{\"file\":", out);
    tpa_put_json_string(out, run->file);
    fputs(",\"host\":", out);
    tpa_put_json_string(out, run->host);
    fprintf(out, ",\"pid\":%" PRId64 ",\"rank\":", run->pid);
    if (run->has_rank)
        fprintf(out, "%" PRId64, run->rank);
    else
        fputs("null", out);
    fputs(",\"world_size\":", out);
    if (run->has_world_size)
        fprintf(out, "%" PRId64, run->world_size);
    else
        fputs("null", out);
    fputs(",\"argv\":", out);
    put_json_array_or_string(out, run->argv);
    fprintf(out, ",\"complete\":%s,\"dropped_events\":%" PRId64 ",\"cupti\":",
            run->complete ? "true" : "false", run->dropped_events);
    tpa_put_json_string(out, run->cupti);
    fputs(",\"python\":", out);
    tpa_put_json_string(out, run->python);
    fprintf(out, ",\"audits\":%d,\"inconclusive\":%s", run->n_audits,
            run->inconclusive ? "true" : "false");
    fputs(",\"audit_points\":[", out);
    for (size_t i = 0; i < run->n_marks; i++)
        fprintf(out, "%s{\"step\":%" PRId64 ",\"stale_bytes\":%" PRId64 "}", i ? "," : "", run->marks[i].step,
                run->marks[i].stale_bytes);
    fputs("],\"memory_by_library\":[", out);
    for (size_t i = 0; i < run->n_by_library; i++) {
        fputs(i ? ",{\"library\":" : "{\"library\":", out);
        tpa_put_json_string(out, run->by_library[i].library);
        fprintf(out, ",\"bytes\":%" PRId64 ",\"allocations\":%" PRId64 "}", run->by_library[i].bytes,
                run->by_library[i].allocations);
    }
    fputs("]}", out);
}

static void put_finding(FILE *out, const tpa_finding_t *f)
{
    fputs("{\"kind\":", out);
    tpa_put_json_string(out, f->kind);
    fprintf(out, ",\"severity\":\"%s\",\"rank\":", tpa_severity(f));
    if (f->rank >= 0)
        fprintf(out, "%" PRId64, f->rank);
    else
        fputs("null", out);
    fprintf(out, ",\"step\":%" PRId64 ",\"holder\":{\"kind\":", f->step);
    put_opt_string(out, f->holder_kind);
    fputs(",\"class\":", out);
    put_opt_string(out, f->holder_class);
    fputs(",\"path\":", out);
    put_opt_string(out, f->holder_path);
    fputs("},\"tensor\":{\"name\":", out);
    put_opt_string(out, f->name);
    fputs(",\"shape\":", out);
    put_shape(out, f->shape);
    fputs(",\"local_shape\":", out);
    put_shape(out, f->local_shape);
    fputs(",\"dtype\":", out);
    put_opt_string(out, f->dtype);
    fputs(",\"device\":", out);
    put_opt_string(out, f->device);
    fputs(",\"type\":", out);
    put_opt_string(out, f->type);
    fprintf(out, "},\"retained_bytes\":%" PRId64 ",\"state_bytes\":%" PRId64 ",\"has_grad\":%s,\"successor\":",
            f->retained_bytes, f->state_bytes, f->has_grad ? "true" : "false");
    if (f->has_successor) {
        fputs("{\"name\":", out);
        put_opt_string(out, f->succ_name);
        fputs(",\"shape\":", out);
        put_shape(out, f->succ_shape);
        fputs(",\"local_shape\":", out);
        put_shape(out, f->succ_local_shape);
        fputs(",\"relation\":", out);
        put_opt_string(out, f->relation);
        fputc('}', out);
    } else {
        fputs("null", out);
    }
    fputs(",\"created_at\":", out);
    put_frames(out, &f->created_at, 0);
    fputs(",\"replaced_at\":", out);
    put_frames(out, &f->replaced_at, 0);
    fputs(",\"allocation\":", out);
    if (f->has_allocation) {
        fprintf(out, "{\"address\":%" PRIu64 ",\"bytes\":%" PRId64 ",\"stack\":", f->alloc_address,
                f->alloc_bytes);
        put_frames(out, &f->alloc_stack, 1);
        fputc('}', out);
    } else {
        fputs("null", out);
    }
    fputs(",\"message\":", out);
    put_opt_string(out, f->message);
    fputc('}', out);
}

int tpa_render_json(const tpa_report_t *r, FILE *out)
{
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
        if (r->findings[i].is_error)
            total += r->findings[i].retained_bytes, state_total += r->findings[i].state_bytes;
    }
    fprintf(out, "],\n\"totals\":{\"retained_bytes\":%" PRId64 ",\"state_bytes\":%" PRId64 ",\"by_kind\":{", total,
            state_total);
    static const char *kinds[] = {"orphan_state", "stale_map_entry", "stale_param",
                                  "state_shape_mismatch", "untrained_param"};
    int first = 1;
    for (size_t k = 0; k < 5; k++) {
        int64_t n = 0;
        for (size_t i = 0; i < r->n_findings; i++)
            n += strcmp(r->findings[i].kind, kinds[k]) == 0;
        if (!n)
            continue;
        fprintf(out, "%s\"%s\":%" PRId64, first ? "" : ",", kinds[k], n);
        first = 0;
    }
    fputs("},\"by_rank\":{", out);
    first = 1;
    for (size_t i = 0; i < r->n_runs; i++) {
        int64_t rank = r->runs[i].has_rank ? r->runs[i].rank : -1;
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= (r->runs[j].has_rank ? r->runs[j].rank : -1) == rank;
        if (seen)
            continue;
        fprintf(out, "%s\"%" PRId64 "\":%" PRId64, first ? "" : ",", rank,
                tpa_rank_retained(r, rank));
        first = 0;
    }
    fputs("}},\n\"gate\":", out);
    if (r->has_gate) {
        fprintf(out, "{\"passed\":%s,\"rules\":[", r->gate_passed ? "true" : "false");
        for (size_t i = 0; i < r->n_rules; i++) {
            const tpa_gate_rule_t *g = &r->rules[i];
            fprintf(out, "%s{\"rule\":", i ? "," : "");
            tpa_put_json_string(out, g->rule);
            fprintf(out, ",\"limit\":%" PRId64 ",\"measured\":%" PRId64 ",\"rank\":", g->limit,
                    g->measured);
            if (g->rank >= 0)
                fprintf(out, "%" PRId64, g->rank);
            else
                fputs("null", out);
            fprintf(out, ",\"passed\":%s}", g->passed ? "true" : "false");
        }
        fputs("]}", out);
    } else {
        fputs("null", out);
    }
    fputs("}\n", out);
    return ferror(out) ? -1 : 0;
}
