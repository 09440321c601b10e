/* gpt2.c - tprt's GPT-2: parameters (built full and seeded, sharded later by
 * tp_policy.c), the tensor-parallel forward and backward over this rank's
 * shards, and the deterministic synthetic training data. */
#include "layers.h"
#include "model.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gpt2_config_named(const char *name, gpt2_config *cfg) {
    if (!strcmp(name, "tiny")) {
        *cfg = (gpt2_config){50257, 64, 2, 4, 64};
        return 0;
    }
    if (!strcmp(name, "gpt2-124m")) {
        *cfg = (gpt2_config){50257, 1024, 12, 12, 768};
        return 0;
    }
    return -1;
}

/* ---- random numbers: splitmix64, one stream per parameter ---- */
static uint64_t mix64(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}
static uint64_t next64(uint64_t *s) { return mix64(*s += 0x9E3779B97F4A7C15ULL); }
static double uniform01(uint64_t *s) { return ((double)(next64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
static float normal(uint64_t *s) {
    double u1 = uniform01(s), u2 = uniform01(s);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

enum { INIT_ZERO, INIT_ONE, INIT_NORMAL, INIT_PROJ };
/* Per-layer slots: name, rows and cols in units of C (cols 0: 1-D), shard, init. */
static const struct slot {
    const char *suffix;
    int rows, cols, shard, init;
} SLOTS[GPT2_PARAMS_PER_LAYER] = {
    {"ln_1.weight", 1, 0, TPRT_REPLICATED, INIT_ONE},          {"ln_1.bias", 1, 0, TPRT_REPLICATED, INIT_ZERO},
    {"attn.c_attn.weight", 3, 1, TPRT_SHARD_QKV, INIT_NORMAL}, {"attn.c_attn.bias", 3, 0, TPRT_SHARD_QKV, INIT_ZERO},
    {"attn.c_proj.weight", 1, 1, TPRT_SHARD_COLS, INIT_PROJ},  {"attn.c_proj.bias", 1, 0, TPRT_REPLICATED, INIT_ZERO},
    {"ln_2.weight", 1, 0, TPRT_REPLICATED, INIT_ONE},          {"ln_2.bias", 1, 0, TPRT_REPLICATED, INIT_ZERO},
    {"mlp.c_fc.weight", 4, 1, TPRT_SHARD_ROWS, INIT_NORMAL},   {"mlp.c_fc.bias", 4, 0, TPRT_SHARD_ROWS, INIT_ZERO},
    {"mlp.c_proj.weight", 1, 4, TPRT_SHARD_COLS, INIT_PROJ},   {"mlp.c_proj.bias", 1, 0, TPRT_REPLICATED, INIT_ZERO},
};

static tprt_tensor *new_param(const char *name, int64_t rows, int64_t cols, int shard, int init, float proj_std,
                              uint64_t seed, int index) {
    int64_t shape[2] = {rows, cols};
    tprt_tensor *t = tprt_tensor_new(name, cols ? 2 : 1, shape, 1);
    if (!t) return NULL;
    t->shard = shard;
    uint64_t s = mix64(seed * 0x100000001B3ULL + (uint64_t)index + 1);
    for (size_t i = 0; i < t->numel; i++)
        t->data[i] = init == INIT_ONE    ? 1.0f
                     : init == INIT_ZERO ? 0.0f
                                         : normal(&s) * (init == INIT_PROJ ? proj_std : 0.02f);
    return t;
}

gpt2_model *gpt2_create(const gpt2_config *cfg, uint64_t seed) {
    gpt2_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cfg = *cfg;
    m->tp_world = 1;
    m->padded_vocab = cfg->vocab;
    int C = cfg->channels, L = cfg->n_layer;
    m->n_params = 4 + L * GPT2_PARAMS_PER_LAYER;
    m->params = calloc((size_t)m->n_params, sizeof *m->params);
    if (!m->params) {
        free(m);
        return NULL;
    }
    float proj_std = 0.02f / sqrtf(2.0f * (float)L);
    int k = 0, ok = 1;
    m->params[k] = new_param("transformer.wte.weight", cfg->vocab, C, TPRT_SHARD_VOCAB, INIT_NORMAL, 0, seed, k), k++;
    m->params[k] = new_param("transformer.wpe.weight", cfg->max_seq, C, TPRT_REPLICATED, INIT_NORMAL, 0, seed, k), k++;
    for (int l = 0; l < L; l++)
        for (int s = 0; s < GPT2_PARAMS_PER_LAYER; s++, k++) {
            char name[64];
            snprintf(name, sizeof name, "transformer.h.%d.%s", l, SLOTS[s].suffix);
            m->params[k] = new_param(name, (int64_t)SLOTS[s].rows * C, (int64_t)SLOTS[s].cols * C, SLOTS[s].shard,
                                     SLOTS[s].init, proj_std, seed, k);
        }
    m->params[k] = new_param("transformer.ln_f.weight", C, 0, TPRT_REPLICATED, INIT_ONE, 0, seed, k), k++;
    m->params[k] = new_param("transformer.ln_f.bias", C, 0, TPRT_REPLICATED, INIT_ZERO, 0, seed, k), k++;
    for (int i = 0; i < m->n_params; i++) ok &= m->params[i] != NULL;
    if (!ok) {
        gpt2_free(m);
        return NULL;
    }
    return m;
}

void gpt2_free(gpt2_model *m) {
    if (!m) return;
    for (int i = 0; m->params && i < m->n_params; i++)
        if (m->params[i]) {
            tprt_tensor_release(m->params[i]);
            free(m->params[i]);
        }
    free(m->params);
    tprt_free_floats(m->acts);
    tprt_free_floats(m->dacts);
    free(m->act_off);
    free(m->tokens);
    free(m->targets);
    free(m);
}

int gpt2_is_live(const gpt2_model *m, const tprt_tensor *t) {
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i] == t) return 1;
    return 0;
}
int gpt2_has_grad(const gpt2_model *m, const tprt_tensor *t) { return m->grads_ready && t->grad && gpt2_is_live(m, t); }

void gpt2_zero_grad(gpt2_model *m) {
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i]->grad) memset(m->params[i]->grad, 0, m->params[i]->numel * sizeof(float));
    m->grads_ready = 0;
}

