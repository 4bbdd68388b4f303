/* The ranks of a training job: shares, the start-up table, common parameters, per-rank
 * metrics, rebalancing, the trace. All MPI goes through src/comm; all device traffic through
 * ht_buf_read/ht_buf_write. */
#include "train/ranks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "data/data.h"
#include "io/trace.h"
#include "plan/plan.h"

static void set_slice(ht_cluster *c) {
    ht_shard_range(c->shares, c->world, c->rank, &c->lo, &c->hi);
}

/* The rebalancer over the current ranks. EMA weight 0.3 (a slowdown shows within a few
 * steps), adopt only >5% predicted gains, at most every 5 steps, the first 2 steps ignored
 * (compilation, first allocations). */
static int start_rebalancer(ht_cluster *c) {
    int rc = ht_rebalancer_init(&c->rb, c->world, 0.3, 0.05, 5, 2);
    if (rc != HT_OK) c->rebalance = 0;
    return rc;
}

int ht_cluster_init(ht_cluster *c, const ht_config *cfg) {
    memset(c, 0, sizeof *c);
    c->rank = ht_comm_rank();
    c->world = ht_comm_size();
    c->B = cfg->train.batch;
    int rc = ht_config_check_world(cfg, c->world);
    if (rc != HT_OK) return rc;
    c->shares = ht_xcalloc((size_t)c->world, sizeof(int));
    if (cfg->cluster.nshares) {
        memcpy(c->shares, cfg->cluster.shares, (size_t)c->world * sizeof(int));
    } else { /* equal: the first B % world ranks take one more */
        for (int r = 0; r < c->world; r++)
            c->shares[r] = c->B / c->world + (r < c->B % c->world);
    }
    set_slice(c);
    c->slowdown = ht_config_slowdown_at(cfg, c->rank, 0);
    c->cfg = cfg;
    c->ring = cfg->cluster.allreduce != HT_ALLRED_MPI;
    c->exclude_slow = cfg->cluster.exclude_slow;
    c->nworld = c->world;
    c->wrank = ht_xcalloc((size_t)c->world, sizeof(int));
    c->excluded = ht_xcalloc((size_t)c->world, 1);
    for (int r = 0; r < c->world; r++)
        c->wrank[r] = r;
    c->rebalance = c->world > 1 && !cfg->cluster.nshares && cfg->cluster.split == HT_SPLIT_SPEED &&
                   cfg->cluster.rebalance;
    return c->rebalance ? start_rebalancer(c) : HT_OK;
}

/* Issue 14: the ranks the speed split left out, one line each with the numbers that decided
 * it: share 0 and synchronising only (engine_dp.c), or with cluster.exclude_slow leaving the
 * job (ht_cluster_detach), except rank 0, which holds evaluation, checkpoints and the model. */
static void report_exclusion(const ht_cluster *c, const double *sp, const double *fx, double t_all,
                             double t_kept) {
    for (int r = 0; r < c->world; r++) {
        if (c->shares[r] != 0) continue;
        const char *what =
            c->excluded[r] ? "excluded (cluster.exclude_slow): it takes no part in training or "
                             "synchronisation and exits with the others (the default; "
                             "cluster.exclude_slow = false keeps it in)"
            : c->exclude_slow
                ? "left out: share 0; not excluded although cluster.exclude_slow is set, as rank 0 "
                  "holds evaluation, checkpoints and the final model: it only joins the gradient "
                  "sum and the optimizer step"
                : "left out: share 0, it only joins the gradient sum and the optimizer step "
                  "(cluster.exclude_slow = false)";
        ht_log_info("cluster: rank %d (%.0f samples/s + %.1f ms per step) %s; its fixed cost "
                    "exceeds what its samples save the others (predicted step %.2f ms with it, "
                    "%.2f ms without)",
                    r, sp[r], 1e3 * fx[r], what, 1e3 * t_all, 1e3 * t_kept);
    }
}

