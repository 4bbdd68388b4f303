/* Row-major SGEMM on CPU devices with the packed register-tiled kernels of cl/gemm.cl
 * instead of CLBlast: both operands are packed into panels in a per-device workspace (B's
 * 16-column panels first, then A's 6-row panels), then gemm_packed computes the 6x16 tiles
 * (see cl/gemm.cl for the scheme and why). Where packing an operand does not pay, it is read
 * in place: A by gemm_rows (B still packed), both by gemm_direct (B not transposed); one
 * launch fewer each, and for the small products (GPT-small's 1024 x 128..512 x 128..512, the
 * n = 10 layer) the packing was a sizeable part of the time. kind_auto says which, per shape.
 * Chosen by ht_sgemm_at (blas.c) where measurement found it faster than CLBlast (choose.c);
 * ht_dev_opts.gemm (default from $HT_GEMM) forces either path (tests, benchmarks, the
 * CLBlast tuner). Each element's sum over k runs in order, the same fma chain every way. */
#include "ocl/internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/gemm_tiles.h"

/* The numbers of cl/gemm.cl (core/gemm_tiles.h, which the memory model reads too). */
#define TM HT_GEMM_TM
#define TN HT_GEMM_TN
#define PACK_RUN HT_GEMM_PACK_RUN
#define PACK_K HT_GEMM_PACK_K
#define PACK_L HT_GEMM_PACK_L

/* Whether every index the kernels compute fits in an int. */
static int fits_int(size_t a, size_t b) { return a <= (size_t)INT_MAX && b <= (size_t)INT_MAX - a; }

static size_t packed_b(size_t n, size_t k) { return ht_gemm_packed_b(n, k); }
static size_t packed_a(size_t m, size_t k) { return ht_gemm_packed_a(m, k); }

int ht_gemm_tiled_wanted(ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k,
                         const ht_buf *a, const ht_buf *b, const ht_buf *c) {
    (void)trans_a, (void)trans_b;
    if (d->gemm != HT_GEMM_AUTO && d->gemm != HT_GEMM_TILED) return 0;
    if (d->gemm == HT_GEMM_AUTO && ht_gemm_choose(d) != HT_GEMM_TILED) return 0;
    if (m > (size_t)INT_MAX || n > (size_t)INT_MAX || k > (size_t)INT_MAX / TN) return 0;
    size_t fa = a->size / sizeof(float), fb = b->size / sizeof(float), fc = c->size / sizeof(float);
    return fits_int(fa, TN) && fits_int(fb, TN) && fits_int(fc, TN) &&
           fits_int(packed_b(n, k), packed_a(m, k));
}

static ht_buf *workspace(ht_dev *d, size_t floats) {
    size_t bytes = (floats ? floats : 1) * sizeof(float);
    if (!d->gemm_ws || d->gemm_ws->size < bytes) {
        if (d->gemm_ws) ht_buf_free(d->gemm_ws);
        d->gemm_ws = ht_buf_new(d, bytes, "gemm workspace");
    }
    return d->gemm_ws;
}

/* Packs X(rows, k), X(r, l) = x[off + r*sr + l*sl] (sr or sl is 1), into panels of w rows
 * at ws + wso; the range follows the contiguous direction (gemm_pack in cl/gemm.cl). */
static void pack(ht_dev *d, ht_buf *ws, size_t wso, const ht_buf *x, size_t off, size_t sr,
                 size_t sl, size_t rows, size_t k, size_t w, const char *file, int line) {
    size_t panels = (rows + w - 1) / w, per = PACK_RUN / w;
    size_t gws[2] = {(panels + per - 1) / per, (k + PACK_K - 1) / PACK_K}, lws[2] = {1, 1};
    if (sr != 1) gws[0] = (k + PACK_L - 1) / PACK_L, gws[1] = panels;
    const char *name = w == TM ? (sr == 1 ? "gemm_pack6_run" : "gemm_pack6_gather")
                               : (sr == 1 ? "gemm_pack16_run" : "gemm_pack16_gather");
    ht_prof_work(d, 0.0, 2.0 * sizeof(float) * (double)rows * (double)k); /* read, write */
    ht_launch_at(d, name, 2, gws, lws, 8,
                 (ht_arg[]){HT_BUF(ws), HT_INT(wso), HT_BUF(x), HT_INT(off), HT_INT(sr), HT_INT(sl),
                            HT_INT(rows), HT_INT(k)},
                 file, line);
}

