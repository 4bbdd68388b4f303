/* MPI wrappers (the only file that calls MPI) and the ring all-reduce. Every call goes
 * through CHECK, which turns an MPI error code into an exit 1 naming the call, the rank
 * and MPI_Error_string; the exit hook turns any ht_die into MPI_Abort with its code. */
#include "comm/comm.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/internal.h"
#include "core/err.h"
#include "core/log.h"

static int g_active, g_done, g_rank, g_size = 1;
/* g_rank/g_size are in ht_comm_cur: MPI_COMM_WORLD, or after ht_comm_split the ranks kept
 * (a detached rank: MPI_COMM_SELF, size 1, and g_rank its world rank, see ht_comm_split) */
MPI_Comm ht_comm_cur;
static int g_detached, g_split; /* this rank was detached; ht_comm_split ran */
static int g_nreqs; /* nonblocking requests started and not yet waited for */
static void ring_comms(int create);
uint64_t ht_comm_sent_bytes, ht_comm_recv_bytes;

void ht_comm_check(int rc, const char *call) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING + 1] = "";
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    ht_die(HT_ERUNTIME, "%s failed on rank %d of %d: %s", call, g_rank, g_size, msg);
}

/* ht_die on one rank must end the whole job with its code, not leave the others blocked
 * in a collective forever. */
static void abort_hook(int code) {
    if (g_active && !g_done) MPI_Abort(MPI_COMM_WORLD, code);
}

/* Started by a process manager? Open MPI, PMIx and MPICH's hydra each set these. */
static int launched_by_mpirun(void) {
#ifdef HT_SMPI
    return 1; /* smpirun: always a world, and no process manager's variables */
#endif
    const char *force = getenv("HT_MPI");
    if (force && *force) return strcmp(force, "0") != 0;
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK") ||
           getenv("PMI_SIZE");
}

void ht_comm_init(int *argc, char ***argv) {
    if (g_active || !launched_by_mpirun()) return;
    int provided = 0;
    /* funneled: only the main thread calls MPI (OpenCL runtimes may start threads) */
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING + 1] = "";
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        ht_die(HT_ERUNTIME, "MPI_Init_thread failed: %s", msg);
    }
    g_active = 1;
    ht_comm_virtual_clock();
    ht_set_exit_hook(abort_hook);
    ht_comm_cur = MPI_COMM_WORLD;
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank));
    CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g_size));
    ring_comms(1);
    if (ht_comm_watchdog_start(g_rank, g_size) != 0)
        ht_log_warn("cannot start the communication watchdog: a lost rank may hang the job");
}

/* Frees ht_comm_cur when ht_comm_split made it. */
static void free_cur(void) {
    if (ht_comm_cur != MPI_COMM_WORLD && ht_comm_cur != MPI_COMM_SELF)
        CHECK(MPI_Comm_free(&ht_comm_cur));
}

/* After ht_comm_split, every start-up rank meets once more before MPI_Finalize: a detached
 * rank waits here for the whole run, so it polls every 10 ms (and is not timed by the
 * watchdog) instead of spinning in MPI_Finalize's own wait (8-19% of a core measured). */
static void meet_all(void) {
    MPI_Request q;
    int done = 0, spins = 0;
    CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &q));
    if (!g_detached) ht_comm_wait_begin("MPI_Ibarrier (finalize)", HT_COMM_ANY);
    for (;;) {
        CHECK(MPI_Test(&q, &done, MPI_STATUS_IGNORE));
        if (done) break;
        if (g_detached)
            ht_sleep(0.01);
        else
            ht_comm_backoff(spins++);
    }
    if (!g_detached) ht_comm_wait_end();
}

