/* A model is a chain of layers over flat device buffers: parameters in one buffer, their
 * gradients in another of the same layout (layers hold offsets), activations and their
 * gradients per layer boundary, a saved-state region per layer, one shared workspace.
 * Any contiguous range of layers can run forward/backward on its own (a pipeline stage);
 * the chain ends in softmax cross-entropy over B x rows_per_sample rows. Layer kinds (MLP,
 * CNN, GPT) plug in through ht_layer_ops (src/nn/layer.h); builders are in model_build.c. */
#ifndef HT_NN_MODEL_H
#define HT_NN_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nn/ops.h"
#include "ocl/ocl.h"

typedef enum {
    HT_LAYER_LINEAR, /* y = x W^T + b over the last dimension (per row: per position) */
    HT_LAYER_RELU,
    HT_LAYER_GELU,
    HT_LAYER_CONV,    /* 2-D convolution, NCHW, square kernel, with bias */
    HT_LAYER_MAXPOOL, /* 2-D max pooling, square window */
    HT_LAYER_AVGPOOL, /* 2-D average pooling, square window, no padding */
    HT_LAYER_FLATTEN, /* (C,H,W) -> (C*H*W): a no-op on the data */
    HT_LAYER_EMBED,   /* int32 tokens (T) -> wte[token] + wpe[position] (T,C) */
    HT_LAYER_BLOCK,   /* pre-LN transformer block: x + attn(ln1(x)), then + mlp(ln2(x)) */
    HT_LAYER_LAYERNORM,
} ht_layer_kind;

/* Per-sample shape, outermost first: (F), (T,C) or (C,H,W). */
typedef struct ht_shape {
    int ndim;
    int d[3];
} ht_shape;

/* How a parameter tensor is initialised: element k of the flat buffer draws counter k of
 * the init stream, so a value depends on the seed and its offset alone. */
typedef enum {
    HT_INIT_UNIFORM, /* U(-a, a) */
    HT_INIT_NORMAL,  /* N(0, a^2) */
    HT_INIT_CONST,   /* a */
} ht_init_kind;

#define HT_TENSOR_MAX_DIM 4

/* A named parameter tensor for checkpoints: "fc1.weight" (out,in), "fc1.bias" (out),
 * "conv1.weight" (out,in,k,k), "h0.attn.qkv.weight" (3C,C). Unused shape entries are 0. */
typedef struct ht_param_tensor {
    char name[64];
    size_t off; /* floats into params/grads */
    int ndim;
    int64_t shape[HT_TENSOR_MAX_DIM];
    ht_init_kind init;
    float init_a;
    int tied; /* the storage of an earlier tensor (a GPT head tied to wte): not counted in
               * nparams, not initialised, not saved */
} ht_param_tensor;

#define HT_LAYER_MAX_TENSORS 12

/* Chunks (layer ranges) a model can be attached as: a pipeline rank of an interleaved,
 * Chimera or zero-bubble V schedule runs several stages (ht_model_attach_chunks). */
#define HT_MODEL_MAX_CHUNKS 16
/* The windows such chunks can need: one per chunk, and one for a tied tensor (wte) a chunk's
 * tied layer (the head) reads from outside them. */
#define HT_MODEL_MAX_WINDOWS (HT_MODEL_MAX_CHUNKS + 1)

/* A resident parameter window: floats [base, base + n) of the layout, held at float `at` of
 * params and grads (windows ascend and do not touch; at is the sum of the earlier n). */
typedef struct ht_pwin {
    size_t base, n, at;
} ht_pwin;

struct ht_layer_ops;

/* One layer of the chain. in/out are floats per sample (int32 tokens for an embedding's
 * input); the shapes say how they are laid out. Parameters are the tensors t[0..ntensors),
 * contiguous from woff (nparams floats); linear and conv keep their bias offset in boff.
 * save is floats per sample the layer keeps for backward besides its output (in the
 * model's saved region at save_off). Kind-specific sizes: k, stride, pad (conv, pool),
 * heads and dropout (block). */
