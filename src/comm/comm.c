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

static int g_active, g_done, g_rank, g_size = 1;
static int g_nreqs; /* nonblocking requests started and not yet waited for */
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
    ht_set_exit_hook(abort_hook);
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank));
    CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g_size));
}

void ht_comm_finalize(void) {
    if (!g_active || g_done) return;
    CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_nreqs)
        ht_die(HT_ERUNTIME, "ht_comm_finalize: %d nonblocking all-reduce(s) never waited for",
               g_nreqs);
    g_done = 1;
    CHECK(MPI_Finalize());
}

int ht_comm_rank(void) { return g_rank; }
int ht_comm_size(void) { return g_size; }
int ht_comm_active(void) { return g_active && !g_done; }

/* MPI counts are int: larger transfers would need splitting, which nothing needs yet. */
int ht_comm_count(size_t n, const char *what) {
    if (n > INT_MAX)
        ht_die(HT_ERUNTIME, "%s of %zu elements exceeds MPI's int count (%d)", what, n, INT_MAX);
    return (int)n;
}

void ht_comm_barrier(void) {
    if (g_size > 1) CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

void ht_comm_bcast(void *buf, size_t bytes, int root) {
    if (g_size > 1)
        CHECK(MPI_Bcast(buf, ht_comm_count(bytes, "MPI_Bcast"), MPI_BYTE, root, MPI_COMM_WORLD));
}

void ht_comm_allgather(const void *send, size_t bytes, void *recv) {
    if (g_size == 1) {
        memmove(recv, send, bytes);
        return;
    }
    int c = ht_comm_count(bytes, "MPI_Allgather");
    CHECK(MPI_Allgather(send, c, MPI_BYTE, recv, c, MPI_BYTE, MPI_COMM_WORLD));
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
    CHECK(MPI_Gatherv(send, ht_comm_count(bytes, "MPI_Gatherv"), MPI_BYTE, recv, cnt, displ,
                      MPI_BYTE, root, MPI_COMM_WORLD));
    free(cnt);
    free(displ);
}

void ht_comm_allreduce_sum(float *buf, size_t n) {
    if (g_size == 1) return;
    ht_comm_sent_bytes += 2 * (g_size - 1) * n * sizeof(float) / g_size;
    ht_comm_recv_bytes += 2 * (g_size - 1) * n * sizeof(float) / g_size;
    CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, ht_comm_count(n, "MPI_Allreduce"), MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD));
}

void ht_comm_allreduce_sum_f64(double *buf, size_t n) {
    if (g_size > 1)
        CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, ht_comm_count(n, "MPI_Allreduce"), MPI_DOUBLE,
                            MPI_SUM, MPI_COMM_WORLD));
}

void ht_comm_traffic(uint64_t *sent, uint64_t *received) {
    *sent = ht_comm_sent_bytes;
    *received = ht_comm_recv_bytes;
}

void ht_comm_send(const void *buf, size_t bytes, int peer, int tag) {
    ht_comm_sent_bytes += bytes;
    CHECK(MPI_Send(buf, ht_comm_count(bytes, "MPI_Send"), MPI_BYTE, peer, tag, MPI_COMM_WORLD));
}

