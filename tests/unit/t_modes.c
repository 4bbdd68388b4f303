/* The mode tables (src/config/modes.h) and the cross-key rules they bring
 * (src/config/crosskey.c): every row's name parses back to its enum and every schedule row
 * has a generator that builds a legal schedule; a config names a mode and holds its enum;
 * each rule refuses its combination at load (file:line of the key, computed from the text
 * written here) or, with the world size, in ht_config_check_world, and accepts its
 * neighbours. */
#include "config/config.h"
#include "config/modes.h"
#include "core/err.h"
#include "pipe/schedule.h"
#include "tap.h"
#include "tconfig.h"
#include "tfile.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_file[HT_PATH_MAX];

/* A job file: a small MLP, then `extra` (groups of keys). */
static const char *job(const char *extra) {
    snprintf(g_file, sizeof g_file, "%s/job.cfg", tfile_dir());
    FILE *f = fopen(g_file, "w");
    if (!f || fprintf(f,
                      "model = { hidden = [8, 8, 8]; };\n"
                      "train = { batch = 16; steps = 2; };\n"
                      "optim = { lr = 0.1; };\n"
                      "%s",
                      extra) < 0 ||
        fclose(f) != 0) {
        printf("Bail out! cannot write %s\n", g_file);
        exit(1);
    }
    return g_file;
}

/* rc is HT_EINPUT and the message holds a and b (b may be NULL). */
#define refused(rc, what, a, b) cfg_refused(rc, what, a, b, NULL)

static void accepted(int rc, const char *what) {
    if (!tap_ok(rc == HT_OK, "%s", what)) tap_diag("rc=%d message: %s", rc, ht_errmsg());
}

static void test_tables(void) {
    int ok = ht_sync_mode_names[HT_SYNC_NMODES] == NULL;
    for (int m = 0; m < HT_SYNC_NMODES; m++)
        ok = ok && ht_sync_mode_parse(ht_sync_rows[m].name) == m &&
             !strcmp(ht_sync_mode_names[m], ht_sync_rows[m].name) &&
             ht_sync_rows[m].family < HT_SYNC_NFAMILIES;
    tap_ok(ok && ht_sync_mode_parse("ring") == -1 && ht_sync_mode_parse(NULL) == -1 &&
               !strcmp(ht_sync_mode_name(HT_SYNC_SAP), "sap-reduce") &&
               !strcmp(ht_sync_mode_name(HT_SYNC_NMODES), "?"),
           "sync rows: %d names, each parses back to its row", HT_SYNC_NMODES);
    /* the extra ranks by hand: bsp none, parameter servers sync.servers, the others one */
    tap_ok(ht_sync_extra_ranks(HT_SYNC_BSP, 3) == 0 && ht_sync_extra_ranks(HT_SYNC_ASP, 3) == 3 &&
               ht_sync_extra_ranks(HT_SYNC_DASP, 2) == 2 &&
               ht_sync_extra_ranks(HT_SYNC_PREDUCE, 3) == 1 &&
               ht_sync_extra_ranks(HT_SYNC_GOSSIP_ADAPTIVE, 3) == 1 &&
               ht_sync_has_servers(HT_SYNC_SSP) && !ht_sync_has_servers(HT_SYNC_SAP) &&
               !ht_sync_has_servers(HT_SYNC_BSP),
           "sync rows: bsp no extra rank, asp/ssp/dasp sync.servers servers, the others one");
    ok = !strcmp(ht_pipe_schedule_names[0], "none") && !ht_pipe_schedule_names[HT_PIPE_NKINDS + 1];
    for (int k = 0; k < HT_PIPE_NKINDS; k++)
        ok = ok && ht_pipe_kind_parse(ht_pipe_rows[k].name) == k &&
             !strcmp(ht_pipe_schedule_names[k + 1], ht_pipe_kind_names[k]);
    tap_ok(ok && ht_pipe_kind_parse("none") == -1 &&
               !strcmp(ht_pipe_kind_name(HT_PIPE_NONE), "none") &&
               !ht_pipe_row_of(HT_PIPE_NONE) && !ht_pipe_kind_has(HT_PIPE_NONE, 0),
           "pipe rows: %d names after \"none\", each parses back to its row", HT_PIPE_NKINDS);
    char list[256];
    ht_pipe_kind_list(HT_PIPE_F_REPLICAS, 0, list, sizeof list);
    int rep = !strcmp(list, "gpipe, 1f1b or hepipe");
    ht_pipe_kind_list(0, 0, list, sizeof list);
    tap_ok(rep && !strcmp(list, "gpipe, 1f1b, interleaved, chimera, hepipe, 2bw, zb-h1, zb-v or zb-het"),
           "pipe rows as prose: replicated stages under \"gpipe, 1f1b or hepipe\"");
    /* every row's generator builds a schedule the checker passes: D = 2, N = 4 */
    int built = 0;
    for (int k = 0; k < HT_PIPE_NKINDS; k++) {
        ht_pipe_params p = {.kind = k, .D = 2, .N = 4, .bf_ratio = 2,
                            .v = ht_pipe_kind_has(k, HT_PIPE_F_CHUNKS) ? 2 : 1};
        ht_pipe_sched s;
        ht_pipe_report r;
        if (ht_pipe_generate(&p, &s) != HT_OK) {
            tap_diag("%s: %s", ht_pipe_kind_names[k], ht_errmsg());
            continue;
        }
        built += ht_pipe_check(&s, 2, NULL, &r) == HT_OK && s.p.kind == k;
        ht_pipe_sched_free(&s);
    }
    tap_ok(built == HT_PIPE_NKINDS, "every pipe row's generator builds a checked schedule (%d of %d)",
           built, HT_PIPE_NKINDS);
}

