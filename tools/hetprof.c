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

static const char USAGE[] =
    "usage: hetprof [--device SEL]... [-c MODEL_CONFIG] [--batch 64,128,256] [--quick]\n"
    "               [--tune-seconds S] [--seed N] [-o PROFILE]\n"
    "       hetprof --check PROFILE\n"
    "Measures every selected OpenCL device (all by default; SEL as hettrain --device) and\n"
    "prints a table; -o writes the profile (libconfig), and with --tune-seconds S > 0 a\n"
    "CLBlast tuning file per device next to it (PROFILE.N.tuning.cfg, usable as\n"
    "device.tuning). --quick: a few-second probe at one batch size (train.batch, or 128).\n"
    "--check validates a profile and prints it.\n"
    "Under mpirun each rank profiles one device (--device once for all ranks or once per\n"
    "rank, else the config's cluster.devices / device.select) and the MPI latency and\n"
    "bandwidth of every rank pair are measured; rank 0 writes one profile with a links list.";

#define MAX_SEL 16

/* ---------------------------------------------------------------- device selection */

typedef struct {
    const char *sels[MAX_SEL];
    int nsel;
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
        if (s->nsel && (r->rc = ht_ocl_select(s->sels[i], &idx)) != HT_OK) {
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

static int parse_batches(const char *s, int *out) {
    int n = 0;
    while (*s && n < HT_PROF_MAX_BATCHES) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 20 || (*end && *end != ',')) return 0;
        out[n++] = (int)v;
        s = *end ? end + 1 : end;
    }
    return *s ? 0 : n;
}

