/* cmd_gate.c - `tpaudit gate`: the CI gate. Fails (exit 1) when error
 * findings retain more than --max-retained bytes on any rank or when more
 * than --max-findings findings reach --fail-on; with --baseline (databases
 * or a JSON report) only what is new or grew counts. An inconclusive run
 * exits 3 unless --allow-incomplete, when no rule failed: a failure found in
 * the runs that could be judged stands (exit 1), as the verdict line's order
 * has it (STALE TENSORS before INCONCLUSIVE).
 *
 * Defaults: the rules given are the rules judged.  With none of
 * --max-retained, --max-growth and --max-findings, the first and last apply
 * with limit 0 (any error finding fails, memory_growth too); with only some
 * of them, only those apply, so `--max-retained 100MiB` gates on retained
 * bytes alone.  --max-growth judges each rank's fastest-growing holder in
 * bytes per step, and memory_growth findings then count toward
 * --max-findings no more.  --max-peak judges each rank's peak of
 * activations (the most its step saved for backward, by module), naming
 * its three largest modules. */
#include "analyzer.h"
#include "verbs.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fputs("usage: tpaudit gate [--max-retained SIZE] [--max-growth SIZE] [--max-peak SIZE] [--max-findings N]\n"
          "                    [--fail-on error|warning] [--baseline PATH] [--allow-incomplete]\n"
          "                    [--format text|junit|json] PATH...\n"
          "  --max-retained SIZE  retained bytes of error findings allowed on any one rank\n"
          "                       (0, 512KiB, 64mib, 1.5GiB, 2GB; units in any case)\n"
          "  --max-growth SIZE    bytes per step one holder's memory may grow on any one rank\n"
          "                       (memory_growth findings are then judged by it alone)\n"
          "  --max-peak SIZE      bytes a step may save for backward on any one rank, at its\n"
          "                       peak (the three largest modules are named)\n"
          "  --max-findings N     findings at or above --fail-on allowed\n"
          "  --fail-on LEVEL      error (default) or warning\n"
          "  --baseline PATH      count only findings new or grown against this run\n"
          "                       (its databases, or its JSON report)\n"
          "  Only the rules given are judged; with no limit given, --max-retained 0 and\n"
          "  --max-findings 0 (any error, memory growth too, fails).\n"
          "  --allow-incomplete   judge an incomplete run instead of exiting 3\n"
          "  --format FORMAT      text (default), junit, or json: each rule's measurement,\n"
          "                       limit and outcome as one document\n"
          "exit: 0 passed, 1 failed, 2 usage or bad input, 3 inconclusive\n",
          out);
}

/* Marks findings new or grown against the baseline. */
static void mark_new(tpa_report_t *r, const tpa_report_t *base) {
    for (size_t i = 0; i < r->n_findings; i++) {
        tpa_finding_t *f = &r->findings[i];
        f->is_new = 1;
        for (size_t j = 0; j < base->n_findings; j++) {
            const tpa_finding_t *b = &base->findings[j];
            if (tpa_same_finding(b, f) && tpa_finding_measure(f) <= tpa_finding_measure(b)) {
                f->is_new = 0;
                break;
            }
        }
    }
}

static void add_rule(tpa_report_t *r, const char *rule, int64_t limit, int64_t measured, int64_t rank, int passed) {
    tpa_gate_rule_t *v = realloc(r->rules, (r->n_rules + 1) * sizeof *v);
    if (!v) return;
    r->rules = v;
    r->rules[r->n_rules++] = (tpa_gate_rule_t){tpa_strdup(rule), limit, measured, rank, 0, passed, NULL};
}

/* How the gate prints its verdict (--format). */
enum gate_format { GATE_TEXT, GATE_JUNIT, GATE_JSON };

typedef struct gate_options {
    int64_t max_retained, max_findings, max_growth, max_peak;
    int fail_on_warning, allow_incomplete, gave_retained, gave_findings, gave_growth, gave_peak;
    enum gate_format format;
    const char *baseline;
} gate_options_t;

/* optarg, the value of `option`, as the index of `words` it names (the last
 * given wins) into *index: TPA_OPTIONS_OK, or a usage error naming them. */
static int one_of(const char *option, const char *const *words, int n_words, int *index) {
    for (int i = 0; i < n_words; i++)
        if (!strcmp(optarg, words[i])) {
            *index = i;
            return TPA_OPTIONS_OK;
        }
    fprintf(stderr, "tpaudit: %s takes %s", option, words[0]);
    for (int i = 1; i < n_words; i++) fprintf(stderr, "%s%s", i + 1 < n_words ? ", " : " or ", words[i]);
    fputc('\n', stderr);
    return TPA_EXIT_USAGE;
}

