/* Profile files: libconfig <-> ht_profile with every value checked (errors name the file,
 * line and key path, e.g. "p.cfg:7: devices[0].mem_bw_gbs: found -3, expected a number
 * > 0"), and the per-device speed model the partitioner reads. */
#include "prof/profile.h"

#include "core/cfgfile.h"

#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/path.h"

/* ---------------------------------------------------------------- reading */

static const char *type_name(const config_setting_t *s) {
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64:
        return "an integer";
    case CONFIG_TYPE_FLOAT:
        return "a float";
    case CONFIG_TYPE_STRING:
        return "a string";
    case CONFIG_TYPE_BOOL:
        return "a boolean";
    case CONFIG_TYPE_ARRAY:
        return "an array";
    case CONFIG_TYPE_LIST:
        return "a list";
    case CONFIG_TYPE_GROUP:
        return "a group";
    default:
        return "something else";
    }
}

/* Member `key` of group g; missing: an error at g unless optional. */
static config_setting_t *member(ht_cfg_reader *r, const config_setting_t *g, const char *where,
                                const char *key, const char *expected, int optional) {
    config_setting_t *s = config_setting_get_member(g, key);
    if (!s && !optional)
        ht_cfg_fail(r, g, "%s%s%s: missing required key, expected %s", where, *where ? "." : "",
                    key, expected);
    return s;
}

/* A number (integer or float) >= lo, or > lo when strict. */
static double get_num(ht_cfg_reader *r, const config_setting_t *g, const char *where,
                      const char *key, double lo, int strict) {
    const char *exp = strict ? "a number > 0" : "a number >= 0";
    config_setting_t *s = member(r, g, where, key, exp, 0);
    if (!s) return 0;
    int t = config_setting_type(s);
    double v;
    if (t == CONFIG_TYPE_FLOAT)
        v = config_setting_get_float(s);
    else if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64)
        v = (double)config_setting_get_int64(s);
    else {
        ht_cfg_fail(r, s, "%s.%s: found %s, expected %s", where, key, type_name(s), exp);
        return 0;
    }
    if (!isfinite(v))
        ht_cfg_fail(r, s, "%s.%s: found %g, expected a finite number", where, key, v);
    else if (!(v > lo || (!strict && v == lo)) || v > 1e12 || (v > 0 && v < 1e-9))
        ht_cfg_fail(r, s, "%s.%s: found %g, expected %s and <= 1e12 (0 or at least 1e-9)", where,
                    key, v, exp); /* beyond: step times of 1e300 s or 0 */
    return v;
}

static int get_int(ht_cfg_reader *r, const config_setting_t *g, const char *where, const char *key,
                   int lo, int hi) {
    char exp[64];
    snprintf(exp, sizeof exp, "an integer in [%d, %d]", lo, hi);
    config_setting_t *s = member(r, g, where, key, exp, 0);
    if (!s) return lo;
    if (config_setting_type(s) != CONFIG_TYPE_INT && config_setting_type(s) != CONFIG_TYPE_INT64) {
        ht_cfg_fail(r, s, "%s.%s: found %s, expected %s", where, key, type_name(s), exp);
        return lo;
    }
    long long v = config_setting_get_int64(s); /* as written: ht_cfg_read_file checked it */
    if (v < lo || v > hi)
        ht_cfg_fail(r, s, "%s.%s: found %lld, expected %s", where, key, v, exp);
    return (int)v;
}

static void get_str(ht_cfg_reader *r, const config_setting_t *g, const char *where, const char *key,
                    char *dst, size_t n, int optional) {
    config_setting_t *s = member(r, g, where, key, "a string", optional);
    if (!s) return;
    if (config_setting_type(s) != CONFIG_TYPE_STRING) {
        ht_cfg_fail(r, s, "%s.%s: found %s, expected a string", where, key, type_name(s));
        return;
    }
    const char *v = config_setting_get_string(s);
    if (strlen(v) >= n) ht_cfg_fail(r, s, "%s.%s: longer than %zu characters", where, key, n - 1);
    ht_strlcpy(dst, v, n);
}

