/*
 * tpa_model.h - the in-memory result of an analysis: runs, findings, plot
 * series and the gate verdict.  The analyzer fills it; the renderers in
 * reports/ read it and never touch a database.
 */
#ifndef TPA_MODEL_H
#define TPA_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One source location ("file:line:function" or a symbolized native frame). */
typedef struct tpa_frame {
    char *file;
    long line;
    char *function;
    uint64_t address; /* native frames only, 0 otherwise */
    char *module;     /* native frames only, NULL otherwise */
} tpa_frame_t;

typedef struct tpa_frames {
    tpa_frame_t *v;
    size_t n;
} tpa_frames_t;

/* A replacement of a tensor after its first one: the name it was replaced
 * under and the stack that replaced it. */
typedef struct tpa_replacement {
    char *name;
    tpa_frames_t at;
} tpa_replacement_t;

typedef struct tpa_finding {
    char *kind;       /* stale_param, orphan_state, ... */
    int is_error;     /* severity: 1 error, 0 warning */
    int64_t rank;     /* -1 when unknown */
    size_t run_index; /* index into tpa_report.runs of the run it came from */
    int64_t step;
    uint64_t key; /* tensor identity (for dedup, not rendered) */
    char *holder_kind, *holder_class, *holder_path;
    char *name, *shape, *local_shape, *dtype, *device, *type;
    int64_t storage_offset; /* elements from its storage's start (a view's offset), 0 when unknown */
    int64_t nbytes;         /* bytes of its own elements */
    int64_t storage_bytes;  /* bytes of its whole storage */
    int64_t retained_bytes;
    int64_t state_bytes; /* stale_param: its optimizer state's storage, not shared with live params */
    int has_grad;
    int has_successor;
    uint64_t successor_key;
    char *succ_name, *succ_shape, *succ_local_shape, *relation;
    tpa_frames_t created_at, replaced_at; /* replaced_at: its first replacement */
    char **aliases;                       /* its other names, in model order (`name` is the first) */
    size_t n_aliases;
    tpa_replacement_t *later_replacements; /* the replacements after the first, in order */
    size_t n_later_replacements;
    int has_allocation;
    uint64_t alloc_address;
    int64_t alloc_bytes;
    tpa_frames_t alloc_stack;
    char *message;
    char *label; /* the label a program gave its audit (tpaudit.audit(label=...)); NULL for step and exit audits */
    /* A kind judged across audits (memory_growth): the holder's bytes at
     * this audit (`held_bytes`), how fast they grow, since which step, and
     * one element of what it keeps ("[4,256,50257] float32 cuda:0, with
     * grad_fn"); created_at is where its newest tensor was made. */
    int64_t held_bytes;
    int64_t growth_per_step;
    int64_t growth_since_step;
    char *example;
    int is_new;  /* gate with --baseline: new or grown vs the baseline */
    /* 1 + index of the first finding of its group, the same finding on
     * other ranks (tpa_group_findings); 0 when it stands alone. */
    size_t group_first;
} tpa_finding_t;

/* Memory over time of one run, downsampled. */
typedef struct tpa_point {
    int64_t ts_ns;
    int64_t bytes;
} tpa_point_t;

typedef struct tpa_audit_mark {
    int64_t ts_ns;
    int64_t step;
    int64_t stale_bytes;
} tpa_audit_mark_t;

/* Device memory live at the judged audit, grouped by the library that
 * called the allocator (first stack frame outside the CUDA runtime, driver,
 * CUPTI and the shim). */
typedef struct tpa_lib_memory {
    char *library; /* base name, "(no stack)" when none was captured */
    int64_t bytes;
    int64_t allocations;
} tpa_lib_memory_t;

/* One owner of the live memory at the judged audit (the ledger): the
 * probe's rows (parameters by module, gradients, optimizer state, stale
 * tensors, tensors held by other objects by holder path, the autograd
 * graph, the allocator's cache), the analyzer's rows of device memory other
 * libraries hold, and what is left, unattributed. */
typedef struct tpa_ledger_row {
    char *device;     /* "cuda:0", "cpu" */
    char *owner_kind; /* parameter, gradient, ..., library, unattributed */
    char *owner;      /* module path, optimizer class, holder path, library; NULL when none */
    int64_t bytes;
    int64_t tensors;
    char *example; /* one element, "[4,256,50257] float32 cuda:0, with grad_fn"; NULL when none */
} tpa_ledger_row_t;

typedef struct tpa_run {
    char *file; /* base name of the database */
    char *host;
    int64_t pid, ppid;
    int audited_model; /* an audit held tensors or references (a model or optimizer was built) */
    /* A helper process (a compile worker, a data loader) of run helper_of - 1:
     * it never audited a model, and that run is its parent or audited a model
     * with its rank.  Reports fold it under that run; 0 when it is a run. */
    size_t helper_of;
    int has_rank;
    int64_t rank;
    int has_world_size;
    int64_t world_size;
    char *argv; /* JSON array text */
    int complete;
    int64_t dropped_events;
    char *cupti, *python;
    int n_audits;          /* complete audits */
    int64_t headline_step; /* step of the latest complete audit, -1 */
    char *headline_label;  /* that audit's label when a program gave it one, else NULL */
    int inconclusive;
    char *why_inconclusive;
    tpa_point_t *points;
    size_t n_points;
    tpa_audit_mark_t *marks;
    size_t n_marks;
    tpa_lib_memory_t *by_library; /* sorted by bytes, largest first */
    size_t n_by_library;
    /* The ledger of the judged audit (a database from before the ledger
     * has none: has_ledger 0); ledger_total is the measured live bytes its
     * rows add up to, ledger_step the step it was taken at. */
    int has_ledger;
    tpa_ledger_row_t *ledger;
    size_t n_ledger;
    int64_t ledger_total;
    int64_t ledger_step;
} tpa_run_t;

