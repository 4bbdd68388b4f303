/* CNN ops: shape checks, the convolution as GEMMs over chunks of nb samples (column matrix
 * (K = cin*k*k, N = nb*Ho*Wo); kernels in cl/conv.cl, GEMMs in CLBlast or in the tiled
 * kernels), and pooling (cl/pool.cl). Nothing here waits for the device. */
#include "nn/ops_conv.h"

#include <limits.h>
#include <string.h>

#include "core/err.h"
#include "nn/conv_plan.h"
#include "nn/ops_util.h"

/* ---------------------------------------------------------------- shapes */

/* ---------------------------------------------------------------- helpers */

/* Misuse by the caller (not user input): exit 1 with the recorded message. */
static void check_or_die(int rc, const char *op) {
    if (rc != HT_OK) ht_die(HT_ERUNTIME, "nn: %s called with a bad shape: %s", op, ht_errmsg());
}

/* The view must hold n floats inside its buffer; returns its offset as a kernel int. */
static int fits(ht_view v, size_t n, const char *op, const char *what) {
    if (!v.buf) ht_die(HT_ERUNTIME, "nn: %s: tensor '%s' is missing (NULL buffer)", op, what);
    size_t cap = ht_buf_size(v.buf) / sizeof(float);
    if (v.off > cap || n > cap - v.off)
        ht_die(HT_ERUNTIME, "nn: %s: tensor '%s' needs floats [%zu, %zu) but its buffer holds %zu",
               op, what, v.off, v.off + n, cap);
    if (v.off + n > (size_t)INT_MAX)
        ht_die(HT_ERUNTIME, "nn: %s: tensor '%s' ends past 2^31 floats of its buffer", op, what);
    return (int)v.off;
}

/* 2-D range g0 x g1 in work-groups of up to 64 items (the kernel's and device's limit
 * permitting), as wide along dimension 0 as g0 allows; kernels check their bounds. */
static void launch2(ht_dev *d, const char *name, size_t g0, size_t g1, int nargs,
                    const ht_arg *args, int line) {
    size_t cap = pow2_at_most(ht_kernel_max_wg(d, name));
    if (cap > 64) cap = 64;
    size_t l0 = pow2_at_least(g0);
    if (l0 > cap) l0 = cap;
    size_t l1 = cap / l0, p1 = pow2_at_least(g1);
    if (l1 > p1) l1 = p1;
    size_t lws[2] = {l0, l1};
    size_t gws[2] = {(g0 + l0 - 1) / l0 * l0, (g1 + l1 - 1) / l1 * l1};
    ht_launch_at(d, name, 2, gws, lws, nargs, args, __FILE__, line);
}
#define LAUNCH2(d, name, g0, g1, ...)                                                              \
    launch2((d), (name), (g0), (g1), HT_NARGS(__VA_ARGS__), (ht_arg[]){__VA_ARGS__}, __LINE__)

/* Rows of a tile of the tiled GEMM kernels (CONV_TM in cl/conv.cl); columns are 16. */
enum { TILE_M = 6 };

/* Range dimension 1 of the tiled kernels: blocks of TILE_M rows, a group spanning up to 16
 * of them and one column block (dimension 0), so that on a CPU (a group runs on one core,
 * item after item) the rows reuse B's 16 columns from cache: 3x faster than groups along
 * the columns on PoCL. */
static void tile_rows(ht_dev *d, const char *name, int M, size_t *gws1, size_t *lws1) {
    size_t g1 = ((size_t)M + TILE_M - 1) / TILE_M;
    size_t l1 = g1 < 16 ? g1 : 16, cap = ht_kernel_max_wg(d, name);
    if (l1 > cap) l1 = cap;
    *lws1 = l1;
    *gws1 = (g1 + l1 - 1) / l1 * l1;
}

