/* The communication watchdog (internal.h): a thread that ends this rank when one wait for
 * other ranks has lasted HT_COMM_TIMEOUT seconds. MPI has no deadline of its own: over
 * TCP, a host whose link went down (no FIN, no RST) leaves every peer blocked in its
 * receive until the kernel gives up on the connection, 15 minutes or more later. The
 * thread makes no MPI call (the library runs MPI_THREAD_FUNNELED): it prints why and
 * _exits 1, and mpirun then ends the job as for any rank that died. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/internal.h"
#include "core/log.h"

#define DEFAULT_TIMEOUT_S 600.0

static double g_timeout;                 /* seconds; 0: off */
static int g_depth;                      /* nested waits: only the outermost is timed */
static _Atomic double g_since;           /* start of the current wait, 0: none */
static const char *_Atomic g_what;       /* its call */
static _Atomic int g_peer = HT_COMM_ANY; /* the rank it waits for, if one */
static int g_rank_w, g_size_w;

void ht_comm_wait_begin(const char *what, int peer) {
    if (g_depth++ || g_timeout <= 0) return;
    g_what = what;
    g_peer = peer;
    g_since = ht_now();
}

void ht_comm_wait_end(void) {
    if (--g_depth == 0) g_since = 0;
}

static void *watch(void *arg) {
    (void)arg;
    struct timespec tick = {0, 250 * 1000 * 1000};
    for (;;) {
        nanosleep(&tick, NULL);
        double since = g_since;
        if (since <= 0 || ht_now() - since < g_timeout) continue;
        int peer = g_peer;
        char who[64] = "another rank";
        if (peer != HT_COMM_ANY) snprintf(who, sizeof who, "rank %d", peer);
        fprintf(stderr,
                "hettrain: error: rank %d of %d: %s waited %.0f s for %s: that rank or the "
                "network link to it is lost (HT_COMM_TIMEOUT=%g s; 0 disables the limit)\n",
                g_rank_w, g_size_w, g_what ? g_what : "a wait", ht_now() - since, who, g_timeout);
        fflush(stderr);
        _exit(1);
    }
    return NULL;
}

int ht_comm_watchdog_start(int rank, int size) {
#ifdef HT_SMPI
    return 0; /* off under SMPI: one process, virtual time; a deadlock ends the simulation */
#endif
    const char *e = getenv("HT_COMM_TIMEOUT");
    g_timeout = DEFAULT_TIMEOUT_S;
    if (e && *e) {
        char *end;
        double t = strtod(e, &end);
        if (*end || !(t >= 0) || t > 1e9)
            ht_die(HT_EINPUT, "HT_COMM_TIMEOUT='%s': expected seconds >= 0 (0: no limit)", e);
        g_timeout = t;
    }
    g_rank_w = rank, g_size_w = size;
    if (g_timeout <= 0 || size < 2) return 0;
    pthread_t t;
    if (pthread_create(&t, NULL, watch, NULL) != 0) return -1;
    pthread_detach(t);
    return 0;
}
