/* hettrain: the command line. Parses arguments, loads the config, and runs the trainer (or,
 * with `generate`, samples text from a GPT checkpoint); exit 0 on success, 2 on bad input
 * (CLI, config, data, checkpoint), 1 on runtime failure, 75 when SIGINT/SIGTERM stopped
 * the run early with its checkpoint saved (core/err.h: HT_ESTOPPED), 130 when it stopped so
 * without checkpoint.path (HT_ELOST: nothing saved). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build/place.h"
#include "cli/ckpt.h"
#include "cli/emulate.h"
#include "cli/export.h"
#include "cli/hetsim.h"
#include "cli/opts.h"
#include "comm/comm.h"
#include "config/config.h"
#include "core/err.h"
#include "core/log.h"
#include "core/stop.h"
#include "io/safetensors.h"
#include "ocl/ocl.h"
#include "pipe/schedule.h"
#include "prof/profile.h"
#include "train/generate.h"
#include "train/train.h"

/* Each subcommand's usage, printed by its --help; hettrain --help prints them all. */
static const char USAGE_GENERATE[] =
    "       hettrain generate -c FILE [--checkpoint PATH] --prompt TEXT --tokens N\n"
    "                [--temperature T] [--seed S] [--set KEY=VALUE]... [--device SEL]\n";
static const char HELP_GENERATE[] =
    "generate: continues TEXT by N bytes with the GPT of FILE (model.type \"gpt\") and the\n"
    "parameters of the checkpoint (default: checkpoint.path); --temperature 0 is greedy\n"
    "(default 1), --seed S (default 1) makes the sampling repeatable.\n";
static const char USAGE_SCHEDULE[] =
    "       hettrain schedule [-c FILE] [--schedule KIND --stages D --micro-batches N]\n"
    "                [--chunks V] [--bf R] [--trace FILE] [--streams]\n"
    "                [--stage-times T,..] [--max-inflight K,..]\n";
/* %s: the schedules' names (config/modes.h) */
static const char HELP_SCHEDULE[] =
    "schedule: prints a pipeline schedule (%s)\n"
    "of D stages and N micro-batches (V chunks per rank, interleaved) as a timeline\n"
    "on unit time (forward 1, backward R, default 1) with its makespan, bubble and peak\n"
    "activations per rank; --trace FILE writes it as a Chrome trace, --streams lists\n"
    "every rank's instructions. With -c FILE (and --set) the job's pipe.* keys give the\n"
    "defaults and R = 2. --stage-times gives each stage's relative forward time: hepipe\n"
    "picks its warm-up depths from them (and --max-inflight, slots per rank), and the\n"
    "makespan and bubble under those times are printed beside 1f1b's. Runs no model and\n"
    "needs no device.\n";

/* "usage: hettrain generate ..." alone, for a subcommand's --help. */
static void usage_of(FILE *f, const char *synopsis, const char *help) {
    fprintf(f, "usage:%s\n%s", synopsis + 6, help); /* the synopsis' indent replaced */
}

/* HELP_SCHEDULE with the schedules' names. */
static const char *help_schedule(void) {
    static char text[sizeof HELP_SCHEDULE + 256];
    char kinds[256];
    ht_pipe_kind_list(0, 0, kinds, sizeof kinds);
    snprintf(text, sizeof text, HELP_SCHEDULE, kinds);
    return text;
}

