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

/* T positions, C channels of a (T,C) layer */
static int seq_T(const ht_layer *l) { return l->out_shape.d[0]; }
static int seq_C(const ht_layer *l) { return l->out_shape.d[1]; }

static int dropout_on(const ht_model *m, const ht_layer *l) {
    return m->training && l->dropout > 0.0f;
}

/* The mask counter of local element 0 of a (B, l->out) dropout site: element k of local
 * sample s is element (row0 + s) * out + k of the global batch. */
static uint64_t dropout_first(const ht_model *m, const ht_layer *l) {
    return (uint64_t)m->dropout_row0 * (uint64_t)l->out;
}

/* ---------------------------------------------------------------- embedding */

static double embed_flops_fwd(const ht_layer *l) { return (double)l->out; }       /* wte+wpe */
static double embed_flops_bwd(const ht_layer *l, int dx) { return 2.0 * l->out; } /* two sums */
static size_t embed_work(const ht_layer *l, int B) {
    return l->dropout > 0.0f ? (size_t)B * (size_t)l->out : 0;
}

static void embed_fwd(ht_model *m, int i, int B, ht_act unused) {
    const ht_layer *l = &m->layers[i];
    int T = seq_T(l), C = seq_C(l), V = (int)l->t[0].shape[0];
    ht_view out = ht_model_act(m, i + 1);
    ht_embed_forward(m->dev, out, ht_model_act(m, i), ht_layer_param(m, l, 0),
                     ht_layer_param(m, l, 1), B, T, C, V);
    if (dropout_on(m, l))
        ht_dropout_forward_at(m->dev, out, out, (size_t)B * l->out, l->dropout,
                              ht_model_dropout_seed(m, i, 0), m->dropout_step,
                              dropout_first(m, l));
}

static void embed_bwd(ht_model *m, int i, int B, ht_act unused, float scale, int accumulate) {
    const ht_layer *l = &m->layers[i];
    int T = seq_T(l), C = seq_C(l), V = (int)l->t[0].shape[0];
    ht_view dout = ht_model_dact(m, i + 1);
    if (dropout_on(m, l)) {
        ht_dropout_backward_at(m->dev, ht_model_work(m), dout, (size_t)B * l->out, l->dropout,
                               ht_model_dropout_seed(m, i, 0), m->dropout_step,
                               dropout_first(m, l));
        dout = ht_model_work(m);
    }
    ht_embed_backward(m->dev, ht_layer_grad(m, l, 0), ht_layer_grad(m, l, 1), dout,
                      ht_model_act(m, i), B, T, C, V, accumulate || m->tied, accumulate);
}