static void test_parse(void) {
    ht_config c;
    int rc = cfg_load(&c, job("sync = { mode = \"dasp\"; };\n"), NULL);
    tap_ok(rc == HT_OK && c.sync.mode == HT_SYNC_DASP && c.pipe.schedule == HT_PIPE_NONE,
           "sync.mode \"dasp\" loads as HT_SYNC_DASP; pipe.schedule's default is HT_PIPE_NONE");
    rc = cfg_load(&c, NULL, "train.batch=8", "optim.lr=1", "train.steps=1", "pipe.schedule=2bw",
                  "sync.mode=gossip-adaptive", "pipe.schedule=\"hepipe\"", "sync.mode=bsp", NULL);
    tap_ok(rc == HT_OK && c.pipe.schedule == HT_PIPE_HEPIPE && c.sync.mode == HT_SYNC_BSP,
           "--set takes bare and quoted names; the last one wins");
    refused(cfg_load(&c, job("pipe = { schedule = \"1fb1\"; };\n"), NULL), "an unknown schedule",
            "job.cfg:4: key 'pipe.schedule': found \"1fb1\", expected one of \"none\", \"gpipe\"",
            "(did you mean \"1f1b\"?)");
    /* written out and read back: the same enums */
    rc = cfg_load(&c, job("pipe = { schedule = \"chimera\"; stages = 4; };\n"), NULL);
    char path[HT_PATH_MAX];
    snprintf(path, sizeof path, "%s/back.cfg", tfile_dir());
    FILE *f = fopen(path, "w");
    if (f) ht_config_write(f, &c), fclose(f);
    ht_config d;
    int rc2 = cfg_load(&d, path, NULL);
    tap_ok(rc == HT_OK && rc2 == HT_OK && d.pipe.schedule == HT_PIPE_CHIMERA &&
               d.sync.mode == HT_SYNC_BSP,
           "a config written out loads back to the same schedule and policy");
}

