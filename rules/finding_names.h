/* finding_names.h - the names of a finding's tensor (finding_names.c) and
 * the condition on a tensor's events that it and finding_details.c share. */
#ifndef TPA_FINDING_NAMES_H
#define TPA_FINDING_NAMES_H

#include <sqlite3.h>

#include "tpa_model.h"

/* An SQL condition on event row `e` about the tensor in its column `col`:
 * the event came after that tensor's latest param_created event (the id of
 * a dead object comes back as another object's key). */
#define TPA_SINCE_CREATED(col) \
    "e.id > (SELECT coalesce(max(c.id), 0) FROM event c WHERE c.kind='param_created' AND c.new_key=" col ")"
/* The names of `f`'s tensor: `name` becomes the first of them in the
 * model's own order, the others its aliases, each with the wrapper prefix
 * its live successor's path shows. */
void tpa_attach_names(sqlite3 *db, int64_t audit, tpa_finding_t *f);

#endif