const ht_layer_ops ht_ops_embed = {
    .kind = "embed",
    .flops_forward = embed_flops_fwd,
    .flops_backward = embed_flops_bwd,
    .work_floats = embed_work,
    .forward = embed_fwd,
    .backward = embed_bwd,
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

static void lnl_fwd(ht_model *m, int i, int B, ht_act unused) {
    const ht_layer *l = &m->layers[i];
    int C = seq_C(l), N = B * seq_T(l);
    ht_view s = ht_model_saved(m, i),
            rstd = ht_view_at(s.buf, s.off + (size_t)m->max_batch * seq_T(l));
    ht_layernorm_forward(m->dev, ht_model_act(m, i + 1), s, rstd, ht_model_act(m, i),
                         ht_layer_param(m, l, 0), ht_layer_param(m, l, 1), N, C);
}

static void lnl_bwd(ht_model *m, int i, int B, ht_act unused, float scale, int accumulate) {
    const ht_layer *l = &m->layers[i];
    int C = seq_C(l), N = B * seq_T(l);
    ht_view s = ht_model_saved(m, i),
            rstd = ht_view_at(s.buf, s.off + (size_t)m->max_batch * seq_T(l));
    ht_layernorm_backward(m->dev, i > 0 ? ht_model_dact(m, i) : ht_model_work(m),
                          ht_layer_grad(m, l, 0), ht_layer_grad(m, l, 1), ht_model_dact(m, i + 1),
                          ht_model_act(m, i), ht_layer_param(m, l, 0), s, rstd, N, C, 0,
                          accumulate);
}

const ht_layer_ops ht_ops_layernorm = {
    .kind = "layernorm",
    .flops_forward = lnl_flops_fwd,
    .flops_backward = lnl_flops_bwd,
    .work_floats = lnl_work,
    .forward = lnl_fwd,
    .backward = lnl_bwd,
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

/* Parameter tensors, in buffer order. */
enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FCP_W, FCP_B };

/* Saved state per sample, in this order (each array laid out for max_batch samples). */
enum { S_LN1, S_M1, S_R1, S_QKV, S_ATT, S_ATTY, S_RES2, S_LN2, S_M2, S_R2, S_FCH, S_FCHG, S_N };

static size_t blk_part(const ht_layer *l, int part) {
    size_t T = (size_t)seq_T(l), C = (size_t)seq_C(l), NH = (size_t)l->heads;
    switch (part) {
    case S_M1:
    case S_R1:
    case S_M2:
    case S_R2:
        return T;
    case S_QKV:
        return 3 * T * C;
    case S_ATT:
        return NH * T * T;
    case S_FCH:
    case S_FCHG:
        return 4 * T * C;
    default:
        return T * C;
    }
}

static ht_view blk_saved(const ht_model *m, int i, int part) {
    const ht_layer *l = &m->layers[i];
    size_t off = l->save_off;
    for (int p = 0; p < part; p++)
        off += (size_t)m->max_batch * blk_part(l, p);
    return ht_view_at(m->saved, off);
}

/* Workspace (B samples): [dres | dtmp | dfch | dln | dqkv | datty | attention scratch];
 * forward uses dtmp for the branch outputs before their residual add. */
enum { W_DRES, W_DTMP, W_DFCH, W_DLN, W_DQKV, W_DATTY, W_SCR, W_N };

static size_t blk_wpart(const ht_layer *l, int part, int B) {
    size_t N = (size_t)B * seq_T(l), C = (size_t)seq_C(l), T = (size_t)seq_T(l);
    switch (part) {
    case W_DFCH:
        return 4 * N * C;
    case W_DQKV:
        return 3 * N * C;
    case W_SCR:
        return (size_t)B * (size_t)l->heads * T * T;
    default:
        return N * C;
    }
}

static ht_view blk_work(const ht_model *m, const ht_layer *l, int part, int B) {
    size_t off = 0;
    for (int p = 0; p < part; p++)
        off += blk_wpart(l, p, B);
    return ht_view_at(m->work, off);
}

static size_t blk_work_floats(const ht_layer *l, int B) {
    size_t n = 0;
    for (int p = 0; p < W_N; p++)
        n += blk_wpart(l, p, B);
    return n;
}

static double attn_f(double T, double C, double NH) { return 4 * T * T * C + 3 * NH * T * T; }
static double attn_b(double T, double C, double NH) { return 8 * T * T * C + 5 * NH * T * T; }

static double blk_flops_fwd(const ht_layer *l) {
    double T = seq_T(l), C = seq_C(l), n = T * C;
    return ln_f(n) + lin_f(T, C, 3 * C) + attn_f(T, C, l->heads) + lin_f(T, C, C) + n /* add */ +
           ln_f(n) + lin_f(T, C, 4 * C) + 4 * n /* gelu */ + lin_f(T, 4 * C, C) + n /* add */;
}

static double blk_flops_bwd(const ht_layer *l, int with_dx) {
    double T = seq_T(l), C = seq_C(l), n = T * C;
    return lin_b(T, 4 * C, C, 1) + 4 * n /* gelu' */ + lin_b(T, C, 4 * C, 1) + ln_b(n, 1) +
           lin_b(T, C, C, 1) + attn_b(T, C, l->heads) + lin_b(T, C, 3 * C, 1) + ln_b(n, with_dx);
}

/* Adds the branch output `br` (dropped out at `site` when training) to x into out. */
static void blk_residual(ht_model *m, int i, ht_view out, ht_view x, ht_view br, size_t n,
                         int site) {
    const ht_layer *l = &m->layers[i];
    if (dropout_on(m, l))
        ht_dropout_forward_at(m->dev, br, br, n, l->dropout, ht_model_dropout_seed(m, i, site),
                              m->dropout_step, dropout_first(m, l));
    ht_residual_forward(m->dev, out, x, br, n);
}

static void blk_fwd(ht_model *m, int i, int B, ht_act unused) {
    const ht_layer *l = &m->layers[i];
    ht_dev *d = m->dev;
    int T = seq_T(l), C = seq_C(l), NH = l->heads, N = B * T;
    size_t n = (size_t)N * C;
    ht_view x = ht_model_act(m, i), tmp = blk_work(m, l, W_DTMP, B);
#define P(j) ht_layer_param(m, l, j)
#define S(j) blk_saved(m, i, j)
    ht_layernorm_forward(d, S(S_LN1), S(S_M1), S(S_R1), x, P(LN1_W), P(LN1_B), N, C);
    ht_linear_forward(d, S(S_QKV), S(S_LN1), P(QKV_W), P(QKV_B), N, C, 3 * C);
    ht_attention_forward(d, S(S_ATTY), S(S_ATT), S(S_QKV), B, T, C, NH);
    ht_linear_forward(d, tmp, S(S_ATTY), P(PROJ_W), P(PROJ_B), N, C, C);
    blk_residual(m, i, S(S_RES2), x, tmp, n, 0);
    ht_layernorm_forward(d, S(S_LN2), S(S_M2), S(S_R2), S(S_RES2), P(LN2_W), P(LN2_B), N, C);
    ht_linear_act_forward(d, S(S_FCH), S(S_FCHG), S(S_LN2), P(FC_W), P(FC_B), N, C, 4 * C,
                          HT_ACT_GELU);
    ht_linear_forward(d, tmp, S(S_FCHG), P(FCP_W), P(FCP_B), N, 4 * C, C);
    blk_residual(m, i, ht_model_act(m, i + 1), S(S_RES2), tmp, n, 1);
}

/* The gradient of a branch output: dout through the site's dropout (into tmp), or dout. */
static ht_view blk_branch_grad(ht_model *m, int i, ht_view dout, ht_view tmp, size_t n, int site) {
    const ht_layer *l = &m->layers[i];
    if (!dropout_on(m, l)) return dout;
    ht_dropout_backward_at(m->dev, tmp, dout, n, l->dropout, ht_model_dropout_seed(m, i, site),
                           m->dropout_step, dropout_first(m, l));
    return tmp;
}

static void blk_bwd(ht_model *m, int i, int B, ht_act unused, float scale, int acc) {
    const ht_layer *l = &m->layers[i];
    ht_dev *d = m->dev;
    int T = seq_T(l), C = seq_C(l), NH = l->heads, N = B * T;
    size_t n = (size_t)N * C;
    ht_view dout = ht_model_dact(m, i + 1), tmp = blk_work(m, l, W_DTMP, B);
    ht_view dfch = blk_work(m, l, W_DFCH, B), dln = blk_work(m, l, W_DLN, B);
    ht_view dqkv = blk_work(m, l, W_DQKV, B), datty = blk_work(m, l, W_DATTY, B);
    /* the residual stream's gradient: becomes dx (activation i) after both branches add in */
    ht_view dres = i > 0 ? ht_model_dact(m, i) : blk_work(m, l, W_DRES, B);
#define G(j) ht_layer_grad(m, l, j)
    /* MLP branch: out = res2 + fcproj(gelu(fc(ln2(res2)))) */
    ht_view dbr = blk_branch_grad(m, i, dout, tmp, n, 1);
    ht_linear_backward(d, dfch, G(FCP_W), G(FCP_B), dbr, S(S_FCHG), P(FCP_W), N, 4 * C, C, 1.0f,
                       acc);
    ht_linear_act_backward(d, dln, G(FC_W), G(FC_B), dfch, dfch, S(S_FCH), S(S_LN2), P(FC_W), N, C,
                           4 * C, HT_ACT_GELU, 1.0f, acc);
    ht_residual_backward(d, dres, ht_view_none(), dout, n, 0);
    ht_layernorm_backward(d, dres, G(LN2_W), G(LN2_B), dln, S(S_RES2), P(LN2_W), S(S_M2), S(S_R2),
                          N, C, 1, acc);
    /* attention branch: res2 = x + proj(attn(qkv(ln1(x)))) */
    dbr = blk_branch_grad(m, i, dres, tmp, n, 0);
    ht_linear_backward(d, datty, G(PROJ_W), G(PROJ_B), dbr, S(S_ATTY), P(PROJ_W), N, C, C, 1.0f,
                       acc);
    ht_attention_backward(d, dqkv, blk_work(m, l, W_SCR, B), datty, S(S_QKV), S(S_ATT), B, T, C,
                          NH);
    ht_linear_backward(d, dln, G(QKV_W), G(QKV_B), dqkv, S(S_LN1), P(QKV_W), N, C, 3 * C, 1.0f,
                       acc);
    ht_layernorm_backward(d, dres, G(LN1_W), G(LN1_B), dln, ht_model_act(m, i), P(LN1_W), S(S_M1),
                          S(S_R1), N, C, 1, acc);
#undef G
#undef P
#undef S
}

const ht_layer_ops ht_ops_block = {
    .kind = "block",
    .flops_forward = blk_flops_fwd,
    .flops_backward = blk_flops_bwd,
    .work_floats = blk_work_floats,
    .forward = blk_fwd,
    .backward = blk_bwd,
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