/* Rules without the world size: refused at load, naming the key's line. */
static void test_load_rules(void) {
    ht_config c;
    refused(
        cfg_load(&c, job("pipe = { schedule = \"1f1b\"; };\nsync = { mode = \"asp\"; };\n"), NULL),
        "a pipeline under asp: at load, sync.mode's line",
        "job.cfg:5: keys 'pipe.schedule' and 'sync.mode': a pipeline synchronises every step; "
        "found sync.mode \"asp\", expected \"bsp\"",
        NULL);
    refused(cfg_load(&c,
                     job("pipe = { schedule = \"gpipe\"; };\ncluster = { shares = [8, 8]; };\n"),
                     NULL),
            "a pipeline with cluster.shares",
            "job.cfg:5: keys 'pipe.schedule' and 'cluster.shares'", "equal micro-batches");
    refused(cfg_load(&c,
                     job("pipe = { schedule = \"1f1b\"; stages = 3;\n  stage_ranks = [1, 1];\n"
                         "  boundaries = [2]; };\n"),
                     NULL),
            "stage_ranks summing to 2 of 3 stages", "job.cfg:5: keys 'pipe.stage_ranks' and",
            "pipe.stage_ranks: 2 stages summing to 2 ranks (the stages' ranks sum to 2; "
            "expected pipe.stages = 3)");
    refused(cfg_load(&c, job("pipe = { schedule = \"1f1b\"; stage_ranks = [1, 1]; };\n"), NULL),
            "stage_ranks without boundaries",
            "job.cfg:4: keys 'pipe.stage_ranks' and "
            "'pipe.boundaries': 2 stages need 1 boundaries",
            "found 0");
    refused(cfg_load(&c,
                     job("pipe = { schedule = \"chimera\"; stage_ranks = [1, 1];\n"
                         "  boundaries = [2]; };\n"),
                     NULL),
            "stage_ranks under chimera",
            "replicated stages run under gpipe, 1f1b or hepipe; "
            "found \"chimera\"",
            NULL);
    refused(cfg_load(&c, job("pipe = { schedule = \"1f1b\"; replicate = true; };\n"), NULL),
            "replicate without hetero", "job.cfg:4: keys 'pipe.replicate' and 'pipe.partition'",
            "found partition \"uniform\"");
    refused(cfg_load(&c,
                     job("pipe = { schedule = \"2bw\"; partition = \"hetero\";\n"
                         "  replicate = true; };\n"),
                     NULL),
            "replicate under 2bw", "job.cfg:5: keys 'pipe.replicate' and 'pipe.schedule'",
            "found \"2bw\"");
    refused(cfg_load(&c, job("pipe = { schedule = \"interleaved\"; stages = 1; chunks = 2; };\n"),
                     NULL),
            "interleaved on one stage rank", "job.cfg:4: keys 'pipe.schedule' and 'pipe.stages'",
            "use pipe.stages >= 2");
    accepted(cfg_load(&c, job("pipe = { schedule = \"interleaved\"; stages = 1; chunks = 1; };\n"),
                      NULL),
             "interleaved on one stage rank with one chunk: accepted");
    /* found only after the devices and the model before */
    refused(cfg_load(&c, job("pipe = { schedule = \"chimera\";\n  stages = 3; };\n"), NULL),
            "chimera over 3 stages: at load (was the generator's, after the devices)",
            "job.cfg:5: keys 'pipe.schedule', 'pipe.stages' and 'pipe.micro_batches': schedule "
            "\"chimera\" needs an even number of pipeline stages, got 3",
            NULL);
    refused(cfg_load(&c,
                     job("pipe = { schedule = \"interleaved\"; stages = 4; chunks = 2;\n"
                         "  micro_batches = 6; };\n"),
                     NULL),
            "interleaved, 6 micro-batches over 4 stages: at load (was the generator's)",
            "job.cfg:5: keys 'pipe.schedule', 'pipe.stages' and 'pipe.micro_batches': schedule "
            "\"interleaved\" needs the micro-batches (6) to be a multiple of the pipeline stages "
            "(4)",
            "4 or 8 would fit");
    accepted(cfg_load(&c,
                      job("pipe = { schedule = \"interleaved\"; stages = 4; chunks = 1;\n"
                          "  micro_batches = 6; };\n"),
                      NULL),
             "interleaved with one chunk, 6 micro-batches over 4 stages: accepted (plain 1F1B)");
    refused(cfg_load(&c, job("pipe = { schedule = \"2bw\"; stages = 4;\n  micro_batches = 3; };\n"),
                     NULL),
            "2bw, 3 micro-batches over 4 stages: at load",
            "job.cfg:5: keys 'pipe.schedule', 'pipe.stages' and 'pipe.micro_batches': schedule "
            "\"2bw\" needs at least as many micro-batches as stages (3 < 4)",
            NULL);
    refused(cfg_load(&c,
                     job("pipe = { schedule = \"interleaved\"; stages = 2; chunks = 2;\n"
                         "  boundaries = [1, 2]; };\n"),
                     NULL),
            "2 boundaries for 4 interleaved stages: at load (was after the model)",
            "job.cfg:5: key 'pipe.boundaries': 2 boundaries for 4 stages; expected 3", NULL);
    refused(
        cfg_load(&c, job("pipe = { schedule = \"chimera\";\n  partition = \"hetero\"; };\n"), NULL),
        "hetero under chimera: at load (was after the devices)",
        "job.cfg:5: keys 'pipe.partition' and 'pipe.schedule': \"hetero\" places one stage",
        "use it with gpipe, 1f1b, hepipe or 2bw");
    accepted(cfg_load(&c,
                      job("pipe = { schedule = \"chimera\"; partition = \"hetero\";\n"
                          "  boundaries = [1]; };\n"),
                      NULL),
             "hetero under chimera with explicit boundaries (they decide): accepted");
    refused(cfg_load(&c, NULL, "train.batch=8", "optim.lr=1", "train.steps=1",
                     "pipe.schedule=gpipe", "cluster.split=speed", NULL),
            "a rule on --set values names the override",
            "--set cluster.split=speed: keys "
            "'pipe.schedule' and 'cluster.shares'/'cluster.split'",
            NULL);
}

