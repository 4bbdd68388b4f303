/* Optimizers on the device against a double-precision reference of PyTorch's formulas
 * (written here, independently of cl/optim.cl): SGD, momentum, Nesterov, AdamW, clipping,
 * the norm reduction across sizes, determinism, checkpoint resume; timings as diagnostics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "optim/optim.h"
#include "ref.h"
#include "tap.h"
#include "testdev.h"

#define TOL 1e-5 /* max |dev - ref| / max(|ref|, FLOOR * max|ref|) */
#define FLOOR 1e-2

/* ---------------------------------------------------------------- reference (double) */

typedef struct ref_state {
    size_t n;
    int64_t t;
    double *w, *m, *v;
} ref_state;

static double ref_norm(const float *g, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)g[i] * g[i];
    return sqrt(s);
}

/* One step as torch.nn.utils.clip_grad_norm_ + torch.optim.SGD / AdamW define it. */
static void ref_step(const ht_optim_cfg *c, ref_state *r, const float *g, double lr) {
    r->t++;
    double scale = 1.0;
    if (c->clip > 0) {
        scale = c->clip / (ref_norm(g, r->n) + 1e-6);
        if (scale > 1.0) scale = 1.0;
    }
    const double wd = c->weight_decay, mu = c->momentum, b1 = c->beta1, b2 = c->beta2;
    for (size_t i = 0; i < r->n; i++) {
        double gi = g[i] * scale;
        if (c->type == HT_OPT_SGD) {
            gi += wd * r->w[i];
            if (mu != 0) {
                r->m[i] = r->t == 1 ? gi : mu * r->m[i] + gi;
                gi = c->nesterov ? gi + mu * r->m[i] : r->m[i];
            }
            r->w[i] -= lr * gi;
        } else {
            r->w[i] -= lr * wd * r->w[i];
            r->m[i] = b1 * r->m[i] + (1 - b1) * gi;
            r->v[i] = b2 * r->v[i] + (1 - b2) * gi * gi;
            double mh = r->m[i] / (1 - pow(b1, (double)r->t));
            double vh = r->v[i] / (1 - pow(b2, (double)r->t));
            r->w[i] -= lr * mh / (sqrt(vh) + c->eps);
        }
    }
}

/* Relative error of a float device tensor against a double reference; values much smaller
 * than the tensor's largest are compared against FLOOR times that largest. */
static double relerr(const float *a, const double *b, size_t n) {
    double big = 0, worst = 0;
    for (size_t i = 0; i < n; i++)
        big = fmax(big, fabs(b[i]));
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / fmax(fabs(b[i]), fmax(FLOOR * big, 1e-30));
        worst = tap_worse(worst, e);
    }
    return worst;
}

/* ---------------------------------------------------------------- helpers */

static ht_optim_cfg sgd(float mu, int nesterov, float wd, float clip) {
    return (ht_optim_cfg){
        .type = HT_OPT_SGD, .momentum = mu, .nesterov = nesterov, .weight_decay = wd, .clip = clip};
}

static ht_optim_cfg adamw(float wd, float clip) {
    return (ht_optim_cfg){.type = HT_OPT_ADAMW,
                          .beta1 = 0.9f,
                          .beta2 = 0.999f,
                          .eps = 1e-8f,
                          .weight_decay = wd,
                          .clip = clip};
}

static ht_buf *upload(ht_dev *d, const float *x, size_t n, const char *what) {
    ht_buf *b = ht_buf_new(d, n * sizeof(float), what);
    ht_buf_write(d, b, 0, n * sizeof(float), x);
    return b;
}

static float *download(ht_dev *d, const ht_buf *b, size_t n) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    ht_buf_read(d, b, 0, n * sizeof(float), x);
    return x;
}

/* Gradient of step k: changes every step, uniform in [-1, 1). */
static void make_grad(float *g, size_t n, int k) { ref_fill_uniform(g, n, -1.0f, 1.0f, 1000 + k); }

static float lr_of(int k) { return 0.05f * (1.0f + 0.25f * (float)k); } /* varies per step */

/* ---------------------------------------------------------------- device vs reference */

