/* hettrain emulate --cluster FILE -c JOB [--ranks N] [--set K=V]... [--out DIR]: writes the
 * SimGrid platform and host file of the cluster description, then runs hettrain-smpi under
 * smpirun with simulated computation off (compute phases declare their cost-model time:
 * src/train/vtime.c) and tells where the results are. */
#include "cli/emulate.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "core/err.h"
#include "sim/sim.h"

#define FREE_BPS 1e15 /* a link without a bandwidth (bw 0: free) */

static double bw_of(ht_sim_link l) { return l.bw_Bps > 0 ? l.bw_Bps : FREE_BPS; }

void ht_emulate_write_platform(const ht_sim_cluster *c, int n, FILE *plat, FILE *hosts) {
    fprintf(plat, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM "
                  "\"https://simgrid.org/simgrid.dtd\">\n<!-- hettrain emulate: %s, %d ranks -->\n"
                  "<platform version=\"4.1\">\n  <zone id=\"cluster\" routing=\"Full\">\n",
            c->source, n);
    for (int r = 0; r < n; r++) {
        fprintf(plat, "    <host id=\"r%d\" speed=\"1Gf\"/>\n", r);
        fprintf(hosts, "r%d\n", r);
    }
    for (int h = 0; h < c->nhosts; h++) {
        fprintf(plat, "    <link id=\"intra%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n", h,
                bw_of(c->intra), c->intra.latency_s);
        fprintf(plat, "    <link id=\"nic%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n", h,
                bw_of(c->inter), c->inter.latency_s / 2);
    }
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            int ha = c->rank_host[a], hb = c->rank_host[b];
            fprintf(plat, "    <route src=\"r%d\" dst=\"r%d\">", a, b);
            if (ha == hb)
                fprintf(plat, "<link_ctn id=\"intra%d\"/>", ha);
            else
                fprintf(plat, "<link_ctn id=\"nic%d\"/><link_ctn id=\"nic%d\"/>", ha, hb);
            fprintf(plat, "</route>\n");
        }
    fprintf(plat, "  </zone>\n</platform>\n");
}

typedef struct args {
    const char *cluster, *job, *out, *smpi;
    int ranks;
    int ideal; /* --network ideal: links as hetsim models them (latency + size / bandwidth) */
    const char *sets[64];
    int nset;
    char **rest; /* after "--": hettrain's own options (-q, --trace FILE, ...) */
    int nrest;
} args;

static const char *value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) ht_die(HT_EINPUT, "emulate: %s: expected a value after it", argv[*i]);
    return argv[++*i];
}

static void parse(int argc, char **argv, args *a) {
    memset(a, 0, sizeof *a);
    a->out = "emulate";
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--")) {
            a->rest = argv + i + 1, a->nrest = argc - i - 1;
            if (a->nrest > 32) ht_die(HT_EINPUT, "emulate: more than 32 options after --");
            break;
        }
        if (!strcmp(o, "--cluster")) a->cluster = value(argc, argv, &i);
        else if (!strcmp(o, "-c")) a->job = value(argc, argv, &i);
        else if (!strcmp(o, "--out")) a->out = value(argc, argv, &i);
        else if (!strcmp(o, "--smpi")) a->smpi = value(argc, argv, &i);
        else if (!strcmp(o, "--network")) {
            const char *v = value(argc, argv, &i);
            if (strcmp(v, "smpi") && strcmp(v, "ideal"))
                ht_die(HT_EINPUT, "emulate: --network %s: expected smpi (SimGrid's calibrated "
                                  "MPI model, the default) or ideal (hetsim's link model)", v);
            a->ideal = !strcmp(v, "ideal");
        }
        else if (!strcmp(o, "--ranks")) {
            const char *v = value(argc, argv, &i);
            char *end;
            long r = strtol(v, &end, 10);
            if (*end || r < 1 || r > 4096)
                ht_die(HT_EINPUT, "emulate: --ranks %s: expected a whole number in [1, 4096]", v);
            a->ranks = (int)r;
        } else if (!strcmp(o, "--set")) {
            if (a->nset == 64) ht_die(HT_EINPUT, "emulate: more than 64 --set options");
            a->sets[a->nset++] = value(argc, argv, &i);
        } else
            ht_die(HT_EINPUT, "emulate: unknown option '%s'; expected --cluster FILE -c FILE "
                              "[--ranks N] [--set KEY=VALUE]... [--out DIR] [--smpi PATH] [--network smpi|ideal] "
                              "[-- HETTRAIN-OPTIONS]",
                   o);
    }
    if (!a->cluster || !a->job)
        ht_die(HT_EINPUT, "emulate: expected --cluster FILE (a cluster description, "
                          "conf/README.md) and -c FILE (the job)");
}

