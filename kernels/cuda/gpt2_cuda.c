/* gpt2_cuda.c - tprt's GPT-2 forward, backward and AdamW step on one CUDA
 * device, over the host model's descriptors: every live parameter gets a
 * bf16 working copy and an fp32 grad, every optimizer entry an fp32 master,
 * exp_avg and exp_avg_sq, and a working tensor the model no longer holds
 * (the buggy policy's old embedding) keeps its own bf16 copy: one
 * cudaMalloc each, so tpaudit joins each tensor to its allocation.  The
 * layer order and the gradient flow are gpt2.c's; the residual gradient
 * lives in one buffer (the residual's backward is the identity). */
#define _DEFAULT_SOURCE
#include "gpt2_cuda.h"
#include "tprt_cuda.h"
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_err[256];
const char *tprt_cuda_error(void) { return g_err; }
static int fail(const char *what) {
    cudaError_t e = cudaGetLastError();
    snprintf(g_err, sizeof g_err, "%s: %s", what, e == cudaSuccess ? "failed" : cudaGetErrorString(e));
    return -1;
}
#define TRY(call, what) do { if (call) return fail(what); } while (0)

int tprt_cuda_available(char *why, size_t why_len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        snprintf(why, why_len, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return -1;
    }
    return 0;
}

/* ---- device copies of the host tensors ---- */
typedef struct {
    const tprt_tensor *t;
    void *data;  /* bf16 (working) or fp32 (master, state) */
    float *grad; /* fp32, live params only */
    int bf16;
    size_t numel;
} dev_tensor;

enum { K_ENCODER, K_LAYERNORM, K_MATMUL, K_ATTENTION, K_GELU, K_RESIDUAL, K_CROSSENT, K_ADAMW, K_OTHER, K_COUNT };
static const char *KIND_NAME[K_COUNT] = {"encoder", "layernorm", "matmul", "attention", "gelu",
                                         "residual", "crossentropy", "adamw", "memset/copy"};
#define MAX_MARKS 2048
#define PROFILE_SKIP 2

typedef struct {
    tprt_bf16 *ln1, *qkv, *atty, *att, *attp, *res2, *ln2, *fch, *fcg, *fcp, *res3;
    float *ln1m, *ln1r, *ln2m, *ln2r;
} layer_acts;

struct tprt_cuda_model {
    gpt2_model *m;
    tprt_adamw *o;
    int n_dt, cap_dt;
    dev_tensor *dt;
    int B, T, ldv;   /* ldv: row stride of the logits (vocab slice padded to 64) */
    void *acts_block, *grads_block, *attn_scratch;
    layer_acts *la;
    tprt_bf16 *enc, *lnf, *logits;
    float *lnfm, *lnfr, *rowmax, *rowsum, *ce_scratch, *loss, *norm2;
    tprt_bf16 *dres, *dln, *datty, *dqkv, *dfcg, *dfch;
    int *tok, *tgt;
    /* profiling: events and the kind each one opens */
    int profile, n_marks, steps_seen, steps_profiled; /* the first PROFILE_SKIP steps are warm-up */
    cudaEvent_t ev[MAX_MARKS];
    int ev_kind[MAX_MARKS];
    double kind_ms[K_COUNT];
};

static tprt_cuda_model *g_model; /* for the audit hook: one model per process */

static void mark(tprt_cuda_model *d, int kind) {
    if (!d->profile || d->n_marks >= MAX_MARKS) return;
    cudaEventRecord(d->ev[d->n_marks], 0);
    d->ev_kind[d->n_marks++] = kind;
}
/* Closes the marks of this phase: the time between two marks goes to the first's kind. */
static void marks_flush(tprt_cuda_model *d) {
    if (!d->profile || d->n_marks < 2) { d->n_marks = 0; return; }
    cudaEventSynchronize(d->ev[d->n_marks - 1]);
    for (int i = 0; i + 1 < d->n_marks; i++) {
        float ms = 0.0f;
        if (d->steps_seen >= PROFILE_SKIP && cudaEventElapsedTime(&ms, d->ev[i], d->ev[i + 1]) == cudaSuccess)
            d->kind_ms[d->ev_kind[i]] += ms;
    }
    d->n_marks = 0;
}

