/* A model attached as several chunks (ht_model_attach_chunks, issue 24: interleaved, Chimera
 * and zb-v ranks run several stages): the resident windows are the chunks' parameter ranges,
 * worked out here from the layers, sorted, a stage held twice or two adjacent ones merged;
 * the packed buffer holds the whole model's initial values of each window bit for bit; every
 * tensor a chunk's layer uses reads those values through ht_layer_param; a tensor of a layer
 * outside the chunks is not resident; the activation buffers are the largest chunk's. A tied
 * GPT's rank that runs the head without the embedding holds wte (not wpe) as one more window,
 * which the head's weight reads; with the embedding, wte is its window's and no copy is
 * added. */
#include <stdlib.h>
#include <string.h>

#include "nn/layer_run.h"
#include "nn/model.h"
#include "tap.h"
#include "testdev.h"

enum { V = 64, T = 8, L = 3, C = 32, H = 2, B = 2 };
static const uint64_t SEED = 11;

static int gpt(ht_model *m, ht_dev *d) { return ht_model_gpt(m, d, V, T, L, C, H, 0.0f, B, 0); }

/* Layer i's first parameter float and its count. */
static size_t first(const ht_model *m, int i) { return m->layers[i].woff; }
static size_t count(const ht_model *m, int i) { return m->layers[i].nparams; }

/* Chunks lo/hi (n of them) attached: nw_want windows, window k starting at layer wl[k] and
 * ending after layer wh[k] (inclusive), in that order. */
static void check(ht_dev *d, const float *whole, const char *what, int n, const int *lo,
                  const int *hi, int nw_want, const int *wl, const int *wh) {
    ht_model m;
    if (!tap_ok(gpt(&m, NULL) == HT_OK, "%s: described", what)) return;
    if (!tap_ok(ht_model_attach_chunks(&m, d, n, lo, hi) == HT_OK, "%s: attached", what)) return;
    ht_model_init_params(&m, SEED);
    size_t total = 0;
    int ok = m.nwin == nw_want;
    for (int k = 0; ok && k < nw_want; k++) {
        const size_t base = first(&m, wl[k]), end = first(&m, wh[k]) + count(&m, wh[k]);
        ok = m.win[k].base == base && m.win[k].n == end - base && m.win[k].at == total;
        total += end - base;
    }
    tap_ok(ok && m.pres == total && ht_buf_size(m.params) == total * sizeof(float) &&
               ht_buf_size(m.grads) == total * sizeof(float),
           "%s: %d window(s) of the chunks' layers, %zu floats packed, params and grads "
           "that size", what, nw_want, total);
    float *got = malloc((total ? total : 1) * sizeof(float));
    ht_buf_read(d, m.params, 0, total * sizeof(float), got);
    ok = 1;
    for (int k = 0; k < m.nwin; k++)
        ok &= !memcmp(got + m.win[k].at, whole + m.win[k].base, m.win[k].n * sizeof(float));
    tap_ok(ok, "%s: each window initialised as the whole model's floats there, bit for bit", what);
    int views = 1, outside = 1;
    for (int i = 0; i < m.nlayers; i++) {
        int in = 0;
        for (int c = 0; c < n; c++)
            in |= i >= lo[c] && i < hi[c];
        for (int j = 0; j < m.layers[i].ntensors; j++) {
            const ht_param_tensor *t = &m.layers[i].t[j];
            if (!in) { /* a layer of no chunk: nothing of it resident */
                outside &= !count(&m, i) || ht_model_span(&m, t->off, 1) == (size_t)-1;
                continue;
            }
            ht_view v = ht_layer_param(&m, &m.layers[i], j);
            float x;
            ht_buf_read(d, v.buf, v.off * sizeof(float), sizeof x, &x);
            views &= v.buf == m.params && !memcmp(&x, whole + t->off, sizeof x);
        }
    }
    tap_ok(views, "%s: every tensor of the chunks' layers reads its own value", what);
    tap_ok(outside, "%s: the other layers' tensors are not resident", what);
    size_t act, save, work;
    ht_model_chunk_floats(&m, n, lo, hi, B, &act, &save, &work);
    size_t amax = 0;
    for (int c = 0; c < n; c++) {
        size_t a, s, w;
        ht_model_stage_floats(&m, lo[c], hi[c], B, &a, &s, &w);
        if (a > amax) amax = a;
    }
    tap_ok(act == amax && ht_buf_size(m.acts) == act * sizeof(float),
           "%s: activation buffers of the largest chunk (%zu floats)", what, act);
    free(got);
    ht_model_free(&m);
}

