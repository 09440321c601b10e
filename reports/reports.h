/*
 * reports.h - the renderers of a report (text, JSON, HTML, JUnit) and the
 * helpers they share with the analyzer and the CLI: a finding's view, the runs and findings grouped by rank, and a strict JSON reader.
 * They read only the model (tpa_model.h).
 */
#ifndef TPA_REPORTS_H
#define TPA_REPORTS_H

#include "escape.h"
#include "tpa_model.h"

/* Renderers: 0 on success, -1 on a write error. */
int tpa_render_text(const tpa_report_t *r, FILE *out);
int tpa_render_json(const tpa_report_t *r, FILE *out);
int tpa_render_html(const tpa_report_t *r, FILE *out);
int tpa_render_junit(const tpa_report_t *r, FILE *out);
/* PyTorch's memory snapshot of run `run` (its device_memory and owners
 * loaded), for memory_viz and torch.cuda._memory_viz (report_memviz.c,
 * docs/MEMVIZ.md): a pickle, protocol 4.  0, or -1 on a write error. */
typedef struct tpa_memviz_options {
    int64_t first_step, last_step; /* the steps exported: INT64_MIN, INT64_MAX for all */
    size_t max_events;             /* the newest entries kept per device, 0: all */
} tpa_memviz_options_t;
int tpa_render_memviz(const tpa_report_t *r, size_t run, const tpa_memviz_options_t *o, FILE *out);
/* The gate's rules and verdict as text (report_text.c), and as one JSON
 * document (report_json.c; docs/REPORT.md, "The gate's own JSON"). */
int tpa_render_gate_text(const tpa_report_t *r, FILE *out);
int tpa_render_gate_json(const tpa_report_t *r, FILE *out);

/* Helpers shared by the renderers (report_util.c); every stored string
 * goes out through an escaper of escape.h (common/). */
const char *tpa_severity(const tpa_finding_t *f);
/* 1 when the finding's tensor is a view: at a nonzero offset into its
 * storage, or holding only part of it. */
int tpa_finding_is_view(const tpa_finding_t *f);
/* "a view at element offset N of a <size> storage (<size> of its own)", without
 * the offset part when it is 0 (also what a file from before storage_offset gives). */
void tpa_format_view(const tpa_finding_t *f, char *buf, size_t len);
int64_t tpa_rank_retained(const tpa_report_t *r, int64_t rank);

/* The runs as the gate judges them (report_groups.c): one group per rank
 * (its first run in the report's order), each process without a rank its
 * own, helper processes in none; with the retained bytes of its error
 * findings (only those marked is_new when only_new).  In the order of
 * their first run; 0, or -1 out of memory. */
typedef struct tpa_rank_group {
    size_t run;       /* index of its first run */
    int64_t rank;     /* -1: a process without a rank */
    int64_t pid;      /* the process without a rank, else 0 */
    int64_t retained; /* error findings' retained bytes */
} tpa_rank_group_t;
int tpa_rank_groups(const tpa_report_t *r, int only_new, tpa_rank_group_t **out, size_t *n);
/* Runs that are not helper processes. */
size_t tpa_count_runs(const tpa_report_t *r);
/* "1 run", "3 runs", "8 ranks", "2 ranks, 1 process without a rank (and 4
 * helper processes)": the runs as counted by rank, helpers apart. */
void tpa_describe_runs(const tpa_report_t *r, char *buf, size_t len);
/* The group (of tpa_rank_groups) that retains the most, into *most; the
 * number of groups (0 when there are none or out of memory). */
size_t tpa_most_retained_group(const tpa_report_t *r, tpa_rank_group_t *most);
/* Groups the same finding on several ranks (each finding's group_first):
 * equal in all but rank, device, stacks and allocation, one per rank;
 * findings without a rank stand alone.  0, or -1 out of memory. */
int tpa_group_findings(tpa_report_t *r);
/* The groups in the order of their first finding, each with its findings
 * (a finding alone is a group of one). 0, or -1 out of memory. */
typedef struct tpa_finding_group {
    size_t first;    /* index of its first finding, which stands for the group */
    size_t *members; /* indices of its findings, in order */
    size_t n;
} tpa_finding_group_t;
int tpa_finding_groups(const tpa_report_t *r, tpa_finding_group_t **out, size_t *n);
void tpa_finding_groups_free(tpa_finding_group_t *g, size_t n);
/* "rank 3", "no rank", or "ranks 0-7" / "ranks 0-3, 5" of a group. */
void tpa_format_group_ranks(const tpa_report_t *r, const tpa_finding_group_t *g, char *buf, size_t len);

