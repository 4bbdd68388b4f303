/* hetprof: measures OpenCL devices for hettrain's planner - SGEMM at the model's shapes,
 * memory and host-link bandwidth, launch latency, per-layer forward/backward times per
 * batch size - optionally tunes CLBlast, and writes a profile (format: src/prof/profile.h).
 * Under mpirun each rank profiles its own device (selected as hettrain does: --device per
 * rank or for all, else cluster.devices, else device.select), one rank after another so
 * that ranks sharing a host do not disturb each other's figures, then the ranks measure
 * the MPI link of every pair; rank 0 prints and writes one profile, device i = rank i. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build/build.h"
#include "build/place.h"
#include "comm/comm.h"
#include "config/config.h"
#include "core/err.h"
#include "core/log.h"
#include "core/path.h"
#include "nn/model.h"
#include "ocl/ocl.h"
#include "prof/measure.h"
#include "prof/profile.h"
#include "prof/tune.h"
#include "cli/opts.h"

static const char USAGE[] =
    "usage: hetprof [--device SEL]... [-c MODEL_CONFIG] [--batch 64,128,256] [--quick]\n"
    "               [--concurrent] [--tune-seconds S] [--seed N] [-o PROFILE]\n"
    "       hetprof --check PROFILE\n"
    "Measures every selected OpenCL device (all by default; SEL as hettrain --device) and\n"
    "prints a table; -o writes the profile (libconfig), and with --tune-seconds S > 0 a\n"
    "CLBlast tuning file per device next to it (PROFILE.N.tuning.cfg, usable as\n"
    "device.tuning). --quick: a few-second probe at one batch size (train.batch, or 128).\n"
    "--check validates a profile and prints it.\n"
    "Under mpirun each rank profiles one device (--device once for all ranks or once per\n"
    "rank, else the config's cluster.devices / device.select) and the MPI latency,\n"
    "bandwidth and ring all-reduce step of every rank pair are measured; rank 0 writes one\n"
    "profile with a links list.\n"
    "The ranks measure their devices one at a time, each alone on its host; --concurrent:\n"
    "all at once, as they will train (ranks whose devices share a host's memory and caches,\n"
    "as CPU devices do).";

#define MAX_SEL HT_CLI_MAX_SEL
_Static_assert(HT_CLI_MAX_BATCHES == HT_PROF_MAX_BATCHES, "hetprof --batch holds a profile's batches");

/* ---------------------------------------------------------------- device selection */

typedef struct {
    const char *sels[MAX_SEL];
    int nsel;
    int local_rank; /* under mpirun: among the ranks of this host (build/place.h) */
    ht_place place;
} selection;

typedef struct {
    int rc, n;
    int idx[HT_PROF_MAX_DEVS];
    char msg[4096];
} resolved;

/* Selectors -> distinct device indices (no selector: every device). */
static void resolve(void *ctx, void *out) {
    const selection *s = ctx;
    resolved *r = out;
    memset(r, 0, sizeof *r);
    const ht_devinfo *list;
    int n;
    if ((r->rc = ht_ocl_devices(&list, &n)) != HT_OK) {
        ht_strlcpy(r->msg, ht_errmsg(), sizeof r->msg);
        return;
    }
    for (int i = 0; i < (s->nsel ? s->nsel : n) && r->n < HT_PROF_MAX_DEVS; i++) {
        int idx = i;
        if (s->nsel &&
            (r->rc = ht_ocl_select_local(s->sels[i], s->local_rank, &idx, NULL)) != HT_OK) {
            ht_strlcpy(r->msg, ht_errmsg(), sizeof r->msg);
            return;
        }
        int dup = 0;
        for (int j = 0; j < r->n; j++)
            dup |= r->idx[j] == idx;
        if (!dup) r->idx[r->n++] = idx;
    }
}

/* ---------------------------------------------------------------- tuning (before any OpenCL) */

typedef struct {
    int index, max_batch;
    const ht_config *cfg;
} shapes_ctx;

typedef struct {
    int rc, n;
    ht_prof_gemm g[HT_PROF_MAX_GEMM];
    char msg[1024];
} shapes_out;

