/* report_junit.c - JUnit XML: one testsuite per process (database), named
 * by its program and rank, tpaudit.<program>.rank<R>, or tpaudit.<program>
 * for a process without a rank, so that a CI system can follow a test from
 * run to run (a pid changes every time); one
 * testcase per rule (each finding kind, the completeness check), with a
 * failure carrying that process's findings; then the gate's rules.  A
 * suite only ever counts its own process's findings. */
#include "finding_kinds.h"
#include "stack_view.h"
#include "reports.h"

#include <stdlib.h>
#include <string.h>

static const char *suite_name(const tpa_run_t *run, char *buf, size_t len) {
    char program[64];
    tpa_run_program(run, program, sizeof program);
    if (run->has_rank)
        snprintf(buf, len, "tpaudit.%s.rank%lld", program, (long long)run->rank);
    else
        snprintf(buf, len, "tpaudit.%s", program);
    return buf;
}

/* One process's suite: a testcase per finding kind, then completeness. */
static void put_suite(const tpa_report_t *r, size_t i, const char *suite, FILE *out) {
    const tpa_run_t *run = &r->runs[i];
    size_t failures = 0, tests = 0;
    for (size_t k = 0; k < tpa_n_kinds; k++) {
        tests++;
        for (size_t j = 0; j < r->n_findings; j++)
            if (r->findings[j].run_index == i && !strcmp(r->findings[j].kind, tpa_kinds[k].name) &&
                r->findings[j].is_error) {
                failures++;
                break;
            }
    }
    tests++;
    failures += run->inconclusive ? 1 : 0;
    fprintf(out, "  <testsuite name=\"%s\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"0\">\n", suite, tests,
            failures);
    for (size_t k = 0; k < tpa_n_kinds; k++) {
        fprintf(out, "    <testcase classname=\"%s\" name=\"%s\">", suite, tpa_kinds[k].junit_name);
        int opened = 0;
        for (size_t j = 0; j < r->n_findings; j++) {
            const tpa_finding_t *f = &r->findings[j];
            if (f->run_index != i || strcmp(f->kind, tpa_kinds[k].name)) continue;
            if (!opened) {
                fprintf(out, f->is_error ? "\n      <failure type=\"%s\" message=\"" : "\n      <system-out>",
                        tpa_kinds[k].junit_name);
                if (f->is_error) {
                    tpa_put_xml_escaped(out, f->message);
                    fputs("\">", out);
                }
                opened = f->is_error ? 1 : 2;
            }
            tpa_put_xml_escaped(out, f->message);
            fputs("\n", out);
        }
        if (opened) fputs(opened == 1 ? "</failure>\n    " : "</system-out>\n    ", out);
        fputs("</testcase>\n", out);
    }
    fprintf(out, "    <testcase classname=\"%s\" name=\"complete\">", suite);
    if (run->inconclusive) {
        fputs("<failure type=\"inconclusive\" message=\"", out);
        tpa_put_xml_escaped(out, run->why_inconclusive);
        fputs("\"/>", out);
    }
    fputs("</testcase>\n  </testsuite>\n", out);
}

typedef char suite_name_t[128];

/* Every run's suite name; one name shared by several databases (a restart,
 * an exec, workers of one program) gets ".<n>" in the report's order. */
static suite_name_t *suite_names(const tpa_report_t *r) {
    size_t n = r->n_runs;
    suite_name_t *names = calloc(2 * n + 1, sizeof *names), *base = names + n;
    if (!names) return NULL;
    for (size_t i = 0; i < n; i++) suite_name(&r->runs[i], base[i], sizeof base[i]);
    for (size_t i = 0; i < n; i++) {
        size_t same = 0, before = 0;
        for (size_t j = 0; j < n; j++)
            if (!strcmp(base[j], base[i])) {
                same++;
                before += j < i;
            }
        snprintf(names[i], sizeof names[i], same > 1 ? "%s.%zu" : "%s", base[i], before + 1);
    }
    return names;
}

int tpa_render_junit(const tpa_report_t *r, FILE *out) {
    suite_name_t *names = suite_names(r);
    if (!names) return -1;
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"tpaudit\">\n", out);
    for (size_t i = 0; i < r->n_runs; i++) put_suite(r, i, names[i], out);
    free(names);
    if (r->has_gate) {
        size_t failed = 0;
        for (size_t i = 0; i < r->n_rules; i++) failed += !r->rules[i].passed;
        fprintf(out, "  <testsuite name=\"tpaudit.gate\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"0\">\n",
                r->n_rules, failed);
        for (size_t i = 0; i < r->n_rules; i++) {
            const tpa_gate_rule_t *g = &r->rules[i];
            if (g->rank >= 0)
                fprintf(out, "    <testcase classname=\"tpaudit.gate\" name=\"%s rank %lld\">", g->rule,
                        (long long)g->rank);
            else if (g->pid)
                fprintf(out, "    <testcase classname=\"tpaudit.gate\" name=\"%s pid %lld\">", g->rule,
                        (long long)g->pid);
            else
                fprintf(out, "    <testcase classname=\"tpaudit.gate\" name=\"%s\">", g->rule);
            if (!g->passed)
                fprintf(out, "<failure type=\"gate\" message=\"measured %lld over limit %lld\"/>",
                        (long long)g->measured, (long long)g->limit);
            fputs("</testcase>\n", out);
        }
        fputs("  </testsuite>\n", out);
    }
    fputs("</testsuites>\n", out);
    return ferror(out) ? -1 : 0;
}
