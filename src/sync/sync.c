/* What every policy shares: the layout of ranks, local batches, the start-up message from
 * worker 0, parameter transfers, the final sum over workers, dispatch to the policy, and the
 * end-of-run report. */
#include "sync/sync.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "core/vcost.h"
#include "core/stop.h"
#include "sync/internal.h"

/* Each family's implementation (config/modes.h: a row's family). */
static const ht_sync_policy *const POLICIES[] = {
    [HT_SYNC_FAM_ALLREDUCE] = &ht_bsp_policy,
    [HT_SYNC_FAM_PS] = &ht_ps_policy,
    [HT_SYNC_FAM_GROUP] = &ht_preduce_policy,
    [HT_SYNC_FAM_GOSSIP] = &ht_gossip_policy,
};
_Static_assert(sizeof POLICIES / sizeof *POLICIES == HT_SYNC_NFAMILIES,
               "every family of config/modes.h has its policy");

static const ht_sync_policy *policy_of(ht_sync_mode mode) {
    return POLICIES[ht_sync_rows[mode].family];
}

void ht_sync_cat(char *buf, size_t size, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len && len + 1 < size) buf[len++] = ',', buf[len] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

void ht_sync_logged(int rc) {
    if (rc != HT_OK) ht_die(rc, "sync.log: %s", ht_errmsg());
}

/* ------------------------------------------------------------------------- messages */

int64_t ht_sync_recv_init(msg_hdr *h) {
    ht_comm_msg_wait(ht_comm_irecv(h, sizeof *h, 0, TAG_INIT), NULL, NULL);
    if (h->kind != MSG_INIT && h->kind != MSG_FIN)
        ht_die(HT_ERUNTIME, "sync: expected the start message from rank 0");
    return h->kind;
}

void ht_sync_send_init(const ht_sync *s, int to, int64_t until, const msg_hdr *with, int64_t n,
                       const float *payload, size_t npay) {
    msg_hdr h = {.kind = MSG_INIT,
                 .n = n,
                 .id = s->total_steps,
                 .clock = s->global,
                 .samples = until,
                 .version = with ? with->version : 0,
                 .aux = with ? with->aux : 0};
    ht_comm_send(&h, sizeof h, to, TAG_INIT);
    if (payload) ht_comm_send(payload, npay * sizeof(float), to, TAG_INIT);
}

int ht_sync_stop_update(int stop, int64_t samples, int64_t until, int64_t aux) {
    if (stop) return stop; /* decided once per segment: every reply says the same */
    if (aux || ht_stop_requested()) return STOP_INTERRUPT;
    return samples >= until ? STOP_BUDGET : STOP_NO;
}

int ht_sync_fin_rc(const msg_hdr *h) {
    return h->aux ? ht_error(HT_ESTOPPED, "interrupted") : HT_OK;
}

/* Both declare their copy's virtual time under emulation (core/vcost.h), as hetsim charges it. */
void ht_sync_params_read(ht_sync *s, float *x) {
    ht_buf_read(s->m->dev, s->m->params, 0, s->n * sizeof(float), x);
    ht_vcost(HT_VC_D2H, 0, 0, 0, s->n);
}

void ht_sync_params_write(ht_sync *s, const float *x) {
    ht_buf_write(s->m->dev, s->m->params, 0, s->n * sizeof(float), x);
    ht_vcost(HT_VC_H2D, 0, 0, 0, s->n);
}

void ht_sync_workers_sum(const ht_sync *s, float *x, size_t n) {
    int *members = ht_xmalloc((size_t)s->L.workers * sizeof(int));
    for (int i = 0; i < s->L.workers; i++)
        members[i] = i;
    ht_comm_group_allreduce(x, n, members, s->L.workers, HT_COMM_TAG_MAX);
    free(members);
}

/* --------------------------------------------------------------------------- workers */

ht_sync *ht_sync_open(const ht_config *cfg, const ht_sync_layout *L, int rank, ht_model *m,
                      ht_optim *opt, int64_t total_steps) {
    ht_sync *s = ht_xcalloc(1, sizeof *s);
    s->cfg = cfg;
    s->L = *L;
    s->rank = rank;
    s->m = m;
    s->opt = opt;
    s->n = m->nparams;
    s->total_steps = total_steps;
    s->slowdown = ht_config_slowdown_at(cfg, rank, 0);
    s->policy = policy_of(L->mode);
    s->policy->open(s);
    return s;
}

void ht_sync_backward(ht_sync *s, int b, float grad_scale, double t_start) {
    if (s->policy->backward)
        s->policy->backward(s, b, grad_scale, t_start);
    else
        ht_model_backward(s->m, b, grad_scale);
}

void ht_sync_step(ht_sync *s, int b, float lr, int *stop, int64_t *global) {
    s->st.steps++;
    s->local++;
    s->seg_samples += b;
    s->st.samples += b;
    s->policy->step(s, b, lr);
    *stop = s->stop;
    *global = s->global;
}

void ht_sync_set_slowdown(ht_sync *s, double f) { s->slowdown = f; }

void ht_sync_add_compute(ht_sync *s, double seconds) {
    s->st.compute_s += seconds;
    s->last_compute = seconds;
}

ht_sync_stats ht_sync_stats_now(const ht_sync *s) { return s->st; }

void ht_sync_finish(ht_sync *s) {
    if (!s->policy->finish) return;
    double t0 = ht_now();
    s->policy->finish(s);
    s->st.comm_s += ht_now() - t0;
}

ht_sync_stats ht_sync_close(ht_sync *s) {
    s->policy->close(s);
    free(s->version);
    free(s->opt_t);
    ht_comm_traffic(&s->st.sent, &s->st.received);
    ht_sync_stats st = s->st;
    free(s);
    return st;
}

/* ------------------------------------------------------------------------ extra ranks */

int ht_sync_serve(const ht_config *cfg, const ht_sync_layout *L, int rank, const char *sel,
                  ht_sync_stats *st) {
    memset(st, 0, sizeof *st);
    const ht_sync_policy *p = policy_of(L->mode);
    int rc = p->serve ? p->serve(cfg, L, rank, sel, st)
                      : ht_error(HT_EINPUT, "sync.mode \"%s\" has no extra ranks",
                                 ht_sync_mode_name(cfg->sync.mode));
    ht_comm_traffic(&st->sent, &st->received);
    return rc;
}

void ht_sync_report(const ht_sync_stats *mine, ht_sync_stats *all) {
    int world = ht_comm_size();
    ht_sync_stats *tmp = all ? all : ht_xcalloc((size_t)world, sizeof *tmp);
    ht_comm_allgather(mine, sizeof *mine, tmp);
    if (!all) free(tmp);
}