/* hettrain-smpi: --smpi, else HT_SMPI_BIN, else beside this program or in ../build-smpi. */
static void find_smpi(const args *a, char *out, size_t n) {
    const char *e = a->smpi ? a->smpi : getenv("HT_SMPI_BIN");
    if (e && *e) {
        if (access(e, R_OK)) ht_die(HT_EINPUT, "emulate: %s: %s", e, strerror(errno));
        ht_strlcpy(out, e, n);
        return;
    }
    char self[PATH_MAX - 64]; /* room for the names tried below */
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k > 0) {
        self[k] = 0;
        char *slash = strrchr(self, '/');
        if (slash) *slash = 0;
        const char *tries[] = {"%s/hettrain-smpi", "%s/../build-smpi/hettrain-smpi"};
        for (int i = 0; i < 2; i++) {
            snprintf(out, n, tries[i], self);
            if (!access(out, R_OK)) return;
        }
    }
    ht_die(HT_EINPUT, "emulate: no hettrain-smpi found (beside hettrain, in ../build-smpi, "
                      "HT_SMPI_BIN or --smpi PATH); build it with cmake -S . -B build-smpi "
                      "-DHT_SMPI=ON && cmake --build build-smpi");
}

/* path made absolute against the working directory. */
static void absolute(const char *path, char *out, size_t n) {
    char cwd[PATH_MAX / 2];
    if (path[0] == '/' || !getcwd(cwd, sizeof cwd))
        ht_strlcpy(out, path, n);
    else
        snprintf(out, n, "%.*s/%s", (int)(n / 2 - 2), cwd, path);
}

static FILE *open_out(const char *dir, const char *name, char *path, size_t n) {
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) ht_die(HT_EINPUT, "emulate: cannot write %s: %s", path, strerror(errno));
    return f;
}