/* ---- activations: one block, offsets per (layer, kind) ---- */
enum { A_ENC, A_LNF, A_LNFM, A_LNFR, A_LOGITS, A_ROWMAX, A_ROWSUM, A_SCRATCH, A_GLOBAL };
enum {
    L_LN1,
    L_LN1M,
    L_LN1R,
    L_QKV,
    L_ATTY,
    L_ATT,
    L_ATTP,
    L_RES2,
    L_LN2,
    L_LN2M,
    L_LN2R,
    L_FCH,
    L_FCG,
    L_FCP,
    L_RES3,
    L_PER
};
#define GA(base, id)    ((base) + m->act_off[id])
#define LA(base, l, id) ((base) + m->act_off[A_GLOBAL + (l)*L_PER + (id)])

/* Local sizes of this rank (valid after the policy). */
typedef struct {
    int B, T, BT, C, Cl, NHl, Hl, Vl, v0;
} dims_t;
static dims_t dims_of(const gpt2_model *m) {
    dims_t d;
    int N = m->tp_world;
    d.B = m->B, d.T = m->T, d.BT = m->B * m->T, d.C = m->cfg.channels;
    d.Cl = d.C / N, d.NHl = m->cfg.n_head / N, d.Hl = 4 * d.C / N;
    d.Vl = (int)m->params[0]->local_shape[0];
    d.v0 = m->tp_rank * d.Vl;
    return d;
}