/* A list (or an empty array: libconfig writes "()" and "[]" alike for nothing) of at most
 * max groups; returns its length. */
static int get_list(ht_cfg_reader *r, const config_setting_t *g, const char *where, const char *key,
                    int max, config_setting_t **out) {
    *out = member(r, g, where, key, "a list ( { ... }, ... )", 0);
    if (!*out) return 0;
    int t = config_setting_type(*out), n = config_setting_length(*out);
    if (t != CONFIG_TYPE_LIST && !(t == CONFIG_TYPE_ARRAY && n == 0)) {
        ht_cfg_fail(r, *out, "%s%s%s: found %s, expected a list ( { ... }, ... )", where,
                    *where ? "." : "", key, type_name(*out));
        return 0;
    }
    if (n > max) {
        ht_cfg_fail(r, *out, "%s%s%s: %d entries, at most %d supported", where, *where ? "." : "",
                    key, n, max);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        config_setting_t *e = config_setting_get_elem(*out, i);
        if (!config_setting_is_group(e)) {
            ht_cfg_fail(r, e, "%s%s%s[%d]: found %s, expected a group { ... }", where,
                        *where ? "." : "", key, i, type_name(e));
            return 0;
        }
    }
    return n;
}

/* Every member of group g must be one of keys (NULL-terminated): a typo is an error, never
 * a value silently ignored. */
static void known_keys(ht_cfg_reader *r, const config_setting_t *g, const char *where,
                       const char *const *keys) {
    for (int i = 0; r->rc == HT_OK && i < config_setting_length(g); i++) {
        const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
        const char *name = config_setting_name(s);
        int k = 0;
        while (keys[k] && strcmp(keys[k], name))
            k++;
        if (keys[k]) continue;
        char list[512] = "";
        for (k = 0; keys[k]; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "",
                     keys[k]);
        ht_cfg_fail(r, s, "%s%s%s: unknown key, expected one of: %s", where, *where ? "." : "",
                    name, list);
    }
}

static void read_clblast(ht_cfg_reader *r, const config_setting_t *g, const char *where,
                         ht_prof_dev *d) {
    int n = config_setting_length(g);
    if (!config_setting_is_group(g) || n > HT_PROF_MAX_KERNELS) {
        ht_cfg_fail(r, g, "%s.clblast: expected a group of at most %d kernel groups", where,
                    HT_PROF_MAX_KERNELS);
        return;
    }
    for (int i = 0; i < n && r->rc == HT_OK; i++) {
        config_setting_t *k = config_setting_get_elem(g, i);
        ht_prof_kparams *kp = &d->clblast[d->nclblast++];
        memset(kp, 0, sizeof *kp);
        if (strlen(config_setting_name(k)) >= sizeof kp->kernel) {
            ht_cfg_fail(r, k, "%s.clblast.%s: kernel name of %zu characters, expected at most %zu",
                        where, config_setting_name(k), strlen(config_setting_name(k)),
                        sizeof kp->kernel - 1);
            return;
        }
        ht_strlcpy(kp->kernel, config_setting_name(k), sizeof kp->kernel);
        int np = config_setting_length(k);
        if (!config_setting_is_group(k) || np > HT_PROF_MAX_PARAMS) {
            ht_cfg_fail(r, k, "%s.clblast.%s: expected a group of at most %d integer parameters",
                        where, kp->kernel, HT_PROF_MAX_PARAMS);
            return;
        }
        for (int j = 0; j < np; j++) {
            config_setting_t *p = config_setting_get_elem(k, j);
            if (config_setting_type(p) != CONFIG_TYPE_INT || config_setting_get_int(p) < 0) {
                ht_cfg_fail(r, p, "%s.clblast.%s.%s: expected a non-negative integer", where,
                            kp->kernel, config_setting_name(p));
                return;
            }
            if (strlen(config_setting_name(p)) >= sizeof kp->names[j]) {
                ht_cfg_fail(r, p, "%s.clblast.%s.%s: parameter name longer than %zu characters",
                            where, kp->kernel, config_setting_name(p), sizeof kp->names[j] - 1);
                return;
            }
            ht_strlcpy(kp->names[j], config_setting_name(p), sizeof kp->names[j]);
            kp->values[j] = config_setting_get_int(p);
        }
        kp->n = np;
    }
}

