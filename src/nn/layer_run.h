/* Internal to src/nn: a layer kind's forward and backward on a device, beside its pure
 * description (nn/layer.h). model_run.c finds a layer's by its kind (ht_layer_run_of). */
#ifndef HT_NN_LAYER_RUN_H
#define HT_NN_LAYER_RUN_H

#include "nn/layer.h"
#include "nn/ops.h"

typedef struct ht_layer_run {
    /* Layer i on B samples: from activation i to activation i+1. With act != HT_ACT_NONE
     * (only when the kind fuses_act) layer i+1 is that activation and runs in the same pass:
     * activation i+1 keeps the pre-activation, activation i+2 receives act(...). */
    void (*forward)(ht_model *m, int i, int B, ht_act act);
    /* From the gradient of activation i+1 (i+2 when fused) to that of activation i (not
     * computed when i == 0); parameter gradients overwritten, or added to with accumulate.
     * scale multiplies the incoming gradient; it is always 1 unless the kind `scales`. */
    void (*backward)(ht_model *m, int i, int B, ht_act act, float scale, int accumulate);
    /* Zero-bubble halves (issue 27), both or neither: B, the gradient of activation i and
     * whatever is cheaper there, then later W, the remaining parameter gradients, from the
     * saved input and the output gradient that B leaves in place. NULL: the kind has no split
     * yet (pools): its whole backward runs in B, nothing in W. A kind whose split needs
     * more saved state (ops->save_bw: the transformer block) splits only in a model that keeps
     * it (ht_model_keep_bw). */
    void (*backward_input)(ht_model *m, int i, int B, ht_act act, float scale, int accumulate);
    void (*backward_weights)(ht_model *m, int i, int B, ht_act act, float scale, int accumulate);
} ht_layer_run;

extern const ht_layer_run ht_run_linear, ht_run_act, ht_run_flatten;
extern const ht_layer_run ht_run_conv, ht_run_maxpool, ht_run_avgpool;
extern const ht_layer_run ht_run_embed, ht_run_layernorm, ht_run_block;

/* The forward/backward of layer l's kind. */
const ht_layer_run *ht_layer_run_of(const ht_layer *l);

/* The view of parameter tensor j of layer l, and of its gradient. */
ht_view ht_layer_param(const ht_model *m, const ht_layer *l, int j);
ht_view ht_layer_grad(const ht_model *m, const ht_layer *l, int j);
/* The dropout seed of site `site` of layer i for the current step (ht_model_set_training). */
uint64_t ht_model_dropout_seed(const ht_model *m, int i, int site);

#endif
