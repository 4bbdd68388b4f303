/* The convolution's shapes and workspace plan (see conv_plan.h), pure: the model's
 * description sizes its workspace with them, without a device. */
#include "nn/conv_plan.h"

#include <limits.h>

#include "core/err.h"

/* ---------------------------------------------------------------- shapes */

int ht_conv_out_size(int n, int k, int stride, int pad) {
    if (n < 1 || k < 1 || stride < 1 || pad < 0) return 0;
    long long span = (long long)n + 2LL * pad - k;
    if (span < 0) return 0;
    return (int)(span / stride + 1);
}

/* Elements of a (B, c, h, w) tensor, or 0 when it exceeds the kernels' int indexing. */
static size_t numel4(int B, int c, int h, int w) {
    unsigned long long n = (unsigned long long)B * (unsigned)c * (unsigned)h * (unsigned)w;
    return n > (unsigned long long)INT_MAX ? 0 : (size_t)n;
}

int ht_conv2d_check(const ht_conv2d_shape *s) {
    if (s->B < 1 || s->cin < 1 || s->h < 1 || s->w < 1 || s->cout < 1)
        return ht_error(HT_EINPUT,
                        "conv2d: batch %d, channels %d->%d and input %dx%d must all be >= 1", s->B,
                        s->cin, s->cout, s->h, s->w);
    if (s->k < 1 || s->stride < 1 || s->pad < 0)
        return ht_error(HT_EINPUT, "conv2d: kernel %d and stride %d must be >= 1, padding %d >= 0",
                        s->k, s->stride, s->pad);
    if (!ht_conv2d_oh(s) || !ht_conv2d_ow(s))
        return ht_error(HT_EINPUT,
                        "conv2d: a %dx%d kernel does not fit the %dx%d input padded by %d", s->k,
                        s->k, s->h, s->w, s->pad);
    if (!numel4(s->B, s->cin, s->h, s->w) ||
        !numel4(s->B, s->cout, ht_conv2d_oh(s), ht_conv2d_ow(s)) ||
        !numel4(s->cout, s->cin, s->k, s->k))
        return ht_error(HT_EINPUT, "conv2d: a tensor of this layer exceeds 2^31 elements");
    return HT_OK;
}

int ht_pool2d_check(const ht_pool2d_shape *s) {
    if (s->B < 1 || s->c < 1 || s->h < 1 || s->w < 1)
        return ht_error(HT_EINPUT, "pool2d: batch %d, channels %d and input %dx%d must be >= 1",
                        s->B, s->c, s->h, s->w);
    if (s->k < 1 || s->stride < 1 || s->pad < 0 || s->pad > s->k / 2)
        return ht_error(HT_EINPUT,
                        "pool2d: window %d and stride %d must be >= 1, padding %d in [0, k/2]",
                        s->k, s->stride, s->pad);
    if (!ht_pool2d_oh(s) || !ht_pool2d_ow(s))
        return ht_error(HT_EINPUT,
                        "pool2d: a %dx%d window does not fit the %dx%d input padded by %d", s->k,
                        s->k, s->h, s->w, s->pad);
    if (!numel4(s->B, s->c, s->h, s->w))
        return ht_error(HT_EINPUT, "pool2d: the input exceeds 2^31 elements");
    return HT_OK;
}

/* ---------------------------------------------------------------- conv2d: plan */

/* Segments start on 256-float (1 KiB) boundaries relative to the workspace, so that with an
 * aligned workspace CLBlast can take each operand in place (sub-buffers, src/ocl/blas.c). */
enum { WS_ALIGN = 256, SLACK = 16 };
static size_t align_up(size_t n) { return (n + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN; }

static size_t g_ws_cap; /* 0: the defaults */

void ht_conv2d_set_ws_cap(size_t floats) { g_ws_cap = floats; }

static size_t gcd16(int P) {
    size_t g = 16;
    while (P % (int)g)
        g /= 2;
    return g;
}

/* tiled: which implementation's default cap applies (an override applies to both) */
conv_plan ht_conv_plan_make(int tiled, const ht_conv2d_shape *s) {
    conv_plan p;
    size_t cap = g_ws_cap ? g_ws_cap : tiled ? HT_CONV_WS_CAP_CPU : HT_CONV_WS_CAP;
    p.Ho = ht_conv2d_oh(s), p.Wo = ht_conv2d_ow(s);
    p.P = p.Ho * p.Wo;
    p.K = s->cin * s->k * s->k;
    p.Hp = s->h + 2 * s->pad, p.Wp = s->w + 2 * s->pad;
    p.q = s->k - 1 - s->pad;
    if (p.q < 0) p.q = 0; /* unused then */
    p.Hq = p.Ho + 2 * p.q, p.Wq = p.Wo + 2 * p.q;
    size_t xp1 = (size_t)s->cin * p.Hp * p.Wp, gp1 = (size_t)s->cout * p.Hq * p.Wq;
    size_t per = ((size_t)p.K + 2 * (size_t)s->cout) * (size_t)p.P + (size_t)s->cout + xp1 + gp1;
    size_t nb = cap / per;
    if (nb < 1) nb = 1;
    /* full chunks of whole 16-column tiles: nb a multiple of 16 / gcd(P, 16) when possible */
    size_t q = 16 / gcd16(p.P);
    if (nb > q) nb -= nb % q;
    if (nb > (size_t)s->B) nb = (size_t)s->B;
    p.nb = (int)nb;
    size_t N = nb * (size_t)p.P;
    slices(N > (size_t)INT_MAX ? INT_MAX : (int)N, &p.S, &p.Ls);
    /* each segment is followed by slack: the tiled kernels read (and never use) up to 15
     * floats past the end of a B operand, the implicit ones up to 15 + k - 1 */
    size_t sl = SLACK + (size_t)s->k;
    p.col = 0;
    p.g = align_up((size_t)p.K * N + sl);
    p.gt = p.g + align_up((size_t)s->cout * N + sl);
    p.bpart = p.gt + align_up(N * (size_t)s->cout + sl);
    p.wpart = p.bpart + align_up((size_t)s->cout * nb * pixel_blocks(p.P));
    p.xp = p.wpart + align_up((size_t)p.S * p.K * s->cout);
    p.gp = p.xp + align_up(nb * xp1 + sl);
    p.total = p.gp + nb * gp1 + sl;
    return p;
}

size_t ht_conv2d_workspace_floats(const ht_conv2d_shape *s) {
    if (ht_conv2d_check(s) != HT_OK)
        ht_die(HT_ERUNTIME, "nn: ht_conv2d_workspace_floats: %s", ht_errmsg());
    size_t a = ht_conv_plan_make(0, s).total, b = ht_conv_plan_make(1, s).total;
    return a > b ? a : b;
}
