/* MPI wrappers (the only file that calls MPI) and the ring all-reduce. Every call goes
 * through CHECK, which turns an MPI error code into an exit 1 naming the call, the rank
 * and MPI_Error_string; the exit hook turns any ht_die into MPI_Abort with its code. */
#include "comm/comm.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

static int g_active, g_done, g_rank, g_size = 1;
static float *g_tmp; /* ring receive scratch: one chunk */
static size_t g_tmp_n;

static void check(int rc, const char *call) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING + 1] = "";
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    ht_die(HT_ERUNTIME, "%s failed on rank %d of %d: %s", call, g_rank, g_size, msg);
}
#define CHECK(call) check((call), #call)

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
    g_done = 1;
    free(g_tmp);
    g_tmp = NULL;
    g_tmp_n = 0;
    CHECK(MPI_Finalize());
}

int ht_comm_rank(void) { return g_rank; }
int ht_comm_size(void) { return g_size; }
int ht_comm_active(void) { return g_active && !g_done; }

/* MPI counts are int: larger transfers would need splitting, which nothing needs yet. */
static int count_of(size_t n, const char *what) {
    if (n > INT_MAX)
        ht_die(HT_ERUNTIME, "%s of %zu elements exceeds MPI's int count (%d)", what, n, INT_MAX);
    return (int)n;
}

void ht_comm_barrier(void) {
    if (g_size > 1) CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

void ht_comm_bcast(void *buf, size_t bytes, int root) {
    if (g_size > 1)
        CHECK(MPI_Bcast(buf, count_of(bytes, "MPI_Bcast"), MPI_BYTE, root, MPI_COMM_WORLD));
}

void ht_comm_allgather(const void *send, size_t bytes, void *recv) {
    if (g_size == 1) {
        memmove(recv, send, bytes);
        return;
    }
    int c = count_of(bytes, "MPI_Allgather");
    CHECK(MPI_Allgather(send, c, MPI_BYTE, recv, c, MPI_BYTE, MPI_COMM_WORLD));
}

void ht_comm_allreduce_sum(float *buf, size_t n) {
    if (g_size > 1)
        CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, count_of(n, "MPI_Allreduce"), MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD));
}

void ht_comm_allreduce_sum_f64(double *buf, size_t n) {
    if (g_size > 1)
        CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, count_of(n, "MPI_Allreduce"), MPI_DOUBLE, MPI_SUM,
                            MPI_COMM_WORLD));
}

/* ------------------------------------------------------------------------------ ring */

void ht_comm_ring_chunk(size_t n, int p, int c, size_t *lo, size_t *hi) {
    /* sizes differ by at most one; the first n % p chunks take the extra value */
    size_t q = n / (size_t)p, r = n % (size_t)p, uc = (size_t)c;
    *lo = uc * q + (uc < r ? uc : r);
    *hi = *lo + q + (uc < r);
}

enum { TAG_RS = 7301, TAG_AG = 7302 };

/* One ring step: send chunk `sc` to the right while receiving chunk `rc` from the left,
 * into `into` (scratch or the buffer itself). */
static void ring_step(float *buf, size_t n, int sc, int rc, float *into, int tag) {
    int p = g_size, right = (g_rank + 1) % p, left = (g_rank + p - 1) % p;
    size_t slo, shi, rlo, rhi;
    ht_comm_ring_chunk(n, p, sc, &slo, &shi);
    ht_comm_ring_chunk(n, p, rc, &rlo, &rhi);
    MPI_Request req[2];
    CHECK(MPI_Irecv(into == g_tmp ? g_tmp : buf + rlo, count_of(rhi - rlo, "ring chunk"), MPI_FLOAT,
                    left, tag, MPI_COMM_WORLD, &req[0]));
    CHECK(MPI_Isend(buf + slo, count_of(shi - slo, "ring chunk"), MPI_FLOAT, right, tag,
                    MPI_COMM_WORLD, &req[1]));
    CHECK(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
    if (into == g_tmp) {
        float *dst = buf + rlo;
        for (size_t i = 0; i < rhi - rlo; i++)
            dst[i] += g_tmp[i];
    }
}

void ht_comm_ring_allreduce(float *buf, size_t n) {
    int p = g_size, r = g_rank;
    if (p == 1 || n == 0) return;
    size_t lo, hi;
    ht_comm_ring_chunk(n, p, 0, &lo, &hi); /* chunk 0 is a largest one */
    if (hi - lo > g_tmp_n) {
        g_tmp = ht_xrealloc(g_tmp, (hi - lo) * sizeof(float));
        g_tmp_n = hi - lo;
    }
    /* reduce-scatter: after p-1 steps rank r holds the full sum of chunk r+1 */
    for (int s = 0; s < p - 1; s++)
        ring_step(buf, n, (r - s + 2 * p) % p, (r - s - 1 + 2 * p) % p, g_tmp, TAG_RS);
    /* all-gather: pass the finished chunks around; received values are copied, not added,
     * which is why every rank ends bitwise identical */
    for (int s = 0; s < p - 1; s++)
        ring_step(buf, n, (r + 1 - s + 2 * p) % p, (r - s + 2 * p) % p, NULL, TAG_AG);
}
