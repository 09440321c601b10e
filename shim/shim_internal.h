/* shim_internal.h - every internal interface between the shim's files (not
 * installed): the event ring and its record layouts, run state, shim
 * state, the database (db.c), record -> row (rows.c), the writer thread,
 * the database's descriptors, the process's life, stacks, modules and process
 * facts.  cupti_contract.h is the narrower part the CUPTI files see. */
#ifndef TPAUDIT_SHIM_INTERNAL_H
#define TPAUDIT_SHIM_INTERNAL_H

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cupti_contract.h"
#include "records.h"

/* ---- ring: fixed 64-byte slots, a record spans consecutive slots ---- */
#define TPA_SLOT           64u
#define TPA_RING_SLOTS     (1u << 18) /* default: 16 MiB of slots + 2 MiB sequence words */
#define TPA_RING_MIN_SLOTS (1u << 12) /* 256 KiB, under a small RLIMIT_AS */
#define TPA_REC_MAX        (256u * TPA_SLOT)

enum tpa_rec_type {
    TPA_REC_AUDIT_BEGIN = 1,
    TPA_REC_AUDIT_END,
    TPA_REC_TENSOR,
    TPA_REC_REF,
    TPA_REC_EVENT,
    TPA_REC_ALLOC,
    TPA_REC_API_CALL,
    TPA_REC_LEDGER,
    TPA_REC_SAMPLE,
    TPA_REC_PHASE_MARK,
    TPA_REC_OOM,
    TPA_REC_PEAK_PART
};

struct tpa_rec_hdr {
    uint32_t nslots;
    uint16_t type;
    uint8_t nstr;
    uint8_t pad;
    uint32_t fixed_len;
    uint32_t nips;
};

struct tpa_fx_audit_begin {
    int64_t id, step, ts;
    int32_t rank, world;
};
struct tpa_fx_audit_end {
    int64_t id, ts;
};
/* A tensor record carries the caller's struct as given (a shorter one
 * zero-filled), so a field added to tpaudit_tensor_t reaches records.h with
 * no copy here or in api.c.  Its pointers are cleared: the strings travel in
 * the record's string slots, the dimensions in the arrays below, and
 * t.local_ndim is -1 when the local shape is the global one. */
struct tpa_fx_tensor {
    int64_t audit_id;
    tpaudit_tensor_t t;
    int64_t shape[TPAUDIT_MAX_DIMS], local_shape[TPAUDIT_MAX_DIMS];
};
struct tpa_fx_ref {
    int64_t audit_id;
    uint64_t holder_id, tensor_key, peer_key;
    int32_t holder_kind, role;
};
struct tpa_fx_ledger {
    int64_t audit_id;
    uint64_t bytes;
    int64_t tensors, with_graph;
};
struct tpa_fx_sample {
    int64_t ts, step;
    uint64_t live_bytes;
    int64_t reserved_bytes, py_blocks, peak_bytes;
};
struct tpa_fx_peak_part {
    int64_t ts, step;
    uint64_t bytes;
    int64_t blocks;
};
struct tpa_fx_oom {
    int64_t ts, seq, device;
    uint64_t requested;
    int64_t free_bytes, total_bytes, reserved_free, largest_free, audit_id, step;
};
struct tpa_fx_event {
    int64_t ts;
    uint64_t holder_id, old_key, new_key;
    int32_t kind, pad;
};
struct tpa_fx_alloc {
    int64_t ts;
    uint64_t address, bytes, pool;
    int32_t op, memkind, device, source; /* source: 0 cupti, 1 region */
    uint32_t context, stream, correlation, pad;
};
struct tpa_fx_api_call {
    int64_t ts, thread;
    uint32_t correlation, pad;
};

/* The longest string each kind of string slot keeps, in bytes; a longer
 * one is cut and counted. */
#define TPA_CAP_NAME    1024u
#define TPA_CAP_SHORT   256u
#define TPA_CAP_DETAIL  2048u
#define TPA_CAP_PYSTACK 8192u

/* The string slots of the records with more than one string (the others
 * have one, slot 0, capped at TPA_CAP_SHORT), each with its cap: api.c
 * queues them and records.h reads them by name. */