void ht_comm_finalize(void) {
    if (!g_active || g_done) return;
    if (g_split)
        meet_all();
    else
        WAITING("MPI_Barrier (finalize)", HT_COMM_ANY, CHECK(MPI_Barrier(ht_comm_cur)));
    if (g_nreqs)
        ht_die(HT_ERUNTIME, "ht_comm_finalize: %d nonblocking all-reduce(s) never waited for",
               g_nreqs);
    ring_comms(0);
    free_cur();
    g_done = 1;
    CHECK(MPI_Finalize());
}

void ht_comm_exit_if_any(int rc) {
    if (!g_active || g_done || g_size == 1) {
        ht_exit_on_error(rc);
        return;
    }
    int failed = rc != HT_OK ? g_rank : g_size, first = g_size;
    ht_comm_wait_begin("MPI_Allreduce (errors)", HT_COMM_ANY);
    CHECK(MPI_Allreduce(&failed, &first, 1, MPI_INT, MPI_MIN, ht_comm_cur));
    ht_comm_wait_end();
    if (first == g_size) return;
    int code = g_rank == first ? rc : 0, all = 0;
    WAITING("MPI_Allreduce (errors)", HT_COMM_ANY,
            CHECK(MPI_Allreduce(&code, &all, 1, MPI_INT, MPI_MAX, ht_comm_cur)));
    if (g_rank == first) ht_error_print();
    fflush(stdout);
    fflush(stderr);
    ring_comms(0);
    free_cur();
    g_done = 1; /* the exit hook must not abort: every rank is here */
    MPI_Finalize();
    exit(all);
}

int ht_comm_env_rank(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

int ht_comm_rank(void) { return g_rank; }
int ht_comm_size(void) { return g_size; }
int ht_comm_active(void) { return g_active && !g_done; }

int ht_comm_split(int keep) {
    if (!g_active || g_done || g_size == 1) return keep ? g_rank : -1;
    if (g_nreqs)
        ht_die(HT_ERUNTIME, "ht_comm_split: %d nonblocking all-reduce(s) outstanding", g_nreqs);
    MPI_Comm sub = MPI_COMM_NULL;
    /* key = rank: the kept ranks keep their order, so rank 0 stays rank 0 when kept */
    WAITING("MPI_Comm_split", HT_COMM_ANY,
            CHECK(MPI_Comm_split(ht_comm_cur, keep ? 0 : MPI_UNDEFINED, g_rank, &sub)));
    ring_comms(0);
    free_cur();
    g_split = 1;
    if (keep) {
        ht_comm_cur = sub;
        CHECK(MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN));
        CHECK(MPI_Comm_rank(sub, &g_rank));
        CHECK(MPI_Comm_size(sub, &g_size));
    } else { /* alone from now on; g_rank stays what it was (never 0: not the reporting rank) */
        ht_comm_cur = MPI_COMM_SELF;
        CHECK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
        g_size = 1;
        g_detached = 1;
    }
    ring_comms(1);
    return keep ? g_rank : -1;
}

/* MPI counts are int: larger transfers would need splitting, which nothing needs yet. */
int ht_comm_count(size_t n, const char *what) {
    if (n > INT_MAX)
        ht_die(HT_ERUNTIME, "%s of %zu elements exceeds MPI's int count (%d)", what, n, INT_MAX);
    return (int)n;
}

void ht_comm_barrier(void) {
    if (g_size > 1) WAITING("MPI_Barrier", HT_COMM_ANY, CHECK(MPI_Barrier(ht_comm_cur)));
}

void ht_comm_bcast(void *buf, size_t bytes, int root) {
    if (g_size > 1)
        WAITING("MPI_Bcast", g_rank == root ? HT_COMM_ANY : root,
                CHECK(MPI_Bcast(buf, ht_comm_count(bytes, "MPI_Bcast"), MPI_BYTE, root,
                                ht_comm_cur)));
}

