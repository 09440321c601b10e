/* report_oom.c - an out-of-memory finding as the reports show it: the
 * verdict's finding (the OOM that ended a run), its "oom" object in JSON
 * (docs/REPORT.md) and its facts, cause and stacks in the text report's
 * details.  The verdict line itself is the finding's message, made by the
 * rule (rules/out_of_memory.c). */
#include "stack_view.h"
#include "reports.h"

#include <inttypes.h>

const tpa_finding_t *tpa_top_oom(const tpa_report_t *r) {
    for (size_t i = 0; i < r->n_findings; i++)
        if (r->findings[i].oom && r->findings[i].is_error) return &r->findings[i];
    return NULL;
}

/* A byte count, or null when unknown (-1). */
static void put_bytes_or_null(FILE *out, const char *key, int64_t v) {
    if (v >= 0)
        fprintf(out, ",\"%s\":%" PRId64, key, v);
    else
        fprintf(out, ",\"%s\":null", key);
}

static void put_text_or_null(FILE *out, const char *key, const char *s) {
    fprintf(out, ",\"%s\":", key);
    if (s)
        tpa_put_json_string(out, s);
    else
        fputs("null", out);
}

void tpa_put_oom_json(FILE *out, const tpa_finding_t *f) {
    const tpa_oom_t *o = f->oom;
    if (!o) return;
    fputs(",\"oom\":{\"source\":", out);
    tpa_put_json_string(out, o->source ? o->source : "?");
    put_text_or_null(out, "api", o->api);
    if (o->device >= 0)
        fprintf(out, ",\"device\":%" PRId64, o->device);
    else
        fputs(",\"device\":null", out);
    fprintf(out, ",\"requested_bytes\":%" PRId64, o->requested);
    put_bytes_or_null(out, "free_bytes", o->free_bytes);
    put_bytes_or_null(out, "total_bytes", o->total_bytes);
    put_bytes_or_null(out, "reserved_free_bytes", o->reserved_free);
    put_bytes_or_null(out, "largest_free_block", o->largest_free);
    put_bytes_or_null(out, "outside_bytes", o->outside_bytes);
    fprintf(out, ",\"count\":%" PRId64 ",\"caught\":%" PRId64 ",\"cause\":", o->count, o->caught);
    tpa_put_json_string(out, o->cause ? o->cause : "?");
    put_text_or_null(out, "cause_text", o->cause_text);
    put_text_or_null(out, "held", o->held && *o->held ? o->held : NULL);
    fputs(",\"python_stack\":", out);
    tpa_put_json_frames(out, &o->py_stack, 0);
    fputs(",\"native_stack\":", out);
    tpa_put_json_frames(out, &o->native_stack, 1);
    fputc('}', out);
}

void tpa_put_oom_text(FILE *out, const struct tpa_paths *paths, const tpa_finding_t *f) {
    const tpa_oom_t *o = f->oom;
    char a[32], b[32];
    if (!o) return;
    tpa_format_bytes(o->requested, a, sizeof a);
    fprintf(out, "      asked: %s by %s (%s)\n", a, tpa_term(o->api ? o->api : "?"), tpa_term(o->source ? o->source : "?"));
    if (o->reserved_free >= 0 || o->largest_free >= 0) {
        tpa_format_bytes(o->reserved_free, a, sizeof a);
        tpa_format_bytes(o->largest_free, b, sizeof b);
        fprintf(out, "      allocator: %s reserved but free, largest free block %s\n", o->reserved_free >= 0 ? a : "?",
                o->largest_free >= 0 ? b : "?");
    }
    fprintf(out, "      cause: %s (%s)\n", tpa_term(o->cause_text ? o->cause_text : "?"), tpa_term(o->cause ? o->cause : "?"));
    tpa_put_text_stack(out, paths, "allocated at", &o->py_stack);
    tpa_put_text_stack(out, paths, "allocated at (native)", &o->native_stack);
}
