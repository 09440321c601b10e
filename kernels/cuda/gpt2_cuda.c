/* gpt2_cuda.c - setup of tprt's device model on this rank's GPU, over the
 * host model's descriptors (already sharded by the TP policy): every live
 * parameter gets a bf16 working copy and an fp32 grad, every optimizer
 * entry an fp32 master, exp_avg and exp_avg_sq, and a working tensor the
 * model no longer holds (the buggy policy's old embedding) keeps its own
 * bf16 copy: one cudaMalloc each, so tpaudit joins each tensor to its
 * allocation.  Activations of this rank's local sizes (its heads, its MLP
 * columns, its vocab slice).  Also the audit storage hook and the per-kind
 * cudaEvent profile's report; the passes are in gpt2_cuda_pass.c, the
 * optimizer step in gpt2_cuda_step.c, what they all call (the error
 * helpers, a tensor's device copy, the profile marks) in
 * gpt2_cuda_shared.c. */
#define _DEFAULT_SOURCE
#include "gpt2_cuda_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tprt_cuda_available(char *why, size_t why_len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        snprintf(why, why_len, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return -1;
    }
    return 0;
}

int tprt_cuda_device_count(char *why, size_t why_len) {
    int n = 0;
    return tprt_cuda_available(why, why_len) || cudaGetDeviceCount(&n) != cudaSuccess ? -1 : n;
}

static const char *KIND_NAME[K_COUNT] = {"encoder",  "layernorm",    "matmul", "attention",  "gelu",
                                         "residual", "crossentropy", "adamw",  "all-reduce", "memset/copy"};

static tprt_cuda_model *g_model; /* for the audit hook: one model per process */

/* One cudaMalloc per tensor buffer of `cap` >= n elements (the slack zeroed); the data is
 * converted on the host. */
