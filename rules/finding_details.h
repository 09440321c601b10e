/* finding_details.h - what a finding carries beside its kind and bytes
 * (finding_details.c), for the queries of findings.c. */
#ifndef TPA_FINDING_DETAILS_H
#define TPA_FINDING_DETAILS_H

#include <sqlite3.h>

#include "tpa_model.h"

/* The live param that took over from stale `f` (same name, or named by a
 * param_replaced event), with how their shapes relate. */
void tpa_find_successor(sqlite3 *db, int64_t audit, tpa_finding_t *f);
/* Storage offset, names, creation and replacement stacks (the first
 * replacement, and the later ones apart; native ones named by `symbolize`,
 * none when it is NULL), and the allocation holding storage `ptr`. */
void tpa_attach_details(tpa_symbolize_fn symbolize, sqlite3 *db, int64_t audit, int64_t audit_begin, int64_t ptr,
                        tpa_finding_t *f);

/* Parses "file:line:function" lines (a Python stack as the probe records it) into frames. */
void tpa_parse_py_stack(const char *text, tpa_frames_t *out);

#endif
