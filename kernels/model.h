/* model.h - tprt's GPT-2 model, vocab-parallel cross-entropy, the
 * mixed-precision AdamW optimizer, the tensor-parallel policies and the
 * tpaudit reporting built on the kernels of layers.h.  Functions that talk
 * to other ranks return 0 or a negative collective status (collectives.h). */
#ifndef TPRT_MODEL_H
#define TPRT_MODEL_H
#include "collectives.h"
#include "tprt_tensor.h"
#include <stddef.h>
#include <stdint.h>

/* ---- crossentropy.c: vocab-parallel softmax cross-entropy ----
 * logits (BT, vl) hold vocab entries [v0, v0+vl) of this rank only; entries
 * >= vocab (padding) are masked out.  Forward writes the mean loss over BT
 * rows to *loss (same on every rank) and keeps each row's max and sum of
 * exponentials in rowmax/rowsum (BT each) for the backward.  scratch: 2*BT. */
int crossentropy_forward(float *loss, float *rowmax, float *rowsum, float *scratch, const float *logits,
                         const int *targets, int v0, int vl, int vocab, int BT, tprt_comm *comm);
/* dlogits = dloss * (softmax - onehot) / BT; may alias logits. */
void crossentropy_backward(float *dlogits, const float *logits, const float *rowmax, const float *rowsum,
                           const int *targets, int v0, int vl, int vocab, int BT, float dloss);

/* ---- gpt2.c: the model ---- */
typedef struct gpt2_config {
    int vocab;   /* real vocabulary (50257) */
    int max_seq; /* rows of wpe */
    int n_layer, n_head, channels;
} gpt2_config;

/* Fills *cfg for "tiny" or "gpt2-124m"; -1 for an unknown name. */
int gpt2_config_named(const char *name, gpt2_config *cfg);

enum { GPT2_PARAMS_PER_LAYER = 12 };
/* Per-layer parameter slots, in this order after wte and wpe. */
enum { P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPW, P_ATTPB, P_LN2W, P_LN2B, P_FCW, P_FCB, P_FCPW, P_FCPB };

typedef struct gpt2_model {
    gpt2_config cfg;
    int n_params;
    tprt_tensor **params; /* [wte, wpe, layer params..., lnf.w, lnf.b]; wte is also the LM head */
    int tp_world, tp_rank;
    int padded_vocab;    /* vocab padded to a multiple of tp_world once sharded */
    int grads_ready;     /* a backward filled the grads of the live params */
    int B, T;            /* activation sizes, set by gpt2_alloc_acts */
    float *acts, *dacts; /* one block each, allocated once */
    size_t n_acts;
    size_t *act_off; /* offset of each activation in the block (gpt2.c) */
    int *tokens, *targets;
    float loss;
} gpt2_model;

/* Builds the full (unsharded) model with values drawn from `seed`; the same
 * seed gives the same full tensors whatever the TP degree. NULL on failure. */
gpt2_model *gpt2_create(const gpt2_config *cfg, uint64_t seed);
void gpt2_free(gpt2_model *m);
/* Index of a parameter slot: layer l's slot s, or wte (0), wpe (1), lnf (n-2, n-1). */
static inline int gpt2_layer_param(int l, int s) { return 2 + l * GPT2_PARAMS_PER_LAYER + s; }
/* Allocates the activations for batches of B x T (after the policy). */
int gpt2_alloc_acts(gpt2_model *m, int B, int T);
/* Forward with targets: m->loss is the mean cross-entropy (same on every rank). */
int gpt2_forward(gpt2_model *m, const int *tokens, const int *targets, tprt_comm *comm);
void gpt2_zero_grad(gpt2_model *m);
int gpt2_backward(gpt2_model *m, tprt_comm *comm);
/* Nonzero when t is a live parameter of the model. */
int gpt2_is_live(const gpt2_model *m, const tprt_tensor *t);
/* Nonzero when t is live and the last backward filled its grad. */
int gpt2_has_grad(const gpt2_model *m, const tprt_tensor *t);
/* Checks that every replicated parameter's grad is bit-identical on all
 * ranks: 0 when identical, 1 when not, negative on a collective error. */
