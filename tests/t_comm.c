/* The comm layer: ring all-reduce against MPI_Allreduce and bitwise identical on every
 * rank, broadcast and all-gather. Run under mpirun by tests/comm.t (3 and 4 ranks); run
 * alone (as prove does) it is a valid 1-rank test of the same checks. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "tap.h"

/* Value i of rank r: a pure function, so any rank can compute the exact expected sum. */
static float val(int r, size_t i) {
    uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull ^ (uint64_t)(r + 1) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 29;
    return (float)((double)(h >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
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

    static const size_t lens[] = {1, 2, 3, 7, 1000, 100003};
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
            if (d > worst) worst = d;
            if (fabs(a[i] - e) > exact_worst) exact_worst = fabs(a[i] - e);
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
