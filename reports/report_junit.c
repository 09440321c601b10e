/* report_junit.c - JUnit XML: one testsuite per rank, one testcase per rule
 * (each finding kind, the completeness check, and the gate's rules), with
 * a failure carrying the findings' messages. */
#include "tpa_model.h"

#include <string.h>

static const char *KINDS[] = {"stale_param", "orphan_state", "state_shape_mismatch", "stale_map_entry", "untrained_param"};

int tpa_render_junit(const tpa_report_t *r, FILE *out) {
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"tpaudit\">\n", out);
    for (size_t i = 0; i < r->n_runs; i++) {
        const tpa_run_t *run = &r->runs[i];
        int64_t rank = run->has_rank ? run->rank : -1;
        size_t failures = 0, tests = 0;
        for (size_t k = 0; k < 5; k++) {
            tests++;
            for (size_t j = 0; j < r->n_findings; j++)
                if (r->findings[j].rank == rank && !strcmp(r->findings[j].kind, KINDS[k]) && r->findings[j].is_error) { failures++; break; }
        }
        tests++;
        failures += run->inconclusive ? 1 : 0;
        fprintf(out, "  <testsuite name=\"tpaudit.rank%lld\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"0\">\n", (long long)rank,
                tests, failures);
        for (size_t k = 0; k < 5; k++) {
            fprintf(out, "    <testcase classname=\"tpaudit.rank%lld\" name=\"%s\">", (long long)rank, KINDS[k]);
            int opened = 0;
            for (size_t j = 0; j < r->n_findings; j++) {
                const tpa_finding_t *f = &r->findings[j];
                if (f->rank != rank || strcmp(f->kind, KINDS[k])) continue;
                if (!opened) {
                    fprintf(out, f->is_error ? "\n      <failure type=\"%s\" message=\"" : "\n      <system-out>", KINDS[k]);
                    if (f->is_error) { tpa_put_xml_escaped(out, f->message); fputs("\">", out); }
                    opened = f->is_error ? 1 : 2;
                }
                tpa_put_xml_escaped(out, f->message);
                fputs("\n", out);
            }
            if (opened) fputs(opened == 1 ? "</failure>\n    " : "</system-out>\n    ", out);
            fputs("</testcase>\n", out);
        }
        fprintf(out, "    <testcase classname=\"tpaudit.rank%lld\" name=\"complete\">", (long long)rank);
        if (run->inconclusive) {
            fputs("<failure type=\"inconclusive\" message=\"", out);
            tpa_put_xml_escaped(out, run->why_inconclusive);
            fputs("\"/>", out);
        }
        fputs("</testcase>\n  </testsuite>\n", out);
    }
    if (r->has_gate) {
        size_t failed = 0;
        for (size_t i = 0; i < r->n_rules; i++) failed += !r->rules[i].passed;
        fprintf(out, "  <testsuite name=\"tpaudit.gate\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"0\">\n", r->n_rules, failed);
        for (size_t i = 0; i < r->n_rules; i++) {
            const tpa_gate_rule_t *g = &r->rules[i];
            fprintf(out, "    <testcase classname=\"tpaudit.gate\" name=\"%s rank %lld\">", g->rule, (long long)g->rank);
            if (!g->passed)
                fprintf(out, "<failure type=\"gate\" message=\"measured %lld over limit %lld\"/>", (long long)g->measured, (long long)g->limit);
            fputs("</testcase>\n", out);
        }
        fputs("  </testsuite>\n", out);
    }
    fputs("</testsuites>\n", out);
    return ferror(out) ? -1 : 0;
}