/* Range (column blocks of 16, row blocks, S slices). */
static void launch_tiles(ht_dev *d, const char *name, int M, int N, int S, int nargs,
                         const ht_arg *args, int line) {
    size_t lws[3] = {1, 1, 1}, gws[3] = {((size_t)N + 15) / 16, 0, (size_t)S};
    tile_rows(d, name, M, &gws[1], &lws[1]);
    ht_launch_at(d, name, 3, gws, lws, nargs, args, __FILE__, line);
}
#define LAUNCH_TILES(d, name, M, N, S, ...)                                                        \
    launch_tiles((d), (name), (M), (N), (S), HT_NARGS(__VA_ARGS__), (ht_arg[]){__VA_ARGS__},       \
                 __LINE__)

/* C(M, N) [slice z at C + z*slice] = A(M, L) B(L, N) with the tiled kernel (cl/conv.cl). */
static void tiled_gemm(ht_dev *d, ht_buf *c, size_t co, int ldc, int slice, const ht_buf *a,
                       size_t ao, int sam, int sal, const ht_buf *b, size_t bo, int ldb, int M,
                       int N, int L, int S, int Ls) {
    double m = M, n = N, l = L; /* A and B once, S slices of C written */
    work(d, 2.0 * m * n * l, m * l + l * n + (double)S * m * n);
    LAUNCH_TILES(d, "conv_gemm", M, N, S, HT_BUF(c), HT_INT(co), HT_INT(ldc), HT_INT(slice),
                 HT_BUF(a), HT_INT(ao), HT_INT(sam), HT_INT(sal), HT_BUF(b), HT_INT(bo),
                 HT_INT(ldb), HT_INT(M), HT_INT(N), HT_INT(L), HT_INT(Ls));
}

/* dst(planes, Hp, Wp) = src(planes, H, W) padded by p with zeros. */
static void pad_planes(ht_dev *d, ht_buf *dst, size_t dsto, const ht_buf *src, size_t srco,
                       int planes, int H, int W, int p, int Hp, int Wp) {
    work(d, 0.0, (double)planes * ((double)H * W + (double)Hp * Wp));
    ht_launch1d(d, "conv_pad", (size_t)planes * Hp, HT_BUF(dst), HT_INT(dsto), HT_BUF(src),
                HT_INT(srco), HT_INT(planes), HT_INT(H), HT_INT(W), HT_INT(p), HT_INT(Hp),
                HT_INT(Wp));
}

/* ---------------------------------------------------------------- conv2d: plan */

static ht_conv_impl g_impl = HT_CONV_AUTO;

void ht_conv2d_set_impl(ht_conv_impl impl) { g_impl = impl; }

ht_conv_impl ht_conv2d_impl(void) { return g_impl; }

/* The chunk's cap: cache-sized chunks on CPU devices (the tiled and implicit kernels),
 * large ones for CLBlast-sized GEMMs elsewhere (see the top of ops_conv.h). */
int ht_conv_cpu_chunks(ht_dev *d) {
    ht_conv_impl impl = ht_conv_impl_now();
    if (impl == HT_CONV_CLBLAST) return 0;
    if (impl != HT_CONV_AUTO) return 1;
    return !strcmp(ht_dev_info(d)->type, "cpu");
}

int ht_conv2d_chunk(ht_dev *d, const ht_conv2d_shape *s) {
    check_or_die(ht_conv2d_check(s), "ht_conv2d_chunk");
    return ht_conv_plan_make(ht_conv_cpu_chunks(d), s).nb;
}

/* One call's context: the device, the shape, the plan, the workspace, the algorithms. */
typedef struct conv_ctx {
    ht_dev *d;
    const ht_conv2d_shape *s;
    conv_plan p;
    ht_buf *ws;
    size_t wo; /* workspace offset in floats */
    conv_algos alg;
} conv_ctx;

/* Plan plus the common checks of forward and backward. */
static conv_ctx conv_begin(ht_dev *d, const ht_conv2d_shape *s, ht_view ws, const char *op) {
    check_or_die(ht_conv2d_check(s), op);
    conv_ctx c = {d, s, ht_conv_plan_make(ht_conv_cpu_chunks(d), s), ws.buf, ws.off,
                  ht_conv_algos_of(d, s)};
    if (c.p.total > (size_t)INT_MAX)
        ht_die(HT_ERUNTIME, "nn: %s: one sample's column matrix (%d x %d) exceeds 2^31 floats", op,
               c.p.K, c.p.P);
    fits(ws, c.p.total, op, "workspace");
    return c;
}