static void check_case(ht_dev *d, const char *name, const ht_optim_cfg *c, size_t n, int steps) {
    float *w0 = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
    ref_fill_uniform(w0, n, -1.0f, 1.0f, 7);
    ref_state r = {.n = n,
                   .w = malloc(n * sizeof(double)),
                   .m = calloc(n, sizeof(double)),
                   .v = calloc(n, sizeof(double))};
    for (size_t i = 0; i < n; i++)
        r.w[i] = w0[i];

    ht_optim o;
    ht_optim_init(&o, d, c, n);
    ht_buf *w = upload(d, w0, n, "w"), *gb = ht_buf_new(d, n * sizeof(float), "g");
    for (int k = 0; k < steps; k++) {
        make_grad(g, n, k);
        ht_buf_write(d, gb, 0, n * sizeof(float), g);
        ht_optim_step(&o, w, gb, lr_of(k));
        ref_step(c, &r, g, lr_of(k));
    }
    float *wd = download(d, w, n);
    double ew = relerr(wd, r.w, n), es = 0;
    for (int i = 0; i < ht_optim_state_count(&o); i++) {
        ht_buf *sb;
        ht_optim_state(&o, i, NULL, &sb, NULL);
        float *s = download(d, sb, n);
        es = tap_worse(es, relerr(s, i == 0 ? r.m : r.v, n));
        free(s);
    }
    tap_ok(ew <= TOL && es <= TOL && o.t == steps,
           "%s, n=%zu, %d steps: params rel err %.2e, state rel err %.2e (tol %.0e)", name, n,
           steps, ew, es, TOL);
    free(wd);
    ht_buf_free(w);
    ht_buf_free(gb);
    ht_optim_free(&o);
    free(w0), free(g), free(r.w), free(r.m), free(r.v);
}

/* ---------------------------------------------------------------- clipping and the norm */

/* g = 3,4,3,4,... (pairs) so ||g|| = 5*sqrt(pairs) exactly; plain SGD with lr 1 from w = 0
 * leaves w = -scale*g, so the applied gradient is -w. */
static void check_clip(ht_dev *d) {
    const size_t pairs = 100, n = 2 * pairs; /* ||g|| = 50 */
    float *g = malloc(n * sizeof(float)), *z = calloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++)
        g[i] = i % 2 ? 4.0f : 3.0f;
    ht_optim_cfg c = sgd(0, 0, 0, 5.0f);
    ht_optim o;
    ht_optim_init(&o, d, &c, n);
    ht_buf *w = upload(d, z, n, "w"), *gb = upload(d, g, n, "g");
    ht_optim_step(&o, w, gb, 1.0f);
    float *wd = download(d, w, n);
    double applied = 0;
    for (size_t i = 0; i < n; i++)
        applied += (double)wd[i] * wd[i];
    applied = sqrt(applied);
    float norm = ht_optim_last_grad_norm(&o);
    tap_ok(norm == 50.0f, "clip: reported norm of the 3,4 pattern is exactly 50 (got %.9g)", norm);
    tap_ok(fabs(applied - 5.0) <= 1e-6 * 5.0,
           "clip 5: applied gradient norm %.9g == clip (rel %.1e)", applied, fabs(applied - 5) / 5);
    double sc = 5.0 / (50.0 + 1e-6);
    double e = 0;
    for (size_t i = 0; i < n; i++)
        e = tap_worse(e, fabs(wd[i] + sc * g[i]) / (sc * g[i]));
    tap_ok(e <= 1e-6, "clip 5: every element scaled by 5/(50+1e-6) (rel err %.1e)", e);
    free(wd);
    ht_optim_free(&o);

    /* a gradient below the threshold passes unchanged, bit for bit */
    for (size_t i = 0; i < n; i++)
        g[i] *= 0.1f; /* ||g|| = 5 */
    c.clip = 10.0f;
    ht_optim_init(&o, d, &c, n);
    ht_buf_write(d, w, 0, n * sizeof(float), z);
    ht_buf_write(d, gb, 0, n * sizeof(float), g);
    ht_optim_step(&o, w, gb, 1.0f);
    wd = download(d, w, n);
    int same = 1;
    for (size_t i = 0; i < n; i++)
        same &= wd[i] == -g[i];
    float small = ht_optim_last_grad_norm(&o);
    tap_ok(same, "clip 10, ||g|| = %.7g: gradient unchanged (w == -g exactly)", small);
    float *gd = download(d, gb, n);
    tap_ok(!memcmp(gd, g, n * sizeof(float)), "the grads buffer itself is never modified");
    free(gd), free(wd);
    ht_optim_free(&o);

    /* without clipping or tracking there is no norm to report */
    c.clip = 0;
    ht_optim_init(&o, d, &c, n);
    ht_optim_step(&o, w, gb, 1.0f);
    tap_ok(isnan(ht_optim_last_grad_norm(&o)), "clip 0, tracking off: last norm is NAN");
    ht_optim_track_norm(&o, 1);
    ht_optim_step(&o, w, gb, 1.0f);
    norm = ht_optim_last_grad_norm(&o);
    tap_ok(fabs(norm - ref_norm(g, n)) <= 1e-6 * ref_norm(g, n),
           "clip 0, tracking on: norm %.9g reported", norm);
    ht_optim_free(&o);
    ht_buf_free(w);
    ht_buf_free(gb);
    free(g), free(z);
}