static const char *const DEV_KEYS[] = {
    "name",      "platform", "driver", "type",          "mem_bw_gbs",  "h2d_gbs", "d2h_gbs",
    "launch_us", "gemm",     "layers", "samples_per_s", "gemm_choice", "tuning",  "clblast",
    "host",      "mem_mb", NULL};
static const char *const GEMM_KEYS[] = {"m", "n", "k", "ta", "tb", "gflops", NULL};
static const char *const LAYER_KEYS[] = {"name", "batch", "fwd_ms", "bwd_ms", NULL};
static const char *const RATE_KEYS[] = {"batch", "value", NULL};
static const char *const LINK_KEYS[] = {"a", "b", "latency_us", "bandwidth_gbs", "ring_gbs",
                                        NULL};
static const char *const ROOT_KEYS[] = {"version", "model", "batches", "devices", "links", NULL};
static const char *const DEV_TYPES[] = {"cpu", "gpu", "accel", "other", NULL};

/* "tiled_ms" for "tiled", "clblast_cpu_ms" for "clblast-cpu": the key of variant v's time. */
static void choice_key(int v, char *key, size_t n) {
    snprintf(key, n, "%s_ms", ht_gemm_name(v));
    for (char *c = key; *c; c++)
        if (*c == '-') *c = '_';
}

/* gemm_choice = { path = "tiled"; tiled_ms = 4.1; clblast_ms = 9.3; ...; dropped = ""; } */
static void read_choice(ht_cfg_reader *r, config_setting_t *gc, const char *w, ht_prof_dev *d) {
    char e[96], keys[HT_GEMM_NVARIANTS][32];
    const char *known[HT_GEMM_NVARIANTS + 2] = {"path", "dropped"};
    for (int v = HT_GEMM_TILED; v < HT_GEMM_NVARIANTS; v++)
        choice_key(v, keys[v], sizeof keys[v]), known[v + 1] = keys[v];
    snprintf(e, sizeof e, "%s.gemm_choice", w);
    if (!config_setting_is_group(gc)) {
        ht_cfg_fail(r, gc, "%s: expected a group { path; tiled_ms; clblast_ms; ...; dropped; }",
                    e);
        return;
    }
    known_keys(r, gc, e, known);
    get_str(r, gc, e, "path", d->gemm_path, sizeof d->gemm_path, 0);
    for (int v = HT_GEMM_TILED; v < HT_GEMM_NVARIANTS; v++)
        d->gemm_ms[v] = config_setting_get_member(gc, keys[v]) ? get_num(r, gc, e, keys[v], 0, 0)
                                                              : 0;
    get_str(r, gc, e, "dropped", d->gemm_dropped, sizeof d->gemm_dropped, 1);
    int v = HT_GEMM_TILED;
    while (v < HT_GEMM_NVARIANTS && strcmp(d->gemm_path, ht_gemm_name(v)))
        v++;
    if (r->rc == HT_OK && (v == HT_GEMM_NVARIANTS || !(d->gemm_ms[v] > 0)))
        ht_cfg_fail(r, gc,
                    "%s.path: found \"%s\", expected tiled, native, clblast, clblast-cpu or "
                    "clblast-tuned, with its time (> 0)",
                    e, d->gemm_path);
}