#define TPA_TENSOR_SLOTS(X)               \
    X(TPA_TENSOR_S_NAME, TPA_CAP_NAME)    \
    X(TPA_TENSOR_S_DTYPE, TPA_CAP_SHORT)  \
    X(TPA_TENSOR_S_DEVICE, TPA_CAP_SHORT) \
    X(TPA_TENSOR_S_TYPE, TPA_CAP_SHORT)
#define TPA_REF_SLOTS(X)                     \
    X(TPA_REF_S_HOLDER_CLASS, TPA_CAP_SHORT) \
    X(TPA_REF_S_PATH, TPA_CAP_NAME)
#define TPA_EVENT_SLOTS(X)                     \
    X(TPA_EVENT_S_NAME, TPA_CAP_NAME)          \
    X(TPA_EVENT_S_HOLDER_CLASS, TPA_CAP_SHORT) \
    X(TPA_EVENT_S_DETAIL, TPA_CAP_DETAIL)      \
    X(TPA_EVENT_S_PY_STACK, TPA_CAP_PYSTACK)
#define TPA_LEDGER_SLOTS(X)                     \
    X(TPA_LEDGER_S_DEVICE, TPA_CAP_SHORT)       \
    X(TPA_LEDGER_S_OWNER_KIND, TPA_CAP_SHORT)   \
    X(TPA_LEDGER_S_OWNER, TPA_CAP_NAME)         \
    X(TPA_LEDGER_S_HOLDER_CLASS, TPA_CAP_SHORT) \
    X(TPA_LEDGER_S_PATH, TPA_CAP_NAME)          \
    X(TPA_LEDGER_S_SHAPES, TPA_CAP_SHORT)       \
    X(TPA_LEDGER_S_DTYPE, TPA_CAP_SHORT)        \
    X(TPA_LEDGER_S_CREATED_AT, TPA_CAP_PYSTACK)
#define TPA_OOM_SLOTS(X)               \
    X(TPA_OOM_S_SOURCE, TPA_CAP_SHORT) \
    X(TPA_OOM_S_API, TPA_CAP_SHORT)    \
    X(TPA_OOM_S_PY_STACK, TPA_CAP_PYSTACK)
#define TPA_PHASE_MARK_SLOTS(X)                \
    X(TPA_PHASE_MARK_S_DEVICE, TPA_CAP_SHORT) \
    X(TPA_PHASE_MARK_S_PHASE, TPA_CAP_SHORT)  \
    X(TPA_PHASE_MARK_S_OWNER, TPA_CAP_NAME)
#define TPA_PEAK_PART_SLOTS(X)                     \
    X(TPA_PEAK_PART_S_DEVICE, TPA_CAP_SHORT)     \
    X(TPA_PEAK_PART_S_OWNER_KIND, TPA_CAP_SHORT) \
    X(TPA_PEAK_PART_S_OWNER, TPA_CAP_NAME)
#define TPA_SLOT_ENUM(slot, cap) slot,
#define TPA_SLOT_CAP(slot, cap)  [slot] = cap,
enum { TPA_TENSOR_SLOTS(TPA_SLOT_ENUM) TPA_TENSOR_NSTR };
enum { TPA_REF_SLOTS(TPA_SLOT_ENUM) TPA_REF_NSTR };
enum { TPA_EVENT_SLOTS(TPA_SLOT_ENUM) TPA_EVENT_NSTR };
enum { TPA_LEDGER_SLOTS(TPA_SLOT_ENUM) TPA_LEDGER_NSTR };
enum { TPA_OOM_SLOTS(TPA_SLOT_ENUM) TPA_OOM_NSTR };
enum { TPA_PHASE_MARK_SLOTS(TPA_SLOT_ENUM) TPA_PHASE_MARK_NSTR };
enum { TPA_PEAK_PART_SLOTS(TPA_SLOT_ENUM) TPA_PEAK_PART_NSTR };

#define TPA_REC_MAX_STR 8
struct tpa_rec_view {
    int type;
    const void *fixed;
    const uint64_t *ips;
    int nips;
    const char *str[TPA_REC_MAX_STR];
    int slen[TPA_REC_MAX_STR];
};