/* Offset of sample b0 in an NCHW tensor of (ch, plane) per sample. */
static size_t at(ht_view v, int b0, int ch, size_t plane) {
    return v.off + (size_t)b0 * ch * plane;
}

/* col(K, n*P) = im2col of samples [b0, b0+n) of x. */
static void im2col(const conv_ctx *c, ht_view x, int b0, int n) {
    const ht_conv2d_shape *s = c->s;
    work(c->d, 0.0, (double)n * s->cin * s->h * s->w + (double)c->p.K * n * c->p.P);
    LAUNCH2(c->d, "conv_im2col", (size_t)n, (size_t)c->p.K, HT_BUF(c->ws), HT_INT(c->wo + c->p.col),
            HT_BUF(x.buf), HT_INT(at(x, b0, s->cin, s->h * s->w)), HT_INT(s->cin), HT_INT(s->h),
            HT_INT(s->w), HT_INT(s->k), HT_INT(s->stride), HT_INT(s->pad), HT_INT(c->p.Ho),
            HT_INT(c->p.Wo), HT_INT(n));
}

/* xp(n, cin, Hp, Wp) = samples [b0, b0+n) of x padded by pad (implicit kernels). */
static void pad_input(const conv_ctx *c, ht_view x, int b0, int n) {
    const ht_conv2d_shape *s = c->s;
    pad_planes(c->d, c->ws, c->wo + c->p.xp, x.buf, at(x, b0, s->cin, s->h * s->w), n * s->cin,
               s->h, s->w, s->pad, c->p.Hp, c->p.Wp);
}

/* ---------------------------------------------------------------- conv2d: forward */

static const char *act_kernel(ht_act act, const char *none, const char *relu, const char *gelu) {
    return act == HT_ACT_RELU ? relu : act == HT_ACT_GELU ? gelu : none;
}

/* The forward product's work for the profile's roofline: 2 cout K N operations, W, the bias
 * and `in` floats of input once, y (and a) written; GELU counted as 12 operations. */
static void fwd_work(ht_dev *d, const ht_conv2d_shape *s, const conv_plan *p, int n, double in,
                     ht_act act) {
    double out = (double)s->cout * n * p->P, acts = act == HT_ACT_NONE ? 0 : 1;
    work(d, 2.0 * out * p->K + out * (1 + acts * (act == HT_ACT_GELU ? 12 : 1)),
         in + (double)s->cout * p->K + s->cout + (1 + acts) * out);
}

/* Per chunk of nb samples, y = W(cout, K) col(K, N) + b and a = act(y) in NCHW:
 *  - tiled, stride 1: one implicit-GEMM kernel reading a padded copy of x, writing y and a
 *    straight from its registers (no column matrix at all);
 *  - tiled, other strides: im2col, then the tiled GEMM with the same fused store;
 *  - CLBlast: im2col, SGEMM into g(cout, N), then one pass that moves it into NCHW adding the
 *    bias and the activation (the pass a linear layer needs for its bias anyway).
 * Batching over the chunk is what pays: per-sample GEMMs are several times slower. */
