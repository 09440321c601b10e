/*
 * report_util.c - escaping, byte formatting and freeing shared by the
 * renderers and the analyzer.
 */
#include "tpa_model.h"

#include <inttypes.h>
#include <stdlib.h>

void tpa_put_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        case '<': fputs("\\u003c", out); break;
        case '>': fputs("\\u003e", out); break;
        case '&': fputs("\\u0026", out); break;
        default:
            if (*p < 0x20)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

void tpa_put_xml_escaped(FILE *out, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        default:
            if (*p < 0x20 && *p != '\n' && *p != '\t')
                fputc('?', out); /* not representable in XML 1.0 */
            else
                fputc(*p, out);
        }
    }
}

void tpa_format_bytes(int64_t bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while ((v >= 1024.0 || v <= -1024.0) && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%" PRId64 " B", bytes);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
}

const char *tpa_severity(const tpa_finding_t *f)
{
    return f->is_error ? "error" : "warning";
}

int64_t tpa_rank_retained(const tpa_report_t *r, int64_t rank)
{
    int64_t sum = 0;
    for (size_t i = 0; i < r->n_findings; i++)
        if (r->findings[i].rank == rank && r->findings[i].is_error)
            sum += r->findings[i].retained_bytes;
    return sum;
}

void tpa_frames_free(tpa_frames_t *fr)
{
    for (size_t i = 0; i < fr->n; i++) {
        free(fr->v[i].file);
        free(fr->v[i].function);
        free(fr->v[i].module);
    }
    free(fr->v);
    fr->v = NULL;
    fr->n = 0;
}

void tpa_finding_free(tpa_finding_t *f)
{
    char **strs[] = {&f->kind, &f->holder_kind, &f->holder_class, &f->holder_path, &f->name,
                     &f->shape, &f->local_shape, &f->dtype, &f->device, &f->type,
                     &f->succ_name, &f->succ_shape, &f->succ_local_shape, &f->relation,
                     &f->message};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
    tpa_frames_free(&f->created_at);
    tpa_frames_free(&f->replaced_at);
    tpa_frames_free(&f->alloc_stack);
}

void tpa_report_free(tpa_report_t *r)
{
    for (size_t i = 0; i < r->n_runs; i++) {
        tpa_run_t *run = &r->runs[i];
        free(run->file);
        free(run->host);
        free(run->argv);
        free(run->cupti);
        free(run->python);
        free(run->why_inconclusive);
        free(run->points);
        free(run->marks);
        for (size_t j = 0; j < run->n_by_library; j++)
            free(run->by_library[j].library);
        free(run->by_library);
    }
    free(r->runs);
    for (size_t i = 0; i < r->n_findings; i++)
        tpa_finding_free(&r->findings[i]);
    free(r->findings);
    for (size_t i = 0; i < r->n_rules; i++)
        free(r->rules[i].rule);
    free(r->rules);
    r->runs = NULL;
    r->findings = NULL;
    r->rules = NULL;
    r->n_runs = r->n_findings = r->n_rules = 0;
}