static void usage(FILE *f) {
    char modes[256];
    ht_sync_mode_list(modes, sizeof modes);
    fprintf(f,
            "usage: hettrain -c FILE [--set KEY=VALUE]... [--device SEL] [--resume | --overwrite]\n"
            "                [--profile] [--stop-after N] [--trace FILE [--trace-layers]]\n"
            "%s%s"
            "       hettrain plan (--cluster FILE | --profile FILE) -c FILE [--set KEY=VALUE]...\n"
            "                [--ranks N] [--top K] [-o PLAN.cfg]\n"
            "       hettrain export -c FILE [--checkpoint PATH] --format hf-gpt2 -o DIR\n"
            "       hettrain emulate --cluster FILE -c FILE [--ranks N] [--set KEY=VALUE]...\n"
            "                [--out DIR] [--smpi PATH] [--network smpi|ideal] [-- OPTIONS FOR EACH RANK]\n"
            "       hettrain --list-devices | --help-config | --help | --version\n"
            "       hettrain generate --help | schedule --help | plan --help\n"
            "\n"
            "Trains the model described by the libconfig FILE on one OpenCL device; under\n"
            "mpirun -np N, data parallel over N ranks, one device each (cluster.* keys),\n"
            "synchronised as sync.mode says (the last rank(s) serve or coordinate all but\n"
            "bsp): %s.\n"
            "  -c, --config FILE   job description (see conf/README.md; conf/quickstart.cfg)\n"
            "  --set KEY=VALUE     override a config key, e.g. --set train.steps=100\n"
            "  --device SEL        device: index, cpu, gpu, or a device/vendor/platform name\n"
            "                      substring (:N = match N from 0); under mpirun each rank\n"
            "                      takes the match at its local rank\n"
            "  --resume            continue from checkpoint.path when it exists\n"
            "  --overwrite         start from step 0 and replace checkpoint.path when it exists\n"
            "                      (without --resume or --overwrite an existing one: exit 2)\n"
            "  --profile           print per-kernel device times at the end\n"
            "  --stop-after N      run at most N steps now, save the checkpoint, exit 0\n"
            "                      (Ctrl-C / SIGTERM: stop after this step, save, exit 75;\n"
            "                      without checkpoint.path nothing is saved: exit 130)\n"
            "  --trace FILE        write a Chrome trace (every rank's steps) for ui.perfetto.dev\n"
            "  --trace-layers      and a span per layer's forward, backward and the loss (the\n"
            "                      queue finished after each: a device model measured inside\n"
            "                      training, tools/bench/trace2prof.py)\n"
            "  -q, --quiet         only errors and the final summary\n"
            "  -v, --verbose       debug messages\n"
            "  --list-devices      list every OpenCL device of every platform (under mpirun:\n"
            "                      one table per host)\n"
            "  --help-config       list every config key with its type and default\n"
            "%s%s"
            "plan: picks the job's configuration on a cluster description or a profile from\n"
            "mpirun hetprof (data parallel splits, pipelines: schedule, stages, micro-batches,\n"
            "partition, recomputation) by simulating each (hetsim --plan); -o writes the winner as\n"
            "a config that hettrain -c runs as is. Needs no device (hettrain plan --help).\n"
            "emulate: runs the job on the cluster description's devices and links emulated by\n"
            "SimGrid's SMPI, in virtual time (hettrain-smpi: cmake -DHT_SMPI=ON); writes the\n"
            "platform and host file into --out DIR (default emulate).\n"
            "Environment: HT_KERNEL_DIR (load cl/*.cl from a directory), HT_CACHE_DIR (program\n"
            "cache directory), HT_NO_CACHE=1 (do not use the program cache).\n",
            USAGE_GENERATE, USAGE_SCHEDULE, modes, HELP_GENERATE, help_schedule());
}

/* Exit status 2 with the usage, printed by the first rank only under mpirun. */
static int unknown_argument(const char *a, const char *where) {
    if (ht_comm_env_rank() == 0) {
        fprintf(stderr, "hettrain: error: unknown argument '%s'%s\n", a, where);
        usage(stderr);
    }
    return HT_EINPUT;
}

/* The table's verdict on argv (cli/opts.h): HT_OK, or exit 2 (usage for an unknown one). */
static void parse_or_exit(const ht_opt *t, int argc, char **argv, void *out, const char *where) {
    int bad = 0, unknown = 0;
    if (ht_opts_parse(t, argc, argv, out, &bad, &unknown) == HT_OK) return;
    if (unknown) exit(unknown_argument(argv[bad], where));
    ht_exit_on_error(HT_EINPUT);
}

static void log_level(int quiet, int verbose) {
    if (quiet) ht_log_set_level(HT_LOG_WARN);
    if (verbose) ht_log_set_level(HT_LOG_DEBUG);
}

/* hettrain generate ...: argv[0] is "generate". */
static int generate_main(int argc, char **argv) {
    ht_args_generate a;
    ht_args_generate_init(&a);
    parse_or_exit(ht_opts_generate, argc, argv, &a, " for generate");
    log_level(a.quiet, a.verbose);
    if (a.help) {
        usage_of(stdout, USAGE_GENERATE, HELP_GENERATE);
        return 0;
    }
    if (!a.config)
        ht_die(HT_EINPUT, "generate: no config given; expected -c FILE (the GPT's training config)");
    if (!a.prompt) ht_die(HT_EINPUT, "generate: no --prompt given; expected --prompt TEXT");
    if (!a.tokens) ht_die(HT_EINPUT, "generate: no --tokens given; expected --tokens N (N >= 1)");
    ht_generate_opts o = {.checkpoint = a.checkpoint, .prompt = a.prompt, .device = a.device,
                          .tokens = (int)a.tokens, .seed = (uint64_t)a.seed,
                          .temperature = a.temperature};
    ht_config cfg;
    ht_exit_on_error(ht_config_load(&cfg, a.config, a.sets, a.nset));
    ht_exit_on_error(ht_generate(&cfg, &o, stdout));
    return 0;
}