/* Queues one record; strs[i] NULL is stored as NULL, strings longer than
 * caps[i] are cut and counted.  wait_ms > 0 waits that long for room.
 * tpa_enqueue (process_life.c) is every producer's way in: it starts the
 * process's database on its first record, then calls tpa_ring_put. */
TPA_HIDDEN int tpa_enqueue(int type, const void *fixed, uint32_t fixed_len, const char *const *strs,
                           const uint32_t *caps, int nstr, const uint64_t *ips, int nips, int wait_ms);
TPA_HIDDEN int tpa_ring_put(int type, const void *fixed, uint32_t fixed_len, const char *const *strs,
                            const uint32_t *caps, int nstr, const uint64_t *ips, int nips, int wait_ms);
/* Writer side: copies the oldest published record out; 1 got, 0 empty. */
TPA_HIDDEN int tpa_ring_pop(void *buf, struct tpa_rec_view *view);
TPA_HIDDEN uint64_t tpa_ring_head(void);
TPA_HIDDEN uint64_t tpa_ring_tail(void);
TPA_HIDDEN int tpa_ring_ensure(void);            /* maps the ring once; 0 or TPAUDIT_EDISABLED */
TPA_HIDDEN uint64_t tpa_ring_flush_target(void); /* head, or this thread's unpublished record */
TPA_HIDDEN int tpa_ring_used(void);              /* 1 once this process offered a record */
TPA_HIDDEN void tpa_ring_reset_in_child(void);

/* ---- run state (counters and text fields of the run row) ---- */
struct tpa_run_snapshot {
    int64_t rank, world_size, local_rank; /* -1 = unknown */
    uint64_t dropped, truncated, cupti_dropped;
    char cupti[256], python[256], note[1024];
};
TPA_HIDDEN void tpa_run_init(void);
TPA_HIDDEN unsigned tpa_run_generation(void);
TPA_HIDDEN void tpa_run_snapshot(struct tpa_run_snapshot *s);
TPA_HIDDEN void tpa_run_count_dropped(void);
TPA_HIDDEN void tpa_run_count_truncated(void);
TPA_HIDDEN void tpa_run_mark_incomplete(void);
TPA_HIDDEN int tpa_run_is_incomplete(void);
TPA_HIDDEN void tpa_run_set_rank(int rank, int world_size);
TPA_HIDDEN int tpa_run_set_text(const char *field, const char *value);
/* The python field between the bootstrap and the probe's start. */
#define TPA_PYTHON_PENDING "off: probe did not start"
#define TPA_PYTHON_NEVER_STARTED "off: probe never started, torch loaded (python -S?)"
/* 1 when the python field says the probe ran or was switched off ("on",
 * "off: ..."): a fact worth a database even with no other record. */
TPA_HIDDEN int tpa_run_python_is_worth_a_file(void);
TPA_HIDDEN int tpa_run_python_pending(void); /* the probe was bootstrapped and never started */
TPA_HIDDEN void tpa_run_reset_counters(void);

/* ---- shim state ---- */
enum tpa_state { TPA_OFF = 0, TPA_RUNNING = 1, TPA_DISABLED = 2, TPA_CLOSED = 3 };
TPA_HIDDEN extern _Atomic int tpa_state;
/* The one transition any file may take (run_state.c): RUNNING -> DISABLED,
 * one line, the run marked incomplete. */
TPA_HIDDEN void tpa_disable(const char *why);
/* 1 while RUNNING, else 0 (the record is refused: TPAUDIT_EDISABLED);
 * while CLOSED (the process is ending) it yields, leaving the CPU to the
 * writer.  Inline: every record asks it first. */
static inline int tpa_running(void) {
    int s = atomic_load_explicit(&tpa_state, memory_order_acquire);
    if (s == TPA_CLOSED) sched_yield();
    return s == TPA_RUNNING;
}

/* ---- config parsing and TPAUDIT_AUDIT ---- */
TPA_HIDDEN void tpa_config_load(void);

