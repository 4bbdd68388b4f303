/* The rules between keys that span groups: those the modes (config/modes.h) bring (which sync
 * policy a pipeline runs under, what replicated stages and the hetero partition need, a
 * schedule's shape, how the ranks split into stages, workers and servers), reading the rows'
 * flags, never a list of names; and the per-rank lists against the world size. The rules
 * without the world size run when the configuration is loaded (config.c adds the file:line
 * of the key each names), the others in ht_config_check_world once the world size is known,
 * before any device is opened: a bad combination fails in a second, naming its key. */
#include "config/schema.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "core/err.h"

HT_PRINTF(5, 6)
static int refuse(const char **key_out, const char *key, char *msg, size_t n, const char *fmt,
                  ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    *key_out = key;
    return HT_EINPUT;
}

/* Model chunks per pipeline rank: pipe.chunks where the schedule takes them, else 1. */
static int chunks_of(const ht_config *c) {
    return ht_pipe_kind_has(c->pipe.schedule, HT_PIPE_F_CHUNKS) ? c->pipe.chunks : 1;
}

/* "\"bsp\"": the policies whose rows have every flag in flags, quoted, as prose. */
static void sync_names(unsigned flags, char *buf, size_t n) {
    size_t len = 0;
    int k = 0, total = 0;
    for (int m = 0; m < HT_SYNC_NMODES; m++)
        total += (ht_sync_rows[m].flags & flags) == flags;
    buf[0] = 0;
    for (int m = 0; m < HT_SYNC_NMODES && len < n; m++) {
        if ((ht_sync_rows[m].flags & flags) != flags) continue;
        len += (size_t)snprintf(buf + len, n - len, "%s\"%s\"",
                                k == 0 ? "" : k == total - 1 ? " or " : ", ", ht_sync_rows[m].name);
        k++;
    }
}

/* pipe.stage_ranks and pipe.replicate against the other pipe.* keys. */
static int replica_rules(const ht_config *c, const char **key, char *msg, size_t n) {
    const char *k = ht_pipe_kind_name(c->pipe.schedule);
    char ok[128];
    ht_pipe_kind_list(HT_PIPE_F_REPLICAS, 0, ok, sizeof ok);
    const int rep = ht_pipe_kind_has(c->pipe.schedule, HT_PIPE_F_REPLICAS);
    if (c->pipe.nstage_ranks) {
        const int Q = c->pipe.nstage_ranks, D = c->pipe.stages;
        int sum = 0;
        for (int q = 0; q < Q; q++)
            sum += c->pipe.stage_ranks[q];
        if (c->pipe.nboundaries != Q - 1)
            return refuse(key, "pipe.stage_ranks", msg, n,
                          "keys 'pipe.stage_ranks' and 'pipe.boundaries': %d stages need %d "
                          "boundaries (the first layer of stages 1 .. %d); found %d",
                          Q, Q - 1, Q - 1, c->pipe.nboundaries);
        if (sum != D) /* hetsim said it the second way: both, for either reader */
            return refuse(key, "pipe.stage_ranks", msg, n,
                          "keys 'pipe.stage_ranks' and 'pipe.stages': found pipe.stage_ranks: %d "
                          "stages summing to %d ranks (the stages' ranks sum to %d; expected "
                          "pipe.stages = %d)",
                          Q, sum, sum, D);
        if (!rep)
            return refuse(key, "pipe.stage_ranks", msg, n,
                          "keys 'pipe.stage_ranks' and 'pipe.schedule': replicated stages run "
                          "under %s; found \"%s\"",
                          ok, k);
    }
    if (c->pipe.replicate) {
        if (c->pipe.partition != HT_PART_HETERO || c->pipe.nboundaries)
            return refuse(key, "pipe.replicate", msg, n,
                          "keys 'pipe.replicate' and 'pipe.partition': replicated stages come "
                          "from the \"hetero\" partition; found partition \"%s\"%s; set "
                          "pipe.partition = \"hetero\" without pipe.boundaries",
                          ht_partition_names[c->pipe.partition],
                          c->pipe.nboundaries ? " with explicit boundaries" : "");
        if (!rep)
            return refuse(key, "pipe.replicate", msg, n,
                          "keys 'pipe.replicate' and 'pipe.schedule': replicated stages run "
                          "under %s; found \"%s\"",
                          ok, k);
    }
    return HT_OK;
}