void ht_conv2d_forward(ht_dev *d, ht_view y, ht_view a, ht_view x, ht_view w, ht_view b, ht_view ws,
                       const ht_conv2d_shape *s, ht_act act) {
    const char *op = "ht_conv2d_forward";
    conv_ctx c = conv_begin(d, s, ws, op);
    const conv_plan *p = &c.p;
    size_t ny = (size_t)s->B * s->cout * p->P;
    fits(x, (size_t)s->B * s->cin * s->h * s->w, op, "x");
    fits(w, (size_t)s->cout * p->K, op, "w");
    fits(y, ny, op, "y");
    if (act != HT_ACT_NONE) fits(a, ny, op, "a");
    if (b.buf) fits(b, (size_t)s->cout, op, "b");
    ht_view av = act == HT_ACT_NONE ? y : a; /* the no-activation kernels do not touch it */
    ht_view bv = b.buf ? b : w;              /* any valid buffer when there is no bias */
    for (int b0 = 0; b0 < s->B; b0 += p->nb) {
        int n = s->B - b0 < p->nb ? s->B - b0 : p->nb, N = n * p->P;
        size_t yo = at(y, b0, s->cout, p->P) - y.off, wo = c.wo;
        if (c.alg.fwd == HT_CONV_ALG_IMPLICIT) {
            const char *k =
                act_kernel(act, "conv_igemm_fwd", "conv_igemm_relu_fwd", "conv_igemm_gelu_fwd");
            pad_input(&c, x, b0, n);
            size_t gws[3] = {((size_t)p->Wo + 15) / 16, 0, (size_t)n * p->Ho}, lws[3] = {1, 1, 1};
            tile_rows(d, k, s->cout, &gws[1], &lws[1]);
            fwd_work(d, s, p, n, (double)n * s->cin * p->Hp * p->Wp, act);
            ht_launch(d, k, 3, gws, lws, HT_BUF(y.buf), HT_INT(y.off + yo), HT_BUF(av.buf),
                      HT_INT(av.off + yo), HT_BUF(bv.buf), HT_INT(bv.off), HT_INT(b.buf != NULL),
                      HT_BUF(w.buf), HT_INT(w.off), HT_BUF(c.ws), HT_INT(wo + p->xp),
                      HT_INT(s->cin), HT_INT(s->k), HT_INT(p->Hp), HT_INT(p->Wp), HT_INT(s->cout),
                      HT_INT(p->Ho), HT_INT(p->Wo), HT_INT(n));
            continue;
        }
        im2col(&c, x, b0, n);
        if (c.alg.fwd == HT_CONV_ALG_TILED) {
            const char *k =
                act_kernel(act, "conv_gemm_out", "conv_gemm_out_relu", "conv_gemm_out_gelu");
            fwd_work(d, s, p, n, (double)p->K * N, act);
            LAUNCH_TILES(d, k, s->cout, N, 1, HT_BUF(y.buf), HT_INT(y.off + yo), HT_BUF(av.buf),
                         HT_INT(av.off + yo), HT_BUF(bv.buf), HT_INT(bv.off), HT_INT(b.buf != NULL),
                         HT_BUF(w.buf), HT_INT(w.off), HT_BUF(c.ws), HT_INT(wo + p->col),
                         HT_INT(s->cout), HT_INT(p->K), HT_INT(N), HT_INT(p->P));
            continue;
        }
        ht_sgemm(d, 0, 0, (size_t)s->cout, (size_t)N, (size_t)p->K, 1.0f, w.buf, w.off,
                 (size_t)p->K, c.ws, wo + p->col, (size_t)N, 0.0f, c.ws, wo + p->g, (size_t)N);
        double out = (double)s->cout * N; /* g read, y (and a) written, the bias added */
        work(d, out * (act == HT_ACT_GELU ? 13 : 2), (act == HT_ACT_NONE ? 2 : 3) * out + s->cout);
        LAUNCH2(d, act_kernel(act, "conv_out_fwd", "conv_out_relu_fwd", "conv_out_gelu_fwd"),
                ((size_t)p->P + 15) / 16, (size_t)n * s->cout, HT_BUF(y.buf), HT_INT(y.off + yo),
                HT_BUF(av.buf), HT_INT(av.off + yo), HT_BUF(c.ws), HT_INT(wo + p->g),
                HT_BUF(bv.buf), HT_INT(bv.off), HT_INT(b.buf != NULL), HT_INT(s->cout),
                HT_INT(p->P), HT_INT(n));
    }
}

/* ---------------------------------------------------------------- conv2d: backward */