static void read_dev(ht_cfg_reader *r, const config_setting_t *g, int idx, ht_prof_dev *d) {
    char w[64], e[96];
    snprintf(w, sizeof w, "devices[%d]", idx);
    memset(d, 0, sizeof *d);
    known_keys(r, g, w, DEV_KEYS);
    get_str(r, g, w, "name", d->name, sizeof d->name, 0);
    get_str(r, g, w, "platform", d->platform, sizeof d->platform, 0);
    get_str(r, g, w, "driver", d->driver, sizeof d->driver, 0);
    get_str(r, g, w, "type", d->type, sizeof d->type, 1);
    get_str(r, g, w, "host", d->host, sizeof d->host, 1);
    if (config_setting_get_member(g, "mem_mb")) d->mem_mb = get_num(r, g, w, "mem_mb", 0, 1);
    if (r->rc == HT_OK && config_setting_get_member(g, "type")) {
        int k = 0;
        while (DEV_TYPES[k] && strcmp(DEV_TYPES[k], d->type))
            k++;
        if (!DEV_TYPES[k])
            ht_cfg_fail(r, config_setting_get_member(g, "type"),
                        "%s.type: found \"%s\", expected \"cpu\", \"gpu\", \"accel\" or \"other\"",
                        w, d->type);
    }
    d->mem_bw_gbs = get_num(r, g, w, "mem_bw_gbs", 0, 1);
    d->h2d_gbs = get_num(r, g, w, "h2d_gbs", 0, 1);
    d->d2h_gbs = get_num(r, g, w, "d2h_gbs", 0, 1);
    d->launch_us = get_num(r, g, w, "launch_us", 0, 1);
    config_setting_t *l;
    d->ngemm = get_list(r, g, w, "gemm", HT_PROF_MAX_GEMM, &l);
    for (int i = 0; i < d->ngemm && r->rc == HT_OK; i++) {
        config_setting_t *x = config_setting_get_elem(l, i);
        ht_prof_gemm *q = &d->gemm[i];
        snprintf(e, sizeof e, "%s.gemm[%d]", w, i);
        known_keys(r, x, e, GEMM_KEYS);
        q->m = get_int(r, x, e, "m", 1, 1 << 30);
        q->n = get_int(r, x, e, "n", 1, 1 << 30);
        q->k = get_int(r, x, e, "k", 1, 1 << 30);
        q->ta = get_int(r, x, e, "ta", 0, 1);
        q->tb = get_int(r, x, e, "tb", 0, 1);
        q->gflops = get_num(r, x, e, "gflops", 0, 1);
    }
    d->nlayers = get_list(r, g, w, "layers", HT_PROF_MAX_LAYERS, &l);
    for (int i = 0; i < d->nlayers && r->rc == HT_OK; i++) {
        config_setting_t *x = config_setting_get_elem(l, i);
        ht_prof_layer *q = &d->layers[i];
        snprintf(e, sizeof e, "%s.layers[%d]", w, i);
        known_keys(r, x, e, LAYER_KEYS);
        get_str(r, x, e, "name", q->name, sizeof q->name, 0);
        q->batch = get_int(r, x, e, "batch", 1, 1 << 24);
        q->fwd_ms = get_num(r, x, e, "fwd_ms", 0, 0);
        q->bwd_ms = get_num(r, x, e, "bwd_ms", 0, 0);
    }
    d->nrates = get_list(r, g, w, "samples_per_s", HT_PROF_MAX_BATCHES, &l);
    for (int i = 0; i < d->nrates && r->rc == HT_OK; i++) {
        config_setting_t *x = config_setting_get_elem(l, i);
        snprintf(e, sizeof e, "%s.samples_per_s[%d]", w, i);
        known_keys(r, x, e, RATE_KEYS);
        d->rates[i].batch = get_int(r, x, e, "batch", 1, 1 << 24);
        d->rates[i].value = get_num(r, x, e, "value", 0, 1);
    }
    config_setting_t *gc = config_setting_get_member(g, "gemm_choice");
    if (gc && r->rc == HT_OK) read_choice(r, gc, w, d);
    get_str(r, g, w, "tuning", d->tuning, sizeof d->tuning, 1);
    config_setting_t *c = config_setting_get_member(g, "clblast");
    if (c && r->rc == HT_OK) read_clblast(r, c, w, d);
}

