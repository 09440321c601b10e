/* api.c - the exported tpaudit_v1_* functions of tpaudit.h: validate the
 * caller's struct, copy it into the ring (through process_life.c's
 * tpa_enqueue), never block, except flush and audit_verdict (which wait for
 * the writer's commit, and for its judgement: verdict.c) and the control
 * records (audit begin/end, tensor, ref, ledger), which wait up to
 * TPA_CONTROL_WAIT_MS for room in a full ring.  The CUPTI part's rows go
 * through emit.c. */
#include <string.h>
#include <unistd.h>

#include "shim_internal.h"
#include "verdict.h"

#define TPA_CONTROL_WAIT_MS 1000

/* The cap of the one string of the records that have one (slot 0). */
static const uint32_t one_short_cap = TPA_CAP_SHORT;
static _Atomic int64_t g_audit_next = 1;
static _Atomic int64_t g_audit_open; /* 0: none */

/* Copies a caller struct of struct_size bytes into a zeroed full one: 1
 * when it could (src set, its struct_size at least the size field's). */
static int take(void *dst, size_t full, const void *src) {
    if (!src) return 0;
    size_t n;
    memcpy(&n, src, sizeof n);
    if (n < sizeof(size_t)) return 0;
    memset(dst, 0, full);
    memcpy(dst, src, n < full ? n : full);
    return 1;
}

/* The start of every record function taking a struct: the caller's struct
 * `from` copied into the local `copy` and checked with `valid` (an
 * expression on `copy`), else TPAUDIT_EINVAL; then the shim running, else
 * TPAUDIT_EDISABLED. */
#define TAKE_RECORD(copy, from, valid)                                              \
    do {                                                                            \
        if (!take(&(copy), sizeof(copy), (from)) || !(valid)) return TPAUDIT_EINVAL; \
        if (!tpa_running()) return TPAUDIT_EDISABLED;                               \
    } while (0)

/* The audit open now, for the records that belong to one: its id, 0 when none (TPAUDIT_ENOAUDIT). */
static int64_t open_audit(void) { return atomic_load(&g_audit_open); }

TPA_API int tpaudit_v1_abi_version(void) { return TPAUDIT_ABI_VERSION; }

TPA_API int tpaudit_v1_set_rank(int rank, int world_size) {
    if (rank < 0 || world_size <= 0 || rank >= world_size) return TPAUDIT_EINVAL;
    if (!tpa_running()) return TPAUDIT_EDISABLED;
    tpa_run_set_rank(rank, world_size);
    return 0;
}

TPA_API int64_t tpaudit_v1_audit_begin(const char *label, int64_t step) {
    if (!tpa_running()) return TPAUDIT_EDISABLED;
    int64_t id = atomic_fetch_add(&g_audit_next, 1);
    int64_t none = 0;
    if (!atomic_compare_exchange_strong(&g_audit_open, &none, id)) return TPAUDIT_EINVAL;
    struct tpa_run_snapshot s;
    s.rank = s.world_size = -1;
    {
        struct tpa_run_snapshot full;
        tpa_run_snapshot(&full);
        s.rank = full.rank;
        s.world_size = full.world_size;
    }
    struct tpa_fx_audit_begin f = {id, step < 0 ? -1 : step, tpa_now_ns(), (int32_t)s.rank, (int32_t)s.world_size};
    const char *strs[1] = {label ? label : ""};
    int rc = tpa_enqueue(TPA_REC_AUDIT_BEGIN, &f, sizeof f, strs, &one_short_cap, 1, NULL, 0, TPA_CONTROL_WAIT_MS);
    if (rc) {
        atomic_store(&g_audit_open, 0);
        return rc;
    }
    return id;
}