int gpt2_alloc_acts(gpt2_model *m, int B, int T) {
    m->B = B, m->T = T;
    dims_t d = dims_of(m);
    size_t BT = (size_t)d.BT, C = (size_t)d.C, n = 0;
    size_t g[A_GLOBAL] = {BT * C, BT * C, BT, BT, BT * (size_t)d.Vl, BT, BT, 2 * BT};
    size_t per[L_PER] = {BT * C,
                         BT,
                         BT,
                         BT * 3 * (size_t)d.Cl,
                         BT * (size_t)d.Cl,
                         (size_t)B * (size_t)d.NHl * (size_t)T * (size_t)T,
                         BT * C,
                         BT * C,
                         BT * C,
                         BT,
                         BT,
                         BT * (size_t)d.Hl,
                         BT * (size_t)d.Hl,
                         BT * C,
                         BT * C};
    int L = m->cfg.n_layer;
    m->act_off = malloc(sizeof(size_t) * (size_t)(A_GLOBAL + L * L_PER));
    if (!m->act_off) return -1;
    for (int i = 0; i < A_GLOBAL; i++) m->act_off[i] = n, n += g[i];
    for (int l = 0; l < L; l++)
        for (int i = 0; i < L_PER; i++) m->act_off[A_GLOBAL + l * L_PER + i] = n, n += per[i];
    m->n_acts = n;
    m->acts = tprt_alloc_floats(n, "tprt.acts");
    m->dacts = tprt_alloc_floats(n, "tprt.dacts");
    m->tokens = malloc(sizeof(int) * BT);
    m->targets = malloc(sizeof(int) * BT);
    return m->acts && m->dacts && m->tokens && m->targets ? 0 : -1;
}

#define P(l, s) (m->params[gpt2_layer_param(l, s)])
#define CHECK(call)          \
    do {                     \
        int rc_ = (call);    \
        if (rc_) return rc_; \
    } while (0)

int gpt2_forward(gpt2_model *m, const int *tokens, const int *targets, tprt_comm *comm) {
    dims_t d = dims_of(m);
    int BT = d.BT, C = d.C, L = m->cfg.n_layer;
    size_t BTC = (size_t)BT * C;
    memcpy(m->tokens, tokens, sizeof(int) * BT);
    memcpy(m->targets, targets, sizeof(int) * BT);
    float *a = m->acts, *enc = GA(a, A_ENC);
    /* vocab-parallel lookup: rows off this rank's slice are 0, the sum is the embedding */
    encoder_forward(enc, m->tokens, m->params[0]->data, d.v0, d.Vl, BT, C);
    CHECK(tprt_allreduce(comm, enc, BTC, TPRT_SUM));
    pos_forward(enc, m->params[1]->data, d.B, d.T, C);
    float *res = enc;
    for (int l = 0; l < L; l++) {
        float *ln1 = LA(a, l, L_LN1), *qkv = LA(a, l, L_QKV), *atty = LA(a, l, L_ATTY), *attp = LA(a, l, L_ATTP);
        float *res2 = LA(a, l, L_RES2), *ln2 = LA(a, l, L_LN2), *fch = LA(a, l, L_FCH), *fcg = LA(a, l, L_FCG);
        float *fcp = LA(a, l, L_FCP), *res3 = LA(a, l, L_RES3);
        layernorm_forward(ln1, LA(a, l, L_LN1M), LA(a, l, L_LN1R), res, P(l, P_LN1W)->data, P(l, P_LN1B)->data, BT, C);
        matmul_forward(qkv, ln1, P(l, P_QKVW)->data, P(l, P_QKVB)->data, BT, C, 3 * d.Cl); /* column-parallel */
        attention_forward(atty, LA(a, l, L_ATT), qkv, d.B, d.T, d.Cl, d.NHl);              /* this rank's heads */
        matmul_forward(attp, atty, P(l, P_ATTPW)->data, NULL, BT, d.Cl, C);                /* row-parallel */
        CHECK(tprt_allreduce(comm, attp, BTC, TPRT_SUM));
        bias_add(attp, P(l, P_ATTPB)->data, BT, C);
        residual_forward(res2, res, attp, (int)BTC);
        layernorm_forward(ln2, LA(a, l, L_LN2M), LA(a, l, L_LN2R), res2, P(l, P_LN2W)->data, P(l, P_LN2B)->data, BT, C);
        matmul_forward(fch, ln2, P(l, P_FCW)->data, P(l, P_FCB)->data, BT, C, d.Hl); /* column-parallel */
        gelu_forward(fcg, fch, BT * d.Hl);
        matmul_forward(fcp, fcg, P(l, P_FCPW)->data, NULL, BT, d.Hl, C); /* row-parallel */
        CHECK(tprt_allreduce(comm, fcp, BTC, TPRT_SUM));
        bias_add(fcp, P(l, P_FCPB)->data, BT, C);
        residual_forward(res3, res2, fcp, (int)BTC);
        res = res3;
    }
    tprt_tensor *lnfw = m->params[m->n_params - 2], *lnfb = m->params[m->n_params - 1];
    float *lnf = GA(a, A_LNF), *logits = GA(a, A_LOGITS);
    layernorm_forward(lnf, GA(a, A_LNFM), GA(a, A_LNFR), res, lnfw->data, lnfb->data, BT, C);
    matmul_forward(logits, lnf, m->params[0]->data, NULL, BT, C, d.Vl); /* tied, vocab-parallel LM head */
    return crossentropy_forward(&m->loss, GA(a, A_ROWMAX), GA(a, A_ROWSUM), GA(a, A_SCRATCH), logits, m->targets, d.v0,
                                d.Vl, m->cfg.vocab, BT, comm);
}