/* optarg as the SIZE of `option` into *bytes: TPA_OPTIONS_OK, else a usage error. */
static int take_size(const char *option, int64_t *bytes) {
    int size_rc = tpa_parse_size(optarg, bytes);
    if (!size_rc) return TPA_OPTIONS_OK;
    fprintf(stderr, "tpaudit: bad SIZE '%s' for %s (%s)\n", tpa_term(optarg), option,
            size_rc == -2 ? "too large: at most 8 EiB" : "a number and a unit, e.g. 0, 512KiB, 64MiB, 1.5GiB");
    return TPA_EXIT_USAGE;
}

/* One option into `o`: TPA_OPTIONS_OK, else the exit code. */
static int take_option(int c, gate_options_t *o, char **argv) {
    static const char *const levels[] = {"error", "warning"}, *const formats[] = {"text", "junit", "json"};
    int chosen = 0, rc;
    char *end;
    switch (c) {
    case 'r': o->gave_retained = 1; return take_size("--max-retained", &o->max_retained);
    case 'g': o->gave_growth = 1; return take_size("--max-growth", &o->max_growth);
    case 'p': o->gave_peak = 1; return take_size("--max-peak", &o->max_peak);
    case 'n':
        o->gave_findings = 1;
        errno = 0;
        o->max_findings = strtoll(optarg, &end, 10);
        if (end == optarg || *end || o->max_findings < 0 || errno) {
            fprintf(stderr, "tpaudit: bad --max-findings '%s' (a whole number, 0 or more)\n", tpa_term(optarg));
            return TPA_EXIT_USAGE;
        }
        return TPA_OPTIONS_OK;
    case 'l':
        rc = one_of("--fail-on", levels, 2, &chosen);
        o->fail_on_warning = chosen;
        return rc;
    case 'b': o->baseline = optarg; return TPA_OPTIONS_OK;
    case 'a': o->allow_incomplete = 1; return TPA_OPTIONS_OK;
    case 'f':
        rc = one_of("gate --format", formats, 3, &chosen);
        o->format = (enum gate_format)chosen;
        return rc;
    default: return tpa_option_help_or_error("gate", c, argv, usage);
    }
}