void ht_comm_allgather(const void *send, size_t bytes, void *recv) {
    if (g_size == 1) {
        memmove(recv, send, bytes);
        return;
    }
    int c = ht_comm_count(bytes, "MPI_Allgather");
    WAITING("MPI_Allgather", HT_COMM_ANY,
            CHECK(MPI_Allgather(send, c, MPI_BYTE, recv, c, MPI_BYTE, ht_comm_cur)));
}

void ht_comm_allgatherv(const void *send, size_t bytes, void *recv, const size_t *counts) {
    if (g_size == 1) {
        memmove(recv, send, bytes);
        return;
    }
    int *cnt = ht_xcalloc((size_t)g_size, sizeof(int));
    int *displ = ht_xcalloc((size_t)g_size, sizeof(int));
    size_t off = 0;
    for (int r = 0; r < g_size; r++) {
        cnt[r] = ht_comm_count(counts[r], "MPI_Allgatherv");
        displ[r] = ht_comm_count(off, "MPI_Allgatherv displacement");
        off += counts[r];
    }
    /* send already at its place in recv: MPI's in-place form (MPI forbids the alias) */
    const void *from = send == (const char *)recv + displ[g_rank] ? MPI_IN_PLACE : send;
    WAITING("MPI_Allgatherv", HT_COMM_ANY,
            CHECK(MPI_Allgatherv(from, ht_comm_count(bytes, "MPI_Allgatherv"), MPI_BYTE, recv, cnt,
                                 displ, MPI_BYTE, ht_comm_cur)));
    free(cnt);
    free(displ);
}

void ht_comm_reduce_scatter_sum(const float *send, float *recv, const size_t *counts) {
    if (g_size == 1) {
        memmove(recv, send, counts[0]);
        return;
    }
    int *cnt = ht_xcalloc((size_t)g_size, sizeof(int));
    for (int r = 0; r < g_size; r++)
        cnt[r] = ht_comm_count(counts[r] / sizeof(float), "MPI_Reduce_scatter");
    WAITING("MPI_Reduce_scatter", HT_COMM_ANY,
            CHECK(MPI_Reduce_scatter(send, recv, cnt, MPI_FLOAT, MPI_SUM, ht_comm_cur)));
    free(cnt);
}

void ht_comm_gatherv(const void *send, size_t bytes, void *recv, const size_t *counts, int root) {
    if (g_size == 1) {
        memmove(recv, send, bytes);
        return;
    }
    int *cnt = NULL, *displ = NULL;
    if (g_rank == root) {
        cnt = ht_xcalloc((size_t)g_size, sizeof(int));
        displ = ht_xcalloc((size_t)g_size, sizeof(int));
        size_t off = 0;
        for (int r = 0; r < g_size; r++) {
            cnt[r] = ht_comm_count(counts[r], "MPI_Gatherv");
            displ[r] = ht_comm_count(off, "MPI_Gatherv displacement");
            off += counts[r];
        }
    }
    WAITING("MPI_Gatherv", g_rank == root ? HT_COMM_ANY : root,
            CHECK(MPI_Gatherv(send, ht_comm_count(bytes, "MPI_Gatherv"), MPI_BYTE, recv, cnt,
                              displ, MPI_BYTE, root, ht_comm_cur)));
    free(cnt);
    free(displ);
}

void ht_comm_allreduce_sum(float *buf, size_t n) {
    if (g_size == 1) return;
    ht_comm_sent_bytes += 2 * (g_size - 1) * n * sizeof(float) / g_size;
    ht_comm_recv_bytes += 2 * (g_size - 1) * n * sizeof(float) / g_size;
    WAITING("MPI_Allreduce", HT_COMM_ANY,
            CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, ht_comm_count(n, "MPI_Allreduce"), MPI_FLOAT,
                                MPI_SUM, ht_comm_cur)));
}

void ht_comm_allreduce_sum_f64(double *buf, size_t n) {
    if (g_size > 1)
        WAITING("MPI_Allreduce", HT_COMM_ANY,
                CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, ht_comm_count(n, "MPI_Allreduce"),
                                    MPI_DOUBLE, MPI_SUM, ht_comm_cur)));
}

