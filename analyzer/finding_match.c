/* finding_match.c - one finding in two reports (gate --baseline, diff):
 * matched by rank, kind and tensor name. */
#include "findings.h"

#include <string.h>

int tpa_same_finding(const tpa_finding_t *a, const tpa_finding_t *b) {
    return a->rank == b->rank && !strcmp(a->kind, b->kind) && !strcmp(a->name ? a->name : "", b->name ? b->name : "");
}
