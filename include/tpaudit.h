/*
 * tpaudit.h - the one public header of tpaudit: the native ownership API.
 *
 * A program (a training runtime, a test, the Python probe through ctypes)
 * tells tpaudit which tensors its models and optimizers hold, at audit
 * points, so that the analyzer can find optimizers that still hold tensors
 * the model replaced.  Everything here is header-only: include it, call the
 * tpaudit_* functions, link nothing.  When libtpaudit.so is not loaded in
 * the process (LD_PRELOAD, CUDA_INJECTION64_PATH or dlopen) every call is a
 * cheap no-op that returns TPAUDIT_ENOTLOADED.
 *
 * ABI and versioning
 *   The shim exports C functions named tpaudit_v1_<name>.  Their signatures
 *   never change; a later ABI adds tpaudit_v2_<name> beside them.  Every
 *   struct passed in starts with `struct_size`, set by the TPAUDIT_INIT_*
 *   macros to sizeof() as this header knows it: a newer shim reads only the
 *   fields an older caller filled in, so an older caller keeps working.
 *   tpaudit_abi_version() returns the shim's ABI (0 when not loaded).
 *
 * Threads: every function may be called from any thread.  Strings are copied
 * before the call returns (long ones are truncated, and the truncation is
 * counted); the caller keeps ownership of everything it passes.
 *
 * Return values: 0 or a positive id on success, a negative TPAUDIT_E* code
 * otherwise.  Nothing here aborts or exits.
 *
 * Typical use (a runtime with one model and one optimizer):
 *
 *     int64_t audit = tpaudit_audit_begin("step", step);
 *     tpaudit_tensor_t t = TPAUDIT_INIT_TENSOR;
 *     t.key = (uint64_t)(uintptr_t)param; t.name = "wte.weight"; ...
 *     tpaudit_record_tensor(&t);
 *     tpaudit_ref_t r = TPAUDIT_INIT_REF;
 *     r.holder_kind = TPAUDIT_HOLDER_MODULE; r.role = TPAUDIT_ROLE_PARAM; ...
 *     tpaudit_record_ref(&r);
 *     tpaudit_audit_end(audit);
 */
#ifndef TPAUDIT_H
#define TPAUDIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <dlfcn.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TPAUDIT_ABI_VERSION 1

/* Where the shim writes its databases when TPAUDIT_OUT is not set, and
 * where `tpaudit run` and the pytest plugin look (made absolute against
 * the working directory). */
#define TPAUDIT_DEFAULT_OUT "./tpaudit-out"

/* The owner of a ledger row of kind "autograd" that holds tensors a graph
 * no named holder keeps saved for backward (this step's), followed by the
 * deepest module whose forward made them ("saved for backward in
 * transformer.h.3.attn"); the same words are the path of a row of the
 * graph a holder keeps ("autograd graph of out"), one row per module. */
#define TPAUDIT_SAVED_IN "saved for backward in "

/* The owner of a ledger row of kind "autograd" that holds a graph a named
 * holder keeps, followed by that holder's path ("autograd graph of losses"):
 * a rule that names a growing holder also owns the graph it keeps. */
#define TPAUDIT_GRAPH_OF "autograd graph of "

/* The value of the environment variable TPAUDIT_PEAK that has the Python
 * probe also audit inside the first backward of each planned step (docs/PROBE.md,
 * "The peak of activations with no code change"); `tpaudit run --peak`
 * sets it for the command (docs/RUN.md). */
#define TPAUDIT_PEAK_BACKWARD "backward"

/* The parts of a step a phase mark starts (tpaudit_sample_t.phase, table
 * phase_mark; docs/PROBE.md, "Phases"): a module's forward, Tensor.backward,
 * an optimizer's step, and the time after the step (from Optimizer.zero_grad).
 * The analyzer gives the memory made between audits to the part that made it,
 * and to TPAUDIT_MADE_UNKNOWN where no mark says which part ran. */
#define TPAUDIT_PHASE_FORWARD        "forward"
#define TPAUDIT_PHASE_BACKWARD       "backward"
#define TPAUDIT_PHASE_OPTIMIZER_STEP "optimizer_step"
#define TPAUDIT_PHASE_OUTSIDE        "outside"
#define TPAUDIT_MADE_UNKNOWN         "unknown"