/* ---- the database (db.c): schema and statements from records.h ---- */
struct sqlite3_stmt;
#define TPA_ST_INSERT_ENUM(t, verb, ins, later, tail, idx) TPA_ST_INSERT_##t,
enum tpa_stmt {
    TPA_TABLES(TPA_ST_INSERT_ENUM) /* one insert per table, in TPA_TABLES order */
    TPA_ST_RUN_UPDATE,
    TPA_ST_AUDIT_END,
    TPA_ST_MODULE_UNLOAD,
    TPA_ST_BEGIN,
    TPA_ST_COMMIT,
    TPA_ST_COUNT
};
TPA_HIDDEN struct sqlite3_stmt *tpa_db_stmt(enum tpa_stmt which);
TPA_HIDDEN int tpa_db_step(struct sqlite3_stmt *st); /* step and reset; 0 when done */
TPA_HIDDEN int tpa_db_fail(const char *what);        /* disables the shim, says why; -1 */
TPA_HIDDEN int tpa_db_open(void);                    /* creates the file and schema, prepares the statements */
TPA_HIDDEN int tpa_db_reopen(void);                  /* the same file after a failed exec */
TPA_HIDDEN void tpa_db_made_whole(int reopened);     /* its run row and module table are in */
TPA_HIDDEN void tpa_db_close(void);
TPA_HIDDEN void tpa_db_rollback(void);
TPA_HIDDEN void tpa_db_remove_files(void);   /* only files this process created */
TPA_HIDDEN int tpa_db_forget_in_child(void); /* 1: forked mid open/close, SQLite unusable */

/* ---- record -> row (rows.c) ---- */
struct tpa_run_end {
    int64_t ts;
    int has_status, status;
    const char *ended_by;
};
TPA_HIDDEN int tpa_rows_write(const struct tpa_rec_view *v);
TPA_HIDDEN int tpa_rows_insert_run(struct sqlite3_stmt *insert);
/* The run row's state: end NULL while running (skipped when unchanged),
 * the final row with end. */
TPA_HIDDEN int tpa_rows_write_run(const struct tpa_run_end *end);
TPA_HIDDEN unsigned tpa_rows_run_generation_written(void);
TPA_HIDDEN void tpa_rows_reset(void);

/* ---- the writer (writer.c): what its thread does; process_life.c starts it ---- */
/* How long an exit, _exit or exec may spend draining the ring before the
 * rest is discarded and counted; how long without any progress of the
 * writer the end waits for the final run row; then how long for the close. */
#define TPA_END_DRAIN_MS 450
#define TPA_END_STALL_MS 5000
#define TPA_END_CLOSE_MS 300
#define TPA_WRITER_ALONE 1
TPA_HIDDEN int tpa_writer_open(void);            /* the first record's thread: the file; then the thread is made */
TPA_HIDDEN void tpa_writer_abandon(void);        /* the thread could not be made: the file goes */
TPA_HIDDEN int tpa_writer_run(void);             /* the thread's loop; TPA_WRITER_ALONE when no host thread is left */
TPA_HIDDEN void tpa_writer_end(void);            /* the thread's last step: final run row, close */
TPA_HIDDEN void tpa_writer_watch_alone(void);    /* the main thread left: idle, look for the last host thread */
TPA_HIDDEN int tpa_writer_flush(int timeout_ms); /* waits for everything queued */
TPA_HIDDEN int tpa_writer_flush_signal_safe(int timeout_ms);
/* Asks the writer to end the database: drain (bounded), the final run row
 * with ended_by ("exit", "_exit", "exec") and close.  discard_if_empty: a
 * process that recorded nothing removes its file instead.  -1: no writer. */
TPA_HIDDEN int tpa_writer_stop(const struct tpa_run_end *end, int discard_if_empty);
/* Waits for that end with atomics and nanosleep only (the writer does the
 * work), so it may run in a signal handler that calls _exit. */
TPA_HIDDEN void tpa_writer_wait_end(void);
TPA_HIDDEN int tpa_writer_after_failed_exec(void); /* 1 reopen the file, 0 none was kept, -1 still running */
TPA_HIDDEN int tpa_writer_reset_in_child(void);    /* 1: forked mid open/close, SQLite unusable */
TPA_HIDDEN int tpa_writer_has_db(void);
TPA_HIDDEN int tpa_writer_live(void);

