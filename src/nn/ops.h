/* Neural-network ops over flat device buffers, llm.c style: one forward and one backward
 * function per op, tensors passed as views (buffer + offset in elements), shapes as ints.
 * Ops only enqueue work (kernels from cl/act.cl, cl/loss.cl, cl/util.cl; GEMMs through
 * CLBlast): none reads back or waits, so a whole step runs without host synchronisation. */
#ifndef HT_NN_OPS_H
#define HT_NN_OPS_H

#include <stddef.h>

#include "ocl/ocl.h"

/* A tensor inside a device buffer: `off` counts elements (floats; int32 for label views).
 * A view with buf == NULL means "absent" where an op says so. */
typedef struct ht_view {
    ht_buf *buf;
    size_t off;
} ht_view;

static inline ht_view ht_view_at(ht_buf *buf, size_t off) { return (ht_view){buf, off}; }
static inline ht_view ht_view_none(void) { return (ht_view){NULL, 0}; }

typedef enum { HT_ACT_NONE, HT_ACT_RELU, HT_ACT_GELU } ht_act;

/* "relu" -> HT_ACT_RELU, "gelu" -> HT_ACT_GELU, "none"/"" -> HT_ACT_NONE; -1 otherwise. */
int ht_act_parse(const char *name);
const char *ht_act_name(ht_act act);

/* ---------------------------------------------------------------- linear */

/* y = x W^T + b: SGEMM with beta = 0, then one pass adding the bias. Chosen over
 * broadcasting b into y and running the GEMM with beta = 1 because the pass also applies
 * the activation (below): on PoCL at 256x1024 the fused bias+ReLU pass costs 75 us, the
 * alternative 42 us (broadcast) + 86 us (ReLU pass) + C read by the GEMM. */
void ht_linear_forward(ht_dev *d, ht_view y, /* (B,out) output */
                       ht_view x,            /* (B,in) input */
                       ht_view w,            /* (out,in) row-major, in the parameter buffer */
                       ht_view b,            /* (out), or buf NULL for no bias */
                       int B, int in, int out);

/* The same followed by an activation, fused into the bias pass: y keeps the
 * pre-activation (needed by backward), a receives act(y). act == HT_ACT_NONE: a unused. */
void ht_linear_act_forward(ht_dev *d, ht_view y, /* (B,out) pre-activation output */
                           ht_view a,            /* (B,out) activation output */
                           ht_view x,            /* (B,in) */
                           ht_view w,            /* (out,in) */
                           ht_view b,            /* (out) or none */
                           int B, int in, int out, ht_act act);

/* Gradients of sum(scale * dy . y) for y = x W^T + b. `scale` rides on the GEMM alpha (the
 * loss's 1/B costs nothing); `accumulate` adds into dw/db (beta = 1) instead of
 * overwriting them, for micro-batches. Bias sums run over B in a fixed order. */
void ht_linear_backward(ht_dev *d,
                        ht_view dx, /* (B,in) written; buf NULL: not computed (first layer) */
                        ht_view dw, /* (out,in) */
                        ht_view db, /* (out), or buf NULL when the layer has no bias */
                        ht_view dy, /* (B,out) gradient of the output */
                        ht_view x,  /* (B,in) saved input */
                        ht_view w,  /* (out,in) */
                        int B, int in, int out, float scale, int accumulate);

/* ht_linear_backward in its two halves, for zero-bubble schedules (issue 27): B, the input
 * gradient dx = scale dy W (what the previous stage waits for), and later W, the weight
 * gradients dW, db from the saved input and output gradient. Each writes exactly what
 * ht_linear_backward writes there, bit for bit (the same kernels on the same operands). */
void ht_linear_backward_input(ht_dev *d, ht_view dx, /* (B,in) written; buf NULL: nothing */
                              ht_view dy, ht_view w, int B, int in, int out, float scale);
void ht_linear_backward_weights(ht_dev *d, ht_view dw, ht_view db, /* or buf NULL: no bias */
                                ht_view dy, ht_view x, int B, int in, int out, float scale,
                                int accumulate);