typedef struct ht_layer {
    ht_layer_kind kind;
    const struct ht_layer_ops *ops;
    char name[32]; /* "fc1", "relu1", "conv2", "h0", ... */
    int in, out;
    ht_shape in_shape, out_shape;
    size_t woff, boff, nparams;
    int ntensors;
    ht_param_tensor t[HT_LAYER_MAX_TENSORS]; /* names relative to the layer ("weight") */
    size_t save, save_off;
    int k, stride, pad, heads;
    int flash; /* block: fused attention (no T^2 state), fixed at creation */
    float dropout;
} ht_layer;

typedef struct ht_model {
    ht_dev *dev;    /* NULL: a description only (shapes, layout, FLOPs), no buffers */
    char type[8];   /* "mlp" | "cnn" | "gpt" */
    char desc[256]; /* architecture signature, e.g. "gpt L4 C128 H4 T64 V256" */
    int nlayers, cap;
    ht_layer *layers;
    ht_shape in_shape; /* per sample; (T) tokens when input_tokens */
    int input_tokens;  /* 1: activation 0 holds int32 tokens (bitwise, in the float buffer) */
    int in_features;   /* floats (or tokens) per sample in activation 0 */
    int classes;       /* width of a logits row (vocabulary for a language model) */
    int rows;          /* loss rows per sample: T for a language model, 1 for a classifier */
    int max_batch;
    /* zero-bubble split (ht_model_keep_bw): a layer kind with internal gradients (the GPT
     * block) keeps them in its saved state from B to W, so its W can be deferred */
    int keep_bw;
    int tied; /* a GPT whose head weight is wte: the head's backward writes wte's gradient
               * first, the embedding's adds to it (so only whole-model backward is valid) */
    size_t nparams;
    ht_buf *params, *grads; /* params: the resident windows of the layout, packed; grads: the
                             * same unless ht_model_grad_window set [gbase, gbase + gres) */
    /* the resident windows of the parameter layout (train/pipe_local.c): the whole model
     * (0, nparams) unless a pipeline rank keeps only its stages' parameters; tensor offsets
     * (t[].off, woff) stay global, ht_layer_param/grad map them (ht_model_span). A tied layer
     * (a GPT's head reading wte) without the tensor it shares among its stage's parameters
     * holds that tensor's range as one more window: a copy (the last stage's wte). pbase is
     * the first window's base, pres the floats of all windows (of params, of grads) */
    size_t pbase, pres;
    /* grads holds floats [gbase, gbase + gres) of the layout: the parameter window unless
     * ht_model_grad_window set another before attaching (ZeRO-2's per-slice gradients);
     * ht_layer_grad subtracts gbase. gwin: set by ht_model_grad_window. */
    size_t gbase, gres;
    int gwin;
    int nwin;
    ht_pwin win[HT_MODEL_MAX_WINDOWS];
    /* the layer ranges the activation buffers hold (ht_model_attach_stage / _chunks): each
     * chunk in ht_model_stage_floats's layout, the buffers as large as the largest */
    int nchunk;
    int chunk_lo[HT_MODEL_MAX_CHUNKS], chunk_hi[HT_MODEL_MAX_CHUNKS];
    /* Activation i (i = 0..nlayers) is the input of layer i; activation nlayers holds the
     * logits. It is (max_batch, width[i]) at act_off[i] floats in `acts`; its gradient is at
     * the same offset in `dacts` (dacts at nlayers: softmax - onehot, unscaled). */
    int *width;
    size_t *act_off;
    size_t act_floats;
    ht_buf *acts, *dacts;
    size_t save_floats; /* max_batch * sum of the layers' save */
    ht_buf *saved;      /* per-layer saved state, layer i at layers[i].save_off */
    size_t work_floats; /* max over layers of the workspace a layer needs for max_batch */
    ht_buf *work;       /* shared scratch, valid only inside one layer's forward/backward */
    ht_buf *labels;     /* (max_batch * rows) int32 */
    ht_buf *losses;     /* (max_batch * rows) float per-row loss */
    ht_buf *correct;    /* (max_batch * rows) int32 1/0, -1 for a label out of range */
    float *host_loss;
    int32_t *host_correct;
    /* the trainer's NaN watch: a training loss forward (with_grad) marks watch (int32) with
     * watch_step when a loss is not finite (ht_softmax_xent_watch); NULL: no watch */
    ht_buf *watch;
    int watch_step;
    /* per-layer timing inside training steps (hettrain --trace-layers): each layer's forward
     * or backward (a fused pair as one: n = 2 layers from `layer`) and the loss run on an idle
     * queue, finished, and hook(ctx, layer, n, kind, t0, t1) is called with their ht_now()
     * times (kind 0 forward, 1 backward, 2 the loss, layer = nlayers); NULL: none. It
     * synchronises once per layer. */
    void (*layer_hook)(void *ctx, int layer, int n, int kind, double t0, double t1);
    void *layer_hook_ctx;
    int training;          /* dropout on (ht_model_set_training) */
    uint64_t dropout_seed; /* dropout masks are a pure function of (seed, step, site, i) */
    uint64_t dropout_step;
    int64_t dropout_row0;  /* global index of local sample 0 (ht_model_set_row_offset) */
    void (*release)(struct ht_model *m); /* frees the device buffers (ht_model_attach) */
} ht_model;

