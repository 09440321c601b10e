/* analyzer.h - internal interface of the tpaudit analyzer: opening
 * databases and reading them (with the finding rules, findings.h) into a
 * tpa_report_t, and writing the verbs' output.  (The exit codes and the
 * verbs' option helpers are common/options.h's.) */
#ifndef TPA_ANALYZER_H
#define TPA_ANALYZER_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "findings.h"
#include "options.h"
#include "reports.h"

/* The newest database version this analyzer reads; it reads every one since
 * 1 (a version-1 file has no ledger and no samples: no growth is judged; one
 * before version 3 has no oom table: no OOM is judged). */
#define TPA_SCHEMA_VERSION 3

/* Opens a database for reading without writing, locking or adding files
 * beside it; close it with tpa_db_close (db_open.c).  0; -1 with why; 1
 * with why when the shim is still creating it (starting: no run yet). */
int tpa_db_open(const char *path, sqlite3 **out, char *why, size_t why_len);
/* The name is one the shim gives its databases (tpaudit-*.db). */
int tpa_db_named_by_shim(const char *path);
void tpa_db_close(sqlite3 *db);
/* Removes the private copies ($TMPDIR/tpaudit-read-PID-*) whose analyzer
 * is gone (killed while it read); each copy is otherwise removed as soon
 * as it is open. */
void tpa_db_clean_stale(void);

/* Expands PATH arguments (files or directories of *.db) into a sorted list (paths.c). */
int tpa_collect_paths(int n, char **args, char ***files, size_t *n_files, char *why, size_t why_len);

/* What a verb reads of each database (load.c): the findings' kinds and
 * bytes always; their names, stacks, allocations and messages (DETAILS),
 * or those only of the findings that stand for their group of the same
 * finding on several ranks, as the text report shows them (LEAD_DETAILS);
 * the allocation scan (MEMORY: the plot and memory by library); the stale
 * bytes of every audit (MARKS: the plot's audit points, a findings pass per
 * audit). */
enum tpa_need {
    TPA_NEED_FINDINGS = 0,
    TPA_NEED_DETAILS = 1,
    TPA_NEED_MEMORY = 2,
    TPA_NEED_LEAD_DETAILS = 4,
    TPA_NEED_MARKS = 8,
    TPA_NEED_ALL = TPA_NEED_DETAILS | TPA_NEED_MEMORY | TPA_NEED_MARKS,
    /* the owner timeline (the HTML report, the memory viewer's export) */
    TPA_NEED_OWNERS = 16,
    /* every device allocation with its stack (the memory viewer's export) */
    TPA_NEED_DEVICE_MEMORY = 32,
    /* the peak of activations alone (the gate's --max-peak; MEMORY reads it too) */
    TPA_NEED_PEAK = 64
};
/* Loads every database into one report (runs + findings), read in
 * parallel, merged in the order given. 0, or -1 with why. */
int tpa_analyze_for(char **files, size_t n_files, int needs, tpa_report_t *report, char *why, size_t why_len);
int tpa_analyze(char **files, size_t n_files, tpa_report_t *report, char *why, size_t why_len); /* TPA_NEED_ALL */
/* Marks the runs that are helper processes of another run (load.c). */
void tpa_mark_helpers(tpa_report_t *r);

/* PATH arguments into one report: databases and directories, or (json_ok,
 * one path) a JSON report read back by report_read.c. 0, or -1 with why. */
int tpa_load_inputs(int n, char **paths, int json_ok, int needs, tpa_report_t *r, char *why, size_t why_len);
/* The same, saying why on stderr in one `tpaudit:` line when it fails
 * (everything read, or what `needs` asks for). */
int tpa_load_or_say(int n, char **paths, int json_ok, tpa_report_t *r);
int tpa_load_or_say_for(int n, char **paths, int json_ok, int needs, tpa_report_t *r);
int tpa_is_json_report(const char *path);
int tpa_read_json_report(const char *path, tpa_report_t *r, char *why, size_t why_len);

/* Native stack `stack_id` of `db` as frames (function, file:line or
 * module+offset), at most TPA_MAX_FRAMES of them; modules are opened once
 * and cached (a tpa_symbolize_fn: the finding rules name stacks with it).
 * tpa_symbolize_forget drops what was cached about `db`. */
