/*
 * cupti_contract.h - the contract between the shim's core (config, ring,
 * writer, stacks, lifecycle) and its CUPTI part (cupti_*.c).  Not installed;
 * nothing outside shim/ includes it.  All functions are safe to call from
 * any thread, never block on SQLite, never call malloc on the hot path, and
 * return a status (0 ok, negative TPAUDIT_E* from tpaudit.h) instead of
 * exiting.
 */
#ifndef TPAUDIT_CUPTI_CONTRACT_H
#define TPAUDIT_CUPTI_CONTRACT_H

#include <stdarg.h>
#include <stdint.h>

#include "tpaudit.h"

#define TPA_HIDDEN __attribute__((visibility("hidden")))
#define TPA_API    __attribute__((visibility("default")))

/* ---- configuration (parsed once in the constructor, see docs/ENVIRONMENT.md) ---- */
enum tpa_log_level { TPA_LOG_WARN = 0, TPA_LOG_INFO = 1, TPA_LOG_DEBUG = 2 };

struct tpa_config {
    char out_dir[4096]; /* TPAUDIT_OUT, default TPAUDIT_DEFAULT_OUT (tpaudit.h) */
    int cupti_enabled;  /* TPAUDIT_CUPTI: auto=1, off=0 */
    int python_enabled; /* TPAUDIT_PYTHON: auto=1, off=0 */
    int stack_depth;    /* TPAUDIT_STACK_DEPTH, 0..TPA_MAX_STACK, default 32 */
    int log_level;      /* TPAUDIT_LOG */
};
#define TPA_MAX_STACK 128

TPA_HIDDEN const struct tpa_config *tpa_config(void);

/* One line to stderr, prefixed "tpaudit: ", if level <= TPAUDIT_LOG. */
TPA_HIDDEN void tpa_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Monotonic nanoseconds: the clock of every timestamp in the database. */
TPA_HIDDEN int64_t tpa_now_ns(void);

/* ---- native stacks (capture on the caller's thread, raw IPs only) ---- */
/* Fills ips with up to max return addresses of the caller, skipping `skip`
 * innermost frames of the shim itself; returns the count (0 when
 * TPAUDIT_STACK_DEPTH is 0 or unwinding fails). Reentrancy-safe. */
TPA_HIDDEN int tpa_stack_capture(uint64_t *ips, int max, int skip);

/* ---- allocation records (the CUPTI part produces them) ---- */
enum tpa_alloc_op { TPA_ALLOC = 1, TPA_FREE = 2 };
enum tpa_memkind {
    TPA_MEM_DEVICE = 1,
    TPA_MEM_PINNED = 2,
    TPA_MEM_MANAGED = 3,
    TPA_MEM_POOL = 4,
    TPA_MEM_VMM = 5,
    TPA_MEM_REGION = 6
};

struct tpa_alloc_rec {
    int64_t ts_ns; /* on tpa_now_ns()'s clock */
    int op;        /* enum tpa_alloc_op */
    int memkind;   /* enum tpa_memkind */
    uint64_t address;
    uint64_t bytes;
    int device;
    uint32_t context;
    uint32_t stream;
    uint64_t pool;
    uint32_t correlation;
    const char *label; /* static string or NULL; copied */
};

/* Queues one alloc row (source 'cupti'). */
TPA_HIDDEN int tpa_emit_alloc(const struct tpa_alloc_rec *rec);

/* Queues one api_call row: `api` a static string, ips/n_ips the stack. */
TPA_HIDDEN int tpa_emit_api_call(uint32_t correlation, const char *api, int64_t ts_ns, const uint64_t *ips, int n_ips);

/* Queues one oom row (api.c's tpaudit_v1_record_oom and the CUPTI
 * callbacks): numbers it in the process's count of them and, with capture
 * and among the first TPAUDIT_OOM_STACKS, captures the native stack below
 * `skip` frames; waits up to wait_ms for room in the ring.  The count, or
 * a negative TPAUDIT_E*. */
TPA_HIDDEN int64_t tpa_emit_oom(const tpaudit_oom_t *oom, int capture, int skip, int wait_ms);

/* Run-row fields the CUPTI part owns. */
TPA_HIDDEN void tpa_run_set_cupti_status(const char *status); /* "on" / "off: <why>" */
TPA_HIDDEN void tpa_run_add_cupti_dropped(uint64_t n);        /* makes the run incomplete */

/* ---- hooks the core calls in the CUPTI part (cupti_*.c defines them; a
 * build without CUPTI links shim/cupti_none.c instead) ---- */
/* LD_PRELOAD path, from the constructor, after config and writer are up. */
TPA_HIDDEN int tpa_cupti_on_load(void);
/* CUDA_INJECTION64_PATH path (InitializeInjection); subscribes at most once. */
TPA_HIDDEN int tpa_cupti_on_injection(void);
/* Audit points and exit: push buffered activity records into the ring. */
TPA_HIDDEN void tpa_cupti_flush(void);
/* Destructor / exit: a last flush of buffered activity (the subscription
 * stays: the process is ending). */
TPA_HIDDEN void tpa_cupti_shutdown(void);
/* After fork() in the child: forget the parent's subscription state. */
TPA_HIDDEN void tpa_cupti_after_fork_child(void);

#endif /* TPAUDIT_CUPTI_CONTRACT_H */