TPA_API int tpaudit_v1_audit_end(int64_t audit_id) {
    if (!tpa_running()) return TPAUDIT_EDISABLED;
    int64_t open = audit_id;
    if (audit_id <= 0 || !atomic_compare_exchange_strong(&g_audit_open, &open, 0)) return TPAUDIT_EINVAL;
    tpa_cupti_flush();
    struct tpa_fx_audit_end f = {audit_id, tpa_now_ns()};
    /* No wait for the writer: it commits within TPA_BATCH_NS, overlapping the
     * host's next step; tpaudit_flush() is there for callers that need the
     * rows on disk now.  An audit whose end never reached the file (killed
     * first) has end_ns NULL and is not judged. */
    int rc = tpa_enqueue(TPA_REC_AUDIT_END, &f, sizeof f, NULL, NULL, 0, NULL, 0, TPA_CONTROL_WAIT_MS);
    if (rc == 0) tpa_verdict_note_end(audit_id);
    return rc;
}

/* Fills the caller's out fields, only the struct_size bytes it has. */
TPA_API int tpaudit_v1_audit_verdict(tpaudit_verdict_t *verdict) {
    tpaudit_verdict_t v;
    TAKE_RECORD(v, verdict, 1);
    int ms = tpa_verdict_ask(&v);
    if (ms < 0) return ms;
    int rc = tpa_writer_flush(ms); /* the audit's rows committed; the writer judges them next */
    if (rc == 0) rc = tpa_verdict_wait(&v, ms);
    if (rc == 0) memcpy(verdict, &v, verdict->struct_size < sizeof v ? verdict->struct_size : sizeof v);
    return rc;
}

TPA_API int tpaudit_v1_record_tensor(const tpaudit_tensor_t *tensor) {
    tpaudit_tensor_t t;
    TAKE_RECORD(t, tensor, 1);
    int64_t audit = open_audit();
    if (!audit) return TPAUDIT_ENOAUDIT;
    if (t.ndim < 0 || t.ndim > TPAUDIT_MAX_DIMS || (t.ndim && !t.shape)) return TPAUDIT_EINVAL;
    if (t.local_shape && (t.local_ndim < 0 || t.local_ndim > TPAUDIT_MAX_DIMS)) return TPAUDIT_EINVAL;
    struct tpa_fx_tensor f;
    memset(&f, 0, sizeof f);
    f.audit_id = audit;
    f.t = t;
    f.t.name = f.t.dtype = f.t.device = f.t.type = NULL;
    f.t.shape = f.t.local_shape = NULL;
    f.t.local_ndim = t.local_shape ? t.local_ndim : -1;
    for (int i = 0; i < t.ndim; i++) f.shape[i] = t.shape[i];
    for (int i = 0; t.local_shape && i < t.local_ndim; i++) f.local_shape[i] = t.local_shape[i];
    const char *strs[TPA_TENSOR_NSTR] = {[TPA_TENSOR_S_NAME] = t.name,
                                         [TPA_TENSOR_S_DTYPE] = t.dtype,
                                         [TPA_TENSOR_S_DEVICE] = t.device,
                                         [TPA_TENSOR_S_TYPE] = t.type};
    static const uint32_t caps[TPA_TENSOR_NSTR] = {TPA_TENSOR_SLOTS(TPA_SLOT_CAP)};
    /* Audit facts wait for ring space rather than being dropped. */
    return tpa_enqueue(TPA_REC_TENSOR, &f, sizeof f, strs, caps, TPA_TENSOR_NSTR, NULL, 0, TPA_CONTROL_WAIT_MS);
}

