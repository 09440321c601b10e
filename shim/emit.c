/* emit.c - the producer side of the CUPTI contract (cupti_contract.h):
 * the CUPTI part's allocation and API-call rows, queued like api.c's
 * records.  Apart from api.c, which calls into the CUPTI part (a flush at
 * each audit end), so that the two never call each other. */
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim_internal.h"

static const uint32_t one_short_cap = TPA_CAP_SHORT;

int tpa_emit_alloc(const struct tpa_alloc_rec *rec) {
    if (!rec) return TPAUDIT_EINVAL;
    if (!tpa_running()) return TPAUDIT_EDISABLED;
    struct tpa_fx_alloc f;
    memset(&f, 0, sizeof f);
    f.ts = rec->ts_ns;
    f.address = rec->address;
    f.bytes = rec->bytes;
    f.pool = rec->pool;
    f.op = rec->op;
    f.memkind = rec->memkind;
    f.device = rec->device;
    f.source = 0;
    f.context = rec->context;
    f.stream = rec->stream;
    f.correlation = rec->correlation;
    const char *strs[1] = {rec->label};
    return tpa_enqueue(TPA_REC_ALLOC, &f, sizeof f, strs, &one_short_cap, 1, NULL, 0, 0);
}

int tpa_emit_api_call(uint32_t correlation, const char *api, int64_t ts_ns, const uint64_t *ips, int n_ips) {
    if (!tpa_running()) return TPAUDIT_EDISABLED;
    if (n_ips < 0 || n_ips > TPA_MAX_STACK || (n_ips && !ips)) return TPAUDIT_EINVAL;
    struct tpa_fx_api_call f = {ts_ns, (int64_t)syscall(SYS_gettid), correlation, 0};
    const char *strs[1] = {api};
    return tpa_enqueue(TPA_REC_API_CALL, &f, sizeof f, strs, &one_short_cap, 1, ips, n_ips, 0);
}

static atomic_llong g_ooms; /* this process's failed allocations so far */

int64_t tpa_emit_oom(const tpaudit_oom_t *o, int capture, int skip, int wait_ms) {
    if (!o) return TPAUDIT_EINVAL;
    if (!tpa_running()) return TPAUDIT_EDISABLED;
    int64_t seq = atomic_fetch_add(&g_ooms, 1) + 1;
    uint64_t ips[TPA_MAX_STACK];
    int depth = tpa_config()->stack_depth;
    int n = capture && seq <= TPAUDIT_OOM_STACKS
                ? tpa_stack_capture(ips, depth < TPA_MAX_STACK ? depth : TPA_MAX_STACK, skip)
                : 0;
    struct tpa_fx_oom f = {tpa_now_ns(), seq, o->device, o->requested, o->free_bytes, o->total_bytes,
                           o->reserved_free, o->largest_free, o->audit_id, o->step};
    const char *strs[TPA_OOM_NSTR] = {[TPA_OOM_S_SOURCE] = o->source ? o->source : "?",
                                      [TPA_OOM_S_API] = o->api,
                                      [TPA_OOM_S_PY_STACK] = o->py_stack};
    static const uint32_t caps[TPA_OOM_NSTR] = {TPA_OOM_SLOTS(TPA_SLOT_CAP)};
    /* waits for ring space like an audit's facts: the one record that says why the run died */
    int rc = tpa_enqueue(TPA_REC_OOM, &f, sizeof f, strs, caps, TPA_OOM_NSTR, ips, n, wait_ms);
    return rc < 0 ? rc : seq;
}