void ht_comm_traffic(uint64_t *sent, uint64_t *received) {
    *sent = ht_comm_sent_bytes;
    *received = ht_comm_recv_bytes;
}

void ht_comm_send(const void *buf, size_t bytes, int peer, int tag) {
    ht_comm_sent_bytes += bytes;
    WAITING("MPI_Send", peer,
            CHECK(MPI_Send(buf, ht_comm_count(bytes, "MPI_Send"), MPI_BYTE, peer, tag,
                           ht_comm_cur)));
}

void ht_comm_recv(void *buf, size_t bytes, int peer, int tag) {
    MPI_Status st;
    WAITING("MPI_Recv", peer,
            CHECK(MPI_Recv(buf, ht_comm_count(bytes, "MPI_Recv"), MPI_BYTE, peer, tag,
                           ht_comm_cur, &st)));
    int got = 0;
    CHECK(MPI_Get_count(&st, MPI_BYTE, &got));
    ht_comm_recv_bytes += (uint64_t)got;
}

/* ------------------------------------------------------------------------------ ring */

void ht_comm_ring_chunk(size_t n, int p, int c, size_t *lo, size_t *hi) {
    /* sizes differ by at most one; the first n % p chunks take the extra value */
    size_t q = n / (size_t)p, r = n % (size_t)p, uc = (size_t)c;
    *lo = uc * q + (uc < r ? uc : r);
    *hi = *lo + q + (uc < r);
}

/* ------------------------------------------------------------------------- requests */

/* A request is either one MPI_Iallreduce or our ring: 2(p-1) steps, step s < p-1
 * reduce-scatter step s (receive into tmp, then add), step s >= p-1 all-gather step s-(p-1)
 * (receive straight into the buffer). Each chunk is cut into nseg segments (the same cut on
 * every rank) that move through the steps independently, as a pipeline: segment j's send of
 * step s goes out as soon as its receive of step s-1 is added in, so adding one segment
 * overlaps moving the next, and the steps overlap each other. Per segment at most one send
 * and one receive are in flight, on a communicator of its own (so messages of different
 * segments never match each other's receives, and one segment's steps match in order), and
 * a receive of step s is posted only after the segment's sends of the steps before it have
 * completed: the region it overwrites was sent by an earlier step (all-gather step t fills
 * what reduce-scatter step t sent), and one segment of tmp is all it needs. */
enum {
    RING_SEG_MAX = 8,           /* segments per chunk at most (communicators) */
    RING_SEG_BYTES = 128 * 1024 /* and at least this much per segment */
};

struct ht_comm_req {
    float *buf;
    size_t n;
    int ring, tag;
    int *members; /* ring: the world ranks in ring order (all ranks, or a group) */
    int p, pos;   /* ring: members, and this rank's index among them */
    int nsteps, nseg, done;
    size_t *bounds; /* reduce-scatter (ring): rank o owns [bounds[o], bounds[o+1]); ring chunk
                     * c is owner (c + p - 1) % p's, the one rank c - 1 ends with; NULL: an
                     * all-reduce's equal chunks */
    float *recv;              /* reduce-scatter: this rank's part goes here */
    size_t rlo, rn;           /* reduce-scatter: its offset in buf and its floats */
    const char *what;         /* the call, for the watchdog */
    int *cnt;                 /* MPI_Ireduce_scatter's counts: MPI's until completion */
    MPI_Request *mr;          /* MPI_Iallreduce: mr[0]; ring: receive 2j, send 2j+1 */
    int *rs, *ss;             /* ring, per segment: next step to receive, to send */
    float *tmp;               /* ring: a slot of segmax floats per segment */
    size_t segmax;            /* ring: the longest segment of any chunk */
    struct ht_comm_req *next; /* outstanding list */
};