void ht_cluster_gather_model(const ht_cluster *c, double speed, double fixed, double *sp,
                             double *fx) {
    double mine[2] = {speed, fixed};
    double *all = ht_xcalloc((size_t)c->world * 2, sizeof(double));
    ht_comm_allgather(mine, sizeof mine, all);
    for (int r = 0; r < c->world; r++)
        sp[r] = all[2 * r], fx[r] = all[2 * r + 1];
    free(all);
}

int ht_cluster_adopt_split(ht_cluster *c, const int *shares, const double *sp, const double *fx,
                           double t_all, double t_kept) {
    int rc = c->rebalance ? ht_rebalancer_calibrate(&c->rb, sp, fx) : HT_OK;
    if (rc != HT_OK) return rc;
    memcpy(c->shares, shares, (size_t)c->world * sizeof *c->shares);
    set_slice(c);
    c->t_all = t_all, c->t_kept = t_kept;
    free(c->model_sp), free(c->model_fx);
    c->model_sp = ht_xcalloc((size_t)c->world, sizeof(double));
    c->model_fx = ht_xcalloc((size_t)c->world, sizeof(double));
    memcpy(c->model_sp, sp, (size_t)c->world * sizeof(double));
    memcpy(c->model_fx, fx, (size_t)c->world * sizeof(double));
    /* rank 0 stays whatever its share: it reports, evaluates and checkpoints */
    for (int r = 1; c->exclude_slow && r < c->world; r++)
        if (c->shares[r] == 0) c->excluded[r] = 1, c->excluding = 1;
    if (c->rank == 0) {
        char line[1024];
        size_t len = 0;
        for (int r = 0; r < c->world && len < sizeof line; r++)
            len += (size_t)snprintf(line + len, sizeof line - len, "%s%d (%.0f/s + %.1f ms)",
                                    r ? ", " : "", c->shares[r], sp[r], 1e3 * fx[r]);
        ht_log_info("cluster: shares by measured speed: %s (samples/s beyond a fixed cost "
                    "per step)",
                    line);
        report_exclusion(c, sp, fx, t_all, t_kept);
    }
    return HT_OK;
}

void ht_cluster_announce(ht_cluster *c, const char *devname) {
    char host[HT_HOST_TEXT] = "", dev[HT_DEVNAME_TEXT] = "";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    snprintf(dev, sizeof dev, "%s", devname);
    c->hosts = ht_xcalloc((size_t)c->world, HT_HOST_TEXT);
    c->devnames = ht_xcalloc((size_t)c->world, HT_DEVNAME_TEXT);
    ht_comm_allgather(host, HT_HOST_TEXT, c->hosts);
    ht_comm_allgather(dev, HT_DEVNAME_TEXT, c->devnames);
    double *slow = ht_xcalloc((size_t)c->world, sizeof(double));
    ht_comm_allgather(&c->slowdown, sizeof(double), slow);
    free(c->slow);
    c->slow = slow; /* kept: the records of excluded ranks show it */
    if (c->rank == 0 && c->world > 1) {
        ht_log_info("cluster: %d ranks, global batch %d, all-reduce %s", c->world, c->B,
                    c->ring ? "ring" : "mpi");
        for (int r = 0; r < c->world; r++) {
            char slowtxt[64] = "";
            const double f = c->cfg->cluster.nslowdown ? c->cfg->cluster.slowdown[r] : 1;
            const int from = c->cfg->cluster.nslowdown_from ? c->cfg->cluster.slowdown_from[r] : 0;
            if (f != 1 && from > 0)
                snprintf(slowtxt, sizeof slowtxt, "  slowdown x%.3g (emulated) from step %d", f,
                         from);
            else if (f != 1)
                snprintf(slowtxt, sizeof slowtxt, "  slowdown x%.3g (emulated)", f);
            ht_log_info("  rank %d  host %-16s  device %-32s  share %d%s%s", r,
                        c->hosts + (size_t)r * HT_HOST_TEXT,
                        c->devnames + (size_t)r * HT_DEVNAME_TEXT, c->shares[r],
                        c->excluded[r] ? " (excluded: takes no part)"
                        : c->shares[r] ? ""
                                       : " (left out: synchronises only)",
                        slowtxt);
        }
        if (c->rebalance) ht_log_info("cluster: shares follow the measured speeds (rebalancing)");
    }
    char label[HT_HOST_TEXT + HT_DEVNAME_TEXT + 64];
    snprintf(label, sizeof label, "rank %d (%s, %s)", c->rank, host, dev);
    ht_trace_set_label(label);
}

