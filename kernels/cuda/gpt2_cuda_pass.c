/* gpt2_cuda_pass.c - tprt's GPT-2 forward and backward on this rank's GPU,
 * in gpt2.c's layer order and tensor-parallel split: vocab-parallel lookup
 * and LM head, column-parallel c_attn / c_fc over this rank's heads and MLP
 * columns, row-parallel attn / mlp c_proj whose partial sums are
 * all-reduced (bf16, on the compute stream) before their replicated bias,
 * input grads of the column-parallel layers all-reduced, cross-entropy in
 * its three steps with the row max (MAX) and the sums (SUM) all-reduced in
 * fp32.  At TP=1 no collective runs and the calls are the TP=1 backend's.
 * The residual gradient lives in one buffer (its backward is the identity),
 * so the row-parallel products' bias grads (attn and mlp c_proj: the column
 * sums of that gradient) come from the layernorm backward that updates it
 * (ln_2's for attn.c_proj, and the next layer's ln_1, or ln_f, for
 * mlp.c_proj).  The column-parallel products' bias grads come from where
 * their grads are made (TPRT_BIAS_GRAD's default, fused): c_attn's from
 * the attention backward as it writes dqkv (c_fc's from the tile kernel).
 * At TP>1 (or with TPRT_WGRAD_STREAM=1) the backward's weight and bias
 * grads run on the weight-grad stream (wgrad_stream.c) beside the input
 * grads, their all-reduces and the attention of the layers below; the
 * compute stream waits for one by its ticket before it overwrites what that
 * weight grad reads, and for all of them before the token embedding's grad
 * (shared with the LM head's). */
#include "gpt2_cuda_impl.h"
#include "wgrad_stream.h"
#include <stdlib.h>

/* Those grads zeroed in one multi-tensor launch (a memset each should it fail to launch). */
void tprt_cuda_zero_grad(tprt_cuda_model *d) {
    if (cuda_zero_multi(d->zero_slots, d->n_zero))
        for (int i = 0; i < d->n_zero; i++)
            cudaMemsetAsync((float *)d->zero_slots[i].grad, 0, d->zero_slots[i].n * sizeof(float), 0);
    d->m->grads_ready = 0;
    cuda_matmul_grads_fresh(1); /* until the backward ends: its weight and bias grads are written, not added */
}

/* out = inp @ W^T (+ bias) of a row-parallel layer: partial sums all-reduced first at TP>1. */
static int row_parallel(tprt_cuda_model *d, tprt_bf16 *out, const tprt_bf16 *inp, const tprt_bf16 *w,
                        const tprt_bf16 *bias, int BT, int ICl, int OC, tprt_comm *comm, const char *what) {
    int N = d->m->tp_world;
    TRY(cuda_matmul_forward(out, inp, w, N == 1 ? bias : NULL, BT, ICl, OC, OC), what);
    if (N == 1) return 0;
    tprt_mark(d, K_COMM);
    COMM(tprt_allreduce_dev(comm, out, (size_t)BT * OC, TPRT_BF16, TPRT_SUM), what);
    tprt_mark(d, K_MATMUL);
    TRY(cuda_bias_add(out, bias, BT, OC, OC), what);
    return 0;
}
/* The input grad of a column-parallel layer (or the LM head) is a partial sum over the ranks. */
static int sum_input_grad(tprt_cuda_model *d, tprt_bf16 *dinp, size_t n, tprt_comm *comm, const char *what) {
    if (d->m->tp_world == 1) return 0;
    tprt_mark(d, K_COMM);
    COMM(tprt_allreduce_dev(comm, dinp, n, TPRT_BF16, TPRT_SUM), what);
    return 0;
}

/* The forward's device work (a phase gpt2_cuda_graph.c may replay): the staged batch's copies, the
 * layers, the loss and its copy back. */
