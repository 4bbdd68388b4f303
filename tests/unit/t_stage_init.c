/* A pipeline stage attached on its own (ht_model_attach_stage, issue 24: start-up without the
 * whole model): for every stage of a GPT cut in three and for single layers, the window's
 * initial parameters equal the whole model's at the same offsets (the one-process run's
 * values), and its buffers hold the window and the stage's activations only, not the
 * model's. */
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "tap.h"
#include "testdev.h"

enum { V = 64, T = 8, L = 3, C = 32, H = 2, B = 2 };
static const uint64_t SEED = 7;

static int gpt(ht_model *m, ht_dev *d) { return ht_model_gpt(m, d, V, T, L, C, H, 0.0f, B, 0); }

/* Parameters [*a, *a + *n) of layers [lo, hi). */
static void window(const ht_model *m, int lo, int hi, size_t *a, size_t *n) {
    size_t e = 0;
    int any = 0;
    *a = 0;
    for (int i = lo; i < hi; i++) {
        if (!m->layers[i].nparams) continue;
        if (!any) *a = m->layers[i].woff;
        e = m->layers[i].woff + m->layers[i].nparams, any = 1;
    }
    *n = any ? e - *a : 0;
}

static void check_stage(ht_dev *d, const float *whole, const ht_model *w, int lo, int hi) {
    ht_model m;
    if (!tap_ok(gpt(&m, NULL) == HT_OK, "layers [%d, %d): described", lo, hi)) return;
    size_t a, n;
    window(&m, lo, hi, &a, &n);
    ht_model_attach_stage(&m, d, a, n, lo, hi);
    ht_model_init_params(&m, SEED);
    float *got = malloc((n ? n : 1) * sizeof(float));
    if (n) ht_buf_read(d, m.params, 0, n * sizeof(float), got);
    tap_ok(n > 0 && n < w->nparams && !memcmp(got, whole + a, n * sizeof(float)),
           "layers [%d, %d) (%s .. %s): parameters [%zu, %zu) of %zu initialised as the whole "
           "model's, bit for bit", lo, hi, m.layers[lo].name, m.layers[hi - 1].name, a, a + n,
           w->nparams);
    size_t act, save, work;
    ht_model_stage_floats(&m, lo, hi, B, &act, &save, &work);
    tap_ok(ht_buf_size(m.params) == n * sizeof(float) &&
               ht_buf_size(m.grads) == n * sizeof(float) &&
               ht_buf_size(m.acts) == act * sizeof(float) && act < w->act_floats &&
               ht_buf_size(m.saved) == (save ? save : 1) * sizeof(float),
           "layers [%d, %d): buffers of the window (%zu floats) and the stage's activations "
           "(%zu floats of the model's %zu) only", lo, hi, n, act, w->act_floats);
    free(got);
    ht_model_free(&m);
}

/* A tied GPT (the head reads wte): the last stage holds wte's copy as one more window (before
 * its own: windows ascend), initialised as the whole model's wte; the head reads it there; a
 * middle stage holds none; ht_model_put fills the window and the copy from layout ranges. */
static void check_tied(ht_dev *d) {
    ht_model w, m;
    if (!tap_ok(ht_model_gpt(&w, d, V, T, L, C, H, 0.0f, B, 1) == HT_OK &&
                    ht_model_gpt_desc(&m, V, T, L, C, H, 0.0f, B, 1) == HT_OK,
                "tied GPT built whole and described"))
        return;
    ht_model_init_params(&w, SEED);
    float *whole = malloc(w.nparams * sizeof(float));
    ht_buf_read(d, w.params, 0, w.nparams * sizeof(float), whole);
    const int n = w.nlayers;
    const size_t VC = (size_t)V * C;
    size_t a, np, f;
    ht_pwin win[HT_MODEL_MAX_WINDOWS];
    window(&m, 2, 3, &a, &np);
    int nw = ht_model_stage_windows(&m, a, np, 2, 3, win, &f);
    tap_ok(nw == 1 && win[0].base == a && f == np, "tied: a middle stage needs no copy of wte");
    window(&m, 0, 2, &a, &np);
    nw = ht_model_stage_windows(&m, a, np, 0, 2, win, &f);
    tap_ok(nw == 1 && a == 0 && f == np, "tied: the first stage holds wte in its window");
    window(&m, n - 2, n, &a, &np);
    nw = ht_model_stage_windows(&m, a, np, n - 2, n, win, &f);
    tap_ok(nw == 2 && win[0].base == 0 && win[0].n == VC && win[0].at == 0 && win[1].base == a &&
               win[1].n == np && win[1].at == VC && f == np + VC,
           "tied: the last stage needs wte's %zu floats at 0 as a window before its own (got %d "
           "windows, the first %zu floats at %zu)", VC, nw, win[0].n, win[0].base);
    ht_model_attach_stage(&m, d, a, np, n - 2, n);
    ht_model_init_params(&m, SEED);
    const size_t held = m.pres;
    float *got = malloc(held * sizeof(float));
    ht_buf_read(d, m.params, 0, held * sizeof(float), got);
    tap_ok(ht_buf_size(m.params) == held * sizeof(float) && held == np + VC && m.nwin == 2 &&
               !memcmp(got, whole, VC * sizeof(float)) &&
               !memcmp(got + VC, whole + a, np * sizeof(float)),
           "tied: the last stage's copy of wte and its window initialised as the whole "
           "model's, bit for bit");
    const ht_layer *head = &m.layers[n - 1];
    tap_ok(head->t[0].tied && ht_model_span(&m, head->t[0].off, VC) == 0 &&
               ht_model_span(&m, a, np) == VC && ht_model_span(&m, VC, 1) == (size_t)-1,
           "tied: the head's weight lives at the copy (float 0), the window at %zu, wpe nowhere",
           VC);
    float *src = malloc(w.nparams * sizeof(float)), *put = calloc(held, sizeof(float));
    for (size_t i = 0; i < w.nparams; i++)
        src[i] = (float)i;
    int in_other = ht_model_put(&m, VC, a - VC, src + VC, put);
    ht_model_put(&m, 0, w.nparams, src, put);
    int okp = !in_other && ht_model_holds(&m, 0, 1) && !ht_model_holds(&m, VC, 1);
    for (size_t i = 0; i < held; i++)
        okp &= put[i] == (float)(i < VC ? i : a + (i - VC));
    tap_ok(okp, "tied: ht_model_put fills the window and the copy, nothing of other stages");
    free(src), free(put), free(got), free(whole);
    ht_model_free(&m);
    ht_model_free(&w);
}

int main(void) {
    ht_dev *d = test_dev_open();
    ht_model w;
    if (!tap_ok(gpt(&w, d) == HT_OK, "GPT L%d C%d built whole", L, C)) return tap_done();
    ht_model_init_params(&w, SEED);
    float *whole = malloc(w.nparams * sizeof(float));
    ht_buf_read(d, w.params, 0, w.nparams * sizeof(float), whole);
    const int n = w.nlayers; /* embedding, L blocks, final LayerNorm, head */
    check_stage(d, whole, &w, 0, 2);
    check_stage(d, whole, &w, 2, 3);
    check_stage(d, whole, &w, 3, n);
    check_stage(d, whole, &w, n - 1, n);
    free(whole);
    ht_model_free(&w);
    check_tied(d);
    ht_dev_close(d);
    return tap_done();
}