/* The makespan and bubble of s and of 1F1B under per-stage forward times t (hettrain
 * schedule --stage-times). */
static void print_under_times(const ht_pipe_sched *s, double bf, const double *t, int limited) {
    ht_pipe_report r, f;
    ht_pipe_params q = {.kind = HT_PIPE_1F1B, .D = s->p.D, .N = s->p.N, .v = 1};
    ht_pipe_sched o;
    ht_exit_on_error(ht_pipe_generate(&q, &o));
    if (ht_pipe_check(s, bf, t, &r) || ht_pipe_check(&o, bf, t, &f))
        ht_die(HT_ERUNTIME, "schedule failed its own check under the stage times: %s", ht_errmsg());
    printf("under the stage times:");
    for (int i = 0; i < s->p.D; i++)
        printf("%s%g", i ? "," : " ", t[i]);
    printf(" (B = %g F): %s makespan %g, bubble %.4f, peak slots", bf,
           ht_pipe_kind_names[s->p.kind], r.makespan, r.bubble);
    for (int i = 0; i < s->p.D && i < 64; i++)
        printf(" %d", r.peak_inflight[i]);
    printf("; 1f1b%s makespan %g, bubble %.4f\n", limited ? " (without the slot limits)" : "",
           f.makespan, f.bubble);
    ht_pipe_sched_free(&o);
}

/* " (in DIR)": the folder a relative path is resolved from (the working directory). */
static void resolved_in(const char *path, char *out, size_t n) {
    char cwd[HT_PATH_MAX];
    out[0] = 0;
    if (path[0] != '/' && getcwd(cwd, sizeof cwd)) snprintf(out, n, " (in %s)", cwd);
}

/* A run that starts from step 0 would replace an existing checkpoint.path: refused (exit 2)
 * unless --overwrite, so that a forgotten --resume never loses a long run; with --overwrite
 * it says so before it starts. Rank 0's file only: rank 0 writes the checkpoint. */
static int check_overwrite(const ht_config *cfg, int resume, int overwrite,
                           const char *const *sets, int nset) {
    const char *path = cfg->checkpoint.path;
    struct stat st;
    char step[48] = "", where[HT_PATH_MAX + 32], in[HT_PATH_MAX + 8];
    if (!*path || resume) return HT_OK;
    resolved_in(path, in, sizeof in);
    if (stat(path, &st) != 0 && !ht_st_exists(path)) {
        ht_log_info("checkpoint: '%s'%s, written at the end%s; a later run replaces it only "
                    "with --overwrite (--resume continues it)", path, in,
                    cfg->checkpoint.every > 0 ? " and every checkpoint.every steps" : "");
        return HT_OK;
    }
    ht_st_file *f = NULL;
    if (ht_st_open(&f, path) == HT_OK) { /* the step, when it is a checkpoint we can read */
        const char *v = ht_st_meta(f, "step");
        if (v) snprintf(step, sizeof step, " of step %.24s", v);
        ht_st_close(f);
    }
    ht_error_clear();
    ht_config_where(cfg, "checkpoint.path", where, sizeof where);
    for (int i = 0; i < nset; i++) /* the last --set of the key gave the path */
        if (!strncmp(sets[i], "checkpoint.path=", 16))
            snprintf(where, sizeof where, "--set checkpoint.path");
    if (overwrite) {
        ht_log_warn("%s: key 'checkpoint.path': replacing the checkpoint%s at '%s'%s "
                    "(--overwrite): this run starts at step 0", where, step, path, in);
        return HT_OK;
    }
    return ht_error(HT_EINPUT,
                    "%s: key 'checkpoint.path': '%s'%s already holds a checkpoint%s, which this "
                    "run (no --resume) would replace; expected --resume to continue it, "
                    "--overwrite to replace it, or another checkpoint.path",
                    where, path, in, step);
}