/* ---------------------------------------------------------------- layers */

/* Forward FLOPs per sample (a multiply-add counts 2, an elementwise op 1). */
double ht_layer_flops_forward(const ht_layer *l);
/* Backward FLOPs per sample; with_dx = 0 for a first layer (no input gradient). */
double ht_layer_flops_backward(const ht_layer *l, int with_dx);
/* The part of the backward FLOPs (with_dx = 1) that computes weight gradients (dW GEMMs,
 * bias and LayerNorm parameter sums): what a zero-bubble W pass costs; the rest is B. */
double ht_layer_flops_weights(const ht_layer *l);
/* Bytes per sample kept for backward: the layer's output plus its saved state (the
 * output's gradient takes as much again during backward). */
size_t ht_layer_act_bytes(const ht_layer *l);
/* Workspace floats the layer needs for a batch of B (shared by all layers). */
size_t ht_layer_work_floats(const ht_layer *l, int B);
/* 1 when l's output is its input reinterpreted (flatten): it shares its input's region and
 * keeps nothing of its own. */
int ht_layer_aliases(const ht_layer *l);
/* The cut rule: 1 when layer i is a relu/gelu that runs inside layer i-1's pass (forward and
 * backward fused). No pipeline stage, gradient bucket or recompute range may separate them. */
int ht_model_fused_with_below(const ht_model *m, int i);
/* "1x28x28", "64x128", "784". */
void ht_shape_str(const ht_shape *s, char *buf, size_t n);

/* ---------------------------------------------------------------- building */

/* Builds in -> hidden[0] -> ... -> classes with `activation` ("relu" | "gelu") after every
 * hidden linear layer; allocates params, grads (zeroed) and buffers for max_batch samples.
 * Bad sizes or activation: HT_EINPUT with a message (nothing allocated). d == NULL builds
 * the description only (every builder): enough for planning, not for running. Each builder
 * is its pure *_desc (model_build.c: no device, linked by the planner and the simulator)
 * followed by ht_model_attach (model_run.c). */
int ht_model_mlp(ht_model *m, ht_dev *d, int in_features, const int *hidden, int nhidden,
                 int classes, const char *activation, int max_batch);
int ht_model_mlp_desc(ht_model *m, int in_features, const int *hidden, int nhidden, int classes,
                      const char *activation, int max_batch);

/* A CNN from layer specs ("conv 5 32 pad=2", "relu", "maxpool 2", "avgpool 2", "flatten",
 * "linear 10"; grammar in nn/layer_spec.h) on (C,H,W) inputs; the last layer must give
 * `classes` outputs. Shape errors name the element: "model.layers[3] \"maxpool 2\": ...". */
int ht_model_cnn(ht_model *m, ht_dev *d, ht_shape in, const char *const *specs, int nspecs,
                 int classes, int max_batch);
