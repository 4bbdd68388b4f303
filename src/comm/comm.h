/* Communication between ranks: the only code that calls MPI. One world (MPI_COMM_WORLD) of
 * ranks; collectives over host buffers, and our own ring all-reduce. A process started
 * without mpirun does not initialise MPI at all (size 1, every collective a local no-op),
 * so the single-device trainer starts as fast as before. Every MPI failure exits 1 naming
 * the call and MPI's error string; ht_die on any rank aborts the whole job with its code. */
#ifndef HT_COMM_COMM_H
#define HT_COMM_COMM_H

#include <stddef.h>
#include <stdint.h>

/* Initialises MPI (MPI_Init_thread, funneled) when the process was started by mpirun (or
 * HT_MPI=1 is set: a singleton world), installs the abort-on-error exit hook and makes MPI
 * return errors instead of aborting silently. Safe to call once per process. */
void ht_comm_init(int *argc, char ***argv);
/* Finalises MPI when ht_comm_init started it (after a barrier); no-op otherwise. */
void ht_comm_finalize(void);
/* Collective (every rank must call it at the same point): when any rank's rc is not HT_OK,
 * the lowest such rank prints its message once ("hettrain: error: ..."), and every rank
 * finalises MPI and exits with that rank's code: no MPI_Abort and its help text for an
 * error every rank could report, such as a bad config. Returns when all ranks had HT_OK.
 * Without MPI: ht_exit_on_error(rc). */
void ht_comm_exit_if_any(int rc);
/* This process's rank as the process manager announced it in the environment (Open MPI,
 * PMIx, MPICH), before MPI is initialised; 0 when not started by one. */
int ht_comm_env_rank(void);

int ht_comm_rank(void); /* 0 without MPI */
int ht_comm_size(void); /* 1 without MPI */
/* 1 when MPI is initialised (even with one rank). */
int ht_comm_active(void);
/* Collective over the current ranks: those with keep = 1 go on as a world of their own
 * (a sub-communicator; ranks renumbered in their old order, so a kept rank 0 stays 0), and
 * every later call (collectives, the ring, point to point, errors, finalize) is among them
 * only. A rank with keep = 0 is detached: size 1, its rank unchanged (so it is never taken
 * for rank 0), every collective local; it takes no further part and ht_comm_finalize makes
 * it wait in MPI_Finalize for the others. Returns the new rank, or -1 when detached. Without
 * MPI or with one rank: no-op. No nonblocking request may be outstanding. */
int ht_comm_split(int keep);

void ht_comm_barrier(void);
/* Broadcasts bytes from root to every rank. */
void ht_comm_bcast(void *buf, size_t bytes, int root);
/* Rank r's `bytes` from send go to recv + r*bytes on every rank (recv: size*bytes). */
void ht_comm_allgather(const void *send, size_t bytes, void *recv);
/* Rank r's `bytes` (which may differ per rank) from send go to root's recv, rank after rank;
 * counts[r] is rank r's byte count (root only: gather the counts first). recv and counts
 * are used only on root. */
/* Every rank's `bytes` (counts[r] from rank r) concatenated in rank order on every rank;
 * send may be this rank's place in recv (in place). */
void ht_comm_allgatherv(const void *send, size_t bytes, void *recv, const size_t *counts);
/* MPI_Reduce_scatter: the sum over ranks of send (the counts' total floats); rank r receives
 * its part, counts[r] BYTES at the offset of the counts before it, in recv. */
void ht_comm_reduce_scatter_sum(const float *send, float *recv, const size_t *counts);
void ht_comm_gatherv(const void *send, size_t bytes, void *recv, const size_t *counts, int root);
/* In-place sum over ranks with MPI_Allreduce: float and double. */
void ht_comm_allreduce_sum(float *buf, size_t n);
void ht_comm_allreduce_sum_f64(double *buf, size_t n);

/* Point to point, blocking (MPI_Send / MPI_Recv of bytes, at most `bytes` received) from or
 * to rank `peer` with `tag`. hetprof's link measurements (ping-pong) use them. */
void ht_comm_send(const void *buf, size_t bytes, int peer, int tag);
void ht_comm_recv(void *buf, size_t bytes, int peer, int tag);

/* In-place sum over ranks by our own ring: a reduce-scatter then an all-gather over p
 * chunks, each rank sending 2(p-1)/p * n floats to its right neighbour. Any n >= 0 (chunks
 * may be empty when n < p). Each chunk is summed on one rank in a fixed order and then
 * copied, so every rank ends with bitwise identical values, the same on every run.
 * (ht_comm_iallreduce with ring = 1, then ht_comm_wait.) */
void ht_comm_ring_allreduce(float *buf, size_t n);

/* Chunk c of the ring's p chunks over n values: [lo, hi). Pure (exposed for tests). */
void ht_comm_ring_chunk(size_t n, int p, int c, size_t *lo, size_t *hi);

/* ---------------------------------------------------------------- nonblocking */

/* A nonblocking in-place float sum over ranks. Collective: every rank starts the same
 * requests in the same order (each gets its own message tag from that order, so any number
 * may be outstanding at once and complete in any order). The buffer belongs to the request
 * until ht_comm_wait returns. Progress happens only inside ht_comm_* calls (funneled MPI, no
 * progress thread): call ht_comm_test between other work to move outstanding requests on. */