/* The end of a run: where its files are (rank 0 wrote them), on stderr after the summary. */
static void report_outputs(const ht_config *cfg, const char *trace, long long steps) {
    const struct {
        const char *what, *path;
    } out[] = {{"checkpoint", cfg->checkpoint.path}, {"metrics", cfg->log.metrics},
               {"sync log", cfg->sync.log}, {"trace", trace}};
    for (size_t i = 0; i < sizeof out / sizeof *out; i++) {
        char in[HT_PATH_MAX + 8];
        if (!out[i].path || !*out[i].path) continue;
        resolved_in(out[i].path, in, sizeof in);
        if (i == 0)
            ht_log_info("%s (step %lld): %s%s", out[i].what, steps, out[i].path, in);
        else
            ht_log_info("%s: %s%s", out[i].what, out[i].path, in);
    }
    if (!*cfg->checkpoint.path) ht_log_info("no checkpoint written (checkpoint.path not set)");
}

/* hettrain schedule ...: argv[0] is "schedule". Pure: no MPI, no device. */
static int schedule_main(int argc, char **argv) {
    ht_pipe_params p = {.kind = -1, .v = 1};
    ht_args_schedule a;
    ht_args_schedule_init(&a);
    parse_or_exit(ht_opts_schedule, argc, argv, &a, " for schedule");
    if (a.help) { /* before a -c FILE is read */
        usage_of(stdout, USAGE_SCHEDULE, help_schedule());
        return 0;
    }
    const char *kind = NULL;
    double bf = 1.0;
    char groups[256] = ""; /* the job's replicated stages, as a line under the timeline */
    int slots[HT_CLI_MAX_LIST];
    if (a.config || a.nset) { /* the job's pipe.* keys; the options below override them */
        ht_config cfg;
        ht_exit_on_error(ht_config_load(&cfg, a.config, a.sets, a.nset));
        const ht_opt *lim = ht_opts_schedule; /* the bounds of --stages and --micro-batches */
        while (strcmp(lim->name, "--stages"))
            lim++;
        if (cfg.pipe.stages > lim[0].hi || cfg.pipe.micro_batches > lim[1].hi)
            ht_die(HT_EINPUT, "schedule: pipe.stages %d, pipe.micro_batches %d: expected at most "
                   "%g stages and %g micro-batches", cfg.pipe.stages, cfg.pipe.micro_batches,
                   lim[0].hi, lim[1].hi);
        if (cfg.pipe.schedule != HT_PIPE_NONE) kind = ht_pipe_kind_name(cfg.pipe.schedule);
        p.D = cfg.pipe.stages, p.N = cfg.pipe.micro_batches;
        if (ht_pipe_kind_has(cfg.pipe.schedule, HT_PIPE_F_CHUNKS)) p.v = cfg.pipe.chunks;
        if (cfg.pipe.nstage_ranks) { /* one stream per stage, run by its ranks */
            size_t k = (size_t)snprintf(groups, sizeof groups, "pipe.stage_ranks:");
            for (int q = 0, r = 0; q < cfg.pipe.nstage_ranks && k + 24 < sizeof groups; q++) {
                k += (size_t)snprintf(groups + k, sizeof groups - k, " rank %d runs pipeline ranks "
                                      "%d..%d%s", q, r, r + cfg.pipe.stage_ranks[q] - 1,
                                      q + 1 < cfg.pipe.nstage_ranks ? ";" : "");
                r += cfg.pipe.stage_ranks[q];
            }
            p.D = cfg.pipe.nstage_ranks;
        } else if (cfg.pipe.replicate && cfg.pipe.partition == HT_PART_HETERO) {
            snprintf(groups, sizeof groups,
                     "pipe.replicate: the hetero partition decides at start-up, from the layer "
                     "times it measures, which ranks share a stage; shown: one stage per rank");
        }
        bf = 2.0; /* what the trainer plans for */
    }
    if (a.schedule) kind = a.schedule;
    if (a.stages) p.D = (int)a.stages;
    if (a.micro_batches) p.N = (int)a.micro_batches;
    if (a.chunks) p.v = (int)a.chunks;
    if (a.bf > 0) bf = a.bf;
    int ntimes = a.ntimes, nslots = a.nslots, streams = a.streams;
    const char *trace = a.trace;
    double *times = a.times;
    char kinds[256];
    ht_pipe_kind_list(0, 0, kinds, sizeof kinds);
    if (!kind) ht_die(HT_EINPUT, "schedule: no --schedule given (and no pipe.schedule in a -c FILE); expected --schedule %s", kinds);
    if ((p.kind = ht_pipe_kind_parse(kind)) < 0)
        ht_die(HT_EINPUT, "schedule: --schedule %s: expected %s", kind, kinds);
    if (!p.D) ht_die(HT_EINPUT, "schedule: no --stages given; expected --stages D (D >= 1)");
    if (!p.N) ht_die(HT_EINPUT, "schedule: no --micro-batches given; expected --micro-batches N (N >= 1)");
    if ((ntimes && ntimes != p.D) || (nslots && nslots != p.D))
        ht_die(HT_EINPUT, "schedule: --%s has %d values for --stages %d; expected one per stage",
               ntimes && ntimes != p.D ? "stage-times" : "max-inflight",
               ntimes && ntimes != p.D ? ntimes : nslots, p.D);
    if (ntimes && ht_pipe_kind_has(p.kind, HT_PIPE_F_V))
        ht_die(HT_EINPUT, "schedule: --stage-times takes one time per rank; zb-v holds two "
                          "stages per rank (use zb-het for unequal stages)");
    if (ntimes && p.v != 1)
        ht_die(HT_EINPUT, "schedule: --stage-times takes one time per rank; it does not combine "
                          "with --chunks %d", p.v);
    for (int i = 0; i < nslots; i++)
        slots[i] = (int)a.slots[i]; /* whole numbers in [1, 2^20] (cli/opts.c) */
    p.stage_time = ntimes ? times : NULL;
    p.max_inflight = nslots ? slots : NULL;
    ht_pipe_sched s;
    p.bf_ratio = bf; /* the order (Chimera's) planned for the times shown */
    ht_exit_on_error(ht_pipe_generate(&p, &s));
    if (streams) ht_pipe_print_streams(&s, stdout);
    ht_pipe_report r;
    if (ht_pipe_check(&s, bf, NULL, &r)) /* a generator bug, not the user's input */
        ht_die(HT_ERUNTIME, "schedule \"%s\" failed its own check: %s", kind, ht_errmsg());
    ht_pipe_print_timeline(&s, bf, stdout);
    if (groups[0]) printf("%s\n", groups);
    if (ntimes) print_under_times(&s, bf, times, nslots > 0);
    if (trace) ht_exit_on_error(ht_pipe_write_trace(&s, bf, trace));
    ht_pipe_sched_free(&s);
    return 0;
}

