/* report_groups.c - how the renderers and the gate see many ranks at once:
 * the runs as the gate judges them (one group per rank, a process without
 * a rank its own, helper processes folded under their run), and identical
 * findings across ranks shown once ("ranks 0-7").  Both are built in
 * O(n log n), so 10,000 ranks cost milliseconds. */
#include "reports.h"

#include <stdlib.h>
#include <string.h>

typedef struct rank_slot {
    int64_t rank;
    size_t group;
} rank_slot_t;

static int by_rank(const void *a, const void *b) {
    const rank_slot_t *x = a, *y = b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int by_rank_then_run(const void *a, const void *b) {
    const rank_slot_t *x = a, *y = b;
    int c = by_rank(a, b);
    return c ? c : x->group < y->group ? -1 : x->group > y->group;
}

static size_t group_of_finding(const tpa_report_t *r, const tpa_finding_t *f, const rank_slot_t *slots, size_t n_slots,
                               const size_t *run_group) {
    if (f->rank >= 0) {
        rank_slot_t key = {f->rank, 0};
        const rank_slot_t *hit = bsearch(&key, slots, n_slots, sizeof *slots, by_rank);
        if (hit) return hit->group;
    }
    return f->run_index < r->n_runs ? run_group[f->run_index] : SIZE_MAX;
}

/* Each run's group into run_group (SIZE_MAX for a helper and for a later
 * run of a rank), the groups into g in the order of their first run, and
 * the ranks (sorted) with their group into slots. */
static size_t assign_groups(const tpa_report_t *r, size_t *run_group, rank_slot_t *slots, size_t *n_slots,
                            tpa_rank_group_t *g) {
    size_t n = 0, ns = 0;
    for (size_t i = 0; i < r->n_runs; i++) {
        run_group[i] = SIZE_MAX;
        if (r->runs[i].has_rank && !r->runs[i].helper_of) slots[ns++] = (rank_slot_t){r->runs[i].rank, i};
    }
    qsort(slots, ns, sizeof *slots, by_rank_then_run);
    for (size_t i = 0; i < ns; i++)
        if (!i || slots[i].rank != slots[i - 1].rank) run_group[slots[i].group] = 0; /* the rank's first run */
    for (size_t i = 0; i < r->n_runs; i++) {
        const tpa_run_t *run = &r->runs[i];
        if (run->helper_of || (run->has_rank && run_group[i] == SIZE_MAX)) continue;
        g[n] = (tpa_rank_group_t){i, run->has_rank ? run->rank : -1, run->has_rank ? 0 : run->pid, 0};
        run_group[i] = n++;
    }
    for (size_t i = 0, leader = 0; i < ns; i++) {
        if (!i || slots[i].rank != slots[i - 1].rank) leader = run_group[slots[i].group];
        slots[i].group = leader;
    }
    *n_slots = ns;
    return n;
}

int tpa_rank_groups(const tpa_report_t *r, int only_new, tpa_rank_group_t **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    size_t n_runs = r->n_runs ? r->n_runs : 1, ns = 0;
    size_t *run_group = malloc(n_runs * sizeof *run_group);
    rank_slot_t *slots = malloc(n_runs * sizeof *slots);
    tpa_rank_group_t *g = calloc(n_runs, sizeof *g);
    if (!run_group || !slots || !g) {
        free(run_group);
        free(slots);
        free(g);
        return -1;
    }
    size_t n = assign_groups(r, run_group, slots, &ns, g);
    for (size_t j = 0; j < r->n_findings; j++) {
        const tpa_finding_t *f = &r->findings[j];
        if (!f->is_error || (only_new && !f->is_new)) continue;
        size_t k = group_of_finding(r, f, slots, ns, run_group);
        if (k < n) g[k].retained = tpa_add_bytes(g[k].retained, f->retained_bytes);
    }
    free(run_group);
    free(slots);
    *out = g;
    *n_out = n;
    return 0;
}

size_t tpa_count_runs(const tpa_report_t *r) {
    size_t n = 0;
    for (size_t i = 0; i < r->n_runs; i++) n += !r->runs[i].helper_of;
    return n;
}

static int cmp_text(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : ""); }

