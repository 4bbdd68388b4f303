/* MPI link measurements for a profile: for every rank pair (a < b) the two measure while the
 * other ranks wait at a barrier, so that pairs never share the transport. Latency: half the
 * best round trip of an 8-byte ping-pong. Bandwidth: as the ring all-reduce uses a link
 * (every step of it a simultaneous exchange with the neighbours, src/comm), both ranks send
 * 4 MiB to each other at once; the bytes over the best time of such exchanges (the median
 * collapsed to 0.2-0.9 GB/s whenever other processes took the cores). The one-way ping-pong
 * of one warm buffer, measured before, gave 8.3 GB/s where the trainer's 7.45 MB ring moved
 * 2.2-2.5 GB/s (the exchange: 3.4-4.6; BENCHMARKS.md, hetsim validation). Ring: our ring
 * all-reduce itself over the pair (8 MiB of floats, two 4 MiB chunks), the figure for
 * hetsim's ring (links.*.ring_gbs): on 2 pinned ranks here a step of it took 1.4-1.9x the
 * exchange of its chunk from 256 KiB to 16 MiB (segmented messages, additions, cache misses
 * move together; BENCHMARKS.md, 2026-11-26 22:45-23:05). Every rank ends with the table. */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "prof/measure.h"

enum { TAG_PING = 7401, TAG_PONG = 7402 };

/* Best round trip (seconds) of `bytes` between ranks a (timing) and b (echoing); 0 on
 * the other ranks. */
static double round_trip(int a, int b, void *buf, size_t bytes, int warm, int reps) {
    int me = ht_comm_rank();
    double best = 1e30;
    for (int i = 0; i < warm + reps; i++) {
        if (me == a) {
            double t0 = ht_now();
            ht_comm_send(buf, bytes, b, TAG_PING);
            ht_comm_recv(buf, bytes, b, TAG_PONG);
            double dt = ht_now() - t0;
            if (i >= warm && dt < best) best = dt;
        } else if (me == b) {
            ht_comm_recv(buf, bytes, a, TAG_PING);
            ht_comm_send(buf, bytes, a, TAG_PONG);
        }
    }
    return me == a ? best : 0;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Best seconds of a simultaneous exchange of `bytes` each way between ranks a and b (both
 * time it; a's figure is returned), 0 on the other ranks. */
static double exchange(int a, int b, char *buf, size_t bytes, int warm, int reps) {
    int me = ht_comm_rank();
    if (me != a && me != b) return 0;
    int peer = me == a ? b : a;
    double *t = ht_xmalloc((size_t)reps * sizeof *t);
    for (int i = 0; i < warm + reps; i++) {
        double t0 = ht_now();
        ht_comm_msg *s = ht_comm_isend(buf, bytes, peer, TAG_PING);
        ht_comm_msg *r = ht_comm_irecv(buf + bytes, bytes, peer, TAG_PING);
        ht_comm_msg_wait(r, NULL, NULL);
        ht_comm_msg_wait(s, NULL, NULL);
        if (i >= warm) t[i - warm] = ht_now() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    double best = t[0];
    free(t);
    return best;
}

/* Best seconds of our ring all-reduce of n floats over ranks a and b (both time it; a's
 * figure is returned), 0 on the other ranks. The floats are zeros: sums stay finite. */
static double ring(int a, int b, float *buf, size_t n, int warm, int reps) {
    int me = ht_comm_rank();
    if (me != a && me != b) return 0;
    int members[2] = {a, b};
    double best = 1e30;
    for (int i = 0; i < warm + reps; i++) {
        double t0 = ht_now();
        ht_comm_group_allreduce(buf, n, members, 2, HT_COMM_GROUP_TAG);
        double dt = ht_now() - t0;
        if (i >= warm && dt < best) best = dt;
    }
    return best;
}

int ht_prof_links(int quick, ht_profile *p, FILE *log) {
    int n = ht_comm_size(), me = ht_comm_rank();
    p->nlinks = 0;
    if (n < 2) return HT_OK;
    if (n > HT_PROF_MAX_DEVS)
        return ht_error(HT_EINPUT, "%d ranks: a profile holds at most %d devices", n,
                        HT_PROF_MAX_DEVS);
    const size_t big = (size_t)4 << 20;
    int lat_reps = quick ? 200 : 2000, bw_reps = quick ? 5 : 100; /* best of many: robust to preemption */
    char *buf = ht_xcalloc(2 * big, 1); /* send and receive halves; the ring's 2 chunks */
    int npairs = n * (n - 1) / 2;
    double *fig = ht_xcalloc((size_t)npairs * 3, sizeof *fig);
    double t0 = ht_now();
    for (int a = 0, k = 0; a < n; a++)
        for (int b = a + 1; b < n; b++, k++) {
            ht_comm_barrier();
            double lat = round_trip(a, b, buf, 8, 20, lat_reps);
            double bw = exchange(a, b, buf, big, 2, bw_reps);
            double rg = ring(a, b, (float *)buf, 2 * big / sizeof(float), 2, bw_reps / 4 + 3);
            if (me == a) {
                /* a clock too coarse for a shared-memory round trip must not give 0 */
                double l = lat > 2e-9 ? lat / 2 : 1e-9;
                fig[3 * k] = l * 1e6;
                fig[3 * k + 1] = (double)big / (bw > 2e-9 ? bw : 1e-9) / 1e9;
                /* 2 steps of a 4 MiB chunk, each a latency and the chunk at the step's rate */
                double step = rg / 2 - l;
                fig[3 * k + 2] = (double)big / (step > 1e-9 ? step : 1e-9) / 1e9;
            }
        }
    ht_comm_allreduce_sum_f64(fig, (size_t)npairs * 3);
    for (int a = 0, k = 0; a < n; a++)
        for (int b = a + 1; b < n; b++, k++)
            p->links[p->nlinks++] = (ht_prof_link){a, b, fig[3 * k], fig[3 * k + 1], fig[3 * k + 2]};
    if (log && me == 0)
        fprintf(log, "hetprof: %d MPI link(s) measured in %.1f s\n", npairs, ht_now() - t0);
    free(fig);
    free(buf);
    return HT_OK;
}
