#include "devtensor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "tap.h"

static ht_dev *g_dev;

void dt_use(ht_dev *d) { g_dev = d; }

dt dt_new(size_t n, const void *init) {
    dt t = {ht_buf_new(g_dev, (n + 2 * GUARD) * sizeof(float), "test tensor"), n};
    float *h = malloc((n + 2 * GUARD) * sizeof(float));
    for (size_t i = 0; i < n + 2 * GUARD; i++) h[i] = SENT;
    if (init) memcpy(h + GUARD, init, n * sizeof(float));
    ht_buf_write(g_dev, t.buf, 0, (n + 2 * GUARD) * sizeof(float), h);
    free(h);
    return t;
}

void dt_set(dt t, const void *h) {
    ht_buf_write(g_dev, t.buf, GUARD * sizeof(float), t.n * sizeof(float), h);
}

void dt_get(dt t, void *h) {
    ht_buf_read(g_dev, t.buf, GUARD * sizeof(float), t.n * sizeof(float), h);
}

int dt_guards_ok(dt t) {
    float g[2 * GUARD];
    ht_buf_read(g_dev, t.buf, 0, GUARD * sizeof(float), g);
    ht_buf_read(g_dev, t.buf, (GUARD + t.n) * sizeof(float), GUARD * sizeof(float), g + GUARD);
    for (int i = 0; i < 2 * GUARD; i++)
        if (g[i] != SENT) return 0;
    return 1;
}

ht_view dt_view(dt t) { return ht_view_at(t.buf, GUARD); }
ht_view dt_view_at(dt t, size_t off) { return ht_view_at(t.buf, GUARD + off); }
void dt_free(dt t) { ht_buf_free(t.buf); }

float *hnew(size_t n, float lo, float hi, uint64_t seed) {
    float *h = malloc((n ? n : 1) * sizeof(float));
    ref_fill_uniform(h, n, lo, hi, seed);
    return h;
}

float *hnan(size_t n) {
    float *h = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = NAN;
    return h;
}

double nerr(const float *a, const float *b, size_t n) {
    double worst = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++)
        if (fabs(b[i]) > scale) scale = fabs(b[i]);
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / scale;
        worst = tap_worse(worst, e);
    }
    return worst;
}
