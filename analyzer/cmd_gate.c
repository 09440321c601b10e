/* cmd_gate.c - `tpaudit gate`: the CI gate. Fails (exit 1) when error
 * findings retain more than --max-retained bytes on any rank or when more
 * than --max-findings findings reach --fail-on; with --baseline (databases
 * or a JSON report) only what is new or grew counts. An inconclusive run
 * exits 3 unless --allow-incomplete.
 *
 * Defaults: the rules given are the rules judged.  With neither
 * --max-retained nor --max-findings, both apply with limit 0 (any error
 * finding fails); with only one of them, only that one applies, so
 * `--max-retained 100MiB` gates on retained bytes alone. */
#include "findings.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fputs("usage: tpaudit gate [--max-retained SIZE] [--max-findings N] [--fail-on error|warning]\n"
          "                    [--baseline PATH] [--allow-incomplete] [--format text|junit] PATH...\n"
          "  --max-retained SIZE  retained bytes of error findings allowed on any one rank\n"
          "                       (0, 512KiB, 64mib, 1.5GiB, 2GB; units in any case)\n"
          "  --max-findings N     findings at or above --fail-on allowed\n"
          "  --fail-on LEVEL      error (default) or warning\n"
          "  --baseline PATH      count only findings new or grown against this run\n"
          "                       (its databases, or its JSON report)\n"
          "  Only the rules given are judged; with neither limit given, both are 0.\n"
          "  --allow-incomplete   judge an incomplete run instead of exiting 3\n"
          "exit: 0 passed, 1 failed, 2 usage or bad input, 3 inconclusive\n",
          out);
}

/* Marks findings new or grown against the baseline; returns how many. */
static void mark_new(tpa_report_t *r, const tpa_report_t *base) {
    for (size_t i = 0; i < r->n_findings; i++) {
        tpa_finding_t *f = &r->findings[i];
        f->is_new = 1;
        for (size_t j = 0; j < base->n_findings; j++) {
            const tpa_finding_t *b = &base->findings[j];
            if (tpa_same_finding(b, f) && f->retained_bytes <= b->retained_bytes) { f->is_new = 0; break; }
        }
    }
}

static void add_rule(tpa_report_t *r, const char *rule, int64_t limit, int64_t measured, int64_t rank, int passed) {
    tpa_gate_rule_t *v = realloc(r->rules, (r->n_rules + 1) * sizeof *v);
    if (!v) return;
    r->rules = v;
    r->rules[r->n_rules++] = (tpa_gate_rule_t){tpa_strdup(rule), limit, measured, rank, 0, passed};
}

