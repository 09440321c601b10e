/* diff_peak.c - the modules whose activations at the peak changed between
 * two runs, for `tpaudit diff` (cmd_diff.c): each run of NEW that has a
 * peak is paired with the run of OLD of its rank that has one (runs without
 * a rank, in their order; none: a peak of no modules), and each module of
 * either peak (runs[].peak.modules) is compared; one
 * that differs by more than 1% of the larger is listed, bigger or smaller,
 * the largest changes first, after its run's total.  A module absent from
 * a peak that lists TPA_PEAK_MODULES modules (a full list) is not known
 * there and is left out. */
#include "verbs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzer.h"

/* Modules listed per pair of runs, the largest changes; the rest are counted. */
#define TPA_DIFF_MODULES 12

/* One module's activations in both runs (-1: not known in one). */
typedef struct module_change {
    const char *module;
    int64_t old_bytes, new_bytes;
} module_change_t;

static int64_t magnitude(const module_change_t *c) {
    int64_t d = c->new_bytes - c->old_bytes;
    return d < 0 ? -d : d;
}

static int by_change(const void *pa, const void *pb) {
    int64_t a = magnitude(pa), b = magnitude(pb);
    if (a != b) return a > b ? -1 : 1;
    return strcmp(((const module_change_t *)pa)->module, ((const module_change_t *)pb)->module);
}

/* More than 1% of the larger of the two. */
static int changed(int64_t old_bytes, int64_t new_bytes) {
    int64_t larger = old_bytes > new_bytes ? old_bytes : new_bytes, d = new_bytes - old_bytes;
    return (d < 0 ? -d : d) * 100 > larger;
}

/* The bytes of `module` at run's peak (NULL: none): 0 when its list is complete and lacks it, -1 when not known. */
static int64_t bytes_of(const tpa_run_t *run, const char *module) {
    if (!run) return 0;
    for (size_t i = 0; i < run->n_peak_modules; i++)
        if (!strcmp(run->peak_modules[i].module, module)) return run->peak_modules[i].bytes;
    return run->n_peak_modules >= TPA_PEAK_MODULES ? -1 : 0;
}

/* Adds the modules of `from` not yet in `v` to it, with their bytes in both runs. */
static void collect(const tpa_run_t *from, const tpa_run_t *old, const tpa_run_t *new, module_change_t *v, size_t *n) {
    for (size_t i = 0; from && i < from->n_peak_modules; i++) {
        const char *module = from->peak_modules[i].module;
        int seen = 0;
        for (size_t j = 0; j < *n && !seen; j++) seen = !strcmp(v[j].module, module);
        if (!seen) v[(*n)++] = (module_change_t){module, bytes_of(old, module), bytes_of(new, module)};
    }
}

static void change_line(const char *rank, const char *module, int64_t old_bytes, int64_t new_bytes) {
    char o[32], b[32], d[32];
    tpa_format_bytes(old_bytes, o, sizeof o);
    tpa_format_bytes(new_bytes, b, sizeof b);
    tpa_format_bytes(new_bytes > old_bytes ? new_bytes - old_bytes : old_bytes - new_bytes, d, sizeof d);
    printf("%-11s %-8s %-20s %-40s %s -> %s (%s%s)\n", new_bytes > old_bytes ? "bigger" : "smaller", rank,
           "activations", tpa_term(module), o, b, new_bytes > old_bytes ? "+" : "-", d);
}

/* The changes of one pair of runs (either NULL: none on that side); the number of modules changed. */
static size_t diff_pair(const tpa_run_t *old, const tpa_run_t *new) {
    const tpa_run_t *either = new ? new : old;
    char rank[32] = "no rank";
    if (either->has_rank) snprintf(rank, sizeof rank, "rank %lld", (long long)either->rank);
    module_change_t v[2 * TPA_PEAK_MODULES];
    size_t n = 0, listed = 0, changes = 0;
    collect(new, old, new, v, &n);
    collect(old, old, new, v, &n);
    for (size_t i = 0; i < n; i++)
        if (v[i].old_bytes >= 0 && v[i].new_bytes >= 0 && changed(v[i].old_bytes, v[i].new_bytes)) v[changes++] = v[i];
    if (!changes) return 0;
    qsort(v, changes, sizeof *v, by_change);
    change_line(rank, "(all modules, at the peak)", old ? old->peak_bytes : 0, new ? new->peak_bytes : 0);
    for (; listed < changes && listed < TPA_DIFF_MODULES; listed++)
        change_line(rank, v[listed].module, v[listed].old_bytes, v[listed].new_bytes);
    if (changes > listed)
        printf("%-11s %-8s %-20s ... and %zu more modules\n", "", rank, "activations", changes - listed);
    return changes;
}

/* The run of `r` that pairs with `run`: of its rank, or the k-th of those
 * without one where `run` is the k-th of its report's (`k`). */
static const tpa_run_t *pair_of(const tpa_report_t *r, const tpa_run_t *run, size_t k) {
    for (size_t i = 0; i < r->n_runs; i++) {
        const tpa_run_t *other = &r->runs[i];
        if (other->helper_of || !other->has_peak || other->has_rank != run->has_rank) continue;
        if (run->has_rank ? other->rank == run->rank : k-- == 0) return other;
    }
    return NULL;
}

/* Runs one side's runs against the other's; `unpaired_only`: only those with no pair (the other side's done). */
static size_t diff_side(const tpa_report_t *side, const tpa_report_t *other, int side_is_new, int unpaired_only) {
    size_t changes = 0, rankless = 0;
    for (size_t i = 0; i < side->n_runs; i++) {
        const tpa_run_t *run = &side->runs[i];
        if (run->helper_of || !run->has_peak) continue;
        const tpa_run_t *pair = pair_of(other, run, rankless);
        rankless += !run->has_rank;
        if (unpaired_only && pair) continue;
        changes += side_is_new ? diff_pair(pair, run) : diff_pair(run, pair);
    }
    return changes;
}

size_t tpa_diff_peaks(const tpa_report_t *old, const tpa_report_t *new) {
    return diff_side(new, old, 1, 0) + diff_side(old, new, 0, 1);
}
