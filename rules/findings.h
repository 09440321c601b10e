/* findings.h - how one database becomes findings and a judged run: the
 * queries per kind (findings.c, with what each finding carries in
 * finding_details.c), its message (finding_message.c), the matcher of
 * findings across reports (finding_match.c), and the policy over them
 * (judge.c): which audit is judged, when a run is inconclusive, and the
 * headline findings.  The interface of rules/, which needs nothing above
 * SQLite and the database's schema (shim/records.h). */
#ifndef TPA_FINDINGS_H
#define TPA_FINDINGS_H

#include <sqlite3.h>

#include "audit_seen.h"
#include "finding_kinds.h"
#include "owned_text.h"
#include "tpa_model.h"

/* The rules are one static library used by the CLI and, built again
 * without sanitizers, by the shim (shim/verdict_judge.c, which judges an
 * audit in-process).  How native stacks are named is the caller's: the
 * report's `symbolize` (tpa_model.h). */

/* What every audit of the database `db` shares, worked out once into its
 * temporary database before the first tpa_findings_for_db: 0, or -1 with
 * why (the kinds' queries then cannot run). */
int tpa_findings_prepare(sqlite3 *db, char *why, size_t why_len);
/* The same for judging audit `audit` alone (the shim's verdict): skipped,
 * the table left empty, when no finding of that audit could depend on it. */
int tpa_findings_prepare_audit(sqlite3 *db, int64_t audit, char *why, size_t why_len);
/* How much a finding carries beside its kind and bytes. */
enum tpa_details {
    TPA_DETAILS_NONE = 0,  /* no stacks, allocations or messages */
    TPA_DETAILS_ALL = 1,   /* everything a report shows */
    TPA_DETAILS_EVENTS = 2 /* stacks, offset and message, not the allocation (the shim's in-process verdict) */
};
/* Adds the findings of audit `audit` (begun at `audit_begin`) of one
 * database to `r`, kinds in table order, with_details an enum tpa_details.
 * 0, or -1 when a query fails. */
/* One row of a query that returns a single integer (0 when it fails; judge.c). */
int64_t tpa_query_int(sqlite3 *db, const char *sql);
int tpa_findings_for_db(sqlite3 *db, int64_t audit, int64_t audit_begin, int64_t rank, int64_t step, int with_details,
                        tpa_report_t *r);

/* The message of `f`, a finding of kind `k` (malloc'd). */
char *tpa_finding_message(const tpa_finding_t *f, const tpa_kind_t *k);

/* The same finding in two reports: same rank and kind, and a name of one's
 * tensor (its name or an alias) is a name of the other's. */
int tpa_same_finding(const tpa_finding_t *a, const tpa_finding_t *b);

/* The audit a run is judged by (judge.c): the latest closed one that saw an
 * optimizer and the model, else the latest that saw an optimizer, else the
 * latest holding any references; id 0 when none. */
typedef struct tpa_judged_audit {
    int64_t id;
    int64_t begin_ns;
} tpa_judged_audit_t;
tpa_judged_audit_t tpa_judge_audit(sqlite3 *db, tpa_run_t *run);
/* Marks `run` (and `r`) inconclusive when it cannot be judged. */
/* 1 when no probe vouches that `run` built no optimizer: never a helper. */
int tpa_judge_unvouched(const tpa_run_t *run);
void tpa_judge_inconclusive(sqlite3 *db, tpa_run_t *run, tpa_report_t *r);
/* Marks `run` (and `r`) inconclusive when its probe had a part off that a
 * clean verdict needs (python "on; unjudged: ...", python/tpaudit/_parts.py)
 * and the run has no error finding: an error found stands, a clean verdict
 * cannot.  Call once `r` has the run's findings. */
void tpa_judge_parts_off(tpa_run_t *run, tpa_report_t *r);
/* Stale bytes at every closed audit, for the plot; audit `known_audit`'s
 * are `known_bytes` (the judged audit's, from its headline findings). */
void tpa_judge_marks(sqlite3 *db, tpa_run_t *run, int64_t known_audit, int64_t known_bytes);
/* The headline findings of run `run_index`, from its judged audit, with
 * `details` an enum tpa_details. 0 or -1. */
int tpa_judge_headline(sqlite3 *db, const tpa_judged_audit_t *audit, int details, size_t run_index, tpa_report_t *r);

#endif
