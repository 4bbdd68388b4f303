/* tune_sgemm: CLBlast SGEMM tuning alone for one device at an MLP's GEMM shapes (the
 * search itself is src/prof/tune.c, which hetprof --tune-seconds also runs). Writes a
 * device.tuning file.
 * usage: tune_sgemm [--device SEL] [--budget S] [--seed N] [--batch B] [--layers L]
 *                   [--offset F] [--start FILE] [--out FILE] [--timeout S] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "prof/tune.h"

static const char USAGE[] =
    "usage: tune_sgemm [--device INDEX] [--budget S] [--seed N] [--batch B] [--layers L]\n"
    "                  [--offset F] [--start FILE] [--out FILE] [--timeout S]";

/* One MLP training step: per layer forward x W^T (NT), dW = dy^T x (TN), dx = dy W (NN)
 * except for the first layer. */
static int mlp_shapes(const char *layers, int batch, ht_prof_gemm *g, int max) {
    int w[32], nw = 0, n = 0;
    for (const char *p = layers; *p && nw < 32;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 65536 || (*end && *end != ',')) return 0;
        w[nw++] = (int)v;
        p = *end ? end + 1 : end;
    }
    for (int l = 0; l + 1 < nw && n + 3 <= max; l++) {
        int in = w[l], out = w[l + 1];
        g[n++] = (ht_prof_gemm){batch, out, in, 0, 1, 0};
        if (l > 0) g[n++] = (ht_prof_gemm){batch, in, out, 0, 0, 0};
        g[n++] = (ht_prof_gemm){out, in, batch, 1, 0, 0};
    }
    return n;
}

int main(int argc, char **argv) {
    ht_set_progname("tune_sgemm");
    ht_prof_tune_opts o = {.budget = 900, .seed = 1, .offset = 64, .timeout = 120, .log = stderr};
    const char *layers = "784,1024,1024,10", *out = NULL;
    int batch = 256;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) ht_die(HT_EINPUT, "option '%s' needs a value\n%s", a, USAGE);
        i++;
        if (!strcmp(a, "--device"))
            o.device = atoi(v);
        else if (!strcmp(a, "--budget"))
            o.budget = atof(v);
        else if (!strcmp(a, "--seed"))
            o.seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--batch"))
            batch = atoi(v);
        else if (!strcmp(a, "--layers"))
            layers = v;
        else if (!strcmp(a, "--offset"))
            o.offset = (size_t)atol(v);
        else if (!strcmp(a, "--start"))
            o.start = v;
        else if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--timeout"))
            o.timeout = atof(v);
        else
            ht_die(HT_EINPUT, "unknown option '%s'\n%s", a, USAGE);
    }
    ht_prof_gemm shapes[HT_PROF_MAX_GEMM];
    if (batch < 1 || !(o.nshapes = mlp_shapes(layers, batch, shapes, HT_PROF_MAX_GEMM)))
        ht_die(HT_EINPUT, "--batch must be >= 1 and --layers like 784,1024,1024,10");
    o.shapes = shapes;
    ht_prof_tune_result r;
    ht_exit_on_error(ht_prof_tune(&o, &r));
    printf("device %s: one step's GEMMs %.2f ms (start set %.2f ms), %d measurements\n", r.device,
           r.result_ms, r.start_ms, r.evals);
    static ht_profile p;
    p.ndev = 1;
    memcpy(p.dev[0].clblast, r.k, sizeof r.k);
    p.dev[0].nclblast = r.nk;
    ht_strlcpy(p.dev[0].name, r.device, sizeof p.dev[0].name);
    if (out) {
        ht_exit_on_error(ht_profile_write_tuning(&p, 0, out));
        printf("written to %s\n", out);
    }
    return 0;
}
