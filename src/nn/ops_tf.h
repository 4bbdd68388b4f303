/* Transformer ops for a byte-level GPT, llm.c style (encoder, layernorm, residual, attention
 * forward/backward) plus counter-based dropout, over flat device buffers as ht_views. Layout
 * is (B,T,C) row-major; kernels in cl/embed.cl, norm.cl, dropout.cl, attn.cl. Like ops.h:
 * ops only enqueue work, and every reduction has a fixed order (no float atomics). */
#ifndef HT_NN_OPS_TF_H
#define HT_NN_OPS_TF_H

#include <stddef.h>
#include <stdint.h>

#include "nn/ops.h"

/* ---------------------------------------------------------------- embedding */

/* out[b,t] = wte[tokens[b,t]] + wpe[t]. A token outside [0,V) reads nothing out of bounds
 * and turns its output row into NaN, so it cannot train silently (hosts should reject it). */
void ht_embed_forward(ht_dev *d, ht_view out, /* (B,T,C) */
                      ht_view tokens,         /* (B,T) int32 */
                      ht_view wte,            /* (V,C) token embeddings */
                      ht_view wpe,            /* (>=T,C) position embeddings */
                      int B, int T, int C, int V);

/* dwte[v] = sum of dout over the positions holding token v (rows of tokens that do not occur
 * get 0), dwpe[t] = sum over b of dout[b,t] (rows >= T untouched). acc_wte / acc_wpe: add into
 * dwte / dwpe instead (micro-batches; dwte also under weight tying, where the LM head wrote
 * its dW there first). Each output element is summed by one work-item in position order:
 * deterministic, no atomics. */
void ht_embed_backward(ht_dev *d, ht_view dwte, /* (V,C) */
                       ht_view dwpe,            /* (>=T,C) */
                       ht_view dout,            /* (B,T,C) */
                       ht_view tokens,          /* (B,T) int32 */
                       int B, int T, int C, int V, int acc_wte, int acc_wpe);

/* ---------------------------------------------------------------- layernorm */

#define HT_LN_EPS 1e-5f

/* Over the last dimension, biased variance, eps HT_LN_EPS (PyTorch's nn.LayerNorm):
 * out = (x - mean) * rstd * w + b, with mean and rstd = 1/sqrt(var + eps) saved. */
void ht_layernorm_forward(ht_dev *d, ht_view out, /* (N,C), N = B*T */
                          ht_view mean,           /* (N) saved for backward */
                          ht_view rstd,           /* (N) saved for backward */
                          ht_view inp,            /* (N,C) */
                          ht_view w,              /* (C) */
                          ht_view b,              /* (C) */
                          int N, int C);

/* dinp is overwritten, or added to with add_dinp (a pre-LN block adds it to the residual
 * stream's gradient); dw, db are overwritten, or added to with accumulate. The dw/db sums run
 * over the N rows in order. dinp may alias dout. */
void ht_layernorm_backward(ht_dev *d, ht_view dinp, /* (N,C) */
                           ht_view dw,              /* (C) */
                           ht_view db,              /* (C) */
                           ht_view dout,            /* (N,C) */
                           ht_view inp,             /* (N,C) saved input */
                           ht_view w,               /* (C) */
                           ht_view mean,            /* (N) from forward */
                           ht_view rstd,            /* (N) from forward */
                           int N, int C, int add_dinp, int accumulate);
/* Its two halves (zero-bubble schedules, issue 27), the same two kernels: B, the input
 * gradient, and later W, dw and db from the saved input, mean, rstd and output gradient
 * (so dinp must not alias dout when W runs after B). */
void ht_layernorm_backward_input(ht_dev *d, ht_view dinp, ht_view dout, ht_view inp, ht_view w,
                                 ht_view mean, ht_view rstd, int N, int C, int add_dinp);
void ht_layernorm_backward_weights(ht_dev *d, ht_view dw, ht_view db, ht_view dout, ht_view inp,
                                   ht_view mean, ht_view rstd, int N, int C, int accumulate);

/* ---------------------------------------------------------------- residual */

/* out = a + b; out may alias a or b. */
void ht_residual_forward(ht_dev *d, ht_view out, /* (n) */
                         ht_view a,              /* (n) */
                         ht_view b,              /* (n) */
                         size_t n);

/* da = [da +] dout and db = [db +] dout; either may be none. Often no call is needed at all:
 * both branches can read dout where it is. */
void ht_residual_backward(ht_dev *d, ht_view da, /* (n) */
                          ht_view db,            /* (n) */
                          ht_view dout,          /* (n) */
                          size_t n, int accumulate);

/* ---------------------------------------------------------------- dropout */

/* out = inp * keep / (1 - p) with keep(i) = ht_rng_uniform(ht_rng_stream(seed, step), i) >= p
 * (src/core/rng.h, the same bits on the device): the mask is a pure function of (seed, step,
 * i), nothing is stored, backward recomputes it. Give each dropout site its own seed (e.g.
 * ht_rng_stream(run_seed, site)) and each training step its own step. p = 0: an exact copy
 * (nothing when out aliases inp). p = 1: zeros. p outside [0, 1]: exits. out may alias inp. */
void ht_dropout_forward(ht_dev *d, ht_view out, /* (n) */
                        ht_view inp,            /* (n) */
                        size_t n, float p, uint64_t seed, uint64_t step);
/* dinp = dout * keep / (1 - p) with the same mask; dinp may alias dout. */
void ht_dropout_backward(ht_dev *d, ht_view dinp, /* (n) */
                         ht_view dout,            /* (n) */
                         size_t n, float p, uint64_t seed, uint64_t step);
