/* shim_api_host.c - a host program using tpaudit.h.  Without the shim every
 * call must return TPAUDIT_ENOTLOADED; with it, it writes a known number of
 * rows into every table (checked by run_api_host.sh). */
#include <stdio.h>
#include <string.h>

#include "tpaudit.h"

#include "../expect.h"

static int emit_event(int depth_marker) {
    tpaudit_event_t e = TPAUDIT_INIT_EVENT;
    e.kind = TPAUDIT_EVENT_PARAM_REPLACED;
    e.name = "wte.weight";
    e.old_key = 11;
    e.new_key = 12;
    e.detail = "Embedding(50257, 768) -> Embedding(50260, 768)";
    e.py_stack = "modeling_utils.py:100:resize";
    e.capture_native = 1;
    (void)depth_marker;
    return tpaudit_record_event(&e);
}

int main(int argc, char **argv) {
    int loaded = argc > 1 && strcmp(argv[1], "loaded") == 0;
    int want = loaded ? TPAUDIT_OK : TPAUDIT_ENOTLOADED;

    EXPECT(tpaudit_abi_version() == (loaded ? 1 : 0));
    EXPECT(tpaudit_set_rank(1, 4) == want);
    EXPECT(tpaudit_set_run_info("note", "api host") == want);
    int64_t audit = tpaudit_audit_begin("step", 1);
    EXPECT(loaded ? audit == 1 : audit == TPAUDIT_ENOTLOADED);

    int64_t shape[2] = {50257, 768}, local[2] = {12565, 768};
    for (int i = 0; i < 3; i++) {
        tpaudit_tensor_t t = TPAUDIT_INIT_TENSOR;
        t.key = 100 + (uint64_t)i;
        t.name = "wte.weight";
        t.ndim = 2;
        t.shape = shape;
        t.local_ndim = 2;
        t.local_shape = i == 0 ? local : NULL;
        t.dtype = "float32";
        t.device = "cpu";
        t.storage_ptr = 0x1000 * (uint64_t)(i + 1);
        t.storage_bytes = t.nbytes = 4096;
        t.requires_grad = 1;
        t.type = "Parameter";
        t.storage_offset = 7 * i; /* views into one storage */
        EXPECT(tpaudit_record_tensor(&t) == want);
    }
    for (int i = 0; i < 4; i++) {
        tpaudit_ref_t r = TPAUDIT_INIT_REF;
        r.holder_kind = i < 2 ? TPAUDIT_HOLDER_MODULE : TPAUDIT_HOLDER_OPTIMIZER;
        r.holder_class = i < 2 ? "GPT2" : "AdamW";
        r.holder_id = 7;
        r.path = "param_groups[0].params[0]";
        r.role = i < 2 ? TPAUDIT_ROLE_PARAM : TPAUDIT_ROLE_GROUP_PARAM;
        r.tensor_key = 100 + (uint64_t)i % 3;
        EXPECT(tpaudit_record_ref(&r) == want);
    }
    /* the audit's memory ledger: the measured total and two owners adding up to it */
    static const char *const kinds[3] = {"measured", "parameter", "held"};
    for (int i = 0; i < 3; i++) {
        tpaudit_ledger_t l = TPAUDIT_INIT_LEDGER;
        l.device = "cpu";
        l.owner_kind = kinds[i];
        l.owner = i == 2 ? "__main__.kept" : NULL;
        l.path = i == 2 ? "__main__.kept[2]" : NULL;
        l.bytes = i == 0 ? 3 * 4096 : i == 1 ? 4096 : 2 * 4096;
        l.tensors = i == 0 ? 3 : i;
        l.shapes = "[[32,32]]";
        l.dtype = "float32";
        EXPECT(tpaudit_record_ledger(&l) == want);
    }
    tpaudit_ledger_t no_device = TPAUDIT_INIT_LEDGER;
    EXPECT(tpaudit_record_ledger(&no_device) == (loaded ? TPAUDIT_EINVAL : TPAUDIT_ENOTLOADED));
    /* bad arguments are refused when loaded */
    tpaudit_ref_t bad = TPAUDIT_INIT_REF;
    bad.holder_kind = 99;
    EXPECT(tpaudit_record_ref(&bad) == (loaded ? TPAUDIT_EINVAL : TPAUDIT_ENOTLOADED));
    EXPECT(tpaudit_record_tensor(NULL) == (loaded ? TPAUDIT_EINVAL : TPAUDIT_ENOTLOADED));
    EXPECT(tpaudit_audit_end(audit) == want);
    /* outside an audit */
    tpaudit_tensor_t late = TPAUDIT_INIT_TENSOR;
    EXPECT(tpaudit_record_tensor(&late) == (loaded ? TPAUDIT_ENOAUDIT : TPAUDIT_ENOTLOADED));

    /* 5 events from one call site: one distinct stack; 1 from another */
    for (int i = 0; i < 5; i++) EXPECT(emit_event(0) == want);
    tpaudit_event_t e = TPAUDIT_INIT_EVENT;
    e.kind = TPAUDIT_EVENT_OPTIMIZER_CREATED;
    e.holder_class = "AdamW";
    e.capture_native = 1;
    EXPECT(tpaudit_record_event(&e) == want);

    tpaudit_sample_t sample = TPAUDIT_INIT_SAMPLE;
    sample.step = 3;
    sample.device = "cpu";
    sample.live_bytes = 1 << 20;
    EXPECT(tpaudit_record_sample(&sample) == want);

    tpaudit_peak_part_t part = TPAUDIT_INIT_PEAK_PART;
    part.step = 2;
    part.device = "cuda:0";
    part.owner_kind = "temporary";
    part.bytes = 1 << 20;
    part.blocks = 1;
    EXPECT(tpaudit_record_peak_part(&part) == want);
    part.blocks = -1; /* bad input: refused, loaded or not */
    EXPECT(tpaudit_record_peak_part(&part) == (loaded ? TPAUDIT_EINVAL : TPAUDIT_ENOTLOADED));

    tpaudit_oom_t oom = TPAUDIT_INIT_OOM; /* the first OOM of the process: its count, 1 */
    oom.source = "shim_api_host";
    oom.requested = 1 << 30;
    EXPECT(tpaudit_record_oom(&oom) == (loaded ? 1 : TPAUDIT_ENOTLOADED));

    tpaudit_region_t reg = TPAUDIT_INIT_REGION;
    reg.op = TPAUDIT_REGION_ALLOC;
    reg.address = 0x1000;
    reg.bytes = 1 << 20;
    reg.label = "tprt.params";
    EXPECT(tpaudit_record_region(&reg) == want);
    reg.op = TPAUDIT_REGION_FREE;
    EXPECT(tpaudit_record_region(&reg) == want);
    EXPECT(tpaudit_flush() == want);
    if (expect_failures) return 1;
    printf("api host ok (%s)\n", loaded ? "loaded" : "not loaded");
    return 0;
}