/* Rank 0: one "excluded" metrics record per rank that leaves the job. */
static int excluded_records(const ht_cluster *c, ht_metrics *metrics) {
    int rc = HT_OK;
    for (int r = 0; metrics && r < c->nworld && rc == HT_OK; r++)
        if (c->excluded[r])
            rc = ht_metrics_write(metrics,
                                  "type=%s rank=%d host=%s device=%s samples_per_s=%g fixed_ms=%g "
                                  "slowdown=%g predicted_ms_with=%g predicted_ms_without=%g",
                                  "excluded", r, c->hosts + (size_t)r * HT_HOST_TEXT,
                                  c->devnames + (size_t)r * HT_DEVNAME_TEXT, c->model_sp[r],
                                  1e3 * c->model_fx[r], c->slow ? c->slow[r] : 1.0,
                                  1e3 * c->t_all, 1e3 * c->t_kept);
    return rc;
}

int ht_cluster_detach(ht_cluster *c, ht_metrics *metrics, int *left) {
    *left = 0;
    if (!c->excluding) return HT_OK;
    int rc = c->rank == 0 ? excluded_records(c, metrics) : HT_OK;
    const int keep = !c->excluded[c->wrank[c->rank]];
    const int now = ht_comm_split(keep);
    if (!keep) {
        *left = 1;
        return rc;
    }
    /* renumber to the ranks that stay (their order is kept, rank 0 among them) */
    double *sp = ht_xcalloc((size_t)c->world, sizeof(double));
    double *fx = ht_xcalloc((size_t)c->world, sizeof(double));
    int k = 0;
    for (int r = 0; r < c->world; r++) {
        const int w = c->wrank[r];
        if (c->excluded[w]) continue;
        c->wrank[k] = w, c->shares[k] = c->shares[r];
        sp[k] = c->model_sp[w], fx[k] = c->model_fx[w];
        k++;
    }
    c->world = k;
    c->rank = now;
    set_slice(c);
    if (c->rebalance) { /* the same rebalancer, over the ranks that stay */
        ht_rebalancer_free(&c->rb);
        c->rebalance = k > 1;
        int rc2 = c->rebalance ? start_rebalancer(c) : HT_OK;
        if (rc2 == HT_OK && c->rebalance) rc2 = ht_rebalancer_calibrate(&c->rb, sp, fx);
        if (rc == HT_OK) rc = rc2;
    }
    free(sp);
    free(fx);
    return rc;
}

void ht_cluster_free(ht_cluster *c) {
    if (c->rebalance) ht_rebalancer_free(&c->rb);
    free(c->wrank);
    free(c->excluded);
    free(c->model_sp);
    free(c->model_fx);
    free(c->slow);
    free(c->shares);
    free(c->hosts);
    free(c->devnames);
    memset(c, 0, sizeof *c);
}

void ht_cluster_bcast_params(ht_cluster *c, ht_model *m) {
    if (c->world == 1) return;
    float *p = ht_xmalloc(m->nparams * sizeof(float));
    ht_buf_read(m->dev, m->params, 0, m->nparams * sizeof(float), p);
    ht_comm_bcast(p, m->nparams * sizeof(float), 0);
    ht_buf_write(m->dev, m->params, 0, m->nparams * sizeof(float), p);
    free(p);
}

/* "a,b,c" of n shares into buf */
static void shares_text(char *buf, size_t size, const int *share, int n) {
    size_t len = 0;
    buf[0] = 0;
    for (int r = 0; r < n && len < size; r++)
        len += (size_t)snprintf(buf + len, size - len, "%s%d", r ? "," : "", share[r]);
}

