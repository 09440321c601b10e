/* memory_growth.h - the rule of the finding kind that is judged across
 * audits rather than by one audit's query: memory one holder keeps growing
 * step over step in the steady state (rules/memory_growth.c).  Part of the
 * finding queries' library, so the CLI and the shim's in-process verdict
 * judge growth alike. */
#ifndef TPA_RULES_MEMORY_GROWTH_H
#define TPA_RULES_MEMORY_GROWTH_H

#include <sqlite3.h>
#include <stdint.h>

#include "finding_kinds.h"
#include "tpa_model.h"

/* Audits at or before this step are warm-up: never judged for growth. */
#define TPA_GROWTH_WARMUP_STEP 3
/* Steady-state audits growth must be seen over (so two intervals, each growing). */
#define TPA_GROWTH_MIN_AUDITS 3
/* The slowest growth that is a finding, in bytes per step: what the probe's
 * per-step samples must rise by to suspect growth (64 KiB a window of 4
 * steps); slower growth (a few predictions kept on the CPU) is no finding. */
#define TPA_GROWTH_MIN_RATE (16 << 10)

/* Adds to `r` a finding of kind `k` for each holder whose bytes grew over
 * the last TPA_GROWTH_MIN_AUDITS steady-state audits up to audit `audit`
 * (the audit judged, at `step`, of `rank`).  A database without a ledger
 * (schema version 1) has none.  0, or -1 when a query fails. */
int tpa_growth_findings(sqlite3 *db, const tpa_kind_t *k, int64_t audit, int64_t rank, int64_t step,
                        tpa_report_t *r);

/* "[4,256,50257] float32 cuda:0, with grad_fn": one element of a ledger
 * row, from its shapes, dtype, device and whether it keeps a graph
 * (malloc'd; NULL when nothing is known). */
char *tpa_ledger_example(const char *shapes, const char *dtype, const char *device, int with_graph);

#endif