TPA_API int tpaudit_v1_record_ref(const tpaudit_ref_t *ref) {
    tpaudit_ref_t r;
    TAKE_RECORD(r, ref,
                r.holder_kind >= TPAUDIT_HOLDER_MODULE && r.holder_kind <= TPAUDIT_HOLDER_WRAPPER &&
                    r.role >= TPAUDIT_ROLE_PARAM && r.role <= TPAUDIT_ROLE_MAP_ENTRY);
    int64_t audit = open_audit();
    if (!audit) return TPAUDIT_ENOAUDIT;
    struct tpa_fx_ref f = {audit, r.holder_id, r.tensor_key, r.peer_key, r.holder_kind, r.role};
    const char *strs[TPA_REF_NSTR] = {[TPA_REF_S_HOLDER_CLASS] = r.holder_class, [TPA_REF_S_PATH] = r.path};
    static const uint32_t caps[TPA_REF_NSTR] = {TPA_REF_SLOTS(TPA_SLOT_CAP)};
    return tpa_enqueue(TPA_REC_REF, &f, sizeof f, strs, caps, TPA_REF_NSTR, NULL, 0, TPA_CONTROL_WAIT_MS);
}

TPA_API int tpaudit_v1_record_ledger(const tpaudit_ledger_t *row) {
    tpaudit_ledger_t r;
    TAKE_RECORD(r, row, r.device && r.owner_kind && r.tensors >= 0 && r.with_graph >= 0);
    int64_t audit = open_audit();
    if (!audit) return TPAUDIT_ENOAUDIT;
    struct tpa_fx_ledger f = {audit, r.bytes, r.tensors, r.with_graph};
    const char *strs[TPA_LEDGER_NSTR] = {[TPA_LEDGER_S_DEVICE] = r.device,
                                         [TPA_LEDGER_S_OWNER_KIND] = r.owner_kind,
                                         [TPA_LEDGER_S_OWNER] = r.owner,
                                         [TPA_LEDGER_S_HOLDER_CLASS] = r.holder_class,
                                         [TPA_LEDGER_S_PATH] = r.path,
                                         [TPA_LEDGER_S_SHAPES] = r.shapes,
                                         [TPA_LEDGER_S_DTYPE] = r.dtype,
                                         [TPA_LEDGER_S_CREATED_AT] = r.created_at};
    static const uint32_t caps[TPA_LEDGER_NSTR] = {TPA_LEDGER_SLOTS(TPA_SLOT_CAP)};
    return tpa_enqueue(TPA_REC_LEDGER, &f, sizeof f, strs, caps, TPA_LEDGER_NSTR, NULL, 0, TPA_CONTROL_WAIT_MS);
}

TPA_API int tpaudit_v1_record_sample(const tpaudit_sample_t *sample) {
    tpaudit_sample_t s;
    TAKE_RECORD(s, sample, s.device != NULL);
    struct tpa_fx_sample f = {tpa_now_ns(), s.step, s.live_bytes, s.reserved_bytes, s.py_blocks, s.peak_bytes};
    if (!s.phase) {
        const char *strs[1] = {s.device};
        return tpa_enqueue(TPA_REC_SAMPLE, &f, sizeof f, strs, &one_short_cap, 1, NULL, 0, 0);
    }
    const char *strs[TPA_PHASE_MARK_NSTR] = {[TPA_PHASE_MARK_S_DEVICE] = s.device,
                                             [TPA_PHASE_MARK_S_PHASE] = s.phase,
                                             [TPA_PHASE_MARK_S_OWNER] = s.owner};
    static const uint32_t caps[TPA_PHASE_MARK_NSTR] = {TPA_PHASE_MARK_SLOTS(TPA_SLOT_CAP)};
    return tpa_enqueue(TPA_REC_PHASE_MARK, &f, sizeof f, strs, caps, TPA_PHASE_MARK_NSTR, NULL, 0, 0);
}

TPA_API int tpaudit_v1_record_peak_part(const tpaudit_peak_part_t *part) {
    tpaudit_peak_part_t p;
    TAKE_RECORD(p, part, p.device && p.owner_kind && p.blocks >= 0);
    struct tpa_fx_peak_part f = {tpa_now_ns(), p.step, p.bytes, p.blocks};
    const char *strs[TPA_PEAK_PART_NSTR] = {[TPA_PEAK_PART_S_DEVICE] = p.device,
                                            [TPA_PEAK_PART_S_OWNER_KIND] = p.owner_kind,
                                            [TPA_PEAK_PART_S_OWNER] = p.owner};
    static const uint32_t caps[TPA_PEAK_PART_NSTR] = {TPA_PEAK_PART_SLOTS(TPA_SLOT_CAP)};
    return tpa_enqueue(TPA_REC_PEAK_PART, &f, sizeof f, strs, caps, TPA_PEAK_PART_NSTR, NULL, 0, 0);
}

