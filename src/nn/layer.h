/* Internal to src/nn: how a layer kind plugs into the model. A kind is a constructor that
 * appends a layer (shapes, parameter tensors with their init rules, saved state) plus an
 * ht_layer_ops table (FLOPs, workspace, fusing): the pure description (layer_*.c), which
 * the planner and simulator use without a device. Its forward and backward on a device are
 * in nn/layer_run.h (layer_*_run.c). The core (model.c) only walks the chain, pairs a layer
 * with a following activation it can fuse; model_run.c owns the buffers. */
#ifndef HT_NN_LAYER_H
#define HT_NN_LAYER_H

#include "nn/model.h"
#include "nn/ops_conv.h"

typedef struct ht_layer_ops {
    const char *kind; /* "linear", "conv", ... */
    double (*flops_forward)(const ht_layer *l);
    double (*flops_backward)(const ht_layer *l, int with_dx);
    /* The weight-gradient part of the backward (zero-bubble's W); NULL: flops_backward
     * without the input gradient, which is that part for a layer of one weight op */
    double (*flops_weights)(const ht_layer *l);
    size_t (*work_floats)(const ht_layer *l, int B); /* NULL: none */
    /* Saved floats per sample its B/W split keeps besides save (ht_model_keep_bw); NULL:
     * none needed (its split, if any, works without) */
    size_t (*save_bw)(const ht_layer *l);
    int fuses_act; /* can run a following relu/gelu in its own pass */
    int scales;    /* folds backward's scale into its own work (GEMM alpha) */
    int aliases;   /* output is the input reinterpreted (flatten): same activation region */
} ht_layer_ops;

extern const ht_layer_ops ht_ops_linear, ht_ops_relu, ht_ops_gelu, ht_ops_flatten;
extern const ht_layer_ops ht_ops_conv, ht_ops_maxpool, ht_ops_avgpool;
extern const ht_layer_ops ht_ops_embed, ht_ops_layernorm, ht_ops_block;

/* ---------------------------------------------------------------- building (model.c) */

/* Starts an empty chain on per-sample input `in` (tokens: int32 positions). */
void ht_chain_begin(ht_model *m, ht_shape in, int input_tokens);
/* Appends a layer of `kind` reading the current output shape; the constructor fills out
 * the rest. Returns it (valid until the next append). */
ht_layer *ht_chain_add(ht_model *m, ht_layer_kind kind, const ht_layer_ops *ops, const char *name);
/* Adds parameter tensor `name` (relative to the layer) of the given shape and init rule at
 * the end of the flat buffer; returns its offset. */
size_t ht_layer_tensor(ht_model *m, ht_layer *l, const char *name, int ndim, const int64_t *shape,
                       ht_init_kind init, float a);
/* The shape the chain produces so far (the next layer's input). */
ht_shape ht_chain_shape(const ht_model *m);
/* Finishes the chain: classes = width of a logits row, rows per sample; refuses a batch
 * whose tensors the kernels cannot index (ht_model_check_batch) and lays out the
 * activation, saved-state and workspace regions for max_batch (no buffers: ht_model_attach).
 * On error the model is freed. */
int ht_chain_finish(ht_model *m, int classes, int rows, int max_batch);

/* Elements of a shape; a (F) shape of n. */
int ht_shape_count(const ht_shape *s);
ht_shape ht_shape1(int n);

/* ---------------------------------------------------------------- kinds (layer_*.c) */

/* Each returns HT_OK or HT_EINPUT with a message prefixed by `what` (e.g. "model.layers[3]
 * \"conv 5 32\""). */
/* A linear layer without bias whose weight is an earlier (out, in) tensor w (GPT-2's head on
 * wte): it owns no parameters. */
int ht_layer_add_linear_tied(ht_model *m, const char *name, const ht_param_tensor *w,
                             const char *what);
int ht_layer_add_linear(ht_model *m, const char *name, int out, int gpt_init, float std,
                        const char *what);
int ht_layer_add_act(ht_model *m, const char *name, ht_act act, const char *what);
int ht_layer_add_flatten(ht_model *m, const char *name, const char *what);
int ht_layer_add_conv(ht_model *m, const char *name, int out_ch, int k, int stride, int pad,
                      const char *what);
