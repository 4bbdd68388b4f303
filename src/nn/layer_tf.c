/* Layer kinds of a GPT (llm.c's layout, nn/ops_tf.h ops): token + position embedding,
 * LayerNorm, and the pre-LN transformer block as ONE layer, x + attn(ln1(x)) then
 * + mlp(ln2(x)), its sub-activations in its saved-state region, so the chain stays linear
 * (embed -> block x L -> LayerNorm -> linear head). Dropout (residual branches, embedding)
 * draws counter-based masks from the model's (seed, step): nothing stored, exact on resume. */
#include <math.h>
#include <stdio.h>

#include "core/err.h"
#include "nn/layer.h"
#include "nn/ops_tf.h"

/* FLOP conventions for the sub-ops (per sample; a multiply-add counts 2):
 * linear over r rows: r (2 fin fout + fout) forward, as much again for dW + db, plus
 * 2 r fin fout for dx; LayerNorm over n elements: 8n forward (mean, variance, normalise,
 * affine), 5n backward for dw/db plus 8n for dx; attention: 2 T^2 C for q.k and as much
 * for att.v, 3 NH T^2 for the softmax; backward twice the GEMM-like work and 5 NH T^2. */
static double lin_f(double r, double fin, double fout) { return r * (2 * fin * fout + fout); }
static double lin_b(double r, double fin, double fout, int dx) {
    return r * (2 * fin * fout + fout + (dx ? 2 * fin * fout : 0));
}
static double ln_f(double n) { return 8 * n; }
static double ln_b(double n, int dx) { return 5 * n + (dx ? 8 * n : 0); }

/* ---------------------------------------------------------------- embedding */

static double embed_flops_fwd(const ht_layer *l) { return (double)l->out; }       /* wte+wpe */
static double embed_flops_bwd(const ht_layer *l, int dx) { return 2.0 * l->out; } /* two sums */
static size_t embed_work(const ht_layer *l, int B) {
    return l->dropout > 0.0f ? (size_t)B * (size_t)l->out : 0;
}

const ht_layer_ops ht_ops_embed = {
    .kind = "embed",
    .flops_forward = embed_flops_fwd,
    .flops_backward = embed_flops_bwd,
    .work_floats = embed_work,
};

int ht_layer_add_embed(ht_model *m, const char *name, int vocab, int C, float dropout) {
    ht_shape in = ht_chain_shape(m);
    if (m->nlayers || !m->input_tokens || in.ndim != 1)
        return ht_error(HT_EINPUT, "%s: an embedding must be the first layer, on (T) tokens", name);
    ht_layer *l = ht_chain_add(m, HT_LAYER_EMBED, &ht_ops_embed, name);
    int T = in.d[0];
    l->out_shape = (ht_shape){2, {T, C, 0}};
    l->out = T * C;
    l->dropout = dropout;
    int64_t wte[2] = {vocab, C}, wpe[2] = {T, C};
    ht_layer_tensor(m, l, "wte", 2, wte, HT_INIT_NORMAL, 0.02f);
    ht_layer_tensor(m, l, "wpe", 2, wpe, HT_INIT_NORMAL, 0.02f);
    return HT_OK;
}

/* ---------------------------------------------------------------- LayerNorm */

/* Saved: mean (B*T), then rstd (B*T), laid out for max_batch so B may vary. */
static double lnl_flops_fwd(const ht_layer *l) { return ln_f(l->out); }
static double lnl_flops_bwd(const ht_layer *l, int dx) { return ln_b(l->out, dx); }
static size_t lnl_work(const ht_layer *l, int B) { return (size_t)B * (size_t)l->in; }

const ht_layer_ops ht_ops_layernorm = {
    .kind = "layernorm",
    .flops_forward = lnl_flops_fwd,
    .flops_backward = lnl_flops_bwd,
    .work_floats = lnl_work,
};

int ht_layer_add_layernorm(ht_model *m, const char *name) {
    ht_shape in = ht_chain_shape(m);
    if (in.ndim != 2) return ht_error(HT_EINPUT, "%s: LayerNorm needs a (T,C) input", name);
    ht_layer *l = ht_chain_add(m, HT_LAYER_LAYERNORM, &ht_ops_layernorm, name);
    l->save = 2 * (size_t)in.d[0];
    int64_t cs[1] = {in.d[1]};
    ht_layer_tensor(m, l, "weight", 1, cs, HT_INIT_CONST, 1.0f);
    ht_layer_tensor(m, l, "bias", 1, cs, HT_INIT_CONST, 0.0f);
    return HT_OK;
}

/* ---------------------------------------------------------------- transformer block */

static size_t blk_work_floats(const ht_layer *l, int B) {
    size_t n = 0;
    for (int p = 0; p < W_N; p++)
        n += blk_wpart(l, p, B);
    return n;
}

static double attn_f(double T, double C, double NH) { return 4 * T * T * C + 3 * NH * T * T; }
static double attn_b(double T, double C, double NH) { return 8 * T * T * C + 5 * NH * T * T; }
/* fused (cl/flash.cl): the backward recomputes q.k in both passes and d.v in both, 3 sums of
 * rows: 14 T^2 C, and exp twice */