static dev_tensor *dev_find(const tprt_cuda_model *d, const tprt_tensor *t) {
    for (int i = 0; i < d->n_dt; i++) if (d->dt[i].t == t) return &d->dt[i];
    return NULL;
}

/* One cudaMalloc per tensor buffer; the data is converted on the host. */
static void *upload(const float *host, size_t n, int bf16) {
    void *p = NULL;
    size_t bytes = n * (bf16 ? sizeof(tprt_bf16) : sizeof(float));
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) return NULL;
    if (!bf16) {
        if (cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) { cudaFree(p); return NULL; }
        return p;
    }
    tprt_bf16 *tmp = malloc(bytes ? bytes : 1);
    if (!tmp) { cudaFree(p); return NULL; }
    for (size_t i = 0; i < n; i++) tmp[i] = tprt_f2bf(host[i]);
    cudaError_t e = cudaMemcpy(p, tmp, bytes, cudaMemcpyHostToDevice);
    free(tmp);
    if (e != cudaSuccess) { cudaFree(p); return NULL; }
    return p;
}

static dev_tensor *dev_add(tprt_cuda_model *d, const tprt_tensor *t, int bf16, int want_grad) {
    dev_tensor *x = dev_find(d, t);
    if (x) return x;
    if (d->n_dt == d->cap_dt) {
        int cap = d->cap_dt ? 2 * d->cap_dt : 256;
        dev_tensor *n = realloc(d->dt, sizeof *n * (size_t)cap);
        if (!n) return NULL;
        d->dt = n, d->cap_dt = cap;
    }
    x = &d->dt[d->n_dt];
    memset(x, 0, sizeof *x);
    x->t = t, x->bf16 = bf16, x->numel = t->numel;
    if (!(x->data = upload(t->data, t->numel, bf16))) return NULL;
    if (want_grad) {
        if (cudaMalloc((void **)&x->grad, t->numel * sizeof(float)) != cudaSuccess) { cudaFree(x->data); return NULL; }
        cudaMemset(x->grad, 0, t->numel * sizeof(float));
    }
    d->n_dt++;
    return x;
}

/* Working weights, masters and optimizer state: named so tpaudit's stacks say which is which. */
static int upload_params(tprt_cuda_model *d) {
    for (int i = 0; i < d->m->n_params; i++)
        if (!dev_add(d, d->m->params[i], 1, d->m->params[i]->grad != NULL)) return -1;
    return 0;
}
static int upload_masters(tprt_cuda_model *d) {
    for (int i = 0; i < d->o->n; i++)
        if (!dev_add(d, d->o->e[i].master, 0, 0)) return -1;
    return 0;
}
static int upload_state(tprt_cuda_model *d) {
    for (int i = 0; i < d->o->n; i++)
        if (!dev_add(d, d->o->e[i].m, 0, 0) || !dev_add(d, d->o->e[i].v, 0, 0)) return -1;
    return 0;
}
static int upload_stale_working(tprt_cuda_model *d) { /* map entries whose working tensor left the model */
    for (int i = 0; i < d->o->n; i++)
        if (!dev_add(d, d->o->e[i].working, 1, 0)) return -1;
    return 0;
}

static int storage_hook(const tprt_tensor *t, tprt_storage *s) {
    const dev_tensor *x = g_model ? dev_find(g_model, t) : NULL;
    if (!x) return 1;
    s->device = "cuda:0";
    s->dtype = x->bf16 ? "bfloat16" : "float32";
    s->ptr = (uint64_t)(uintptr_t)x->data;
    s->bytes = (uint64_t)x->numel * (x->bf16 ? 2u : 4u);
    return 0;
}

/* ---- activations: carved from one block, each piece 256-byte aligned ---- */
typedef struct { char *base; size_t off; } carver;
static void *take(carver *c, size_t bytes) {
    void *p = c->base ? c->base + c->off : NULL;
    c->off += (bytes + 255) & ~(size_t)255;
    return p;
}