static void read_links(ht_cfg_reader *r, const config_setting_t *root, ht_profile *p) {
    config_setting_t *l;
    p->nlinks = get_list(r, root, "", "links", HT_PROF_MAX_LINKS, &l);
    for (int i = 0; i < p->nlinks && r->rc == HT_OK; i++) {
        config_setting_t *x = config_setting_get_elem(l, i);
        ht_prof_link *q = &p->links[i];
        char e[32];
        snprintf(e, sizeof e, "links[%d]", i);
        known_keys(r, x, e, LINK_KEYS);
        q->a = get_int(r, x, e, "a", 0, p->ndev - 1);
        q->b = get_int(r, x, e, "b", 0, p->ndev - 1);
        q->latency_us = get_num(r, x, e, "latency_us", 0, 1);
        q->bandwidth_gbs = get_num(r, x, e, "bandwidth_gbs", 0, 1);
        if (config_setting_get_member(x, "ring_gbs")) /* optional: profiles before it */
            q->ring_gbs = get_num(r, x, e, "ring_gbs", 0, 1);
        if (r->rc != HT_OK) return;
        if (q->a >= q->b)
            ht_cfg_fail(r, x, "%s: a = %d, b = %d, expected a < b (devices of the profile)", e,
                        q->a, q->b);
        for (int j = 0; j < i && r->rc == HT_OK; j++)
            if (p->links[j].a == q->a && p->links[j].b == q->b)
                ht_cfg_fail(r, x, "%s: devices %d and %d already linked by links[%d]", e, q->a,
                            q->b, j);
    }
}

int ht_profile_load(const char *path, ht_profile *p) {
    config_t cf;
    memset(p, 0, sizeof *p);
    ht_cfg_reader r = {path, HT_OK};
    /* without blocking, and only a regular file (a folder used to read as "Success") */
    if ((r.rc = ht_cfg_read_file(&cf, path, "profile")) != HT_OK) return r.rc;
    config_setting_t *root = config_root_setting(&cf), *s;
    known_keys(&r, root, "", ROOT_KEYS);
    int version = get_int(&r, root, "", "version", 1, 1);
    (void)version;
    get_str(&r, root, "", "model", p->model, sizeof p->model, 1);
    if ((s = config_setting_get_member(root, "batches"))) {
        int n = config_setting_length(s);
        if (config_setting_type(s) != CONFIG_TYPE_ARRAY || n > HT_PROF_MAX_BATCHES)
            ht_cfg_fail(&r, s, "batches: found %s, expected an array of at most %d integers",
                        type_name(s), HT_PROF_MAX_BATCHES);
        for (int i = 0; i < n && r.rc == HT_OK; i++) {
            config_setting_t *e = config_setting_get_elem(s, i);
            if (config_setting_type(e) != CONFIG_TYPE_INT || config_setting_get_int(e) < 1)
                ht_cfg_fail(&r, e, "batches[%d]: expected an integer >= 1", i);
            for (int j = 0; r.rc == HT_OK && j < i; j++)
                if (p->batches[j] == config_setting_get_int(e))
                    ht_cfg_fail(&r, e,
                                "batches[%d]: found %d again (batches[%d]), expected each batch "
                                "size once",
                                i, p->batches[j], j);
            p->batches[p->nbatches++] = config_setting_get_int(e);
        }
    }
    config_setting_t *devs;
    p->ndev = get_list(&r, root, "", "devices", HT_PROF_MAX_DEVS, &devs);
    if (r.rc == HT_OK && p->ndev == 0)
        ht_cfg_fail(&r, devs, "devices: empty, expected at least one device");
    for (int i = 0; i < p->ndev && r.rc == HT_OK; i++)
        read_dev(&r, config_setting_get_elem(devs, i), i, &p->dev[i]);
    if (r.rc == HT_OK && config_setting_get_member(root, "links")) read_links(&r, root, p);
    config_destroy(&cf);
    return r.rc;
}

/* ---------------------------------------------------------------- writing */

/* A libconfig string literal: quotes and backslashes escaped, control characters dropped. */
static void put_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
    fputc('"', f);
}