int tpa_cmd_gate(int argc, char **argv) {
    static const struct option opts[] = {{"max-retained", required_argument, 0, 'r'}, {"max-findings", required_argument, 0, 'n'},
                                         {"fail-on", required_argument, 0, 'l'}, {"baseline", required_argument, 0, 'b'},
                                         {"allow-incomplete", no_argument, 0, 'a'}, {"format", required_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int64_t max_retained = 0, max_findings = 0;
    int fail_on_warning = 0, allow_incomplete = 0, junit = 0, gave_retained = 0, gave_findings = 0;
    const char *baseline = NULL;
    int c, size_rc;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'r':
            gave_retained = 1;
            if ((size_rc = tpa_parse_size(optarg, &max_retained))) {
                fprintf(stderr, "tpaudit: bad SIZE '%s' for --max-retained (%s)\n", tpa_term(optarg),
                        size_rc == -2 ? "too large: at most 8 EiB" : "a number and a unit, e.g. 0, 512KiB, 64MiB, 1.5GiB");
                return TPA_EXIT_USAGE;
            }
            break;
        case 'n':
            gave_findings = 1;
            errno = 0;
            max_findings = strtoll(optarg, &end, 10);
            if (end == optarg || *end || max_findings < 0 || errno) {
                fprintf(stderr, "tpaudit: bad --max-findings '%s' (a whole number, 0 or more)\n", tpa_term(optarg));
                return TPA_EXIT_USAGE;
            }
            break;
        case 'l':
            if (!strcmp(optarg, "warning")) fail_on_warning = 1;
            else if (strcmp(optarg, "error")) { fprintf(stderr, "tpaudit: --fail-on takes error or warning\n"); return TPA_EXIT_USAGE; }
            break;
        case 'b': baseline = optarg; break;
        case 'a': allow_incomplete = 1; break;
        case 'f':
            if (!strcmp(optarg, "junit")) junit = 1;
            else if (strcmp(optarg, "text")) { fprintf(stderr, "tpaudit: gate --format takes text or junit\n"); return TPA_EXIT_USAGE; }
            break;
        case 'h': usage(stdout); return TPA_EXIT_OK;
        default: tpa_option_error("gate", c, argv); return TPA_EXIT_USAGE;
        }
    }
    if (optind >= argc) { fputs("tpaudit: gate: no PATH given (see tpaudit gate --help)\n", stderr); return TPA_EXIT_USAGE; }
    if (!gave_retained && !gave_findings) gave_retained = gave_findings = 1;
    tpa_report_t r, base;
    memset(&base, 0, sizeof base);
    if (tpa_load_or_say(argc - optind, argv + optind, 0, &r)) { tpa_report_free(&r); return TPA_EXIT_USAGE; }
    if (baseline) {
        char *bp[1] = {(char *)baseline};
        if (tpa_load_or_say(1, bp, 1, &base)) { tpa_report_free(&r); tpa_report_free(&base); return TPA_EXIT_USAGE; }
        mark_new(&r, &base);
    } else {
        for (size_t i = 0; i < r.n_findings; i++) r.findings[i].is_new = 1;
    }
    r.has_gate = 1;
    int passed = 1;
    /* Retained bytes per rank; a process without a rank is its own group. */
    for (size_t i = 0; i < r.n_runs && gave_retained; i++) {
        int ranked = r.runs[i].has_rank;
        int64_t rank = ranked ? r.runs[i].rank : -1, retained = 0;
        int seen = 0;
        for (size_t k = 0; k < i && ranked; k++) if (r.runs[k].has_rank && r.runs[k].rank == rank) seen = 1;
        if (seen) continue;
        for (size_t j = 0; j < r.n_findings; j++) {
            const tpa_finding_t *f = &r.findings[j];
            int mine = ranked ? f->rank == rank : f->run_index == i;
            if (mine && f->is_error && f->is_new) retained = tpa_add_bytes(retained, f->retained_bytes);
        }
        int ok = retained <= max_retained;
        passed &= ok;
        add_rule(&r, "max-retained", max_retained, retained, rank, ok);
        if (!ranked) r.rules[r.n_rules - 1].pid = r.runs[i].pid;
    }
    int64_t counted = 0;
    for (size_t j = 0; j < r.n_findings; j++)
        if (r.findings[j].is_new && (r.findings[j].is_error || fail_on_warning)) counted++;
    if (gave_findings) {
        int ok = counted <= max_findings;
        passed &= ok;
        add_rule(&r, fail_on_warning ? "max-findings (warning and above)" : "max-findings (errors)", max_findings, counted, -1, ok);
    }
    r.gate_passed = passed;
    FILE *out = stdout;
    for (size_t i = 0; i < r.n_rules; i++) {
        const tpa_gate_rule_t *g = &r.rules[i];
        char lim[32], got[32], rank[32];
        if (!strcmp(g->rule, "max-retained")) { tpa_format_bytes(g->limit, lim, sizeof lim); tpa_format_bytes(g->measured, got, sizeof got); }
        else { snprintf(lim, sizeof lim, "%lld", (long long)g->limit); snprintf(got, sizeof got, "%lld", (long long)g->measured); }
        if (g->rank >= 0) snprintf(rank, sizeof rank, "rank %lld", (long long)g->rank);
        else if (g->pid) snprintf(rank, sizeof rank, "pid %lld (no rank)", (long long)g->pid);
        else snprintf(rank, sizeof rank, "all ranks");
        if (!junit) fprintf(out, "gate: %-4s %s on %s: measured %s, limit %s%s\n", g->passed ? "ok" : "FAIL", g->rule, rank, got, lim,
                            g->passed ? "" : " (over the limit)");
    }
    int code = passed ? TPA_EXIT_OK : TPA_EXIT_GATE;
    if (r.inconclusive && !allow_incomplete) {
        for (size_t i = 0; i < r.n_runs; i++)
            if (r.runs[i].inconclusive)
                fprintf(stderr, "tpaudit: %s: inconclusive: %s\n", tpa_term(r.runs[i].file), tpa_term(r.runs[i].why_inconclusive));
        code = TPA_EXIT_INCONCLUSIVE;
    }
    if (junit) tpa_render_junit(&r, out);
    else fprintf(out, "gate: %s\n", code == TPA_EXIT_OK ? "passed" : code == TPA_EXIT_GATE ? "FAILED" : "inconclusive");
    tpa_report_free(&r);
    tpa_report_free(&base);
    return code;
}