/* A tied GPT (the head's weight is wte, V x C floats at 0): chunks lo/hi attached hold want
 * windows, the first [0, first_n); the head reads wte's values there; wpe is resident only
 * when the embedding's chunk is held. */
static void check_tied(ht_dev *d, const char *what, int n, const int *lo, const int *hi,
                       int want, size_t first_n, int wpe_held) {
    ht_model w, m;
    if (!tap_ok(ht_model_gpt(&w, d, V, T, L, C, H, 0.0f, B, 1) == HT_OK &&
                    ht_model_gpt_desc(&m, V, T, L, C, H, 0.0f, B, 1) == HT_OK &&
                    ht_model_attach_chunks(&m, d, n, lo, hi) == HT_OK,
                "%s: tied GPT built whole, and attached as the chunks", what))
        return;
    ht_model_init_params(&w, SEED);
    ht_model_init_params(&m, SEED);
    float *whole = malloc(w.nparams * sizeof(float)), *got = malloc(m.pres * sizeof(float));
    ht_buf_read(d, w.params, 0, w.nparams * sizeof(float), whole);
    ht_buf_read(d, m.params, 0, m.pres * sizeof(float), got);
    const ht_layer *head = &m.layers[m.nlayers - 1];
    const size_t VC = (size_t)V * C;
    ht_view hv = ht_layer_param(&m, head, 0);
    int ok = m.nwin == want && m.win[0].base == 0 && m.win[0].n == first_n && head->t[0].tied &&
             hv.buf == m.params && hv.off == 0 && !memcmp(got, whole, VC * sizeof(float));
    for (int k = 0; k < m.nwin; k++)
        ok &= !memcmp(got + m.win[k].at, whole + m.win[k].base, m.win[k].n * sizeof(float));
    ok &= (ht_model_span(&m, VC, 1) != (size_t)-1) == wpe_held;
    tap_ok(ok, "%s: %d window(s), the first wte%s at float 0, the head's weight reads it, each "
               "window the whole model's values", what, want, wpe_held ? " and wpe" : " alone");
    free(whole), free(got);
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
    /* layers: 0 embed, 1-3 blocks h0-h2, 4 lnf, 5 head */
    {   /* interleaved over 2 ranks, rank 0: stages 0 (embed, h0) and 2 (h2 .. lnf) */
        const int lo[] = {0, 3}, hi[] = {2, 5}, wl[] = {0, 3}, wh[] = {1, 4};
        check(d, whole, "interleaved rank 0", 2, lo, hi, 2, wl, wh);
    }
    {   /* given out of order: the up stage first (Chimera's second chunk) */
        const int lo[] = {4, 1}, hi[] = {6, 2}, wl[] = {1, 4}, wh[] = {1, 5};
        check(d, whole, "chimera rank, up stage listed first", 2, lo, hi, 2, wl, wh);
    }
    {   /* Chimera's middle rank of an odd cut: one stage in both directions */
        const int lo[] = {2, 2}, hi[] = {4, 4}, wl[] = {2}, wh[] = {3};
        check(d, whole, "one stage held twice", 2, lo, hi, 1, wl, wh);
    }
    {   /* zb-v's last rank: stages D-1 and D, adjacent */
        const int lo[] = {2, 3}, hi[] = {3, 4}, wl[] = {2}, wh[] = {3};
        check(d, whole, "zb-v's turn (adjacent stages)", 2, lo, hi, 1, wl, wh);
    }
    {   /* tied, interleaved rank 1: h1, and lnf + head: wte's copy, h1, lnf */
        const int lo[] = {2, 4}, hi[] = {3, 6};
        check_tied(d, "tied, interleaved rank 1 (the head, no embedding)", 2, lo, hi, 3,
                   (size_t)V * C, 0);
    }
    {   /* tied, zb-v rank 0: the embedding and the head: one window, no copy */
        const int lo[] = {0, 5}, hi[] = {1, 6};
        check_tied(d, "tied, zb-v rank 0 (embedding and head)", 2, lo, hi, 1,
                   (size_t)V * C + (size_t)T * C, 1);
    }
    ht_model bad;
    int lo[] = {0, 4}, hi[] = {2, 9};
    tap_ok(gpt(&bad, NULL) == HT_OK && ht_model_attach_chunks(&bad, d, 2, lo, hi) == HT_EINPUT,
           "a chunk past the last layer: HT_EINPUT");
    ht_model_free(&bad);
    free(whole);
    ht_model_free(&w);
    ht_dev_close(d);
    return tap_done();
}
