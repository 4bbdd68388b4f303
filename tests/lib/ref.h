/* Plain-C CPU reference implementations that tests compare the OpenCL kernels against.
 * Written for clarity, in double accumulation, independent of the device code. */
#ifndef HT_TESTS_REF_H
#define HT_TESTS_REF_H

#include <stddef.h>
#include <stdint.h>

/* Fills x[0..n) with uniform values in [lo, hi) from a seed (test data). */
void ref_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t seed);

/* Activation codes (the same numbers as ht_act in src/nn/ops.h). */
enum { REF_ACT_NONE = 0, REF_ACT_RELU = 1, REF_ACT_GELU = 2 };

/* GELU, tanh approximation, straight from the formula 0.5 x (1 + tanh(u)), and its
 * derivative; ReLU with derivative 0 at 0. */
double ref_act(int act, double x);
double ref_act_grad(int act, double x);

/* y(B,out) = x(B,in) W(out,in)^T + b(out); b may be NULL. */
void ref_linear_forward(float *y, const float *x, const float *w, const float *b, int B, int in,
                        int out);
/* dx(B,in) = s dy W, dw(out,in) = s dy^T x [+ dw], db(out) = s sum_B dy [+ db]; dx or db may
 * be NULL. accumulate adds to dw/db. */
void ref_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                         const float *w, int B, int in, int out, double scale, int accumulate);

/* Softmax cross-entropy per row, stable, in double: loss(B), correct(B) (argmax == label,
 * ties to the lowest index; -1 for a label outside [0,C)), dlogits(B,C) (may be NULL). */
void ref_softmax_xent(double *loss, int *correct, float *dlogits, const float *logits,
                      const int32_t *labels, int B, int C, double grad_scale);

/* Whole MLP in double, parameters in the flat layout [W1 (h1,in), b1 (h1), W2, b2, ...];
 * sizes = {in, h1, ..., classes} (nsizes entries). Per-sample losses into loss(B). If
 * signs is not NULL it receives the sign (+1/-1/0) of every hidden pre-activation, layer
 * by layer (B*h1 + B*h2 + ...), to detect ReLU kinks crossed by a finite difference. */
void ref_mlp_forward(double *loss, int *correct, signed char *signs, const float *params,
                     const int *sizes, int nsizes, int act, const float *x, const int32_t *y,
                     int B);

#endif
