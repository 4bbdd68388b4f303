/* CNN ops over flat NCHW device buffers (sample b's (C,H,W) block at b*C*H*W): 2-D convolution
 * as GEMMs over chunks of samples (register-tiled kernels on CPUs, im2col + CLBlast SGEMM
 * elsewhere), max/average pooling. Same conventions as nn/ops.h: views with offsets in
 * floats, enqueue only, deterministic (no float atomics, fixed summation orders).
 * Flatten needs no op: a (B,C,H,W) NCHW tensor already is the (B, C*H*W) matrix a linear layer
 * reads, so the layer just reinterprets the shape. */
#ifndef HT_NN_OPS_CONV_H
#define HT_NN_OPS_CONV_H

#include <stddef.h>

#include "nn/ops.h"

/* ---------------------------------------------------------------- shapes */

/* Output size of a window of k at stride s over n + 2p: floor((n + 2p - k) / s) + 1;
 * 0 when the window does not fit or an argument is out of range. */
int ht_conv_out_size(int n, int k, int stride, int pad);

/* A convolution: square kernel k, the same stride and zero padding on both axes. */
typedef struct ht_conv2d_shape {
    int B;         /* batch */
    int cin, h, w; /* input channels, height, width */
    int cout;      /* output channels */
    int k, stride, pad;
} ht_conv2d_shape;

/* Pooling window k at stride s; padding p <= k/2 (as PyTorch) never enters a max and, for
 * average pooling, counts as zeros only with include_pad (see ht_avgpool2d_forward). */
typedef struct ht_pool2d_shape {
    int B;       /* batch */
    int c, h, w; /* channels, height, width (output has the same channels) */
    int k, stride, pad;
} ht_pool2d_shape;

/* HT_OK, or HT_EINPUT with a message naming the bad field (for config validation). The ops
 * below check the same and exit 1 (HT_ERUNTIME: a caller bug, not user input) on failure. */
int ht_conv2d_check(const ht_conv2d_shape *s);
int ht_pool2d_check(const ht_pool2d_shape *s);
static inline int ht_conv2d_oh(const ht_conv2d_shape *s) {
    return ht_conv_out_size(s->h, s->k, s->stride, s->pad);
}
static inline int ht_conv2d_ow(const ht_conv2d_shape *s) {
    return ht_conv_out_size(s->w, s->k, s->stride, s->pad);
}
static inline int ht_pool2d_oh(const ht_pool2d_shape *s) {
    return ht_conv_out_size(s->h, s->k, s->stride, s->pad);
}
static inline int ht_pool2d_ow(const ht_pool2d_shape *s) {
    return ht_conv_out_size(s->w, s->k, s->stride, s->pad);
}

/* ---------------------------------------------------------------- conv2d */

/* The ops work through the batch in chunks of nb samples; per chunk the workspace holds the
 * column matrix (cin*k*k, nb*Ho*Wo), the output gradient in two layouts (cout, nb*Ho*Wo)
 * and its transpose, zero-padded copies of the input and the output gradient (stride 1),
 * and partial sums. nb is the batch, or fewer so that the per-sample part stays under a
 * cap: HT_CONV_WS_CAP_CPU floats with the tiled kernels (cache-sized chunks; with im2col, 4
 * samples of the MNIST CNN's second conv ran 1.2x faster than 64), HT_CONV_WS_CAP with
 * CLBlast (large GEMMs). The size returned fits either (device-independent; the tiled
 * kernels use less of it). Scratch only: one workspace of the largest size may serve every
 * conv layer of a model. */
#define HT_CONV_WS_CAP_CPU ((size_t)1 << 20)
#define HT_CONV_WS_CAP ((size_t)1 << 24)
size_t ht_conv2d_workspace_floats(const ht_conv2d_shape *s);
/* Samples per chunk (nb above). */
int ht_conv2d_chunk(ht_dev *d, const ht_conv2d_shape *s);
/* Overrides the cap for the whole process (0 restores the defaults). Size workspaces after
 * setting it: the ops derive nb from the cap, not from the workspace given. */
void ht_conv2d_set_ws_cap(size_t floats);

