/* A model is a chain of layers over flat device buffers: parameters in one buffer, their
 * gradients in another of the same layout (layers hold offsets), activations and their
 * gradients likewise. Any contiguous range of layers can run forward/backward on its own
 * (a pipeline stage); the whole chain ends in softmax cross-entropy. Only MLPs for now. */
#ifndef HT_NN_MODEL_H
#define HT_NN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "nn/ops.h"
#include "ocl/ocl.h"

typedef enum { HT_LAYER_LINEAR, HT_LAYER_RELU, HT_LAYER_GELU } ht_layer_kind;

/* Linear: W (out,in) at woff, b (out) at boff, nparams = out*in + out (floats, in the
 * model's flat buffers). Activations: in == out, no parameters. */
typedef struct ht_layer {
    ht_layer_kind kind;
    char name[32]; /* "fc1", "relu1", ... */
    int in, out;
    size_t woff, boff, nparams;
} ht_layer;

/* A named parameter tensor for checkpoints: "fc1.weight" (out,in), "fc1.bias" (out). */
typedef struct ht_param_tensor {
    char name[64];
    size_t off; /* floats into params/grads */
    int ndim;
    int64_t shape[2];
} ht_param_tensor;

typedef struct ht_model {
    ht_dev *dev;
    int nlayers;
    ht_layer *layers;
    int in_features, classes, max_batch;
    size_t nparams;
    ht_buf *params, *grads; /* (nparams) each, same layout */
    /* Activation i (i = 0..nlayers) is the input of layer i; activation nlayers holds the
     * logits. It is (max_batch, width[i]) at act_off[i] floats in `acts`; its gradient is at
     * the same offset in `dacts` (dacts at nlayers: softmax - onehot, unscaled). */
    int *width;
    size_t *act_off;
    size_t act_floats;
    ht_buf *acts, *dacts;
    ht_buf *labels;  /* (max_batch) int32 */
    ht_buf *losses;  /* (max_batch) float per-sample loss */
    ht_buf *correct; /* (max_batch) int32 1/0, -1 for a label out of range */
    float *host_loss;
    int32_t *host_correct;
} ht_model;

/* ---------------------------------------------------------------- layers */

/* Forward FLOPs per sample (a multiply-add counts 2, an elementwise op 1). */
double ht_layer_flops_forward(const ht_layer *l);
/* Backward FLOPs per sample; with_dx = 0 for a first layer (no input gradient). */
double ht_layer_flops_backward(const ht_layer *l, int with_dx);
/* Bytes per sample of the layer's output, kept for backward (its gradient takes as much). */
size_t ht_layer_act_bytes(const ht_layer *l);

/* ---------------------------------------------------------------- model */

/* Builds in -> hidden[0] -> ... -> classes with `activation` ("relu" | "gelu") after every
 * hidden linear layer; allocates params, grads (zeroed) and buffers for max_batch samples.
 * Bad sizes or activation: HT_EINPUT with a message (nothing allocated). */
int ht_model_mlp(ht_model *m, ht_dev *d, int in_features, const int *hidden, int nhidden,
                 int classes, const char *activation, int max_batch);
void ht_model_free(ht_model *m);

/* PyTorch nn.Linear's default: W, b ~ U(-1/sqrt(in), 1/sqrt(in)); parameter k of the flat
 * buffer draws counter k of a stream derived from seed, so it is deterministic for the
 * seed and independent of anything else. Uploaded once. */
void ht_model_init_params(ht_model *m, uint64_t seed);

/* Uploads x (B, in_features) and labels (B). 1 <= B <= max_batch. A label outside
 * [0, classes) is bad input: exits 2 naming the sample (the kernels would only flag it). */
void ht_model_set_batch(ht_model *m, const float *x, const int32_t *y, int B);

/* All layers forward, then the loss (per-sample loss and correct flag on the device);
 * with_grad also writes dlogits for backward. Enqueues only: no host synchronisation. */
void ht_model_forward(ht_model *m, int B, int with_grad);
/* grads = d(grad_scale * sum of losses)/dparams, overwriting grads. Needs a forward with
 * with_grad = 1 on the same batch. Layer 0's input gradient is not computed. */
void ht_model_backward(ht_model *m, int B, float grad_scale);
/* Reads the per-sample values back and sums them in double in sample order. A flagged
 * label makes loss_sum NaN and does not count as correct. */
void ht_model_loss(ht_model *m, int B, double *loss_sum, int *correct);

/* Layers [lo, hi) forward from activation lo to activation hi (no loss). */
void ht_model_forward_range(ht_model *m, int lo, int hi, int B);
/* The loss on activation nlayers (the logits); with_grad writes its gradient. */
void ht_model_loss_forward(ht_model *m, int B, int with_grad);
/* Layers hi-1 down to lo: from the gradient of activation hi to that of activation lo
 * (not computed when lo == 0). The gradient arriving at activation hi is multiplied by
 * grad_scale (free: it rides on GEMM alpha). accumulate adds into grads (micro-batches). */
void ht_model_backward_range(ht_model *m, int lo, int hi, int B, float grad_scale, int accumulate);
/* Activation i (B, width[i]) and its gradient as views. */
ht_view ht_model_act(const ht_model *m, int i);
ht_view ht_model_dact(const ht_model *m, int i);

/* Fills out[0..max) with the parameter tensors in buffer order; returns how many there
 * are (may exceed max: then only max were written). */
int ht_model_param_tensors(const ht_model *m, ht_param_tensor *out, int max);
/* Forward + backward FLOPs per sample (layer 0 without its input gradient). */
double ht_model_flops_per_sample(const ht_model *m);

#endif