/* Status codes. */
#define TPAUDIT_OK         0
#define TPAUDIT_ENOTLOADED (-1) /* the shim is not in this process */
#define TPAUDIT_EINVAL     (-2) /* bad argument (NULL struct, size 0, ...) */
#define TPAUDIT_EDISABLED  (-3) /* the shim turned itself off */
#define TPAUDIT_EDROPPED   (-4) /* event ring full: the event was counted as lost */
#define TPAUDIT_ENOAUDIT   (-5) /* tensor or ref recorded with no audit open */
#define TPAUDIT_ETIMEOUT   (-6) /* the verdict was not ready in time */

/* The exit status a run stopped by TPAUDIT_FAIL_FAST ends with. */
#define TPAUDIT_FAIL_FAST_STATUS 4

/* Who holds a tensor. */
enum tpaudit_holder_kind {
    TPAUDIT_HOLDER_MODULE = 1,    /* a live model (nn.Module, a runtime's model) */
    TPAUDIT_HOLDER_OPTIMIZER = 2, /* an optimizer (param_groups, state) */
    TPAUDIT_HOLDER_WRAPPER = 3    /* an object wrapping an optimizer (maps) */
};

/* What the reference means. */
enum tpaudit_ref_role {
    TPAUDIT_ROLE_PARAM = 1,       /* tensor_key is a live parameter of the model */
    TPAUDIT_ROLE_GROUP_PARAM = 2, /* tensor_key is in one of the optimizer's param groups */
    TPAUDIT_ROLE_STATE = 3,       /* tensor_key is optimizer state; peer_key: the param it is keyed by */
    TPAUDIT_ROLE_MAP_ENTRY = 4    /* a wrapper map entry: tensor_key the working (model side)
                                     tensor, peer_key the master (optimizer side) tensor */
};

/* Event kinds. */
enum tpaudit_event_kind {
    TPAUDIT_EVENT_OPTIMIZER_CREATED = 1, /* holder_class/id: the optimizer */
    TPAUDIT_EVENT_PARAM_CREATED = 2,     /* new_key: the parameter, name: its path */
    TPAUDIT_EVENT_PARAM_REPLACED = 3,    /* old_key -> new_key at name */
    TPAUDIT_EVENT_MODULE_REPLACED = 4    /* a submodule at name replaced; detail says what */
};

/* Allocation region operations (runtimes that carve their own memory). */
enum tpaudit_region_op { TPAUDIT_REGION_ALLOC = 1, TPAUDIT_REGION_FREE = 2 };

#define TPAUDIT_MAX_DIMS 8

/* Facts about one tensor, recorded inside an open audit. */
typedef struct tpaudit_tensor {
    size_t struct_size;
    uint64_t key;     /* identity: stable for the tensor's life (id(), pointer) */
    const char *name; /* best name: "transformer.wte.weight"; NULL if unknown */
    int ndim;         /* global shape (a DTensor's full shape) */
    const int64_t *shape;
    int local_ndim; /* local shard's shape; local_shape NULL = same as global */
    const int64_t *local_shape;
    const char *dtype;      /* "float32", "bfloat16", ... */
    const char *device;     /* "cpu", "cuda:0", "meta" */
    uint64_t storage_ptr;   /* data pointer of the storage; 0 for meta or freed */
    uint64_t storage_bytes; /* bytes of the whole storage; 0 for meta or freed */
    uint64_t nbytes;        /* bytes of this tensor's own elements */
    int requires_grad;
    int has_grad;
    const char *type;       /* "Parameter", "DTensor", "Tensor", "tprt.param", ... */
    int64_t storage_offset; /* elements from the storage's start (a view's offset); 0 */
} tpaudit_tensor_t;

/* One holder -> tensor reference, recorded inside an open audit. */
typedef struct tpaudit_ref {
    size_t struct_size;
    int holder_kind;          /* enum tpaudit_holder_kind */
    const char *holder_class; /* "AdamW", "GPT2LMHeadModel", "MixedPrecisionOptimizer" */
    uint64_t holder_id;       /* identity of the holder object */
    const char *path;         /* "param_groups[0].params[3]", "state[k].exp_avg",
                                   "transformer.wte.weight", "master_to_working_map[2]" */
    int role;                 /* enum tpaudit_ref_role */
    uint64_t tensor_key;
    uint64_t peer_key; /* see enum tpaudit_ref_role; 0 when unused */
} tpaudit_ref_t;