/* A float libconfig reads back as a float (never as an integer: "93" -> "93.0"). */
static void put_num(FILE *f, double v) {
    char b[64];
    snprintf(b, sizeof b, "%.9g", v);
    fputs(b, f);
    if (!strpbrk(b, ".eEn")) fputs(".0", f);
}

static void put_clblast(FILE *f, const ht_prof_kparams *k, int nk, const char *indent) {
    fprintf(f, "%sclblast = {\n", indent);
    for (int i = 0; i < nk; i++) {
        fprintf(f, "%s    %s = {", indent, k[i].kernel);
        for (int j = 0; j < k[i].n; j++)
            fprintf(f, " %s = %ld;", k[i].names[j], k[i].values[j]);
        fprintf(f, " };\n");
    }
    fprintf(f, "%s};\n", indent);
}

void ht_profile_write(FILE *f, const ht_profile *p) {
    fprintf(f, "# hettrain device profile (hetprof); format: src/prof/profile.h\nversion = 1;\n");
    fprintf(f, "model = "), put_str(f, p->model), fprintf(f, ";\nbatches = [");
    for (int i = 0; i < p->nbatches; i++)
        fprintf(f, "%s%d", i ? ", " : "", p->batches[i]);
    fprintf(f, "];\ndevices = (\n");
    for (int i = 0; i < p->ndev; i++) {
        const ht_prof_dev *d = &p->dev[i];
        fprintf(f, "  {\n    name = "), put_str(f, d->name);
        fprintf(f, ";\n    platform = "), put_str(f, d->platform);
        fprintf(f, ";\n    driver = "), put_str(f, d->driver);
        if (d->type[0]) /* optional on load: a profile without it must read back */
            fprintf(f, ";\n    type = "), put_str(f, d->type);
        if (d->host[0]) fprintf(f, ";\n    host = "), put_str(f, d->host);
        if (d->mem_mb > 0) fprintf(f, ";\n    mem_mb = "), put_num(f, d->mem_mb);
        fprintf(f, ";\n    mem_bw_gbs = "), put_num(f, d->mem_bw_gbs);
        fprintf(f, ";\n    h2d_gbs = "), put_num(f, d->h2d_gbs);
        fprintf(f, ";\n    d2h_gbs = "), put_num(f, d->d2h_gbs);
        fprintf(f, ";\n    launch_us = "), put_num(f, d->launch_us);
        fprintf(f, ";\n    gemm = (");
        for (int j = 0; j < d->ngemm; j++) {
            const ht_prof_gemm *g = &d->gemm[j];
            fprintf(f,
                    "%s\n      { m = %d; n = %d; k = %d; ta = %d; tb = %d; gflops = ", j ? "," : "",
                    g->m, g->n, g->k, g->ta, g->tb);
            put_num(f, g->gflops), fprintf(f, "; }");
        }
        fprintf(f, " );\n    layers = (");
        for (int j = 0; j < d->nlayers; j++) {
            const ht_prof_layer *l = &d->layers[j];
            fprintf(f, "%s\n      { name = ", j ? "," : ""), put_str(f, l->name);
            fprintf(f, "; batch = %d; fwd_ms = ", l->batch), put_num(f, l->fwd_ms);
            fprintf(f, "; bwd_ms = "), put_num(f, l->bwd_ms), fprintf(f, "; }");
        }
        fprintf(f, " );\n    samples_per_s = (");
        for (int j = 0; j < d->nrates; j++) {
            fprintf(f, "%s\n      { batch = %d; value = ", j ? "," : "", d->rates[j].batch);
            put_num(f, d->rates[j].value), fprintf(f, "; }");
        }
        fprintf(f, " );\n");
        if (d->gemm_path[0]) {
            fprintf(f, "    gemm_choice = { path = "), put_str(f, d->gemm_path);
            for (int v = HT_GEMM_TILED; v < HT_GEMM_NVARIANTS; v++) {
                char key[32];
                choice_key(v, key, sizeof key);
                if (d->gemm_ms[v] > 0) fprintf(f, "; %s = ", key), put_num(f, d->gemm_ms[v]);
            }
            fprintf(f, "; dropped = "), put_str(f, d->gemm_dropped), fprintf(f, "; };\n");
        }
        if (d->tuning[0]) fprintf(f, "    tuning = "), put_str(f, d->tuning), fprintf(f, ";\n");
        if (d->nclblast) put_clblast(f, d->clblast, d->nclblast, "    ");
        fprintf(f, "  }%s\n", i + 1 < p->ndev ? "," : "");
    }
    fprintf(f, ");\n");
    if (!p->nlinks) return;
    fprintf(f, "links = (");
    for (int i = 0; i < p->nlinks; i++) {
        const ht_prof_link *l = &p->links[i];
        fprintf(f, "%s\n  { a = %d; b = %d; latency_us = ", i ? "," : "", l->a, l->b);
        put_num(f, l->latency_us), fprintf(f, "; bandwidth_gbs = ");
        put_num(f, l->bandwidth_gbs), fprintf(f, ";");
        if (l->ring_gbs > 0) fprintf(f, " ring_gbs = "), put_num(f, l->ring_gbs), fprintf(f, ";");
        fprintf(f, " }");
    }
    fprintf(f, " );\n");
}

