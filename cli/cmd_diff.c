/* cmd_diff.c - `tpaudit diff OLD NEW`: findings that appeared, disappeared
 * or grew between two runs, matched by rank, kind and tensor name (a
 * memory_growth finding by its holder, grown when its rate per step rose),
 * then the modules whose activations at the peak changed (diff_peak.c).
 * Each side is a database, a directory of them, or a JSON report.  Exit 1
 * when a finding appeared or grew (a regression), 0 otherwise or with
 * --exit-zero, 2 on bad usage or input. */
#include "analyzer.h"
#include "verbs.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fputs("usage: tpaudit diff [--exit-zero] OLD NEW\n"
          "  Lists findings that appeared, disappeared or grew from OLD to NEW (each a\n"
          "  database, a directory of them, or a JSON report), then the modules whose\n"
          "  activations at the peak got bigger or smaller (by more than 1%).\n"
          "  --exit-zero  exit 0 even when a finding appeared or grew\n"
          "exit: 0 nothing appeared or grew, 1 something did, 2 usage or bad input\n",
          out);
}

static const tpa_finding_t *match(const tpa_report_t *r, const tpa_finding_t *f) {
    for (size_t i = 0; i < r->n_findings; i++) {
        const tpa_finding_t *g = &r->findings[i];
        if (tpa_same_finding(g, f)) return g;
    }
    return NULL;
}

/* A finding's bytes as diff shows them: retained, or "+196.0 MiB/step" when it grows. */
static void format_measure(const tpa_finding_t *f, int64_t measure, char *buf, size_t len) {
    char bytes[32];
    tpa_format_bytes(measure, bytes, sizeof bytes);
    snprintf(buf, len, tpa_finding_grows(f) ? "+%s/step" : "%s", bytes);
}

static void line(const char *what, const tpa_finding_t *f, int64_t old_bytes) {
    char b[48], o[48], rank[32];
    format_measure(f, tpa_finding_measure(f), b, sizeof b);
    format_measure(f, old_bytes, o, sizeof o);
    if (f->rank >= 0)
        snprintf(rank, sizeof rank, "rank %lld", (long long)f->rank);
    else
        snprintf(rank, sizeof rank, "no rank");
    printf("%-11s %-8s %-20s %-40s %s%s%s\n", what, rank, tpa_term(tpa_kind_label(f->kind)),
           tpa_term(f->name ? f->name : "(unnamed)"), old_bytes >= 0 ? o : "", old_bytes >= 0 ? " -> " : "", b);
}

int tpa_cmd_diff(int argc, char **argv) {
    static const struct option opts[] = {
        {"exit-zero", no_argument, 0, 'z'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int exit_zero = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c != 'z') return tpa_option_help_or_error("diff", c, argv, usage);
        exit_zero = 1;
    }
    if (argc - optind != 2) {
        fputs("tpaudit: diff: needs OLD and NEW (see tpaudit diff --help)\n", stderr);
        return TPA_EXIT_USAGE;
    }
    tpa_report_t a, b;
    if (tpa_load_or_say(1, &argv[optind], 1, &a)) {
        tpa_report_free(&a);
        return TPA_EXIT_USAGE;
    }
    if (tpa_load_or_say(1, &argv[optind + 1], 1, &b)) {
        tpa_report_free(&a);
        tpa_report_free(&b);
        return TPA_EXIT_USAGE;
    }
    int changes = 0, regressions = 0;
    for (size_t i = 0; i < b.n_findings; i++) {
        const tpa_finding_t *old = match(&a, &b.findings[i]);
        if (!old) {
            line("appeared", &b.findings[i], -1);
            changes++;
            regressions++;
        } else if (tpa_finding_measure(&b.findings[i]) > tpa_finding_measure(old)) {
            line("grew", &b.findings[i], tpa_finding_measure(old));
            changes++;
            regressions++;
        }
    }
    for (size_t i = 0; i < a.n_findings; i++)
        if (!match(&b, &a.findings[i])) {
            line("disappeared", &a.findings[i], -1);
            changes++;
        }
    changes += (int)tpa_diff_peaks(&a, &b);
    if (!changes) puts("no changes");
    tpa_report_free(&a);
    tpa_report_free(&b);
    if (fflush(stdout)) return TPA_EXIT_USAGE;
    return regressions && !exit_zero ? TPA_EXIT_GATE : TPA_EXIT_OK;
}
