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
    ht_dev_close(d);
    return tap_done();
}