/* A strict JSON reader (json_read.c): NULL when the text is not one JSON
 * value.  Strings come decoded to UTF-8 (bytes of invalid UTF-8 are kept
 * as they are; the writers above replace them). */
enum {
    TPA_JSON_MISSING,
    TPA_JSON_NULL,
    TPA_JSON_BOOL,
    TPA_JSON_NUMBER,
    TPA_JSON_STRING,
    TPA_JSON_ARRAY,
    TPA_JSON_OBJECT
};
typedef struct tpa_json tpa_json_t;
tpa_json_t *tpa_json_parse(const char *text, size_t len);
void tpa_json_free(tpa_json_t *v);
int tpa_json_type(const tpa_json_t *v);
size_t tpa_json_len(const tpa_json_t *v);
const tpa_json_t *tpa_json_at(const tpa_json_t *v, size_t i);
const tpa_json_t *tpa_json_get(const tpa_json_t *v, const char *key);
const char *tpa_json_str(const tpa_json_t *v);
int tpa_json_int(const tpa_json_t *v, int64_t *out); /* 0 when an integer in int64 */

/* The ledger and memory growth (report_ledger.c); whether a finding grows
 * is its kind's (tpa_finding_grows, finding_kinds.h). */
/* The fastest-growing error finding of such a kind, NULL when none; their
 * number into *n_growing (may be NULL). */
const tpa_finding_t *tpa_top_growth(const tpa_report_t *r, size_t *n_growing);
/* Error findings of the other kinds (stale tensors), out of memory aside. */
size_t tpa_count_stale_errors(const tpa_report_t *r);
/* "MEMORY GROWTH: `kept` +196 MiB/step" (and how many more holders grow),
 * "" when nothing grows. */
void tpa_format_growth_verdict(const tpa_report_t *r, char *buf, size_t len);
/* The run's ledger as a short table under its line (nothing without one). */
void tpa_put_ledger_text(FILE *out, const tpa_run_t *run);
void tpa_put_samples_text(FILE *out, const tpa_run_t *run);
/* ,"ledger":[...],"ledger_total":N of a run (both null without a ledger). */
void tpa_put_ledger_json(FILE *out, const tpa_run_t *run);
/* The run's peak of activations as a line and its top modules under it
 * (nothing without a peak; report_peak.c). */
void tpa_put_peak_text(FILE *out, const tpa_run_t *run);
/* ,"peak":{step,label,bytes,modules} of a run, or ,"peak":null. */
void tpa_put_peak_json(FILE *out, const tpa_run_t *run);
/* The `most` largest modules of a run's peak as a JSON array of {module, bytes}. */
void tpa_put_peak_modules_json(FILE *out, const tpa_run_t *run, size_t most);
/* The modules the gate's max-peak rule names, the largest first. */
#define TPA_GATE_PEAK_MODULES 3
/* "transformer.h.3.mlp 4.0 MiB, ..." of the `most` largest modules of a run's peak. */
void tpa_format_peak_modules(const tpa_run_t *run, size_t most, char *buf, size_t len);

/* One part of the peak's moment in words ("gradients of block", "saved for backward in block.linear1"), in buf,
 * not escaped for a terminal (report_peak.c). */
void tpa_moment_part_words(const tpa_moment_part_t *part, char *buf, size_t len);
/* ,"bytes":N,"growth":{...} of a finding that grows (nothing for others). */
void tpa_put_growth_json(FILE *out, const tpa_finding_t *f);

/* "+196.0 MiB/step" of a finding that grows. */
void tpa_format_growth_bytes(const tpa_finding_t *f, char *buf, size_t len);
/* Its holder, bytes, rate, what it keeps and where that was made (text report). */
struct tpa_paths;
void tpa_put_growth_text(FILE *out, const struct tpa_paths *paths, const tpa_finding_t *f);

/* A stack as a JSON array of frames (report_util.c); native frames with their address and module. */
void tpa_put_json_frames(FILE *out, const tpa_frames_t *fr, int native);

/* Out of memory (report_oom.c). */
/* The error finding of the OOM that ended a run (the first), NULL when none. */
const tpa_finding_t *tpa_top_oom(const tpa_report_t *r);
/* ,"oom":{...} of an out-of-memory finding (nothing for others). */
void tpa_put_oom_json(FILE *out, const tpa_finding_t *f);
/* Its facts, cause and stacks in the text report's details. */
void tpa_put_oom_text(FILE *out, const struct tpa_paths *paths, const tpa_finding_t *f);

#endif
