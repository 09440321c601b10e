/* report_read.c - reads a JSON report written by `tpaudit report --format
 * json` (format tpaudit-report, version 1) back into a report model, so a
 * kept report can serve as the baseline of `gate` and either side of
 * `diff`.  Only what matching needs is read: each finding's kind,
 * severity, rank, tensor name and aliases, retained bytes and growth per
 * step, and the runs that have a peak of activations: their rank and
 * peak (`diff`). */
#include "analyzer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_REPORT_BYTES ((off_t)1 << 30)

/* The file's text when `path` is a regular file that starts with '{'
 * (after white space), else NULL. */
static char *read_json_text(const char *path, size_t *len) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > MAX_REPORT_BYTES) return NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return NULL;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > MAX_REPORT_BYTES) {
        close(fd);
        return NULL;
    }
    char *text = malloc((size_t)sb.st_size + 1);
    size_t n = 0;
    while (text && n < (size_t)sb.st_size) {
        ssize_t got = read(fd, text + n, (size_t)sb.st_size - n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        n += (size_t)got;
    }
    close(fd);
    if (!text) return NULL;
    text[n] = 0;
    const char *p = text;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p != '{') {
        free(text);
        return NULL;
    }
    *len = n;
    return text;
}

int tpa_is_json_report(const char *path) {
    size_t len;
    char *text = read_json_text(path, &len);
    free(text);
    return text != NULL;
}

static int64_t rank_of(const tpa_json_t *v) {
    int64_t rank;
    return tpa_json_int(v, &rank) == 0 && rank >= 0 && rank < INT32_MAX ? rank : -1;
}

/* A finding's tensor.aliases, its other names (absent from reports written
 * before they were). */
static void read_aliases(const tpa_json_t *v, tpa_finding_t *out) {
    size_t n = tpa_json_type(v) == TPA_JSON_ARRAY ? tpa_json_len(v) : 0;
    out->aliases = n ? calloc(n, sizeof *out->aliases) : NULL;
    for (size_t i = 0; out->aliases && i < n; i++)
        if (tpa_json_str(tpa_json_at(v, i))) out->aliases[out->n_aliases++] = tpa_strdup(tpa_json_str(tpa_json_at(v, i)));
}

/* The peak of activations of JSON run `v` into `run`; 1 when it has one. */
static int read_peak(const tpa_json_t *v, tpa_run_t *run) {
    const tpa_json_t *peak = tpa_json_get(v, "peak"), *modules = tpa_json_get(peak, "modules");
    int64_t bytes = 0;
    if (tpa_json_int(tpa_json_get(peak, "bytes"), &bytes) || tpa_json_type(modules) != TPA_JSON_ARRAY) return 0;
    size_t n = tpa_json_len(modules) < TPA_PEAK_MODULES ? tpa_json_len(modules) : TPA_PEAK_MODULES;
    run->peak_modules = calloc(n ? n : 1, sizeof *run->peak_modules);
    if (!run->peak_modules) return 0;
    for (size_t i = 0; i < n; i++) {
        const tpa_json_t *m = tpa_json_at(modules, i);
        const char *module = tpa_json_str(tpa_json_get(m, "module"));
        int64_t b = 0;
        if (!module || tpa_json_int(tpa_json_get(m, "bytes"), &b)) continue;
        run->peak_modules[run->n_peak_modules++] = (tpa_peak_module_t){tpa_strdup(module), tpa_sane_bytes(b)};
    }
    run->has_peak = 1;
    run->peak_bytes = tpa_sane_bytes(bytes);
    run->has_rank = (run->rank = rank_of(tpa_json_get(v, "rank"))) >= 0;
    return 1;
}

/* The runs of `doc` that have a peak, into r (the others carry nothing its readers use). */
static void read_runs(const tpa_json_t *doc, tpa_report_t *r) {
    const tpa_json_t *runs = tpa_json_get(doc, "runs");
    size_t n = tpa_json_type(runs) == TPA_JSON_ARRAY ? tpa_json_len(runs) : 0;
    r->runs = n ? calloc(n, sizeof *r->runs) : NULL;
    for (size_t i = 0; r->runs && i < n; i++) {
        tpa_run_t *run = &r->runs[r->n_runs];
        run->peak_step = -1;
        if (read_peak(tpa_json_at(runs, i), run)) {
            r->n_runs++;
        } else {
            free(run->peak_modules);
            memset(run, 0, sizeof *run);
        }
    }
}

int tpa_read_json_report(const char *path, tpa_report_t *r, char *why, size_t why_len) {
    memset(r, 0, sizeof *r);
    size_t len = 0;
    char *text = read_json_text(path, &len);
    tpa_json_t *doc = text ? tpa_json_parse(text, len) : NULL;
    free(text);
    const tpa_json_t *format = tpa_json_get(doc, "format"), *findings = tpa_json_get(doc, "findings");
    int64_t version = 0;
    if (!doc) {
        snprintf(why, why_len, "%s is not valid JSON", path);
        return -1;
    }
    if (!tpa_json_str(format) || strcmp(tpa_json_str(format), "tpaudit-report") ||
        tpa_json_type(findings) != TPA_JSON_ARRAY) {
        snprintf(why, why_len, "%s is JSON but not a tpaudit report", path);
        tpa_json_free(doc);
        return -1;
    }
    if (tpa_json_int(tpa_json_get(doc, "version"), &version) || version != 1) {
        snprintf(why, why_len, "%s is a tpaudit report of a version this tpaudit does not read (1)", path);
        tpa_json_free(doc);
        return -1;
    }
    size_t n = tpa_json_len(findings);
    r->findings = calloc(n ? n : 1, sizeof *r->findings);
    if (!r->findings) {
        tpa_json_free(doc);
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const tpa_json_t *f = tpa_json_at(findings, i);
        const char *kind = tpa_json_str(tpa_json_get(f, "kind")), *severity = tpa_json_str(tpa_json_get(f, "severity"));
        int64_t bytes = 0;
        if (!kind || !severity || tpa_json_int(tpa_json_get(f, "retained_bytes"), &bytes)) {
            snprintf(why, why_len, "%s: finding %zu lacks kind, severity or retained_bytes", path, i + 1);
            tpa_json_free(doc);
            return -1;
        }
        tpa_finding_t *out = &r->findings[r->n_findings++];
        out->kind = tpa_strdup(kind);
        out->is_error = !strcmp(severity, "error");
        out->rank = rank_of(tpa_json_get(f, "rank"));
        out->name = tpa_strdup(tpa_json_str(tpa_json_get(tpa_json_get(f, "tensor"), "name")));
        read_aliases(tpa_json_get(tpa_json_get(f, "tensor"), "aliases"), out);
        out->retained_bytes = tpa_sane_bytes(bytes);
        /* a memory_growth finding: its rate (absent from reports before it) */
        int64_t rate = 0;
        if (!tpa_json_int(tpa_json_get(tpa_json_get(f, "growth"), "bytes_per_step"), &rate))
            out->growth_per_step = tpa_sane_bytes(rate);
    }
    read_runs(doc, r);
    tpa_json_free(doc);
    return 0;
}