/* dW(cout, K) [+]= sum over the chunk's N pixels of g col^T (acc: add to dW). */
static void weight_grad(const conv_ctx *c, ht_view dw, int n, int acc) {
    const conv_plan *p = &c->p;
    const ht_conv2d_shape *s = c->s;
    int K = p->K, C = s->cout, N = n * p->P, S, Ls;
    size_t wo = c->wo;
    slices(N, &S, &Ls);
    if (c->alg.dw == HT_CONV_ALG_GEMM) {
        ht_sgemm(c->d, 0, 1, (size_t)C, (size_t)K, (size_t)N, 1.0f, c->ws, wo + p->g, (size_t)N,
                 c->ws, wo + p->col, (size_t)N, acc ? 1.0f : 0.0f, dw.buf, dw.off, (size_t)K);
        return;
    }
    /* tiled: dW^T(K, cout) = col gt in S slices over the pixels; one slice lands in dW
     * directly (implicit kernel), several are summed in order by conv_dw_reduce */
    int direct = 0;
    if (c->alg.dw == HT_CONV_ALG_IMPLICIT) {
        direct = S == 1;
        size_t gws[3] = {((size_t)C + 15) / 16, 0, (size_t)S}, lws[3] = {1, 1, 1};
        tile_rows(c->d, "conv_igemm_dw", K, &gws[1], &lws[1]);
        work(c->d, 2.0 * K * C * N, (double)n * s->cin * p->Hp * p->Wp + (double)C * N +
                                        (double)K * C * (direct ? 1 + acc : S));
        ht_launch(c->d, "conv_igemm_dw", 3, gws, lws, HT_BUF(direct ? dw.buf : c->ws),
                  HT_INT(direct ? dw.off : wo + p->wpart), HT_INT(direct), HT_INT(acc),
                  HT_BUF(c->ws), HT_INT(wo + p->xp), HT_BUF(c->ws), HT_INT(wo + p->gt),
                  HT_INT(s->cin), HT_INT(s->k), HT_INT(p->Hp), HT_INT(p->Wp), HT_INT(C),
                  HT_INT(p->Ho), HT_INT(p->Wo), HT_INT(n), HT_INT(Ls));
    } else {
        tiled_gemm(c->d, c->ws, wo + p->wpart, C, K * C, c->ws, wo + p->col, N, 1, c->ws,
                   wo + p->gt, C, K, C, N, S, Ls);
    }
    if (!direct) work(c->d, (double)S * K * C, (double)K * C * (S + 1 + acc));
    if (!direct)
        LAUNCH2(c->d, "conv_dw_reduce", (size_t)K, (size_t)C, HT_BUF(dw.buf), HT_INT(dw.off),
                HT_BUF(c->ws), HT_INT(wo + p->wpart), HT_INT(K), HT_INT(C), HT_INT(S), HT_INT(acc));
}

/* dx of samples [b0, b0+n) (overwritten): implicit kernel over the padded g, or dcol(K, N) =
 * W^T g (over col, no longer needed) and the col2im gather. */
static void input_grad(const conv_ctx *c, ht_view dx, ht_view w, int b0, int n) {
    const conv_plan *p = &c->p;
    const ht_conv2d_shape *s = c->s;
    int K = p->K, C = s->cout, N = n * p->P;
    size_t wo = c->wo, dxo = at(dx, b0, s->cin, s->h * s->w);
    if (c->alg.dx == HT_CONV_ALG_IMPLICIT) {
        pad_planes(c->d, c->ws, wo + p->gp, c->ws, wo + p->g, C * n, p->Ho, p->Wo, p->q, p->Hq,
                   p->Wq);
        size_t gws[3] = {((size_t)s->w + 15) / 16, 0, (size_t)n * s->h}, lws[3] = {1, 1, 1};
        tile_rows(c->d, "conv_igemm_dx", s->cin, &gws[1], &lws[1]);
        work(c->d, 2.0 * K * C * N, (double)C * K + (double)C * n * p->Hq * p->Wq +
                                        (double)n * s->cin * s->h * s->w);
        ht_launch(c->d, "conv_igemm_dx", 3, gws, lws, HT_BUF(dx.buf), HT_INT(dxo), HT_BUF(w.buf),
                  HT_INT(w.off), HT_BUF(c->ws), HT_INT(wo + p->gp), HT_INT(s->cin), HT_INT(s->h),
                  HT_INT(s->w), HT_INT(s->k), HT_INT(C), HT_INT(p->Hq), HT_INT(p->Wq), HT_INT(n));
        return;
    }
    if (c->alg.dx == HT_CONV_ALG_TILED)
        tiled_gemm(c->d, c->ws, wo + p->col, N, 0, w.buf, w.off, 1, K, c->ws, wo + p->g, N, K, N, C,
                   1, C);
    else
        ht_sgemm(c->d, 1, 0, (size_t)K, (size_t)N, (size_t)C, 1.0f, w.buf, w.off, (size_t)K, c->ws,
                 wo + p->g, (size_t)N, 0.0f, c->ws, wo + p->col, (size_t)N);
    work(c->d, (double)K * N, (double)K * N + (double)n * s->cin * s->h * s->w);
    ht_launch1d(c->d, "conv_col2im", (size_t)n * s->cin * s->h, HT_BUF(dx.buf), HT_INT(dxo),
                HT_BUF(c->ws), HT_INT(wo + p->col), HT_INT(s->cin), HT_INT(s->h), HT_INT(s->w),
                HT_INT(s->k), HT_INT(s->stride), HT_INT(s->pad), HT_INT(p->Ho), HT_INT(p->Wo),
                HT_INT(n));
}