int ht_model_cnn_desc(ht_model *m, ht_shape in, const char *const *specs, int nspecs, int classes,
                      int max_batch);

/* A GPT-2 style model: embed (wte (vocab,C), wpe (T,C)) -> n_layer pre-LN blocks of n_head
 * heads, MLP 4C with GELU -> final LayerNorm -> linear head (vocab) with a bias. Input: int32
 * tokens (B,T); loss over B*T rows (next-token targets). tie: the head is GPT-2's, wte itself
 * without a bias (one tensor, its gradient the sum of both uses). */
int ht_model_gpt(ht_model *m, ht_dev *d, int vocab, int T, int n_layer, int d_model, int n_head,
                 float dropout, int max_batch, int tie);
int ht_model_gpt_desc(ht_model *m, int vocab, int T, int n_layer, int d_model, int n_head,
                      float dropout, int max_batch, int tie);

/* Gives a description its buffers on d (params, grads zeroed, activations, ... for its
 * max_batch); ht_model_free frees them. */
int ht_model_attach(ht_model *m, ht_dev *d);
/* The same for a pipeline stage, layers [lo, hi), whose parameters are the floats [pbase,
 * pbase + pres) of the layout (the others are never allocated) and, when a tied layer among
 * them reads a tensor outside that range, the tensor's range as a window before or after it
 * (ht_model_stage_windows): params and grads hold those floats, the activation, saved-state and workspace buffers layers [lo, hi) at max_batch in
 * ht_model_stage_floats's layout (act_floats, save_floats and work_floats become its sizes;
 * act_off stays the whole model's: the pipeline rebases it). pres = 0, lo = hi = 0: nothing
 * yet (a pipeline rank whose stage the plan decides later: ht_model_restage). */
int ht_model_attach_stage(ht_model *m, ht_dev *d, size_t pbase, size_t pres, int lo, int hi);
/* Before attaching (a description): the gradient buffer will hold only floats [gbase,
 * gbase + gres) of the layout (data parallel ZeRO-2: a rank keeps its slice's gradients;
 * backward of layers whose gradients lie outside runs through ht_model_backward_into). */
void ht_model_grad_window(ht_model *m, size_t gbase, size_t gres);
/* An attached model's parameter, gradient (zeroed), activation, saved-state and workspace
 * buffers replaced by those of another window and stage (the parameters' values are gone). */
void ht_model_restage(ht_model *m, size_t pbase, size_t pres, int lo, int hi);
/* The windows of a stage with parameter window [pbase, pbase + pres) and layers [lo, hi):
 * that window (none when pres is 0) and the ranges of the tensors its tied layers read from
 * outside it, merged and packed as ht_model_chunk_windows; their number, the floats in
 * *floats. Pure. */
int ht_model_stage_windows(const ht_model *m, size_t pbase, size_t pres, int lo, int hi,
                           ht_pwin *win, size_t *floats);
/* Layout floats [off, off + n), src, into host (pres floats, laid out as params): the parts
 * in m's windows; the rest is not this model's. 0 when none of it is held. */
int ht_model_put(const ht_model *m, size_t off, size_t n, const float *src, float *host);
/* 1 when m holds any of layout floats [off, off + n) (in one of its windows). */
int ht_model_holds(const ht_model *m, size_t off, size_t n);
/* Floats of a stage's activations (its input at 0, its layers' outputs, then for lo > 0 the
 * inputs a batch upload writes), saved state and workspace for layers [lo, hi) at B samples;
 * [0, nlayers) gives the whole model's act_floats, save_floats and work_floats. Pure. */
void ht_model_stage_floats(const ht_model *m, int lo, int hi, int B, size_t *act, size_t *save,
                           size_t *work);

/* Several stages (chunks) at once, layers [lo[k], hi[k]) for k < n (n <= HT_MODEL_MAX_CHUNKS):
 * the parameters of their layers as resident windows (overlapping or adjacent ranges merged;
 * a Chimera rank's two replicas of one stage are one window), activation, saved-state and
 * workspace buffers as large as the largest chunk's ht_model_stage_floats (the executor runs
 * one chunk at a time in them). HT_EINPUT for too many chunks or a bad range. */
