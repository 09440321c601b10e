/* out_of_memory.h - the rule of the out-of-memory kinds (rules/out_of_memory.c):
 * judged once per process from its oom rows, not at an audit, by the
 * analyzer after a run's headline findings. */
#ifndef TPA_RULES_OUT_OF_MEMORY_H
#define TPA_RULES_OUT_OF_MEMORY_H

#include <sqlite3.h>

#include "findings.h"

/* Adds to `r` the OOM findings of the process of database `db` (run
 * `run`): an error for the OOM that ended it, a warning for each caught one
 * (the first few), each with its facts, who held the device at it, and
 * its cause; native stacks named by `symbolize` (none when NULL).  A file
 * without the oom table has none.  0, or -1 out of memory. */
int tpa_oom_findings(sqlite3 *db, const tpa_run_t *run, tpa_symbolize_fn symbolize, tpa_report_t *r);

/* A run that died of an OOM at which an audit was taken is judged at that
 * audit (the ledger at the OOM), not at one its exit took after: `audit`,
 * the run's headline step and label move there.  1 when moved. */
int tpa_oom_judge_at(sqlite3 *db, tpa_run_t *run, tpa_judged_audit_t *audit);

/* Marks the run's audit marks taken at an OOM (the HTML plot shows where it happened). */
void tpa_oom_marks(sqlite3 *db, tpa_run_t *run);

/* An inconclusive run that did not end (killed: the kernel's OOM killer
 * among the causes): its reason gets the last samples of live memory. */
void tpa_oom_last_samples(sqlite3 *db, tpa_run_t *run);

#endif
