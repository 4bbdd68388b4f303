/* A whole MLP on the device: parameter layout of the MNIST-sized model checked by hand,
 * loss against a plain-C double forward, finite-difference gradients of every layer
 * (relu and gelu), one host SGD step lowering the loss, determinism, gradient
 * accumulation, and layer ranges (pipeline stages) matching the whole chain. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "nn/model.h"
#include "ref.h"
#include "tap.h"
#include "testdev.h"

static ht_dev *D;

/* Tolerances: per-sample loss vs the double reference, relative; finite differences
 * |fd - analytic| / max(0.1, |analytic|) with float steps of 1e-2 on parameters ~0.4. */
#define TOL_LOSS 1e-5
#define TOL_FD 1e-3
#define FD_STEP 1e-2f

/* ---------------------------------------------------------------- layout */

static void test_layout(void) {
    const int hidden[] = {1024, 1024};
    ht_model m;
    int rc = ht_model_mlp(&m, D, 784, hidden, 2, 10, "relu", 1);
    if (!tap_ok(rc == HT_OK, "784-1024-1024-10 relu builds")) return;
    size_t w1 = 784 * 1024, w2 = 1024 * 1024, w3 = 1024 * 10;
    size_t want_n = w1 + 1024 + w2 + 1024 + w3 + 10;
    tap_ok(m.nparams == want_n && m.nparams == 1863690, "nparams %zu (want %zu)", m.nparams,
           want_n);
    const char *names[] = {"fc1", "relu1", "fc2", "relu2", "fc3"};
    const ht_layer_kind kinds[] = {HT_LAYER_LINEAR, HT_LAYER_RELU, HT_LAYER_LINEAR, HT_LAYER_RELU,
                                   HT_LAYER_LINEAR};
    int ok = m.nlayers == 5;
    for (int i = 0; ok && i < 5; i++)
        ok &= !strcmp(m.layers[i].name, names[i]) && m.layers[i].kind == kinds[i];
    ok &= m.layers[0].woff == 0 && m.layers[0].boff == w1 && m.layers[0].nparams == w1 + 1024;
    ok &= m.layers[2].woff == w1 + 1024 && m.layers[2].boff == w1 + 1024 + w2;
    ok &= m.layers[4].woff == w1 + 1024 + w2 + 1024 && m.layers[4].boff == want_n - 10;
    ok &= m.layers[1].nparams == 0 && m.layers[1].in == 1024 && m.layers[1].out == 1024;
    tap_ok(ok, "layers fc1 relu1 fc2 relu2 fc3 with offsets 0, %zu, %zu, %zu", w1 + 1024,
           w1 + 1024 + w2 + 1024, want_n - 10);

    ht_param_tensor t[8];
    int n = ht_model_param_tensors(&m, t, 8);
    const struct {
        const char *name;
        size_t off;
        int ndim;
        int64_t s0, s1;
    } want[6] = {{"fc1.weight", 0, 2, 1024, 784},
                 {"fc1.bias", w1, 1, 1024, 0},
                 {"fc2.weight", w1 + 1024, 2, 1024, 1024},
                 {"fc2.bias", w1 + 1024 + w2, 1, 1024, 0},
                 {"fc3.weight", w1 + 1024 + w2 + 1024, 2, 10, 1024},
                 {"fc3.bias", want_n - 10, 1, 10, 0}};
    ok = n == 6;
    size_t end = 0;
    for (int i = 0; ok && i < 6; i++) {
        ok &= !strcmp(t[i].name, want[i].name) && t[i].off == want[i].off &&
              t[i].ndim == want[i].ndim && t[i].shape[0] == want[i].s0 &&
              (t[i].ndim == 1 || t[i].shape[1] == want[i].s1);
        ok &= t[i].off == end; /* contiguous, in buffer order */
        end += (size_t)t[i].shape[0] * (size_t)(t[i].ndim == 2 ? t[i].shape[1] : 1);
    }
    tap_ok(ok && end == m.nparams, "6 tensors fc1.weight (1024,784) ... fc3.bias (10) tile the "
                                   "buffer in order");
    ht_param_tensor one[1];
    tap_ok(ht_model_param_tensors(&m, one, 1) == 6 && !strcmp(one[0].name, "fc1.weight"),
           "param_tensors reports the full count when max is short");

    /* fwd 2*sum(in*out) + biases + relus; bwd dW 2*sum + dx for fc2, fc3 + biases + relus */
    double mm = (double)(w1 + w2 + w3),
           want_f = 2 * mm + 2058 + 2048 + (2 * mm + 2 * (double)(w2 + w3) + 2058 + 2048);
    double f = ht_model_flops_per_sample(&m);
    tap_ok(f == want_f, "flops per sample %.0f (want %.0f, about 6 x params)", f, want_f);
    tap_ok(ht_layer_act_bytes(&m.layers[0]) == 4096 && ht_layer_act_bytes(&m.layers[4]) == 40,
           "activation bytes per sample: fc1 4096, fc3 40");
    ht_model_free(&m);

    int bad[] = {7, 0};
    ht_model m2;
    tap_ok(ht_model_mlp(&m2, D, 5, bad, 2, 3, "relu", 4) == HT_EINPUT &&
               strstr(ht_errmsg(), "hidden layer 2"),
           "a zero-width hidden layer is rejected: %s", ht_errmsg());
    tap_ok(ht_model_mlp(&m2, D, 5, bad, 1, 3, "tanh", 4) == HT_EINPUT &&
               strstr(ht_errmsg(), "tanh"),
           "an unknown activation is rejected: %s", ht_errmsg());
}