static double flash_b(double T, double C, double NH) { return 14 * T * T * C + 8 * NH * T * T; }

static double blk_flops_fwd(const ht_layer *l) {
    double T = seq_T(l), C = seq_C(l), n = T * C;
    return ln_f(n) + lin_f(T, C, 3 * C) + attn_f(T, C, l->heads) + lin_f(T, C, C) + n /* add */ +
           ln_f(n) + lin_f(T, C, 4 * C) + 4 * n /* gelu */ + lin_f(T, 4 * C, C) + n /* add */;
}

static double blk_flops_bwd(const ht_layer *l, int with_dx) {
    double T = seq_T(l), C = seq_C(l), n = T * C;
    double att = (l->flash ? flash_b : attn_b)(T, C, l->heads);
    return lin_b(T, 4 * C, C, 1) + 4 * n /* gelu' */ + lin_b(T, C, 4 * C, 1) + ln_b(n, 1) +
           lin_b(T, C, C, 1) + att + lin_b(T, C, 3 * C, 1) + ln_b(n, with_dx);
}

/* The block's weight gradients: its four projections' dW GEMMs and bias sums, the two
 * LayerNorms' parameter sums (the rest of blk_flops_bwd is input gradients) */
static double blk_flops_w(const ht_layer *l) {
    double T = seq_T(l), C = seq_C(l), n = T * C;
    return lin_b(T, 4 * C, C, 0) + lin_b(T, C, 4 * C, 0) + lin_b(T, C, C, 0) +
           lin_b(T, C, 3 * C, 0) + 2 * ln_b(n, 0);
}

/* What its B leaves for W (ht_model_keep_bw): the internal output gradients S_GATT.. */
static size_t blk_save_bw(const ht_layer *l) {
    size_t n = 0;
    for (int p = S_N; p < S_GN; p++)
        n += blk_part(l, p);
    return n;
}

const ht_layer_ops ht_ops_block = {
    .kind = "block",
    .flops_forward = blk_flops_fwd,
    .flops_backward = blk_flops_bwd,
    .flops_weights = blk_flops_w,
    .work_floats = blk_work_floats,
    .save_bw = blk_save_bw,
};

int ht_layer_add_block(ht_model *m, const char *name, int heads, int n_layer, float dropout) {
    ht_shape in = ht_chain_shape(m);
    if (in.ndim != 2)
        return ht_error(HT_EINPUT, "%s: a transformer block needs a (T,C) input", name);
    int C = in.d[1];
    if (heads < 1 || C % heads)
        return ht_error(HT_EINPUT, "%s: %d heads do not divide d_model %d", name, heads, C);
    ht_layer *l = ht_chain_add(m, HT_LAYER_BLOCK, &ht_ops_block, name);
    l->heads = heads;
    l->flash = ht_attention_fused(in.d[0]);
    l->dropout = dropout;
    for (int p = 0; p < S_N; p++)
        l->save += blk_part(l, p);
    /* GPT-2: weights N(0, 0.02), the two projections into the residual stream scaled by
     * 1/sqrt(2 n_layer) (they add up over 2 n_layer branches), biases 0, LayerNorm 1/0 */
    float std = 0.02f, rstd = 0.02f / sqrtf(2.0f * (float)n_layer);
    int64_t c1[1] = {C}, c3[1] = {3 * C}, c4[1] = {4 * C};
    int64_t wqkv[2] = {3 * C, C}, wproj[2] = {C, C}, wfc[2] = {4 * C, C}, wfcp[2] = {C, 4 * C};
    ht_layer_tensor(m, l, "ln1.weight", 1, c1, HT_INIT_CONST, 1.0f);
    ht_layer_tensor(m, l, "ln1.bias", 1, c1, HT_INIT_CONST, 0.0f);
    ht_layer_tensor(m, l, "attn.qkv.weight", 2, wqkv, HT_INIT_NORMAL, std);
    ht_layer_tensor(m, l, "attn.qkv.bias", 1, c3, HT_INIT_CONST, 0.0f);
    ht_layer_tensor(m, l, "attn.proj.weight", 2, wproj, HT_INIT_NORMAL, rstd);
    ht_layer_tensor(m, l, "attn.proj.bias", 1, c1, HT_INIT_CONST, 0.0f);
    ht_layer_tensor(m, l, "ln2.weight", 1, c1, HT_INIT_CONST, 1.0f);
    ht_layer_tensor(m, l, "ln2.bias", 1, c1, HT_INIT_CONST, 0.0f);
    ht_layer_tensor(m, l, "mlp.fc.weight", 2, wfc, HT_INIT_NORMAL, std);
    ht_layer_tensor(m, l, "mlp.fc.bias", 1, c4, HT_INIT_CONST, 0.0f);
    ht_layer_tensor(m, l, "mlp.proj.weight", 2, wfcp, HT_INIT_NORMAL, rstd);
    ht_layer_tensor(m, l, "mlp.proj.bias", 1, c1, HT_INIT_CONST, 0.0f);
    return HT_OK;
}
