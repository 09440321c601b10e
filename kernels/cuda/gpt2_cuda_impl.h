/* gpt2_cuda_impl.h - what the files of tprt's device model share
 * (gpt2_cuda.c: setup, uploads, audit hook, profile; gpt2_cuda_pass.c:
 * forward and backward; gpt2_cuda_step.c: replicated grads and AdamW;
 * gpt2_cuda_host.c: the batch, loss and grad norm; gpt2_cuda_graph.c: the
 * phases replayed as CUDA graphs; gpt2_cuda_shared.c: the error helpers,
 * device copies and profile marks they all call):
 * the device copy of a host tensor, the activation pointers, the model
 * struct, the profile marks and the error helpers.  Not a public header. */
#ifndef TPRT_GPT2_CUDA_IMPL_H
#define TPRT_GPT2_CUDA_IMPL_H
#include "gpt2_cuda.h"
#include "tprt_cuda.h"
#include <cuda_runtime.h>

typedef struct {
    const tprt_tensor *t;
    void *data;  /* bf16 (working) or fp32 (master, state) */
    float *grad; /* fp32, live params only */
    int bf16;
    size_t numel;
} dev_tensor;

enum {
    K_ENCODER,
    K_LAYERNORM,
    K_MATMUL,
    K_ATTENTION,
    K_GELU,
    K_RESIDUAL,
    K_CROSSENT,
    K_ADAMW,
    K_COMM,
    K_OTHER,
    K_COUNT
};
#define MAX_MARKS    2048
#define PROFILE_SKIP 2

enum { TPRT_PHASE_FORWARD, TPRT_PHASE_BACKWARD, TPRT_PHASES }; /* what gpt2_cuda_graph.c replays */

typedef struct {
    tprt_bf16 *ln1, *qkv, *atty, *att, *attp, *res2, *ln2, *fch, *fcg, *fcp, *res3;
    float *ln1m, *ln1r, *ln2m, *ln2r;
    float *lse; /* fused attention: per-row logsumexp (B,NH,T); att (B,NH,T,T) only on the gemm path */
} layer_acts;

struct tprt_cuda_model {
    gpt2_model *m;
    tprt_adamw *o;
    int device;       /* the GPU of this rank */
    char devname[16]; /* "cuda:<device>" for the audit facts */
    int n_dt, cap_dt;
    dev_tensor *dt;
    int B, T, ldv;  /* ldv: row stride of the logits (vocab slice padded to 64) */
    int attn_fused; /* attention_fused.cu (default) or the cuBLAS path (TPRT_ATTENTION=gemm) */
    void *acts_block, *grads_block, *attn_scratch;
    layer_acts *la;
    tprt_bf16 *enc, *lnf, *logits;
    float *lnfm, *lnfr, *rowmax, *rowsum, *ce_scratch, *loss, *norm2;
    tprt_bf16 *dres, *dln, *datty, *dqkv, *dfch;
    int logits_are_grads;        /* TP=1: the forward's one-pass cross-entropy left dlogits in d->logits */
    tprt_adamw_slot *slots;      /* the step's multi-tensor AdamW table (one entry per optimizer entry) */
    tprt_adamw_slot *zero_slots; /* the grads zero_grad zeroes (gpt2_cuda_pass.c) */
    int n_zero;
    int *tok, *tgt;
    /* the host's side of a step (gpt2_cuda_host.c): async 1 when the TP=1 step never drains the device */
    int async, loss_pending, norm_pending;
    int *pinned_batch;      /* a step's tokens then targets */
    cudaEvent_t batch_sent; /* their copy to the device has been taken */
    float *pinned_stats;    /* the loss, then the squared grad norm's two parts */
    cudaEvent_t loss_ready, norm_ready;
    /* the phases as CUDA graphs (gpt2_cuda_graph.c): on, the calls seen, the graphs made */
    int graphs, graphs_required, phase_calls[TPRT_PHASES]; /* required: TPRT_GRAPH=1, a failed capture fails */
    cudaGraphExec_t phase_exec[TPRT_PHASES];
    /* profiling: events and the kind each one opens */
    int profile, n_marks, steps_seen, steps_profiled; /* the first PROFILE_SKIP steps are warm-up */
    cudaEvent_t ev[MAX_MARKS];
    int ev_kind[MAX_MARKS];
    double kind_ms[K_COUNT];
};