static int forward_queue(tprt_cuda_model *d, tprt_comm *comm) {
    gpt2_model *m = d->m;
    tp_dims t = tp_dims_of(m);
    int B = d->B, T = d->T, BT = B * T, C = t.C, Cl = t.Cl, Hl = t.Hl, L = m->cfg.n_layer;
    int vl = (int)m->params[0]->local_shape[0], v0 = m->tp_rank * vl;
    size_t BTC = (size_t)BT * C;
    TRY(tprt_cuda_queue_batch(d), "tokens and targets");
    tprt_mark(d, K_ENCODER);
    TRY(cuda_encoder_forward(d->enc, d->tok, PW(0), v0, vl, BT, C), "encoder"); /* 0 off this rank's slice */
    if (t.N > 1) {
        tprt_mark(d, K_COMM);
        COMM(tprt_allreduce_dev(comm, d->enc, BTC, TPRT_BF16, TPRT_SUM), "embedding");
        tprt_mark(d, K_ENCODER);
    }
    TRY(cuda_pos_forward(d->enc, PW(1), B, T, C), "encoder");
    tprt_mark(d, K_LAYERNORM);
    if (L)
        TRY(cuda_layernorm_forward(d->la[0].ln1, d->la[0].ln1m, d->la[0].ln1r, d->enc, LW(0, P_LN1W), LW(0, P_LN1B), BT,
                                   C),
            "ln_1");
    else
        TRY(cuda_layernorm_forward(d->lnf, d->lnfm, d->lnfr, d->enc, PW(m->n_params - 2), PW(m->n_params - 1), BT, C),
            "ln_f");
    tprt_bf16 *res = d->enc;
    for (int l = 0; l < L; l++) {
        layer_acts *a = &d->la[l];
        /* a->ln1 is already there: the layer before fused its last residual add into this layernorm */
        tprt_mark(d, K_MATMUL);
        TRY(cuda_matmul_forward(a->qkv, a->ln1, LW(l, P_QKVW), LW(l, P_QKVB), BT, C, 3 * Cl, 3 * Cl), "c_attn");
        tprt_mark(d, K_ATTENTION);
        if (d->attn_fused)
            TRY(cuda_attention_fused_forward(a->atty, a->lse, a->qkv, B, T, Cl, t.NHl), "attention");
        else
            TRY(cuda_attention_forward(a->atty, a->att, a->qkv, d->attn_scratch, B, T, Cl, t.NHl), "attention");
        tprt_mark(d, K_MATMUL);
        PASS(row_parallel(d, a->attp, a->atty, LW(l, P_ATTPW), LW(l, P_ATTPB), BT, Cl, C, comm, "attn.c_proj"));
        tprt_mark(d, K_LAYERNORM);
        TRY(cuda_residual_layernorm_forward(a->res2, a->ln2, a->ln2m, a->ln2r, res, a->attp, LW(l, P_LN2W),
                                            LW(l, P_LN2B), BT, C),
            "residual + ln_2");
        tprt_mark(d, K_MATMUL); /* c_fc with its bias and the GELU in the epilogue: fch keeps the GELU's input */
        TRY(cuda_matmul_gelu_forward(a->fcg, a->fch, a->ln2, LW(l, P_FCW), LW(l, P_FCB), BT, C, Hl), "c_fc + gelu");
        PASS(row_parallel(d, a->fcp, a->fcg, LW(l, P_FCPW), LW(l, P_FCPB), BT, Hl, C, comm, "mlp.c_proj"));
        tprt_mark(d, K_LAYERNORM); /* the residual add, fused into the next layernorm (ln_1 of l+1, or ln_f) */
        if (l + 1 < L) {
            layer_acts *n = &d->la[l + 1];
            TRY(cuda_residual_layernorm_forward(a->res3, n->ln1, n->ln1m, n->ln1r, a->res2, a->fcp, LW(l + 1, P_LN1W),
                                                LW(l + 1, P_LN1B), BT, C),
                "residual + ln_1");
        } else {
            TRY(cuda_residual_layernorm_forward(a->res3, d->lnf, d->lnfm, d->lnfr, a->res2, a->fcp, PW(m->n_params - 2),
                                                PW(m->n_params - 1), BT, C),
                "residual + ln_f");
        }
        res = a->res3;
    }
    tprt_mark(d, K_MATMUL);
    /* this vocab slice, over its zero rows up to ldv (gpt2_cuda.c): those logits are 0 and never read */
    TRY(cuda_matmul_forward(d->logits, d->lnf, PW(0), NULL, BT, C, d->ldv, d->ldv), "lm_head");
    tprt_mark(d, K_CROSSENT);
    if (t.N == 1) { /* one pass; the logits become their grads, so the backward skips this layer */
        TRY(cuda_crossentropy_fused(d->ce_scratch, d->logits, d->tgt, vl, m->cfg.vocab, BT, d->ldv, 1.0f),
            "cross-entropy");
        TRY(cuda_ce_mean(d->loss, d->ce_scratch, BT), "cross-entropy");
    } else {
        TRY(cuda_ce_rowmax(d->rowmax, d->logits, v0, vl, m->cfg.vocab, BT, d->ldv), "cross-entropy");
        COMM(tprt_allreduce_dev(comm, d->rowmax, (size_t)BT, TPRT_F32, TPRT_MAX), "cross-entropy row max");
        TRY(cuda_ce_rowsum(d->ce_scratch, d->logits, d->rowmax, d->tgt, v0, vl, m->cfg.vocab, BT, d->ldv),
            "cross-entropy");
        COMM(tprt_allreduce_dev(comm, d->ce_scratch, 2 * (size_t)BT, TPRT_F32, TPRT_SUM), "cross-entropy sums");
        TRY(cuda_ce_loss(d->loss, d->rowsum, d->ce_scratch, d->rowmax, BT), "cross-entropy");
    }
    TRY(tprt_cuda_queue_loss(d), "loss");
    return 0;
}

