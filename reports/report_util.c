/*
 * report_util.c - a finding's view shared by the renderers and the
 * analyzer (the escapers are common/escape.c's).
 */
#include "reports.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char *tpa_severity(const tpa_finding_t *f) { return f->is_error ? "error" : "warning"; }

int tpa_finding_is_view(const tpa_finding_t *f) {
    return f->storage_offset > 0 || (f->nbytes > 0 && f->storage_bytes > f->nbytes);
}

void tpa_format_view(const tpa_finding_t *f, char *buf, size_t len) {
    char own[32], whole[32];
    tpa_format_bytes(f->nbytes, own, sizeof own);
    tpa_format_bytes(f->storage_bytes, whole, sizeof whole);
    if (f->storage_offset > 0) /* 0 is also what a file from before storage_offset, or a negative one, gives */
        snprintf(buf, len, "a view at element offset %" PRId64 " of a %s storage (%s of its own)", f->storage_offset,
                 whole, own);
    else
        snprintf(buf, len, "a view of a %s storage (%s of its own)", whole, own);
}

int64_t tpa_rank_retained(const tpa_report_t *r, int64_t rank) {
    int64_t sum = 0;
    for (size_t i = 0; i < r->n_findings; i++)
        if (r->findings[i].rank == rank && r->findings[i].is_error)
            sum = tpa_add_bytes(sum, r->findings[i].retained_bytes);
    return sum;
}

void tpa_put_json_frames(FILE *out, const tpa_frames_t *fr, int native) {
    fputc('[', out);
    for (size_t i = 0; i < fr->n; i++) {
        const tpa_frame_t *f = &fr->v[i];
        const char *texts[] = {f->file, f->function, f->module};
        const char *keys[] = {"{\"file\":", ",\"function\":", ",\"module\":"};
        if (i) fputc(',', out);
        for (int k = 0; k < (native ? 3 : 2); k++) {
            fputs(keys[k], out);
            if (texts[k])
                tpa_put_json_string(out, texts[k]);
            else
                fputs("null", out);
            if (k == 0) fprintf(out, ",\"line\":%ld", f->line);
            if (k == 1 && native) fprintf(out, ",\"address\":%" PRIu64, f->address);
        }
        fputc('}', out);
    }
    fputc(']', out);
}