/* Which of the three ways a product runs: HT_TILED_PACKED (pack A and B, gemm_packed),
 * HT_TILED_ROWS (pack B, read A in place: gemm_rows) or HT_TILED_DIRECT (both in place:
 * gemm_direct; B not transposed). All three run the same fma chain over l for each element
 * of C, so the choice changes the time only, never the bits. Forced by
 * ht_gemm_tiled_force (tests) or $HT_GEMM_KERNEL=packed|rows|direct (benchmarks), where the
 * shape allows it; else by kind_auto. */
static int kind_forced(const ht_dev *d) {
    static int env = -1;
    if (d->gemm_kind) return d->gemm_kind;
    if (env == -1) {
        const char *e = getenv("HT_GEMM_KERNEL");
        env = 0;
        if (e && !strcmp(e, "packed")) env = HT_TILED_PACKED;
        if (e && !strcmp(e, "rows")) env = HT_TILED_ROWS;
        if (e && !strcmp(e, "direct")) env = HT_TILED_DIRECT;
    }
    return env;
}

void ht_gemm_tiled_force(ht_dev *d, int kind) { d->gemm_kind = kind; }

/* From interleaved timings of the three ways at the benchmark models' shapes, in CPU time
 * (bench_sgemm --kinds; BENCHMARKS.md 2026-11-28 15:13, a loaded machine): A read in place
 * (its rows along k: six streams) took 1-15% less than packing it at GPT-small's
 * 1024 x 128..512 x 128..512 products and the MLP's forwards, and 3% more at k = 3072 (the
 * 85M GPT's fc2 forward: rows 12 KiB apart share one L1 set). A^T in place (six neighbours
 * a step, a new line every step) took 10-40% more at every TN shape but the one with at most
 * 16 rows. Both in place paid only there (the n = 10 layer's weight gradient: 13% less CPU,
 * 21% less wall, no 1 MB copy of B). Which way runs never changes the bits. */
static int kind_auto(int trans_a, int trans_b, size_t m, size_t n, size_t k) {
    /* the rule is core/gemm_tiles.h's, which the memory model sizes the workspace by */
    _Static_assert((int)HT_GEMM_WAY_PACKED == (int)HT_TILED_PACKED &&
                       (int)HT_GEMM_WAY_ROWS == (int)HT_TILED_ROWS &&
                       (int)HT_GEMM_WAY_DIRECT == (int)HT_TILED_DIRECT,
                   "core/gemm_tiles.h's ways are ocl.h's");
    return ht_gemm_way(trans_a, trans_b, m, n, k);
}

static int kind_of(const ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k,
                   size_t a_off, size_t lda) {
    int kind = kind_forced(d);
    if (!kind) kind = kind_auto(trans_a, trans_b, m, n, k);
    if (kind == HT_TILED_DIRECT && trans_b) kind = HT_TILED_ROWS;
    /* A's in-place indices (rows past M clamp to M-1) must fit an int */
    if (kind != HT_TILED_PACKED && !fits_int(a_off, (trans_a ? k : m) * lda))
        kind = HT_TILED_PACKED;
    return kind;
}

/* Work-groups of up to 16 tiles down a column (one B panel), fewer where there are so few
 * columns that each compute unit would not get about 4 groups (the n = 10 layer). */
