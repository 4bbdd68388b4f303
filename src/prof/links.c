/* MPI link measurements for a profile: for every rank pair (a < b) a ping-pong between the
 * two while the other ranks wait at a barrier, so that pairs never share the transport.
 * Latency: half the best round trip of an 8-byte message; bandwidth: a 4 MiB message sent
 * there and back, its bytes over half the best round trip. Every rank ends with the table. */
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

int ht_prof_links(int quick, ht_profile *p, FILE *log) {
    int n = ht_comm_size(), me = ht_comm_rank();
    p->nlinks = 0;
    if (n < 2) return HT_OK;
    if (n > HT_PROF_MAX_DEVS)
        return ht_error(HT_EINPUT, "%d ranks: a profile holds at most %d devices", n,
                        HT_PROF_MAX_DEVS);
    const size_t big = (size_t)4 << 20;
    int lat_reps = quick ? 200 : 2000, bw_reps = quick ? 5 : 20;
    char *buf = ht_xcalloc(big, 1);
    int npairs = n * (n - 1) / 2;
    double *fig = ht_xcalloc((size_t)npairs * 2, sizeof *fig);
    double t0 = ht_now();
    for (int a = 0, k = 0; a < n; a++)
        for (int b = a + 1; b < n; b++, k++) {
            ht_comm_barrier();
            double lat = round_trip(a, b, buf, 8, 20, lat_reps);
            double bw = round_trip(a, b, buf, big, 2, bw_reps);
            if (me == a) {
                /* a clock too coarse for a shared-memory round trip must not give 0 */
                fig[2 * k] = lat > 2e-9 ? lat / 2 * 1e6 : 1e-3;
                fig[2 * k + 1] = (double)big / (bw > 2e-9 ? bw / 2 : 1e-9) / 1e9;
            }
        }
    ht_comm_allreduce_sum_f64(fig, (size_t)npairs * 2);
    for (int a = 0, k = 0; a < n; a++)
        for (int b = a + 1; b < n; b++, k++)
            p->links[p->nlinks++] = (ht_prof_link){a, b, fig[2 * k], fig[2 * k + 1]};
    if (log && me == 0)
        fprintf(log, "hetprof: %d MPI link(s) measured in %.1f s\n", npairs, ht_now() - t0);
    free(fig);
    free(buf);
    return HT_OK;
}