void ht_comm_recv(void *buf, size_t bytes, int peer, int tag) {
    MPI_Status st;
    CHECK(
        MPI_Recv(buf, ht_comm_count(bytes, "MPI_Recv"), MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
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

/* A request is either one MPI_Iallreduce or our ring as a state machine: step s < p-1 is
 * reduce-scatter step s (receive into tmp, then add), step s >= p-1 all-gather step
 * s-(p-1) (receive straight into the buffer). A step's receive and send are posted
 * together; the next step starts when both are complete. */
struct ht_comm_req {
    float *buf;
    size_t n;
    int ring, tag;
    int *members; /* ring: the world ranks in ring order (all ranks, or a group) */
    int p, pos;   /* ring: members, and this rank's index among them */
    int step, nsteps, posted, done;
    MPI_Request mr[2];
    float *tmp;               /* ring: one chunk */
    struct ht_comm_req *next; /* outstanding list */
};

static ht_comm_req *g_reqs; /* outstanding, oldest first */
static unsigned g_seq;      /* requests started: the tag of the next one */

/* Tags cycle through a range far below MPI_TAG_UB's guaranteed 32767; tags only need to
 * differ between requests outstanding at the same time. */
enum { TAG_BASE = 1024, TAG_RANGE = 16384 };

static void ring_post(ht_comm_req *q) {
    int p = q->p, r = q->pos, s = q->step;
    int right = q->members[(r + 1) % p], left = q->members[(r + p - 1) % p];
    int sc, rc;
    if (s < p - 1) { /* reduce-scatter: after p-1 steps rank r holds the full sum of chunk r+1 */
        sc = (r - s + 2 * p) % p;
        rc = (r - s - 1 + 2 * p) % p;
    } else { /* all-gather: received values are copied, not added: bitwise identical ranks */
        s -= p - 1;
        sc = (r + 1 - s + 2 * p) % p;
        rc = (r - s + 2 * p) % p;
    }
    size_t slo, shi, rlo, rhi;
    ht_comm_ring_chunk(q->n, p, sc, &slo, &shi);
    ht_comm_ring_chunk(q->n, p, rc, &rlo, &rhi);
    float *into = q->step < p - 1 ? q->tmp : q->buf + rlo;
    CHECK(MPI_Irecv(into, ht_comm_count(rhi - rlo, "ring chunk"), MPI_FLOAT, left, q->tag,
                    MPI_COMM_WORLD, &q->mr[0]));
    ht_comm_sent_bytes += (shi - slo) * sizeof(float);
    ht_comm_recv_bytes += (rhi - rlo) * sizeof(float);
    CHECK(MPI_Isend(q->buf + slo, ht_comm_count(shi - slo, "ring chunk"), MPI_FLOAT, right, q->tag,
                    MPI_COMM_WORLD, &q->mr[1]));
    q->posted = 1;
}

/* Finishes a completed step: reduce-scatter adds the received chunk in place. */
static void ring_finish_step(ht_comm_req *q) {
    int p = q->p, r = q->pos;
    if (q->step < p - 1) {
        size_t lo, hi;
        ht_comm_ring_chunk(q->n, p, (r - q->step - 1 + 2 * p) % p, &lo, &hi);
        float *dst = q->buf + lo;
        for (size_t i = 0; i < hi - lo; i++)
            dst[i] += q->tmp[i];
    }
    q->posted = 0;
    if (++q->step == q->nsteps) q->done = 1;
}

/* Moves one request on as far as it goes without blocking (block = 1: to the end). */
static void progress_one(ht_comm_req *q, int block) {
    while (!q->done) {
        if (!q->ring) {
            int flag = 1;
            if (block)
                CHECK(MPI_Wait(&q->mr[0], MPI_STATUS_IGNORE));
            else
                CHECK(MPI_Test(&q->mr[0], &flag, MPI_STATUS_IGNORE));
            q->done = flag;
            return;
        }
        if (!q->posted) ring_post(q);
        int flag = 1;
        if (block)
            CHECK(MPI_Waitall(2, q->mr, MPI_STATUSES_IGNORE));
        else
            CHECK(MPI_Testall(2, q->mr, &flag, MPI_STATUSES_IGNORE));
        if (!flag) return;
        ring_finish_step(q);
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

/* A ring request over members[0..p) (world ranks; this rank at index pos) with tag. */
static ht_comm_req *ring_start(float *buf, size_t n, const int *members, int p, int pos, int tag) {
    ht_comm_req *q = ht_xcalloc(1, sizeof *q);
    q->buf = buf;
    q->n = n;
    q->ring = 1;
    q->p = p;
    q->pos = pos;
    q->tag = tag;
    q->members = ht_xmalloc((size_t)p * sizeof(int));
    for (int i = 0; i < p; i++)
        q->members[i] = members ? members[i] : i;
    size_t lo, hi;
    ht_comm_ring_chunk(n, p, 0, &lo, &hi); /* chunk 0 is a largest one */
    q->tmp = ht_xmalloc((hi - lo ? hi - lo : 1) * sizeof(float));
    q->nsteps = 2 * (p - 1);
    ring_post(q); /* the first step goes out now: the neighbours can start */
    enqueue(q);
    return q;
}

ht_comm_req *ht_comm_iallreduce(float *buf, size_t n, int ring) {
    if (g_size == 1 || !ht_comm_active() || n == 0) {
        ht_comm_req *q = ht_xcalloc(1, sizeof *q);
        q->done = 1; /* nothing to exchange; no tag used, as on every rank */
        return q;
    }
    int tag = TAG_BASE + (int)(g_seq++ % TAG_RANGE);
    if (ring) return ring_start(buf, n, NULL, g_size, g_rank, tag);
    ht_comm_req *q = ht_xcalloc(1, sizeof *q);
    q->buf = buf;
    q->n = n;
    q->tag = tag;
    /* what a ring would move: MPI's own algorithm may move less or more */
    ht_comm_sent_bytes += 2 * (g_size - 1) * n * sizeof(float) / g_size;
    ht_comm_recv_bytes += 2 * (g_size - 1) * n * sizeof(float) / g_size;
    CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, ht_comm_count(n, "MPI_Iallreduce"), MPI_FLOAT, MPI_SUM,
                         MPI_COMM_WORLD, &q->mr[0]));
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
    /* Poll rather than block on r alone: the others' ring steps must keep moving, or a
     * neighbour waiting on one of them (in another order) could wait for us forever. */
    if (g_reqs == r && !r->next) progress_one(r, 1); /* alone: block in MPI */
    while (!r->done) {
        ht_comm_test(NULL);
    }
    for (ht_comm_req **at = &g_reqs; *at; at = &(*at)->next)
        if (*at == r) {
            *at = r->next;
            g_nreqs--;
            break;
        }
    free(r->tmp);
    free(r->members);
    free(r);
}

int ht_comm_outstanding(void) { return g_nreqs; }

void ht_comm_ring_allreduce(float *buf, size_t n) {
    if (g_size == 1 || n == 0) return;
    ht_comm_req *q = ht_comm_iallreduce(buf, n, 1);
    ht_comm_wait(q);
}