static int cmp_i64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

/* Order of findings by what makes them the same finding on another rank:
 * everything but the rank, the device, the stacks and the allocation (which
 * differ between ranks); then by rank and position. */
static int cmp_identity(const void *a, const void *b) {
    const tpa_finding_t *x = *(const tpa_finding_t *const *)a, *y = *(const tpa_finding_t *const *)b;
    int c;
    if ((c = cmp_text(x->kind, y->kind)) || (c = cmp_i64(x->is_error, y->is_error)) ||
        (c = cmp_text(x->name, y->name)) || (c = cmp_text(x->shape, y->shape)) ||
        (c = cmp_text(x->local_shape, y->local_shape)) || (c = cmp_text(x->dtype, y->dtype)) ||
        (c = cmp_text(x->type, y->type)) || (c = cmp_text(x->holder_kind, y->holder_kind)) ||
        (c = cmp_text(x->holder_class, y->holder_class)) || (c = cmp_text(x->holder_path, y->holder_path)) ||
        (c = cmp_i64(x->retained_bytes, y->retained_bytes)) || (c = cmp_i64(x->state_bytes, y->state_bytes)) ||
        (c = cmp_i64(x->nbytes, y->nbytes)) || (c = cmp_i64(x->storage_bytes, y->storage_bytes)) ||
        (c = cmp_i64(x->storage_offset, y->storage_offset)) || (c = cmp_i64(x->has_grad, y->has_grad)) ||
        (c = cmp_i64(x->step, y->step)) || (c = cmp_i64(x->has_successor, y->has_successor)) ||
        (c = cmp_text(x->succ_name, y->succ_name)) || (c = cmp_text(x->succ_shape, y->succ_shape)) ||
        (c = cmp_text(x->succ_local_shape, y->succ_local_shape)) || (c = cmp_text(x->relation, y->relation)) ||
        (c = cmp_text(x->message, y->message)))
        return c;
    return 0;
}

static int cmp_identity_rank(const void *a, const void *b) {
    const tpa_finding_t *x = *(const tpa_finding_t *const *)a, *y = *(const tpa_finding_t *const *)b;
    int c = cmp_identity(a, b);
    return c ? c : (c = cmp_i64(x->rank, y->rank)) ? c : x < y ? -1 : x > y;
}

int tpa_group_findings(tpa_report_t *r) {
    size_t n = r->n_findings;
    const tpa_finding_t **v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        r->findings[i].group_first = 0;
        if (r->findings[i].rank >= 0) v[m++] = &r->findings[i]; /* a process without a rank stands alone */
    }
    qsort(v, m, sizeof *v, cmp_identity_rank);
    for (size_t i = 0; i < m;) {
        size_t j = i + 1; /* one finding per rank in a group */
        while (j < m && !cmp_identity(&v[i], &v[j]) && v[j]->rank != v[j - 1]->rank) j++;
        size_t first = (size_t)(v[i] - r->findings);
        for (size_t k = i + 1; k < j; k++)
            if ((size_t)(v[k] - r->findings) < first) first = (size_t)(v[k] - r->findings);
        for (size_t k = i; j - i > 1 && k < j; k++) r->findings[v[k] - r->findings].group_first = first + 1;
        i = j;
    }
    free(v);
    return 0;
}