/* A lifecycle event with where it happened. */
typedef struct tpaudit_event {
    size_t struct_size;
    int kind;         /* enum tpaudit_event_kind */
    const char *name; /* parameter or module path, or optimizer class */
    const char *holder_class;
    uint64_t holder_id;
    uint64_t old_key;
    uint64_t new_key;
    const char *detail;   /* free text: "Embedding(50257, 768) -> Embedding(50260, 768)" */
    const char *py_stack; /* Python stack, one "file:line:function" per line,
                                   innermost first; NULL if none */
    int capture_native;   /* nonzero: the shim records the caller's native stack */
} tpaudit_event_t;

/* A device or host memory region a runtime carved itself (arena, slab). */
typedef struct tpaudit_region {
    size_t struct_size;
    int op; /* enum tpaudit_region_op */
    uint64_t address;
    uint64_t bytes;    /* ignored for free */
    int device;        /* CUDA ordinal, -1 for host */
    const char *label; /* "tprt.params", ... */
    int capture_native;
} tpaudit_region_t;

/* One owner group of the memory ledger of a device, recorded inside an open
 * audit (docs/schema.md, table ledger).  owner_kind "measured" is the total
 * the other rows of the audit and device add up to. */
typedef struct tpaudit_ledger {
    size_t struct_size;
    const char *device;       /* "cpu", "cuda:0" */
    const char *owner_kind;   /* "measured", "parameter", "gradient", "optimizer_state", "stale",
                                 "held", "autograd", "allocator_cache", "unattributed" */
    const char *owner;        /* module path, optimizer, holder path ("__main__.kept"); NULL */
    const char *holder_class; /* class of the holding object ("list", "Trainer"); NULL */
    const char *path;         /* held: the newest tensor's reference chain ("__main__.kept[59]") */
    uint64_t bytes;           /* bytes of the group's storages, each counted once */
    int64_t tensors;          /* tensors in the group */
    const char *shapes;       /* JSON array of up to 4 distinct shapes: "[[4,256,50257]]" */
    const char *dtype;        /* dtype of the largest tensor */
    int64_t with_graph;       /* tensors of the group with a grad_fn */
    const char *created_at;   /* creation stack, "file:line:function" lines, user's first; NULL */
} tpaudit_ledger_t;

/* Live memory at one optimizer step, or where a part of a step starts
 * (docs/schema.md, tables sample and phase_mark). */
typedef struct tpaudit_sample {
    size_t struct_size;
    int64_t step;           /* the optimizer step about to run */
    const char *device;     /* "cuda:0", "cpu" */
    uint64_t live_bytes;    /* GPU: the allocator's allocated bytes; CPU: malloc's bytes in use */
    int64_t reserved_bytes; /* GPU: the allocator's reserved bytes; -1 when none (CPU) */
    int64_t py_blocks;      /* sys.getallocatedblocks(); -1 when unknown */
    const char *phase;      /* NULL: the step sample (table sample); else the part of a step that
                               starts now, a TPAUDIT_PHASE_* (table phase_mark, docs/schema.md) */
    const char *owner;      /* a phase's owner: the module called, the optimizer stepping; NULL */
    int64_t peak_bytes;     /* a phase's: GPU: the allocator's peak allocated bytes so far
                               (torch.cuda.max_memory_allocated); -1 when none (CPU) */
} tpaudit_sample_t;

/* One part of what held the device's memory at the moment of a step's peak
 * (docs/schema.md, table peak_part): the probe replays the caching
 * allocator's history from its audit inside backward to the next part of
 * the step and tells the blocks live at the most allocated moment by owner.
 * Any time, audit open or not. */
typedef struct tpaudit_peak_part {
    size_t struct_size;
    int64_t step;           /* the step whose backward it was (the audit's step) */
    const char *device;     /* "cuda:0" */
    const char *owner_kind; /* "measured" (the peak's allocated bytes; owner: how), a ledger owner
                               kind, "temporary" (made after the audit, freed before the window's
                               end), "made_in_backward" (made after it, kept), "allocator_cache" */
    const char *owner;      /* as a ledger row's owner; NULL */
    uint64_t bytes;         /* the allocator blocks' bytes */
    int64_t blocks;         /* the allocator blocks */
} tpaudit_peak_part_t;

/* An allocation that failed for want of device memory (docs/schema.md,
 * table oom): recorded by the probe from PyTorch's caching allocator, by the
 * shim from a CUDA allocation call that returned out-of-memory, or by a
 * runtime that carves its own memory.  Any time, audit open or not. */