/* Rules with the world size: ht_config_check_world, before any device is opened. */
static void test_world_rules(void) {
    ht_config c;
    int rc = cfg_load(&c, job("sync = { mode = \"asp\";\n  servers = 2; };\n"), NULL);
    refused(rc ? rc : ht_config_check_world(&c, 2), "asp with 2 servers on 2 ranks",
            "job.cfg:4: key 'sync.mode': \"asp\" needs 2 parameter server rank(s)",
            "at least 3 ranks under mpirun; found 2");
    accepted(rc ? rc : ht_config_check_world(&c, 3), "asp with 2 servers on 3 ranks: accepted");
    /* a server takes no samples: batch 16 feeds 16 workers and the server, not 17 workers */
    rc = cfg_load(&c, job("sync = { mode = \"asp\"; };\n"), NULL);
    accepted(rc ? rc : ht_config_check_world(&c, 17), "asp, batch 16 on 16 workers + 1 server");
    refused(rc ? rc : ht_config_check_world(&c, 18), "asp, batch 16 on 17 workers + 1 server",
            "key 'train.batch': found 16, expected at least 17 so that every worker gets a "
            "sample (the job runs 18 ranks under mpirun)",
            NULL);
    rc = cfg_load(&c, job(""), NULL);
    refused(rc ? rc : ht_config_check_world(&c, 17), "bsp, batch 16 on 17 ranks",
            "key 'train.batch': found 16, expected at least 17 so that every rank gets a sample",
            NULL);
    rc = cfg_load(&c, job("sync = { mode = \"gossip\"; };\n"), NULL);
    refused(rc ? rc : ht_config_check_world(&c, 1), "gossip in one process",
            "\"gossip\" needs 1 coordinator rank plus at least one worker", NULL);
    rc = cfg_load(&c, job("sync = { mode = \"ssp\"; };\ncluster = { shares = [5, 5, 6]; };\n"),
                  NULL);
    refused(rc ? rc : ht_config_check_world(&c, 3), "ssp with cluster.shares",
            "job.cfg:5: key 'cluster.shares': set, but sync.mode \"ssp\" splits train.batch "
            "equally over its 2 workers (shares are for \"bsp\")",
            NULL);
    rc = cfg_load(&c, job("sync = { mode = \"preduce\"; };\ncluster = { split = \"speed\"; };\n"),
                  NULL);
    refused(rc ? rc : ht_config_check_world(&c, 3), "preduce with split speed",
            "job.cfg:5: key 'cluster.split': \"speed\" is for \"bsp\"", NULL);
    rc = cfg_load(&c, job("pipe = { schedule = \"gpipe\";\n  stages = 2; micro_batches = 4; };\n"),
                  NULL);
    refused(rc ? rc : ht_config_check_world(&c, 3), "2 stages on 3 ranks",
            "job.cfg:5: key 'pipe.stages': 3 ranks are not a multiple of 2 stages", NULL);
    /* 16 samples over 2 replicas x 4 micro-batches: 2 each; over 3 x 4... not 16 / 12 */
    accepted(rc ? rc : ht_config_check_world(&c, 4), "2 stages x 2 replicas x 4 micro-batches of 2");
    refused(rc ? rc : ht_config_check_world(&c, 6), "2 stages x 3 replicas: 16 not a multiple of 12",
            "job.cfg:5: keys 'train.batch' and 'pipe.micro_batches': batch 16 does not split into "
            "3 replica(s) x 4 micro-batches",
            NULL);
    rc = cfg_load(&c,
                  job("pipe = { schedule = \"1f1b\"; stages = 4; micro_batches = 8;\n"
                      "  stage_ranks = [3, 1]; boundaries = [2]; };\n"),
                  NULL);
    refused(rc ? rc : ht_config_check_world(&c, 4), "a stage on 3 ranks, micro-batches of 2",
            "job.cfg:5: key 'pipe.stage_ranks': a stage on 3 ranks cannot split micro-batches of 2",
            NULL);
}

int main(void) {
    tfile_init("t_modes");
    test_tables();
    test_parse();
    test_load_rules();
    test_world_rules();
    tfile_done();
    return tap_done();
}