int ht_layer_add_maxpool(ht_model *m, const char *name, int k, int stride, const char *what);
/* Average pooling without padding (PyTorch's nn.AvgPool2d defaults: divides by k*k). */
int ht_layer_add_avgpool(ht_model *m, const char *name, int k, int stride, const char *what);
int ht_layer_add_embed(ht_model *m, const char *name, int vocab, int C, float dropout);
int ht_layer_add_layernorm(ht_model *m, const char *name);
int ht_layer_add_block(ht_model *m, const char *name, int heads, int n_layer, float dropout);

/* ---------------------------------------------------------------- shapes of the kinds */

/* Features per row in and out, and rows per sample (1 for an MLP, T for a GPT head). */
static inline int lin_fin(const ht_layer *l) { return l->in_shape.d[l->in_shape.ndim - 1]; }
static inline int lin_fout(const ht_layer *l) { return l->out_shape.d[l->out_shape.ndim - 1]; }
static inline int lin_rows(const ht_layer *l) { return l->in / lin_fin(l); }
static inline ht_act act_of(const ht_layer *l) {
    return l->kind == HT_LAYER_RELU ? HT_ACT_RELU : HT_ACT_GELU;
}
/* The (C,H,W) layer's op shapes at batch B. */
static inline ht_conv2d_shape conv_shape(const ht_layer *l, int B) {
    return (ht_conv2d_shape){.B = B,
                             .cin = l->in_shape.d[0],
                             .h = l->in_shape.d[1],
                             .w = l->in_shape.d[2],
                             .cout = l->out_shape.d[0],
                             .k = l->k,
                             .stride = l->stride,
                             .pad = l->pad};
}
static inline ht_pool2d_shape pool_shape(const ht_layer *l, int B) {
    return (ht_pool2d_shape){.B = B,
                             .c = l->in_shape.d[0],
                             .h = l->in_shape.d[1],
                             .w = l->in_shape.d[2],
                             .k = l->k,
                             .stride = l->stride,
                             .pad = 0};
}
/* T positions, C channels of a (T,C) layer */
static inline int seq_T(const ht_layer *l) { return l->out_shape.d[0]; }
static inline int seq_C(const ht_layer *l) { return l->out_shape.d[1]; }

/* The transformer block's layout (layer_tf.c, layer_tf_run.c). */
/* Parameter tensors, in buffer order. */
enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FCP_W, FCP_B };

/* Saved state per sample, in this order (each array laid out for max_batch samples). */
enum { S_LN1, S_M1, S_R1, S_QKV, S_ATT, S_ATTY, S_RES2, S_LN2, S_M2, S_R2, S_FCH, S_FCHG, S_N };
/* With the model's keep_bw (zero-bubble split, ht_model_keep_bw), after those: the internal
 * output gradients that B leaves for W (issue 27): the attention branch's (after dropout),
 * fc's pre-activation, ln2's output, qkv's, ln1's output. The MLP branch's is dout itself
 * (W redraws its dropout). */
enum { S_GATT = S_N, S_GFCH, S_GLN2, S_GQKV, S_GLN1, S_GN };

/* Workspace (B samples): [dres | dtmp | dfch | dln | dqkv | datty | attention scratch];
 * forward uses dtmp for the branch outputs before their residual add. */
enum { W_DRES, W_DTMP, W_DFCH, W_DLN, W_DQKV, W_DATTY, W_SCR, W_N };

/* Floats per sample of saved part `part`, and per B samples of workspace part `part`. */
static inline size_t blk_part(const ht_layer *l, int part) {
    size_t T = (size_t)seq_T(l), C = (size_t)seq_C(l), NH = (size_t)l->heads;
    switch (part) {
    case S_M1:
    case S_R1:
    case S_M2:
    case S_R2:
        return T;
    case S_QKV:
        return 3 * T * C;
    case S_ATT: /* probabilities (B,NH,T,T), or each row's log-sum-exp with fused attention */
        return l->flash ? NH * T : NH * T * T;
    case S_FCH:
    case S_FCHG:
    case S_GFCH:
        return 4 * T * C;
    case S_GQKV:
        return 3 * T * C;
    default:
        return T * C;
    }
}
static inline size_t blk_wpart(const ht_layer *l, int part, int B) {
    size_t N = (size_t)B * seq_T(l), C = (size_t)seq_C(l), T = (size_t)seq_T(l);
    switch (part) {
    case W_DFCH:
        return 4 * N * C;
    case W_DQKV:
        return 3 * N * C;
    case W_SCR:
        return (size_t)B * (size_t)l->heads * T * (l->flash ? 1 : T);
    default:
        return N * C;
    }
}

#endif
