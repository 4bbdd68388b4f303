/* Internal to src/nn: how a layer kind plugs into the model. A kind is a constructor that
 * appends a layer (shapes, parameter tensors with their init rules, saved state) plus an
 * ht_layer_ops table (FLOPs, workspace, forward, backward). The core (model.c) only walks
 * the chain, pairs a layer with a following activation it can fuse, and owns the buffers. */
#ifndef HT_NN_LAYER_H
#define HT_NN_LAYER_H

#include "nn/model.h"

typedef struct ht_layer_ops {
    const char *kind; /* "linear", "conv", ... */
    /* Forward/backward need ops that are not built: names them ("the conv ops"), else NULL. */
    const char *needs;
    double (*flops_forward)(const ht_layer *l);
    double (*flops_backward)(const ht_layer *l, int with_dx);
    size_t (*work_floats)(const ht_layer *l, int B); /* NULL: none */
    /* Layer i on B samples: from activation i to activation i+1. With act != HT_ACT_NONE
     * (only when fuses_act) layer i+1 is that activation and runs in the same pass:
     * activation i+1 keeps the pre-activation, activation i+2 receives act(...). */
    void (*forward)(ht_model *m, int i, int B, ht_act act);
    /* From the gradient of activation i+1 (i+2 when fused) to that of activation i (not
     * computed when i == 0); parameter gradients overwritten, or added to with accumulate.
     * scale multiplies the incoming gradient; it is always 1 unless `scales`. */
    void (*backward)(ht_model *m, int i, int B, ht_act act, float scale, int accumulate);
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
/* Finishes the chain: classes = width of a logits row, rows per sample; with a device,
 * refuses layers whose ops are missing (HT_EINPUT naming model type and ops) and allocates
 * every buffer. On error the model is freed. */
int ht_chain_finish(ht_model *m, ht_dev *d, int classes, int rows, int max_batch);

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

/* ---------------------------------------------------------------- helpers for kinds */

/* The view of parameter tensor j of layer l, and of its gradient. */
ht_view ht_layer_param(const ht_model *m, const ht_layer *l, int j);
ht_view ht_layer_grad(const ht_model *m, const ht_layer *l, int j);
/* The dropout seed of site `site` of layer i for the current step (ht_model_set_training). */
uint64_t ht_model_dropout_seed(const ht_model *m, int i, int site);

#endif
