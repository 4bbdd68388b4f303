/* Our own SGEMM kernels (src/ocl/gemm.c, cl/gemm.cl), forced (ht_dev_opts.gemm =
 * HT_GEMM_TILED, what HT_GEMM=tiled sets) whatever the device's measured choice, which on
 * rusticl and GPUs is CLBlast: so they are tested on every device the suite runs on
 * (tests/integration/rusticl.t runs this file on Mesa's rusticl too). Each product is checked
 * against a plain-C reference in double on odd shapes: partial 6-row and 16-column tiles,
 * k = 1, k past the packing chunks, all four transposes, offsets into A, B and C, leading
 * dimensions wider than the operands (the pad must stay untouched, as must C before its
 * offset), alpha and beta, beta = 0 over a NaN-filled C (never read), k = 0 (C = beta C).
 * Each product runs each of the tiled path's ways, forced: both operands packed
 * (gemm_packed), A read in place (gemm_rows), both read in place (gemm_direct, B not
 * transposed), and gemm.c's own pick; the device's launch counts prove which ran (CLBlast
 * packs nothing with our kernels), and every way must give the packed way's bits. Shapes
 * stay small: our kernels run ~0.03 GFLOP/s on llvmpipe. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "ocl/ocl.h"
#include "ref.h"
#include "tap.h"
#include "testdev.h"

/* Launches since the last reset, from the device's profile report ("NAME  CALLS ..."):
 * of the four packing kernels (B's 16-column panels, A's 6-row panels; "run" when the
 * panel's rows are contiguous, "gather" when not) and of the products ("sgemm ..." lines:
 * ours and CLBlast's report under that name). Resets the profile. */
typedef struct counts {
    long b_run, b_gather, a_run, a_gather, products;
} counts;

static counts launches(ht_dev *d) {
    counts n = {0};
    FILE *f = tmpfile();
    if (!f) return (counts){-1, -1, -1, -1, -1};
    ht_dev_profile_report(d, f, NULL);
    rewind(f);
    char line[512], k[256];
    long c;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "sgemm ", 6)) {
            n.products++;
            continue;
        }
        if (sscanf(line, "%255s %ld", k, &c) != 2) continue;
        if (!strcmp(k, "gemm_pack16_run")) n.b_run += c;
        if (!strcmp(k, "gemm_pack16_gather")) n.b_gather += c;
        if (!strcmp(k, "gemm_pack6_run")) n.a_run += c;
        if (!strcmp(k, "gemm_pack6_gather")) n.a_gather += c;
    }
    fclose(f);
    ht_dev_profile_reset(d);
    return n;
}

static const char *const KIND[] = {"auto", "gemm_packed", "gemm_rows", "gemm_direct"};

/* One product with A, B and C at float offsets oa, ob, oc in their buffers and leading
 * dimensions pad wider than the operands, computed each of the tiled path's ways
 * (ht_gemm_tiled_force: packed, rows, direct where B is not transposed, then gemm.c's own
 * pick; `all` 0: packed and gemm.c's pick only, for the larger shapes, as our kernels run
 * ~0.03 GFLOP/s on rusticl), each checked against the reference, the launches proving the
 * way, and every way's C equal bit for bit to the packed way's (gemm.c: one fma chain over l
 * for every element, which the pipelines' equality with one process relies on). */
static void check_ways(ht_dev *d, int all, int ta, int tb, int m, int n, int k, float alpha,
                       float beta, int pad, size_t oa, size_t ob, size_t oc) {
    ref_gemm_case g = ref_gemm_case_new(ta, tb, m, n, k, alpha, beta, pad, oa, ob, oc);
    ht_buf *ba = ht_buf_new(d, g.na * 4, "A"), *bb = ht_buf_new(d, g.nb * 4, "B"),
           *bc = ht_buf_new(d, g.nc * 4, "C");
    float *packed = ht_xmalloc(g.nc * 4);
    ht_buf_write(d, ba, 0, g.na * 4, g.a);
    ht_buf_write(d, bb, 0, g.nb * 4, g.b);
    static const int order[] = {HT_TILED_PACKED, HT_TILED_ROWS, HT_TILED_DIRECT, HT_TILED_AUTO};
    for (int o = 0; o < 4; o++) {
        int kind = order[o];
        if (!all && kind != HT_TILED_PACKED && kind != HT_TILED_AUTO) continue;
        if (kind == HT_TILED_DIRECT && tb) continue; /* gemm_direct reads B's rows in place */
        ht_buf_write(d, bc, 0, g.nc * 4, g.c0);
        ht_dev_profile_reset(d);
        ht_gemm_tiled_force(d, kind);
        ht_sgemm(d, ta, tb, m, n, k, alpha, ba, oa, g.lda, bb, ob, g.ldb, beta, bc, oc, g.ldc);
        ht_gemm_tiled_force(d, HT_TILED_AUTO);
        ht_buf_read(d, bc, 0, g.nc * 4, g.c);
        ref_gemm_diff e = ref_gemm_check(&g);
        counts n_ = launches(d);
        /* B(l, j): its panel rows (j) are contiguous unless B is stored transposed; A(i, l)
         * likewise unless A is not transposed (or a leading dimension is 1). k = 0 packs
         * nothing; gemm_rows packs no A, gemm_direct nothing. Auto's way is gemm.c's to
         * pick: any of the three. */
        int b_run = !tb || g.ldb == 1, a_run = ta || g.lda == 1; /* gemm.c: stride 1 */
        long bp = b_run ? n_.b_run : n_.b_gather, bo = b_run ? n_.b_gather : n_.b_run;
        long ap = a_run ? n_.a_run : n_.a_gather, ao = a_run ? n_.a_gather : n_.a_run;
        int paths = n_.products == 1 && bo == 0 && ao == 0;
        if (k == 0 || kind == HT_TILED_DIRECT) paths = paths && bp == 0 && ap == 0;
        else if (kind == HT_TILED_ROWS) paths = paths && bp >= 1 && ap == 0;
        else if (kind == HT_TILED_PACKED) paths = paths && bp >= 1 && ap >= 1;
        if (kind == HT_TILED_PACKED) memcpy(packed, g.c, g.nc * 4);
        int same = !memcmp(packed, g.c, g.nc * 4);
        tap_ok(!e.bad && !e.touched && paths && same,
               "tiled %c%c m=%d n=%d k=%d alpha=%g beta=%g pad %d offsets %zu/%zu/%zu, %s%s: "
               "%zu of %zu outside %.1e (worst inside %.2e), %zu outside C's window changed, "
               "%s gemm_packed's bits",
               ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, beta, pad, oa, ob, oc, KIND[kind],
               k == 0 ? " (no packing)" : "", e.bad, (size_t)m * n, e.tol, e.worst, e.touched,
               same ? "equal to" : "NOT equal to");
        if (e.bad)
            tap_diag("first bad element %zu: got %g, expected %g", e.first,
                     (double)g.c[e.first], (double)g.r[e.first]);
        if (!paths)
            tap_diag("launches: B packs %ld run %ld gather, A packs %ld run %ld gather, %ld "
                     "products",
                     n_.b_run, n_.b_gather, n_.a_run, n_.a_gather, n_.products);
    }
    free(packed);
    ht_buf_free(ba), ht_buf_free(bb), ht_buf_free(bc);
    ref_gemm_case_free(&g);
}