/* This rank's local sizes: channels of its heads, its heads, its MLP width. */
typedef struct {
    int N, C, Cl, NH, NHl, Hl;
} tp_dims;
static inline tp_dims tp_dims_of(const gpt2_model *m) {
    tp_dims t;
    t.N = m->tp_world, t.C = m->cfg.channels, t.NH = m->cfg.n_head;
    t.Cl = t.C / t.N, t.NHl = t.NH / t.N, t.Hl = 4 * t.C / t.N;
    return t;
}

/* gpt2_cuda_host.c: the batch in, the loss and grad norm back (0 or -1).  The forward stages the batch,
 * queues its copies and the loss's (stream work only, so a graph can hold them), then marks them queued. */
void tprt_cuda_host_staging(tprt_cuda_model *d); /* the pinned staging of TP=1 (none: blocking copies) */
void tprt_cuda_host_staging_free(tprt_cuda_model *d);
int tprt_cuda_stage_batch(tprt_cuda_model *d, const int *tokens, const int *targets); /* blocking: copied */
int tprt_cuda_queue_batch(tprt_cuda_model *d);    /* the staged batch's copies to the device */
int tprt_cuda_queue_loss(tprt_cuda_model *d);     /* the loss's copy back */
int tprt_cuda_forward_queued(tprt_cuda_model *d); /* events after both (blocking: m->loss is set) */
int tprt_cuda_take_loss(tprt_cuda_model *d);      /* m->loss, once its copy has landed */
int tprt_cuda_send_norm(tprt_cuda_model *d);      /* the same for o->last_norm */
int tprt_cuda_take_norm(tprt_cuda_model *d);

/* gpt2_cuda_graph.c: a phase's device work (queue: stream work only, the same buffers every step), run
 * as it is, or captured once and replayed as a graph; 0 or -1 */
typedef int (*tprt_phase_fn)(tprt_cuda_model *d, tprt_comm *comm);
void tprt_cuda_graphs_setup(tprt_cuda_model *d); /* after the host staging: graphs where the step is async */
void tprt_cuda_graphs_free(tprt_cuda_model *d);
int tprt_cuda_phase(tprt_cuda_model *d, int phase, tprt_phase_fn queue, tprt_comm *comm);

/* gpt2_cuda_shared.c */
int tprt_cuda_fail(const char *what);                            /* sets the error from CUDA's last one; -1 */
int tprt_cuda_comm_fail(const char *what, tprt_comm *c, int rc); /* sets the error from the comm's; rc */
dev_tensor *tprt_dev_find(const tprt_cuda_model *d, const tprt_tensor *t);
void tprt_mark(tprt_cuda_model *d, int kind);
void tprt_marks_flush(tprt_cuda_model *d);

#define TRY(call, what)                        \
    do {                                       \
        if (call) return tprt_cuda_fail(what); \
    } while (0)
#define COMM(call, what)                                      \
    do {                                                      \
        int rc_ = (call);                                     \
        if (rc_) return tprt_cuda_comm_fail(what, comm, rc_); \
    } while (0)
#define PASS(call)           \
    do {                     \
        int rc_ = (call);    \
        if (rc_) return rc_; \
    } while (0)
#define PW(i)    ((tprt_bf16 *)tprt_dev_find(d, m->params[i])->data)
#define PG(i)    (tprt_dev_find(d, m->params[i])->grad)
#define LW(l, s) PW(gpt2_layer_param(l, s))
#define LG(l, s) PG(gpt2_layer_param(l, s))
#endif