static void shapes_child(void *ctx, void *out) {
    const shapes_ctx *c = ctx;
    shapes_out *o = out;
    memset(o, 0, sizeof *o);
    ht_dev *d;
    ht_dev_opts opts = ht_dev_opts_default();
    opts.profile = 1;
    ht_model m;
    if ((o->rc = ht_dev_open(&d, c->index, &opts)) != HT_OK ||
        (o->rc = ht_prof_model(&m, d, c->cfg, c->max_batch)) != HT_OK) {
        ht_strlcpy(o->msg, ht_errmsg(), sizeof o->msg);
        return;
    }
    o->n = ht_prof_gemm_shapes(&m, c->max_batch, o->g, HT_PROF_MAX_GEMM);
}

/* Tunes device idx; writes its tuning file to path and the parameters into *dev. */
static void tune_device(int idx, const ht_config *cfg, int max_batch, double seconds, uint64_t seed,
                        const char *path, ht_prof_dev *dev) {
    shapes_ctx sc = {idx, max_batch, cfg};
    shapes_out so;
    char msg[256];
    if (!ht_prof_forked(shapes_child, &sc, &so, sizeof so, 600, msg, sizeof msg))
        ht_die(HT_ERUNTIME, "device %d: measuring the GEMM shapes failed: %s", idx, msg);
    if (so.rc != HT_OK) ht_die(so.rc, "%s", so.msg);
    ht_prof_tune_opts to = {.device = idx,
                            .budget = seconds,
                            .seed = seed,
                            .shapes = so.g,
                            .nshapes = so.n,
                            .offset = 64,
                            .timeout = 300,
                            .log = stderr};
    ht_prof_tune_result tr;
    fprintf(stderr, "hetprof: device %d: tuning CLBlast for %.0f s at %d GEMM shapes\n", idx,
            seconds, so.n);
    ht_exit_on_error(ht_prof_tune(&to, &tr));
    dev->nclblast = tr.nk;
    memcpy(dev->clblast, tr.k, sizeof tr.k);
    ht_strlcpy(dev->tuning, path, sizeof dev->tuning);
    ht_profile p1 = {.ndev = 1};
    p1.dev[0] = *dev;
    ht_exit_on_error(ht_profile_write_tuning(&p1, 0, path));
}

/* ---------------------------------------------------------------- main */

