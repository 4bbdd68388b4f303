/* Tests for generated data, the train/validation split, the deterministic sampler
 * (permutations per epoch, order-independence, epoch-crossing batches), batch
 * sharding and gather. */
#include "data/data.h"

#include "core/err.h"
#include "core/rng.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- synthetic */

static int same_dataset(const ht_dataset *a, const ht_dataset *b) {
    return a->n == b->n && a->features == b->features && a->classes == b->classes &&
           memcmp(a->x, b->x, (size_t)a->n * a->features * sizeof *a->x) == 0 &&
           memcmp(a->y, b->y, (size_t)a->n * sizeof *a->y) == 0;
}

/* Accuracy on the last nval samples of a nearest-centroid classifier fitted on
 * the rest: a linear rule, so it must stay well below 100% on this data. */
static double nearest_centroid_acc(const ht_dataset *d, int ntrain) {
    int f = d->features, c = d->classes;
    double *cen = calloc((size_t)c * f, sizeof *cen);
    int *cnt = calloc((size_t)c, sizeof *cnt);
    for (int i = 0; i < ntrain; i++) {
        cnt[d->y[i]]++;
        for (int j = 0; j < f; j++)
            cen[(size_t)d->y[i] * f + j] += d->x[(size_t)i * f + j];
    }
    for (int k = 0; k < c; k++)
        for (int j = 0; j < f; j++)
            cen[(size_t)k * f + j] /= cnt[k] ? cnt[k] : 1;
    int ok = 0;
    for (int i = ntrain; i < d->n; i++) {
        int best = 0;
        double bd = INFINITY;
        for (int k = 0; k < c; k++) {
            double s = 0;
            for (int j = 0; j < f; j++) {
                double t = d->x[(size_t)i * f + j] - cen[(size_t)k * f + j];
                s += t * t;
            }
            if (s < bd) bd = s, best = k;
        }
        ok += best == d->y[i];
    }
    free(cen);
    free(cnt);
    return (double)ok / (d->n - ntrain);
}

/* 1-nearest-neighbour accuracy of the samples [ntrain, ntrain+ntest) against
 * [0, ntrain): a non-linear rule that should beat the centroids clearly. */
static double one_nn_acc(const ht_dataset *d, int ntrain, int ntest) {
    int f = d->features, ok = 0;
    for (int i = ntrain; i < ntrain + ntest; i++) {
        int best = 0;
        float bd = INFINITY;
        for (int k = 0; k < ntrain; k++) {
            float s = 0;
            for (int j = 0; j < f; j++) {
                float t = d->x[(size_t)i * f + j] - d->x[(size_t)k * f + j];
                s += t * t;
            }
            if (s < bd) bd = s, best = k;
        }
        ok += d->y[best] == d->y[i];
    }
    return (double)ok / ntest;
}