int gpt2_check_replicated_grads(const gpt2_model *m, tprt_comm *comm, char *why, size_t why_len);

/* Deterministic synthetic tokens for step `step`: B x (T+1) token ids from a
 * fixed pattern with noise, so that a model can learn them. */
void tprt_synthetic_batch(int *tokens, int *targets, int B, int T, int vocab, uint64_t seed, int step);

/* ---- adamw.c: mixed-precision AdamW (master -> working map) ---- */
typedef struct tprt_adamw_entry {
    tprt_tensor *master;  /* fp32 master copy: what the param groups hold */
    tprt_tensor *working; /* the model parameter it was made from */
    tprt_tensor *m, *v;   /* state keyed by the master */
    int decay;            /* weight decay applies (2-D weights) */
    int group;            /* param group: 0 decay, 1 no decay */
} tprt_adamw_entry;

typedef struct tprt_adamw {
    int n;
    tprt_adamw_entry *e;
    float lr, beta1, beta2, eps, weight_decay, clip;
    int t;           /* steps taken */
    float last_norm; /* global grad norm of the last step, before clipping */
} tprt_adamw;

/* Builds the optimizer over every current parameter of the model. */
tprt_adamw *tprt_adamw_create(gpt2_model *m, float lr, float weight_decay, float clip);
/* Frees masters, state and working tensors the model no longer holds. */
void tprt_adamw_free(tprt_adamw *o, const gpt2_model *m);
/* One step: global grad norm (all-reduced for sharded params, replicated
 * ones counted once), clipping, AdamW on the masters, masters -> working.
 * Masters whose working tensor got no grad are skipped. */
int tprt_adamw_step(tprt_adamw *o, const gpt2_model *m, tprt_comm *comm);

/* ---- tp_policy.c: the tensor-parallel policies ---- */
enum tprt_policy { TPRT_POLICY_FIXED = 0, TPRT_POLICY_BUGGY = 1 };
/* Shards the model for comm's world.  fixed: every tensor in place (identity
 * kept), masters and state too.  buggy: the embedding is replaced by a new
 * padded, sharded tensor, the optimizer keeps the old full one. */
int tp_policy_apply(gpt2_model *m, tprt_adamw *o, int policy, tprt_comm *comm);
/* The shard of a full tensor of kind `shard` for rank r of N: copies it
 * into a new buffer (vocab padding rows zero) and sets local[]. */
float *tp_shard_copy(const float *full, int ndim, const int64_t *shape, int shard, int padded_rows, int r, int N,
                     int64_t *local);
/* Local index on rank r of the global element gi, or -1 when r does not hold it. */
int64_t tp_local_index(int ndim, const int64_t *shape, int shard, int padded_rows, int r, int N, int64_t gi);

/* ---- audit.c: ownership facts through tpaudit.h ---- */
/* Whether the shim's TPAUDIT_AUDIT plan asks for step `step` (-1: exit); 0 without the shim. */
int tprt_audit_wanted(int step);
/* One audit point: the model's live params, the optimizer's groups, state,
 * masters and its master->working map. */
void tprt_audit(const gpt2_model *m, const tprt_adamw *o, const char *label, int step);
/* param_replaced event (old_key -> new_key) at name. */
void tprt_audit_replaced(const gpt2_model *m, const tprt_tensor *old_t, const tprt_tensor *new_t, const char *detail);
/* optimizer_created event for the optimizer. */
void tprt_audit_created(const tprt_adamw *o);
/* Where a tensor's storage lives when a device backend holds it: set by the
 * backend (kernels/cuda/gpt2_cuda.c); returns 0 and fills *s for a tensor
 * on the device, nonzero for a host (fp32) tensor.  NULL: all on the host. */
typedef struct tprt_storage {
    const char *device, *dtype;
    uint64_t ptr, bytes;
} tprt_storage;
extern int (*tprt_storage_hook)(const tprt_tensor *t, tprt_storage *s);
#endif