int ht_profile_save(const char *path, const ht_profile *p) {
    if (ht_check_replaceable(path, "profile") != HT_OK) return HT_EINPUT;
    FILE *f = fopen(path, "w");
    if (!f) return ht_error(HT_ERUNTIME, "cannot write profile '%s': %s", path, strerror(errno));
    ht_profile_write(f, p);
    if (ferror(f) | (fclose(f) != 0))
        return ht_error(HT_ERUNTIME, "cannot write profile '%s': %s", path, strerror(errno));
    return HT_OK;
}

int ht_profile_write_tuning(const ht_profile *p, int dev, const char *path) {
    if (dev < 0 || dev >= p->ndev || !p->dev[dev].nclblast)
        return ht_error(HT_EINPUT, "profile device %d has no CLBlast parameters", dev);
    if (ht_check_replaceable(path, "tuning file") != HT_OK) return HT_EINPUT;
    FILE *f = fopen(path, "w");
    if (!f) return ht_error(HT_ERUNTIME, "cannot write '%s': %s", path, strerror(errno));
    fprintf(f, "# CLBlast parameters for '%s' (%s), from hetprof; use as device.tuning\n",
            p->dev[dev].name, p->dev[dev].platform);
    put_clblast(f, p->dev[dev].clblast, p->dev[dev].nclblast, "");
    if (ferror(f) | (fclose(f) != 0))
        return ht_error(HT_ERUNTIME, "cannot write '%s': %s", path, strerror(errno));
    return HT_OK;
}

/* ---------------------------------------------------------------- speed model */

/* Time at batch b from points (bs[i], ts[i]), i < n, sorted by batch: linear between the
 * two around b, proportional to b from the nearest one outside. */
static double time_at(const int *bs, const double *ts, int n, int b) {
    if (b <= bs[0]) return ts[0] * b / bs[0];
    for (int i = 1; i < n; i++)
        if (b <= bs[i])
            return ts[i - 1] + (ts[i] - ts[i - 1]) * (b - bs[i - 1]) / (double)(bs[i] - bs[i - 1]);
    return ts[n - 1] * b / bs[n - 1];
}

/* Adds (b, t) to the sorted point set, summing t into an existing batch. */
static void add_point(int *bs, double *ts, int *n, int b, double t) {
    int i = 0;
    while (i < *n && bs[i] < b)
        i++;
    if (i < *n && bs[i] == b) {
        ts[i] += t;
        return;
    }
    if (*n == HT_PROF_MAX_BATCHES) return;
    memmove(bs + i + 1, bs + i, (size_t)(*n - i) * sizeof *bs);
    memmove(ts + i + 1, ts + i, (size_t)(*n - i) * sizeof *ts);
    bs[i] = b, ts[i] = t, (*n)++;
}