/* The two-pass reduction across sizes around one group (L), around all groups (G*L), and far
 * beyond; lr 0 so only the norm matters. Both element layouts of pass 1 run on every device:
 * the one init chose (contiguous chunks on CPUs, interleaved elsewhere) and the other one,
 * forced through the public launch-shape fields. */
static void check_norm_sizes(ht_dev *d) {
    ht_optim_cfg c = sgd(0, 0, 0, 0);
    ht_optim probe;
    ht_optim_init(&probe, d, &c, 1 << 24);
    const size_t l = probe.norm_local, gl = probe.norm_groups * probe.norm_local;
    ht_optim_free(&probe);
    tap_diag("norm pass 1: up to %zu groups of %zu work-items", gl / l, l);
    const size_t sizes[] = {1, 2, 63, 64, 65, l - 1, l, l + 1, gl - 1, gl, gl + 1, 100003, 1863690};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        const size_t n = sizes[k];
        float *g = malloc(n * sizeof(float));
        ref_fill_uniform(g, n, -1.0f, 1.0f, 99 + n);
        ht_buf *w = ht_buf_new(d, n * sizeof(float), "w"), *gb = upload(d, g, n, "g");
        ht_buf_zero(d, w, 0, n * sizeof(float));
        const double want = ref_norm(g, n);
        for (int other = 0; other < 2; other++) {
            ht_optim o;
            ht_optim_init(&o, d, &c, n);
            ht_optim_track_norm(&o, 1);
            if (other) { /* the layout this device does not use by default */
                size_t items = o.norm_groups * o.norm_local;
                o.norm_chunk = o.norm_chunk ? 0 : ((n + items - 1) / items + 3) / 4 * 4;
            }
            ht_optim_step(&o, w, gb, 0.0f);
            double got = ht_optim_last_grad_norm(&o), e = fabs(got - want) / want;
            tap_ok(e <= TOL, "norm n=%zu (%zu groups, %s): %.9g vs %.9g, rel err %.1e", n,
                   o.norm_groups, o.norm_chunk ? "chunked" : "interleaved", got, want, e);
            ht_optim_free(&o);
        }
        ht_buf_free(w);
        ht_buf_free(gb);
        free(g);
    }
}

/* ---------------------------------------------------------------- determinism, resume */

/* Runs steps [k0, k1) of AdamW-or-SGD on w; returns the parameters. */
static void run_steps(ht_dev *d, ht_optim *o, ht_buf *w, ht_buf *gb, int k0, int k1) {
    float *g = malloc(o->n * sizeof(float));
    for (int k = k0; k < k1; k++) {
        make_grad(g, o->n, k);
        ht_buf_write(d, gb, 0, o->n * sizeof(float), g);
        ht_optim_step(o, w, gb, lr_of(k));
    }
    free(g);
}