int gpt2_backward(gpt2_model *m, tprt_comm *comm) {
    dims_t d = dims_of(m);
    int BT = d.BT, C = d.C, L = m->cfg.n_layer;
    size_t BTC = (size_t)BT * C;
    float *a = m->acts, *g = m->dacts;
    tprt_tensor *wte = m->params[0], *lnfw = m->params[m->n_params - 2], *lnfb = m->params[m->n_params - 1];
    memset(g, 0, m->n_acts * sizeof(float));
    float *dlogits = GA(g, A_LOGITS), *dlnf = GA(g, A_LNF);
    crossentropy_backward(dlogits, GA(a, A_LOGITS), GA(a, A_ROWMAX), GA(a, A_ROWSUM), m->targets, d.v0, d.Vl,
                          m->cfg.vocab, BT, 1.0f);
    matmul_backward(dlnf, wte->grad, NULL, dlogits, GA(a, A_LNF), wte->data, BT, C, d.Vl);
    CHECK(tprt_allreduce(comm, dlnf, BTC, TPRT_SUM)); /* partial over the vocab slices */
    float *res_last = L ? LA(a, L - 1, L_RES3) : GA(a, A_ENC), *dres_last = L ? LA(g, L - 1, L_RES3) : GA(g, A_ENC);
    layernorm_backward(dres_last, lnfw->grad, lnfb->grad, dlnf, res_last, lnfw->data, GA(a, A_LNFM), GA(a, A_LNFR), BT,
                       C);
    for (int l = L - 1; l >= 0; l--) {
        float *res = l ? LA(a, l - 1, L_RES3) : GA(a, A_ENC), *dres = l ? LA(g, l - 1, L_RES3) : GA(g, A_ENC);
        float *dres3 = LA(g, l, L_RES3), *dres2 = LA(g, l, L_RES2), *dfcp = LA(g, l, L_FCP), *dfcg = LA(g, l, L_FCG);
        float *dfch = LA(g, l, L_FCH), *dln2 = LA(g, l, L_LN2), *dattp = LA(g, l, L_ATTP), *datty = LA(g, l, L_ATTY);
        float *dqkv = LA(g, l, L_QKV), *dln1 = LA(g, l, L_LN1);
        residual_backward(dres2, dfcp, dres3, (int)BTC);
        bias_backward(P(l, P_FCPB)->grad, dfcp, BT, C);
        matmul_backward(dfcg, P(l, P_FCPW)->grad, NULL, dfcp, LA(a, l, L_FCG), P(l, P_FCPW)->data, BT, d.Hl, C);
        gelu_backward(dfch, LA(a, l, L_FCH), dfcg, BT * d.Hl);
        matmul_backward(dln2, P(l, P_FCW)->grad, P(l, P_FCB)->grad, dfch, LA(a, l, L_LN2), P(l, P_FCW)->data, BT, C,
                        d.Hl);
        CHECK(tprt_allreduce(comm, dln2, BTC, TPRT_SUM)); /* input grad of a column-parallel layer */
        layernorm_backward(dres2, P(l, P_LN2W)->grad, P(l, P_LN2B)->grad, dln2, LA(a, l, L_RES2), P(l, P_LN2W)->data,
                           LA(a, l, L_LN2M), LA(a, l, L_LN2R), BT, C);
        residual_backward(dres, dattp, dres2, (int)BTC);
        bias_backward(P(l, P_ATTPB)->grad, dattp, BT, C);
        matmul_backward(datty, P(l, P_ATTPW)->grad, NULL, dattp, LA(a, l, L_ATTY), P(l, P_ATTPW)->data, BT, d.Cl, C);
        attention_backward(dqkv, datty, LA(a, l, L_QKV), LA(a, l, L_ATT), d.B, d.T, d.Cl, d.NHl);
        matmul_backward(dln1, P(l, P_QKVW)->grad, P(l, P_QKVB)->grad, dqkv, LA(a, l, L_LN1), P(l, P_QKVW)->data, BT, C,
                        3 * d.Cl);
        CHECK(tprt_allreduce(comm, dln1, BTC, TPRT_SUM));
        layernorm_backward(dres, P(l, P_LN1W)->grad, P(l, P_LN1B)->grad, dln1, res, P(l, P_LN1W)->data,
                           LA(a, l, L_LN1M), LA(a, l, L_LN1R), BT, C);
    }
    float *denc = GA(g, A_ENC);
    pos_backward(m->params[1]->grad, denc, d.B, d.T, C);
    encoder_backward(wte->grad, denc, m->tokens, d.v0, d.Vl, BT, C);
    m->grads_ready = 1;
    return 0;
}