static int cmp_int(const void *a, const void *b) {
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

typedef struct {
    selection sel;
    const char *cfg_path, *out, *check;
    int batches[HT_PROF_MAX_BATCHES], nbatches; /* --batch; 0: not given */
    double tune_s;
    uint64_t seed;
    int quick, help;
    int concurrent; /* every rank measures at once (default: one rank at a time) */
} options;

/* The command line into *o (cli/opts.c: ht_opts_prof); exits 2 naming the argument that is
 * wrong. */
static void parse_args(int argc, char **argv, options *o) {
    ht_args_prof a;
    ht_args_prof_init(&a);
    *o = (options){.seed = 1};
    if (ht_opts_parse(ht_opts_prof, argc, argv, &a, NULL, NULL) != HT_OK) {
        char msg[512];
        ht_strlcpy(msg, ht_errmsg(), sizeof msg);
        ht_die(HT_EINPUT, "%s\n%s", msg, USAGE);
    }
    for (int i = 0; i < a.nsel; i++)
        o->sel.sels[i] = a.sels[i];
    o->sel.nsel = a.nsel;
    o->cfg_path = a.config, o->out = a.out, o->check = a.check;
    o->tune_s = a.tune_s, o->seed = (uint64_t)a.seed;
    o->quick = a.quick, o->help = a.help, o->concurrent = a.concurrent;
    o->nbatches = a.nbatches;
    for (int i = 0; i < a.nbatches; i++) { /* whole numbers in [1, 2^20] (cli/opts.c) */
        o->batches[i] = (int)a.batches[i];
        for (int j = 0; j < i; j++)
            if (o->batches[j] == o->batches[i]) /* the profile holds each batch size once */
                ht_die(HT_EINPUT, "--batch: found %d twice, expected each batch size once",
                       o->batches[i]);
    }
}

/* --check: the profile validated and printed. */
static void check_profile(const char *path, int rank) {
    static ht_profile prof;
    ht_exit_on_error(ht_profile_load(path, &prof));
    if (rank != 0) return;
    ht_profile_print(stdout, &prof);
    printf("%s: a valid profile of %d device(s)%s%s%s\n", path, prof.ndev,
           prof.model[0] ? " for " : "", prof.model, prof.nlinks ? " with MPI links" : "");
}

/* The batch sizes to measure, ascending, into prof (with the model's name, checked against
 * the data before any device work). */
static void choose_batches(const options *o, const ht_config *cp, ht_profile *prof) {
    int *b = prof->batches, nb;
    if (o->nbatches) {
        memcpy(b, o->batches, (size_t)o->nbatches * sizeof *b);
        nb = o->nbatches;
    } else if (o->quick) {
        b[0] = cp ? cp->train.batch : 128, nb = 1;
    } else {
        b[0] = 64, b[1] = 128, b[2] = 256, nb = 3;
    }
    qsort(b, (size_t)nb, sizeof *b, cmp_int);
    prof->nbatches = nb;
    ht_model desc;
    ht_exit_on_error(ht_prof_model(&desc, NULL, cp, b[nb - 1]));
    ht_strlcpy(prof->model, desc.desc, sizeof prof->model);
    ht_model_free(&desc);
}

/* Under mpirun: this rank's one device (its entry in the profile is devices[rank]). */
static void select_rank_device(selection *sel, const ht_config *cfg, int rank, int world) {
    if (world > HT_PROF_MAX_DEVS)
        ht_die(HT_EINPUT, "%d ranks: a profile holds at most %d devices", world, HT_PROF_MAX_DEVS);
    if (sel->nsel > 1 && sel->nsel != world)
        ht_die(HT_EINPUT, "%d --device options for %d ranks: give one for all or one per rank",
               sel->nsel, world);
    const char *cli = sel->nsel ? sel->sels[sel->nsel == world ? rank : 0] : NULL;
    sel->sels[0] = ht_build_selector(cfg, cli, rank);
    sel->nsel = 1;
    /* as hettrain maps it: the selector's match at this rank's local rank */
    ht_place_host(cfg, rank, world, &sel->place);
    ht_place_key(cfg, cli, rank, sel->place.key, sizeof sel->place.key);
    sel->local_rank = sel->place.local_rank;
}

typedef char tuning_paths[HT_PROF_MAX_DEVS][1100];

/* CLBlast tuning of this rank's devices, ranks one after another: tuning files beside -o
 * (else in TMPDIR, removed at the end), parameters into prof. */
static void tune_all(const options *o, const ht_config *cp, const resolved *r, ht_profile *prof,
                     tuning_paths tuning, int rank, int world) {
    for (int turn = 0; turn < world; turn++) {
        if (turn != rank) {
            ht_comm_barrier();
            continue;
        }
        for (int i = 0; i < r->n; i++) {
            int di = world > 1 ? rank : i; /* the device's index in the profile */
            const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
            if (o->out)
                snprintf(tuning[i], sizeof tuning[i], "%s.%d.tuning.cfg", o->out, di);
            else
                snprintf(tuning[i], sizeof tuning[i], "%s/hetprof.%ld.%d.tuning.cfg", tmp,
                         (long)getpid(), di);
            tune_device(r->idx[i], cp, prof->batches[prof->nbatches - 1], o->tune_s, o->seed,
                        tuning[i], &prof->dev[i]);
        }
        ht_comm_barrier();
    }
}

/* The measurements of this rank's devices, ranks one after another, keeping the tuning. */
static void measure_all(const options *o, const ht_config *cp, const resolved *r,
                        ht_profile *prof, tuning_paths tuning, int rank, int world) {
    for (int turn = 0; turn < world; turn++) {
        /* one rank at a time; --concurrent: every rank in the first turn */
        if (o->concurrent ? turn != 0 : turn != rank) {
            ht_comm_barrier();
            continue;
        }
        for (int i = 0; i < r->n; i++) {
            ht_prof_opts po = {.quick = o->quick,
                               .batches = prof->batches,
                               .nbatches = prof->nbatches,
                               .cfg = cp,
                               .seed = o->seed,
                               .tuning = tuning[i],
                               .log = stderr};
            ht_prof_dev tuned = prof->dev[i];
            ht_exit_on_error(ht_prof_measure(r->idx[i], &po, &prof->dev[i]));
            prof->dev[i].nclblast = tuned.nclblast;
            memcpy(prof->dev[i].clblast, tuned.clblast, sizeof tuned.clblast);
            if (o->out) ht_strlcpy(prof->dev[i].tuning, tuned.tuning, sizeof prof->dev[i].tuning);
        }
        ht_comm_barrier();
    }
}

/* Every rank's device to every rank (plain structs; the ranks run the same build), then
 * the MPI links of every pair. */
static void gather_ranks(int quick, ht_profile *prof, int world) {
    ht_prof_dev *all = ht_xcalloc((size_t)world, sizeof *all);
    ht_comm_allgather(&prof->dev[0], sizeof *all, all);
    memcpy(prof->dev, all, (size_t)world * sizeof *all);
    prof->ndev = world;
    free(all);
    ht_exit_on_error(ht_prof_links(quick, prof, stderr));
}

/* Rank 0: the table and per-device model speeds, and the profile to -o. */
static void report(const options *o, const ht_profile *prof, tuning_paths tuning) {
    printf("model: %s\n", prof->model);
    ht_profile_print(stdout, prof);
    for (int i = 0; i < prof->ndev; i++) {
        printf("device %d: model at", i);
        for (int b = 0; b < prof->nbatches; b++)
            printf(" %s%d: %.0f samples/s", b ? ", " : "", prof->batches[b],
                   ht_profile_speed(prof, i, prof->batches[b]));
        printf(" (from layer times)\n");
    }
    if (o->out) {
        ht_exit_on_error(ht_profile_save(o->out, prof));
        printf("profile written to %s\n", o->out);
    } else {
        for (int i = 0; i < HT_PROF_MAX_DEVS; i++)
            if (tuning[i][0]) unlink(tuning[i]);
    }
}

int main(int argc, char **argv) {
    ht_set_progname("hetprof");
    ht_comm_init(&argc, &argv);
    int rank = ht_comm_rank(), world = ht_comm_size();
    options o;
    parse_args(argc, argv, &o);
    if (o.help) {
        if (rank == 0) printf("%s\n", USAGE);
        ht_comm_finalize();
        return 0;
    }
    /* the output location before any measuring: never a device or folder, never after the run */
    if (o.out) ht_exit_on_error(ht_check_output(o.out, "-o"));
    if (o.check) {
        check_profile(o.check, rank);
        ht_comm_finalize();
        return 0;
    }
    static ht_config cfg;
    static ht_profile prof;
    if (o.cfg_path) ht_exit_on_error(ht_config_load(&cfg, o.cfg_path, NULL, 0));
    const ht_config *cp = o.cfg_path ? &cfg : NULL;
    choose_batches(&o, cp, &prof);
    if (world > 1) select_rank_device(&o.sel, &cfg, rank, world);
    /* CLBlast tuning forks children that open the device: it runs first, while this
     * process has not touched OpenCL (forking after that is unsafe). Devices are resolved
     * in a child for the same reason. */
    resolved r;
    char msg[256];
    static tuning_paths tuning;
    if (o.tune_s > 0) {
        if (!ht_prof_forked(resolve, &o.sel, &r, sizeof r, 120, msg, sizeof msg))
            ht_die(HT_ERUNTIME, "listing OpenCL devices failed: %s", msg);
    } else {
        resolve(&o.sel, &r);
    }
    if (r.rc != HT_OK && world > 1)
        ht_die(r.rc, "rank %d on host %s (local rank %d), from %s: %s", rank, o.sel.place.host,
               o.sel.local_rank, o.sel.place.key, r.msg);
    if (r.rc != HT_OK) ht_die(r.rc, "%s", r.msg);
    prof.ndev = r.n;
    if (o.tune_s > 0) tune_all(&o, cp, &r, &prof, tuning, rank, world);
    measure_all(&o, cp, &r, &prof, tuning, rank, world);
    if (world > 1) gather_ranks(o.quick, &prof, world);
    if (rank == 0) report(&o, &prof, tuning);
    ht_comm_finalize();
    return 0;
}