/* The same with the mask counters shifted by `first` elements: element i of this call uses
 * counter first + i, i.e. the mask of element first + i of a larger tensor, so a slice of a
 * batch (a data-parallel rank's rows) draws exactly the masks it has in the whole batch.
 * first = 0 is ht_dropout_forward/backward bit for bit. */
void ht_dropout_forward_at(ht_dev *d, ht_view out, /* (n) */
                           ht_view inp,            /* (n) */
                           size_t n, float p, uint64_t seed, uint64_t step, uint64_t first);
void ht_dropout_backward_at(ht_dev *d, ht_view dinp, /* (n) */
                            ht_view dout,            /* (n) */
                            size_t n, float p, uint64_t seed, uint64_t step, uint64_t first);
/* The mask on the host: 1 if element (counter) i is kept. */
int ht_dropout_keep(uint64_t seed, uint64_t step, uint64_t i, float p);

/* ---------------------------------------------------------------- attention */

/* Causal self-attention core, NH heads of size hs = C/NH (C % NH == 0): qkv holds q, k, v of
 * each position side by side (the QKV linear layer's output; the projections are ordinary
 * ht_linear_* ops). Per (b, head): att = softmax(q k^T / sqrt(hs)) with keys t2 <= t only
 * (zeros above the diagonal), out = att v, heads concatenated along C. */
void ht_attention_forward(ht_dev *d, ht_view out, /* (B,T,C) */
                          ht_view att,            /* (B,NH,T,T) probabilities, for backward */
                          ht_view qkv,            /* (B,T,3C) */
                          int B, int T, int C, int NH);

/* dqkv is overwritten (every element). scratch holds the pre-softmax gradient between the
 * two passes; its contents are undefined afterwards (may be shared across layers). */
void ht_attention_backward(ht_dev *d, ht_view dqkv, /* (B,T,3C) */
                           ht_view scratch,         /* (B,NH,T,T) workspace */
                           ht_view dout,            /* (B,T,C) */
                           ht_view qkv,             /* (B,T,3C) saved input */
                           ht_view att,             /* (B,NH,T,T) from forward */
                           int B, int T, int C, int NH);

/* Kernels: HT_ATTN_AUTO (default) uses one work-group per (b, head) when its tiles fit in
 * local memory (forward (hs + L) * T floats, backward (hs + T) * T, T rounded up to 8),
 * else one work-item per row; HT_ATTN_ROWS forces the latter. HT_ATTN_FUSED makes every
 * transformer block built afterwards use the fused kernels below (ht_attention_fused).
 * Process-wide; for tests and benchmarks. */
typedef enum { HT_ATTN_AUTO, HT_ATTN_ROWS, HT_ATTN_FUSED } ht_attn_kernels;
void ht_attention_force(ht_attn_kernels k);
ht_attn_kernels ht_attention_forced(void);
/* Whether a transformer block of context T uses the fused attention (1) or the T^2 kernels
 * (0): fused from T = HT_ATTN_FUSED_MIN_T (measured: slower below, as fast or faster from
 * there, and O(T) memory), or as forced by ht_attention_force or by the environment,
 * HT_ATTN=fused|full (benchmarks; any other value exits 2 naming it). */
#define HT_ATTN_FUSED_MIN_T 512
int ht_attention_fused(int T);

/* The same attention with memory O(B NH T) instead of O(B NH T^2) (cl/flash.cl: online softmax
 * over key tiles; the backward recomputes the probabilities tile by tile). Forward saves only
 * out and lse(B,NH,T), each row's log-sum-exp of its scaled scores. Backward overwrites every
 * element of dqkv and needs the forward's out; dsum(B,NH,T) is scratch (rowsum(dout * out)),
 * undefined afterwards. */
void ht_attention_flash_forward(ht_dev *d, ht_view out, /* (B,T,C) */
                                ht_view lse,            /* (B,NH,T), for backward */
                                ht_view qkv,            /* (B,T,3C) */
                                int B, int T, int C, int NH);
void ht_attention_flash_backward(ht_dev *d, ht_view dqkv, /* (B,T,3C) */
                                 ht_view dsum,            /* (B,NH,T) workspace */
                                 ht_view dout,            /* (B,T,C) */
                                 ht_view out,             /* (B,T,C) forward output */
                                 ht_view qkv,             /* (B,T,3C) saved input */
                                 ht_view lse,             /* (B,NH,T) from forward */
                                 int B, int T, int C, int NH);

/* res(N,C) = a + b, then out, mean, rstd = LayerNorm(res) as ht_layernorm_forward, in one pass
 * over a and b (cl/resln.cl): the same results as ht_residual_forward then
 * ht_layernorm_forward. res must not alias a, b or out. */
void ht_residual_layernorm_forward(ht_dev *d, ht_view res, ht_view out, ht_view mean,
                                   ht_view rstd, ht_view a, ht_view b, ht_view w, ht_view bias,
                                   int N, int C);
/* Its backward's input half: dx(N,C) = dres + LayerNorm's input gradient from dout (inp the
 * saved sum, mean and rstd from the forward), in one pass (cl/resln.cl): the same bits as
 * ht_residual_backward(dx, none, dres) then ht_layernorm_backward_input(dx, ..., add_dinp 1),
 * without the copy. dx may be dres; it must not alias dout or inp. */
void ht_residual_layernorm_backward_input(ht_dev *d, ht_view dx, ht_view dres, ht_view dout,
                                          ht_view inp, ht_view w, ht_view mean, ht_view rstd,
                                          int N, int C);

#endif