static void test_synthetic(void) {
    ht_dataset a, b, c, p;
    tap_ok(ht_synthetic_make(&a, 2000, 16, 10, 5) == HT_OK, "synthetic: 2000 x 16, 10 classes");
    ht_synthetic_make(&b, 2000, 16, 10, 5);
    ht_synthetic_make(&c, 2000, 16, 10, 6);
    tap_ok(a.n == 2000 && a.features == 16 && a.classes == 10, "synthetic: shape recorded");
    tap_ok(same_dataset(&a, &b), "synthetic: same seed gives the same bytes");
    tap_ok(memcmp(a.x, c.x, 16 * sizeof(float)) != 0 &&
               memcmp(a.y, c.y, 100 * sizeof(int32_t)) != 0,
           "synthetic: another seed gives other data");
    ht_synthetic_make(&p, 700, 16, 10, 5);
    tap_ok(memcmp(p.x, a.x, 700 * 16 * sizeof(float)) == 0 &&
               memcmp(p.y, a.y, 700 * sizeof(int32_t)) == 0,
           "synthetic: a smaller n is a prefix of a larger one");

    int count[10] = {0}, in_range = 1, finite = 1;
    for (int i = 0; i < a.n; i++) {
        if (a.y[i] < 0 || a.y[i] >= 10)
            in_range = 0;
        else
            count[a.y[i]]++;
    }
    for (int i = 0; i < a.n * a.features; i++)
        finite &= isfinite(a.x[i]);
    tap_ok(in_range, "synthetic: labels in [0, 10)");
    tap_ok(finite, "synthetic: features finite");
    int lo = a.n;
    for (int k = 0; k < 10; k++)
        lo = count[k] < lo ? count[k] : lo;
    tap_ok(lo >= a.n * 3 / 100, "synthetic: every class >= 3%% (smallest %d of %d)", lo, a.n);
    double mean = 0, var = 0;
    for (int i = 0; i < a.n * a.features; i++)
        mean += a.x[i];
    mean /= a.n * a.features;
    for (int i = 0; i < a.n * a.features; i++)
        var += (a.x[i] - mean) * (a.x[i] - mean);
    var /= a.n * a.features;
    tap_ok(fabs(mean) < 0.2 && var > 0.6 && var < 1.6,
           "synthetic: features roughly standardised (mean %.3f, var %.3f)", mean, var);
    ht_dataset_free(&a);
    ht_dataset_free(&b);
    ht_dataset_free(&c);
    ht_dataset_free(&p);

    /* Learnable but not linear: the default job's shape. */
    ht_dataset d;
    ht_synthetic_make(&d, 10000, 64, 10, 1);
    double nc = nearest_centroid_acc(&d, 8000), nn = one_nn_acc(&d, 8000, 300);
    tap_ok(nc > 0.2 && nc < 0.85,
           "synthetic: nearest centroid (linear) gets %.3f, above chance, well below 100%%", nc);
    tap_ok(nn > nc + 0.05,
           "synthetic: 1-NN (non-linear) gets %.3f, clearly above nearest centroid %.3f", nn, nc);
    ht_dataset_free(&d);

    ht_error_clear();
    tap_ok(ht_synthetic_make(&d, 0, 4, 10, 1) == HT_EINPUT && strstr(ht_errmsg(), "samples = 0"),
           "synthetic: n = 0 is HT_EINPUT (%s)", ht_errmsg());
    tap_ok(ht_synthetic_make(&d, 10, 4, 1, 1) == HT_EINPUT && strstr(ht_errmsg(), "classes = 1"),
           "synthetic: 1 class is HT_EINPUT (%s)", ht_errmsg());
    tap_ok(ht_synthetic_make(&d, 1 << 30, 4, 10, 1) == HT_EINPUT && d.x == NULL,
           "synthetic: oversized request is HT_EINPUT without allocating (%s)", ht_errmsg());
    ht_dataset_free(&d);
}

/* ----------------------------------------------------------- split, gather */

static void fill_rows(ht_dataset *d, int n, int f) {
    d->n = n;
    d->features = f;
    d->classes = 4;
    d->x = malloc((size_t)n * f * sizeof *d->x);
    d->y = malloc((size_t)n * sizeof *d->y);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < f; j++)
            d->x[(size_t)i * f + j] = (float)(i * 100 + j);
        d->y[i] = i % 4;
    }
}

static void test_split(void) {
    ht_dataset all, tr, va;
    fill_rows(&all, 10, 3);
    tap_ok(ht_dataset_split(&all, 0.2, &tr, &va) == HT_OK && tr.n == 8 && va.n == 2,
           "split: 10 at 0.2 -> 8 / 2");
    tap_ok(tr.features == 3 && va.features == 3 && tr.classes == 4 && va.classes == 4,
           "split: shapes copied");
    tap_ok(tr.x != all.x && va.x[0] == 800.0f && va.x[5] == 902.0f && va.y[1] == 9 % 4 &&
               tr.x[23] == 702.0f,
           "split: validation is the last rows, both are copies");
    ht_dataset_free(&tr);
    ht_dataset_free(&va);
    ht_dataset_split(&all, 0.25, &tr, &va);
    tap_ok(tr.n == 7 && va.n == 3, "split: 2.5 held-out samples round half up to 3");
    ht_dataset_free(&tr);
    ht_dataset_free(&va);
    tap_ok(ht_dataset_split(&all, 0.0, &tr, &va) == HT_OK && tr.n == 10 && va.n == 0 &&
               va.x == NULL,
           "split: fraction 0 gives an empty validation set");
    ht_dataset_free(&tr);
    ht_dataset_free(&va);
    tap_ok(ht_dataset_split(&all, 1.0, &tr, &va) == HT_EINPUT && strstr(ht_errmsg(), "[0, 1)"),
           "split: fraction 1 is HT_EINPUT (%s)", ht_errmsg());
    tap_ok(ht_dataset_split(&all, -0.1, &tr, &va) == HT_EINPUT,
           "split: negative fraction is HT_EINPUT");
    tap_ok(ht_dataset_split(&all, NAN, &tr, &va) == HT_EINPUT, "split: NaN fraction is HT_EINPUT");
    tap_ok(ht_dataset_split(&all, 0.96, &tr, &va) == HT_EINPUT && strstr(ht_errmsg(), "leaves 0"),
           "split: no training sample left is HT_EINPUT (%s)", ht_errmsg());

    int idx[4] = {5, 0, 3, 3};
    float x[12];
    int32_t y[4];
    ht_dataset_gather(&all, idx, 4, x, y);
    int ok = 1;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            ok &= x[i * 3 + j] == (float)(idx[i] * 100 + j);
    tap_ok(ok && y[0] == 1 && y[1] == 0 && y[2] == 3 && y[3] == 3,
           "gather: rows and labels copied in index order");
    memset(x, 0, sizeof x);
    ht_dataset_gather(&all, idx, 2, x, NULL);
    tap_ok(x[0] == 500.0f && x[5] == 2.0f && x[6] == 0.0f,
           "gather: labels optional, only count rows written");
    ht_dataset_free(&all);
    ht_dataset_free(&all); /* twice is harmless */
}

