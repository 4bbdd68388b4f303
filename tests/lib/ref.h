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

/* C(m,n) = alpha op(A) op(B) + beta C0, row-major, double accumulation; beta = 0 never
 * reads C0 (BLAS). */
void ref_gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, const float *c0, float *c, int ldc);

/* A GEMM test's operands in host memory: A, B and C at float offsets oa, ob, oc in their
 * buffers (a, b, c0 of na, nb, nc floats), leading dimensions pad wider than the operands;
 * uniform values, and with beta = 0 NaN in C0's window (never read, so a NaN must not
 * reach the result). c receives the device's result, r the expected one: the reference
 * product inside C's m x n window, C0 everywhere else. */
typedef struct ref_gemm_case {
    int ta, tb, m, n, k, lda, ldb, ldc;
    float alpha, beta;
    size_t oa, ob, oc, na, nb, nc;
    float *a, *b, *c0, *c, *r;
} ref_gemm_case;
ref_gemm_case ref_gemm_case_new(int ta, int tb, int m, int n, int k, float alpha, float beta,
                                int pad, size_t oa, size_t ob, size_t oc);
void ref_gemm_case_free(ref_gemm_case *g);

/* g->c against the reference (computed into g->r here): inside C's window within tol
 * (bad counts the others, first is the first of them, worst the largest error within
 * tol), outside it bit for bit (touched counts the changed elements). */
typedef struct ref_gemm_diff {
    size_t bad, first, touched;
    double tol, worst;
} ref_gemm_diff;
ref_gemm_diff ref_gemm_check(ref_gemm_case *g);

/* A GEMM case's arguments, as ref_gemm_case_new takes them. */
typedef struct ref_gemm_shape {
    int ta, tb, m, n, k;
    float alpha, beta;
    int pad;
    size_t oa, ob, oc;
} ref_gemm_shape;
/* The cases every device GEMM path is tested on first: each transpose pair at partial tiles
 * on both axes (m % 6, n % 16 != 0), then one row, one column, k = 1. */
extern const ref_gemm_shape ref_gemm_shapes[];
extern const int ref_gemm_nshapes;

#endif