int gpt2_check_replicated_grads(const gpt2_model *m, tprt_comm *comm, char *why, size_t why_len) {
    for (int i = 0; i < m->n_params; i++) {
        const tprt_tensor *t = m->params[i];
        if (t->shard != TPRT_REPLICATED || !t->grad) continue;
        size_t n = t->numel;
        float *buf = malloc(sizeof(float) * 2 * n);
        if (!buf) return -1;
        for (size_t k = 0; k < n; k++) buf[k] = t->grad[k], buf[n + k] = -t->grad[k];
        int rc = tprt_allreduce(comm, buf, 2 * n, TPRT_MAX); /* max == min on every element iff identical */
        int bad = 0;
        for (size_t k = 0; !rc && k < n && !bad; k++) bad = buf[k] != -buf[n + k];
        free(buf);
        if (rc) return rc;
        if (bad) {
            snprintf(why, why_len, "%s: grad differs across ranks", t->name);
            return 1;
        }
    }
    return 0;
}

void tprt_synthetic_batch(int *tokens, int *targets, int B, int T, int vocab, uint64_t seed, int step) {
    int K = vocab < 512 ? vocab : 512, stride = vocab / K;
    int *seq = malloc(sizeof(int) * (size_t)(T + 1));
    if (!seq) return;
    for (int b = 0; b < B; b++) {
        uint64_t s = mix64(seed ^ mix64((uint64_t)step * 1000003ULL + (uint64_t)b));
        int x = (int)(next64(&s) % (uint64_t)K);
        for (int t = 0; t <= T; t++) {
            seq[t] = (int)(((int64_t)x * stride + 11) % vocab);
            x = next64(&s) % 16 == 0 ? (int)(next64(&s) % (uint64_t)K)
                                     : (x * 5 + 17) % K; /* a learnable chain, 1/16 noise */
        }
        for (int t = 0; t < T; t++) tokens[b * T + t] = seq[t], targets[b * T + t] = seq[t + 1];
    }
    free(seq);
}
