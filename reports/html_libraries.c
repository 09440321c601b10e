/*
 * html_libraries.c - the HTML report's table of device memory by library:
 * one row per library that called the allocator (in the order the shown
 * runs first name it), its bytes per rank when there are at most eight,
 * over all ranks, its allocations, and a bar on one scale.
 */
#include "html_page.h"

#include <stdlib.h>
#include <string.h>

/* The runs the page shows, in its order. */
typedef struct shown {
    const tpa_report_t *r;
    const size_t *runs;
    size_t n_shown;
} shown_t;

/* A library's name as the table compares it ("" when none). */
static const char *lib_name(const tpa_lib_memory_t *m) { return m->library ? m->library : ""; }

/* Bytes and allocations of library `lib` in one run. */
static int64_t lib_bytes_in(const tpa_run_t *run, const char *lib, int64_t *allocations) {
    int64_t bytes = 0;
    for (size_t m = 0; m < run->n_by_library; m++)
        if (!strcmp(lib_name(&run->by_library[m]), lib)) {
            bytes += run->by_library[m].bytes;
            if (allocations) *allocations += run->by_library[m].allocations;
        }
    return bytes;
}

/* The library names of the shown runs, each once, in the order of first
 * appearance: a malloc'd array (NULL when out of memory) of *n names. */
static const char **unique_libraries(const shown_t *s, size_t *n) {
    size_t cap = 1;
    for (size_t i = 0; i < s->n_shown; i++) cap += s->r->runs[s->runs[i]].n_by_library;
    const char **libs = malloc(cap * sizeof *libs);
    *n = 0;
    for (size_t i = 0; libs && i < s->n_shown; i++) {
        const tpa_run_t *run = &s->r->runs[s->runs[i]];
        for (size_t k = 0; k < run->n_by_library; k++) {
            const char *lib = lib_name(&run->by_library[k]);
            size_t seen = 0;
            while (seen < *n && strcmp(libs[seen], lib)) seen++;
            if (seen == *n) libs[(*n)++] = lib;
        }
    }
    return libs;
}

/* One library's row: per rank (when shown), all ranks, allocations, a bar. */
static void put_lib_row(FILE *out, const shown_t *s, const char *lib, int per_rank, int64_t largest) {
    int64_t allocations = 0, total = 0;
    for (size_t j = 0; j < s->n_shown; j++) total += lib_bytes_in(&s->r->runs[s->runs[j]], lib, &allocations);
    fputs("<tr><td><code>", out);
    html_put(out, lib);
    fputs("</code></td>", out);
    for (size_t j = 0; per_rank && j < s->n_shown; j++) {
        const tpa_run_t *other = &s->r->runs[s->runs[j]];
        if (!other->n_by_library) continue;
        fputs("<td class=\"num\">", out);
        html_put_bytes(out, lib_bytes_in(other, lib, NULL));
        fputs("</td>", out);
    }
    fputs("<td class=\"num\">", out);
    html_put_bytes(out, total);
    fprintf(out,
            "</td><td class=\"num\">%lld</td><td><span class=\"libbar\" style=\"width:%.0fpx\"></span></td></tr>\n",
            (long long)allocations, total > 0 ? 1 + 200.0 * (double)total / (double)largest : 0.0);
}

int html_put_memory_by_library(FILE *out, const tpa_report_t *r, const size_t *runs, size_t n_runs) {
    const shown_t shown = {r, runs, n_runs}, *s = &shown;
    fputs("<h2 id=\"memory\">Device memory by library</h2>\n", out);
    size_t cols = 0;
    for (size_t i = 0; i < s->n_shown; i++) cols += r->runs[s->runs[i]].n_by_library > 0;
    if (!cols) {
        fputs(
            "<p class=\"note\">No device allocations were recorded (CUPTI did not run), so there is nothing to attribute.</p>\n",
            out);
        return 0;
    }
    size_t n_libs;
    const char **libs = unique_libraries(s, &n_libs);
    if (!libs) return -1;
    int per_rank = cols <= 8;
    int64_t largest = 1;
    fputs(
        "<p class=\"note\">Device memory live at each rank's judged audit, by the library that called the allocator.</p>\n"
        "<table class=\"libs\"><thead><tr><th>library</th>",
        out);
    for (size_t i = 0; per_rank && i < s->n_shown; i++) {
        if (!r->runs[s->runs[i]].n_by_library) continue;
        fputs("<th class=\"num\">", out);
        html_put_run_name(out, &r->runs[s->runs[i]]);
        fputs("</th>", out);
    }
    fputs("<th class=\"num\">all ranks</th><th class=\"num\">allocations</th><th></th></tr></thead><tbody>\n", out);
    for (size_t l = 0; l < n_libs; l++) {
        int64_t total = 0;
        for (size_t j = 0; j < s->n_shown; j++) total += lib_bytes_in(&r->runs[s->runs[j]], libs[l], NULL);
        if (total > largest) largest = total;
    }
    for (size_t l = 0; l < n_libs; l++) put_lib_row(out, s, libs[l], per_rank, largest);
    free(libs);
    fputs("</tbody></table>\n", out);
    return 0;
}