static float *fresh_run(ht_dev *d, const ht_optim_cfg *c, size_t n, int steps, float *norm) {
    float *w0 = malloc(n * sizeof(float));
    ref_fill_uniform(w0, n, -1.0f, 1.0f, 7);
    ht_optim o;
    ht_optim_init(&o, d, c, n);
    ht_buf *w = upload(d, w0, n, "w"), *gb = ht_buf_new(d, n * sizeof(float), "g");
    run_steps(d, &o, w, gb, 0, steps);
    float *out = download(d, w, n);
    *norm = ht_optim_last_grad_norm(&o);
    ht_buf_free(w);
    ht_buf_free(gb);
    ht_optim_free(&o);
    free(w0);
    return out;
}

static void check_determinism(ht_dev *d) {
    const size_t n = 100003;
    ht_optim_cfg c = adamw(0.01f, 50.0f); /* ||g|| ~ 182: clipping active */
    float n1, n2;
    float *a = fresh_run(d, &c, n, 5, &n1), *b = fresh_run(d, &c, n, 5, &n2);
    tap_ok(!memcmp(a, b, n * sizeof(float)) && !memcmp(&n1, &n2, sizeof n1),
           "determinism: two AdamW+clip runs give bit-identical params and norm (%.9g)", n1);
    free(a), free(b);
}

/* Three steps, save state and t, restore into a fresh optimizer, two more steps: bit-identical
 * to five uninterrupted steps (SGD's first-step rule and AdamW's bias corrections resume). */
static void check_resume(ht_dev *d, const char *name, const ht_optim_cfg *c) {
    const size_t n = 1237;
    float nn;
    float *want = fresh_run(d, c, n, 5, &nn);
    float *w0 = malloc(n * sizeof(float));
    ref_fill_uniform(w0, n, -1.0f, 1.0f, 7);
    ht_optim o, p;
    ht_optim_init(&o, d, c, n);
    ht_buf *w = upload(d, w0, n, "w"), *gb = ht_buf_new(d, n * sizeof(float), "g");
    run_steps(d, &o, w, gb, 0, 3);
    ht_optim_init(&p, d, c, n);
    int ok = ht_optim_state_count(&o) == ht_optim_state_count(&p);
    for (int i = 0; ok && i < ht_optim_state_count(&o); i++) {
        const char *na, *nb;
        ht_buf *sa, *sb;
        size_t ca, cb;
        ht_optim_state(&o, i, &na, &sa, &ca);
        ht_optim_state(&p, i, &nb, &sb, &cb);
        float *s = download(d, sa, ca);
        ht_buf_write(d, sb, 0, cb * sizeof(float), s);
        ok = !strcmp(na, nb) && ca == cb && ca == n;
        free(s);
    }
    p.t = o.t;
    run_steps(d, &p, w, gb, 3, 5);
    float *got = download(d, w, n);
    tap_ok(ok && !memcmp(got, want, n * sizeof(float)),
           "%s: resume after 3 steps from saved state + t matches 5 straight steps bit for bit",
           name);
    ht_buf_free(w);
    ht_buf_free(gb);
    ht_optim_free(&o);
    ht_optim_free(&p);
    free(want), free(got), free(w0);
}

static void check_state_api(ht_dev *d) {
    struct {
        ht_optim_cfg c;
        int count;
        const char *n0, *n1;
    } cases[] = {
        {sgd(0, 0, 0, 0), 0, NULL, NULL},
        {sgd(0.9f, 1, 0, 0), 1, "optim.momentum", NULL},
        {adamw(0, 0), 2, "optim.m", "optim.v"},
    };
    for (int k = 0; k < 3; k++) {
        ht_optim o;
        ht_optim_init(&o, d, &cases[k].c, 10);
        int ok = ht_optim_state_count(&o) == cases[k].count;
        for (int i = 0; ok && i < cases[k].count; i++) {
            const char *name;
            ht_buf *b;
            size_t n;
            ht_optim_state(&o, i, &name, &b, &n);
            ok = !strcmp(name, i ? cases[k].n1 : cases[k].n0) && b && n == 10 &&
                 ht_buf_size(b) == 10 * sizeof(float);
        }
        tap_ok(ok, "state tensors of case %d: %d, named as checkpoints expect", k, cases[k].count);
        ht_optim_free(&o);
    }
    ht_config cfg;
    memset(&cfg, 0, sizeof cfg);
    strcpy(cfg.optim.type, "adamw");
    cfg.optim.beta1 = 0.8, cfg.optim.beta2 = 0.99, cfg.optim.eps = 1e-7;
    cfg.optim.weight_decay = 0.1, cfg.optim.clip = 1.5, cfg.optim.momentum = 0.5;
    cfg.optim.nesterov = 1;
    ht_optim_cfg c = ht_optim_cfg_from(&cfg);
    tap_ok(c.type == HT_OPT_ADAMW && c.beta1 == 0.8f && c.beta2 == 0.99f && c.eps == 1e-7f &&
               c.weight_decay == 0.1f && c.clip == 1.5f && c.momentum == 0.5f && c.nesterov == 1,
           "ht_optim_cfg_from copies the optim group");
    strcpy(cfg.optim.type, "sgd");
    tap_ok(ht_optim_cfg_from(&cfg).type == HT_OPT_SGD, "type \"sgd\"");
}