/* Each pass (forward, input gradient, weight gradient) runs one of three algorithms:
 * implicit GEMM (register-tiled kernels of cl/conv.cl reading a zero-padded copy of the
 * input, no column matrix; stride 1 only, and for the input gradient pad <= k-1), im2col +
 * the tiled GEMM kernels of cl/conv.cl (6x16 float16 tiles, bias and activation fused into
 * the store), or im2col + the device's chosen SGEMM (ht_sgemm: the packed tiled kernels or
 * CLBlast). AUTO chooses per layer shape and pass by timing one chunk of each applicable
 * algorithm on the device, the first time the shape is met (conv_choice.c); the choice is
 * cached on disk beside the SGEMM choice, under a lock, so every process on a machine (the
 * ranks of a pipeline and the one-process run) uses the same one. $HT_CONV=auto|implicit|
 * tiled|gemm forces one (implicit falls back to tiled where it does not apply); another
 * value exits 2. Process-wide here for tests and benchmarks: CLBLAST = gemm everywhere with
 * the large chunks, TILED = implicit where it applies else tiled (the choice before
 * measurement), IM2COL = tiled everywhere, GEMM = gemm everywhere with the CPU chunks.
 * $HT_CONV wins. */
typedef enum {
    HT_CONV_AUTO,
    HT_CONV_CLBLAST,
    HT_CONV_TILED,
    HT_CONV_IM2COL,
    HT_CONV_GEMM
} ht_conv_impl;
void ht_conv2d_set_impl(ht_conv_impl impl);

/* y = conv(x, w) + b per output channel (cross-correlation, as PyTorch's Conv2d), and
 * a = act(y) in the same pass. act == HT_ACT_NONE: a is unused. */
void ht_conv2d_forward(ht_dev *d, ht_view y, /* (B,cout,Ho,Wo) pre-activation output */
                       ht_view a,            /* (B,cout,Ho,Wo) act(y); unused for NONE */
                       ht_view x,            /* (B,cin,h,w) input */
                       ht_view w,            /* (cout,cin,k,k) */
                       ht_view b,            /* (cout), or buf NULL for no bias */
                       ht_view ws,           /* ht_conv2d_workspace_floats(s) scratch */
                       const ht_conv2d_shape *s, ht_act act);

/* Gradients of sum(scale * da . act(y)), y = conv(x, w) + b. The activation derivative
 * and `scale` are applied while da is rearranged for the GEMMs (da itself is not written);
 * `accumulate` adds into dw/db (beta = 1) instead of overwriting them; dx is always
 * overwritten. Every sum (db, dW slices and chunks, dx taps) runs in a fixed order.
 * Either half alone (zero-bubble B and W): dw.buf NULL computes only dx (x, db unused);
 * dx.buf NULL only dw and db. The halves equal the whole backward bit for bit. */
void ht_conv2d_backward(ht_dev *d, ht_view dx, /* (B,cin,h,w) written; buf NULL: not computed */
                        ht_view dw,            /* (cout,cin,k,k); buf NULL: not computed */
                        ht_view db,            /* (cout), or buf NULL when the layer has no bias */
                        ht_view da,            /* (B,cout,Ho,Wo) gradient of the output act(y) */
                        ht_view y,  /* (B,cout,Ho,Wo) saved pre-activation; unused for NONE */
                        ht_view x,  /* (B,cin,h,w) saved input */
                        ht_view w,  /* (cout,cin,k,k) */
                        ht_view ws, /* ht_conv2d_workspace_floats(s) scratch */
                        const ht_conv2d_shape *s, ht_act act, float scale, int accumulate);

/* ---------------------------------------------------------------- pooling */

/* y = max over each window; ties go to the first pixel in row-major window order, a NaN
 * wins over numbers. Nothing is saved: backward recomputes the argmax from x. */
void ht_maxpool2d_forward(ht_dev *d, ht_view y, /* (B,c,Ho,Wo) */
                          ht_view x,            /* (B,c,h,w) */
                          const ht_pool2d_shape *s);
/* dx = dy routed to each window's argmax (sums where windows overlap); dx overwritten,
 * pixels no window covers get 0. */
void ht_maxpool2d_backward(ht_dev *d, ht_view dx, /* (B,c,h,w) written */
                           ht_view dy,            /* (B,c,Ho,Wo) */
                           ht_view x,             /* (B,c,h,w) saved input */
                           const ht_pool2d_shape *s);

/* y = mean over each window. include_pad = 1 divides by k*k, padding counting as zeros
 * (PyTorch's default count_include_pad=True; with these floor-mode output sizes no window
 * extends past the padding, so PyTorch's divisor is k*k too); include_pad = 0 divides by
 * the number of pixels of the window inside the image. Without padding both are k*k. */
void ht_avgpool2d_forward(ht_dev *d, ht_view y, /* (B,c,Ho,Wo) */
                          ht_view x,            /* (B,c,h,w) */
                          const ht_pool2d_shape *s, int include_pad);
void ht_avgpool2d_backward(ht_dev *d, ht_view dx, /* (B,c,h,w) written */
                           ht_view dy,            /* (B,c,Ho,Wo) */
                           const ht_pool2d_shape *s, int include_pad);

#endif