static ht_comm_req *g_reqs;              /* outstanding, oldest first */
static unsigned g_seq;                   /* requests started: the tag of the next one */
static MPI_Comm g_segcomm[RING_SEG_MAX]; /* duplicates of ht_comm_cur, one per segment */

/* Tags cycle through a range far below MPI_TAG_UB's guaranteed 32767; tags only need to
 * differ between requests outstanding at the same time. */
enum { TAG_BASE = 1024, TAG_RANGE = 16384 };

/* Creates (create = 1, collective) or frees the ring's per-segment communicators. */
static void ring_comms(int create) {
    for (int j = 0; j < RING_SEG_MAX; j++) {
        if (create) {
            CHECK(MPI_Comm_dup(ht_comm_cur, &g_segcomm[j]));
            CHECK(MPI_Comm_set_errhandler(g_segcomm[j], MPI_ERRORS_RETURN));
        } else {
            CHECK(MPI_Comm_free(&g_segcomm[j]));
        }
    }
}

/* Chunk sent (send = 1) or received at step s by ring position r, and segment j of it. */
static void ring_range(const ht_comm_req *q, int s, int send, int j, size_t *lo, size_t *hi) {
    int p = q->p, r = q->pos, c;
    if (s < p - 1) /* reduce-scatter: after p-1 steps rank r holds the full sum of chunk r+1 */
        c = send ? (r - s + 2 * p) % p : (r - s - 1 + 2 * p) % p;
    else /* all-gather: received values are copied, not added: bitwise identical ranks */
        c = send ? (r + 1 - (s - p + 1) + 2 * p) % p : (r - (s - p + 1) + 2 * p) % p;
    size_t clo, chi, a, b;
    if (q->bounds)
        clo = q->bounds[(c + p - 1) % p], chi = q->bounds[(c + p - 1) % p + 1];
    else
        ht_comm_ring_chunk(q->n, p, c, &clo, &chi);
    ht_comm_ring_chunk(chi - clo, q->nseg, j, &a, &b);
    *lo = clo + a;
    *hi = clo + b;
}

/* Posts every send and receive of q whose data and buffer are ready. */
static void ring_post(ht_comm_req *q) {
    int p = q->p;
    int right = q->members[(q->pos + 1) % p], left = q->members[(q->pos + p - 1) % p];
    for (int j = 0; j < q->nseg; j++) {
        MPI_Request *rq = &q->mr[2 * j], *sq = &q->mr[2 * j + 1];
        size_t lo, hi;
        /* send step ss once step ss-1 was received (and added) */
        if (*sq == MPI_REQUEST_NULL && q->ss[j] < q->nsteps && q->rs[j] >= q->ss[j]) {
            ring_range(q, q->ss[j], 1, j, &lo, &hi);
            ht_comm_sent_bytes += (hi - lo) * sizeof(float);
            CHECK(MPI_Isend(q->buf + lo, ht_comm_count(hi - lo, "ring segment"), MPI_FLOAT, right,
                            q->tag, g_segcomm[j], sq));
            q->ss[j]++;
        }
        /* receive step rs once the sends of steps < rs have completed */
        int sent = q->ss[j] - (*sq != MPI_REQUEST_NULL);
        if (*rq == MPI_REQUEST_NULL && q->rs[j] < q->nsteps && sent >= q->rs[j]) {
            ring_range(q, q->rs[j], 0, j, &lo, &hi);
            float *into = q->rs[j] < p - 1 ? q->tmp + (size_t)j * q->segmax : q->buf + lo;
            ht_comm_recv_bytes += (hi - lo) * sizeof(float);
            CHECK(MPI_Irecv(into, ht_comm_count(hi - lo, "ring segment"), MPI_FLOAT, left, q->tag,
                            g_segcomm[j], rq));
        }
    }
}