/* ---------------------------------------------------------------- timing (diagnostics only) */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void time_step(ht_dev *d, const char *name, const ht_optim_cfg *c) {
    const size_t n = 1863690; /* the 784-1024-1024-10 MLP */
    float *x = malloc(n * sizeof(float));
    ref_fill_uniform(x, n, -1.0f, 1.0f, 5);
    ht_optim o;
    ht_optim_init(&o, d, c, n);
    ht_buf *w = upload(d, x, n, "w"), *gb = upload(d, x, n, "g");
    for (int k = 0; k < 3; k++)
        ht_optim_step(&o, w, gb, 1e-4f); /* warm: kernels created */
    ht_dev_finish(d);
    const int reps = 20;
    double best = 1e30, t0 = now();
    for (int k = 0; k < reps; k++) {
        double t1 = now();
        ht_optim_step(&o, w, gb, 1e-4f);
        ht_dev_finish(d);
        best = fmin(best, now() - t1);
    }
    double mean = (now() - t0) / reps;
    /* streams: AdamW reads w,g,m,v and writes w,m,v; SGD momentum 3 + 2; the norm reads g */
    double streams = (c->type == HT_OPT_ADAMW ? 7.0 : 5.0) + (c->clip > 0);
    tap_diag("timing %-20s n=%zu: mean %.3f ms, best %.3f ms per step (best: %.1f GB/s)", name, n,
             mean * 1e3, best * 1e3, streams * 4.0 * (double)n / best * 1e-9);
    ht_buf_free(w);
    ht_buf_free(gb);
    ht_optim_free(&o);
    free(x);
}

int main(void) {
    ht_dev *d = test_dev_open();
    struct {
        const char *name;
        ht_optim_cfg c;
    } cases[] = {
        {"SGD", sgd(0, 0, 0, 0)},
        {"SGD wd", sgd(0, 0, 0.01f, 0)},
        {"SGD momentum", sgd(0.9f, 0, 0, 0)},
        {"SGD momentum wd", sgd(0.9f, 0, 0.01f, 0)},
        {"Nesterov", sgd(0.9f, 1, 0, 0)},
        {"Nesterov wd", sgd(0.9f, 1, 0.01f, 0)},
        {"SGD momentum wd clip", sgd(0.9f, 0, 0.01f, 5.0f)},
        {"AdamW", adamw(0, 0)},
        {"AdamW wd", adamw(0.01f, 0)},
        {"AdamW wd clip", adamw(0.01f, 5.0f)},
    };
    const size_t sizes[] = {1237, 1, 7, 16}; /* vector body + tail, tail only, body only */
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            check_case(d, cases[k].name, &cases[k].c, sizes[s], 6);
    check_clip(d);
    check_norm_sizes(d);
    check_determinism(d);
    check_resume(d, "SGD Nesterov", &cases[5].c);
    check_resume(d, "AdamW clip", &cases[9].c);
    check_state_api(d);

    ht_optim_cfg c = adamw(0.01f, 0);
    time_step(d, "AdamW", &c);
    c.clip = 1.0f;
    time_step(d, "AdamW + clip", &c);
    c = sgd(0.9f, 0, 0, 0);
    time_step(d, "SGD momentum", &c);
    c.clip = 1.0f;
    time_step(d, "SGD momentum + clip", &c);
    ht_dev_close(d);
    return tap_done();
}
