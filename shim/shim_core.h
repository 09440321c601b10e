/* shim_core.h - internals shared by the shim's core files: the event ring,
 * record layouts, run state and the writer's entry points. */
#ifndef TPAUDIT_SHIM_CORE_H
#define TPAUDIT_SHIM_CORE_H

#include <stdatomic.h>
#include <stdint.h>

#include "shim_internal.h"

/* ---- ring: fixed 64-byte slots, a record spans consecutive slots ---- */
#define TPA_SLOT 64u
#define TPA_RING_SLOTS (1u << 18)
#define TPA_REC_MAX (256u * TPA_SLOT)

enum tpa_rec_type {
    TPA_REC_AUDIT_BEGIN = 1, TPA_REC_AUDIT_END, TPA_REC_TENSOR, TPA_REC_REF,
    TPA_REC_EVENT, TPA_REC_ALLOC, TPA_REC_API_CALL
};

struct tpa_rec_hdr {
    uint32_t nslots;
    uint16_t type;
    uint8_t nstr;
    uint8_t pad;
    uint32_t fixed_len;
    uint32_t nips;
};

struct tpa_fx_audit_begin { int64_t id, step, ts; int32_t rank, world; };
struct tpa_fx_audit_end { int64_t id, ts; };
struct tpa_fx_tensor {
    int64_t audit_id;
    uint64_t key, storage_ptr, storage_bytes, nbytes;
    int32_t ndim, local_ndim, requires_grad, has_grad;
    int64_t shape[TPAUDIT_MAX_DIMS], local_shape[TPAUDIT_MAX_DIMS];
};
struct tpa_fx_ref { int64_t audit_id; uint64_t holder_id, tensor_key, peer_key; int32_t holder_kind, role; };
struct tpa_fx_event { int64_t ts; uint64_t holder_id, old_key, new_key; int32_t kind, pad; };
struct tpa_fx_alloc {
    int64_t ts;
    uint64_t address, bytes, pool;
    int32_t op, memkind, device, source; /* source: 0 cupti, 1 region */
    uint32_t context, stream, correlation, pad;
};
struct tpa_fx_api_call { int64_t ts, thread; uint32_t correlation, pad; };

#define TPA_REC_MAX_STR 6
struct tpa_rec_view {
    int type;
    const void *fixed;
    const uint64_t *ips;
    int nips;
    const char *str[TPA_REC_MAX_STR];
    int slen[TPA_REC_MAX_STR];
};

/* Queues one record; strs[i] NULL is stored as NULL, strings longer than
 * caps[i] are cut and counted.  wait_ms > 0 waits that long for room. */
TPA_HIDDEN int tpa_enqueue(int type, const void *fixed, uint32_t fixed_len,
                           const char *const *strs, const uint32_t *caps, int nstr,
                           const uint64_t *ips, int nips, int wait_ms);
/* Writer side: copies the oldest published record out; 1 got, 0 empty. */
TPA_HIDDEN int tpa_ring_pop(void *buf, struct tpa_rec_view *view);
TPA_HIDDEN uint64_t tpa_ring_head(void);
TPA_HIDDEN uint64_t tpa_ring_tail(void);
TPA_HIDDEN void tpa_ring_reset(void);

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
TPA_HIDDEN void tpa_run_reset_counters(void);

/* ---- shim state ---- */
enum tpa_state { TPA_OFF = 0, TPA_RUNNING = 1, TPA_DISABLED = 2, TPA_CLOSED = 3 };
TPA_HIDDEN extern _Atomic int tpa_state;
TPA_HIDDEN void tpa_disable(const char *why);

/* ---- config parsing and TPAUDIT_AUDIT ---- */
TPA_HIDDEN void tpa_config_load(void);
TPA_HIDDEN const char *tpa_audit_spec(void);

/* ---- writer thread ---- */
TPA_HIDDEN int tpa_writer_start(void);           /* opens the file, starts the thread */
TPA_HIDDEN int tpa_writer_flush(int timeout_ms);  /* waits for everything queued */
TPA_HIDDEN int tpa_writer_flush_signal_safe(int timeout_ms);
TPA_HIDDEN void tpa_writer_finish(int has_status, int exit_status);
TPA_HIDDEN void tpa_writer_pause_for_fork(void);
TPA_HIDDEN void tpa_writer_resume_after_fork(void);
TPA_HIDDEN void tpa_writer_reset_in_child(void);

/* ---- stacks and modules (writer side) ---- */
TPA_HIDDEN void tpa_stack_reset(void);
/* Returns the stack id of ips (inserting it once), 0 on error. */
struct sqlite3_stmt;
TPA_HIDDEN int64_t tpa_stack_intern(struct sqlite3_stmt *insert, const uint64_t *ips, int n, int *err);
TPA_HIDDEN int tpa_modules_refresh(struct sqlite3_stmt *insert, struct sqlite3_stmt *unload, int force);
TPA_HIDDEN void tpa_modules_reset(void);

/* ---- process facts ---- */
TPA_HIDDEN const char *tpa_self_path(void);      /* absolute path of libtpaudit.so */
TPA_HIDDEN void tpa_python_bootstrap(void);
TPA_HIDDEN int tpa_read_cmdline(char *buf, int cap); /* NUL-separated, returns length */

#endif