/* ---------------------------------------------------------------- small MLP */

enum { IN = 5, C = 3, B = 4, NS = 4 };
static const int HIDDEN[] = {7, 6};
static const int SIZES[NS] = {IN, 7, 6, C};

typedef struct small {
    ht_model m;
    int act;
    float x[B * IN];
    int32_t y[B];
    float *p; /* host copy of the parameters */
} small;

static double device_loss(small *s) {
    ht_buf_write(D, s->m.params, 0, s->m.nparams * sizeof(float), s->p);
    ht_model_forward(&s->m, B, 0);
    double l;
    ht_model_loss(&s->m, B, &l, NULL);
    return l / B;
}

static void small_init(small *s, const char *act) {
    memset(s, 0, sizeof *s);
    s->act = ht_act_parse(act);
    ht_exit_on_error(ht_model_mlp(&s->m, D, IN, HIDDEN, 2, C, act, B));
    ht_model_init_params(&s->m, 42);
    ref_fill_uniform(s->x, B * IN, -2, 2, 9);
    for (int i = 0; i < B; i++)
        s->y[i] = (int32_t)ht_rng_below(10, i, C);
    s->p = malloc(s->m.nparams * sizeof(float));
    ht_buf_read(D, s->m.params, 0, s->m.nparams * sizeof(float), s->p);
    ht_model_set_batch(&s->m, s->x, s->y, B);
}

static void small_free(small *s) {
    ht_model_free(&s->m);
    free(s->p);
}

static void read_grads(small *s, float *g) {
    ht_buf_read(D, s->m.grads, 0, s->m.nparams * sizeof(float), g);
}

