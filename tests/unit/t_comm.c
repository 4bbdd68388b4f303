/* The comm layer: ring all-reduce against MPI_Allreduce and bitwise identical on every
 * rank, broadcast and all-gather; the nonblocking all-reduce (ring: the blocking one's bits;
 * several outstanding at once, odd lengths, waited in any order); the nonblocking
 * reduce-scatter on unequal owners' counts (ring half and MPI); the all-gather in place; the
 * gradient bucket plan of sync/bsp.c and ZeRO-2's gradient window (pure). Run under mpirun by
 * tests/integration/comm.t (3 and 4 ranks); run alone (as prove does) it is a valid 1-rank
 * test of the same checks. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "nn/model.h"
#include "sync/bsp.h"
#include "tap.h"

/* Value i of rank r: a pure function, so any rank can compute the exact expected sum. */
static float val(int r, size_t i) {
    uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull ^ (uint64_t)(r + 1) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 29;
    return (float)((double)(h >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* 1 on every rank when cond held on every rank. */
static int all_ranks(int cond) {
    double bad = !cond;
    ht_comm_allreduce_sum_f64(&bad, 1);
    return bad == 0;
}

/* 1 when buf[0..n) is bitwise the same on every rank. */
static int same_everywhere(const float *buf, size_t n, int p) {
    float *all = malloc(n * sizeof(float) * (size_t)p + 1);
    ht_comm_allgather(buf, n * sizeof(float), all);
    int same = 1;
    for (int r = 1; r < p; r++)
        same &= memcmp(all, all + (size_t)r * n, n * sizeof(float)) == 0;
    free(all);
    return all_ranks(same);
}

static void test_nonblocking(int rank, int p, double tol) {
    static const size_t lens[] = {0, 1, 2, 5, 13, 1001, 65537, 100003, 262147};
    enum { NL = sizeof lens / sizeof lens[0] };
    /* one at a time: the nonblocking ring gives the blocking ring's bits */
    for (int k = 0; k < NL; k++) {
        size_t n = lens[k];
        float *a = malloc(n * sizeof(float) + 1), *b = malloc(n * sizeof(float) + 1);
        float *c = malloc(n * sizeof(float) + 1);
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] = c[i] = val(rank, i);
        ht_comm_ring_allreduce(a, n);
        ht_comm_req *q = ht_comm_iallreduce(b, n, 1);
        int polls = 0;
        while (!ht_comm_test(q))
            polls++;
        ht_comm_wait(q);
        ht_comm_wait(ht_comm_iallreduce(c, n, 0)); /* MPI_Iallreduce */
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            double e = 0;
            for (int r = 0; r < p; r++)
                e += val(r, i);
            worst = tap_worse(worst, fabs(c[i] - e));
        }
        tap_ok(all_ranks(memcmp(a, b, n * sizeof(float)) == 0),
               "n=%zu: ht_comm_iallreduce (ring) + test/wait == ht_comm_ring_allreduce bitwise "
               "(%d polls on rank 0)",
               n, polls);
        tap_ok(all_ranks(worst <= tol) && same_everywhere(c, n, p),
               "n=%zu: ht_comm_iallreduce (MPI_Iallreduce) == exact sum within %.1e, the same "
               "bits on every rank",
               n, tol);
        free(a);
        free(b);
        free(c);
    }
    /* all at once: every length outstanding in both kinds, waited for in reverse order
     * (rank 0) or in start order (the others), with progress polls in between */
    float *ref[NL], *buf[2][NL];
    ht_comm_req *req[2][NL];
    for (int k = 0; k < NL; k++) {
        size_t n = lens[k];
        ref[k] = malloc(n * sizeof(float) + 1);
        for (int w = 0; w < 2; w++)
            buf[w][k] = malloc(n * sizeof(float) + 1);
        for (size_t i = 0; i < n; i++)
            ref[k][i] = buf[0][k][i] = buf[1][k][i] = val(rank + k, i);
        ht_comm_ring_allreduce(ref[k], n);
    }
    for (int k = 0; k < NL; k++) {
        req[0][k] = ht_comm_iallreduce(buf[0][k], lens[k], 1);
        req[1][k] = ht_comm_iallreduce(buf[1][k], lens[k], 0);
        ht_comm_test(NULL);
    }
    int outstanding = ht_comm_outstanding();
    for (int j = 0; j < NL; j++) {
        int k = rank == 0 ? NL - 1 - j : j;
        ht_comm_wait(req[0][k]);
        ht_comm_test(NULL);
        ht_comm_wait(req[1][k]);
    }
    int bits = 1, close = 1;
    for (int k = 0; k < NL; k++) {
        bits &= memcmp(ref[k], buf[0][k], lens[k] * sizeof(float)) == 0;
        for (size_t i = 0; i < lens[k]; i++)
            close &= fabs(ref[k][i] - buf[1][k][i]) <= tol;
        free(ref[k]);
        free(buf[0][k]);
        free(buf[1][k]);
    }
    tap_ok(all_ranks(bits),
           "%d requests outstanding at once (ring), waited in another order on "
           "rank 0: each the blocking ring's bits",
           NL);
    tap_ok(all_ranks(close),
           "%d MPI_Iallreduce requests outstanding at once among them: sums "
           "within %.1e",
           NL, tol);
    tap_ok(all_ranks(ht_comm_outstanding() == 0 && (p == 1 || outstanding > 0)),
           "outstanding count: %d while in flight, 0 after the waits", outstanding);
}

/* The nonblocking reduce-scatter (ring half and MPI_Ireduce_scatter) on owners' counts
 * that differ, are zero, or give one rank everything, lengths up to 300k floats (the ring's
 * segments): each rank's part equals the exact sum (double, from the pure values) within
 * tol; all cases outstanding at once, waited in another order on rank 0. */
static void test_reduce_scatter(int rank, int p, double tol) {
    enum { NC = 5 };
    size_t cnt[NC][64];
    for (int r = 0; r < p; r++) {
        cnt[0][r] = 7;                            /* equal */
        cnt[1][r] = r == p - 1 ? 1001 : 0;        /* one owner of everything */
        cnt[2][r] = r == 0 ? 0 : (size_t)(13 * r); /* rank 0 owns nothing */
        cnt[3][r] = 100003 * (size_t)(r + 1);     /* unequal, several segments */
        cnt[4][r] = r == 1 ? 3 : 40000;           /* a small part among large ones */
    }
    float *buf[2][NC], *out[2][NC];
    ht_comm_req *req[2][NC];
    size_t off[NC], tot[NC];
    for (int c = 0; c < NC; c++) {
        off[c] = tot[c] = 0;
        for (int r = 0; r < p; r++) {
            if (r == rank) off[c] = tot[c];
            tot[c] += cnt[c][r];
        }
        for (int w = 0; w < 2; w++) {
            buf[w][c] = malloc(tot[c] * sizeof(float) + 1);
            out[w][c] = malloc(cnt[c][rank] * sizeof(float) + 1);
            for (size_t i = 0; i < tot[c]; i++)
                buf[w][c][i] = val(rank + c, i);
        }
    }
    for (int c = 0; c < NC; c++)
        for (int w = 0; w < 2; w++) {
            req[w][c] = ht_comm_ireduce_scatter(buf[w][c], out[w][c], cnt[c], w == 0);
            ht_comm_test(NULL);
        }
    for (int j = 0; j < NC; j++) {
        int c = rank == 0 ? NC - 1 - j : j;
        ht_comm_wait(req[0][c]);
        ht_comm_wait(req[1][c]);
    }
    int good[2] = {1, 1};
    for (int c = 0; c < NC; c++) {
        for (size_t i = 0; i < cnt[c][rank]; i++) {
            double e = 0;
            for (int r = 0; r < p; r++)
                e += val(r + c, off[c] + i);
            for (int w = 0; w < 2; w++)
                good[w] &= fabs(out[w][c][i] - e) <= tol;
        }
        for (int w = 0; w < 2; w++)
            free(buf[w][c]), free(out[w][c]);
    }
    tap_ok(all_ranks(good[0]), "%d ring reduce-scatters (unequal, zero, single-owner counts) "
           "outstanding at once: each part the exact sum within %.1e", NC, tol);
    tap_ok(all_ranks(good[1]), "the same by MPI_Ireduce_scatter, among them: within %.1e", tol);
    tap_ok(all_ranks(ht_comm_outstanding() == 0), "none outstanding after the waits");
}

/* ZeRO-2's gradient window (pure): fc1 [0, 544), fc2 [544, 1336), fc3 [1336, 1436) in the
 * three 105-byte buckets. */
static void test_window(const ht_bucket *b, int nb) {
    size_t lo, hi, st;
    int ok = 1;
    ht_reduce_window(b, nb, 0, 720, &lo, &hi, &st);
    ok &= lo == 0 && hi == 1336 && st == 100; /* fc1 and fc2 meet [0, 720): fc3 staged */
    ht_reduce_window(b, nb, 720, 1436, &lo, &hi, &st);
    ok &= lo == 544 && hi == 1436 && st == 544; /* fc2, fc3: fc1 staged */
    ht_reduce_window(b, nb, 544, 1336, &lo, &hi, &st);
    ok &= lo == 544 && hi == 1336 && st == 544; /* exactly fc2: the larger outside staged */
    ht_reduce_window(b, nb, 720, 720, &lo, &hi, &st);
    ok &= lo == hi && st == 792; /* an empty slice: every bucket staged */
    tap_ok(ok, "gradient windows: the buckets meeting a slice, the largest other staged");
}

/* The bucket plan on model descriptions (no device): reverse layer order, tiling the
 * gradient buffer downward from its top, sizes, fused pairs kept together. */
static int plan_ok(const ht_model *m, const ht_bucket *b, int nb) {
    int ok = nb >= 1 && b[0].hi == m->nlayers && b[nb - 1].lo == 0;
    size_t top = m->nparams;
    for (int k = 0; k < nb; k++) {
        ok &= b[k].lo < b[k].hi && (k == 0 || b[k].hi == b[k - 1].lo);
        ok &= b[k].off + b[k].n == top || b[k].n == 0;
        if (b[k].n) top = b[k].off;
        const ht_layer *l = &m->layers[b[k].lo];
        ok &= !(b[k].lo > 0 && (l->kind == HT_LAYER_RELU || l->kind == HT_LAYER_GELU));
    }
    return ok && top == 0;
}

static void test_bucket_plan(void) {
    ht_model m;
    ht_bucket b[64];
    int hidden[2] = {32, 24};
    /* fc1 544 floats, relu, fc2 792, relu, fc3 100 */
    if (ht_model_mlp(&m, NULL, 16, hidden, 2, 4, "relu", 9) != HT_OK) {
        tap_ok(0, "mlp description builds");
        return;
    }
    int nb = ht_reduce_plan(&m, 105, 105, b, 64);
    tap_ok(nb == 3 && plan_ok(&m, b, nb) && b[0].lo == 4 && b[1].lo == 2 && b[1].n == 792,
           "mlp, 105-byte buckets: fc3 | relu1..fc2 | fc1..relu1 as [4,5) [2,4) [0,2) (%d)", nb);
    nb = ht_reduce_plan(&m, 1 << 20, 25 << 20, b, 64);
    tap_ok(nb == 1 && plan_ok(&m, b, nb) && b[0].n == m.nparams, "mlp, 1 MiB first: one bucket");
    nb = ht_reduce_plan(&m, 1, 1 << 20, b, 64);
    tap_ok(nb == 2 && plan_ok(&m, b, nb) && b[0].lo == 4 && b[1].lo == 0,
           "mlp, 1-byte first bucket then 1 MiB cap: fc3 alone, then the rest");
    tap_ok(ht_reduce_plan(&m, 105, 105, NULL, 0) == 3, "counting without output");
    nb = ht_reduce_plan(&m, 105, 105, b, 64);
    test_window(b, nb);
    ht_model_free(&m);
    if (ht_model_gpt(&m, NULL, 256, 16, 3, 32, 4, 0, 2, 0) != HT_OK) {
        tap_ok(0, "gpt description builds");
        return;
    }
    nb = ht_reduce_plan(&m, 4096, 16384, b, 64);
    int sized = 1;
    for (int k = 0; k + 1 < nb; k++)
        sized &= b[k].n * sizeof(float) >= (k ? 16384u : 4096u);
    tap_ok(nb > 2 && nb <= 64 && plan_ok(&m, b, nb) && sized,
           "gpt L3: %d buckets tile the gradients top down, each but the last at its size", nb);
    ht_model_free(&m);
}

/* ht_comm_allgatherv with send at this rank's place in recv (MPI_IN_PLACE inside, as the
 * sharded parameters' all-gather calls it) and unequal byte counts, one of them zero: every
 * rank's part lands in rank order, the values of val(). */
static void test_allgatherv_in_place(int rank, int p) {
    size_t *cnt = malloc((size_t)p * sizeof *cnt), tot = 0, at = 0;
    for (int r = 0; r < p; r++) {
        cnt[r] = r == 1 ? 0 : (size_t)(1000 * r + 3) * sizeof(float);
        if (r == rank) at = tot;
        tot += cnt[r] / sizeof(float);
    }
    float *buf = malloc((tot + 1) * sizeof(float));
    for (size_t i = 0; i < tot; i++)
        buf[i] = -7.0f; /* what others' parts must replace */
    for (size_t i = 0; i < cnt[rank] / sizeof(float); i++)
        buf[at + i] = val(rank, i);
    ht_comm_allgatherv(buf + at, cnt[rank], buf, cnt);
    int good = 1;
    size_t o = 0;
    for (int r = 0; r < p; r++)
        for (size_t i = 0; i < cnt[r] / sizeof(float); i++)
            good &= buf[o++] == val(r, i);
    tap_ok(all_ranks(good), "allgatherv in place: %zu floats from %d rank(s) in rank order", tot, p);
    free(buf);
    free(cnt);
}

int main(int argc, char **argv) {
    ht_comm_init(&argc, &argv);
    int rank = ht_comm_rank(), p = ht_comm_size();
    if (rank != 0) {
        if (!freopen("/dev/null", "w", stdout)) return 1; /* keep the TAP stream single */
    }
    tap_diag("%d rank(s), MPI %s", p, ht_comm_active() ? "on" : "off (not under mpirun)");

    /* chunking covers [0, n) exactly, in order, sizes differing by at most one */
    int chunks_ok = 1;
    for (size_t n = 0; n < 40; n++)
        for (int q = 1; q <= 9; q++) {
            size_t prev = 0, mn = (size_t)-1, mx = 0;
            for (int c = 0; c < q; c++) {
                size_t lo, hi;
                ht_comm_ring_chunk(n, q, c, &lo, &hi);
                chunks_ok &= lo == prev && hi >= lo;
                prev = hi;
                if (hi - lo < mn) mn = hi - lo;
                if (hi - lo > mx) mx = hi - lo;
            }
            chunks_ok &= prev == n && mx - mn <= 1;
        }
    tap_ok(chunks_ok, "ring chunks tile [0, n) in order, sizes within one, n < 40, p <= 9");

    static const size_t lens[] = {1, 2, 3, 7, 1000, 100003, 262147, 1000003};
    /* Tolerance: the ring and MPI sum p values in different orders; each float sum is off
     * by at most (p-1) ulps of the largest partial sum, values are in [-1, 1]. */
    const double tol = 4.0 * p * 1.2e-7;
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        size_t n = lens[k];
        float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
        float *all = malloc(n * sizeof(float) * (size_t)p);
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] = val(rank, i);
        ht_comm_ring_allreduce(a, n);
        ht_comm_allreduce_sum(b, n);
        double worst = 0, exact_worst = 0;
        for (size_t i = 0; i < n; i++) {
            double e = 0;
            for (int r = 0; r < p; r++)
                e += val(r, i);
            double d = fabs((double)a[i] - (double)b[i]);
            worst = tap_worse(worst, d);
            exact_worst = tap_worse(exact_worst, fabs(a[i] - e));
        }
        /* every rank's check, combined: a failure anywhere fails rank 0's line */
        double flags[2] = {worst > tol, exact_worst > tol};
        ht_comm_allreduce_sum_f64(flags, 2);
        tap_ok(flags[0] == 0 && flags[1] == 0,
               "n=%zu: ring == MPI_Allreduce == exact sum within %.1e (rank 0 max diff %.2e)", n,
               tol, worst);
        /* bitwise: gather every rank's result and compare bytes with rank 0's */
        ht_comm_allgather(a, n * sizeof(float), all);
        int same = 1;
        for (int r = 1; r < p; r++)
            same &= memcmp(all, all + (size_t)r * n, n * sizeof(float)) == 0;
        tap_ok(same, "n=%zu: ring result bitwise identical on all %d ranks", n, p);
        /* deterministic: a second run gives the same bits */
        for (size_t i = 0; i < n; i++)
            b[i] = val(rank, i);
        ht_comm_ring_allreduce(b, n);
        double diff = memcmp(a, b, n * sizeof(float)) != 0;
        ht_comm_allreduce_sum_f64(&diff, 1);
        tap_ok(diff == 0, "n=%zu: a second ring all-reduce gives the same bits", n);
        free(a);
        free(b);
        free(all);
    }

    test_nonblocking(rank, p, tol);
    test_reduce_scatter(rank, p, tol);
    test_allgatherv_in_place(rank, p);
    test_bucket_plan();

    char word[16] = "";
    if (rank == 0) snprintf(word, sizeof word, "from-root");
    ht_comm_bcast(word, sizeof word, 0);
    double good = strcmp(word, "from-root") != 0;
    ht_comm_allreduce_sum_f64(&good, 1);
    tap_ok(good == 0, "bcast reaches every rank");
    int mine = 100 + rank, *ids = malloc(sizeof(int) * (size_t)p), gath = 1;
    ht_comm_allgather(&mine, sizeof mine, ids);
    for (int r = 0; r < p; r++)
        gath &= ids[r] == 100 + r;
    free(ids);
    tap_ok(gath, "allgather puts rank r's value at slot r");
    int rc = tap_done();
    ht_comm_finalize();
    return rc;
}