int ht_cluster_rebalance(ht_cluster *c, ht_metrics *metrics, int64_t step,
                         const ht_sync_stats *now) {
    if (!c->rebalance) return HT_OK;
    /* this step's compute: whichever reduction path ran added it to compute_s */
    double mine = now->compute_s - c->rb_mark;
    c->rb_mark = now->compute_s;
    double *t = ht_xcalloc((size_t)c->world, sizeof(double));
    int *before = ht_xcalloc((size_t)c->world, sizeof(int));
    ht_comm_allgather(&mine, sizeof(double), t);
    memcpy(before, c->shares, (size_t)c->world * sizeof(int));
    /* a pure function of identical inputs: every rank takes the same decision */
    int changed = ht_rebalancer_update(&c->rb, step, c->B, t, NULL, c->shares);
    int rc = changed < 0 ? -changed : HT_OK;
    if (changed > 0) {
        set_slice(c);
        double was = ht_plan_step_time_affine(c->world, before, c->rb.ema_speed, c->rb.fixed);
        double after = ht_plan_step_time_affine(c->world, c->shares, c->rb.ema_speed, c->rb.fixed);
        if (c->rank == 0) {
            char from[1024], to[1024];
            shares_text(from, sizeof from, before, c->world);
            shares_text(to, sizeof to, c->shares, c->world);
            const ht_rebalancer *rb = &c->rb;
            if (rb->reverted) {
                ht_log_info("step %lld: shares %s -> %s, the last change undone: the slowest rank "
                            "took %.1f ms under it against %.1f ms before",
                            (long long)step, from, to, 1e3 * rb->t_after, 1e3 * rb->t_before);
                if (metrics)
                    rc = ht_metrics_write(metrics,
                                          "type=%s step=%lld from=%s to=%s measured_ms_before=%g "
                                          "measured_ms_after=%g",
                                          "rebalance_undone", (long long)step, from, to,
                                          1e3 * rb->t_before, 1e3 * rb->t_after);
            } else {
                ht_log_info("step %lld: shares %s -> %s (predicted step time %.1f ms -> %.1f ms)",
                            (long long)step, from, to, 1e3 * was, 1e3 * after);
                for (int r = 0; r < c->world; r++) /* issue 14: in or out, by its model */
                    if ((before[r] == 0) != (c->shares[r] == 0))
                        ht_log_info("step %lld: rank %d (%.0f samples/s + %.1f ms per step) %s",
                                    (long long)step, c->wrank[r], rb->ema_speed[r],
                                    1e3 * rb->fixed[r],
                                    before[r] ? "left out: share 0" : "brought back");
                if (metrics)
                    rc = ht_metrics_write(metrics,
                                          "type=%s step=%lld from=%s to=%s predicted_ms_before=%g "
                                          "predicted_ms_after=%g",
                                          "rebalance", (long long)step, from, to, 1e3 * was,
                                          1e3 * after);
            }
        }
    }
    free(t);
    free(before);
    return rc;
}

void ht_cluster_trace_start(ht_cluster *c) {
    ht_comm_barrier(); /* one time origin for all ranks (up to the barrier's exit skew) */
    ht_trace_start(c->rank);
}

int ht_cluster_trace_write(ht_cluster *c, const char *path) {
    char *mine;
    size_t len;
    ht_trace_serialize(&mine, &len);
    size_t *lens = ht_xcalloc((size_t)c->world, sizeof(size_t));
    ht_comm_allgather(&len, sizeof len, lens);
    size_t total = 0;
    for (int r = 0; r < c->world; r++)
        total += lens[r];
    char *all = c->rank == 0 ? ht_xmalloc(total + 1) : NULL;
    ht_comm_gatherv(mine, len, all, lens, 0);
    int rc = HT_OK;
    if (c->rank == 0) {
        const char **parts = ht_xcalloc((size_t)c->world, sizeof(char *));
        size_t off = 0;
        for (int r = 0; r < c->world; r++) {
            parts[r] = all + off;
            off += lens[r];
        }
        rc = ht_trace_write(path, parts, lens, c->world);
        if (rc == HT_OK) ht_log_info("trace: %s (open in ui.perfetto.dev)", path);
        free(parts);
    }
    free(all);
    free(lens);
    free(mine);
    return rc;
}

