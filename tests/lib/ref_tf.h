/* Plain-C CPU references for the transformer ops (src/nn/ops_tf.h), written after llm.c's
 * encoder/layernorm/attention forward and backward, accumulating in double and computing
 * every saved statistic themselves (nothing is taken from the device). */
#ifndef HT_TESTS_REF_TF_H
#define HT_TESTS_REF_TF_H

#include <stddef.h>
#include <stdint.h>

/* out(B,T,C) = wte[tok] + wpe[t]; tokens in [0,V). */
void ref_embed_forward(float *out, const int32_t *tok, const float *wte, const float *wpe, int B,
                       int T, int C);
/* dwte(V,C), dwpe(T,C) = sums of dout(B,T,C); accumulate adds to their contents. */
void ref_embed_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tok, int B,
                        int T, int C, int V, int accumulate);

/* out(N,C), mean(N), rstd(N) of LayerNorm with eps 1e-5; mean/rstd may be NULL. */
void ref_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                           const float *b, int N, int C);
/* dinp(N,C) [+]= (add_dinp), dw(C), db(C) [+]= (accumulate); statistics from inp. */
void ref_layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                            const float *w, int N, int C, int add_dinp, int accumulate);

/* out(B,T,C), att(B,NH,T,T) (may be NULL) of causal attention over qkv(B,T,3C). */
void ref_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH);
/* dqkv(B,T,3C) from dout(B,T,C), the probabilities recomputed from qkv. */
void ref_attention_backward(float *dqkv, const float *dout, const float *qkv, int B, int T, int C,
                            int NH);

/* The attention tests' finite-difference check of dqkv: L(qkv) = sum r . out(qkv) (nout
 * floats, accumulated in double), central differences with float steps +-step at 45 entries
 * of qkv(BT, 3C) spread over the rows and columns (entry k in part k % 3: q, k, v), each
 * against g = dL/dqkv; worst[part] = max |fd - g| / max(1, |g|). forward(ctx, out) runs the
 * op on the device from qkv as the host holds it (qkv is changed and restored here) and
 * copies its output to out. */
typedef void (*ref_fd_forward)(void *ctx, float *out);
void ref_fd_qkv(double worst[3], ref_fd_forward forward, void *ctx, float *qkv, size_t BT, int C,
                const float *r, size_t nout, const float *g, float step);

#endif