typedef struct tpaudit_oom {
    size_t struct_size;
    const char *source;    /* "torch" (the caching allocator), "cuda" (a failed CUDA call), or the runtime's name */
    const char *api;       /* the call that failed: "cudaMalloc", "torch.cuda caching allocator"; NULL */
    int device;            /* CUDA ordinal, -1 when unknown */
    uint64_t requested;    /* bytes asked for */
    int64_t free_bytes;    /* the device's free bytes at the failure, -1 when unknown */
    int64_t total_bytes;   /* the device's total bytes (or the process's cap), -1 when unknown */
    int64_t reserved_free; /* the allocator's reserved but unallocated bytes, -1 when unknown */
    int64_t largest_free;  /* the allocator's largest free block, -1 when unknown */
    int64_t audit_id;      /* the audit taken at the failure (label "oom"), 0 when none */
    int64_t step;          /* the optimizer step in flight, -1 when unknown */
    const char *py_stack;  /* the failing allocation's Python stack, "file:line:function" lines,
                              the user's innermost first; NULL */
    int capture_native;    /* nonzero: the shim records the caller's native stack */
} tpaudit_oom_t;
/* The analyzer's verdict on one ended audit (tpaudit_audit_verdict). */
typedef struct tpaudit_verdict {
    size_t struct_size;
    int64_t audit_id; /* in: the audit, ended (tpaudit_audit_begin's id) */
    int timeout_ms;   /* in: the longest wait for its rows and for its judgement; <= 0: 30 s */
    char *findings;   /* in: a buffer for the findings, or NULL; out: one line each, NUL-terminated
                         (whole lines only), tab-separated: kind, severity ("error" or "warning"),
                         tensor name, retained bytes, replaced at ("file:line in function", or
                         empty), the report's message */
    size_t findings_cap;    /* in: the buffer's size */
    int n_findings;         /* out: the findings at the audit, listed or not */
    int n_errors;           /* out: those that are errors */
    int64_t retained_bytes; /* out: what the errors retain */
    int stop;               /* out: 1 when TPAUDIT_FAIL_FAST is set and the audit has an error:
                               the caller ends the run, with exit_status */
    int exit_status;        /* out: TPAUDIT_FAIL_FAST_STATUS */
    int blind;              /* out: 1 when the audit saw an optimizer but no model parameter, so it
                               could call nothing stale: not a verdict (docs/ANALYZER.md, "What an
                               audit must have seen") */
} tpaudit_verdict_t;

#define TPAUDIT_INIT_TENSOR \
    { sizeof(tpaudit_tensor_t), 0, NULL, 0, NULL, 0, NULL, NULL, NULL, 0, 0, 0, 0, 0, NULL, 0 }
#define TPAUDIT_INIT_REF \
    { sizeof(tpaudit_ref_t), 0, NULL, 0, NULL, 0, 0, 0 }
#define TPAUDIT_INIT_EVENT \
    { sizeof(tpaudit_event_t), 0, NULL, NULL, 0, 0, 0, NULL, NULL, 0 }
#define TPAUDIT_INIT_REGION \
    { sizeof(tpaudit_region_t), 0, 0, 0, -1, NULL, 0 }
#define TPAUDIT_INIT_LEDGER \
    { sizeof(tpaudit_ledger_t), NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL, 0, NULL }
#define TPAUDIT_INIT_SAMPLE \
    { sizeof(tpaudit_sample_t), 0, NULL, 0, -1, -1, NULL, NULL, -1 }
#define TPAUDIT_INIT_PEAK_PART \
    { sizeof(tpaudit_peak_part_t), 0, NULL, NULL, NULL, 0, 0 }
#define TPAUDIT_INIT_OOM \
    { sizeof(tpaudit_oom_t), NULL, NULL, -1, 0, -1, -1, -1, -1, 0, -1, NULL, 0 }
#define TPAUDIT_INIT_VERDICT \
    { sizeof(tpaudit_verdict_t), 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0 }