/* A pipeline's keys against each other and against the other groups. */
static int pipe_rules(const ht_config *c, const char **key, char *msg, size_t n) {
    const char *k = ht_pipe_kind_name(c->pipe.schedule);
    const ht_pipe_row *row = ht_pipe_row_of(c->pipe.schedule);
    const ht_sync_row *sync = ht_sync_row_of(c->sync.mode);
    const int D = c->pipe.stages, v = chunks_of(c), S = D * v;
    char names[128];
    if (!(sync->flags & HT_SYNC_F_LOCKSTEP)) {
        sync_names(HT_SYNC_F_LOCKSTEP, names, sizeof names);
        return refuse(key, "sync.mode", msg, n,
                      "keys 'pipe.schedule' and 'sync.mode': a pipeline synchronises every "
                      "step; found sync.mode \"%s\", expected %s",
                      sync->name, names);
    }
    if (c->cluster.nshares || c->cluster.split == HT_SPLIT_SPEED)
        return refuse(key, c->cluster.nshares ? "cluster.shares" : "cluster.split", msg, n,
                      "keys 'pipe.schedule' and 'cluster.shares'/'cluster.split': a pipeline "
                      "splits the batch into equal micro-batches; remove the shares and use "
                      "split \"equal\"");
    int rc = replica_rules(c, key, msg, n);
    if (rc != HT_OK) return rc;
    if (D == 1 && v > 1)
        return refuse(key, "pipe.stages", msg, n,
                      "keys 'pipe.schedule' and 'pipe.stages': \"%s\" with one stage rank only "
                      "passes activations to itself; use pipe.stages >= 2",
                      k);
    char why[512];
    if (ht_pipe_kind_shape(c->pipe.schedule, D, c->pipe.micro_batches, v, why, sizeof why))
        return refuse(key, D % 2 && (row->flags & HT_PIPE_F_TWO_WAY) ? "pipe.stages"
                                                                    : "pipe.micro_batches",
                      msg, n, "keys 'pipe.schedule', 'pipe.stages' and 'pipe.micro_batches': %s",
                      why);
    const int explicit_cut = c->pipe.nboundaries || c->pipe.nstage_ranks;
    if (c->pipe.nboundaries && !c->pipe.nstage_ranks && c->pipe.nboundaries != S - 1)
        return refuse(key, "pipe.boundaries", msg, n,
                      "key 'pipe.boundaries': %d boundaries for %d stages; expected %d (the "
                      "first layer of stages 1 .. %d)",
                      c->pipe.nboundaries, S, S - 1, S - 1);
    if (!explicit_cut && c->pipe.partition == HT_PART_HETERO &&
        (v > 1 || (row->flags & (HT_PIPE_F_TWO_WAY | HT_PIPE_F_V)))) {
        ht_pipe_kind_list(0, HT_PIPE_F_TWO_WAY | HT_PIPE_F_CHUNKS | HT_PIPE_F_V | HT_PIPE_F_SPLIT_BW,
                          names, sizeof names);
        return refuse(key, "pipe.partition", msg, n,
                      "keys 'pipe.partition' and 'pipe.schedule': \"hetero\" places one stage "
                      "on each rank; \"%s\" places several: use it with %s",
                      k, names);
    }
    return HT_OK;
}

int ht_config_mode_rules(const ht_config *c, const char **key, char *msg, size_t n) {
    if (c->pipe.schedule != HT_PIPE_NONE) return pipe_rules(c, key, msg, n);
    return HT_OK;
}

/* The pipeline's stages and micro-batches over `world` ranks. */
static int pipe_world(const ht_config *c, int world, const char **key, char *msg, size_t n) {
    const int D = c->pipe.stages, N = c->pipe.micro_batches, B = c->train.batch;
    if (world % D)
        return refuse(key, "pipe.stages", msg, n,
                      "key 'pipe.stages': %d ranks are not a multiple of %d stages; run mpirun "
                      "-np %d (or %d, ... for data-parallel replicas) or set pipe.stages to a "
                      "divisor of %d",
                      world, D, D, 2 * D, world);
    const int R = world / D;
    if (B % (R * N))
        return refuse(key, "pipe.micro_batches", msg, n,
                      "keys 'train.batch' and 'pipe.micro_batches': batch %d does not split "
                      "into %d replica(s) x %d micro-batches; use a batch that is a multiple of "
                      "%d",
                      B, R, N, R * N);
    const int mb = B / (R * N);
    int most = 0;
    for (int q = 0; q < c->pipe.nstage_ranks; q++)
        most = c->pipe.stage_ranks[q] > most ? c->pipe.stage_ranks[q] : most;
    if (most > mb)
        return refuse(key, "pipe.stage_ranks", msg, n,
                      "key 'pipe.stage_ranks': a stage on %d ranks cannot split micro-batches "
                      "of %d samples; use fewer ranks per stage or a larger batch",
                      most, mb);
    return HT_OK;
}

