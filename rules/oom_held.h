/* oom_held.h - who held the device at an out-of-memory audit, as the OOM
 * finding's "Held:" list says it (rules/oom_held.c). */
#ifndef TPA_RULES_OOM_HELD_H
#define TPA_RULES_OOM_HELD_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "findings.h"
#include "oom_text.h"


/* Sums of the ledger at the oom audit, by owner kind; `grown` the bytes
 * the growing holder kept there (-1 when it kept none); `by_module` what
 * the step saved for backward that the ledger tells by module, and
 * `activations` its largest group's words ("transformer.h.0-11 2.6 GiB
 * (220.0 MiB each; mlp 60%)", "" when none). */
typedef struct tpa_held_sums {
    int64_t measured, parameter, gradient, optimizer_state, stale, autograd, cache, unattributed, held, grown;
    int64_t by_module;
    char activations[256];
    int has_ledger;
} tpa_held_sums_t;

/* The Held list of the ledger of audit `audit_id` on device `dev` ("" any)
 * into `t`, its sums into `s`: every entry by bytes, largest first (a
 * named holder before a sum of as many bytes), the named holders (a
 * Python object's path, the autograd graph one keeps, a library's
 * allocation such as the cuBLAS workspace) each on its own,
 * then optimizer state, parameters, gradients, stale tensors, the step's
 * activations by the modules that made them ("activations of ...") and
 * what else the step saved for backward that no holder keeps (with the
 * tensors no audit attributed); the allocator's cache
 * last, with `largest_free` (-1 unknown).  The growing holder `growth`
 * (NULL when none) carries its rate and line. */
void tpa_oom_held(sqlite3 *db, int64_t audit_id, const char *dev, int64_t largest_free, const tpa_finding_t *growth,
                  tpa_held_sums_t *s, tpa_oom_text_t *t);

#endif