void ht_cluster_sum(double *v, int n) { ht_comm_allreduce_sum_f64(v, (size_t)n); }

/* One "rank" record: start-up rank w, its share and per-step means a[] (compute, wait,
 * comm, slowdown, hidden comm). */
static int rank_record(const ht_cluster *c, ht_metrics *metrics, int64_t step, int w, int share,
                       const double *a, const char *state) {
    return ht_metrics_write(metrics,
                            "type=%s step=%lld rank=%d host=%s device=%s share=%d "
                            "compute_s=%g wait_s=%g comm_s=%g comm_hidden_s=%g slowdown=%g "
                            "state=%s",
                            "rank", (long long)step, w, c->hosts + (size_t)w * HT_HOST_TEXT,
                            c->devnames + (size_t)w * HT_DEVNAME_TEXT, share, a[0], a[1], a[2],
                            a[4], a[3], state);
}

int ht_cluster_record(ht_cluster *c, ht_metrics *metrics, int64_t step, const ht_sync_stats *now) {
    const ht_sync_stats *m = &c->mark;
    const double k = (double)(now->steps - m->steps);
    double mine[5] = {k ? (now->compute_s - m->compute_s) / k : 0,
                      k ? (now->wait_s - m->wait_s) / k : 0, k ? (now->comm_s - m->comm_s) / k : 0,
                      c->slowdown, k ? (now->hidden_s - m->hidden_s) / k : 0};
    double *all = ht_xcalloc((size_t)c->world * 5, sizeof(double));
    ht_comm_allgather(mine, sizeof mine, all);
    c->mark = *now;
    int rc = HT_OK;
    /* in start-up rank order, the excluded ranks among them (the current ranks keep it) */
    for (int w = 0, r = 0; metrics && c->rank == 0 && w < c->nworld && rc == HT_OK; w++) {
        if (c->excluded[w]) {
            const double none[5] = {0, 0, 0, c->slow ? c->slow[w] : 1.0, 0};
            rc = rank_record(c, metrics, step, w, 0, none, "excluded");
            continue;
        }
        rc = rank_record(c, metrics, step, w, c->shares[r], all + 5 * r,
                         c->shares[r] ? "trains" : "synchronises");
        r++;
    }
    free(all);
    return rc;
}

/* Rank 0: one "sync" metrics record per rank from the gathered stats. */
static int sync_records(ht_metrics *metrics, const ht_sync_layout *L, const ht_sync_stats *all) {
    int rc = HT_OK;
    for (int r = 0; metrics && r < L->world && rc == HT_OK; r++) {
        const ht_sync_stats *a = all + r;
        const char *role = r < L->workers            ? "worker"
                           : ht_sync_has_servers(L->mode) ? "server"
                                                          : "coordinator";
        rc = ht_metrics_write(metrics,
                              "type=%s mode=%s rank=%d role=%s steps=%lld samples=%lld "
                              "compute_s=%g wait_s=%g comm_s=%g bytes_sent=%llu "
                              "bytes_received=%llu exchanges=%lld",
                              "sync", ht_sync_mode_name(L->mode), r, role, (long long)a->steps,
                              (long long)a->samples, a->compute_s, a->wait_s, a->comm_s,
                              (unsigned long long)a->sent, (unsigned long long)a->received,
                              (long long)a->exchanges);
    }
    return rc;
}

int ht_cluster_sync_records(ht_cluster *c, const ht_sync_layout *L, const ht_sync_stats *mine,
                            ht_metrics *metrics) {
    ht_sync_stats *all = c->rank == 0 ? ht_xcalloc((size_t)c->world, sizeof *all) : NULL;
    ht_sync_report(mine, all);
    int rc = c->rank == 0 ? sync_records(metrics, L, all) : HT_OK;
    free(all);
    return rc;
}
