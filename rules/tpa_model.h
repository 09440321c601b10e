/*
 * tpa_model.h - the in-memory result of an analysis: runs, findings, plot
 * series and the gate verdict.  The finding rules (rules/) and the analyzer
 * fill it; the renderers in reports/ read it and never touch a database.
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

/* How a program names native stack `stack_id` of database `db` as frames,
 * at most TPA_MAX_FRAMES of them (the CLI with debug info, libdw; the shim
 * with dladdr on its own live addresses).  0, or -1. */
#define TPA_MAX_FRAMES 256
struct sqlite3;
typedef int (*tpa_symbolize_fn)(struct sqlite3 *db, int64_t stack_id, tpa_frames_t *out);

/* A replacement of a tensor after its first one: the name it was replaced
 * under and the stack that replaced it. */
typedef struct tpa_replacement {
    char *name;
    tpa_frames_t at;
} tpa_replacement_t;

/* An allocation that failed for want of device memory (out_of_memory,
 * caught_out_of_memory; rules/out_of_memory.c): what was asked and what the
 * device and the allocator had, who held the memory, and why it ran out.
 * Bytes are -1 when unknown. */
typedef struct tpa_oom {
    char *source;  /* "torch" (the caching allocator), "cuda" (a failed CUDA call), a runtime's name */
    char *api;     /* the call that failed */
    int64_t device; /* CUDA ordinal, -1 when unknown */
    int64_t requested, free_bytes, total_bytes, reserved_free, largest_free;
    int64_t outside_bytes; /* in use on the device outside this process's allocator (total - free - reserved), -1 */
    int64_t count;         /* the process's OOMs in all (this one and those caught) */
    int64_t caught;        /* of them caught (the run went on) */
    int64_t audit_id;      /* the audit taken at it, 0 when none */
    char *cause;      /* "growth", "step_peak", "fragmentation", "other_memory", "allocation" */
    char *cause_text; /* the cause in one sentence */
    char *held;       /* who held the device: "__main__.kept 61.3 GiB (...) · optimizer state 1.0 GiB · ..." */
    tpa_frames_t py_stack;     /* the failing allocation's Python stack, the user's line first */
    tpa_frames_t native_stack; /* its native stack (a failed CUDA call, a runtime) */
} tpa_oom_t;

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
    tpa_oom_t *oom; /* out_of_memory kinds: the failed allocation; NULL for the others */
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

/* A value at an optimizer step: a growth sample, a holder's bytes at an audit. */
typedef struct tpa_step_bytes {
    int64_t step;
    int64_t bytes;
} tpa_step_bytes_t;

/* What a growth run's plot and line show (analyzer/growth_series.c): the
 * probe's per-step samples (device bytes allocated, or malloc's bytes in
 * use on the CPU; the series downsampled), the step growth was first
 * suspected (its first growth audit; 0 when none) and the bytes of the
 * holder of the run's fastest memory_growth finding at each audit. */
typedef struct tpa_growth_series {
    tpa_step_bytes_t *samples;
    size_t n_samples;
    char *device; /* "cpu", "cuda:0" */
    int64_t first_step, first_bytes, least_step, least_bytes, last_step, last_bytes; /* of every sample */
    int64_t suspected_step;
    char *holder;
    tpa_step_bytes_t *held;
    size_t n_held;
} tpa_growth_series_t;

