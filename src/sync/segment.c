/* Segments of an asynchronous run (sync.h): begin, quiesce, end, and the snapshot of every
 * worker's state that a checkpoint holds. A quiesce point is a moment where no message of
 * the policy is in flight: every worker has stopped stepping, the extra ranks have answered
 * every push or ready message and wait for the next segment, gossip models sent have been
 * merged. There the job's state is the workers' parameters, optimizer buffers and scalars
 * plus (parameter servers) the servers' shards, which worker 0 then holds; so a checkpoint
 * written there continues exactly, whatever the timing that led to it. */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "core/stop.h"
#include "sync/internal.h"

void ht_sync_begin(ht_sync *s, int64_t until) {
    s->stop = 0;
    s->told_interrupt = 0;
    s->seg_start = s->global;
    s->seg_samples = 0;
    if (s->policy->begin) s->policy->begin(s, until);
}

/* v[0..2) summed over the workers by worker 0 and sent back: exact integers, the same on
 * every worker (replies during a segment tell each worker a different count). */
static void agree(const ht_sync *s, int64_t *v) {
    if (s->rank != 0) {
        ht_comm_send(v, 2 * sizeof *v, 0, TAG_AGREE);
        ht_comm_recv(v, 2 * sizeof *v, 0, TAG_AGREE);
        return;
    }
    for (int w = 1; w < s->L.workers; w++) {
        int64_t u[2];
        ht_comm_recv(u, sizeof u, w, TAG_AGREE);
        v[0] += u[0], v[1] += u[1];
    }
    for (int w = 1; w < s->L.workers; w++)
        ht_comm_send(v, 2 * sizeof *v, w, TAG_AGREE);
}

int ht_sync_quiesce(ht_sync *s) {
    double t0 = ht_now();
    if (s->policy->quiesce) s->policy->quiesce(s);
    /* one decision for all workers: a signal may have reached only some ranks */
    int64_t v[2] = {s->seg_samples, ht_stop_requested() || s->told_interrupt};
    agree(s, v);
    s->global = s->seg_start + v[0];
    s->st.comm_s += ht_now() - t0;
    return v[1] > 0;
}

void ht_sync_end(ht_sync *s, int interrupted) {
    if (s->rank != 0) return;
    msg_hdr h = {.kind = MSG_FIN, .aux = interrupted};
    for (int r = s->L.workers; r < s->L.world; r++)
        ht_comm_send(&h, sizeof h, r, TAG_INIT);
}

int64_t ht_sync_local(const ht_sync *s) { return s->local; }
int64_t ht_sync_samples(const ht_sync *s) { return s->global; }
int ht_sync_servers(const ht_sync *s) { return s->version ? s->L.extra : 0; }
int ht_sync_own_models(const ht_sync *s) { return s->policy->average != NULL; }

void ht_sync_restore(ht_sync *s, int64_t samples, const double *v, const int64_t *version,
                     const int64_t *opt_t) {
    s->global = samples;
    s->local = (int64_t)v[0];
    s->opt->t = (int64_t)v[1];
    if (s->policy->set) s->policy->set(s, v + 2);
    for (int j = 0; s->version && version && j < s->L.extra; j++) {
        s->version[j] = version[j];
        s->opt_t[j] = opt_t[j];
    }
}

/* ---------------------------------------------------------------------- snapshot */

void ht_sync_state(const ht_sync *s, double *v) {
    v[0] = (double)s->local;
    v[1] = (double)s->opt->t;
    for (int i = 2; i < HT_SYNC_NV; i++)
        v[i] = 0;
    if (s->policy->get) s->policy->get(s, v + 2);
}

/* This worker's scalars, then (models) its parameters and optimizer buffers, into x. */
static void pack(ht_sync *s, int models, int ns, double *v, float *x) {
    ht_sync_state(s, v);
    if (!models) return;
    ht_sync_params_read(s, x);
    for (int i = 0; i < ns; i++) {
        const char *name;
        ht_buf *buf;
        size_t n;
        ht_optim_state(s->opt, i, &name, &buf, &n);
        ht_buf_read(s->m->dev, buf, 0, n * sizeof(float), x + (size_t)(i + 1) * s->n);
    }
}

void ht_sync_snapshot(ht_sync *s, ht_sync_snap *snap) {
    memset(snap, 0, sizeof *snap);
    const int W = s->L.workers, ns = ht_optim_state_count(s->opt);
    const int models = s->policy->average != NULL;
    const size_t per = models ? (size_t)(ns + 1) * s->n : 0;
    float *job = ht_xmalloc((s->n ? s->n : 1) * sizeof(float));
    if (models) s->policy->average(s, job); /* collective over the workers */
    double v[HT_SYNC_NV];
    float *x = ht_xmalloc((per ? per : 1) * sizeof(float));
    pack(s, models, ns, v, x);
    if (s->rank != 0) {
        ht_comm_send(v, sizeof v, 0, TAG_SNAP);
        if (per) ht_comm_send(x, per * sizeof(float), 0, TAG_SNAP);
        free(x);
        free(job);
        return;
    }
    snap->samples = s->global;
    snap->workers = W;
    snap->servers = s->version ? s->L.extra : 0;
    snap->models = models;
    snap->n = s->n;
    snap->nstates = ns;
    snap->v = ht_xcalloc((size_t)W * HT_SYNC_NV, sizeof(double));
    memcpy(snap->v, v, sizeof v);
    if (models) {
        snap->params = ht_xmalloc((size_t)W * (s->n ? s->n : 1) * sizeof(float));
        snap->states = ht_xmalloc((size_t)W * ((size_t)ns * s->n + 1) * sizeof(float));
    }
    for (int w = 0; w < W; w++) {
        float *xw = w == 0 ? x : ht_xmalloc((per ? per : 1) * sizeof(float));
        if (w > 0) {
            ht_comm_recv(snap->v + (size_t)w * HT_SYNC_NV, sizeof v, w, TAG_SNAP);
            if (per) ht_comm_recv(xw, per * sizeof(float), w, TAG_SNAP);
        }
        if (models) {
            memcpy(snap->params + (size_t)w * s->n, xw, s->n * sizeof(float));
            memcpy(snap->states + (size_t)w * ns * s->n, xw + s->n,
                   (size_t)ns * s->n * sizeof(float));
        }
        free(xw);
    }
    if (!models) ht_sync_params_read(s, job); /* after the quiesce: the servers' parameters */
    snap->job = job;
    if (snap->servers) {
        snap->version = ht_xmalloc((size_t)snap->servers * sizeof(int64_t));
        snap->opt_t = ht_xmalloc((size_t)snap->servers * sizeof(int64_t));
        memcpy(snap->version, s->version, (size_t)snap->servers * sizeof(int64_t));
        memcpy(snap->opt_t, s->opt_t, (size_t)snap->servers * sizeof(int64_t));
    }
}

void ht_sync_snap_free(ht_sync_snap *snap) {
    free(snap->v);
    free(snap->job);
    free(snap->params);
    free(snap->states);
    free(snap->version);
    free(snap->opt_t);
    memset(snap, 0, sizeof *snap);
}