int tpa_symbolize_stack(sqlite3 *db, int64_t stack_id, tpa_frames_t *out);
void tpa_symbolize_forget(sqlite3 *db);
/* Path of the module of `db` that held address `ip` (the latest loaded), or NULL. */
const char *tpa_module_path_of(sqlite3 *db, uint64_t ip);

/* One pass over the alloc table: run->points (memory over time, about 512
 * points) and run->by_library (device memory live at at_ns). alloc_scan.c */
int tpa_scan_allocations(sqlite3 *db, int64_t at_ns, tpa_run_t *run);
/* The library that asked for the allocations of native stack `stack_id`,
 * as the scan names it ("libnccl.so.2", "(no stack)"); malloc'd, NULL when
 * the stack table cannot be read. */
char *tpa_stack_library(sqlite3 *db, int64_t stack_id);
/* memory_growth of the libraries other than PyTorch's allocator: device
 * memory one library keeps growing across the steady-state audits up to
 * audit `audit` (CUPTI's allocations; library_growth.c), added to `r` as
 * findings of run `run_index`, with their creation stacks when `details`.
 * 0, or -1 when a query fails. */
int tpa_library_growth(sqlite3 *db, int64_t audit, size_t run_index, int details, tpa_report_t *r);

/* The memory ledger of audit `audit` into run->ledger (ledger_read.c),
 * with the rows of other libraries from run->by_library when it was
 * scanned; nothing for a database without a ledger. 0, or -1. */
int tpa_read_ledger(sqlite3 *db, int64_t audit, tpa_run_t *run);
/* 1 when the database has a ledger table (schema version 2 on), else 0 (ledger_read.c). */
int tpa_has_ledger(sqlite3 *db);
/* The peak of activations into run->has_peak and run->peak_* (peak_read.c):
 * nothing for a database without a ledger or rows of saved tensors by
 * module. 0, or -1. */
int tpa_read_peak(sqlite3 *db, tpa_run_t *run);
/* The growth series of run run_index (growth_series.c), after its findings: 0, or -1 when a query fails. */
int tpa_read_growth_series(sqlite3 *db, tpa_report_t *r, size_t run_index);

/* The owner timeline of the run's main device (the CUDA device its ledger
 * measured most, else its one device) into run->owners: each closed audit
 * with its ledger groups and each step sample and phase mark (with its
 * transient groups, tpa_split_transient), in time order; the audits
 * alone (owner_device NULL) for a database without a ledger (version 1).
 * owner_timeline.c.  0, or -1. */
int tpa_read_owner_timeline(sqlite3 *db, tpa_run_t *run);
/* Gives each sample and phase mark of run->owners (in time order) its
 * transient groups (tpa_owner_point_t); 0, or -1 when out of memory. */
int tpa_split_transient(tpa_run_t *run);
/* The device's peak and the part of a step that reached it, from the phase
 * marks (run->device_peak_*; none without a phase_mark table).
 * device_peak.c.  0, or -1. */
int tpa_read_device_peak(sqlite3 *db, tpa_run_t *run);

/* The moment of the peak: the probe's window (table peak_part) on `device`
 * (NULL: any) whose replayed peak was the most, into run->moment_*
 * (nothing without the table).  peak_moment.c.  0, or -1. */
int tpa_read_peak_moment(sqlite3 *db, tpa_run_t *run, const char *device);
/* Every device allocation and free CUPTI recorded, with each allocation's
 * native stack symbolized once per stack and the library that asked for it
 * (device_memory.c).  0, or -1. */
int tpa_read_device_memory(sqlite3 *db, tpa_device_memory_t **out);

/* Writes to stdout ("-" or NULL), to a regular file through a temp file
 * renamed over it only when render returns 0, or to anything else (a
 * device, a FIFO) opened with O_TRUNC.  0, or -1 with why. */
int tpa_write_output(const char *path, int (*render)(const tpa_report_t *, FILE *), const tpa_report_t *report,
                     char *why, size_t why_len);
/* The same for any writer of `ctx`. */
int tpa_write_output_with(const char *path, int (*render)(const void *ctx, FILE *out), const void *ctx, char *why,
                          size_t why_len);

#endif