/* A completed receive of segment j: reduce-scatter adds it in place; the next step may go. */
static void ring_received(ht_comm_req *q, int j) {
    if (q->rs[j] < q->p - 1) {
        size_t lo, hi;
        ring_range(q, q->rs[j], 0, j, &lo, &hi);
        float *dst = q->buf + lo;
        const float *src = q->tmp + (size_t)j * q->segmax;
        for (size_t i = 0; i < hi - lo; i++)
            dst[i] += src[i];
    }
    q->rs[j]++;
}

/* Moves one request on as far as it goes without blocking (block = 1: to the end). */
static void progress_one(ht_comm_req *q, int block) {
    if (q->done) return;
    if (!q->ring) {
        int flag = 1;
        if (block)
            CHECK(MPI_Wait(&q->mr[0], MPI_STATUS_IGNORE));
        else
            CHECK(MPI_Test(&q->mr[0], &flag, MPI_STATUS_IGNORE));
        q->done = flag;
        return;
    }
    int idx[2 * RING_SEG_MAX];
    for (;;) {
        ring_post(q);
        int got = 0;
        if (block)
            CHECK(MPI_Waitsome(2 * q->nseg, q->mr, &got, idx, MPI_STATUSES_IGNORE));
        else
            CHECK(MPI_Testsome(2 * q->nseg, q->mr, &got, idx, MPI_STATUSES_IGNORE));
        if (got == MPI_UNDEFINED) { /* nothing in flight, nothing to post: all steps done */
            if (q->recv && q->rn) memcpy(q->recv, q->buf + q->rlo, q->rn * sizeof(float));
            q->done = 1;
            return;
        }
        for (int i = 0; i < got; i++)
            if (idx[i] % 2 == 0) ring_received(q, idx[i] / 2);
        if (!got && !block) return;
    }
}

/* Appends q to the outstanding list: older requests are progressed first. */
static void enqueue(ht_comm_req *q) {
    ht_comm_req **at = &g_reqs;
    while (*at)
        at = &(*at)->next;
    *at = q;
    g_nreqs++;
}

static ht_comm_req *ring_new(float *buf, size_t n, const int *members, int p, int pos, int tag,
                             const size_t *bounds);
static void ring_begin(ht_comm_req *q, int nsteps);

/* A ring request over members[0..p) (world ranks; this rank at index pos) with tag. */
static ht_comm_req *ring_start(float *buf, size_t n, const int *members, int p, int pos, int tag) {
    ht_comm_req *q = ring_new(buf, n, members, p, pos, tag, NULL);
    ring_begin(q, 2 * (p - 1));
    return q;
}

/* A ring request's fields before its segments: bounds (p + 1 owner offsets, copied: a
 * reduce-scatter) or NULL (an all-reduce's equal chunks). */
static ht_comm_req *ring_new(float *buf, size_t n, const int *members, int p, int pos, int tag,
                             const size_t *bounds) {
    ht_comm_req *q = ht_xcalloc(1, sizeof *q);
    q->buf = buf;
    q->n = n;
    q->ring = 1;
    q->p = p;
    q->pos = pos;
    q->tag = tag;
    q->what = "ring all-reduce";
    q->members = ht_xmalloc((size_t)p * sizeof(int));
    for (int i = 0; i < p; i++)
        q->members[i] = members ? members[i] : i;
    if (bounds) {
        q->bounds = ht_xmalloc((size_t)(p + 1) * sizeof *q->bounds);
        memcpy(q->bounds, bounds, (size_t)(p + 1) * sizeof *q->bounds);
    }
    return q;
}

/* Cuts q's chunks into segments, posts the first step and makes q outstanding; nsteps:
 * 2(p-1) for an all-reduce, p-1 for the reduce-scatter half. */