static void check(ht_dev *d, int ta, int tb, int m, int n, int k, float alpha, float beta, int pad,
                  size_t oa, size_t ob, size_t oc) {
    check_ways(d, (size_t)m * n * k <= 40000, ta, tb, m, n, k, alpha, beta, pad, oa, ob, oc);
}

int main(void) {
    int idx = test_dev_index();
    ht_dev_opts o = ht_dev_opts_default();
    o.gemm = HT_GEMM_TILED;
    o.profile = HT_PROF_EVENTS; /* launch counts: which kernels ran */
    ht_dev *d;
    ht_exit_on_error(ht_dev_open(&d, idx, &o));
    printf("# device: %s (%s)\n", ht_dev_info(d)->name, ht_dev_info(d)->platform);
    const ht_gemm_choice *ch = ht_dev_gemm_choice(d);
    tap_ok(ch->path == HT_GEMM_TILED, "forced: the device runs %s",
           ht_gemm_path_name(ch->path));

    /* every transpose at partial tiles on both axes, both paths; degenerate sizes: one row,
     * one column, k = 1 */
    for (int i = 0; i < ref_gemm_nshapes; i++) {
        const ref_gemm_shape *s = &ref_gemm_shapes[i];
        check(d, s->ta, s->tb, s->m, s->n, s->k, s->alpha, s->beta, s->pad, s->oa, s->ob, s->oc);
    }
    /* k past the packing chunks (16 along k per run work-item, 256 per gather work-item),
     * more panels than one packing work-item takes (128 / 16 = 8 of B, 128 / 6 = 21 of A) */
    check(d, 1, 0, 131, 145, 40, 1.0f, 0.5f, 7, 11, 0, 3);
    check(d, 0, 1, 23, 33, 517, 0.25f, 0.0f, 1, 0, 9, 0);
    check(d, 0, 0, 5, 16, 263, 1.0f, 0.25f, 2, 1, 1, 1); /* n = 16: one panel, gemm_rows */
    check(d, 1, 1, 12, 48, 18, -2.0f, 1.0f, 0, 0, 0, 0); /* whole tiles, both axes */
    /* m, k > 16 with B not transposed; n = 16 */
    check(d, 0, 0, 29, 37, 23, 0.5f, 1.0f, 3, 2, 5, 1);
    check(d, 0, 0, 25, 16, 263, 1.0f, 0.25f, 2, 1, 1, 1);
    /* k <= 16 with many rows (the n = 10 layer's input gradient) */
    check(d, 0, 0, 67, 37, 10, 1.0f, 0.0f, 3, 5, 3, 7);
    check(d, 1, 0, 71, 50, 16, -0.5f, 1.5f, 1, 3, 0, 2);
    /* m <= 16 with k long (the n = 10 layer's weight gradient), both A layouts, partial row
     * and column tiles, m = 16 exactly; beta = 0 over NaN and beta != 0 */
    check(d, 1, 0, 10, 53, 70, 1.0f, 0.0f, 2, 3, 3, 3);
    check(d, 0, 0, 16, 35, 300, 2.0f, 0.5f, 0, 1, 2, 0);
    /* every way over several row tiles and work-groups (7 x 2 tiles), A^T and B^T */
    check_ways(d, 1, 1, 1, 40, 20, 30, 1.0f, 0.0f, 1, 7, 2, 5);
    check_ways(d, 1, 1, 0, 40, 20, 30, 0.5f, 1.0f, 0, 1, 0, 3);
    /* k = 0: C = beta C, no packing */
    check(d, 0, 0, 6, 20, 0, 1.0f, 0.5f, 1, 0, 0, 2);
    ht_dev_close(d);
    return tap_done();
}