/* Per chunk: the input again as a padded copy (implicit dW) or a column matrix (rebuilt
 * rather than kept: no per-layer memory), g = scale * da * act'(y) in the GEMM layout (for
 * dx and the GEMM dW) and/or gt, its transpose (for the tiled and implicit dW), with bias
 * partials, db from those, dW, dx. Chunks after the first always accumulate into dW/db.
 * Which kernel makes g/gt depends only on the dW algorithm, so the halves (dw or dx alone)
 * compute exactly what the whole backward does. */
void ht_conv2d_backward(ht_dev *d, ht_view dx, ht_view dw, ht_view db, ht_view da, ht_view y,
                        ht_view x, ht_view w, ht_view ws, const ht_conv2d_shape *s, ht_act act,
                        float scale, int accumulate) {
    const char *op = "ht_conv2d_backward";
    conv_ctx c = conv_begin(d, s, ws, op);
    const conv_plan *p = &c.p;
    size_t nx = (size_t)s->B * s->cin * s->h * s->w, ny = (size_t)s->B * s->cout * p->P;
    const int with_w = dw.buf != NULL;
    if (with_w) fits(x, nx, op, "x");
    fits(w, (size_t)s->cout * p->K, op, "w");
    if (with_w) fits(dw, (size_t)s->cout * p->K, op, "dw");
    fits(da, ny, op, "da");
    if (act != HT_ACT_NONE) fits(y, ny, op, "y");
    if (dx.buf) fits(dx, nx, op, "dx");
    if (with_w && db.buf) fits(db, (size_t)s->cout, op, "db");
    if (!with_w && !dx.buf) return;
    const int gt = with_w && c.alg.dw != HT_CONV_ALG_GEMM;        /* tiled/implicit dW */
    const int g = dx.buf != NULL || (with_w && c.alg.dw == HT_CONV_ALG_GEMM); /* dx, GEMM dW */
    const char *k =
        gt ? act_kernel(act, "conv_grad_out_t", "conv_grad_out_t_relu", "conv_grad_out_t_gelu")
           : act_kernel(act, "conv_grad_out", "conv_grad_out_relu", "conv_grad_out_gelu");
    ht_view yv = act == HT_ACT_NONE ? da : y; /* conv_grad_out does not read it */
    int C = s->cout;
    for (int b0 = 0; b0 < s->B; b0 += p->nb) {
        int n = s->B - b0 < p->nb ? s->B - b0 : p->nb, acc = accumulate || b0 > 0;
        size_t yo = at(y, b0, C, p->P) - y.off, wo = c.wo;
        if (with_w && c.alg.dw == HT_CONV_ALG_IMPLICIT)
            pad_input(&c, x, b0, n);
        else if (with_w)
            im2col(&c, x, b0, n);
        int parts = n; /* bias partials per channel */
        double out = (double)C * n * p->P; /* da (and y) read, g and/or gt written */
        work(d, out * (act == HT_ACT_GELU ? 22 : 3),
             out * ((act == HT_ACT_NONE ? 1 : 2) + (g ? 1 : 0) + (gt ? 1 : 0)));
        if (gt) {
            size_t gws[3] = {(size_t)n, ((size_t)C + 15) / 16, (size_t)pixel_blocks(p->P)};
            parts = n * pixel_blocks(p->P);
            ht_launch(d, k, 3, gws, NULL, HT_BUF(c.ws), HT_INT(wo + p->g), HT_INT(g),
                      HT_BUF(c.ws), HT_INT(wo + p->gt), HT_BUF(c.ws), HT_INT(wo + p->bpart),
                      HT_BUF(da.buf), HT_INT(da.off + yo), HT_BUF(yv.buf), HT_INT(yv.off + yo),
                      HT_FLOAT(scale), HT_INT(C), HT_INT(p->P), HT_INT(n));
        } else {
            LAUNCH2(d, k, (size_t)n, (size_t)C, HT_BUF(c.ws), HT_INT(wo + p->g), HT_BUF(c.ws),
                    HT_INT(wo + p->bpart), HT_BUF(da.buf), HT_INT(da.off + yo), HT_BUF(yv.buf),
                    HT_INT(yv.off + yo), HT_FLOAT(scale), HT_INT(C), HT_INT(p->P), HT_INT(n));
        }
        if (with_w && db.buf) work(d, (double)parts * C, (double)C * (parts + 1 + acc));
        if (with_w && db.buf)
            ht_launch1d(d, "conv_bias_grad", (size_t)C, HT_BUF(db.buf), HT_INT(db.off),
                        HT_BUF(c.ws), HT_INT(wo + p->bpart), HT_INT(C), HT_INT(parts), HT_INT(acc));
        if (with_w) weight_grad(&c, dw, n, acc);
        if (dx.buf) input_grad(&c, dx, w, b0, n);
    }
}