/* --list-devices: the table of this host's devices. Under mpirun, one table per host,
 * labelled with it and its ranks (rank 0 prints what each host's first rank found), not one
 * unlabelled copy per rank. */
static int list_devices(int *argc, char ***argv) {
    ht_comm_init(argc, argv);
    const int rank = ht_comm_rank(), world = ht_comm_size();
    const ht_devinfo *l;
    int n, rc = ht_ocl_devices(&l, &n);
    ht_comm_exit_if_any(rc);
    if (world == 1) {
        ht_ocl_print_devices(stdout);
        ht_comm_finalize();
        return 0;
    }
    static const ht_config none; /* hosts by name: no job, so no cluster.hosts */
    ht_place p;
    ht_place_host(&none, rank, world, &p);
    char *table = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&table, &len);
    if (!f) ht_die(HT_ERUNTIME, "--list-devices: open_memstream failed");
    fprintf(f, "%s", p.host);
    fputc(0, f); /* host name, then the table */
    ht_ocl_format_devices(f, l, n);
    fclose(f);
    size_t *lens = ht_xcalloc((size_t)world, sizeof *lens);
    ht_comm_allgather(&len, sizeof len, lens);
    size_t total = 0;
    for (int r = 0; r < world; r++)
        total += lens[r];
    char *all = rank == 0 ? ht_xmalloc(total + 1) : NULL;
    ht_comm_gatherv(table, len, all, lens, 0);
    for (int r = 0, off = 0; rank == 0 && r < world; off += (int)lens[r++]) {
        const char *host = all + off, *first = NULL;
        for (int q = 0, o = 0; q < r && !first; o += (int)lens[q++])
            if (!strcmp(all + o, host)) first = all + o;
        if (first) continue; /* its host was printed with an earlier rank */
        printf("%shost %s, ranks", r ? "\n" : "", host);
        for (int q = r, o = off; q < world; o += (int)lens[q++])
            if (!strcmp(all + o, host)) printf(" %d", q);
        printf(":\n%.*s", (int)(lens[r] - strlen(host) - 1), host + strlen(host) + 1);
    }
    fflush(stdout);
    free(all), free(lens), free(table);
    ht_comm_finalize();
    return 0;
}

