/* Data-parallel pieces of the training loop: shares, the device per rank, the start-up
 * table, gradient reduction with timing and emulated slowdown, per-rank metrics. All MPI
 * goes through src/comm; all device traffic through ht_buf_read/ht_buf_write. */
#include "train/cluster.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"
#include "data/data.h"
#include "plan/plan.h"

const char *ht_cluster_selector(const ht_config *cfg, const char *cli_device, int rank) {
    if (cli_device) return cli_device;
    if (cfg->cluster.ndevices == 1) return cfg->cluster.devices[0];
    if (cfg->cluster.ndevices > rank) return cfg->cluster.devices[rank];
    return cfg->device.select;
}

static void set_slice(ht_cluster *c) {
    ht_shard_range(c->shares, c->world, c->rank, &c->lo, &c->hi);
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
    c->slowdown = cfg->cluster.nslowdown ? cfg->cluster.slowdown[c->rank] : 1.0;
    c->ring = strcmp(cfg->cluster.allreduce, "mpi") != 0;
    return HT_OK;
}

int ht_cluster_split_by_speed(ht_cluster *c, double my_speed) {
    double *speed = ht_xcalloc((size_t)c->world, sizeof(double));
    ht_comm_allgather(&my_speed, sizeof my_speed, speed);
    int rc = ht_plan_batch_split(c->B, c->world, speed, NULL, c->shares);
    if (rc == HT_OK) {
        set_slice(c);
        if (c->rank == 0) {
            char line[1024];
            size_t len = 0;
            for (int r = 0; r < c->world && len < sizeof line; r++)
                len += (size_t)snprintf(line + len, sizeof line - len, "%s%d (%.0f/s)",
                                        r ? ", " : "", c->shares[r], speed[r]);
            ht_log_info("cluster: shares by measured speed: %s", line);
        }
    }
    free(speed);
    return rc;
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
    if (c->rank == 0) {
        ht_log_info("cluster: %d ranks, global batch %d, all-reduce %s", c->world, c->B,
                    c->ring ? "ring" : "mpi");
        for (int r = 0; r < c->world; r++) {
            char slowtxt[48] = "";
            if (slow[r] != 1)
                snprintf(slowtxt, sizeof slowtxt, "  slowdown x%.3g (emulated)", slow[r]);
            ht_log_info("  rank %d  host %-16s  device %-32s  share %d%s", r,
                        c->hosts + (size_t)r * HT_HOST_TEXT,
                        c->devnames + (size_t)r * HT_DEVNAME_TEXT, c->shares[r], slowtxt);
        }
    }
    free(slow);
}

void ht_cluster_free(ht_cluster *c) {
    free(c->shares);
    free(c->host);
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

static void idle(double s) {
    if (!(s > 0)) return;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

void ht_cluster_reduce(ht_cluster *c, ht_model *m, double compute_s, int *stop) {
    /* Emulation (DESIGN.md): a device `slowdown` times slower than this one would have
     * needed slowdown x compute_s; idle for the difference before joining the reduction. */
    idle((c->slowdown - 1) * compute_s);
    c->t_compute += compute_s * c->slowdown;
    c->nsteps++;
    if (c->world == 1) return;
    if (!c->host) {
        c->n = m->nparams;
        c->host = ht_xmalloc((c->n + 1) * sizeof(float));
    }
    double t0 = ht_now();
    ht_buf_read(m->dev, m->grads, 0, c->n * sizeof(float), c->host);
    /* the stop flag rides along: every rank stops after the same step */
    c->host[c->n] = *stop ? 1.0f : 0.0f;
    double t1 = ht_now();
    /* waiting for the slowest rank, measured apart from the reduction itself */
    ht_comm_barrier();
    double t2 = ht_now();
    if (c->ring)
        ht_comm_ring_allreduce(c->host, c->n + 1);
    else
        ht_comm_allreduce_sum(c->host, c->n + 1);
    ht_buf_write(m->dev, m->grads, 0, c->n * sizeof(float), c->host);
    *stop = c->host[c->n] > 0;
    c->t_wait += t2 - t1;
    c->t_comm += (t1 - t0) + (ht_now() - t2);
}

void ht_cluster_sum(double *v, int n) { ht_comm_allreduce_sum_f64(v, (size_t)n); }

int ht_cluster_record(ht_cluster *c, ht_metrics *metrics, int64_t step) {
    double mine[4] = {c->nsteps ? c->t_compute / c->nsteps : 0,
                      c->nsteps ? c->t_wait / c->nsteps : 0, c->nsteps ? c->t_comm / c->nsteps : 0,
                      c->slowdown};
    double *all = ht_xcalloc((size_t)c->world * 4, sizeof(double));
    ht_comm_allgather(mine, sizeof mine, all);
    c->t_compute = c->t_wait = c->t_comm = 0;
    c->nsteps = 0;
    int rc = HT_OK;
    for (int r = 0; metrics && c->rank == 0 && r < c->world && rc == HT_OK; r++) {
        const double *a = all + 4 * r;
        rc = ht_metrics_write(metrics,
                              "type=%s step=%lld rank=%d host=%s device=%s share=%d "
                              "compute_s=%g wait_s=%g comm_s=%g slowdown=%g",
                              "rank", (long long)step, r, c->hosts + (size_t)r * HT_HOST_TEXT,
                              c->devnames + (size_t)r * HT_DEVNAME_TEXT, c->shares[r], a[0], a[1],
                              a[2], a[3]);
    }
    free(all);
    return rc;
}