/* ---------------------------------------------------------------- pooling */

/* Checks the shape and the input and output views. */
static void pool_begin(const ht_pool2d_shape *s, ht_view in, ht_view out, const char *op,
                       const char *in_name, const char *out_name) {
    check_or_die(ht_pool2d_check(s), op);
    fits(in, (size_t)s->B * s->c * s->h * s->w, op, in_name);
    fits(out, (size_t)s->B * s->c * ht_pool2d_oh(s) * ht_pool2d_ow(s), op, out_name);
}

/* A pooling pass's work for the profile's roofline: `reads` and `writes` of the input's and
 * output's sizes, an operation an input element. */
static void pool_work(ht_dev *d, const ht_pool2d_shape *s, double in_reads, double out_moves) {
    double in = (double)s->B * s->c * s->h * s->w;
    double out = (double)s->B * s->c * ht_pool2d_oh(s) * ht_pool2d_ow(s);
    work(d, in, in_reads * in + out_moves * out);
}

/* 2x2 windows at stride 2 without padding have kernels of their own (8 windows per step). */
static int pool_is_2x2(const ht_pool2d_shape *s) { return s->k == 2 && s->stride == 2 && !s->pad; }

/* Output rows per work-item of the 2x2 kernels: whole planes while that leaves at least 64
 * items (PoCL spent more time starting one-row items than pooling), else fewer. */
static int pool2_rows(int planes, int Ho) {
    int R = Ho;
    while (R > 1 && (long)planes * ((Ho + R - 1) / R) < 64)
        R = (R + 1) / 2;
    return R;
}
static size_t pool2_items(int planes, int Ho, int R) { return (size_t)planes * ((Ho + R - 1) / R); }

