/* cmd_memviz.c - `tpaudit report --format memory-viz`: one PyTorch memory
 * snapshot (a pickle for memory_viz and torch.cuda._memory_viz) per rank,
 * or per process of a run without ranks.  One run goes to FILE; several go
 * to FILE with ".rank<N>" (".pid<P>" for a process without a rank) put
 * before its suffix.  Every file is checked before any is written, and
 * each is written through a temporary file renamed into place. Exit 2 when
 * no run has device allocations (CPU only, CUPTI off) or --rank matches
 * none; a version-1 database is exported without owners, said in one note
 * (docs/MEMVIZ.md). */
#include "analyzer.h"
#include "verbs.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct memviz_job {
    const tpa_report_t *report;
    size_t run;
    const tpa_memviz_options_t *options;
} memviz_job_t;

static int write_memviz(const void *ctx, FILE *out) {
    const memviz_job_t *job = ctx;
    return tpa_render_memviz(job->report, job->run, job->options, out);
}

/* FILE with ".rank3" or ".pid42" before the suffix of its last component. */
static void file_for(const char *output, const tpa_run_t *run, char *buf, size_t len) {
    char tag[48];
    if (run->has_rank)
        snprintf(tag, sizeof tag, ".rank%lld", (long long)run->rank);
    else
        snprintf(tag, sizeof tag, ".pid%lld", (long long)run->pid);
    const char *base = strrchr(output, '/');
    base = base ? base + 1 : output;
    const char *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - output) : strlen(output);
    snprintf(buf, len, "%.*s%s%s", (int)stem, output, tag, output + stem);
}

static int has_device_memory(const tpa_run_t *run) { return run->device_memory && run->device_memory->n_events; }

int tpa_report_memviz(int n_paths, char **paths, const char *output, const tpa_memviz_options_t *options, int has_rank,
                      int64_t rank) {
    tpa_report_t report;
    memset(&report, 0, sizeof report);
    if (tpa_load_or_say_for(n_paths, paths, 0, TPA_NEED_DETAILS | TPA_NEED_OWNERS | TPA_NEED_DEVICE_MEMORY, &report)) {
        tpa_report_free(&report);
        return TPA_EXIT_USAGE;
    }
    size_t *chosen = calloc(report.n_runs ? report.n_runs : 1, sizeof *chosen), n = 0, of_rank = 0;
    const char *cupti = NULL;
    for (size_t i = 0; chosen && i < report.n_runs; i++) {
        const tpa_run_t *run = &report.runs[i];
        if (run->helper_of || (has_rank && (!run->has_rank || run->rank != rank))) continue;
        of_rank++;
        if (!cupti || (run->cupti && strcmp(run->cupti, "on"))) cupti = run->cupti;
        if (has_device_memory(run)) chosen[n++] = i;
    }
    int rc = TPA_EXIT_OK;
    if (!chosen) {
        fputs("tpaudit: report: out of memory\n", stderr);
        rc = TPA_EXIT_USAGE;
    } else if (has_rank && !of_rank) {
        fprintf(stderr, "tpaudit: report: no run of rank %lld in %s%s\n", (long long)rank, tpa_term(paths[0]),
                n_paths > 1 ? " and the other paths" : "");
        rc = TPA_EXIT_USAGE;
    } else if (!n) {
        fprintf(stderr,
                "tpaudit: report: no device allocations recorded in %s%s (CUPTI %s): the memory viewer shows device "
                "memory only; record on a GPU with CUPTI on\n",
                tpa_term(paths[0]), n_paths > 1 ? " and the other paths" : "", tpa_term(cupti ? cupti : "?"));
        rc = TPA_EXIT_USAGE;
    } else if (n > 1 && (!output || !strcmp(output, "-"))) {
        fprintf(stderr, "tpaudit: report: %zu runs with device memory: give -o FILE (one file each, FILE.rank<N>)\n", n);
        rc = TPA_EXIT_USAGE;
    }
    for (size_t k = 0; !rc && k < n; k++) {
        const tpa_run_t *run = &report.runs[chosen[k]];
        if (run->device_memory->schema_version < 2)
            fprintf(stderr,
                    "tpaudit: note: %s is a version-1 database (no memory ledger): its segments are exported "
                    "without owners\n",
                    tpa_term(run->file));
        char file[PATH_MAX + 64], why[8400];
        if (n > 1)
            file_for(output, run, file, sizeof file);
        else
            snprintf(file, sizeof file, "%s", output ? output : "-");
        memviz_job_t job = {&report, chosen[k], options};
        if (tpa_write_output_with(file, write_memviz, &job, why, sizeof why)) {
            fprintf(stderr, "tpaudit: %s\n", tpa_term(why));
            rc = TPA_EXIT_USAGE;
        }
    }
    free(chosen);
    tpa_report_free(&report);
    return rc;
}
