/* growth_host.c - a native host whose memory ledger grows: audits at steps
 * 1-3 (warm-up) and then every 4 steps from 16, each with a ledger in which
 * the holder `__main__.kept` keeps one more 196 MiB tensor a step (the
 * ledger as a probe records it, through tpaudit.h), beside a model's one
 * parameter, trained by an optimizer (so a run that is judged).  After each audit it
 * asks the shim's verdict and prints "step S: errors E stop P: <first
 * finding's line>"; with TPAUDIT_FAIL_FAST set it ends with the verdict's
 * exit status when told to stop.  Without the shim it prints nothing of
 * verdicts and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpaudit.h"

#define MIB (1024ull * 1024ull)

static void record(const char *kind, const char *owner, uint64_t bytes, int64_t tensors) {
    tpaudit_ledger_t row = TPAUDIT_INIT_LEDGER;
    row.device = "cuda:0";
    row.owner_kind = kind;
    row.owner = owner;
    row.bytes = bytes;
    row.tensors = tensors;
    if (owner && !strcmp(kind, "held")) {
        row.holder_class = "list";
        row.path = "__main__.kept[0]";
        row.shapes = "[[4,256,50257]]";
        row.dtype = "float32";
        row.with_graph = tensors;
        row.created_at = "train.py:18:main\ntrain.py:40:<module>";
    }
    tpaudit_record_ledger(&row);
}

/* The model's parameter, in the model and in the optimizer's group. */
static void record_model(void) {
    static const int64_t shape[] = {474, 262144};
    tpaudit_tensor_t t = TPAUDIT_INIT_TENSOR;
    t.key = 1;
    t.name = "weight";
    t.ndim = 2;
    t.shape = shape;
    t.dtype = "float32";
    t.device = "cuda:0";
    t.storage_ptr = 0x10000;
    t.storage_bytes = t.nbytes = 474 * MIB;
    t.requires_grad = t.has_grad = 1;
    t.type = "Parameter";
    tpaudit_record_tensor(&t);
    tpaudit_ref_t r = TPAUDIT_INIT_REF;
    r.holder_kind = TPAUDIT_HOLDER_MODULE;
    r.holder_class = "Linear";
    r.holder_id = 7;
    r.path = "weight";
    r.role = TPAUDIT_ROLE_PARAM;
    r.tensor_key = 1;
    tpaudit_record_ref(&r);
    r.holder_kind = TPAUDIT_HOLDER_OPTIMIZER;
    r.holder_class = "SGD";
    r.holder_id = 8;
    r.path = "param_groups[0].params[0]";
    r.role = TPAUDIT_ROLE_GROUP_PARAM;
    tpaudit_record_ref(&r);
}

int main(void) {
    static const int64_t steps[] = {1, 2, 3, 16, 20, 24, 28};
    static char findings[8192];
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        int64_t step = steps[i], kept = step > 3 ? step - 3 : 0;
        int64_t audit = tpaudit_audit_begin("step", step);
        if (audit < 0) continue; /* no shim */
        record_model();
        record("parameter", "model", 474 * MIB, 148);
        if (kept) record("held", "__main__.kept", (uint64_t)kept * 196 * MIB, kept);
        record("measured", "torch.cuda.memory_reserved", 474 * MIB + (uint64_t)kept * 196 * MIB, 148 + kept);
        tpaudit_audit_end(audit);
        tpaudit_verdict_t v = TPAUDIT_INIT_VERDICT;
        v.audit_id = audit;
        v.findings = findings;
        v.findings_cap = sizeof findings;
        findings[0] = 0;
        if (tpaudit_audit_verdict(&v) != 0) continue;
        findings[strcspn(findings, "\n")] = 0;
        printf("step %lld: errors %d stop %d: %s\n", (long long)step, v.n_errors, v.stop, findings);
        fflush(stdout);
        if (v.stop) return v.exit_status;
    }
    return 0;
}