/* A policy's workers and extra ranks over `world` ranks. */
static int sync_world(const ht_config *c, int world, const char **key, char *msg, size_t n) {
    const ht_sync_row *row = ht_sync_row_of(c->sync.mode);
    const int extra = ht_sync_extra_ranks(c->sync.mode, c->sync.servers);
    const int workers = world - extra;
    if (row->flags & HT_SYNC_F_LOCKSTEP) return HT_OK;
    if (workers < 1 || world < 2)
        return refuse(key, "sync.mode", msg, n,
                      "key 'sync.mode': \"%s\" needs %d %s plus at least one worker, so at "
                      "least %d ranks under mpirun; found %d",
                      row->name, extra,
                      ht_sync_has_servers(c->sync.mode) ? "parameter server rank(s) (sync.servers)"
                                                        : "coordinator rank",
                      extra + 1, world);
    char lockstep[128];
    sync_names(HT_SYNC_F_LOCKSTEP, lockstep, sizeof lockstep);
    if (c->cluster.shard != HT_SHARD_NONE)
        return refuse(key, "cluster.shard", msg, n,
                      "key 'cluster.shard': \"%s\" is for %s, whose ranks take one update "
                      "together; sync.mode \"%s\" updates each worker's model on its own",
                      ht_shard_names[c->cluster.shard], lockstep, row->name);
    if (c->checkpoint.shards > 0)
        return refuse(key, "checkpoint.shards", msg, n,
                      "key 'checkpoint.shards': %d, but sync.mode \"%s\" keeps every worker's "
                      "state in one checkpoint file; expected 0 (sharded sets are for %s and "
                      "pipelines)",
                      c->checkpoint.shards, row->name, lockstep);
    if (c->cluster.nshares)
        return refuse(key, "cluster.shares", msg, n,
                      "key 'cluster.shares': set, but sync.mode \"%s\" splits train.batch "
                      "equally over its %d workers (shares are for %s)",
                      row->name, workers, lockstep);
    if (c->cluster.split == HT_SPLIT_SPEED)
        return refuse(key, "cluster.split", msg, n,
                      "key 'cluster.split': \"speed\" is for %s; sync.mode \"%s\" lets each "
                      "worker go at its own speed instead",
                      lockstep, row->name);
    return HT_OK; /* a sample per worker: train.batch >= world, checked before */
}

/* The modes' rules with the world size. */
static int world_rules(const ht_config *c, int world, const char **key, char *msg, size_t n) {
    if (c->pipe.schedule != HT_PIPE_NONE && c->cluster.shard != HT_SHARD_NONE)
        return refuse(key, "cluster.shard", msg, n,
                      "key 'cluster.shard': \"%s\" shards data-parallel optimizer state; a "
                      "pipeline keeps each stage's own (expected \"none\")",
                      ht_shard_names[c->cluster.shard]);
    if (c->pipe.schedule != HT_PIPE_NONE) return pipe_world(c, world, key, msg, n);
    return sync_world(c, world, key, msg, n);
}

/* ---------------------------------------------------------------- with the world size */

/* "where: " for a message about a value set at `at` (a default has no place). */
static int world_fail(const ht_config *cfg, const char *at, const char *fmt, int a, int b,
                      int world) {
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, a, b);
    return ht_error(HT_EINPUT, "%s: %s (the job runs %d rank%s under mpirun)",
                    at[0] ? at : (cfg->source[0] ? cfg->source : "configuration"), msg, world,
                    world == 1 ? "" : "s");
}

/* A list key with one value per rank: n values (0: not set) set at `at`. */
static int per_rank(const ht_config *cfg, const char *key, int n, const char *at, int world) {
    if (!n || n == world) return HT_OK;
    char fmt[128];
    snprintf(fmt, sizeof fmt, "key '%s': found %%d values, expected %%d (one per rank)", key);
    return world_fail(cfg, at, fmt, n, world, world);
}

int ht_config_check_world(const ht_config *cfg, int world) {
#define PER_RANK(name)                                                                             \
    per_rank(cfg, "cluster." #name, cfg->cluster.n##name, cfg->cluster.at_##name, world)
    int rc = PER_RANK(shares);
    if (rc == HT_OK) rc = PER_RANK(slowdown);
    if (rc == HT_OK) rc = PER_RANK(slowdown_from);
    if (rc == HT_OK) rc = PER_RANK(hosts);
#undef PER_RANK
    if (rc != HT_OK) return rc;
    if (cfg->cluster.ndevices > 1 && cfg->cluster.ndevices != world)
        return world_fail(cfg, cfg->cluster.at_devices,
                          "key 'cluster.devices': found %d values, expected 1 (for all ranks) "
                          "or %d (one per rank)",
                          cfg->cluster.ndevices, world, world);
    /* a pipeline splits the batch into replicas x micro-batches (its engine checks that); a
     * policy's server or coordinator ranks take no samples (sync_world checks their count) */
    const ht_sync_row *row = ht_sync_row_of(cfg->sync.mode);
    int takers = world;
    if (!(row->flags & HT_SYNC_F_LOCKSTEP))
        takers -= ht_sync_extra_ranks(cfg->sync.mode, cfg->sync.servers);
    if (takers < 1) takers = world;
    if (!cfg->cluster.nshares && cfg->pipe.schedule == HT_PIPE_NONE && cfg->train.batch < takers)
        return world_fail(cfg, "",
                          takers == world ? "key 'train.batch': found %d, expected at least "
                                            "%d so that every rank gets a sample"
                                          : "key 'train.batch': found %d, expected at least "
                                            "%d so that every worker gets a sample",
                          cfg->train.batch, takers, world);
    const char *key = NULL;
    char msg[1024], at[HT_PATH_MAX + 32];
    if (world_rules(cfg, world, &key, msg, sizeof msg) == HT_OK) return HT_OK;
    ht_config_where(cfg, key, at, sizeof at);
    return ht_error(HT_EINPUT, "%s: %s", at[0] ? at : "configuration", msg);
}