typedef struct tpa_audit_mark {
    int64_t ts_ns;
    int64_t step;
    int64_t stale_bytes;
    int blind; /* saw an optimizer but no model parameter: judged nothing (stale_bytes 0) */
    int no_optimizer; /* saw no optimizer (an exit audit after the program dropped it): nothing to judge */
    int oom;   /* taken at an allocation that ran out of device memory (label 'oom') */
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

/* The owner timeline (owner_timeline.c): memory by owner at each audit
 * (its ledger's groups) and, between audits, the probe's step samples. */
typedef struct tpa_owner_group {
    char *owner_kind; /* parameter, gradient, optimizer_state, stale, held, autograd, allocator_cache, unattributed */
    char *owner;      /* module path, optimizer class, holder path; NULL when none */
    char *path;       /* held, autograd: the newest tensor's reference chain; NULL when none */
    char *created_at; /* "file:line:function" lines, innermost first; NULL when not recorded */
    int64_t bytes;
    int64_t tensors;
} tpa_owner_group_t;

typedef struct tpa_owner_point {
    int64_t ts_ns;
    int64_t step;  /* -1 when none */
    char *label;   /* an audit's label ('step', 'growth', 'exit', 'oom', a user's); NULL for a sample */
    tpa_owner_group_t *groups; /* an audit's ledger on the timeline's device (measured left out) */
    size_t n_groups;
    int64_t measured;       /* an audit's measured total, -1 when none */
    int64_t live_bytes;     /* a sample's or phase mark's live bytes, -1 for an audit */
    int64_t reserved_bytes; /* a sample's or phase mark's reserved bytes, -1 when unknown */
    char *phase;            /* a phase mark's part of the step (table phase_mark); NULL otherwise */
    char *phase_owner;      /* its owner (a root module's class, a submodule's dotted name, an optimizer's class); NULL when none */
    /* A sample's or mark's live bytes beyond what the last audit attributed,
     * by the part of a step that made them (analyzer/owner_timeline.c):
     * owner_kind the phase ("forward", "backward", "optimizer_step",
     * "outside") or "unknown" (grown where no mark said which part ran),
     * owner the phase's owner; bytes only. */
    tpa_owner_group_t *transient;
    size_t n_transient;
} tpa_owner_point_t;

/* Device memory as CUPTI saw it (device_memory.c, for the memory viewer's
 * export): each device allocation and free in time order, with the native
 * stack and library of each allocation. */
typedef struct tpa_alloc_stack {
    tpa_frames_t frames;
    char *library; /* NULL: PyTorch's caching allocator (libc10_cuda, libtorch, or no stack) */
} tpa_alloc_stack_t;

typedef struct tpa_segment_event {
    int64_t ts_ns;
    int is_free;
    int64_t address;
    int64_t bytes; /* 0 for a free (its allocation's size) */
    int64_t device;
    int64_t stream;
    int64_t stack; /* index into stacks, -1 when none */
} tpa_segment_event_t;

typedef struct tpa_device_memory {
    int schema_version;
    tpa_segment_event_t *events;
    size_t n_events;
    tpa_alloc_stack_t *stacks;
    size_t n_stacks;
} tpa_device_memory_t;

/* One module's activations at a run's peak: the bytes of its ledger rows
 * "saved for backward in <module>" (the deepest module that made them). */
typedef struct tpa_peak_module {
    char *module;
    int64_t bytes;
} tpa_peak_module_t;

/* One part of the memory at the moment of a step's peak (table peak_part). */
typedef struct tpa_moment_part {
    char *kind;  /* a ledger owner kind, "temporary", "made_in_backward", "allocator_cache" */
    char *owner; /* NULL: none */
    int64_t bytes, blocks;
} tpa_moment_part_t;

/* Modules a run's peak lists at most, the most bytes first. */
#define TPA_PEAK_MODULES 64

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
    /* The owner timeline of one device (owner_device: "cuda:0", "cpu"), in
     * time order; none unless asked for (TPA_NEED_OWNERS). */
    char *owner_device;
    tpa_owner_point_t *owners;
    size_t n_owners;
    tpa_device_memory_t *device_memory; /* only when asked for (TPA_NEED_DEVICE_MEMORY) */
    tpa_growth_series_t growth; /* n_samples 0: none recorded (or not read) */
    /* The peak of activations (analyzer/peak_read.c): of the finished
     * audits whose ledger has rows "saved for backward in <module>", the one
     * where they add up to the most (has_peak 0: none), its step (-1: none)
     * and label, and its modules, the most bytes first. */
    int has_peak;
    int64_t peak_step, peak_bytes;
    char *peak_label;
    tpa_peak_module_t *peak_modules;
    size_t n_peak_modules;
    /* What the ledger counted at that audit, summed over devices: each owner
     * kind (its rows by module as "activations"), the most bytes first (in
     * `module`: the kind), and the measured total they add up to. */
    tpa_peak_module_t *peak_parts;
    size_t n_peak_parts;
    int64_t peak_measured;
    /* The device's peak (analyzer/device_peak.c): the most allocated bytes
     * the phase marks saw (torch.cuda.max_memory_allocated; 0: no mark saw
     * one), and the part of a step during which it was first reached (the
     * mark before the first that saw it: its step, phase and owner; step -1
     * and phase NULL when the first mark saw it already). */
    int64_t device_peak_bytes, device_peak_step;
    char *device_peak_phase, *device_peak_owner;
    /* The last finished audit in that part or the one before (the audit
     * in backward of `tpaudit run --peak`): its label (NULL: none), step and
     * the bytes allocated on that device at it (its ledger's measured total
     * less the allocator's cache); the peak beyond them was made after it. */
    char *device_peak_audit;
    int64_t device_peak_audit_step, device_peak_audit_bytes;
    /* The moment of the peak (analyzer/peak_moment.c, table peak_part): of
     * the probe's replays of the allocator's history from an audit inside
     * backward, the one whose peak was the most allocated bytes (0: none),
     * its step, and the blocks live at that moment by owner, the most bytes
     * first (the allocator's cache last). */
    int64_t moment_bytes, moment_step;
    tpa_moment_part_t *moment_parts;
    size_t n_moment_parts;
} tpa_run_t;