int tprt_cuda_forward(tprt_cuda_model *d, const int *tokens, const int *targets, tprt_comm *comm) {
    tprt_mark(d, K_OTHER);
    TRY(tprt_cuda_stage_batch(d, tokens, targets), "tokens and targets");
    PASS(tprt_cuda_phase(d, TPRT_PHASE_FORWARD, forward_queue, comm));
    d->logits_are_grads = d->m->tp_world == 1; /* the one-pass cross-entropy left the logits' grads there */
    tprt_mark(d, K_OTHER);
    COMM(tprt_dev_sync(comm), "forward"); /* watched: a blocking copy would hang on a dead peer */
    TRY(tprt_cuda_forward_queued(d), "loss");
    TRY(tprt_cuda_take_norm(d), "grad norm"); /* the last step's, while this forward runs (TP=1) */
    tprt_mark(d, K_OTHER);
    tprt_marks_flush(d);
    return 0;
}

/* The backward's device work (a phase gpt2_cuda_graph.c may replay). */
static int backward_pass(tprt_cuda_model *d, tprt_comm *comm) {
    gpt2_model *m = d->m;
    tp_dims t = tp_dims_of(m);
    int B = d->B, T = d->T, BT = B * T, C = t.C, Cl = t.Cl, Hl = t.Hl, L = m->cfg.n_layer;
    int vl = (int)m->params[0]->local_shape[0], v0 = m->tp_rank * vl;
    size_t BTC = (size_t)BT * C, bf = sizeof(tprt_bf16);
    if (!d->logits_are_grads) {
        tprt_mark(d, K_CROSSENT);
        TRY(cuda_crossentropy_backward(d->logits, d->logits, d->rowmax, d->rowsum, d->tgt, v0, vl, m->cfg.vocab, BT,
                                       d->ldv, 1.0f),
            "cross-entropy backward");
    }
    tprt_mark(d, K_OTHER);
    cudaMemsetAsync(d->dres, 0, BTC * bf, 0); /* the layernorm backwards add into it */
    /* Input grads are written, not added (cuda_matmul_backward_set), so their buffers need no zeroing. */
    tprt_mark(d, K_MATMUL);
    /* over the zero rows too: their logits hold 0 (never a grad), so they add 0 to dln and to the padding grads */
    TRY(cuda_matmul_backward_set(d->dln, NULL, PG(0), NULL, d->logits, d->lnf, PW(0), BT, C, d->ldv, d->ldv),
        "lm_head backward");
    PASS(sum_input_grad(d, d->dln, BTC, comm, "lm_head backward"));
    tprt_mark(d, K_LAYERNORM);
    tprt_bf16 *res_last = L ? d->la[L - 1].res3 : d->enc;
    TRY(cuda_layernorm_backward(d->dres, PG(m->n_params - 2), PG(m->n_params - 1), L ? LG(L - 1, P_FCPB) : NULL, d->dln,
                                res_last, PW(m->n_params - 2), d->lnfm, d->lnfr, BT, C),
        "ln_f backward");
    /* tickets of the weight grads still reading dfch (c_fc's) and dqkv (c_attn's) of the layer above */
    long t_fc = 0, t_qkv = 0;
    const int fused_bias = cuda_bias_grad_mode(-1) == TPRT_BIAS_GRAD_FUSED;
    for (int l = L - 1; l >= 0; l--) {
        layer_acts *a = &d->la[l];
        tprt_bf16 *res = l ? d->la[l - 1].res3 : d->enc;
        /* d->dres holds d(res3) = d(fcp); the ln_2 path adds into it: d(res2) */
        tprt_mark(d, K_MATMUL); /* the GELU's backward in this product's epilogue: dfch = (dres W) * gelu'(fch) */
        TRY(cuda_wgrad_wait(t_fc), "weight-grad stream");
        TRY(cuda_matmul_backward_set(d->dfch, a->fch, LG(l, P_FCPW), NULL, d->dres, a->fcg, LW(l, P_FCPW), BT, Hl, C,
                                     C),
            "mlp.c_proj + gelu backward");
        long t_fcp = cuda_wgrad_last(); /* reads dres */
        TRY(cuda_matmul_backward_set(d->dln, NULL, LG(l, P_FCW), LG(l, P_FCB), d->dfch, a->ln2, LW(l, P_FCW), BT, C, Hl,
                                     Hl),
            "c_fc backward");
        t_fc = cuda_wgrad_last();
        PASS(sum_input_grad(d, d->dln, BTC, comm, "c_fc backward"));
        tprt_mark(d, K_LAYERNORM);
        TRY(cuda_wgrad_wait(t_fcp), "weight-grad stream");
        TRY(cuda_layernorm_backward(d->dres, LG(l, P_LN2W), LG(l, P_LN2B), LG(l, P_ATTPB), d->dln, a->res2,
                                    LW(l, P_LN2W), a->ln2m, a->ln2r, BT, C),
            "ln_2 backward");
        tprt_mark(d, K_MATMUL);
        TRY(cuda_matmul_backward_set(d->datty, NULL, LG(l, P_ATTPW), NULL, d->dres, a->atty, LW(l, P_ATTPW), BT, Cl, C,
                                     C),
            "attn.c_proj backward");
        long t_attp = cuda_wgrad_last(); /* reads dres */
        tprt_mark(d, K_OTHER);
        TRY(cuda_wgrad_wait(t_qkv), "weight-grad stream");
        if (!d->attn_fused) cudaMemsetAsync(d->dqkv, 0, (size_t)BT * 3 * Cl * bf, 0); /* the gemm path adds into it */
        tprt_mark(d, K_ATTENTION);
        float *qkvb = fused_bias && d->attn_fused ? LG(l, P_QKVB) : NULL; /* c_attn's bias grad, as dqkv is made */
        if (d->attn_fused)                                                /* writes dqkv whole */
            TRY(cuda_attention_fused_backward(d->dqkv, d->datty, a->qkv, a->atty, a->lse, d->attn_scratch, B, T, Cl,
                                              t.NHl, 0, qkvb),
                "attention backward");
        else
            TRY(cuda_attention_backward(d->dqkv, d->datty, a->qkv, a->att, d->attn_scratch, B, T, Cl, t.NHl),
                "attention backward");
        tprt_mark(d, K_MATMUL);
        TRY(cuda_matmul_backward_set(d->dln, NULL, LG(l, P_QKVW), qkvb ? NULL : LG(l, P_QKVB), d->dqkv, a->ln1,
                                     LW(l, P_QKVW), BT, C, 3 * Cl, 3 * Cl),
            "c_attn backward");
        t_qkv = cuda_wgrad_last();
        PASS(sum_input_grad(d, d->dln, BTC, comm, "c_attn backward"));
        tprt_mark(d, K_LAYERNORM);
        TRY(cuda_wgrad_wait(t_attp), "weight-grad stream");
        TRY(cuda_layernorm_backward(d->dres, LG(l, P_LN1W), LG(l, P_LN1B), l ? LG(l - 1, P_FCPB) : NULL, d->dln, res,
                                    LW(l, P_LN1W), a->ln1m, a->ln1r, BT, C),
            "ln_1 backward");
    }
    tprt_mark(d, K_ENCODER);
    TRY(cuda_wgrad_join(), "weight-grad stream"); /* the LM head's weight grad adds into the token embedding's */
    TRY(cuda_pos_backward(PG(1), d->dres, B, T, C) || cuda_encoder_backward(PG(0), d->dres, d->tok, v0, vl, BT, C),
        "encoder backward");
    tprt_mark(d, K_OTHER);
    return 0;
}

int tprt_cuda_backward(tprt_cuda_model *d, tprt_comm *comm) {
    /* by default at TP>1, where the input grads' all-reduces run beside the weight grads; at TP=1 on an
     * H200 it measured 0.99-1.01x of one stream (kernels/docs/TPRT.md) */
    cuda_wgrad_begin(d->m->tp_world > 1);
    int rc = tprt_cuda_phase(d, TPRT_PHASE_BACKWARD, backward_pass, comm);
    if (cuda_wgrad_join() && !rc) rc = tprt_cuda_fail("weight-grad stream"); /* also after a failed pass */
    d->logits_are_grads = 0;
    cuda_matmul_grads_fresh(0);
    if (!rc) d->m->grads_ready = 1;
    return rc;
}