/* ---------------------------------------------------------------- sampler */

/* The documented permutation, written out independently. */
static void ref_perm(int n, uint64_t seed, int64_t e, int *p) {
    for (int i = 0; i < n; i++)
        p[i] = i;
    uint64_t st = ht_rng_stream(seed, (uint64_t)e);
    for (int i = n - 1; i > 0; i--) {
        int j = (int)ht_rng_below(st, (uint64_t)i, (uint32_t)i + 1);
        int t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}

static int ref_at(int n, uint64_t seed, int64_t pos) {
    int *p = malloc((size_t)n * sizeof *p);
    ref_perm(n, seed, pos / n, p);
    int v = p[pos % n];
    free(p);
    return v;
}

static int is_perm(const int *p, int n) {
    int *seen = calloc((size_t)n, sizeof *seen), ok = 1;
    for (int i = 0; i < n; i++) {
        if (p[i] < 0 || p[i] >= n || seen[p[i]])
            ok = 0;
        else
            seen[p[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_sampler(void) {
    enum { N = 10, B = 7, STEPS = 40 };
    ht_sampler s;
    ht_sampler_init(&s, N, 123, 1);
    int perm[8][N], all_perm = 1, all_ref = 1;
    for (int e = 0; e < 8; e++) {
        ht_sampler_batch(&s, e, N, perm[e]); /* batch == n: step e is exactly epoch e */
        int r[N];
        ref_perm(N, 123, e, r);
        all_perm &= is_perm(perm[e], N);
        all_ref &= memcmp(r, perm[e], sizeof r) == 0;
    }
    tap_ok(all_perm, "sampler: every epoch is a permutation of [0, n)");
    tap_ok(all_ref, "sampler: epoch e is Fisher-Yates over ht_rng_stream(seed, e)");
    int distinct = 0;
    for (int e = 1; e < 8; e++)
        distinct += memcmp(perm[e], perm[e - 1], sizeof perm[e]) != 0;
    tap_ok(distinct == 7, "sampler: consecutive epochs differ (%d of 7)", distinct);
    ht_sampler_free(&s);

    /* Sequential, reversed and scattered requests, and a fresh sampler per step,
     * all give the same batches; each entry is the documented stream position. */
    int seq[STEPS][B], got[B], ok_rev = 1, ok_fresh = 1, ok_ref = 1;
    ht_sampler_init(&s, N, 9, 1);
    for (int t = 0; t < STEPS; t++)
        ht_sampler_batch(&s, t, B, seq[t]);
    for (int t = STEPS - 1; t >= 0; t--) {
        ht_sampler_batch(&s, t, B, got);
        ok_rev &= memcmp(got, seq[t], sizeof got) == 0;
    }
    for (int t = 0; t < STEPS; t += 3) {
        ht_sampler f;
        ht_sampler_init(&f, N, 9, 1);
        ht_sampler_batch(&f, (t * 17) % STEPS, B, got);
        ok_fresh &= memcmp(got, seq[(t * 17) % STEPS], sizeof got) == 0;
        ht_sampler_free(&f);
    }
    for (int t = 0; t < STEPS; t++)
        for (int k = 0; k < B; k++)
            ok_ref &= seq[t][k] == ref_at(N, 9, (int64_t)t * B + k);
    tap_ok(ok_rev, "sampler: reversed order gives the same batches");
    tap_ok(ok_fresh, "sampler: a fresh sampler (checkpoint resume) gives the same batch");
    tap_ok(ok_ref, "sampler: batch t holds stream positions [t*b, t*b+b), crossing epochs");
    int p0[N], p1[N];
    ref_perm(N, 9, 0, p0);
    ref_perm(N, 9, 1, p1);
    tap_ok(seq[1][0] == p0[7] && seq[1][2] == p0[9] && seq[1][3] == p1[0] && seq[1][6] == p1[3],
           "sampler: step 1 of batch 7 over n 10 is epoch 0 [7,10) then epoch 1 [0,4)");
    tap_ok(ht_sampler_epoch(&s, 9) == 0 && ht_sampler_epoch(&s, 10) == 1 &&
               ht_sampler_epoch(&s, 39) == 3,
           "sampler: ht_sampler_epoch maps positions to epochs");
    tap_ok(ht_sampler_at(&s, 13) == p1[3], "sampler: ht_sampler_at agrees");

    int far[64], ok_far = 1;
    ht_sampler_batch(&s, 1000000, 64, far);
    for (int k = 0; k < 64; k++)
        ok_far &= far[k] == ref_at(N, 9, 64000000 + k);
    tap_ok(ok_far, "sampler: a far step (epoch 6.4M) recomputed directly");
    ht_sampler_free(&s);

    /* batch > n: one batch spans several whole epochs. */
    int big[25];
    ht_sampler_init(&s, 3, 4, 1);
    ht_sampler_batch(&s, 1, 25, big); /* positions 25..49: epochs 8..16 */
    int ok_big = 1;
    for (int k = 0; k < 25; k++)
        ok_big &= big[k] == ref_at(3, 4, 25 + k);
    tap_ok(ok_big && is_perm(big + 2, 3), "sampler: batch 25 over n 3 spans 9 epochs correctly");
    ht_sampler_free(&s);

    ht_sampler_init(&s, N, 9, 0);
    ht_sampler_batch(&s, 1, B, got);
    int id[B] = {7, 8, 9, 0, 1, 2, 3};
    tap_ok(memcmp(got, id, sizeof id) == 0,
           "sampler: shuffle = 0 gives identity order across the boundary");
    tap_ok(ht_sampler_at(&s, 123) == 3, "sampler: shuffle = 0 at position 123 is 3");
    ht_sampler_free(&s);

    /* Cost: sequential steps must reuse the cached epoch (a shuffle of 10^6 samples per
     * call would take seconds): counted, not timed, so a loaded machine cannot fail it. */
    int *buf = malloc(100 * sizeof *buf);
    ht_sampler_init(&s, 1000000, 3, 1);
    for (int t = 9950; t < 10250; t++)
        ht_sampler_batch(&s, t, 100, buf); /* crosses epoch 0 -> 1 */
    int64_t sh = s.shuffles;
    ht_sampler_batch(&s, 9990, 100, buf); /* back to epoch 0: still cached */
    tap_ok(sh == 2 && s.shuffles == 2,
           "sampler: 300 sequential batches over n = 10^6 across an epoch boundary, then one "
           "back in epoch 0, shuffle each epoch once (%lld shuffles, then %lld)",
           (long long)sh, (long long)s.shuffles);
    free(buf);
    ht_sampler_free(&s);

    int other[N];
    ht_sampler_init(&s, N, 124, 1);
    ht_sampler_batch(&s, 0, N, other);
    tap_ok(memcmp(other, perm[0], sizeof other) != 0, "sampler: another seed gives another order");
    ht_sampler_free(&s);
}

/* ---------------------------------------------------------------- sharding */

static void test_shard(void) {
    int shares[4] = {3, 1, 4, 1}, lo, hi, next = 0, ok = 1;
    int want[4][2] = {{0, 3}, {3, 4}, {4, 8}, {8, 9}};
    for (int r = 0; r < 4; r++) {
        ht_shard_range(shares, 4, r, &lo, &hi);
        ok &= lo == want[r][0] && hi == want[r][1] && lo == next;
        next = hi;
    }
    tap_ok(ok && next == 9,
           "shard: {3,1,4,1} -> [0,3) [3,4) [4,8) [8,9), contiguous, covering the batch");
    int z[3] = {2, 0, 3};
    ht_shard_range(z, 3, 1, &lo, &hi);
    tap_ok(lo == 2 && hi == 2, "shard: a zero share is an empty range");
}

int main(void) {
    test_synthetic();
    test_split();
    test_sampler();
    test_shard();
    return tap_done();
}