/* ---- exported by libtpaudit.so (C ABI, also used through ctypes) ---- */
typedef int (*tpaudit_v1_abi_version_fn)(void);
typedef int (*tpaudit_v1_set_rank_fn)(int rank, int world_size);
typedef int64_t (*tpaudit_v1_audit_begin_fn)(const char *label, int64_t step);
typedef int (*tpaudit_v1_audit_end_fn)(int64_t audit_id);
typedef int (*tpaudit_v1_record_tensor_fn)(const tpaudit_tensor_t *tensor);
typedef int (*tpaudit_v1_record_ref_fn)(const tpaudit_ref_t *ref);
typedef int (*tpaudit_v1_record_event_fn)(const tpaudit_event_t *event);
typedef int (*tpaudit_v1_record_region_fn)(const tpaudit_region_t *region);
typedef int (*tpaudit_v1_set_run_info_fn)(const char *field, const char *value);
typedef int (*tpaudit_v1_flush_fn)(void);
typedef int (*tpaudit_v1_audit_wants_fn)(int64_t step);
typedef int64_t (*tpaudit_v1_audit_next_fn)(int64_t after);
typedef int (*tpaudit_v1_audit_verdict_fn)(tpaudit_verdict_t *verdict);
typedef int (*tpaudit_v1_record_ledger_fn)(const tpaudit_ledger_t *row);
typedef int (*tpaudit_v1_record_sample_fn)(const tpaudit_sample_t *sample);
typedef int64_t (*tpaudit_v1_record_oom_fn)(const tpaudit_oom_t *oom);
typedef int (*tpaudit_v1_record_peak_part_fn)(const tpaudit_peak_part_t *part);

/*
 * The lazy binding: each entry point is looked up once in the process's
 * global scope (dlopen(NULL) sees LD_PRELOADed and RTLD_GLOBAL libraries).
 * When the shim came in through CUDA_INJECTION64_PATH only, it is found
 * through TPAUDIT_LIBRARY instead. A lookup that finds nothing is
 * remembered, so later calls cost a load; a program whose first call comes
 * before the shim loads (injection starts at cuInit) stays unbound.
 */
#define TPAUDIT__UNRESOLVED ((void *)1)