/* Backward of ht_linear_act_forward: dy = scale * da * act'(y) is written (the gradient of
 * the pre-activation; may alias da) in the same pass that sums db, then the GEMMs.
 * act == HT_ACT_NONE: exactly ht_linear_backward on da; dy is not written. */
void ht_linear_act_backward(ht_dev *d, ht_view dx, /* (B,in) written, or none */
                            ht_view dw,            /* (out,in) */
                            ht_view db,            /* (out) or none */
                            ht_view dy, /* (B,out) written: gradient of the pre-activation */
                            ht_view da, /* (B,out) gradient of the activation output */
                            ht_view y,  /* (B,out) saved pre-activation */
                            ht_view x,  /* (B,in) saved input */
                            ht_view w,  /* (out,in) */
                            int B, int in, int out, ht_act act, float scale, int accumulate);

/* ht_linear_act_backward's B half (issue 27): dy and db as it writes them, then dx (none:
 * skipped). Its W half is ht_linear_backward_weights(dw, no bias, dy, x, scale 1). The two in
 * that order are ht_linear_act_backward bit for bit; act must not be HT_ACT_NONE. */
void ht_linear_act_backward_input(ht_dev *d, ht_view dx, ht_view db, ht_view dy, ht_view da,
                                  ht_view y, ht_view w, int B, int in, int out, ht_act act,
                                  float scale, int accumulate);

/* ---------------------------------------------------------------- activations */

/* ReLU: max(x, 0) with derivative 0 at 0 (as PyTorch). GELU: tanh approximation,
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) as GPT-2 and PyTorch approximate='tanh'.
 * HT_ACT_NONE: forward copies; backward exits (fold the identity into the next op). */
void ht_act_forward(ht_dev *d, ht_act act, ht_view y, /* (n) output, may alias x */
                    ht_view x,                        /* (n) input */
                    size_t n);
void ht_act_backward(ht_dev *d, ht_act act, ht_view dx, /* (n) scale * dy * act'(x), may alias dy */
                     ht_view dy,                        /* (n) */
                     ht_view x,                         /* (n) saved input (pre-activation) */
                     size_t n, float scale);

/* ---------------------------------------------------------------- elementwise */

/* x = alpha * x for n floats in place: one float multiply per element, so a power-of-two
 * alpha scales exactly and alpha = 0 gives +-0 for finite x (NaN and inf give NaN, as
 * PyTorch's mul_; not BLAS sscal's zero fill). alpha = 1 enqueues nothing. The model uses
 * it for grad_scale when the top layer of a backward range cannot fold it into a GEMM. */
void ht_scale(ht_dev *d, ht_view x, /* (n) scaled in place */
              size_t n, float alpha);

/* ---------------------------------------------------------------- loss */

/* Softmax + cross-entropy per row of logits, numerically stable (max subtracted).
 * Labels outside [0, C): nothing is read or written out of bounds; that sample's loss is
 * NaN, its correct flag -1, its gradient row zero (the host should reject such labels). */
void ht_softmax_xent(ht_dev *d, ht_view loss, /* (B) float per-sample loss */
                     ht_view correct, /* (B) int32: 1 if argmax == label (ties: lowest index) */
                     ht_view dlogits, /* (B,C) (softmax - onehot) * grad_scale; buf NULL:
                                         forward only; may alias logits */
                     ht_view logits,  /* (B,C) */
                     ht_view labels,  /* (B) int32 */
                     int B, int C, float grad_scale);
/* ht_softmax_xent with the trainer's NaN watch: watch (one int32, INT_MAX = none yet)
 * becomes `step` (> 0) when a loss is NaN or infinite and watch is still INT_MAX, so the
 * first bad step is kept without a read-back. */
void ht_softmax_xent_watch(ht_dev *d, ht_view loss, ht_view correct, ht_view dlogits,
                           ht_view logits, ht_view labels, int B, int C, float grad_scale,
                           ht_buf *watch, int step);

#endif
