/* rows.c - record -> row: binds each record's fields to its table's insert
 * in the order records.h describes, and writes the run row (its start
 * facts once, its state at every commit and at the end). */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "binds.h"

static struct tpa_text view_text(const struct tpa_rec_view *v, int s) {
    return (struct tpa_text){v->str[s], v->slen[s]};
}
static struct tpa_text view_text_or(const struct tpa_rec_view *v, int s, const char *dflt) {
    return v->str[s] ? view_text(v, s) : text_of(dflt);
}

static void shape_json(char *out, size_t cap, const int64_t *dims, int n) {
    size_t k = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < n && k < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (k < cap) snprintf(out + k, cap - k, "]");
}

static const char *holder_text(int k) {
    return k == TPAUDIT_HOLDER_MODULE ? "module" : k == TPAUDIT_HOLDER_OPTIMIZER ? "optimizer" : "wrapper";
}
static const char *role_text(int r) {
    return r == TPAUDIT_ROLE_PARAM         ? "param"
           : r == TPAUDIT_ROLE_GROUP_PARAM ? "group_param"
           : r == TPAUDIT_ROLE_STATE       ? "state"
                                           : "map_entry";
}
static const char *event_text(int k) {
    return k == TPAUDIT_EVENT_OPTIMIZER_CREATED ? "optimizer_created"
           : k == TPAUDIT_EVENT_PARAM_CREATED   ? "param_created"
           : k == TPAUDIT_EVENT_PARAM_REPLACED  ? "param_replaced"
                                                : "module_replaced";
}
static const char *memkind_text(int m) {
    static const char *const t[] = {"device", "device", "pinned", "managed", "pool", "vmm", "region"};
    return (m >= 1 && m <= 6) ? t[m] : "device";
}

/* One function per record kind: its fixed part as f, then the binds. */
#define ROW_FN(fn, fx, table, COLUMNS, ...)                         \
    static int fn(const struct tpa_rec_view *v, int64_t stack_id) { \
        struct fx f;                                                \
        memcpy(&f, v->fixed, sizeof f);                             \
        sqlite3_stmt *st = tpa_db_stmt(TPA_ST_INSERT_##table);      \
        int col = 0;                                                \
        (void)stack_id;                                             \
        __VA_ARGS__                                                 \
        COLUMNS(BIND)                                               \
        return tpa_db_step(st);                                     \
    }

ROW_FN(audit_row, tpa_fx_audit_begin, audit, TPA_AUDIT_COLUMNS, )
ROW_FN(ref_row, tpa_fx_ref, ref, TPA_REF_COLUMNS, )
ROW_FN(event_row, tpa_fx_event, event, TPA_EVENT_COLUMNS, )
ROW_FN(api_call_row, tpa_fx_api_call, api_call, TPA_API_CALL_COLUMNS, )
ROW_FN(ledger_row, tpa_fx_ledger, ledger, TPA_LEDGER_COLUMNS, )
ROW_FN(sample_row, tpa_fx_sample, sample, TPA_SAMPLE_COLUMNS, )
ROW_FN(phase_mark_row, tpa_fx_sample, phase_mark, TPA_PHASE_MARK_COLUMNS, )
ROW_FN(oom_row, tpa_fx_oom, oom, TPA_OOM_COLUMNS, )
ROW_FN(peak_part_row, tpa_fx_peak_part, peak_part, TPA_PEAK_PART_COLUMNS, )
ROW_FN(alloc_row, tpa_fx_alloc, alloc, TPA_ALLOC_COLUMNS, int region = f.source != 0;)
ROW_FN(tensor_row, tpa_fx_tensor, tensor, TPA_TENSOR_COLUMNS, char shape[256]; char local[256];
       shape_json(shape, sizeof shape, f.shape, f.t.ndim);
       if (f.t.local_ndim >= 0) shape_json(local, sizeof local, f.local_shape, f.t.local_ndim);
       else memcpy(local, shape, sizeof shape);)

static int audit_end_row(const struct tpa_rec_view *v, int64_t stack_id) {
    (void)stack_id;
    struct tpa_fx_audit_end f;
    memcpy(&f, v->fixed, sizeof f);
    sqlite3_stmt *st = tpa_db_stmt(TPA_ST_AUDIT_END);
    sqlite3_bind_int64(st, 1, f.ts);
    sqlite3_bind_int64(st, 2, f.id);
    return tpa_db_step(st);
}

int tpa_rows_write(const struct tpa_rec_view *v) {
    int err = 0;
    int64_t stack_id = 0;
    if (v->nips > 0) {
        stack_id = tpa_stack_intern(tpa_db_stmt(TPA_ST_INSERT_stack), v->ips, v->nips, &err);
        if (err) return -1;
    }
    switch (v->type) {
    case TPA_REC_AUDIT_BEGIN: return audit_row(v, stack_id);
    case TPA_REC_AUDIT_END: return audit_end_row(v, stack_id);
    case TPA_REC_TENSOR: return tensor_row(v, stack_id);
    case TPA_REC_REF: return ref_row(v, stack_id);
    case TPA_REC_EVENT: return event_row(v, stack_id);
    case TPA_REC_ALLOC: return alloc_row(v, stack_id);
    case TPA_REC_API_CALL: return api_call_row(v, stack_id);
    case TPA_REC_LEDGER: return ledger_row(v, stack_id);
    case TPA_REC_SAMPLE: return sample_row(v, stack_id);
    case TPA_REC_PHASE_MARK: return phase_mark_row(v, stack_id);
    case TPA_REC_OOM: return oom_row(v, stack_id);
    case TPA_REC_PEAK_PART: return peak_part_row(v, stack_id);
    default: return 0;
    }
}

/* ---- the run row ---- */
struct run_start {
    char host[256], exe[4096], argv[20000];
    int64_t pid, ppid, start_ns, start_unix_ns;
};
static struct run_start g_start; /* under the writer's start lock */
static _Atomic unsigned g_run_gen_written;

int tpa_rows_insert_run(sqlite3_stmt *st) {
    struct run_start *p = &g_start;
    snprintf(p->host, sizeof p->host, "unknown");
    gethostname(p->host, sizeof p->host - 1);
    ssize_t n = readlink("/proc/self/exe", p->exe, sizeof p->exe - 1);
    p->exe[n > 0 ? n : 0] = 0;
    tpa_argv_json(p->argv, sizeof p->argv);
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    p->pid = getpid();
    p->ppid = getppid();
    p->start_ns = tpa_now_ns();
    p->start_unix_ns = (int64_t)wall.tv_sec * 1000000000LL + wall.tv_nsec;
    int col = 0;
    TPA_RUN_START_COLUMNS(BIND)
    return tpa_db_step(st);
}

int tpa_rows_write_run(const struct tpa_run_end *end) {
    struct tpa_run_snapshot snap, *s = &snap;
    unsigned gen = tpa_run_generation();
    if (!end && gen == atomic_load(&g_run_gen_written)) return 0;
    tpa_run_snapshot(s);
    sqlite3_stmt *st = tpa_db_stmt(TPA_ST_RUN_UPDATE);
    int col = 0;
    TPA_RUN_STATE_COLUMNS(BIND)
    if (tpa_db_step(st) != 0) return -1;
    atomic_store(&g_run_gen_written, gen);
    return 0;
}

unsigned tpa_rows_run_generation_written(void) { return atomic_load(&g_run_gen_written); }
void tpa_rows_reset(void) { atomic_store(&g_run_gen_written, 0); }