static int carve_acts(tprt_cuda_model *d, carver *c) {
    gpt2_model *m = d->m;
    size_t BT = (size_t)d->B * d->T, C = (size_t)m->cfg.channels, H = 4 * C, NH = (size_t)m->cfg.n_head;
    size_t bf = sizeof(tprt_bf16), f = sizeof(float);
    d->enc = take(c, BT * C * bf);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        layer_acts *a = &d->la[l];
        a->ln1 = take(c, BT * C * bf), a->qkv = take(c, BT * 3 * C * bf), a->atty = take(c, BT * C * bf);
        a->att = take(c, (size_t)d->B * NH * (size_t)d->T * (size_t)d->T * bf);
        a->attp = take(c, BT * C * bf), a->res2 = take(c, BT * C * bf), a->ln2 = take(c, BT * C * bf);
        a->fch = take(c, BT * H * bf), a->fcg = take(c, BT * H * bf), a->fcp = take(c, BT * C * bf);
        a->res3 = take(c, BT * C * bf);
        a->ln1m = take(c, BT * f), a->ln1r = take(c, BT * f), a->ln2m = take(c, BT * f), a->ln2r = take(c, BT * f);
    }
    d->lnf = take(c, BT * C * bf), d->lnfm = take(c, BT * f), d->lnfr = take(c, BT * f);
    d->logits = take(c, BT * (size_t)d->ldv * bf);
    d->rowmax = take(c, BT * f), d->rowsum = take(c, BT * f), d->ce_scratch = take(c, 2 * BT * f);
    d->loss = take(c, f), d->norm2 = take(c, 2 * f);
    d->tok = take(c, BT * sizeof(int)), d->tgt = take(c, BT * sizeof(int));
    return 0;
}
static void carve_grads(tprt_cuda_model *d, carver *c) {
    size_t BT = (size_t)d->B * d->T, C = (size_t)d->m->cfg.channels, bf = sizeof(tprt_bf16);
    d->dres = take(c, BT * C * bf), d->dln = take(c, BT * C * bf), d->datty = take(c, BT * C * bf);
    d->dqkv = take(c, BT * 3 * C * bf), d->dfcg = take(c, BT * 4 * C * bf), d->dfch = take(c, BT * 4 * C * bf);
}

tprt_cuda_model *tprt_cuda_create(gpt2_model *m, tprt_adamw *o, int B, int T) {
    if (m->tp_world != 1) { snprintf(g_err, sizeof g_err, "the CUDA backend runs TP=1 only"); return NULL; }
    tprt_cuda_model *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->m = m, d->o = o, d->B = B, d->T = T;
    int vl = (int)m->params[0]->local_shape[0];
    d->ldv = (vl + 63) / 64 * 64;
    d->la = calloc((size_t)m->cfg.n_layer, sizeof *d->la);
    const char *prof = getenv("TPRT_PROFILE");
    d->profile = prof && *prof && strcmp(prof, "0");
    if (!d->la || cudaSetDevice(0) != cudaSuccess || cuda_blas_init()) { fail("device setup"); goto bad; }
    if (upload_params(d) || upload_masters(d) || upload_state(d) || upload_stale_working(d)) { fail("upload"); goto bad; }
    carver c = {NULL, 0};
    carve_acts(d, &c);
    if (cudaMalloc(&d->acts_block, c.off) != cudaSuccess) { fail("activations"); goto bad; }
    c.base = d->acts_block, c.off = 0;
    carve_acts(d, &c);
    carver g = {NULL, 0};
    carve_grads(d, &g);
    if (cudaMalloc(&d->grads_block, g.off) != cudaSuccess) { fail("activation grads"); goto bad; }
    g.base = d->grads_block, g.off = 0;
    carve_grads(d, &g);
    int C = m->cfg.channels;
    if (cudaMalloc(&d->attn_scratch, cuda_attention_scratch_bytes(B, T, C, m->cfg.n_head)) != cudaSuccess) {
        fail("attention scratch");
        goto bad;
    }
    for (int i = 0; d->profile && i < MAX_MARKS; i++) cudaEventCreate(&d->ev[i]);
    g_model = d;
    tprt_storage_hook = storage_hook;
    return d;
bad:
    tprt_cuda_free(d);
    return NULL;
}

void tprt_cuda_free(tprt_cuda_model *d) {
    if (!d) return;
    if (g_model == d) g_model = NULL, tprt_storage_hook = NULL;
    for (int i = 0; i < d->n_dt; i++) { cudaFree(d->dt[i].data); cudaFree(d->dt[i].grad); }
    cudaFree(d->acts_block);
    cudaFree(d->grads_block);
    cudaFree(d->attn_scratch);
    for (int i = 0; d->profile && i < MAX_MARKS; i++) if (d->ev[i]) cudaEventDestroy(d->ev[i]);
    free(d->dt);
    free(d->la);
    free(d);
}