void ht_maxpool2d_forward(ht_dev *d, ht_view y, ht_view x, const ht_pool2d_shape *s) {
    pool_begin(s, x, y, "ht_maxpool2d_forward", "x", "y");
    pool_work(d, s, 1, 1); /* x read, y written */
    int Ho = ht_pool2d_oh(s), Wo = ht_pool2d_ow(s), planes = s->B * s->c;
    if (pool_is_2x2(s)) {
        int R = pool2_rows(planes, Ho);
        ht_launch1d(d, "pool_max2_fwd", pool2_items(planes, Ho, R), HT_BUF(y.buf), HT_INT(y.off),
                    HT_BUF(x.buf), HT_INT(x.off), HT_INT(s->h), HT_INT(s->w), HT_INT(Ho),
                    HT_INT(Wo), HT_INT(planes), HT_INT(R));
        return;
    }
    ht_launch1d(d, "pool_max_fwd", (size_t)planes * Ho, HT_BUF(y.buf), HT_INT(y.off), HT_BUF(x.buf),
                HT_INT(x.off), HT_INT(s->h), HT_INT(s->w), HT_INT(Ho), HT_INT(Wo), HT_INT(s->k),
                HT_INT(s->stride), HT_INT(s->pad), HT_INT(planes));
}

void ht_maxpool2d_backward(ht_dev *d, ht_view dx, ht_view dy, ht_view x, const ht_pool2d_shape *s) {
    const char *op = "ht_maxpool2d_backward";
    pool_begin(s, dx, dy, op, "dx", "dy");
    fits(x, (size_t)s->B * s->c * s->h * s->w, op, "x");
    int Ho = ht_pool2d_oh(s), Wo = ht_pool2d_ow(s), planes = s->B * s->c;
    pool_work(d, s, 2, 1); /* x read, dx written, dy read */
    if (pool_is_2x2(s)) {
        int R = pool2_rows(planes, Ho);
        ht_launch1d(d, "pool_max2_bwd", pool2_items(planes, Ho, R), HT_BUF(dx.buf),
                    HT_INT(dx.off), HT_BUF(dy.buf), HT_INT(dy.off), HT_BUF(x.buf), HT_INT(x.off),
                    HT_INT(s->h), HT_INT(s->w), HT_INT(Ho), HT_INT(Wo), HT_INT(planes), HT_INT(R));
        return;
    }
    ht_launch1d(d, "pool_max_bwd", (size_t)planes, HT_BUF(dx.buf), HT_INT(dx.off), HT_BUF(dy.buf),
                HT_INT(dy.off), HT_BUF(x.buf), HT_INT(x.off), HT_INT(s->h), HT_INT(s->w),
                HT_INT(Ho), HT_INT(Wo), HT_INT(s->k), HT_INT(s->stride), HT_INT(s->pad),
                HT_INT(planes));
}

void ht_avgpool2d_forward(ht_dev *d, ht_view y, ht_view x, const ht_pool2d_shape *s,
                          int include_pad) {
    pool_begin(s, x, y, "ht_avgpool2d_forward", "x", "y");
    pool_work(d, s, 1, 1);
    int Ho = ht_pool2d_oh(s), Wo = ht_pool2d_ow(s), planes = s->B * s->c;
    ht_launch1d(d, "pool_avg_fwd", (size_t)planes * Ho, HT_BUF(y.buf), HT_INT(y.off), HT_BUF(x.buf),
                HT_INT(x.off), HT_INT(s->h), HT_INT(s->w), HT_INT(Ho), HT_INT(Wo), HT_INT(s->k),
                HT_INT(s->stride), HT_INT(s->pad), HT_INT(planes), HT_INT(include_pad != 0));
}

void ht_avgpool2d_backward(ht_dev *d, ht_view dx, ht_view dy, const ht_pool2d_shape *s,
                           int include_pad) {
    pool_begin(s, dx, dy, "ht_avgpool2d_backward", "dx", "dy");
    pool_work(d, s, 1, 1); /* dx written, dy read */
    int Ho = ht_pool2d_oh(s), Wo = ht_pool2d_ow(s), planes = s->B * s->c;
    ht_launch1d(d, "pool_avg_bwd", (size_t)planes, HT_BUF(dx.buf), HT_INT(dx.off), HT_BUF(dy.buf),
                HT_INT(dy.off), HT_INT(s->h), HT_INT(s->w), HT_INT(Ho), HT_INT(Wo), HT_INT(s->k),
                HT_INT(s->stride), HT_INT(s->pad), HT_INT(planes), HT_INT(include_pad != 0));
}