int ht_model_attach_chunks(ht_model *m, ht_dev *d, int n, const int *lo, const int *hi);
/* ht_model_restage for chunks (parameters and gradients zeroed, their values gone). */
int ht_model_restage_chunks(ht_model *m, int n, const int *lo, const int *hi);
/* The windows of chunks [lo[k], hi[k]) (their layers' parameters and the tensors their tied
 * layers share, merged, packed in ascending order): returns their number (at most
 * HT_MODEL_MAX_WINDOWS; win has room for that many), the floats they hold in *floats. Pure. */
int ht_model_chunk_windows(const ht_model *m, int n, const int *lo, const int *hi, ht_pwin *win,
                           size_t *floats);
/* The largest of the chunks' ht_model_stage_floats at B samples. Pure. */
void ht_model_chunk_floats(const ht_model *m, int n, const int *lo, const int *hi, int B,
                           size_t *act, size_t *save, size_t *work);
/* The float of params/grads that holds layout floats [off, off + n), when they lie in one
 * resident window; (size_t)-1 when they do not. */
size_t ht_model_span(const ht_model *m, size_t off, size_t n);

void ht_model_free(ht_model *m);
/* HT_OK when every layer's tensors at `batch` samples stay within 2^31 - 1 elements (the
 * kernels index them with int); else HT_EINPUT naming the layer. Building a model at its
 * max_batch refuses it by this; hetsim checks the batch hettrain would build at. */
int ht_model_check_batch(const ht_model *m, int batch);

/* Initialises every parameter tensor by its rule (ht_param_tensor.init): linear and conv
 * as PyTorch's defaults, W, b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)); GPT weights N(0, 0.02),
 * residual projections N(0, 0.02/sqrt(2 n_layer)), biases 0, LayerNorm weight 1. Parameter
 * k of the flat buffer draws counter k of a stream derived from seed, so it is
 * deterministic for the seed and independent of anything else. Uploaded once. */
void ht_model_init_params(ht_model *m, uint64_t seed);
/* (ht_model_init_params draws element k of the layout from counter k of one stream, so each
 * window gets the whole model's values without the others, a tied copy included.) */

/* ---------------------------------------------------------------- batches */

/* Uploads x (B, in_features) and labels (B, rows). 1 <= B <= max_batch. A label outside
 * [0, classes) is bad input: exits 2 naming the sample (the kernels would only flag it). */
void ht_model_set_batch(ht_model *m, const float *x, const int32_t *y, int B);
/* For a token model: tokens (B,T) int32 in [0, classes), targets (B,T) (the next tokens).
 * targets may be NULL (generation: no loss). Out-of-range values exit 2. */
void ht_model_set_batch_tokens(ht_model *m, const int32_t *tokens, const int32_t *targets, int B);
/* Dropout: on for training steps, with a key that is a pure function of (seed, step) so a
 * resumed run draws the same masks; off (the default) for evaluation and generation. */
void ht_model_set_training(ht_model *m, int on, uint64_t seed, int64_t step);
/* The global index of the batch's first sample (default 0): a dropout mask element of local
 * sample s is drawn from its place in global sample first_row + s, so a data-parallel rank
 * holding rows [lo, hi) of the global batch (first_row = lo) draws the very masks one process
 * draws for those rows. Kept until changed (ht_model_set_training leaves it). */
void ht_model_set_row_offset(ht_model *m, int64_t first_row);

/* ---------------------------------------------------------------- running */

/* All layers forward, then the loss (per-row loss and correct flag on the device); with_grad
 * also writes dlogits for backward. Enqueues only: no host synchronisation. */
void ht_model_forward(ht_model *m, int B, int with_grad);
/* grads = d(grad_scale * sum of row losses)/dparams, overwriting grads. Needs a forward with
 * with_grad = 1 on the same batch. Layer 0's input gradient is not computed. */
