/* Forward and backward of the GPT kinds (see layer_tf.c for their shapes, FLOPs and the
 * block's saved-state and workspace layout): embedding, LayerNorm, the transformer block. */
#include "nn/layer_run.h"
#include "nn/ops_tf.h"

static int dropout_on(const ht_model *m, const ht_layer *l) {
    return m->training && l->dropout > 0.0f;
}

/* The mask counter of local element 0 of a (B, l->out) dropout site: element k of local
 * sample s is element (row0 + s) * out + k of the global batch. */
static uint64_t dropout_first(const ht_model *m, const ht_layer *l) {
    return (uint64_t)m->dropout_row0 * (uint64_t)l->out;
}

static void embed_fwd(ht_model *m, int i, int B, ht_act unused) {
    const ht_layer *l = &m->layers[i];
    int T = seq_T(l), C = seq_C(l), V = (int)l->t[0].shape[0];
    ht_view out = ht_model_act(m, i + 1);
    ht_embed_forward(m->dev, out, ht_model_act(m, i), ht_layer_param(m, l, 0),
                     ht_layer_param(m, l, 1), B, T, C, V);
    if (dropout_on(m, l))
        ht_dropout_forward_at(m->dev, out, out, (size_t)B * l->out, l->dropout,
                              ht_model_dropout_seed(m, i, 0), m->dropout_step, dropout_first(m, l));
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

/* Zero-bubble halves: the input gradient (none for the first layer), then dW and db */
static void lnl_bwd_in(ht_model *m, int i, int B, ht_act unused, float scale, int accumulate) {
    const ht_layer *l = &m->layers[i];
    int C = seq_C(l), N = B * seq_T(l);
    ht_view s = ht_model_saved(m, i),
            rstd = ht_view_at(s.buf, s.off + (size_t)m->max_batch * seq_T(l));
    if (i > 0)
        ht_layernorm_backward_input(m->dev, ht_model_dact(m, i), ht_model_dact(m, i + 1),
                                    ht_model_act(m, i), ht_layer_param(m, l, 0), s, rstd, N, C, 0);
}

static void lnl_bwd_w(ht_model *m, int i, int B, ht_act unused, float scale, int accumulate) {
    const ht_layer *l = &m->layers[i];
    int C = seq_C(l), N = B * seq_T(l);
    ht_view s = ht_model_saved(m, i),
            rstd = ht_view_at(s.buf, s.off + (size_t)m->max_batch * seq_T(l));
    ht_layernorm_backward_weights(m->dev, ht_layer_grad(m, l, 0), ht_layer_grad(m, l, 1),
                                  ht_model_dact(m, i + 1), ht_model_act(m, i), s, rstd, N, C,
                                  accumulate);
}

/* The embedding's input is token ids: its whole backward is W, B has nothing to do */
static void embed_bwd_in(ht_model *m, int i, int B, ht_act a, float scale, int accumulate) {}

static ht_view blk_saved(const ht_model *m, int i, int part) {
    const ht_layer *l = &m->layers[i];
    size_t off = l->save_off;
    for (int p = 0; p < part; p++)
        off += (size_t)m->max_batch * blk_part(l, p);
    return ht_view_at(m->saved, off);
}

static ht_view blk_work(const ht_model *m, const ht_layer *l, int part, int B) {
    size_t off = 0;
    for (int p = 0; p < part; p++)
        off += blk_wpart(l, p, B);
    return ht_view_at(m->work, off);
}

/* Dropout (when training) of the branch output `br` at `site`, in place. */
static void blk_dropout(ht_model *m, int i, ht_view br, size_t n, int site) {
    const ht_layer *l = &m->layers[i];
    if (dropout_on(m, l))
        ht_dropout_forward_at(m->dev, br, br, n, l->dropout, ht_model_dropout_seed(m, i, site),
                              m->dropout_step, dropout_first(m, l));
}

/* Adds the branch output `br` (dropped out at `site` when training) to x into out. */
static void blk_residual(ht_model *m, int i, ht_view out, ht_view x, ht_view br, size_t n,
                         int site) {
    blk_dropout(m, i, br, n, site);
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
    if (l->flash)
        ht_attention_flash_forward(d, S(S_ATTY), S(S_ATT), S(S_QKV), B, T, C, NH);
    else
        ht_attention_forward(d, S(S_ATTY), S(S_ATT), S(S_QKV), B, T, C, NH);
    ht_linear_forward(d, tmp, S(S_ATTY), P(PROJ_W), P(PROJ_B), N, C, C);
    blk_dropout(m, i, tmp, n, 0);
    ht_residual_layernorm_forward(d, S(S_RES2), S(S_LN2), S(S_M2), S(S_R2), x, tmp, P(LN2_W),
                                  P(LN2_B), N, C);
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
    /* dres = dout + ln2's input gradient in one pass (the residual's copy fused in) */
    ht_residual_layernorm_backward_input(d, dres, dout, dln, S(S_RES2), P(LN2_W), S(S_M2),
                                         S(S_R2), N, C);
    ht_layernorm_backward_weights(d, G(LN2_W), G(LN2_B), dln, S(S_RES2), S(S_M2), S(S_R2), N, C,
                                  acc);
    /* attention branch: res2 = x + proj(attn(qkv(ln1(x)))) */
    dbr = blk_branch_grad(m, i, dres, tmp, n, 0);
    ht_linear_backward(d, datty, G(PROJ_W), G(PROJ_B), dbr, S(S_ATTY), P(PROJ_W), N, C, C, 1.0f,
                       acc);
    if (l->flash)
        ht_attention_flash_backward(d, dqkv, blk_work(m, l, W_SCR, B), datty, S(S_ATTY), S(S_QKV),
                                    S(S_ATT), B, T, C, NH);
    else
        ht_attention_backward(d, dqkv, blk_work(m, l, W_SCR, B), datty, S(S_QKV), S(S_ATT), B, T,
                              C, NH);
    ht_linear_backward(d, dln, G(QKV_W), G(QKV_B), dqkv, S(S_LN1), P(QKV_W), N, C, 3 * C, 1.0f,
                       acc);
    ht_layernorm_backward(d, dres, G(LN1_W), G(LN1_B), dln, ht_model_act(m, i), P(LN1_W), S(S_M1),
                          S(S_R1), N, C, 1, acc);
}

/* Zero-bubble halves (issue 27; only with m->keep_bw): B is blk_bwd less the weight
 * gradients (fc's bias rides on its activation pass, as in the fused linear's B), with each
 * projection's and LayerNorm's output gradient left in the slot's saved state (S_G*) instead
 * of the workspace; W computes the dW/db and the LayerNorms' gamma/beta from them and the
 * saved inputs. The same kernels on the same operands: B then W = blk_bwd bit for bit. */

static void blk_bwd_in(ht_model *m, int i, int B, ht_act unused, float scale, int acc) {
    const ht_layer *l = &m->layers[i];
    ht_dev *d = m->dev;
    int T = seq_T(l), C = seq_C(l), NH = l->heads, N = B * T;
    size_t n = (size_t)N * C;
    ht_view dout = ht_model_dact(m, i + 1), tmp = blk_work(m, l, W_DTMP, B);
    ht_view datty = blk_work(m, l, W_DATTY, B), datt = S(S_GATT);
    ht_view dres = i > 0 ? ht_model_dact(m, i) : blk_work(m, l, W_DRES, B);
    ht_view dbr = blk_branch_grad(m, i, dout, tmp, n, 1);
    ht_linear_backward_input(d, S(S_GFCH), dbr, P(FCP_W), N, 4 * C, C, 1.0f);
    ht_linear_act_backward_input(d, S(S_GLN2), G(FC_B), S(S_GFCH), S(S_GFCH), S(S_FCH), P(FC_W),
                                 N, C, 4 * C, HT_ACT_GELU, 1.0f, acc);
    ht_residual_layernorm_backward_input(d, dres, dout, S(S_GLN2), S(S_RES2), P(LN2_W), S(S_M2),
                                         S(S_R2), N, C);
    /* the attention branch's gradient is kept: dres goes on to take ln1's */
    if (dropout_on(m, l)) blk_branch_grad(m, i, dres, datt, n, 0);
    else ht_residual_backward(d, datt, ht_view_none(), dres, n, 0);
    ht_linear_backward_input(d, datty, datt, P(PROJ_W), N, C, C, 1.0f);
    if (l->flash)
        ht_attention_flash_backward(d, S(S_GQKV), blk_work(m, l, W_SCR, B), datty, S(S_ATTY),
                                    S(S_QKV), S(S_ATT), B, T, C, NH);
    else
        ht_attention_backward(d, S(S_GQKV), blk_work(m, l, W_SCR, B), datty, S(S_QKV), S(S_ATT),
                              B, T, C, NH);
    ht_linear_backward_input(d, S(S_GLN1), S(S_GQKV), P(QKV_W), N, C, 3 * C, 1.0f);
    ht_layernorm_backward_input(d, dres, S(S_GLN1), ht_model_act(m, i), P(LN1_W), S(S_M1),
                                S(S_R1), N, C, 1);
}

static void blk_bwd_w(ht_model *m, int i, int B, ht_act unused, float scale, int acc) {
    const ht_layer *l = &m->layers[i];
    ht_dev *d = m->dev;
    int T = seq_T(l), C = seq_C(l), N = B * T;
    size_t n = (size_t)N * C;
    /* the MLP branch's gradient is dout (still in the slot), dropped out again */
    ht_view dbr = blk_branch_grad(m, i, ht_model_dact(m, i + 1), blk_work(m, l, W_DTMP, B), n, 1);
    ht_linear_backward_weights(d, G(FCP_W), G(FCP_B), dbr, S(S_FCHG), N, 4 * C, C, 1.0f, acc);
    ht_linear_backward_weights(d, G(FC_W), ht_view_none(), S(S_GFCH), S(S_LN2), N, C, 4 * C, 1.0f,
                               acc);
    ht_layernorm_backward_weights(d, G(LN2_W), G(LN2_B), S(S_GLN2), S(S_RES2), S(S_M2), S(S_R2),
                                  N, C, acc);
    ht_linear_backward_weights(d, G(PROJ_W), G(PROJ_B), S(S_GATT), S(S_ATTY), N, C, C, 1.0f, acc);
    ht_linear_backward_weights(d, G(QKV_W), G(QKV_B), S(S_GQKV), S(S_LN1), N, C, 3 * C, 1.0f,
                               acc);
    ht_layernorm_backward_weights(d, G(LN1_W), G(LN1_B), S(S_GLN1), ht_model_act(m, i), S(S_M1),
                                  S(S_R1), N, C, acc);
}
#undef G
#undef P
#undef S

const ht_layer_run ht_run_embed = {embed_fwd, embed_bwd, embed_bwd_in, embed_bwd};
const ht_layer_run ht_run_layernorm = {lnl_fwd, lnl_bwd, lnl_bwd_in, lnl_bwd_w};
const ht_layer_run ht_run_block = {blk_fwd, blk_bwd, blk_bwd_in, blk_bwd_w};