static void *upload(const float *host, size_t n, size_t cap, int bf16) {
    void *p = NULL;
    size_t elt = bf16 ? sizeof(tprt_bf16) : sizeof(float), bytes = n * elt;
    if (cudaMalloc(&p, cap ? cap * elt : 1) != cudaSuccess) return NULL;
    if (cap > n && cudaMemset((char *)p + bytes, 0, (cap - n) * elt) != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    if (!bf16) {
        if (cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
            cudaFree(p);
            return NULL;
        }
        return p;
    }
    tprt_bf16 *tmp = malloc(bytes ? bytes : 1);
    if (!tmp) {
        cudaFree(p);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) tmp[i] = tprt_f2bf(host[i]);
    cudaError_t e = cudaMemcpy(p, tmp, bytes, cudaMemcpyHostToDevice);
    free(tmp);
    if (e != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

/* Elements to allocate for a tensor: the live vocab slice (params[0], also the LM head) gets
 * zero rows up to ldv, a multiple of 64, so the LM head's products run on aligned shapes
 * (an odd vocab such as 50257 makes cuBLAS take kernels about 5x slower).  The tensor, its
 * audit facts and the optimizer still see numel elements. */
static size_t alloc_elems(const tprt_cuda_model *d, const tprt_tensor *t) {
    if (t != d->m->params[0] || t->ndim != 2) return t->numel;
    return (size_t)d->ldv * (size_t)t->local_shape[1];
}

static dev_tensor *dev_add(tprt_cuda_model *d, const tprt_tensor *t, int bf16, int want_grad) {
    dev_tensor *x = tprt_dev_find(d, t);
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
    size_t cap = alloc_elems(d, t);
    if (!(x->data = upload(t->data, t->numel, cap, bf16))) return NULL;
    if (want_grad) {
        if (cudaMalloc((void **)&x->grad, cap * sizeof(float)) != cudaSuccess) {
            cudaFree(x->data);
            return NULL;
        }
        cudaMemset(x->grad, 0, cap * sizeof(float));
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
    const dev_tensor *x = g_model ? tprt_dev_find(g_model, t) : NULL;
    if (!x) return 1;
    s->device = g_model->devname;
    s->dtype = x->bf16 ? "bfloat16" : "float32";
    s->ptr = (uint64_t)(uintptr_t)x->data;
    s->bytes = (uint64_t)x->numel * (x->bf16 ? 2u : 4u);
    return 0;
}

/* ---- activations: carved from one block, each piece 256-byte aligned ---- */
typedef struct {
    char *base;
    size_t off;
} carver;
static void *take(carver *c, size_t bytes) {
    void *p = c->base ? c->base + c->off : NULL;
    c->off += (bytes + 255) & ~(size_t)255;
    return p;
}

static int carve_acts(tprt_cuda_model *d, carver *c) {
    gpt2_model *m = d->m;
    tp_dims t = tp_dims_of(m); /* this rank's heads and MLP columns */
    size_t BT = (size_t)d->B * d->T, C = (size_t)t.C, Cl = (size_t)t.Cl, H = (size_t)t.Hl, NH = (size_t)t.NHl;
    size_t bf = sizeof(tprt_bf16), f = sizeof(float);
    d->enc = take(c, BT * C * bf);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        layer_acts *a = &d->la[l];
        a->ln1 = take(c, BT * C * bf), a->qkv = take(c, BT * 3 * Cl * bf), a->atty = take(c, BT * Cl * bf);
        if (d->attn_fused)
            a->lse = take(c, (size_t)d->B * NH * (size_t)d->T * f);
        else
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
    tp_dims t = tp_dims_of(d->m);
    size_t BT = (size_t)d->B * d->T, C = (size_t)t.C, Cl = (size_t)t.Cl, H = (size_t)t.Hl, bf = sizeof(tprt_bf16);
    d->dres = take(c, BT * C * bf), d->dln = take(c, BT * C * bf), d->datty = take(c, BT * Cl * bf);
    d->dqkv = take(c, BT * 3 * Cl * bf), d->dfch = take(c, BT * H * bf);
}

/* The grads the backward's first product writes whole (beta 0, cuda_matmul_grads_fresh): the weight
 * matrices and, through the LM head (before the lookup's grad adds into it), the token embedding. */
static int written_whole(const gpt2_model *m, int i) {
    if (i == 0) return 1;
    if (i < 2 || i >= gpt2_layer_param(m->cfg.n_layer, 0)) return 0;
    int s = (i - 2) % GPT2_PARAMS_PER_LAYER;
    return s == P_QKVW || s == P_ATTPW || s == P_FCW || s == P_FCPW;
}

/* The table of the other grads (those the backward adds into), for tprt_cuda_zero_grad
 * (gpt2_cuda_pass.c), which runs every step; made here, once. */
static int zero_table(tprt_cuda_model *d) {
    const gpt2_model *m = d->m;
    if (!(d->zero_slots = calloc((size_t)m->n_params + 1, sizeof *d->zero_slots))) return -1;
    for (int i = 0; i < m->n_params; i++) {
        const dev_tensor *x = tprt_dev_find(d, m->params[i]);
        if (x && x->grad && !written_whole(m, i))
            d->zero_slots[d->n_zero++] = (tprt_adamw_slot){.grad = x->grad, .n = x->numel};
    }
    return 0;
}

tprt_cuda_model *tprt_cuda_create(gpt2_model *m, tprt_adamw *o, int B, int T, int device) {
    tprt_cuda_model *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->m = m, d->o = o, d->B = B, d->T = T, d->device = device;
    snprintf(d->devname, sizeof d->devname, "cuda:%d", device);
    int vl = (int)m->params[0]->local_shape[0];
    d->ldv = (vl + 63) / 64 * 64;
    d->la = calloc((size_t)m->cfg.n_layer, sizeof *d->la);
    d->slots = calloc((size_t)(o->n ? o->n : 1), sizeof *d->slots);
    const char *prof = getenv("TPRT_PROFILE");
    d->profile = prof && *prof && strcmp(prof, "0");
    if (!d->la || !d->slots || cudaSetDevice(device) != cudaSuccess || cuda_blas_init()) {
        tprt_cuda_fail("device setup");
        goto bad;
    }
    if (upload_params(d) || upload_masters(d) || upload_state(d) || upload_stale_working(d)) {
        tprt_cuda_fail("upload");
        goto bad;
    }
    if (zero_table(d)) {
        tprt_cuda_fail("zero-grad table");
        goto bad;
    }
    tp_dims t = tp_dims_of(m);
    d->attn_fused = cuda_attention_use_fused(t.Cl, t.NHl);
    carver c = {NULL, 0};
    carve_acts(d, &c);
    if (cudaMalloc(&d->acts_block, c.off) != cudaSuccess) {
        tprt_cuda_fail("activations");
        goto bad;
    }
    c.base = d->acts_block, c.off = 0;
    carve_acts(d, &c);
    carver g = {NULL, 0};
    carve_grads(d, &g);
    if (cudaMalloc(&d->grads_block, g.off) != cudaSuccess) {
        tprt_cuda_fail("activation grads");
        goto bad;
    }
    g.base = d->grads_block, g.off = 0;
    carve_grads(d, &g);
    size_t scratch = d->attn_fused ? cuda_attention_fused_scratch_bytes(B, T, t.Cl, t.NHl)
                                   : cuda_attention_scratch_bytes(B, T, t.Cl, t.NHl);
    if (cudaMalloc(&d->attn_scratch, scratch) != cudaSuccess) {
        tprt_cuda_fail("attention scratch");
        goto bad;
    }
    for (int i = 0; d->profile && i < MAX_MARKS; i++) cudaEventCreate(&d->ev[i]);
    tprt_cuda_host_staging(d);
    tprt_cuda_graphs_setup(d);
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
    tprt_cuda_host_staging_free(d); /* after the last grad norm has landed */
    tprt_cuda_graphs_free(d);
    for (int i = 0; i < d->n_dt; i++) {
        cudaFree(d->dt[i].data);
        cudaFree(d->dt[i].grad);
    }
    cudaFree(d->acts_block);
    cudaFree(d->grads_block);
    cudaFree(d->attn_scratch);
    for (int i = 0; d->profile && i < MAX_MARKS; i++)
        if (d->ev[i]) cudaEventDestroy(d->ev[i]);
    free(d->dt);
    free(d->la);
    free(d->slots);
    free(d->zero_slots);
    free(d);
}

void tprt_cuda_profile_report(const tprt_cuda_model *d, FILE *f) {
    if (!d->profile || !d->steps_profiled) return;
    double total = 0.0;
    for (int k = 0; k < K_COUNT; k++) total += d->kind_ms[k];
    fprintf(f, "profile: device time per step by layer kind (%d steps after %d warm-up, cudaEvent)\n",
            d->steps_profiled, PROFILE_SKIP);
    for (int k = 0; k < K_COUNT; k++)
        if (k != K_COMM || d->m->tp_world > 1)
            fprintf(f, "profile: %-13s %9.3f ms %5.1f%%\n", KIND_NAME[k], d->kind_ms[k] / d->steps_profiled,
                    total > 0 ? 100.0 * d->kind_ms[k] / total : 0.0);
    fprintf(f, "profile: %-13s %9.3f ms\n", "total", total / d->steps_profiled);
    fprintf(f, "profile: attention path %s\n",
            d->attn_fused ? "fused (attention_fused.cu)" : "gemm (TPRT_ATTENTION=gemm)");
}