static void range(ht_dev *d, const char *kernel, size_t m, size_t n, size_t gws[2],
                  size_t lws[2]) {
    size_t tiles_m = (m + TM - 1) / TM, tiles_n = (n + TN - 1) / TN;
    size_t want = 4 * (size_t)(d->info.compute_units ? d->info.compute_units : 1);
    size_t l1 = tiles_m * tiles_n / want, cap = ht_kernel_max_wg(d, kernel);
    if (l1 > 16) l1 = 16;
    if (l1 > tiles_m) l1 = tiles_m;
    if (l1 > cap) l1 = cap;
    if (l1 < 1) l1 = 1;
    gws[0] = tiles_n, gws[1] = (tiles_m + l1 - 1) / l1 * l1, lws[0] = 1, lws[1] = l1;
}

void ht_gemm_tiled(ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                   const ht_buf *a, size_t a_off, size_t lda, const ht_buf *b, size_t b_off,
                   size_t ldb, float beta, ht_buf *c, size_t c_off, size_t ldc, const char *file,
                   int line) {
    int kind = kind_of(d, trans_a, trans_b, m, n, k, a_off, lda);
    size_t pb = packed_b(n, k);
    ht_buf *ws = kind == HT_TILED_DIRECT
                     ? NULL
                     : workspace(d, pb + (kind == HT_TILED_ROWS ? 0 : packed_a(m, k)));
    if (k > 0 && kind != HT_TILED_DIRECT) {
        /* B(l, j) = b[j*ldb + l] (B^T stored) or b[l*ldb + j]; A(i, l) likewise */
        pack(d, ws, 0, b, b_off, trans_b ? ldb : 1, trans_b ? 1 : ldb, n, k, TN, file, line);
        if (kind == HT_TILED_PACKED)
            pack(d, ws, pb, a, a_off, trans_a ? 1 : lda, trans_a ? lda : 1, m, k, TM, file, line);
    }
    const char *kernel = kind == HT_TILED_DIRECT ? "gemm_direct"
                         : kind == HT_TILED_ROWS ? "gemm_rows"
                                                 : "gemm_packed";
    size_t gws[2], lws[2];
    range(d, kernel, m, n, gws, lws);
    /* profiled as CLBlast's calls are: hetprof reads the GEMM shapes from these names */
    char name[96];
    snprintf(name, sizeof name, "sgemm %c%c %zux%zux%zu", trans_a ? 'T' : 'N', trans_b ? 'T' : 'N',
             m, n, k);
    d->prof_name = name;
    /* A(i, l) = a[a_off + i*sai + l*sal] */
    int sai = trans_a ? 1 : (int)lda, sal = trans_a ? (int)lda : 1;
    ht_gemm_work(d, m, n, k, beta);
    if (kind == HT_TILED_DIRECT)
        ht_launch_at(d, kernel, 2, gws, lws, 15,
                     (ht_arg[]){HT_BUF(c), HT_INT(c_off), HT_INT(ldc), HT_BUF(a), HT_INT(a_off),
                                HT_INT(sai), HT_INT(sal), HT_BUF(b), HT_INT(b_off), HT_INT(ldb),
                                HT_INT(m), HT_INT(n), HT_INT(k), HT_FLOAT(alpha), HT_FLOAT(beta)},
                     file, line);
    else if (kind == HT_TILED_ROWS)
        ht_launch_at(d, kernel, 2, gws, lws, 14,
                     (ht_arg[]){HT_BUF(c), HT_INT(c_off), HT_INT(ldc), HT_BUF(a), HT_INT(a_off),
                                HT_INT(sai), HT_INT(sal), HT_BUF(ws), HT_INT(0), HT_INT(m),
                                HT_INT(n), HT_INT(k), HT_FLOAT(alpha), HT_FLOAT(beta)},
                     file, line);
    else
        ht_launch_at(d, kernel, 2, gws, lws, 11,
                     (ht_arg[]){HT_BUF(c), HT_INT(c_off), HT_INT(ldc), HT_BUF(ws), HT_INT(pb),
                                HT_INT(0), HT_INT(m), HT_INT(n), HT_INT(k), HT_FLOAT(alpha),
                                HT_FLOAT(beta)},
                     file, line);
    d->prof_name = NULL;
}
