/* Tests for src/prof/profile.c: save -> load round trip (MPI links included), malformed
 * profiles (syntax, missing key, wrong type, negative bandwidth, bad links) rejected with
 * HT_EINPUT naming file:line, and
 * ht_profile_speed on a hand-built profile against hand-computed values. */
#include "core/err.h"
#include "prof/profile.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64];
static ht_profile g_a, g_b;

static const char *put(const char *name, const char *text) {
    static char p[128];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        printf("Bail out! cannot write %s\n", p);
        exit(1);
    }
    return p;
}

/* The whole of a small file, or "" when it cannot be read. */
static const char *slurp(const char *path) {
    static char text[16384];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = 0;
    return text;
}

static const char GOOD_DEV[] = "  { name = \"dev\"; platform = \"plat\"; driver = \"1\";\n"
                               "    mem_bw_gbs = 10.0; h2d_gbs = 5.0; d2h_gbs = 4.0;\n"
                               "    launch_us = 8.0; gemm = (); layers = (); samples_per_s = ();\n"
                               "  }\n";

/* Loading `text` fails with HT_EINPUT and a message holding "name:line" and `what`. */
static void bad(const char *name, const char *text, int line, const char *what, const char *desc) {
    const char *path = put(name, text);
    char want[160];
    snprintf(want, sizeof want, "%s:%d:", path, line);
    ht_error_clear();
    int rc = ht_profile_load(path, &g_b);
    const char *m = ht_errmsg();
    if (!tap_ok(rc == HT_EINPUT && strstr(m, want) && strstr(m, what), "%s", desc))
        tap_diag("rc=%d message: %s (wanted '%s' and '%s')", rc, m, want, what);
}

static void fill(ht_profile *p) {
    memset(p, 0, sizeof *p);
    strcpy(p->model, "mlp 8-16-3 relu");
    p->batches[0] = 64, p->batches[1] = 128, p->nbatches = 2;
    p->ndev = 2;
    for (int i = 0; i < 2; i++) {
        ht_prof_dev *d = &p->dev[i];
        snprintf(d->name, sizeof d->name, "device \"%d\"", i);
        strcpy(d->platform, "Portable Computing Language");
        strcpy(d->driver, "3.1");
        strcpy(d->type, i ? "gpu" : "cpu");
        strcpy(d->host, i ? "node1" : "node0");
        d->mem_mb = i ? 24576 : 0; /* recorded for one, not the other */
        d->mem_bw_gbs = 20.5 + i, d->h2d_gbs = 8, d->d2h_gbs = 9.25, d->launch_us = 11.5;
        d->gemm[0] = (ht_prof_gemm){256, 1024, 784, 0, 1, 93.1};
        d->gemm[1] = (ht_prof_gemm){1024, 784, 256, 1, 0, 0.125};
        d->ngemm = 2;
        /* fc1: 1 ms + 2 ms at 64, 1.5 + 3 at 128; relu: 0.5 + 0.5 at 64, 1 + 1 at 128 */
        d->layers[0] = (ht_prof_layer){"fc1", 64, 1.0, 2.0};
        d->layers[1] = (ht_prof_layer){"relu1", 64, 0.5, 0.5};
        d->layers[2] = (ht_prof_layer){"fc1", 128, 1.5, 3.0};
        d->layers[3] = (ht_prof_layer){"relu1", 128, 1.0, 1.0};
        d->nlayers = i ? 0 : 4;
        d->rates[0] = (ht_prof_rate){100, 5000.0};
        d->nrates = 1;
    }
    ht_prof_kparams *k = &p->dev[1].clblast[0];
    strcpy(k->kernel, "Xgemm"), k->n = 2;
    strcpy(k->names[0], "GEMMK"), k->values[0] = 0;
    strcpy(k->names[1], "KWG"), k->values[1] = 16;
    p->dev[1].nclblast = 1;
    strcpy(p->dev[1].tuning, "p.1.tuning.cfg");
    strcpy(p->dev[1].gemm_path, "clblast"), strcpy(p->dev[1].gemm_dropped, "tiled");
    p->dev[1].gemm_ms[HT_GEMM_TILED] = 1081.125, p->dev[1].gemm_ms[HT_GEMM_CLBLAST] = 52.25;
    p->dev[1].gemm_ms[HT_GEMM_CLBLAST_CPU] = 60.5;
    p->links[0] = (ht_prof_link){0, 1, 1.875, 6.25, 4.5};
    p->nlinks = 1;
}

