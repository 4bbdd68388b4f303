/* Plain-C CPU references for the CNN ops (tests/unit/t_conv.c): direct loops over the definitions,
 * double accumulation, NCHW, independent of the device code (no im2col, scatter not gather). */
#ifndef HT_TESTS_REF_CONV_H
#define HT_TESTS_REF_CONV_H

/* A convolution or pooling geometry: batch, channels in/out, input size, window, stride, pad. */
typedef struct ref_geom {
    int B, cin, h, w, cout, k, s, p;
} ref_geom;

/* floor((n + 2p - k) / s) + 1 */
int ref_out_size(int n, int k, int s, int p);

/* y(B,cout,Ho,Wo) = sum_{ci,kh,kw} x[b][ci][oh*s-p+kh][ow*s-p+kw] w[co][ci][kh][kw] + b[co]
 * (zero outside the image); b may be NULL. */
void ref_conv2d_forward(float *y, const float *x, const float *w, const float *b, ref_geom g);

/* Gradients of sum(scale * dy . y): dx (overwritten; may be NULL), dw and db (db may be NULL)
 * overwritten or, with accumulate, added to. */
void ref_conv2d_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                         const float *w, ref_geom g, double scale, int accumulate);

/* Max pooling over (B, cin) planes (cout unused), -infinity padding; ties: the first pixel
 * in row-major order; argmax (may be NULL) receives the winner's flat input index. */
void ref_maxpool2d_forward(float *y, int *argmax, const float *x, ref_geom g);
/* dx = dy scattered to the argmax of each window (overwritten). */
void ref_maxpool2d_backward(float *dx, const float *dy, const float *x, ref_geom g);

/* Average pooling: divisor k*k (include_pad) or the window's pixels inside the image. */
void ref_avgpool2d_forward(float *y, const float *x, ref_geom g, int include_pad);
void ref_avgpool2d_backward(float *dx, const float *dy, ref_geom g, int include_pad);

#endif