TPA_API int64_t tpaudit_v1_record_oom(const tpaudit_oom_t *oom) {
    tpaudit_oom_t o;
    TAKE_RECORD(o, oom, o.device >= -1 && o.step >= -1 && o.audit_id >= 0);
    return tpa_emit_oom(&o, o.capture_native, 1, TPA_CONTROL_WAIT_MS); /* the record that says why a run died waits for room */
}

TPA_API int tpaudit_v1_record_event(const tpaudit_event_t *event) {
    tpaudit_event_t e;
    TAKE_RECORD(e, event, e.kind >= TPAUDIT_EVENT_OPTIMIZER_CREATED && e.kind <= TPAUDIT_EVENT_MODULE_REPLACED);
    uint64_t ips[TPA_MAX_STACK];
    int n = e.capture_native ? tpa_stack_capture(ips, TPA_MAX_STACK, 1) : 0;
    struct tpa_fx_event f = {tpa_now_ns(), e.holder_id, e.old_key, e.new_key, e.kind, 0};
    const char *strs[TPA_EVENT_NSTR] = {[TPA_EVENT_S_NAME] = e.name,
                                        [TPA_EVENT_S_HOLDER_CLASS] = e.holder_class,
                                        [TPA_EVENT_S_DETAIL] = e.detail,
                                        [TPA_EVENT_S_PY_STACK] = e.py_stack};
    static const uint32_t caps[TPA_EVENT_NSTR] = {TPA_EVENT_SLOTS(TPA_SLOT_CAP)};
    return tpa_enqueue(TPA_REC_EVENT, &f, sizeof f, strs, caps, TPA_EVENT_NSTR, ips, n, 0);
}

TPA_API int tpaudit_v1_record_region(const tpaudit_region_t *region) {
    tpaudit_region_t r;
    TAKE_RECORD(r, region, r.op == TPAUDIT_REGION_ALLOC || r.op == TPAUDIT_REGION_FREE);
    uint64_t ips[TPA_MAX_STACK];
    int n = r.capture_native ? tpa_stack_capture(ips, TPA_MAX_STACK, 1) : 0;
    struct tpa_fx_alloc f;
    memset(&f, 0, sizeof f);
    f.ts = tpa_now_ns();
    f.address = r.address;
    f.bytes = r.op == TPAUDIT_REGION_FREE ? 0 : r.bytes;
    f.op = r.op == TPAUDIT_REGION_FREE ? TPA_FREE : TPA_ALLOC;
    f.memkind = TPA_MEM_REGION;
    f.device = r.device;
    f.source = 1;
    const char *strs[1] = {r.label};
    return tpa_enqueue(TPA_REC_ALLOC, &f, sizeof f, strs, &one_short_cap, 1, ips, n, 0);
}

TPA_API int tpaudit_v1_set_run_info(const char *field, const char *value) {
    if (!field || !value || (strcmp(field, "python") && strcmp(field, "note"))) return TPAUDIT_EINVAL;
    if (!tpa_running()) return TPAUDIT_EDISABLED;
    int rc = tpa_run_set_text(field, value);
    /* A process whose probe ran or went off has a database even if it
     * records nothing else; one that never imported torch ("idle") has none. */
    if (rc == 0 && tpa_run_python_is_worth_a_file()) rc = tpa_life_begin_recording();
    return rc;
}

TPA_API int tpaudit_v1_flush(void) {
    if (!tpa_running()) return TPAUDIT_EDISABLED;
    tpa_cupti_flush();
    return tpa_writer_flush(30000);
}