int main(int argc, char **argv) {
    /* under mpirun every rank parses the same command line: one reports a mistake in it */
    ht_set_quiet_input_errors(ht_comm_env_rank() > 0);
    if (argc > 1 && !strcmp(argv[1], "generate")) return generate_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "schedule")) return schedule_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "plan")) return ht_sim_cli(argc - 1, argv + 1, 1);
    if (argc > 1 && !strcmp(argv[1], "export")) return ht_export_cli(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "ckpt")) return ht_ckpt_cli(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "emulate")) return ht_emulate_cli(argc - 1, argv + 1);
    ht_args_train a;
    ht_args_train_init(&a);
    parse_or_exit(ht_opts_train, argc, argv, &a, "");
    log_level(a.quiet, a.verbose);
    if (a.list_devices) return list_devices(&argc, &argv);
    if (a.help_config) {
        ht_config_print_schema(stdout);
        return 0;
    }
    if (a.help) {
        usage(stdout);
        return 0;
    }
    if (a.version) {
        printf("hettrain %s\n", HT_VERSION);
        return 0;
    }
    const char *cfg_path = a.config, *trace = a.trace;
    if (!cfg_path)
        ht_die(HT_EINPUT, "no config given; expected -c FILE (e.g. hettrain -c conf/quickstart.cfg)");
    if (trace && !*trace) ht_die(HT_EINPUT, "--trace: expected a file name, got \"\"");
    if (a.trace_layers && !trace) ht_die(HT_EINPUT, "--trace-layers: needs --trace FILE");

    /* MPI only for a training run, and only under mpirun (see comm.h): any error after this
     * on any rank aborts the whole job with the error's exit code, except the checks below */
    ht_comm_init(&argc, &argv);
    ht_config cfg;
    int rc = ht_config_load(&cfg, cfg_path, a.sets, a.nset);
    /* every output location before any work: a bad path fails now, not after the run */
    if (rc == HT_OK) rc = ht_config_check_outputs(&cfg, trace);
    /* a bad profile fails the same way at one rank as at many */
    if (rc == HT_OK && cfg.cluster.profile[0]) rc = ht_profile_check_file(cfg.cluster.profile);
    if (rc == HT_OK && ht_comm_rank() == 0)
        rc = check_overwrite(&cfg, a.resume, a.overwrite, a.sets, a.nset);
    /* printed once, and no MPI_Abort with its help text: every rank gets here */
    ht_comm_exit_if_any(rc);
    ht_set_quiet_input_errors(0); /* from here, the rank that fails says why */
    ht_train_opts opts = {.device = a.device, .resume = a.resume, .profile = a.profile,
                          .stop_after = a.stop_after, .trace = trace,
                          .trace_layers = a.trace_layers};
    ht_train_result res;
    ht_stop_install(); /* SIGINT/SIGTERM: stop after the current step (core/stop.h) */
    rc = ht_train(&cfg, &opts, &res);
    if (rc == HT_ESTOPPED) { /* not an error: every rank stopped after the same step */
        const int saved = cfg.checkpoint.path[0] != 0; /* the same on every rank */
        if (ht_comm_rank() == 0 && saved)
            fprintf(stderr, "hettrain: %s; continue with --resume\n", ht_errmsg());
        else if (ht_comm_rank() == 0)
            fprintf(stderr, "hettrain: %s: nothing was saved, a rerun starts from step 0 (set "
                            "checkpoint.path to make a stopped run resumable)\n", ht_errmsg());
        ht_comm_finalize();
        return saved ? HT_ESTOPPED : HT_ELOST;
    }
    ht_exit_on_error(rc);
    if (ht_comm_rank() == 0) /* three significant digits at least (a slow device: 1.37) */
        printf("final: step %lld, val_loss %.4f, val_acc %.2f%%, %.*f samples/s, first step "
               "after %.2f s\n",
               (long long)res.steps, res.val_loss, 100.0 * res.val_acc,
               res.samples_per_s >= 100 ? 0 : res.samples_per_s >= 10 ? 1 : 2,
               res.samples_per_s, res.first_step_s);
    fflush(stdout);
    if (ht_comm_rank() == 0) report_outputs(&cfg, trace, res.steps);
    ht_comm_finalize();
    return 0;
}
