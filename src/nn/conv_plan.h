/* Internal to src/nn: how a convolution uses its workspace (conv_plan.c, pure), shared by the
 * model's description (its workspace size) and the ops (ops_conv.c). */
#ifndef HT_NN_CONV_PLAN_H
#define HT_NN_CONV_PLAN_H

#include <stddef.h>

#include "nn/ops_conv.h"

typedef struct conv_plan {
    int Ho, Wo, P, K; /* output size, pixels per sample, rows of the column matrix */
    int nb;           /* samples per chunk */
    int S, Ls;        /* dW slices and their length for a full chunk */
    int Hp, Wp;       /* x padded by pad (implicit forward) */
    int q, Hq, Wq;    /* g padded by q = k-1-pad (implicit input gradient; q >= 0) */
    /* segment offsets from the workspace start: col(K, N), g(cout, N), gt(N, cout), bias
     * partials (cout, nb, pixel blocks), dW partials (S, K, cout), xp(nb, cin, Hp, Wp), gp(cout,
     * nb, Hq, Wq); and the total */
    size_t col, g, gt, bpart, wpart, xp, gp, total;
} conv_plan;

/* The plan of shape s; tiled: which implementation's default cap applies (an override,
 * ht_conv2d_set_ws_cap, applies to both). */
conv_plan ht_conv_plan_make(int tiled, const ht_conv2d_shape *s);

/* The algorithm of each pass (ops_conv.h): forward, input gradient, weight gradient. */
enum { HT_CONV_ALG_IMPLICIT = 1, HT_CONV_ALG_TILED, HT_CONV_ALG_GEMM };
typedef struct conv_algos {
    int fwd, dx, dw;
} conv_algos;
/* The algorithms for shape s on d (conv_choice.c): forced by $HT_CONV or ht_conv2d_set_impl,
 * else chosen by measurement (once per shape, device and process; cached on disk). */
conv_algos ht_conv_algos_of(ht_dev *d, const ht_conv2d_shape *s);
/* The process-wide setting (ht_conv2d_set_impl). */
ht_conv_impl ht_conv2d_impl(void);
/* $HT_CONV if set (exits 2 on a bad value), else the process-wide setting. */
ht_conv_impl ht_conv_impl_now(void);
/* 1: the CPU devices' cache-sized chunks (ops_conv.c). */
int ht_conv_cpu_chunks(ht_dev *d);

/* Pixel blocks of conv_grad_out_t (CONV_PQ = 64 pixels in cl/conv.cl). */
static inline int pixel_blocks(int P) { return (P + 63) / 64; }
/* Weight-gradient slices: the tiled dW GEMM splits its long sum over N = nb*P pixels into S
 * slices of about DW_SLICE (parallelism, and a slice of B stays in cache), summed after. */
enum { DW_SLICE = 1024, DW_MAX_SLICES = 64 };
static inline void slices(int N, int *S, int *Ls) {
    int n = (N + DW_SLICE - 1) / DW_SLICE;
    if (n > DW_MAX_SLICES) n = DW_MAX_SLICES;
    if (n < 1) n = 1;
    *Ls = (N + n - 1) / n;
    *S = (N + *Ls - 1) / *Ls;
}

#endif
