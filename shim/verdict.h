/* verdict.h - the seam between the shim's in-process verdict (verdict.c:
 * when to judge, waiting, the stderr line) and the rules' judgement of
 * one audit (verdict_judge.c, which runs the finding queries of
 * rules/findings.c on the writer's connection).  Kept apart so that the
 * judgement sees the rules' headers and not the shim's internal one. */
#ifndef TPAUDIT_SHIM_VERDICT_H
#define TPAUDIT_SHIM_VERDICT_H

#include <stddef.h>
#include <stdint.h>

struct sqlite3;

#define TPA_VERDICT_TEXT 65536u
#define TPA_VERDICT_LINE 2048u

/* What the analyzer found at one audit. */
struct tpa_verdict_result {
    int64_t audit_id;
    int n_findings, n_errors;
    int blind;              /* saw an optimizer but no model parameter: judged nothing */
    int64_t retained_bytes; /* over the error findings */
    /* One line a finding: kind, severity, name, retained bytes, replaced at,
     * message, tab-separated (tabs and newlines inside become spaces); whole
     * lines only, text_len bytes. */
    char text[TPA_VERDICT_TEXT];
    size_t text_len;
    /* The stderr line for the first error finding (no "tpaudit: " prefix, no
     * newline): where the audit was, what is stale, its bytes, where it was
     * replaced; "" when the audit has no error. */
    char line[TPA_VERDICT_LINE];
};

/* ---- the shim's side (verdict.c) ---- */
struct tpaudit_verdict;
/* The host ended audit `audit_id` (its end record is queued). */
void tpa_verdict_note_end(int64_t audit_id);
/* Called by the writer thread whenever no transaction is open: judges the
 * audit a caller waits for, or the latest ended one while none has had an
 * error yet, once its rows are committed.  One atomic load when idle. */
void tpa_verdict_writer_turn(void);
/* tpaudit_v1_audit_verdict's work on a zero-extended copy of the caller's
 * struct, in two steps around the writer's flush (api.c): ask checks the
 * audit and asks for its judgement (returns the wait in ms, or a negative
 * TPAUDIT_E*), wait then waits for the judgement and fills v. */
int tpa_verdict_ask(const struct tpaudit_verdict *v);
int tpa_verdict_wait(struct tpaudit_verdict *v, int ms);
/* A fork or clone child starts over (process_life.c). */
void tpa_verdict_reset_in_child(void);

/* ---- the analyzer's side (verdict_judge.c) ---- */
/* Judges closed audit `audit` of the database `db` (the writer's
 * connection, no transaction open) with the analyzer's queries: 0, or -1
 * when a query fails. */
int tpa_verdict_judge(struct sqlite3 *db, int64_t audit, struct tpa_verdict_result *out);

#endif
