/* cmd_diff.c - `tpaudit diff OLD NEW`: findings that appeared, disappeared
 * or grew between two runs, matched by rank, kind and tensor name. */
#include "analyzer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int load(const char *path, tpa_report_t *r) {
    memset(r, 0, sizeof *r);
    char why[4200] = "";
    char **files; size_t n_files;
    char *p[1] = {(char *)path};
    if (tpa_collect_paths(1, p, &files, &n_files, why, sizeof why)) { fprintf(stderr, "tpaudit: %s\n", why); memset(r, 0, sizeof *r); return -1; }
    int rc = tpa_analyze(files, n_files, r, why, sizeof why);
    for (size_t i = 0; i < n_files; i++) free(files[i]);
    free(files);
    if (rc) fprintf(stderr, "tpaudit: %s\n", why);
    return rc;
}

static const tpa_finding_t *match(const tpa_report_t *r, const tpa_finding_t *f) {
    for (size_t i = 0; i < r->n_findings; i++) {
        const tpa_finding_t *g = &r->findings[i];
        if (g->rank == f->rank && !strcmp(g->kind, f->kind) && !strcmp(g->name ? g->name : "", f->name ? f->name : "")) return g;
    }
    return NULL;
}

static void line(const char *what, const tpa_finding_t *f, int64_t old_bytes) {
    char b[32], o[32];
    tpa_format_bytes(f->retained_bytes, b, sizeof b);
    tpa_format_bytes(old_bytes, o, sizeof o);
    printf("%-11s rank %lld %-20s %-40s %s%s%s\n", what, (long long)f->rank, f->kind, f->name ? f->name : "(unnamed)",
           old_bytes >= 0 ? o : "", old_bytes >= 0 ? " -> " : "", b);
}

int tpa_cmd_diff(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        puts("usage: tpaudit diff OLD NEW\n  Lists findings that appeared, disappeared or grew from OLD to NEW.");
        return TPA_EXIT_OK;
    }
    if (argc != 3) { fputs("usage: tpaudit diff OLD NEW\n", stderr); return TPA_EXIT_USAGE; }
    tpa_report_t a, b;
    if (load(argv[1], &a)) { tpa_report_free(&a); return TPA_EXIT_USAGE; }
    if (load(argv[2], &b)) { tpa_report_free(&a); tpa_report_free(&b); return TPA_EXIT_USAGE; }
    int changes = 0;
    for (size_t i = 0; i < b.n_findings; i++) {
        const tpa_finding_t *old = match(&a, &b.findings[i]);
        if (!old) { line("appeared", &b.findings[i], -1); changes++; }
        else if (b.findings[i].retained_bytes > old->retained_bytes) { line("grew", &b.findings[i], old->retained_bytes); changes++; }
    }
    for (size_t i = 0; i < a.n_findings; i++)
        if (!match(&b, &a.findings[i])) { line("disappeared", &a.findings[i], -1); changes++; }
    if (!changes) puts("no changes");
    tpa_report_free(&a);
    tpa_report_free(&b);
    return TPA_EXIT_OK;
}