static void test_small(const char *actname) {
    small s;
    small_init(&s, actname);
    size_t np = s.m.nparams;
    tap_ok(np == 5 * 7 + 7 + 7 * 6 + 6 + 6 * 3 + 3, "%s: in=5 hidden {7,6} classes 3: %zu params",
           actname, np);
    uint64_t stream = ht_rng_stream(42, 0x1a17);
    float b1 = 1.0f / sqrtf(5.0f), w0 = (2.0f * ht_rng_uniform(stream, 0) - 1.0f) * b1;
    float last = (2.0f * ht_rng_uniform(stream, np - 1) - 1.0f) / sqrtf(6.0f);
    int in_bounds = 1;
    for (int i = 0; i < s.m.nlayers; i++) {
        const ht_layer *l = &s.m.layers[i];
        for (size_t k = l->woff; l->nparams && k < l->woff + l->nparams; k++)
            in_bounds &= fabsf(s.p[k]) <= 1.0f / sqrtf((float)l->in);
    }
    tap_ok(in_bounds && s.p[0] == w0 && s.p[np - 1] == last,
           "%s: init U(-1/sqrt(in), 1/sqrt(in)) from the seed's stream, counter = offset", actname);

    /* loss against the CPU reference */
    double lr[B];
    int cr[B], dev_c;
    ref_mlp_forward(lr, cr, NULL, s.p, SIZES, NS, s.act, s.x, s.y, B);
    ht_model_forward(&s.m, B, 1);
    double lsum;
    ht_model_loss(&s.m, B, &lsum, &dev_c);
    double worst = 0, rsum = 0;
    int rc_sum = 0;
    for (int i = 0; i < B; i++) {
        double e = fabs(s.m.host_loss[i] - lr[i]) / fabs(lr[i]);
        worst = tap_worse(worst, e);
        rsum += lr[i];
        rc_sum += cr[i];
    }
    tap_ok(worst < TOL_LOSS && dev_c == rc_sum,
           "%s: device loss %.7f vs CPU %.7f (worst per-sample rel err %.2e), correct %d/%d",
           actname, lsum / B, rsum / B, worst, dev_c, rc_sum);

    /* analytic gradients of the mean loss */
    ht_model_backward(&s.m, B, 1.0f / B);
    float *g = malloc(np * sizeof(float)), *g2 = malloc(np * sizeof(float));
    read_grads(&s, g);

    /* finite differences on selected parameters of every layer: first-layer weights,
     * every bias block's ends, the last layer */
    size_t idx[32];
    int ni = 0;
    for (int i = 0; i < s.m.nlayers; i++) {
        const ht_layer *l = &s.m.layers[i];
        if (l->kind != HT_LAYER_LINEAR) continue;
        size_t nw = (size_t)l->in * l->out;
        idx[ni++] = l->woff;
        idx[ni++] = l->woff + nw / 2;
        idx[ni++] = l->woff + nw - 1;
        idx[ni++] = l->woff + (size_t)l->in + 1; /* second row */
        idx[ni++] = l->boff;
        idx[ni++] = l->boff + (size_t)l->out - 1;
    }
    size_t nsigns = (size_t)B * (7 + 6);
    signed char *sp = malloc(nsigns), *sm = malloc(nsigns);
    double efd = 0, gmax = 0;
    int checked = 0, kinks = 0;
    for (int k = 0; k < ni; k++) {
        size_t i = idx[k];
        float v = s.p[i];
        double lp, lm, dummy[B];
        s.p[i] = v + FD_STEP;
        lp = device_loss(&s);
        ref_mlp_forward(dummy, NULL, sp, s.p, SIZES, NS, s.act, s.x, s.y, B);
        s.p[i] = v - FD_STEP;
        lm = device_loss(&s);
        ref_mlp_forward(dummy, NULL, sm, s.p, SIZES, NS, s.act, s.x, s.y, B);
        s.p[i] = v;
        if (s.act == HT_ACT_RELU && memcmp(sp, sm, nsigns)) { /* a ReLU kink in between */
            kinks++;
            continue;
        }
        double fd = (lp - lm) / ((double)(v + FD_STEP) - (double)(v - FD_STEP));
        double e = fabs(fd - g[i]) / fmax(0.1, fabs(g[i]));
        efd = tap_worse(efd, e);
        if (fabs(g[i]) > gmax) gmax = fabs(g[i]);
        checked++;
    }
    tap_ok(efd < TOL_FD && checked >= ni - 4 && gmax > 1e-3,
           "%s: finite differences on %d parameters of all 3 layers (%d skipped at ReLU kinks, "
           "largest |grad| %.3f): worst err %.2e",
           actname, checked, kinks, gmax, efd);
    device_loss(&s); /* restore the unperturbed parameters on the device */

    /* determinism: the same step again gives bitwise the same gradients */
    ht_model_forward(&s.m, B, 1);
    ht_model_backward(&s.m, B, 1.0f / B);
    read_grads(&s, g2);
    tap_ok(!memcmp(g, g2, np * sizeof(float)), "%s: a repeated step gives bitwise equal grads",
           actname);

    /* accumulation: a second backward with accumulate = 1 doubles the gradients */
    ht_model_backward_range(&s.m, 0, s.m.nlayers, B, 1.0f / B, 1);
    read_grads(&s, g2);
    int twice = 1;
    for (size_t i = 0; i < np; i++)
        twice &= g2[i] == 2.0f * g[i];
    tap_ok(twice, "%s: backward with accumulate=1 adds exactly (grads doubled)", actname);

    /* layer ranges: split after fc1 (unfused linear | activation) for both passes */
    ht_model_forward_range(&s.m, 0, 1, B);
    ht_model_forward_range(&s.m, 1, s.m.nlayers, B);
    ht_model_loss_forward(&s.m, B, 1);
    double lsplit;
    ht_model_loss(&s.m, B, &lsplit, NULL);
    ht_model_backward_range(&s.m, 1, s.m.nlayers, B, 1.0f / B, 0);
    ht_model_backward_range(&s.m, 0, 1, B, 1.0f, 0);
    read_grads(&s, g2);
    double er = 0;
    for (size_t i = 0; i < np; i++) {
        double e = fabs(g2[i] - g[i]) / fmax(fabs(g[i]), 1e-6);
        er = tap_worse(er, e);
    }
    tap_ok(lsplit == lsum && er < 1e-6,
           "%s: layers run as ranges [0,1) + [1,%d) match the whole chain (loss equal, grad rel "
           "err %.1e)",
           actname, s.m.nlayers, er);

    /* one SGD step on the host with the device gradients lowers the loss */
    double before = device_loss(&s);
    for (size_t i = 0; i < np; i++)
        s.p[i] -= 0.1f * g[i];
    double after = device_loss(&s);
    tap_ok(after < before, "%s: one SGD step (lr 0.1) lowers the mean loss %.6f -> %.6f", actname,
           before, after);

    free(g), free(g2), free(sp), free(sm);
    small_free(&s);
}

int main(void) {
    D = test_dev_open();
    test_layout();
    test_small("relu");
    test_small("gelu");
    ht_dev_close(D);
    return tap_done();
}
