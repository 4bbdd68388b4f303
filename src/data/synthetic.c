/* Generated classification data for the default job and the tests: labels come
 * from a fixed random tanh teacher network, so the task is learnable by an MLP
 * but not linearly separable, and everything is a pure function of the seed. */
#include "data/data.h"

#include "core/err.h"
#include "core/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef SYN_GAIN
#define SYN_GAIN 2.0
#endif
#ifndef SYN_NOISE
#define SYN_NOISE 0.02
#endif
#ifndef SYN_HMIN
#define SYN_HMIN 16
#endif

/* Independent streams per quantity, so changing one never shifts another. */
enum { SYN_X = 1, SYN_W1, SYN_B1, SYN_W2, SYN_FLIP, SYN_FLIPCLASS };

/* The teacher's class scores for every sample (n*classes, double). */
static double *teacher_logits(const ht_dataset *ds, int hidden, uint64_t seed) {
    int n = ds->n, f = ds->features, c = ds->classes;
    uint64_t s1 = ht_rng_stream(seed, SYN_W1), sb = ht_rng_stream(seed, SYN_B1);
    uint64_t s2 = ht_rng_stream(seed, SYN_W2);
    double *w1 = ht_xmalloc((size_t)f * hidden * sizeof *w1);
    double *b1 = ht_xmalloc((size_t)hidden * sizeof *b1);
    double *w2 = ht_xmalloc((size_t)hidden * c * sizeof *w2);
    double *h = ht_xmalloc((size_t)hidden * sizeof *h);
    /* Gain > 1 drives tanh into its curved range: that is what defeats a linear model. */
    for (size_t k = 0; k < (size_t)f * hidden; k++) w1[k] = SYN_GAIN / sqrt(f) * ht_rng_normal(s1, k);
    for (int k = 0; k < hidden; k++) b1[k] = 0.5 * ht_rng_normal(sb, (uint64_t)k);
    for (size_t k = 0; k < (size_t)hidden * c; k++) w2[k] = ht_rng_normal(s2, k) / sqrt(hidden);

    double *z = ht_xmalloc((size_t)n * c * sizeof *z);
    for (int i = 0; i < n; i++) {
        const float *x = ds->x + (size_t)i * f;
        for (int k = 0; k < hidden; k++) h[k] = b1[k];
        for (int j = 0; j < f; j++)
            for (int k = 0; k < hidden; k++) h[k] += x[j] * w1[(size_t)j * hidden + k];
        double *zi = z + (size_t)i * c;
        for (int m = 0; m < c; m++) zi[m] = 0;
        for (int k = 0; k < hidden; k++) {
            double t = tanh(h[k]);
            for (int m = 0; m < c; m++) zi[m] += t * w2[(size_t)k * c + m];
        }
    }
    free(w1);
    free(b1);
    free(w2);
    free(h);
    return z;
}

static int argmax_biased(const double *z, const double *b, int c) {
    int best = 0;
    for (int m = 1; m < c; m++)
        if (z[m] + b[m] > z[best] + b[best]) best = m;
    return best;
}

/* Output biases that make the classes roughly equally frequent: a random teacher
 * otherwise favours a few classes. Multiplicative-weights style updates on the
 * log frequency ratio; a fixed number of rounds keeps it deterministic. */
static void balance_biases(const double *z, int n, int c, double *b) {
    int *count = ht_xmalloc((size_t)c * sizeof *count);
    for (int m = 0; m < c; m++) b[m] = 0;
    for (int round = 0; round < 60; round++) {
        memset(count, 0, (size_t)c * sizeof *count);
        for (int i = 0; i < n; i++) count[argmax_biased(z + (size_t)i * c, b, c)]++;
        double target = (double)n / c, step = 0.5 / (1.0 + round / 10.0);
        for (int m = 0; m < c; m++) b[m] += step * log((target + 1.0) / (count[m] + 1.0));
    }
    free(count);
}

int ht_synthetic_make(ht_dataset *ds, int n, int features, int classes, uint64_t seed) {
    memset(ds, 0, sizeof *ds);
    if (n < 1) return ht_error(HT_EINPUT, "synthetic data: samples = %d, expected at least 1", n);
    if (features < 1) return ht_error(HT_EINPUT, "synthetic data: features = %d, expected at least 1", features);
    if (classes < 2) return ht_error(HT_EINPUT, "synthetic data: classes = %d, expected at least 2", classes);
    if ((unsigned long long)n * (unsigned long long)features > HT_IDX_MAX_VALUES)
        return ht_error(HT_EINPUT, "synthetic data: %d samples x %d features, expected at most %llu values",
                        n, features, (unsigned long long)HT_IDX_MAX_VALUES);

    ds->n = n;
    ds->features = features;
    ds->classes = classes;
    size_t nx = (size_t)n * features;
    ds->x = ht_xmalloc(nx * sizeof *ds->x);
    ds->y = ht_xmalloc((size_t)n * sizeof *ds->y);
    uint64_t sx = ht_rng_stream(seed, SYN_X);
    for (size_t k = 0; k < nx; k++) ds->x[k] = ht_rng_normal(sx, k);

    int hidden = 2 * classes > SYN_HMIN ? 2 * classes : SYN_HMIN;
    double *z = teacher_logits(ds, hidden, seed);
    double *b = ht_xmalloc((size_t)classes * sizeof *b);
    balance_biases(z, n, classes, b);
    /* A little label noise keeps 100% out of reach, as in real data. */
    uint64_t sf = ht_rng_stream(seed, SYN_FLIP), sc = ht_rng_stream(seed, SYN_FLIPCLASS);
    for (int i = 0; i < n; i++) {
        ds->y[i] = argmax_biased(z + (size_t)i * classes, b, classes);
        if (ht_rng_uniform(sf, (uint64_t)i) < SYN_NOISE)
            ds->y[i] = (int32_t)ht_rng_below(sc, (uint64_t)i, (uint32_t)classes);
    }
    free(z);
    free(b);
    return HT_OK;
}