double ht_profile_speed(const ht_profile *p, int dev, int batch) {
    if (!p || dev < 0 || dev >= p->ndev || batch < 1) return 0;
    const ht_prof_dev *d = &p->dev[dev];
    int bs[HT_PROF_MAX_BATCHES], n = 0;
    double ts[HT_PROF_MAX_BATCHES];
    /* the model's step time per batch size is the sum of its layers' times: interpolating
     * the sums is the same as summing the interpolated layer times */
    for (int i = 0; i < d->nlayers; i++)
        add_point(bs, ts, &n, d->layers[i].batch,
                  (d->layers[i].fwd_ms + d->layers[i].bwd_ms) * 1e-3);
    if (n == 0)
        for (int i = 0; i < d->nrates; i++)
            add_point(bs, ts, &n, d->rates[i].batch, d->rates[i].batch / d->rates[i].value);
    if (n == 0) return 0;
    double t = time_at(bs, ts, n, batch);
    return t > 0 ? batch / t : 0;
}

/* ---------------------------------------------------------------- table */

void ht_profile_print(FILE *f, const ht_profile *p) {
    for (int i = 0; i < p->ndev; i++) {
        const ht_prof_dev *d = &p->dev[i];
        fprintf(f, "device %d: %s (%s, driver %s)%s\n", i, d->name, d->platform, d->driver,
                d->nclblast ? ", CLBlast tuned" : "");
        fprintf(f,
                "  memory %.2f GB/s   host->device %.2f GB/s   device->host %.2f GB/s   "
                "launch %.1f us\n",
                d->mem_bw_gbs, d->h2d_gbs, d->d2h_gbs, d->launch_us);
        if (d->gemm_path[0]) {
            fprintf(f, "  SGEMM %s by measurement:", d->gemm_path);
            for (int v = HT_GEMM_TILED; v < HT_GEMM_NVARIANTS; v++)
                if (d->gemm_ms[v] > 0)
                    fprintf(f, " %s %.3g ms%s", ht_gemm_name(v), d->gemm_ms[v],
                            strstr(d->gemm_dropped, ht_gemm_name(v)) ? " (small shapes, dropped)"
                                                                      : "");
            fprintf(f, "\n");
        }
        if (d->ngemm) fprintf(f, "  %-4s %7s %7s %7s %9s\n", "op", "M", "N", "K", "GFLOP/s");
        for (int j = 0; j < d->ngemm; j++) {
            const ht_prof_gemm *g = &d->gemm[j];
            fprintf(f, "  %c%c   %7d %7d %7d %9.2f\n", g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', g->m,
                    g->n, g->k, g->gflops);
        }
        if (d->nlayers) fprintf(f, "  %-16s %6s %10s %10s\n", "layer", "batch", "fwd ms", "bwd ms");
        for (int j = 0; j < d->nlayers; j++) {
            const ht_prof_layer *l = &d->layers[j];
            fprintf(f, "  %-16s %6d %10.4f %10.4f\n", l->name, l->batch, l->fwd_ms, l->bwd_ms);
        }
        for (int j = 0; j < d->nrates; j++)
            fprintf(f, "  batch %-6d %12.1f samples/s\n", d->rates[j].batch, d->rates[j].value);
    }
    if (p->nlinks)
        fprintf(f, "links (MPI):\n  %4s %4s %12s %14s %14s\n", "a", "b", "latency us",
                "bandwidth GB/s", "ring GB/s");
    for (int i = 0; i < p->nlinks; i++) {
        char ring[32] = "-"; /* a profile from before the ring was measured */
        if (p->links[i].ring_gbs > 0) snprintf(ring, sizeof ring, "%.3f", p->links[i].ring_gbs);
        fprintf(f, "  %4d %4d %12.2f %14.3f %14s\n", p->links[i].a, p->links[i].b,
                p->links[i].latency_us, p->links[i].bandwidth_gbs, ring);
    }
}

int ht_profile_check_file(const char *path) {
    ht_profile *p = ht_xmalloc(sizeof *p);
    int rc = ht_profile_load(path, p);
    free(p);
    return rc;
}