#define PW(i) ((tprt_bf16 *)dev_find(d, m->params[i])->data)
#define PG(i) (dev_find(d, m->params[i])->grad)
#define LW(l, s) PW(gpt2_layer_param(l, s))
#define LG(l, s) PG(gpt2_layer_param(l, s))

void tprt_cuda_zero_grad(tprt_cuda_model *d) {
    for (int i = 0; i < d->m->n_params; i++) {
        dev_tensor *x = dev_find(d, d->m->params[i]);
        if (x && x->grad) cudaMemsetAsync(x->grad, 0, x->numel * sizeof(float), 0);
    }
    d->m->grads_ready = 0;
}

int tprt_cuda_forward(tprt_cuda_model *d, const int *tokens, const int *targets, tprt_comm *comm) {
    gpt2_model *m = d->m;
    int B = d->B, T = d->T, BT = B * T, C = m->cfg.channels, L = m->cfg.n_layer, NH = m->cfg.n_head;
    int vl = (int)m->params[0]->local_shape[0], v0 = m->tp_rank * vl;
    size_t BTC = (size_t)BT * C;
    (void)comm; /* TP=1: no all-reduce */
    mark(d, K_OTHER);
    TRY(cudaMemcpy(d->tok, tokens, sizeof(int) * (size_t)BT, cudaMemcpyHostToDevice) != cudaSuccess, "tokens");
    TRY(cudaMemcpy(d->tgt, targets, sizeof(int) * (size_t)BT, cudaMemcpyHostToDevice) != cudaSuccess, "targets");
    mark(d, K_ENCODER);
    TRY(cuda_encoder_forward(d->enc, d->tok, PW(0), v0, vl, BT, C) || cuda_pos_forward(d->enc, PW(1), B, T, C), "encoder");
    tprt_bf16 *res = d->enc;
    for (int l = 0; l < L; l++) {
        layer_acts *a = &d->la[l];
        mark(d, K_LAYERNORM);
        TRY(cuda_layernorm_forward(a->ln1, a->ln1m, a->ln1r, res, LW(l, P_LN1W), LW(l, P_LN1B), BT, C), "ln_1");
        mark(d, K_MATMUL);
        TRY(cuda_matmul_forward(a->qkv, a->ln1, LW(l, P_QKVW), LW(l, P_QKVB), BT, C, 3 * C, 3 * C), "c_attn");
        mark(d, K_ATTENTION);
        TRY(cuda_attention_forward(a->atty, a->att, a->qkv, d->attn_scratch, B, T, C, NH), "attention");
        mark(d, K_MATMUL);
        TRY(cuda_matmul_forward(a->attp, a->atty, LW(l, P_ATTPW), LW(l, P_ATTPB), BT, C, C, C), "attn.c_proj");
        mark(d, K_RESIDUAL);
        TRY(cuda_residual_forward(a->res2, res, a->attp, BTC), "residual");
        mark(d, K_LAYERNORM);
        TRY(cuda_layernorm_forward(a->ln2, a->ln2m, a->ln2r, a->res2, LW(l, P_LN2W), LW(l, P_LN2B), BT, C), "ln_2");
        mark(d, K_MATMUL);
        TRY(cuda_matmul_forward(a->fch, a->ln2, LW(l, P_FCW), LW(l, P_FCB), BT, C, 4 * C, 4 * C), "c_fc");
        mark(d, K_GELU);
        TRY(cuda_gelu_forward(a->fcg, a->fch, (size_t)BT * 4 * C), "gelu");
        mark(d, K_MATMUL);
        TRY(cuda_matmul_forward(a->fcp, a->fcg, LW(l, P_FCPW), LW(l, P_FCPB), BT, 4 * C, C, C), "mlp.c_proj");
        mark(d, K_RESIDUAL);
        TRY(cuda_residual_forward(a->res3, a->res2, a->fcp, BTC), "residual");
        res = a->res3;
    }
    mark(d, K_LAYERNORM);
    TRY(cuda_layernorm_forward(d->lnf, d->lnfm, d->lnfr, res, PW(m->n_params - 2), PW(m->n_params - 1), BT, C), "ln_f");
    mark(d, K_MATMUL);
    TRY(cuda_matmul_forward(d->logits, d->lnf, PW(0), NULL, BT, C, vl, d->ldv), "lm_head");
    mark(d, K_CROSSENT);
    TRY(cuda_ce_rowmax(d->rowmax, d->logits, v0, vl, m->cfg.vocab, BT, d->ldv) ||
        cuda_ce_rowsum(d->ce_scratch, d->logits, d->rowmax, d->tgt, v0, vl, m->cfg.vocab, BT, d->ldv) ||
        cuda_ce_loss(d->loss, d->rowsum, d->ce_scratch, d->rowmax, BT), "cross-entropy");
    mark(d, K_OTHER);
    TRY(cudaMemcpy(&m->loss, d->loss, sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess, "loss");
    mark(d, K_OTHER);
    marks_flush(d);
    return 0;
}

int tprt_cuda_backward(tprt_cuda_model *d, tprt_comm *comm) {
    gpt2_model *m = d->m;
    int B = d->B, T = d->T, BT = B * T, C = m->cfg.channels, L = m->cfg.n_layer, NH = m->cfg.n_head;
    int vl = (int)m->params[0]->local_shape[0], v0 = m->tp_rank * vl;
    size_t BTC = (size_t)BT * C, bf = sizeof(tprt_bf16);
    (void)comm;
    mark(d, K_CROSSENT);
    TRY(cuda_crossentropy_backward(d->logits, d->logits, d->rowmax, d->rowsum, d->tgt, v0, vl, m->cfg.vocab, BT, d->ldv,
                                   1.0f), "cross-entropy backward");
    mark(d, K_OTHER);
    cudaMemsetAsync(d->dln, 0, BTC * bf, 0);
    cudaMemsetAsync(d->dres, 0, BTC * bf, 0);
    mark(d, K_MATMUL);
    TRY(cuda_matmul_backward(d->dln, PG(0), NULL, d->logits, d->lnf, PW(0), BT, C, vl, d->ldv), "lm_head backward");
    mark(d, K_LAYERNORM);
    tprt_bf16 *res_last = L ? d->la[L - 1].res3 : d->enc;
    TRY(cuda_layernorm_backward(d->dres, PG(m->n_params - 2), PG(m->n_params - 1), d->dln, res_last, PW(m->n_params - 2),
                                d->lnfm, d->lnfr, BT, C), "ln_f backward");
    for (int l = L - 1; l >= 0; l--) {
        layer_acts *a = &d->la[l];
        tprt_bf16 *res = l ? d->la[l - 1].res3 : d->enc;
        /* d->dres holds d(res3) = d(fcp); the ln_2 path adds into it: d(res2) */
        mark(d, K_OTHER);
        cudaMemsetAsync(d->dfcg, 0, BTC * 4 * bf, 0);
        cudaMemsetAsync(d->dfch, 0, BTC * 4 * bf, 0);
        cudaMemsetAsync(d->dln, 0, BTC * bf, 0);
        mark(d, K_MATMUL);
        TRY(cuda_matmul_backward(d->dfcg, LG(l, P_FCPW), LG(l, P_FCPB), d->dres, a->fcg, LW(l, P_FCPW), BT, 4 * C, C, C),
            "mlp.c_proj backward");
        mark(d, K_GELU);
        TRY(cuda_gelu_backward(d->dfch, a->fch, d->dfcg, BTC * 4), "gelu backward");
        mark(d, K_MATMUL);
        TRY(cuda_matmul_backward(d->dln, LG(l, P_FCW), LG(l, P_FCB), d->dfch, a->ln2, LW(l, P_FCW), BT, C, 4 * C, 4 * C),
            "c_fc backward");
        mark(d, K_LAYERNORM);
        TRY(cuda_layernorm_backward(d->dres, LG(l, P_LN2W), LG(l, P_LN2B), d->dln, a->res2, LW(l, P_LN2W), a->ln2m, a->ln2r,
                                    BT, C), "ln_2 backward");
        mark(d, K_OTHER);
        cudaMemsetAsync(d->datty, 0, BTC * bf, 0);
        cudaMemsetAsync(d->dqkv, 0, BTC * 3 * bf, 0);
        cudaMemsetAsync(d->dln, 0, BTC * bf, 0);
        mark(d, K_MATMUL);
        TRY(cuda_matmul_backward(d->datty, LG(l, P_ATTPW), LG(l, P_ATTPB), d->dres, a->atty, LW(l, P_ATTPW), BT, C, C, C),
            "attn.c_proj backward");
        mark(d, K_ATTENTION);
        TRY(cuda_attention_backward(d->dqkv, d->datty, a->qkv, a->att, d->attn_scratch, B, T, C, NH), "attention backward");
        mark(d, K_MATMUL);
        TRY(cuda_matmul_backward(d->dln, LG(l, P_QKVW), LG(l, P_QKVB), d->dqkv, a->ln1, LW(l, P_QKVW), BT, C, 3 * C, 3 * C),
            "c_attn backward");
        mark(d, K_LAYERNORM);
        TRY(cuda_layernorm_backward(d->dres, LG(l, P_LN1W), LG(l, P_LN1B), d->dln, res, LW(l, P_LN1W), a->ln1m, a->ln1r,
                                    BT, C), "ln_1 backward");
    }
    mark(d, K_ENCODER);
    TRY(cuda_pos_backward(PG(1), d->dres, B, T, C) || cuda_encoder_backward(PG(0), d->dres, d->tok, v0, vl, BT, C),
        "encoder backward");
    mark(d, K_OTHER);
    m->grads_ready = 1;
    return 0;
}

int tprt_cuda_step(tprt_cuda_model *d, tprt_comm *comm) {
    tprt_adamw *o = d->o;
    const gpt2_model *m = d->m;
    (void)comm;
    mark(d, K_ADAMW);
    cudaMemsetAsync(d->norm2, 0, 2 * sizeof(float), 0);
    for (int i = 0; i < o->n; i++) {
        const tprt_tensor *w = o->e[i].working;
        if (!gpt2_has_grad(m, w)) continue;
        dev_tensor *x = dev_find(d, w);
        /* norm2[0]: sharded grads (all-reduced at TP>1), norm2[1]: replicated, counted once */
        TRY(cuda_sumsq(d->norm2 + (w->shard == TPRT_REPLICATED), x->grad, x->numel), "grad norm");
    }
    o->t++;
    float bc1 = 1.0f - powf(o->beta1, (float)o->t), bc2 = 1.0f - powf(o->beta2, (float)o->t);
    for (int i = 0; i < o->n; i++) {
        tprt_adamw_entry *e = &o->e[i];
        if (!gpt2_has_grad(m, e->working)) continue;
        dev_tensor *w = dev_find(d, e->working), *p = dev_find(d, e->master), *mo = dev_find(d, e->m), *vo = dev_find(d, e->v);
        float decay = e->decay ? o->lr * o->weight_decay : 0.0f;
        TRY(cuda_adamw_update(p->data, w->data, w->grad, mo->data, vo->data, p->numel, d->norm2, o->clip, o->lr, o->beta1,
                              o->beta2, o->eps, decay, bc1, bc2), "adamw");
    }
    mark(d, K_OTHER);
    float n2[2];
    TRY(cudaMemcpy(n2, d->norm2, sizeof n2, cudaMemcpyDeviceToHost) != cudaSuccess, "grad norm");
    o->last_norm = sqrtf(n2[0] + n2[1]);
    mark(d, K_OTHER);
    marks_flush(d);
    if (d->steps_seen++ >= PROFILE_SKIP) d->steps_profiled++;
    return 0;
}

void tprt_cuda_profile_report(const tprt_cuda_model *d, FILE *f) {
    if (!d->profile || !d->steps_profiled) return;
    double total = 0.0;
    for (int k = 0; k < K_COUNT; k++) total += d->kind_ms[k];
    fprintf(f, "profile: device time per step by layer kind (%d steps after %d warm-up, cudaEvent)\n", d->steps_profiled,
            PROFILE_SKIP);
    for (int k = 0; k < K_COUNT; k++)
        fprintf(f, "profile: %-13s %9.3f ms %5.1f%%\n", KIND_NAME[k], d->kind_ms[k] / d->steps_profiled,
                total > 0 ? 100.0 * d->kind_ms[k] / total : 0.0);
    fprintf(f, "profile: %-13s %9.3f ms\n", "total", total / d->steps_profiled);
}
