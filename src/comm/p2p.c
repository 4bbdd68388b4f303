/* Nonblocking point-to-point messages, probes and the polite wait, for the sync policies
 * (parameter servers, group generators, gossip). Every call is checked (internal.h). */
#include <mpi.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "comm/comm.h"
#include "comm/internal.h"
#include "core/err.h"
#include "core/log.h"

struct ht_comm_msg {
    MPI_Request req;
    int recv, peer, done;
    size_t bytes; /* a send: its size; a receive: what arrived, once done */
};

void ht_comm_backoff(int spins) {
#ifdef HT_SMPI
    /* virtual time: a poll must let simulated time pass (or the wait never ends), and a
     * sleep is free in real time; 1 us bounds how late a wait notices its message */
    struct timespec q = {0, 1000};
    nanosleep(&q, NULL);
    return;
#endif
    if (spins < 32) return;
    if (spins < 96) {
        sched_yield();
        return;
    }
    long ns = 2000L << ((spins - 96) / 16 < 5 ? (spins - 96) / 16 : 5); /* 2 us .. 64 us */
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

ht_comm_msg *ht_comm_isend(const void *buf, size_t bytes, int peer, int tag) {
    ht_comm_msg *m = ht_xcalloc(1, sizeof *m);
    m->peer = peer;
    m->bytes = bytes;
    ht_comm_sent_bytes += bytes;
    CHECK(MPI_Isend(buf, ht_comm_count(bytes, "MPI_Isend"), MPI_BYTE, peer, tag, ht_comm_cur,
                    &m->req));
    return m;
}

ht_comm_msg *ht_comm_irecv(void *buf, size_t bytes, int peer, int tag) {
    ht_comm_msg *m = ht_xcalloc(1, sizeof *m);
    m->recv = 1;
    m->peer = peer;
    CHECK(MPI_Irecv(buf, ht_comm_count(bytes, "MPI_Irecv"), MPI_BYTE,
                    peer == HT_COMM_ANY ? MPI_ANY_SOURCE : peer, tag, ht_comm_cur, &m->req));
    return m;
}

/* Records a completed request's status. */
static void complete(ht_comm_msg *m, MPI_Status *st) {
    m->done = 1;
    if (!m->recv) return;
    int got = 0;
    CHECK(MPI_Get_count(st, MPI_BYTE, &got));
    m->peer = st->MPI_SOURCE;
    m->bytes = (size_t)got;
    ht_comm_recv_bytes += (uint64_t)got;
}

static void report(const ht_comm_msg *m, int *from, size_t *bytes) {
    if (from) *from = m->peer;
    if (bytes) *bytes = m->bytes;
}

int ht_comm_msg_done(ht_comm_msg *m, int *from, size_t *bytes) {
    if (!m->done) {
        int flag = 0;
        MPI_Status st;
        CHECK(MPI_Test(&m->req, &flag, &st));
        if (flag) complete(m, &st);
    }
    if (m->done) report(m, from, bytes);
    return m->done;
}

void ht_comm_msg_wait(ht_comm_msg *m, int *from, size_t *bytes) {
    /* blocking in MPI: a large message moves in fragments that both sides must progress,
     * and Open MPI yields the core between polls when the node is oversubscribed */
    if (!m->done) {
        MPI_Status st;
        WAITING(m->recv ? "MPI_Wait (receive)" : "MPI_Wait (send)", m->peer,
                CHECK(MPI_Wait(&m->req, &st)));
        complete(m, &st);
    }
    report(m, from, bytes);
    free(m);
}

void ht_comm_msg_free(ht_comm_msg *m) {
    if (m && !m->done) ht_die(HT_ERUNTIME, "ht_comm_msg_free: the message is not complete");
    free(m);
}

int ht_comm_msg_waitany(ht_comm_msg **msgs, int n, double timeout_s) {
    if (timeout_s < 0) { /* no limit: block in MPI (see ht_comm_msg_wait) */
        MPI_Request *reqs = ht_xmalloc((size_t)(n ? n : 1) * sizeof *reqs);
        int any = 0, idx = MPI_UNDEFINED;
        for (int i = 0; i < n; i++) {
            reqs[i] = msgs[i] && !msgs[i]->done ? msgs[i]->req : MPI_REQUEST_NULL;
            if (msgs[i] && msgs[i]->done) idx = i;
            any |= msgs[i] != NULL;
        }
        if (any && idx == MPI_UNDEFINED) {
            MPI_Status st;
            WAITING("MPI_Waitany", HT_COMM_ANY, CHECK(MPI_Waitany(n, reqs, &idx, &st)));
            if (idx != MPI_UNDEFINED) complete(msgs[idx], &st);
        }
        free(reqs);
        return any && idx != MPI_UNDEFINED ? idx : -1;
    }
    double t0 = ht_now();
    ht_comm_wait_begin("a wait for messages", HT_COMM_ANY);
    int got = -1;
    for (int spins = 0; got < 0; spins++) {
        int any = 0;
        for (int i = 0; i < n && got < 0; i++) {
            if (!msgs[i]) continue;
            any = 1;
            if (ht_comm_msg_done(msgs[i], NULL, NULL)) got = i;
        }
        if (got >= 0 || !any || (timeout_s >= 0 && ht_now() - t0 >= timeout_s)) break;
        ht_comm_test(NULL); /* outstanding all-reduces move on too */
        ht_comm_backoff(spins);
    }
    ht_comm_wait_end();
    return got;
}

int ht_comm_probe(int peer, int tag, int *from, size_t *bytes) {
    int flag = 0, count = 0;
    MPI_Status st;
    CHECK(MPI_Iprobe(peer == HT_COMM_ANY ? MPI_ANY_SOURCE : peer, tag, ht_comm_cur, &flag, &st));
    if (!flag) return 0;
    CHECK(MPI_Get_count(&st, MPI_BYTE, &count));
    if (from) *from = st.MPI_SOURCE;
    if (bytes) *bytes = (size_t)count;
    return 1;
}