static void ring_begin(ht_comm_req *q, int nsteps) {
    const int p = q->p;
    size_t big = 0; /* the largest chunk */
    for (int c = 0; c < p; c++) {
        size_t lo, hi;
        if (q->bounds)
            lo = q->bounds[c], hi = q->bounds[c + 1];
        else
            ht_comm_ring_chunk(q->n, p, c, &lo, &hi);
        if (hi - lo > big) big = hi - lo;
    }
    size_t per = RING_SEG_BYTES / sizeof(float), nseg = (big + per - 1) / per;
    q->nseg = nseg < 1 ? 1 : nseg > RING_SEG_MAX ? RING_SEG_MAX : (int)nseg;
    q->segmax = (big + (size_t)q->nseg - 1) / (size_t)q->nseg;
    q->tmp = ht_xmalloc((q->segmax ? (size_t)q->nseg * q->segmax : 1) * sizeof(float));
    q->mr = ht_xmalloc(2 * (size_t)q->nseg * sizeof *q->mr);
    for (int i = 0; i < 2 * q->nseg; i++)
        q->mr[i] = MPI_REQUEST_NULL;
    q->rs = ht_xcalloc((size_t)q->nseg, sizeof(int));
    q->ss = ht_xcalloc((size_t)q->nseg, sizeof(int));
    q->nsteps = nsteps;
    ring_post(q); /* the first step goes out now: the neighbours can start */
    enqueue(q);
}

/* A request already complete: nothing to exchange (no tag used, as on every rank). */
static ht_comm_req *done_req(void) {
    ht_comm_req *q = ht_xcalloc(1, sizeof *q);
    q->done = 1;
    return q;
}

/* A request for one MPI nonblocking collective on buf's n elements, its handle at mr[0]. */
static ht_comm_req *mpi_req(float *buf, size_t n, int tag, const char *what) {
    ht_comm_req *q = ht_xcalloc(1, sizeof *q);
    q->buf = buf;
    q->n = n;
    q->tag = tag;
    q->what = what;
    q->mr = ht_xmalloc(sizeof *q->mr);
    return q;
}

ht_comm_req *ht_comm_iallreduce_sum_f64(double *buf, size_t n) {
    if (g_size == 1 || !ht_comm_active() || n == 0) return done_req();
    /* no tag: MPI matches collectives by their order on the communicator */
    ht_comm_req *q = mpi_req(NULL, n, 0, "MPI_Iallreduce");
    CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, ht_comm_count(n, "MPI_Iallreduce"), MPI_DOUBLE,
                         MPI_SUM, ht_comm_cur, &q->mr[0]));
    enqueue(q);
    return q;
}

ht_comm_req *ht_comm_iallreduce(float *buf, size_t n, int ring) {
    if (g_size == 1 || !ht_comm_active() || n == 0) return done_req();
    int tag = TAG_BASE + (int)(g_seq++ % TAG_RANGE);
    if (ring) return ring_start(buf, n, NULL, g_size, g_rank, tag);
    ht_comm_req *q = mpi_req(buf, n, tag, "MPI_Iallreduce");
    /* what a ring would move: MPI's own algorithm may move less or more */
    ht_comm_sent_bytes += 2 * (g_size - 1) * n * sizeof(float) / g_size;
    ht_comm_recv_bytes += 2 * (g_size - 1) * n * sizeof(float) / g_size;
    CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, ht_comm_count(n, "MPI_Iallreduce"), MPI_FLOAT, MPI_SUM,
                         ht_comm_cur, &q->mr[0]));
    enqueue(q);
    return q;
}