typedef struct ht_comm_req ht_comm_req;

/* Starts the sum of buf[0..n): ring = 1 runs our ring as a state machine (the same steps,
 * hence the same bits, as ht_comm_ring_allreduce), ring = 0 is MPI_Iallreduce. Never NULL;
 * without MPI or with one rank the request is complete at once. */
ht_comm_req *ht_comm_iallreduce(float *buf, size_t n, int ring);
/* The same for doubles, always MPI_Iallreduce (as ht_comm_allreduce_sum_f64, nonblocking): a
 * few figures reduced while the caller computes. Counts no traffic, as the blocking one. */
ht_comm_req *ht_comm_iallreduce_sum_f64(double *buf, size_t n);
/* Starts the sum over ranks of buf[0..n), n the counts' total, of which rank r receives only
 * its part: counts[r] FLOATS at the offset of the counts before it, written to recv (which
 * holds counts[rank]; an owner of nothing may pass any pointer). Collective and progressed
 * as ht_comm_iallreduce; buf and recv belong to the request until ht_comm_wait returns.
 * ring = 1: our ring's reduce-scatter half (p-1 steps over chunks that are the owners'
 * parts, unequal in general; each part summed along the ring in a fixed order; buf is
 * overwritten), ring = 0: MPI_Ireduce_scatter. */
ht_comm_req *ht_comm_ireduce_scatter(float *buf, float *recv, const size_t *counts, int ring);
/* Moves every outstanding request on as far as it can without blocking; returns 1 when `r`
 * is complete (its buffer holds the sum), 0 otherwise. r may be NULL (progress only). */
int ht_comm_test(ht_comm_req *r);
/* Blocks until `r` is complete (progressing the others meanwhile) and frees it. */
void ht_comm_wait(ht_comm_req *r);
/* Requests started and not yet waited for (for tests and sanity checks). */
int ht_comm_outstanding(void);

/* In-place sum of buf[0..n) over a group of ranks: members[0..p) are world ranks in ring
 * order, this rank among them; every member calls it with the same list and the same tag,
 * a tag in [HT_COMM_GROUP_TAG, HT_COMM_TAG_MAX] that no other exchange between the members
 * uses at the same time. Our ring, blocking (politely: it polls and sleeps). */
enum { HT_COMM_GROUP_TAG = 17500, HT_COMM_TAG_MAX = 32767 };
void ht_comm_group_allreduce(float *buf, size_t n, const int *members, int p, int tag);

/* ---------------------------------------------------------------- point to point */

/* Bytes this rank has sent and received so far (payloads of every send, receive, ring step;
 * an MPI collective counts what a ring would move). */
void ht_comm_traffic(uint64_t *sent, uint64_t *received);

enum { HT_COMM_ANY = -1 }; /* any source */

/* A nonblocking send or receive of bytes with a tag (tags below HT_COMM_GROUP_TAG and
 * above 1023 are the caller's; 0..1023 are free too). The buffer belongs to the message
 * until it completes. */
typedef struct ht_comm_msg ht_comm_msg;
ht_comm_msg *ht_comm_isend(const void *buf, size_t bytes, int peer, int tag);
/* Receives at most `bytes` from peer (or HT_COMM_ANY). */
ht_comm_msg *ht_comm_irecv(void *buf, size_t bytes, int peer, int tag);
/* 1 when complete (then *from and *bytes, when not NULL, tell the source and the size
 * received; a send reports its peer and size). Never blocks. */
int ht_comm_msg_done(ht_comm_msg *m, int *from, size_t *bytes);
/* Waits until complete (politely), reports as ht_comm_msg_done and frees the message. */
void ht_comm_msg_wait(ht_comm_msg *m, int *from, size_t *bytes);
/* Frees a completed message (ht_comm_msg_done returned 1). */
void ht_comm_msg_free(ht_comm_msg *m);
/* Waits until one of msgs[0..n) (NULL entries are skipped) is complete and returns its
 * index, or -1 after timeout_s seconds (timeout_s < 0: no limit; -1 also when every entry
 * is NULL). Polls politely: the rank sleeps between polls instead of spinning. */
int ht_comm_msg_waitany(ht_comm_msg **msgs, int n, double timeout_s);
/* Is a message with `tag` from `peer` (or HT_COMM_ANY) waiting to be received? Never
 * blocks; 1 with *from and *bytes set, else 0. */
int ht_comm_probe(int peer, int tag, int *from, size_t *bytes);

/* ---------------------------------------------------------------- virtual time (smpi.c) */

/* 1 in the SMPI build (hettrain-smpi under smpirun): time is SimGrid's simulated time. */
int ht_comm_virtual(void);
/* The clock: simulated seconds under SMPI, else ht_now. */
double ht_comm_now(void);
/* Under SMPI: this rank computes for `seconds` of simulated time (the work itself ran in
 * real time, which counts for nothing); no-op otherwise. */
void ht_comm_compute(double seconds);
/* Under SMPI: points core's ht_now / ht_sleep at the simulated clock (ht_comm_init does). */
void ht_comm_virtual_clock(void);

#endif