int tpa_finding_groups(const tpa_report_t *r, tpa_finding_group_t **out, size_t *n_out) {
    size_t n = r->n_findings, n_groups = 0;
    tpa_finding_group_t *g = calloc(n ? n : 1, sizeof *g);
    size_t *slot = malloc((n ? n : 1) * sizeof *slot), *members = malloc((n ? n : 1) * sizeof *members);
    if (!g || !slot || !members) {
        free(g), free(slot), free(members);
        return -1;
    }
    for (size_t i = 0; i < n; i++) { /* leaders in order, each with its member count */
        size_t lead = r->findings[i].group_first ? r->findings[i].group_first - 1 : i;
        if (lead >= n) lead = i;
        if (lead == i) {
            slot[i] = n_groups;
            g[n_groups++] = (tpa_finding_group_t){i, NULL, 0};
        }
        g[slot[lead]].n++;
    }
    size_t used = 0;
    for (size_t k = 0; k < n_groups; k++) {
        g[k].members = members + used;
        used += g[k].n;
        g[k].n = 0;
    }
    for (size_t i = 0; i < n; i++) {
        size_t lead = r->findings[i].group_first ? r->findings[i].group_first - 1 : i;
        tpa_finding_group_t *grp = &g[slot[lead < n ? lead : i]];
        grp->members[grp->n++] = i;
    }
    free(slot);
    if (!n_groups) free(members);
    *out = g;
    *n_out = n_groups;
    return 0;
}

void tpa_finding_groups_free(tpa_finding_group_t *g, size_t n) {
    if (n) free(g[0].members);
    free(g);
}

static int cmp_rank_values(const void *a, const void *b) { return cmp_i64(*(const int64_t *)a, *(const int64_t *)b); }

void tpa_format_group_ranks(const tpa_report_t *r, const tpa_finding_group_t *g, char *buf, size_t len) {
    int64_t *ranks = malloc((g->n ? g->n : 1) * sizeof *ranks);
    const tpa_finding_t *lead = &r->findings[g->first];
    if (g->n < 2 || !ranks) {
        free(ranks);
        if (lead->rank >= 0)
            snprintf(buf, len, "rank %lld", (long long)lead->rank);
        else
            snprintf(buf, len, "no rank");
        return;
    }
    for (size_t i = 0; i < g->n; i++) ranks[i] = r->findings[g->members[i]].rank;
    qsort(ranks, g->n, sizeof *ranks, cmp_rank_values);
    size_t used = (size_t)snprintf(buf, len, "ranks ");
    for (size_t i = 0; i < g->n && used < len;) {
        size_t j = i;
        while (j + 1 < g->n && ranks[j + 1] == ranks[j] + 1) j++;
        if (used + 24 >= len) { /* no room for the next range: say how many are left */
            snprintf(buf + used, len - used, "...");
            break;
        }
        used += (size_t)(j == i ? snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)ranks[i])
                                : snprintf(buf + used, len - used, "%s%lld-%lld", i ? ", " : "", (long long)ranks[i],
                                           (long long)ranks[j]));
        i = j + 1;
    }
    free(ranks);
}

void tpa_describe_runs(const tpa_report_t *r, char *buf, size_t len) {
    tpa_rank_group_t *g;
    size_t n, ranks = 0, helpers = r->n_runs - tpa_count_runs(r);
    if (tpa_rank_groups(r, 0, &g, &n)) n = 0, g = NULL;
    for (size_t i = 0; i < n; i++) ranks += g[i].rank >= 0;
    free(g);
    size_t others = n - ranks, used;
    if (ranks)
        used = (size_t)snprintf(buf, len, "%zu rank%s", ranks, ranks == 1 ? "" : "s");
    else
        used = (size_t)snprintf(buf, len, "%zu run%s", others, others == 1 ? "" : "s");
    if (ranks && others && used < len)
        used +=
            (size_t)snprintf(buf + used, len - used, ", %zu process%s without a rank", others, others == 1 ? "" : "es");
    if (helpers && used < len)
        snprintf(buf + used, len - used, " (and %zu helper process%s)", helpers, helpers == 1 ? "" : "es");
}

size_t tpa_most_retained_group(const tpa_report_t *r, tpa_rank_group_t *most) {
    tpa_rank_group_t *g;
    size_t n, k = 0;
    memset(most, 0, sizeof *most);
    if (tpa_rank_groups(r, 0, &g, &n)) return 0;
    for (size_t i = 1; i < n; i++)
        if (g[i].retained > g[k].retained) k = i;
    if (n) *most = g[k];
    free(g);
    return n;
}