typedef struct tpa_gate_rule {
    char *rule; /* "max-retained", "max-growth", "max-peak", "max-findings", "complete" */
    int64_t limit;
    int64_t measured;
    int64_t rank; /* -1: all ranks (or the process `pid` when set) */
    int64_t pid;  /* max-retained of a process without a rank, else 0 */
    int passed;
    const tpa_run_t *peak; /* max-peak: the run whose peak was measured (its top modules named), else NULL */
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
    /* how the finding rules name native stacks (the program's own); NULL: they stay empty */
    tpa_symbolize_fn symbolize;
} tpa_report_t;

/* Numbers read from a database are range-checked into the model: byte
 * counts lie in [0, TPA_MAX_BYTES] (8 PiB, exact as a double) and times in
 * [0, TPA_MAX_TS] (about 146 years of nanoseconds), so their sums and
 * differences cannot overflow; sums of bytes saturate at INT64_MAX. */
#define TPA_MAX_BYTES ((int64_t)1 << 53)
#define TPA_MAX_TS    ((int64_t)1 << 62)
int64_t tpa_add_bytes(int64_t a, int64_t b);
int64_t tpa_sane_bytes(int64_t bytes); /* negative -> 0, above TPA_MAX_BYTES -> TPA_MAX_BYTES */
int64_t tpa_clamp_ts(int64_t ts);

/* A byte count as text: "512 B", "1.5 GiB" (binary units, one decimal). */
void tpa_format_bytes(int64_t bytes, char *buf, size_t len);

/* Appends *f to r's findings, which then own what it holds; -1 when out of
 * memory (r unchanged, *f still the caller's to free). */
int tpa_report_add_finding(tpa_report_t *r, const tpa_finding_t *f);

/* Freeing what the model holds (tpa_model.c). */
void tpa_report_free(tpa_report_t *r);
void tpa_finding_free(tpa_finding_t *f);
void tpa_frames_free(tpa_frames_t *fr);
void tpa_owner_points_free(tpa_owner_point_t *v, size_t n);
void tpa_device_memory_free(tpa_device_memory_t *m);
void tpa_oom_free(tpa_oom_t *o);

#endif