/* Runs argv (smpirun ...) and returns its exit code; 127 when it cannot start. */
static int run(char **argv) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) ht_die(HT_ERUNTIME, "emulate: fork failed: %s", strerror(errno));
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "hettrain: error: emulate: cannot run %s: %s (SimGrid's smpirun: "
                        "apt-get install libsimgrid-dev, or tools/setup)\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) ht_die(HT_ERUNTIME, "emulate: waitpid failed: %s", strerror(errno));
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int ht_emulate_cli(int argc, char **argv) {
    args a;
    parse(argc, argv, &a);
    ht_sim_cluster c;
    ht_exit_on_error(ht_sim_cluster_load(a.cluster, &c));
    if (a.ranks > c.nranks)
        ht_die(HT_EINPUT, "emulate: --ranks %d: %s describes %d ranks", a.ranks, a.cluster,
               c.nranks);
    int n = a.ranks ? a.ranks : c.nranks;
    ht_config cfg; /* checked here once, not by every emulated rank */
    ht_exit_on_error(ht_config_load(&cfg, a.job, a.sets, a.nset));
    char bin[PATH_MAX], cl[PATH_MAX], plat[PATH_MAX], hosts[PATH_MAX];
    find_smpi(&a, bin, sizeof bin);
    absolute(a.cluster, cl, sizeof cl); /* the ranks read it; smpirun keeps the directory */
    if (mkdir(a.out, 0777) && errno != EEXIST)
        ht_die(HT_EINPUT, "emulate: --out %s: %s", a.out, strerror(errno));
    FILE *fp = open_out(a.out, "platform.xml", plat, sizeof plat);
    FILE *fh = open_out(a.out, "hosts", hosts, sizeof hosts);
    ht_emulate_write_platform(&c, n, fp, fh);
    if (fclose(fp) | fclose(fh)) ht_die(HT_ERUNTIME, "emulate: writing %s failed", a.out);
    setenv("HT_EMULATE_CLUSTER", cl, 1);
    /* Every rank is in one process, so one PoCL serves all their queues. PoCL 3.1's pthread
     * device then aborts now and then (pocl_release_dlhandle_cache: ref_count > 0): it
     * releases a finished kernel's cached work-group function by kernel hash and local size
     * only, so with commands of several queues in flight it can drop another entry's
     * reference. Its basic device runs each command inline, from its cache look-up to its
     * release, so none overlap: same kernels, same results, one thread (virtual time does
     * not depend on it). A POCL_DEVICES the user set stays. */
    setenv("POCL_DEVICES", "basic", 0);
    char np[16];
    snprintf(np, sizeof np, "%d", n);
    char *cmd[16 + 2 * 64 + 32];
    int k = 0;
    const char *head[] = {"smpirun", "-np", np, "-platform", plat, "-hostfile", hosts,
                          /* compute phases declare their time; real time counts for nothing */
                          "--cfg=smpi/simulate-computation:no",
                          /* a poll (MPI_Test, MPI_Iprobe) takes 1 us (a clock read: the default 10 ns),
                           * and never more the longer a wait lasts (SimGrid's defaults inject
                           * 100 us per poll, doubling) */
                          "--cfg=smpi/test:1e-6", "--cfg=smpi/iprobe:1e-6",
                          "--cfg=smpi/grow-injected-times:no",
                          "--log=root.thres:warning",
                          /* "called exit when leaving": every rank leaves through exit */
                          "--log=ker_engine.thres:error"};
    for (size_t i = 0; i < sizeof head / sizeof *head; i++)
        cmd[k++] = (char *)head[i];
    if (a.ideal) { /* SMPI's factors model MPI's overheads on small and large messages, which
                    * hetsim's latency + size / bandwidth does not: off, for comparing the two */
        cmd[k++] = "--cfg=smpi/bw-factor:0:1";
        cmd[k++] = "--cfg=smpi/lat-factor:0:1";
    }
    cmd[k++] = bin, cmd[k++] = "-c", cmd[k++] = (char *)a.job;
    for (int i = 0; i < a.nset; i++)
        cmd[k++] = "--set", cmd[k++] = (char *)a.sets[i];
    for (int i = 0; i < a.nrest; i++)
        cmd[k++] = a.rest[i];
    cmd[k] = NULL;
    for (int i = 0; i < k; i++) /* smpirun joins the program's arguments and splits them again */
        if (strpbrk(cmd[i], " \t\n"))
            ht_die(HT_EINPUT, "emulate: argument '%s' holds white space, which smpirun splits "
                              "into several; expected none (e.g. --set 'cluster.slowdown=[4,1]')",
                   cmd[i]);
    printf("emulate: %d ranks of %s in virtual time (SimGrid SMPI); platform %s, hosts %s\n", n,
           a.cluster, plat, hosts);
    int rc = run(cmd);
    if (rc == 0)
        printf("emulate: done; metrics %s (time_s and every time in it are virtual seconds)\n",
               cfg.log.metrics[0] ? cfg.log.metrics : "(log.metrics not set)");
    else
        fprintf(stderr, "hettrain: error: emulate: smpirun exited with %d\n", rc);
    ht_sim_cluster_free(&c);
    return rc;
}
