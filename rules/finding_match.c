/* finding_match.c - one finding in two reports (gate --baseline, diff):
 * matched by rank, kind and tensor, a tensor being the same when a name of
 * one is a name of the other (its name or an alias: a report from before
 * aliases named a tied weight by another of its names). */
#include "findings.h"

#include <string.h>

static int goes_by(const tpa_finding_t *f, const char *name) {
    if (!strcmp(f->name ? f->name : "", name)) return 1;
    for (size_t i = 0; i < f->n_aliases; i++)
        if (!strcmp(f->aliases[i], name)) return 1;
    return 0;
}

int tpa_same_finding(const tpa_finding_t *a, const tpa_finding_t *b) {
    if (a->rank != b->rank || strcmp(a->kind, b->kind)) return 0;
    if (goes_by(b, a->name ? a->name : "")) return 1;
    for (size_t i = 0; i < a->n_aliases; i++)
        if (goes_by(b, a->aliases[i])) return 1;
    return 0;
}