static inline void *tpaudit__resolve(void *volatile *slot, const char *symbol) {
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (fn == TPAUDIT__UNRESOLVED) {
        void *self = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
        fn = self ? dlsym(self, symbol) : NULL;
        if (self) dlclose(self);
        if (!fn) {
            /* Loaded by libcuda through CUDA_INJECTION64_PATH (not in the global
             * scope): the shim names itself in TPAUDIT_LIBRARY. */
            const char *path = getenv("TPAUDIT_LIBRARY");
            void *shim = path && *path ? dlopen(path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
            fn = shim ? dlsym(shim, symbol) : NULL;
            if (shim) dlclose(shim);
        }
        __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

#define TPAUDIT__BIND(name)                                    \
    static void *volatile tpaudit__slot = TPAUDIT__UNRESOLVED; \
    tpaudit_v1_##name##_fn fn = (tpaudit_v1_##name##_fn)tpaudit__resolve(&tpaudit__slot, "tpaudit_v1_" #name);

/* ABI version of the loaded shim; 0 when the shim is not loaded. */
static inline int tpaudit_abi_version(void) {
    TPAUDIT__BIND(abi_version)
    return fn ? fn() : 0;
}

/* Rank and world size of this process (overrides RANK/WORLD_SIZE). */
static inline int tpaudit_set_rank(int rank, int world_size) {
    TPAUDIT__BIND(set_rank)
    return fn ? fn(rank, world_size) : TPAUDIT_ENOTLOADED;
}

/* Opens an audit point (one per process at a time); returns its id (>= 1).
 * step: the optimizer step the audit describes, -1 when none. */
static inline int64_t tpaudit_audit_begin(const char *label, int64_t step) {
    TPAUDIT__BIND(audit_begin)
    return fn ? fn(label, step) : TPAUDIT_ENOTLOADED;
}

/* Closes the audit point.  It does not wait for the database: the writer
 * commits it within a few milliseconds while the host goes on (call
 * tpaudit_flush() to have it on disk now).  An audit whose end never
 * reached the file (the process was killed first) is not judged. */
static inline int tpaudit_audit_end(int64_t audit_id) {
    TPAUDIT__BIND(audit_end)
    return fn ? fn(audit_id) : TPAUDIT_ENOTLOADED;
}

/* Records one tensor's facts in the open audit. */
static inline int tpaudit_record_tensor(const tpaudit_tensor_t *tensor) {
    TPAUDIT__BIND(record_tensor)
    return fn ? fn(tensor) : TPAUDIT_ENOTLOADED;
}

/* Records one holder -> tensor reference in the open audit. */
static inline int tpaudit_record_ref(const tpaudit_ref_t *ref) {
    TPAUDIT__BIND(record_ref)
    return fn ? fn(ref) : TPAUDIT_ENOTLOADED;
}

/* Records one owner group of the open audit's memory ledger. */
static inline int tpaudit_record_ledger(const tpaudit_ledger_t *row) {
    TPAUDIT__BIND(record_ledger)
    return fn ? fn(row) : TPAUDIT_ENOTLOADED;
}

/* Records the live memory at an optimizer step, or at the start of a part
 * of a step (phase set; any time; dropped, and counted, when the event
 * ring is full). */
static inline int tpaudit_record_sample(const tpaudit_sample_t *sample) {
    TPAUDIT__BIND(record_sample)
    return fn ? fn(sample) : TPAUDIT_ENOTLOADED;
}

/* Records an allocation that failed for want of device memory (any time).
 * Returns the process's count of them so far, this one included (the first
 * TPAUDIT_OOM_STACKS keep a native stack; every one gets its row). */
#define TPAUDIT_OOM_STACKS 8
static inline int64_t tpaudit_record_oom(const tpaudit_oom_t *oom) {
    TPAUDIT__BIND(record_oom)
    return fn ? fn(oom) : TPAUDIT_ENOTLOADED;
}
/* Records one part of the memory at a step's peak (any time; dropped, and
 * counted, when the event ring is full). */
static inline int tpaudit_record_peak_part(const tpaudit_peak_part_t *part) {
    TPAUDIT__BIND(record_peak_part)
    return fn ? fn(part) : TPAUDIT_ENOTLOADED;
}

/* Records a lifecycle event (any time, audit open or not). */
static inline int tpaudit_record_event(const tpaudit_event_t *event) {
    TPAUDIT__BIND(record_event)
    return fn ? fn(event) : TPAUDIT_ENOTLOADED;
}

/* Records a memory region the caller carved itself (alloc or free). */
static inline int tpaudit_record_region(const tpaudit_region_t *region) {
    TPAUDIT__BIND(record_region)
    return fn ? fn(region) : TPAUDIT_ENOTLOADED;
}

/* Sets a text field of the run row: "python" (probe status) or "note". */
static inline int tpaudit_set_run_info(const char *field, const char *value) {
    TPAUDIT__BIND(set_run_info)
    return fn ? fn(field, value) : TPAUDIT_ENOTLOADED;
}

/* Waits until everything recorded so far is committed. */
static inline int tpaudit_flush(void) {
    TPAUDIT__BIND(flush)
    return fn ? fn() : TPAUDIT_ENOTLOADED;
}

/* 1 when TPAUDIT_AUDIT asks for an audit before optimizer step `step`
 * (-1: the audit at exit), 0 when not; the grammar is the shim's
 * (docs/ENVIRONMENT.md).  TPAUDIT_ENOTLOADED when the shim is absent. */
static inline int tpaudit_audit_wants(int64_t step) {
    TPAUDIT__BIND(audit_wants)
    return fn ? fn(step) : TPAUDIT_ENOTLOADED;
}

/* The first step after `after` that TPAUDIT_AUDIT asks for, 0 when none
 * (a step counter then compares one number per step);
 * TPAUDIT_ENOTLOADED when the shim is absent. */
static inline int64_t tpaudit_audit_next(int64_t after) {
    TPAUDIT__BIND(audit_next)
    return fn ? fn(after) : TPAUDIT_ENOTLOADED;
}

/* The analyzer's verdict on ended audit verdict->audit_id: waits (up to
 * timeout_ms) until its rows are committed and judged with the analyzer's
 * own finding queries, then fills the out fields.  Without a call the shim
 * still judges each audit after its commit, until one has an error, and
 * prints one `tpaudit:` line on stderr for the first that does.  With
 * TPAUDIT_FAIL_FAST set, `stop` asks the caller to end the run (the shim
 * never ends its host).  0, TPAUDIT_ETIMEOUT, TPAUDIT_EINVAL (not an ended
 * audit of this process), TPAUDIT_EDISABLED or TPAUDIT_ENOTLOADED. */
static inline int tpaudit_audit_verdict(tpaudit_verdict_t *verdict) {
    TPAUDIT__BIND(audit_verdict)
    return fn ? fn(verdict) : TPAUDIT_ENOTLOADED;
}

#undef TPAUDIT__BIND

#ifdef __cplusplus
}
#endif
#endif /* TPAUDIT_H */
