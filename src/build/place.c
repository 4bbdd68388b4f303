/* Where the ranks of a job run (issue 32): each rank's host, its local rank among the ranks
 * of that host, and its device, the selector resolved at the local rank, so that two ranks
 * on a host with two GPUs take one each (as torchrun, Horovod and DeepSpeed do). The local
 * rank is counted from the host names gathered over src/comm (ranks with the same name, in
 * rank order: what Open MPI's OMPI_COMM_WORLD_LOCAL_RANK and Slurm's SLURM_LOCALID give),
 * which works under every launcher (srun direct launch sets no OMPI_ variables; mpirun
 * inside an sbatch job leaves every rank Slurm's SLURM_LOCALID=0) and follows
 * cluster.hosts, the job's emulated hosts. */
#include "build/place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build/build.h"
#include "comm/comm.h"
#include "core/err.h"
#include "core/log.h"

/* What ranks compare to find the ranks of their host: the host name, or cluster.hosts' id. */
static void host_key(const ht_config *cfg, int rank, const char *name, char *key) {
    if (cfg->cluster.nhosts > rank) snprintf(key, HT_PLACE_HOST, "#%d", cfg->cluster.hosts[rank]);
    else snprintf(key, HT_PLACE_HOST, "%s", name);
}

void ht_place_host(const ht_config *cfg, int rank, int world, ht_place *p) {
    char name[HT_PLACE_HOST] = "", key[HT_PLACE_HOST];
    if (gethostname(name, sizeof name - 1) != 0 || !name[0]) snprintf(name, sizeof name, "?");
    host_key(cfg, rank, name, key);
    if (cfg->cluster.nhosts > rank) /* emulated: the id is what tells the hosts apart */
        snprintf(p->host, sizeof p->host, "%.40s (cluster.hosts %d)", name, cfg->cluster.hosts[rank]);
    else
        snprintf(p->host, sizeof p->host, "%s", name);
    char *all = ht_xcalloc((size_t)world, HT_PLACE_HOST);
    ht_comm_allgather(key, HT_PLACE_HOST, all);
    p->local_rank = p->local_size = 0;
    for (int r = 0; r < world; r++)
        if (!strcmp(all + (size_t)r * HT_PLACE_HOST, key)) {
            p->local_rank += r < rank;
            p->local_size++;
        }
    free(all);
}

void ht_place_key(const ht_config *cfg, const char *cli_device, int rank, char *key, size_t n) {
    if (cli_device) snprintf(key, n, "--device");
    else if (cfg->cluster.ndevices == 1 || cfg->cluster.ndevices > rank)
        snprintf(key, n, "cluster.devices[%d]%s%s%s",
                 cfg->cluster.ndevices == 1 ? 0 : rank,
                 cfg->cluster.ndevices == 1 ? ", one for all ranks" : "",
                 cfg->cluster.at_devices[0] ? ", " : "", cfg->cluster.at_devices);
    else if (cfg->source[0]) snprintf(key, n, "device.select of %s", cfg->source);
    else snprintf(key, n, "device.select");
}

/* One rank's choice, gathered for the check of shared devices. */
typedef struct {
    int device; /* -1: the selector failed */
    int quiet;  /* the default selection on a host without GPUs: ranks share device 0 by design */
    char name[128];
    char host[HT_PLACE_HOST];
    char key[HT_PLACE_HOST];
} choice;

/* Rank 0: one warning per device that several ranks of one host share. */
static void warn_shared(const choice *all, int world) {
    char *done = ht_xcalloc((size_t)world, 1);
    for (int r = 0; r < world; r++) {
        if (done[r] || all[r].device < 0) continue;
        char ranks[256];
        size_t len = (size_t)snprintf(ranks, sizeof ranks, "%d", r);
        int n = 1, quiet = all[r].quiet;
        for (int s = r + 1; s < world; s++)
            if (!done[s] && all[s].device == all[r].device && !strcmp(all[s].key, all[r].key)) {
                done[s] = 1, n++, quiet &= all[s].quiet;
                if (len < sizeof ranks)
                    len += (size_t)snprintf(ranks + len, sizeof ranks - len, ", %d", s);
            }
        if (n > 1 && !quiet)
            ht_log_warn("cluster: ranks %s on host %s share device %d (%s): they compete for it; "
                        "give each rank a device of its own (a selector that matches several, "
                        "e.g. \"gpu\", spreads a host's ranks over them; cluster.devices per "
                        "rank) or start fewer ranks there",
                        ranks, all[r].host, all[r].device, all[r].name);
    }
    free(done);
}

/* Rank 0: which device each rank took, one line per host ("host vm: rank 0 device 0, rank 1
 * device 1"), so that a job says where it runs before the rank table names the devices. */
static void log_map(const choice *all, int world) {
    char *done = ht_xcalloc((size_t)world, 1);
    for (int r = 0; r < world; r++) {
        if (done[r]) continue;
        char line[1024];
        size_t len = 0;
        for (int s = r; s < world && len < sizeof line; s++)
            if (!done[s] && !strcmp(all[s].key, all[r].key)) {
                done[s] = 1;
                len += (size_t)snprintf(line + len, sizeof line - len, "%srank %d device %d",
                                        s > r ? ", " : "", s, all[s].device);
            }
        ht_log_info("cluster: host %s: %s", all[r].host, line);
    }
    free(done);
}

int ht_place_device(const ht_config *cfg, const char *cli_device, int rank, int world,
                    ht_place *p) {
    ht_place_host(cfg, rank, world, p);
    const char *sel = ht_build_selector(cfg, cli_device, rank);
    ht_place_key(cfg, cli_device, rank, p->key, sizeof p->key);
    choice mine = {.device = -1};
    int pinned = 0, rc = ht_ocl_select_local(sel, p->local_rank, &p->device, &pinned);
    if (rc == HT_OK) {
        const ht_devinfo *list;
        int n;
        ht_ocl_devices(&list, &n);
        mine.device = p->device;
        mine.quiet = !sel[0] && strcmp(list[p->device].type, "gpu") &&
                     strcmp(list[p->device].type, "accel");
        snprintf(mine.name, sizeof mine.name, "%s", list[p->device].name);
        ht_log_debug("rank %d: host %s, local rank %d of %d, device selector '%s' (%s) -> "
                     "device %d (%s)%s",
                     rank, p->host, p->local_rank, p->local_size, sel, p->key, p->device,
                     mine.name, pinned ? ", as named" : "");
    } else if (rc == HT_EINPUT) { /* the selector's fault: say whose and where from */
        char *msg = ht_xmalloc(strlen(ht_errmsg()) + 1);
        strcpy(msg, ht_errmsg());
        if (world > 1)
            rc = ht_error(rc, "rank %d on host %s (local rank %d), from %s: %s", rank, p->host,
                          p->local_rank, p->key, msg);
        else
            rc = ht_error(rc, "from %s: %s", p->key, msg);
        free(msg);
    }
    snprintf(mine.host, sizeof mine.host, "%s", p->host);
    host_key(cfg, rank, p->host, mine.key);
    if (world > 1) { /* every rank, failed or not: the gather is collective */
        choice *all = ht_xcalloc((size_t)world, sizeof *all);
        ht_comm_allgather(&mine, sizeof mine, all);
        int failed = 0;
        for (int r = 0; r < world; r++)
            failed |= all[r].device < 0;
        if (rank == 0 && !failed) log_map(all, world);
        if (rank == 0) warn_shared(all, world);
        free(all);
    }
    return rc;
}