typedef struct tpa_gate_rule {
    char *rule; /* "max-retained", "max-findings", "complete" */
    int64_t limit;
    int64_t measured;
    int64_t rank; /* -1: all ranks (or the process `pid` when set) */
    int64_t pid;  /* max-retained of a process without a rank, else 0 */
    int passed;
} tpa_gate_rule_t;

typedef struct tpa_report {
    tpa_run_t *runs;
    size_t n_runs;
    tpa_finding_t *findings;
    size_t n_findings;
    int has_gate;
    int gate_passed;
    tpa_gate_rule_t *rules;
    size_t n_rules;
    int inconclusive;      /* any run inconclusive */
    int gate_inconclusive; /* the gate met an inconclusive run it was not told to allow */
} tpa_report_t;

/* Renderers: 0 on success, -1 on a write error. */
int tpa_render_text(const tpa_report_t *r, FILE *out);
int tpa_render_json(const tpa_report_t *r, FILE *out);
int tpa_render_html(const tpa_report_t *r, FILE *out);
int tpa_render_junit(const tpa_report_t *r, FILE *out);
/* The gate's rules and verdict as text (report_text.c). */
int tpa_render_gate_text(const tpa_report_t *r, FILE *out);

/* Numbers read from a database are range-checked into the model: byte
 * counts lie in [0, TPA_MAX_BYTES] (8 PiB, exact as a double) and times in
 * [0, TPA_MAX_TS] (about 146 years of nanoseconds), so their sums and
 * differences cannot overflow; sums of bytes saturate at INT64_MAX. */
#define TPA_MAX_BYTES ((int64_t)1 << 53)
#define TPA_MAX_TS    ((int64_t)1 << 62)
int64_t tpa_add_bytes(int64_t a, int64_t b);
int64_t tpa_sane_bytes(int64_t bytes); /* negative -> 0, above TPA_MAX_BYTES -> TPA_MAX_BYTES */
int64_t tpa_clamp_ts(int64_t ts);

/* Helpers shared by the renderers (report_util.c). */
/* Every stored string goes out through one of these: JSON (valid UTF-8,
 * invalid bytes become U+FFFD), XML/HTML (the same, plus characters XML
 * cannot carry), and the terminal (control bytes, ESC, DEL, C1 controls
 * and invalid UTF-8 shown as \xNN; the result is a buffer reused after
 * 16 calls, so use it at once). */
void tpa_put_json_string(FILE *out, const char *s);
void tpa_put_xml_escaped(FILE *out, const char *s);
const char *tpa_term(const char *s);
void tpa_format_bytes(int64_t bytes, char *buf, size_t len);
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

/* The ledger and memory growth (report_ledger.c). */
/* 1 when `f` is of a kind judged across audits (memory_growth). */
int tpa_finding_grows(const tpa_finding_t *f);
/* What makes a finding worse when it rises (gate --baseline, diff): its
 * bytes per step when it grows, else its retained bytes. */
int64_t tpa_finding_measure(const tpa_finding_t *f);
/* The fastest-growing error finding of such a kind, NULL when none; their
 * number into *n_growing (may be NULL). */
const tpa_finding_t *tpa_top_growth(const tpa_report_t *r, size_t *n_growing);
/* Error findings of the other kinds (stale tensors). */
size_t tpa_count_stale_errors(const tpa_report_t *r);
/* "MEMORY GROWTH: `kept` +196 MiB/step" (and how many more holders grow),
 * "" when nothing grows. */
void tpa_format_growth_verdict(const tpa_report_t *r, char *buf, size_t len);
/* The run's ledger as a short table under its line (nothing without one). */
void tpa_put_ledger_text(FILE *out, const tpa_run_t *run);
/* ,"ledger":[...],"ledger_total":N of a run (both null without a ledger). */
void tpa_put_ledger_json(FILE *out, const tpa_run_t *run);
/* ,"bytes":N,"growth":{...} of a finding that grows (nothing for others). */
void tpa_put_growth_json(FILE *out, const tpa_finding_t *f);

/* "+196.0 MiB/step" of a finding that grows. */
void tpa_format_growth_bytes(const tpa_finding_t *f, char *buf, size_t len);
/* Its holder, bytes, rate, what it keeps and where that was made (text report). */
struct tpa_paths;
void tpa_put_growth_text(FILE *out, const struct tpa_paths *paths, const tpa_finding_t *f);

void tpa_report_free(tpa_report_t *r);
void tpa_finding_free(tpa_finding_t *f);
void tpa_frames_free(tpa_frames_t *fr);

#endif