/* ---- the database's file descriptors (db_fds.c) ---- */
#define TPA_MIN_NOFILE 64              /* below this RLIMIT_NOFILE the shim stays off */
#define TPA_MAX_DB_FDS 16              /* the database's, from tpa_dbfd_floor() up; libunwind's pipe above */
TPA_HIDDEN int tpa_dbfd_install(void); /* private SQLite: single-threaded, syscalls hooked */
TPA_HIDDEN int tpa_dbfd_floor(void);   /* lowest fd number for the shim, -1: limit too low */
TPA_HIDDEN int tpa_dbfd_lost(void);    /* 1 once a descriptor was found closed or replaced */
TPA_HIDDEN int tpa_dbfd_lowest(void);  /* the lowest number the database holds, -1 none (any thread) */
TPA_HIDDEN int tpa_dbfd_check(void);   /* checks every descriptor now; 0 all ours */
TPA_HIDDEN int tpa_dbfd_identity(const char *path, uint64_t *dev, uint64_t *ino); /* lstat, regular only */
TPA_HIDDEN void tpa_dbfd_note_created(uint64_t dev, uint64_t ino);
TPA_HIDDEN int tpa_dbfd_created(uint64_t dev, uint64_t ino);
TPA_HIDDEN void tpa_dbfd_forget_in_child(void);
TPA_HIDDEN int tpa_open_direct(const char *path, int flags, mode_t mode); /* the kernel's openat, no interposer */

/* ---- the process's life (process_life.c), called by entry.c and api.c ---- */
TPA_HIDDEN int tpa_life_start(void); /* 1 the first time */
TPA_HIDDEN int tpa_life_begin_recording(void);
TPA_HIDDEN void tpa_life_fork_child(void);
TPA_HIDDEN int tpa_life_notice_copy(void); /* 1: a clone child, just reset */
TPA_HIDDEN int tpa_life_running_here(int need_db);
TPA_HIDDEN void tpa_life_exit(int status, const char *ended_by);
TPA_HIDDEN int tpa_life_exec(void); /* 1 when the database was ended for the exec */
TPA_HIDDEN void tpa_life_exec_failed(int ended);
TPA_HIDDEN int tpa_life_give_back_fds(void); /* 1: the database was closed for the host */

/* ---- stacks and modules (writer side) ---- */
TPA_HIDDEN void tpa_stack_reset(void);
TPA_HIDDEN int tpa_stack_capturing(void); /* 1 inside this thread's unw_backtrace */
/* Returns the stack id of ips (inserting it once), 0 on error. */
TPA_HIDDEN int64_t tpa_stack_intern(struct sqlite3_stmt *insert, const uint64_t *ips, int n, int *err);
TPA_HIDDEN int tpa_modules_refresh(struct sqlite3_stmt *insert, struct sqlite3_stmt *unload, int force);
TPA_HIDDEN void tpa_modules_reset(void);

/* ---- process facts (proc_self.c) ---- */
TPA_HIDDEN void tpa_self_find(void);                  /* once, in the constructor */
TPA_HIDDEN const char *tpa_self_path(void);           /* absolute path of libtpaudit.so */
TPA_HIDDEN int tpa_is_python(void);                   /* basename of /proc/self/exe starts with python */
TPA_HIDDEN int tpa_read_cmdline(char *buf, int cap);  /* NUL-separated, returns length */
TPA_HIDDEN void tpa_argv_json(char *out, size_t cap); /* the command line as a JSON array */
TPA_HIDDEN long tpa_self_thread_room(void); /* RLIMIT_NPROC less the user's threads; LONG_MAX: no limit */
TPA_HIDDEN int tpa_torch_loaded(void); /* libtorch* or libc10 is mapped */
TPA_HIDDEN int tpa_self_alone(void); /* after the main thread left: 1 when the caller is the last thread */

/* ---- the host's descriptor calls (host_fds.c) ---- */
TPA_HIDDEN void tpa_fds_resolve(void); /* once, in the constructor */

/* ---- the shim's signal handlers, hidden from the host (host_signals.c) ---- */
TPA_HIDDEN void tpa_sig_resolve(void);                     /* once, in the constructor */
TPA_HIDDEN int tpa_sig_take(int sig, void (*handler)(int)); /* over SIG_DFL only; 0 taken */
TPA_HIDDEN void tpa_sig_die_of(int sig);                   /* the host's default back, raised again */

/* ---- Python bootstrap (python_boot.c) ---- */
TPA_HIDDEN void tpa_python_bootstrap(void);

#endif