void ht_model_backward(ht_model *m, int B, float grad_scale);
/* Reads the per-row values back and sums them in double in row order (B * rows rows). A
 * flagged label makes loss_sum NaN and does not count as correct. */
void ht_model_loss(ht_model *m, int B, double *loss_sum, int *correct);

/* Layers [lo, hi) forward from activation lo to activation hi (no loss). A layer followed
 * by an activation it can fuse with (linear, conv + relu/gelu) runs fused when both are in
 * the range. */
void ht_model_forward_range(ht_model *m, int lo, int hi, int B);
/* The loss on activation nlayers (the logits); with_grad writes its gradient. */
void ht_model_loss_forward(ht_model *m, int B, int with_grad);
/* Layers hi-1 down to lo: from the gradient of activation hi to that of activation lo
 * (not computed when lo == 0). The gradient arriving at activation hi is multiplied by
 * grad_scale: free on GEMM alpha when layer hi-1 is linear, conv or an activation;
 * otherwise (block, LayerNorm, pool, flatten, embedding) dact(hi) is scaled in place first
 * (ht_scale).
 * accumulate adds into grads (micro-batches). Dropout masks follow the current
 * ht_model_set_training state, which must be the one of the forward. */
void ht_model_backward_range(ht_model *m, int lo, int hi, int B, float grad_scale, int accumulate);
/* ht_model_backward_range (accumulate 0) with the layers' gradients written into g, whose
 * float 0 is float gbase of the layout, instead of grads as laid out (ZeRO-2: a bucket outside
 * the gradient window passes through the gradient buffer from its start). The layers' gradient
 * tensors must lie in [gbase, gbase + size of g). */
void ht_model_backward_into(ht_model *m, int lo, int hi, int B, float grad_scale, ht_buf *g,
                            size_t gbase);
/* The same in zero-bubble halves (issue 27): HT_BW_INPUT runs each layer's input-gradient
 * half (a layer kind without a split: its whole backward), and later HT_BW_WEIGHTS, with the
 * same arguments and the same buffers untouched in between, the remaining weight gradients.
 * INPUT then WEIGHTS gives HT_BW_WHOLE's gradients bit for bit (the same kernels on the same
 * operands; only the order of independent launches changes). */
typedef enum { HT_BW_WHOLE, HT_BW_INPUT, HT_BW_WEIGHTS } ht_bw_part;
void ht_model_backward_part(ht_model *m, int lo, int hi, int B, float grad_scale, int accumulate,
                            ht_bw_part part);
/* Before the first forward, for zero-bubble schedules: grows the saved state of the layers
 * whose split needs it (the GPT block's internal output gradients, kept per micro-batch from
 * B until W) and lays it out again (the saved buffer is reallocated when attached, contents
 * lost). Without it the block has no split: its whole backward runs in B. Idempotent. */
void ht_model_keep_bw(ht_model *m);
/* Its layout part, for a description (no buffers; hetsim's memory model). */
void ht_model_keep_bw_layout(ht_model *m);
/* Activation i (B, width[i]) and its gradient as views. */
ht_view ht_model_act(const ht_model *m, int i);
ht_view ht_model_dact(const ht_model *m, int i);
/* Layer i's saved state (B, layers[i].save) and the shared workspace. */
ht_view ht_model_saved(const ht_model *m, int i);
ht_view ht_model_work(const ht_model *m);

/* ---------------------------------------------------------------- metadata */

/* Fills out[0..max) with the parameter tensors in buffer order, names prefixed by their
 * layer ("fc1.weight"); returns how many there are (may exceed max: then only max were
 * written; out may be NULL with max 0 to count). */
int ht_model_param_tensors(const ht_model *m, ht_param_tensor *out, int max);
/* Forward + backward FLOPs per sample (layer 0 without its input gradient). */
double ht_model_flops_per_sample(const ht_model *m);
/* One line per layer: name, kind, output shape, parameters, FLOPs, activation bytes. */
void ht_model_print(const ht_model *m, FILE *f);

#endif
