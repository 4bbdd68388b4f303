/* Internal to src/comm: the error check every MPI call goes through, MPI's int counts, the
 * traffic counters, and the polite wait that lets other ranks on the same cores run. */
#ifndef HT_COMM_INTERNAL_H
#define HT_COMM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef MPI_VERSION /* files that include mpi.h */
/* The communicator every call uses: MPI_COMM_WORLD, or what ht_comm_split left. */
extern MPI_Comm ht_comm_cur;
#endif

/* Exits 1 naming the call, the rank and MPI's error string unless rc is MPI_SUCCESS. */
void ht_comm_check(int rc, const char *call);
#define CHECK(call) ht_comm_check((call), #call)

/* n as an MPI int count; exits 1 when it does not fit. */
int ht_comm_count(size_t n, const char *what);

/* Bytes this rank has sent and received (payload only), for ht_comm_traffic. */
extern uint64_t ht_comm_sent_bytes, ht_comm_recv_bytes;

/* Between two polls that must not block (a wait with a deadline, a probe): nothing for the
 * first polls, then yield the core, then sleep for a growing while (up to 64 us), so that a
 * rank waiting for another's compute does not take the core from it. Waits without a
 * deadline block in MPI instead: large messages move in fragments that both sides progress. */
void ht_comm_backoff(int spins);

/* The watchdog (watchdog.c): a wait for other ranks (a blocking MPI call or a polling
 * loop) is bracketed by ht_comm_wait_begin/end; one that lasts HT_COMM_TIMEOUT seconds
 * (default 600, 0 = none) ends this rank with exit 1 and a message naming the call and
 * `peer` (HT_COMM_ANY: not one rank). Waits nest; the outermost is timed. */
void ht_comm_wait_begin(const char *what, int peer);
void ht_comm_wait_end(void);
/* Reads HT_COMM_TIMEOUT and starts the thread (with two ranks or more); -1 if it cannot. */
int ht_comm_watchdog_start(int rank, int size);
/* A blocking call inside a timed wait: WAITING("MPI_Bcast", root, CHECK(MPI_Bcast(...))). */
#define WAITING(what, peer, stmt)                                                                  \
    do {                                                                                           \
        ht_comm_wait_begin((what), (peer));                                                        \
        stmt;                                                                                      \
        ht_comm_wait_end();                                                                        \
    } while (0)

#endif