static int cmp_int(const void *a, const void *b) {
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

int main(int argc, char **argv) {
    ht_set_progname("hetprof");
    ht_comm_init(&argc, &argv);
    int rank = ht_comm_rank(), world = ht_comm_size();
    selection sel = {.nsel = 0};
    const char *cfg_path = NULL, *out = NULL, *check = NULL, *batch_arg = NULL;
    double tune_s = 0;
    uint64_t seed = 1;
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (rank == 0) printf("%s\n", USAGE);
            ht_comm_finalize();
            return 0;
        }
        if (!strcmp(a, "--quick")) {
            quick = 1;
            continue;
        }
        static const char *const with_value[] = {"--device", "-c", "-o", "--check", "--batch",
                                                 "--tune-seconds", "--seed", NULL};
        int known = 0;
        while (with_value[known] && strcmp(with_value[known], a))
            known++;
        if (!with_value[known]) ht_die(HT_EINPUT, "unknown argument '%s'\n%s", a, USAGE);
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        if (!v) ht_die(HT_EINPUT, "option '%s' needs a value\n%s", a, USAGE);
        char *end;
        if (!strcmp(a, "--device")) {
            if (sel.nsel == MAX_SEL) ht_die(HT_EINPUT, "at most %d --device options", MAX_SEL);
            sel.sels[sel.nsel++] = v;
        } else if (!strcmp(a, "-c"))
            cfg_path = v;
        else if (!strcmp(a, "-o"))
            out = v;
        else if (!strcmp(a, "--check"))
            check = v;
        else if (!strcmp(a, "--batch"))
            batch_arg = v;
        else if (!strcmp(a, "--tune-seconds")) {
            tune_s = strtod(v, &end);
            if (*end || !(tune_s >= 0))
                ht_die(HT_EINPUT, "--tune-seconds '%s': expected seconds >= 0", v);
        } else if (!strcmp(a, "--seed")) {
            seed = strtoull(v, &end, 10);
            if (*end || !*v) ht_die(HT_EINPUT, "--seed '%s': expected an integer >= 0", v);
        } else
            ht_die(HT_EINPUT, "unknown argument '%s'\n%s", a, USAGE);
    }

    static ht_profile prof;
    /* the output location before any measuring: never a device or folder, never after the run */
    if (out) ht_exit_on_error(ht_check_output(out, "-o"));
    if (check) {
        ht_exit_on_error(ht_profile_load(check, &prof));
        if (rank == 0) {
            ht_profile_print(stdout, &prof);
            printf("%s: a valid profile of %d device(s)%s%s%s\n", check, prof.ndev,
                   prof.model[0] ? " for " : "", prof.model, prof.nlinks ? " with MPI links" : "");
        }
        ht_comm_finalize();
        return 0;
    }

    static ht_config cfg;
    if (cfg_path) ht_exit_on_error(ht_config_load(&cfg, cfg_path, NULL, 0));
    int batches[HT_PROF_MAX_BATCHES], nb;
    if (batch_arg) {
        if (!(nb = parse_batches(batch_arg, batches)))
            ht_die(HT_EINPUT, "--batch '%s': expected batch sizes like 64,128,256", batch_arg);
    } else if (quick) {
        batches[0] = cfg_path ? cfg.train.batch : 128, nb = 1;
    } else {
        batches[0] = 64, batches[1] = 128, batches[2] = 256, nb = 3;
    }
    qsort(batches, (size_t)nb, sizeof *batches, cmp_int);
    const ht_config *cp = cfg_path ? &cfg : NULL;
    {
        ht_model desc; /* checks the model against the data before any device work */
        ht_exit_on_error(ht_prof_model(&desc, NULL, cp, batches[nb - 1]));
        ht_strlcpy(prof.model, desc.desc, sizeof prof.model);
        ht_model_free(&desc);
    }
    memcpy(prof.batches, batches, sizeof batches);
    prof.nbatches = nb;

    /* CLBlast tuning forks children that open the device: it runs first, while this
     * process has not touched OpenCL (forking after that is unsafe). Devices are resolved
     * in a child for the same reason. */
    /* under mpirun: this rank's one device; its entry in the profile is devices[rank] */
    if (world > 1) {
        if (world > HT_PROF_MAX_DEVS)
            ht_die(HT_EINPUT, "%d ranks: a profile holds at most %d devices", world,
                   HT_PROF_MAX_DEVS);
        if (sel.nsel > 1 && sel.nsel != world)
            ht_die(HT_EINPUT, "%d --device options for %d ranks: give one for all or one per rank",
                   sel.nsel, world);
        const char *cli = sel.nsel ? sel.sels[sel.nsel == world ? rank : 0] : NULL;
        sel.sels[0] = ht_build_selector(&cfg, cli, rank);
        sel.nsel = 1;
    }
    resolved r;
    char msg[256], tuning[HT_PROF_MAX_DEVS][1100] = {{0}};
    if (tune_s > 0) {
        if (!ht_prof_forked(resolve, &sel, &r, sizeof r, 120, msg, sizeof msg))
            ht_die(HT_ERUNTIME, "listing OpenCL devices failed: %s", msg);
    } else {
        resolve(&sel, &r);
    }
    if (r.rc != HT_OK) ht_die(r.rc, "%s", r.msg);
    prof.ndev = r.n;
    for (int turn = 0; turn < world && tune_s > 0; turn++) { /* one rank after another */
        if (turn != rank) {
            ht_comm_barrier();
            continue;
        }
        for (int i = 0; i < r.n; i++) {
            int di = world > 1 ? rank : i; /* the device's index in the profile */
            if (out)
                snprintf(tuning[i], sizeof tuning[i], "%s.%d.tuning.cfg", out, di);
            else
                snprintf(tuning[i], sizeof tuning[i], "%s/hetprof.%ld.%d.tuning.cfg",
                         getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                         (long)getpid(), di);
            tune_device(r.idx[i], cp, batches[nb - 1], tune_s, seed, tuning[i], &prof.dev[i]);
        }
        ht_comm_barrier();
    }

    for (int turn = 0; turn < world; turn++) { /* one rank after another */
        if (turn != rank) {
            ht_comm_barrier();
            continue;
        }
        for (int i = 0; i < r.n; i++) {
            ht_prof_opts o = {.quick = quick,
                              .batches = batches,
                              .nbatches = nb,
                              .cfg = cp,
                              .seed = seed,
                              .tuning = tuning[i],
                              .log = stderr};
            ht_prof_dev tuned = prof.dev[i];
            ht_exit_on_error(ht_prof_measure(r.idx[i], &o, &prof.dev[i]));
            prof.dev[i].nclblast = tuned.nclblast;
            memcpy(prof.dev[i].clblast, tuned.clblast, sizeof tuned.clblast);
            if (out) ht_strlcpy(prof.dev[i].tuning, tuned.tuning, sizeof prof.dev[i].tuning);
        }
        ht_comm_barrier();
    }
    if (world > 1) {
        /* every rank's device to every rank (plain structs; the ranks run the same build) */
        ht_prof_dev *all = ht_xcalloc((size_t)world, sizeof *all);
        ht_comm_allgather(&prof.dev[0], sizeof *all, all);
        memcpy(prof.dev, all, (size_t)world * sizeof *all);
        prof.ndev = world;
        free(all);
        ht_exit_on_error(ht_prof_links(quick, &prof, stderr));
        if (rank != 0) {
            ht_comm_finalize();
            return 0;
        }
        r.n = world;
    }
    printf("model: %s\n", prof.model);
    ht_profile_print(stdout, &prof);
    for (int i = 0; i < r.n; i++) {
        printf("device %d: model at", i);
        for (int b = 0; b < nb; b++)
            printf(" %s%d: %.0f samples/s", b ? ", " : "", batches[b],
                   ht_profile_speed(&prof, i, batches[b]));
        printf(" (from layer times)\n");
    }
    if (out) {
        ht_exit_on_error(ht_profile_save(out, &prof));
        printf("profile written to %s\n", out);
    } else {
        for (int i = 0; i < HT_PROF_MAX_DEVS; i++)
            if (tuning[i][0]) unlink(tuning[i]);
    }
    ht_comm_finalize();
    return 0;
}
