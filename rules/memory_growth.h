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

/* A steady-state audit: its id, the step it saw and when it began. */
typedef struct tpa_steady_audit {
    int64_t id, step, begin_ns;
} tpa_steady_audit_t;

/* The steady-state audits with a ledger up to audit `judged`, by step (one
 * audit a step, the latest), into *out (malloc'd); their count, 0 when the
 * database has no ledger or `judged` is not the last of them, or -1 when a
 * query fails. */
int tpa_growth_steady_audits(sqlite3 *db, int64_t judged, tpa_steady_audit_t **out);
/* Where the run of rises that ends at bytes[n - 1] starts: the index of its
 * first value, which is above 0 (n - 1 when the last did not rise). */
size_t tpa_growth_rise_start(const int64_t *bytes, size_t n);
/* Fills the growth of `f` (held_bytes already set) over audits a[first..n)
 * whose first held `first_bytes`: its rate and the step it began at. */
void tpa_growth_rate(tpa_finding_t *f, const tpa_steady_audit_t *a, size_t first, size_t n, int64_t first_bytes);

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