/* The options and PATHs: TPA_OPTIONS_OK when the gate runs, else the exit code. */
static int parse_options(int argc, char **argv, gate_options_t *o) {
    static const struct option opts[] = {{"max-retained", required_argument, 0, 'r'},
                                         {"max-growth", required_argument, 0, 'g'},
                                         {"max-peak", required_argument, 0, 'p'},
                                         {"max-findings", required_argument, 0, 'n'},
                                         {"fail-on", required_argument, 0, 'l'},
                                         {"baseline", required_argument, 0, 'b'},
                                         {"allow-incomplete", no_argument, 0, 'a'},
                                         {"format", required_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c, rc;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1)
        if ((rc = take_option(c, o, argv)) != TPA_OPTIONS_OK) return rc;
    if (optind >= argc) {
        fputs("tpaudit: gate: no PATH given (see tpaudit gate --help)\n", stderr);
        return TPA_EXIT_USAGE;
    }
    if (!o->gave_retained && !o->gave_findings && !o->gave_growth && !o->gave_peak)
        o->gave_retained = o->gave_findings = 1;
    return TPA_OPTIONS_OK;
}

/* The max-growth rule of each group: its fastest-growing holder (new or
 * grown memory_growth findings) against `limit` bytes per step; 1 when all pass. */
static int judge_growth(tpa_report_t *r, const tpa_rank_group_t *groups, size_t n, int64_t limit) {
    int passed = 1;
    for (size_t i = 0; i < n; i++) {
        int64_t fastest = 0;
        for (size_t j = 0; j < r->n_findings; j++) {
            const tpa_finding_t *f = &r->findings[j];
            int in_group = groups[i].rank >= 0 ? f->rank == groups[i].rank
                                               : f->rank < 0 && r->runs[f->run_index].pid == groups[i].pid;
            if (in_group && f->is_new && tpa_finding_grows(f) && f->growth_per_step > fastest)
                fastest = f->growth_per_step;
        }
        add_rule(r, "max-growth", limit, fastest, groups[i].rank, fastest <= limit);
        if (groups[i].rank < 0) r->rules[r->n_rules - 1].pid = groups[i].pid;
        passed &= fastest <= limit;
    }
    return passed;
}

/* The max-peak rule of each group: the largest peak of activations of its
 * runs against `limit` bytes; 1 when all pass. */
static int judge_peak(tpa_report_t *r, const tpa_rank_group_t *groups, size_t n, int64_t limit) {
    int passed = 1;
    for (size_t i = 0; i < n; i++) {
        const tpa_run_t *largest = NULL;
        for (size_t j = 0; j < r->n_runs; j++) {
            const tpa_run_t *run = &r->runs[j];
            int in_group = groups[i].rank >= 0 ? run->has_rank && run->rank == groups[i].rank
                                               : !run->has_rank && run->pid == groups[i].pid;
            if (in_group && run->has_peak && (!largest || run->peak_bytes > largest->peak_bytes)) largest = run;
        }
        int64_t measured = largest ? largest->peak_bytes : 0;
        add_rule(r, "max-peak", limit, measured, groups[i].rank, measured <= limit);
        if (groups[i].rank < 0) r->rules[r->n_rules - 1].pid = groups[i].pid;
        r->rules[r->n_rules - 1].peak = largest;
        passed &= measured <= limit;
    }
    return passed;
}

/* The rules into the report model: retained bytes per rank (a process
 * without a rank is its own group, a helper process is in none), then the
 * finding count. */
static void judge_rules(tpa_report_t *r, const gate_options_t *o) {
    r->has_gate = 1;
    int passed = 1;
    tpa_rank_group_t *groups = NULL;
    size_t n_groups = 0;
    if ((o->gave_retained || o->gave_growth || o->gave_peak) && tpa_rank_groups(r, 1, &groups, &n_groups))
        passed = 0; /* out of memory: fail */
    for (size_t i = 0; o->gave_retained && i < n_groups; i++) {
        int ok = groups[i].retained <= o->max_retained;
        passed &= ok;
        add_rule(r, "max-retained", o->max_retained, groups[i].retained, groups[i].rank, ok);
        if (groups[i].rank < 0) r->rules[r->n_rules - 1].pid = groups[i].pid;
    }
    if (o->gave_growth) passed &= judge_growth(r, groups, n_groups, o->max_growth);
    if (o->gave_peak) passed &= judge_peak(r, groups, n_groups, o->max_peak);
    free(groups);
    int64_t counted = 0;
    for (size_t j = 0; j < r->n_findings; j++) /* growth, when --max-growth judges it, is not counted again */
        if (r->findings[j].is_new && (r->findings[j].is_error || o->fail_on_warning) &&
            !(o->gave_growth && tpa_finding_grows(&r->findings[j])))
            counted++;
    if (o->gave_findings) {
        int ok = counted <= o->max_findings;
        passed &= ok;
        add_rule(r, o->fail_on_warning ? "max-findings (warning and above)" : "max-findings (errors)", o->max_findings,
                 counted, -1, ok);
    }
    r->gate_passed = passed;
    r->gate_inconclusive = passed && r->inconclusive && !o->allow_incomplete;
}

int tpa_cmd_gate(int argc, char **argv) {
    gate_options_t o = {0};
    int rc = parse_options(argc, argv, &o);
    if (rc != TPA_OPTIONS_OK) return rc;
    tpa_report_t r, base;
    memset(&base, 0, sizeof base);
    /* The text verdict needs each finding's kind and bytes, a baseline its
     * name as the report gives it, JUnit its message too. */
    int needs = (o.format == GATE_JUNIT ? TPA_NEED_ALL : o.baseline ? TPA_NEED_DETAILS : TPA_NEED_FINDINGS) |
                (o.gave_peak ? TPA_NEED_PEAK : 0);
    if (tpa_load_or_say_for(argc - optind, argv + optind, 0, needs, &r)) {
        tpa_report_free(&r);
        return TPA_EXIT_USAGE;
    }
    if (o.baseline) {
        char *bp[1] = {(char *)o.baseline};
        if (tpa_load_or_say_for(1, bp, 1, TPA_NEED_DETAILS, &base)) { /* names as a report gives them */
            tpa_report_free(&r);
            tpa_report_free(&base);
            return TPA_EXIT_USAGE;
        }
        mark_new(&r, &base);
    } else {
        for (size_t i = 0; i < r.n_findings; i++) r.findings[i].is_new = 1;
    }
    judge_rules(&r, &o);
    int code = r.gate_inconclusive ? TPA_EXIT_INCONCLUSIVE : r.gate_passed ? TPA_EXIT_OK : TPA_EXIT_GATE;
    for (size_t i = 0; i < r.n_runs && r.inconclusive && !o.allow_incomplete; i++)
        if (r.runs[i].inconclusive)
            fprintf(stderr, "tpaudit: %s: inconclusive: %s\n", tpa_term(r.runs[i].file),
                    tpa_term(r.runs[i].why_inconclusive));
    static int (*const render[])(const tpa_report_t *, FILE *) = {
        [GATE_TEXT] = tpa_render_gate_text, [GATE_JUNIT] = tpa_render_junit, [GATE_JSON] = tpa_render_gate_json};
    render[o.format](&r, stdout);
    tpa_report_free(&r);
    tpa_report_free(&base);
    return code;
}