ht_comm_req *ht_comm_ireduce_scatter(float *buf, float *recv, const size_t *counts, int ring) {
    size_t n = 0, lo = 0;
    for (int r = 0; r < g_size; r++) {
        if (r == g_rank) lo = n;
        n += counts[r];
    }
    const size_t mine = counts[g_rank];
    if (g_size == 1 || !ht_comm_active() || n == 0) {
        if (mine) memmove(recv, buf + lo, mine * sizeof(float));
        return done_req();
    }
    int tag = TAG_BASE + (int)(g_seq++ % TAG_RANGE);
    if (ring) {
        size_t *cut = ht_xmalloc((size_t)(g_size + 1) * sizeof *cut);
        cut[0] = 0;
        for (int r = 0; r < g_size; r++)
            cut[r + 1] = cut[r] + counts[r];
        ht_comm_req *q = ring_new(buf, n, NULL, g_size, g_rank, tag, cut);
        free(cut);
        q->what = "ring reduce-scatter";
        q->recv = recv, q->rlo = lo, q->rn = mine;
        ring_begin(q, g_size - 1); /* the reduce-scatter half: rank r ends with chunk r */
        return q;
    }
    int *cnt = ht_xcalloc((size_t)g_size, sizeof(int));
    for (int r = 0; r < g_size; r++)
        cnt[r] = ht_comm_count(counts[r], "MPI_Ireduce_scatter");
    ht_comm_req *q = mpi_req(buf, n, tag, "MPI_Ireduce_scatter");
    /* what a ring would move */
    ht_comm_sent_bytes += (n - mine) * sizeof(float);
    ht_comm_recv_bytes += (n - mine) * sizeof(float);
    /* recv may be empty (a rank that owns none of buf): MPI needs a valid address anyway */
    CHECK(MPI_Ireduce_scatter(buf, mine ? recv : buf, cnt, MPI_FLOAT, MPI_SUM, ht_comm_cur,
                              &q->mr[0]));
    q->cnt = cnt; /* the counts stay valid until the request completes */
    enqueue(q);
    return q;
}

void ht_comm_group_allreduce(float *buf, size_t n, const int *members, int p, int tag) {
    int pos = -1;
    for (int i = 0; i < p; i++)
        if (members[i] == g_rank) pos = i;
    if (pos < 0)
        ht_die(HT_ERUNTIME, "ht_comm_group_allreduce: rank %d is not a member of its group",
               g_rank);
    if (p < 2 || n == 0) return;
    if (tag < HT_COMM_GROUP_TAG || tag > HT_COMM_TAG_MAX)
        ht_die(HT_ERUNTIME, "ht_comm_group_allreduce: tag %d outside [%d, %d]", tag,
               HT_COMM_GROUP_TAG, HT_COMM_TAG_MAX);
    ht_comm_wait(ring_start(buf, n, members, p, pos, tag));
}

int ht_comm_test(ht_comm_req *r) {
    for (ht_comm_req *q = g_reqs; q; q = q->next)
        progress_one(q, 0);
    return r ? r->done : 1;
}

void ht_comm_wait(ht_comm_req *r) {
    if (!r) return;
    /* a ring step waits for the left neighbour's data */
    ht_comm_wait_begin(r->what ? r->what : "all-reduce",
                       r->ring ? r->members[(r->pos + r->p - 1) % r->p] : HT_COMM_ANY);
    /* Poll rather than block on r alone: the others' ring steps must keep moving, or a
     * neighbour waiting on one of them (in another order) could wait for us forever. */
    if (g_reqs == r && !r->next) progress_one(r, 1); /* alone: block in MPI */
    while (!r->done) {
        ht_comm_test(NULL);
    }
    ht_comm_wait_end();
    for (ht_comm_req **at = &g_reqs; *at; at = &(*at)->next)
        if (*at == r) {
            *at = r->next;
            g_nreqs--;
            break;
        }
    free(r->tmp);
    free(r->bounds);
    free(r->cnt);
    free(r->mr);
    free(r->rs);
    free(r->ss);
    free(r->members);
    free(r);
}

int ht_comm_outstanding(void) { return g_nreqs; }

void ht_comm_ring_allreduce(float *buf, size_t n) {
    if (g_size == 1 || n == 0) return;
    ht_comm_req *q = ht_comm_iallreduce(buf, n, 1);
    ht_comm_wait(q);
}