static int same(const ht_profile *a, const ht_profile *b) {
    if (strcmp(a->model, b->model) || a->ndev != b->ndev || a->nbatches != b->nbatches) return 0;
    for (int i = 0; i < a->ndev; i++) {
        const ht_prof_dev *x = &a->dev[i], *y = &b->dev[i];
        if (strcmp(x->name, y->name) || strcmp(x->host, y->host) || x->mem_mb != y->mem_mb ||
            strcmp(x->type, y->type) || x->ngemm != y->ngemm ||
            x->nlayers != y->nlayers || x->nrates != y->nrates || x->nclblast != y->nclblast ||
            strcmp(x->tuning, y->tuning) || strcmp(x->gemm_path, y->gemm_path) ||
            strcmp(x->gemm_dropped, y->gemm_dropped) ||
            memcmp(x->gemm_ms, y->gemm_ms, sizeof x->gemm_ms) || x->mem_bw_gbs != y->mem_bw_gbs ||
            x->launch_us != y->launch_us)
            return 0;
        for (int j = 0; j < x->ngemm; j++)
            if (x->gemm[j].m != y->gemm[j].m || x->gemm[j].tb != y->gemm[j].tb ||
                fabs(x->gemm[j].gflops - y->gemm[j].gflops) > 1e-6 * x->gemm[j].gflops)
                return 0;
        for (int j = 0; j < x->nlayers; j++)
            if (strcmp(x->layers[j].name, y->layers[j].name) ||
                x->layers[j].bwd_ms != y->layers[j].bwd_ms)
                return 0;
        for (int j = 0; j < x->nclblast; j++)
            if (strcmp(x->clblast[j].kernel, y->clblast[j].kernel) ||
                x->clblast[j].values[1] != y->clblast[j].values[1])
                return 0;
    }
    if (a->nlinks != b->nlinks) return 0;
    for (int i = 0; i < a->nlinks; i++)
        if (a->links[i].a != b->links[i].a || a->links[i].b != b->links[i].b ||
            a->links[i].latency_us != b->links[i].latency_us ||
            a->links[i].bandwidth_gbs != b->links[i].bandwidth_gbs ||
            a->links[i].ring_gbs != b->links[i].ring_gbs)
            return 0;
    return 1;
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/ht_prof.XXXXXX");
    if (!mkdtemp(g_dir)) {
        printf("Bail out! mkdtemp\n");
        return 1;
    }
    char path[128], tpath[128];
    snprintf(path, sizeof path, "%s/rt.cfg", g_dir);
    snprintf(tpath, sizeof tpath, "%s/rt.tuning.cfg", g_dir);

    fill(&g_a);
    tap_ok(ht_profile_save(path, &g_a) == HT_OK, "save writes a profile");
    int rc = ht_profile_load(path, &g_b);
    if (!tap_ok(rc == HT_OK, "load reads it back")) tap_diag("%s", ht_errmsg());
    tap_ok(rc == HT_OK && same(&g_a, &g_b), "round trip keeps every field");
    tap_ok(ht_profile_write_tuning(&g_b, 1, tpath) == HT_OK, "a tuned device's clblast group "
                                                             "writes as a tuning file");
    tap_ok(ht_profile_write_tuning(&g_b, 0, tpath) == HT_EINPUT, "an untuned device has none");
    /* a device without a type (optional) saves and reads back (found by fuzz_profile:
     * the writer wrote type = "", which the reader refuses) */
    g_a.dev[0].type[0] = 0;
    rc = ht_profile_save(path, &g_a) == HT_OK ? ht_profile_load(path, &g_b) : HT_ERUNTIME;
    if (!tap_ok(rc == HT_OK && !g_b.dev[0].type[0], "a device without a type round-trips"))
        tap_diag("%s", ht_errmsg());
    /* a link without the ring's step (a profile from before it) writes no ring_gbs key */
    g_a.links[0].ring_gbs = 0;
    rc = ht_profile_save(path, &g_a) == HT_OK ? ht_profile_load(path, &g_b) : HT_ERUNTIME;
    const char *saved = slurp(path);
    tap_ok(rc == HT_OK && strstr(saved, "bandwidth_gbs") && !strstr(saved, "ring_gbs") &&
               g_b.links[0].ring_gbs == 0 && g_b.links[0].bandwidth_gbs == 6.25,
           "a link without ring_gbs round-trips without the key");

    /* malformed profiles: the line is where the problem is */
    bad("syntax.cfg", "version = 1;\ndevices = (\n  { name = ; }\n);\n", 3, "syntax error",
        "syntax error names file:line");
    char text[2048];
    snprintf(text, sizeof text,
             "version = 1;\ndevices = (\n  { name = \"d\"; platform = \"p\";\n"
             "    driver = \"1\"; mem_bw_gbs = 1.0; h2d_gbs = 1.0;\n"
             "    launch_us = 1.0; gemm = (); layers = (); samples_per_s = (); }\n"
             ");\n");
    bad("missing.cfg", text, 3, "devices[0].d2h_gbs: missing required key",
        "missing key names file:line and the key");
    snprintf(text, sizeof text, "version = 1;\ndevices = (\n%s", GOOD_DEV);
    char *p = strstr(text, "h2d_gbs = 5.0");
    memcpy(p, "h2d_gbs = \"5\"", 13);
    strcat(text, ");\n");
    bad("type.cfg", text, 4, "devices[0].h2d_gbs: found a string, expected a number > 0",
        "wrong type names file:line");
    snprintf(text, sizeof text, "version = 1;\ndevices = (\n%s", GOOD_DEV);
    strcpy(strstr(text, "  }\n"), "    gemm_choice = { path = \"blas\"; tiled_ms = 2.0;\n"
                                    "      clblast_ms = 1.0; };\n  }\n);\n");
    bad("gemmpath.cfg", text, 6,
        "devices[0].gemm_choice.path: found \"blas\", expected tiled, native, clblast, clblast-cpu or "
        "clblast-tuned, with its time (> 0)",
        "an unknown GEMM variant names file:line, the value and the variants");
    snprintf(text, sizeof text, "version = 1;\ndevices = (\n%s", GOOD_DEV);
    strcpy(strstr(text, "  }\n"), "    gemm_choice = { path = \"clblast-cpu\"; tiled_ms = 2.0;\n"
                                    "      clblast_ms = 1.0; };\n  }\n);\n");
    bad("gemmtime.cfg", text, 6,
        "devices[0].gemm_choice.path: found \"clblast-cpu\", expected tiled, native, clblast, "
        "clblast-cpu or clblast-tuned, with its time (> 0)",
        "a chosen variant without its time is refused");
    snprintf(text, sizeof text, "version = 1;\ndevices = (\n%s,\n%s);\n", GOOD_DEV, GOOD_DEV);
    p = strstr(strstr(text, "}\n,") + 1, "mem_bw_gbs = 10.0");
    memcpy(p, "mem_bw_gbs = -3.0", 17);
    bad("negative.cfg", text, 9, "devices[1].mem_bw_gbs: found -3, expected a number > 0",
        "negative bandwidth names file:line and the device");
    snprintf(text, sizeof text,
             "version = 1;\ndevices = (\n%s);\n# layer list entry with a wrong key type\n",
             GOOD_DEV);
    p = strstr(text, "layers = ()");
    memcpy(p, "layers = 77", 11);
    bad("list.cfg", text, 5, "devices[0].layers: found an integer, expected a list",
        "a list that is not a list names file:line");
    bad("empty.cfg", "version = 1;\ndevices = ();\n", 2, "devices: empty",
        "a profile without devices is rejected");
    /* links: two devices, one link per pair, a < b, positive figures */
    static const struct {
        const char *link, *what, *desc;
    } bad_links[] = {
        {"{ a = 0; b = 1; latency_us = 2.0; bandwidth_gbs = -1.0; }",
         "links[0].bandwidth_gbs: found -1, expected a number > 0", "a negative link bandwidth"},
        {"{ a = 0; b = 2; latency_us = 2.0; bandwidth_gbs = 1.0; }",
         "links[0].b: found 2, expected an integer in [0, 1]", "a link to a device not profiled"},
        {"{ a = 1; b = 0; latency_us = 2.0; bandwidth_gbs = 1.0; }", "expected a < b",
         "a link with a >= b"},
        {"{ a = 0; b = 1; bandwidth_gbs = 1.0; }", "links[0].latency_us: missing required key",
         "a link without latency"},
        {"{ a = 0; b = 1; latency_us = 2.0; bandwidth_gbs = 1.0; ring_gbs = 0; }",
         "links[0].ring_gbs: found 0, expected a number > 0", "a zero ring rate"},
        {"{ a = 0; b = 1; latency_us = 2.0; bandwidth_gbs = 1.0; },\n"
         "  { a = 0; b = 1; latency_us = 3.0; bandwidth_gbs = 1.0; }",
         "already linked by links[0]", "the same pair twice"},
    };
    for (size_t i = 0; i < sizeof bad_links / sizeof *bad_links; i++) {
        snprintf(text, sizeof text, "version = 1;\ndevices = (\n%s,\n%s);\nlinks = (\n  %s\n);\n",
                 GOOD_DEV, GOOD_DEV, bad_links[i].link);
        int line = 14 + (strstr(bad_links[i].what, "already") ? 1 : 0);
        char desc[96];
        snprintf(desc, sizeof desc, "%s names file:line and the link", bad_links[i].desc);
        bad("links.cfg", text, line, bad_links[i].what, desc);
    }
    snprintf(text, sizeof text, "version = 1;\ndevices = (\n%s);\nlinks = 5;\n", GOOD_DEV);
    bad("links5.cfg", text, 8, "links: found an integer, expected a list",
        "links that are not a list name file:line");
    snprintf(text, sizeof text, "version = 1;\ndevices = (\n%s);\n", GOOD_DEV);
    ht_error_clear();
    rc = ht_profile_load(put("nolinks.cfg", text), &g_b);
    tap_ok(rc == HT_OK && g_b.nlinks == 0, "a profile without links (one host) is valid");

    ht_error_clear();
    snprintf(path, sizeof path, "%s/none.cfg", g_dir);
    tap_ok(ht_profile_load(path, &g_b) == HT_EINPUT && strstr(ht_errmsg(), "none.cfg"),
           "a missing file is bad input naming it");

    /* speed: device 0 has layer times: step 4 ms at 64, 6.5 ms at 128 */
    double s64 = ht_profile_speed(&g_a, 0, 64), s128 = ht_profile_speed(&g_a, 0, 128);
    double s96 = ht_profile_speed(&g_a, 0, 96), s32 = ht_profile_speed(&g_a, 0, 32);
    double s256 = ht_profile_speed(&g_a, 0, 256);
    tap_ok(fabs(s64 - 64 / 4e-3) < 1e-6, "speed at a measured batch: 64 / 4 ms = 16000 (%g)", s64);
    tap_ok(fabs(s128 - 128 / 6.5e-3) < 1e-6, "speed at 128: 128 / 6.5 ms (%g)", s128);
    tap_ok(fabs(s96 - 96 / 5.25e-3) < 1e-6, "between: 96 / 5.25 ms, interpolated (%g)", s96);
    tap_ok(fabs(s32 - 16000) < 1e-6 && fabs(s256 - 128 / 6.5e-3) < 1e-6,
           "outside: proportional from the nearest batch (%g, %g)", s32, s256);
    tap_ok(fabs(ht_profile_speed(&g_a, 1, 50) - 5000) < 1e-6,
           "without layer times: the samples_per_s entries");
    tap_ok(ht_profile_speed(&g_a, 2, 64) == 0 && ht_profile_speed(&g_a, 0, 0) == 0,
           "no such device or batch: 0");

    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", g_dir);
    return tap_done();
}
