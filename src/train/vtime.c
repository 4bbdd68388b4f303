/* Virtual time (train/vtime.h): the cost sink of core/vcost.h on hetsim's cost model. */
#include "train/vtime.h"

#include <stdlib.h>

#include "comm/comm.h"
#include "config/config.h"
#include "core/err.h"
#include "core/log.h"
#include "core/vcost.h"
#include "nn/model.h"
#include "sim/sim.h"

/* One per rank: SMPI privatises the globals of each rank's copy of hettrain-smpi. */
static struct {
    ht_sim_cluster c;
    ht_sim_model sm;
    int rank;
} g;

/* A sync policy's host side, as hetsim charges it (src/sim/policies.c): copies at the
 * device's d2h_gbs / h2d_gbs, passes at the cluster's host_add_gbs (each free when 0). */
static double host_time(int what, size_t nfloats) {
    const double bytes = 4.0 * (double)nfloats;
    if (what == HT_VC_HOST) return g.c.host_add_gbs > 0 ? bytes / (g.c.host_add_gbs * 1e9) : 0;
    double d2h, h2d = ht_sim_host_copy(&g.c, g.rank, &d2h);
    return bytes * (what == HT_VC_D2H ? d2h : h2d);
}

static void declare(int what, int layer, int n, int B, size_t nparams) {
    double s;
    if (what == HT_VC_D2H || what == HT_VC_H2D || what == HT_VC_HOST)
        s = host_time(what, nparams);
    else if (what == HT_VC_OPTIM)
        s = ht_sim_optim_time(&g.c, g.rank, &g.sm, 4.0 * (double)nparams);
    else
        s = ht_sim_range_time(&g.c, g.rank, &g.sm, layer, layer + n, B, what != HT_VC_FWD);
    if (what == HT_VC_BWD_B || what == HT_VC_BWD_W) { /* hetsim's W share: the weight
                                                         * gradients' share of the FLOPs */
        double b = 0, w = 0;
        for (int i = layer; i < layer + n; i++)
            b += g.sm.l[i].flops_b, w += g.sm.l[i].flops_w;
        const double share = b > 0 ? w / b : 0.5;
        s *= what == HT_VC_BWD_W ? share : 1 - share;
    }
    if (s > 0) ht_comm_compute(s);
}

int ht_vtime_setup(const ht_config *cfg, const ht_model *m, int rank, int world) {
    if (!ht_comm_virtual()) return HT_OK;
    const char *path = getenv("HT_EMULATE_CLUSTER");
    if (!path || !*path)
        return ht_error(HT_EINPUT, "hettrain-smpi: HT_EMULATE_CLUSTER is not set: expected the "
                                   "cluster description that gives each rank's device (run it "
                                   "through hettrain emulate --cluster FILE)");
    int rc = ht_sim_cluster_load(path, &g.c);
    if (rc != HT_OK) return rc;
    if (g.c.nranks < world)
        return ht_error(HT_EINPUT, "%s: %d ranks described, %d emulated: expected at least %d",
                        path, g.c.nranks, world, world);
    ht_sim_model_from(&g.sm, m, cfg->optim.type);
    g.rank = rank;
    ht_vcost_set(declare);
    if (rank == 0)
        ht_log_info("virtual time: compute from the cost model on %s (%d ranks)", path, world);
    return HT_OK;
}
