/* Cluster descriptions for hetsim (libconfig; format and meaning in conf/README.md): device
 * kinds (a profile entry, a scaled copy of another kind, or peak GFLOP/s + bandwidth),
 * hosts holding devices, intra- and inter-host links. Every error names FILE:LINE, the key
 * and what was expected. */
#include <libconfig.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cfgfile.h"
#include "core/err.h"
#include "sim/sim.h"

#define MAX_RANKS (1 << 20)

/* Every member of g must be one of the comma-separated names in `known`. */
static void only(ht_cfg_reader *r, const config_setting_t *g, const char *where,
                 const char *known) {
    for (int i = 0; g && i < config_setting_length(g); i++) {
        const config_setting_t *e = config_setting_get_elem(g, i);
        const char *n = config_setting_name(e);
        if (!n) continue;
        char pat[128];
        snprintf(pat, sizeof pat, ",%s,", n);
        char all[512];
        snprintf(all, sizeof all, ",%s,", known);
        if (!strstr(all, pat))
            ht_cfg_fail(r, e, "%s%s: unknown key, expected one of %s", where, n, known);
    }
}

/* Optional number key (int or float) in (lo, inf) when strict, else [lo, inf); def if absent. */
static double num(ht_cfg_reader *r, const config_setting_t *g, const char *where, const char *key,
                  double lo, int strict, double def) {
    config_setting_t *s = config_setting_get_member(g, key);
    if (!s) return def;
    int t = config_setting_type(s);
    double v = t == CONFIG_TYPE_FLOAT ? config_setting_get_float(s)
               : t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64
                   ? (double)config_setting_get_int64(s)
                   : NAN;
    /* rates and times far past any device's (1e12), or a positive one below 1e-9, only make
     * step times of 1e300 s or 0 */
    if (isnan(v))
        ht_cfg_fail(r, s, "%s%s: found something else, expected a number %s %g", where, key,
                    strict ? ">" : ">=", lo);
    else if (!(v > lo || (!strict && v == lo)) || !(v <= 1e12) || (v > 0 && v < 1e-9))
        ht_cfg_fail(r, s, "%s%s: found %g, expected a number %s %g and <= 1e12 (0 or at least 1e-9)",
                    where, key, v, strict ? ">" : ">=", lo);
    return v;
}

static const char *str(ht_cfg_reader *r, const config_setting_t *g, const char *where,
                       const char *key) {
    config_setting_t *s = config_setting_get_member(g, key);
    if (!s) return NULL;
    if (config_setting_type(s) != CONFIG_TYPE_STRING) {
        ht_cfg_fail(r, s, "%s%s: expected a string", where, key);
        return NULL;
    }
    return config_setting_get_string(s);
}

static int find_type(const ht_sim_cluster *c, const char *name) {
    for (int i = 0; i < c->ntypes; i++)
        if (!strcmp(c->types[i].name, name)) return i;
    return -1;
}

static void read_type(ht_cfg_reader *r, ht_sim_cluster *c, config_setting_t *e, int i) {
    char where[64];
    snprintf(where, sizeof where, "devices[%d].", i);
    only(r, e, where,
         "name,profile_device,like,scale,gflops,efficiency,mem_bw_gbs,mem_gb,launch_us,h2d_gbs,"
         "d2h_gbs,cores");
    ht_sim_devtype *t = &c->types[i];
    const char *name = str(r, e, where, "name"), *like = str(r, e, where, "like");
    if (r->rc != HT_OK) return;
    if (!name || !*name || strlen(name) >= sizeof t->name) {
        ht_cfg_fail(
            r, e, "%sname: missing or empty or too long, expected a string of 1 to %zu characters",
            where, sizeof t->name - 1);
        return;
    }
    if (find_type(c, name) >= 0) ht_cfg_fail(r, e, "%sname: '%s' defined twice", where, name);
    *t = (ht_sim_devtype){.prof_dev = -1, .scale = 1};
    if (like) { /* a scaled copy: everything of the other kind, then this entry's keys */
        int k = find_type(c, like);
        if (k < 0) {
            ht_cfg_fail(r, config_setting_get_member(e, "like"),
                        "%slike: no device kind '%s' defined before this one", where, like);
            return;
        }
        *t = c->types[k];
    }
    c->ntypes = i + 1;
    ht_strlcpy(t->name, name, sizeof t->name);
    config_setting_t *pd = config_setting_get_member(e, "profile_device");
    if (pd) {
        int ndev = c->prof ? c->prof->ndev : 0;
        int v = config_setting_type(pd) == CONFIG_TYPE_INT ? config_setting_get_int(pd) : -1;
        if (v < 0 || v >= ndev)
            ht_cfg_fail(r, pd,
                        "%sprofile_device: expected an integer in [0, %d) naming a device of the "
                        "profile%s",
                        where, ndev, c->prof ? "" : " (no profile = \"...\" given)");
        t->prof_dev = v;
    }
    /* scale multiplies every rate of the kind (a copy at half speed: 0.5) */
    t->scale *= num(r, e, where, "scale", 0, 1, 1);
    double eff = num(r, e, where, "efficiency", 0, 1, 1);
    if (eff > 1)
        ht_cfg_fail(r, config_setting_get_member(e, "efficiency"),
                    "%sefficiency: found %g, expected a "
                    "number in (0, 1]",
                    where, eff);
    if (config_setting_get_member(e, "gflops"))
        t->gflops = num(r, e, where, "gflops", 0, 1, 0) * eff;
    t->mem_bw_gbs = num(r, e, where, "mem_bw_gbs", 0, 1, t->mem_bw_gbs);
    t->mem_gb = num(r, e, where, "mem_gb", 0, 0, t->mem_gb);
    t->launch_us = num(r, e, where, "launch_us", 0, 0, t->launch_us);
    t->h2d_gbs = num(r, e, where, "h2d_gbs", 0, 0, t->h2d_gbs);
    t->d2h_gbs = num(r, e, where, "d2h_gbs", 0, 0, t->d2h_gbs);
    t->cores = num(r, e, where, "cores", 0, 0, t->cores);
    if (r->rc == HT_OK && t->prof_dev < 0 && !(t->gflops > 0 && t->mem_bw_gbs > 0))
        ht_cfg_fail(r, e,
                    "%.*s: device kind '%s' has no cost model, expected profile_device, like, "
                    "or gflops and mem_bw_gbs",
                    (int)strlen(where) - 1, where, name);
}

static ht_sim_link read_link(ht_cfg_reader *r, config_setting_t *links, const char *key) {
    config_setting_t *g = config_setting_get_member(links, key);
    char where[32];
    snprintf(where, sizeof where, "links.%s.", key);
    if (!g || config_setting_type(g) != CONFIG_TYPE_GROUP) {
        ht_cfg_fail(r, g ? g : links,
                    "links.%s: %s, expected { latency_us = ...; bandwidth_gbs = ...; }", key,
                    g ? "not a group" : "missing");
        return (ht_sim_link){0, 1, 0};
    }
    only(r, g, where, "latency_us,bandwidth_gbs,ring_gbs");
    if (!config_setting_get_member(g, "latency_us") ||
        !config_setting_get_member(g, "bandwidth_gbs"))
        ht_cfg_fail(r, g, "links.%s: expected both latency_us and bandwidth_gbs", key);
    double lat = num(r, g, where, "latency_us", 0, 0, 0),
           bw = num(r, g, where, "bandwidth_gbs", 0, 1, 1),
           ring = num(r, g, where, "ring_gbs", 0, 1, 0);
    return (ht_sim_link){lat * 1e-6, bw * 1e9, ring * 1e9};
}

/* hosts: ( { count = N; devices = ["kind", ...]; }, ... ): ranks host by host. */
static void read_hosts(ht_cfg_reader *r, ht_sim_cluster *c, config_setting_t *hosts) {
    int n = config_setting_length(hosts);
    for (int pass = 0; pass < 2 && r->rc == HT_OK; pass++) {
        int rank = 0, host = 0;
        for (int i = 0; i < n && r->rc == HT_OK; i++) {
            config_setting_t *h = config_setting_get_elem(hosts, i);
            char where[32];
            snprintf(where, sizeof where, "hosts[%d].", i);
            if (config_setting_type(h) != CONFIG_TYPE_GROUP) {
                ht_cfg_fail(r, h, "hosts[%d]: expected a group { count = N; devices = [...]; }", i);
                return;
            }
            only(r, h, where, "count,devices,cores");
            double hc = num(r, h, where, "cores", 0, 1, 0);
            config_setting_t *cnt = config_setting_get_member(h, "count");
            int count = 1;
            if (cnt && (config_setting_type(cnt) != CONFIG_TYPE_INT ||
                        (count = config_setting_get_int(cnt)) < 1 || count > MAX_RANKS))
                ht_cfg_fail(r, cnt, "%scount: expected an integer in [1, %d]", where, MAX_RANKS);
            config_setting_t *dv = config_setting_get_member(h, "devices");
            int nd = dv ? config_setting_length(dv) : 0;
            if (!dv || config_setting_type(dv) != CONFIG_TYPE_ARRAY || nd < 1) {
                ht_cfg_fail(r, dv ? dv : h,
                            "%sdevices: expected an array of device kind names [\"a\", ...]",
                            where);
                return;
            }
            /* cores shared: the host's devices use more cores than it has, every rank on it
             * runs that many times slower (proportional sharing) */
            double used = 0;
            for (int j = 0; j < nd; j++) {
                const char *name = config_setting_get_string(config_setting_get_elem(dv, j));
                int t = name ? find_type(c, name) : -1;
                used += t >= 0 ? c->types[t].cores : 0;
            }
            double share = hc > 0 && used > hc ? used / hc : 1;
            for (int k = 0; k < count && r->rc == HT_OK; k++, host++)
                for (int j = 0; j < nd && r->rc == HT_OK; j++, rank++) {
                    config_setting_t *e = config_setting_get_elem(dv, j);
                    const char *name = config_setting_get_string(e);
                    int t = name ? find_type(c, name) : -1;
                    if (t < 0)
                        ht_cfg_fail(r, e, "%sdevices[%d]: no device kind '%s'", where, j,
                                    name ? name : "(not a string)");
                    if (rank >= MAX_RANKS) ht_cfg_fail(r, h, "more than %d ranks", MAX_RANKS);
                    if (pass == 1 && r->rc == HT_OK) {
                        c->rank_type[rank] = t;
                        c->rank_host[rank] = host;
                        c->slowdown[rank] = share;
                    }
                }
        }
        if (pass == 0 && r->rc == HT_OK) {
            c->nranks = rank;
            c->nhosts = host;
            c->rank_type = ht_xcalloc((size_t)rank, sizeof *c->rank_type);
            c->rank_host = ht_xcalloc((size_t)rank, sizeof *c->rank_host);
            c->slowdown = ht_xcalloc((size_t)rank, sizeof *c->slowdown);
        }
    }
}

static void read_profile(ht_cfg_reader *r, ht_sim_cluster *c, config_setting_t *root) {
    const char *p = str(r, root, "", "profile");
    if (!p || !*p) return;
    char path[2048];
    const char *slash = strrchr(r->path, '/');
    if (p[0] != '/' && slash) /* relative to the description's folder */
        snprintf(path, sizeof path, "%.*s/%s", (int)(slash - r->path), r->path, p);
    else
        snprintf(path, sizeof path, "%s", p);
    c->prof = ht_xcalloc(1, sizeof *c->prof);
    if (ht_profile_load(path, c->prof) != HT_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ht_errmsg());
        ht_cfg_fail(r, config_setting_get_member(root, "profile"), "profile: %s", msg);
    }
}

int ht_sim_cluster_load(const char *path, ht_sim_cluster *c) {
    memset(c, 0, sizeof *c);
    ht_strlcpy(c->source, path, sizeof c->source);
    ht_cfg_reader r = {path, HT_OK};
    config_t cf; /* without blocking, and every number as written (core/cfgfile.h) */
    if ((r.rc = ht_cfg_read_file(&cf, path, "cluster description")) != HT_OK) return r.rc;
    config_setting_t *root = config_root_setting(&cf);
    only(&r, root, "", "profile,devices,hosts,links,host_add_gbs");
    read_profile(&r, c, root);
    config_setting_t *devs = config_setting_get_member(root, "devices");
    int nt = devs ? config_setting_length(devs) : 0;
    if (r.rc == HT_OK && (!devs || config_setting_type(devs) != CONFIG_TYPE_LIST || nt < 1))
        ht_cfg_fail(&r, devs ? devs : root,
                    "devices: %s, expected a list ( { name = \"...\"; ... }, ... )",
                    devs ? "not a non-empty list" : "missing");
    if (r.rc == HT_OK) c->types = ht_xcalloc((size_t)nt, sizeof *c->types);
    for (int i = 0; i < nt && r.rc == HT_OK; i++) {
        config_setting_t *e = config_setting_get_elem(devs, i);
        if (config_setting_type(e) != CONFIG_TYPE_GROUP)
            ht_cfg_fail(&r, e, "devices[%d]: expected a group", i);
        else
            read_type(&r, c, e, i);
    }
    config_setting_t *hosts = config_setting_get_member(root, "hosts");
    if (r.rc == HT_OK && (!hosts || config_setting_type(hosts) != CONFIG_TYPE_LIST ||
                          config_setting_length(hosts) < 1))
        ht_cfg_fail(&r, hosts ? hosts : root,
                    "hosts: %s, expected a list ( { count = N; devices = [...]; }, ... )",
                    hosts ? "not a non-empty list" : "missing");
    if (r.rc == HT_OK) read_hosts(&r, c, hosts);
    config_setting_t *links = config_setting_get_member(root, "links");
    if (r.rc == HT_OK && (!links || config_setting_type(links) != CONFIG_TYPE_GROUP))
        ht_cfg_fail(&r, links ? links : root,
                    "links: %s, expected { intra = {...}; inter = {...}; }",
                    links ? "not a group" : "missing");
    if (r.rc == HT_OK) {
        only(&r, links, "links.", "intra,inter");
        c->intra = read_link(&r, links, "intra");
        c->inter = read_link(&r, links, "inter");
    }
    c->host_add_gbs = num(&r, root, "", "host_add_gbs", 0, 0, 0);
    config_destroy(&cf);
    if (r.rc != HT_OK) ht_sim_cluster_free(c);
    return r.rc;
}

/* The slowest of the profile's links between devices on one host (same = 1) or on two
 * (same = 0): the largest latency, the smallest bandwidth and ring step (0 when a link has
 * none). Returns 0 when there is no such link. */
static int slowest_link(const ht_profile *p, const int *host, int same, ht_sim_link *out) {
    int found = 0;
    for (int i = 0; i < p->nlinks; i++) {
        const ht_prof_link *l = &p->links[i];
        if ((host[l->a] == host[l->b]) != same) continue;
        ht_sim_link e = {l->latency_us * 1e-6, l->bandwidth_gbs * 1e9, l->ring_gbs * 1e9};
        *out = found ? ht_sim_link_slower(*out, e) : e;
        found = 1;
    }
    return found;
}

/* Hosts by the devices' host names, ids in order of appearance; HT_EINPUT when a host's
 * devices are not numbered together. */
static int profile_hosts(const char *path, const ht_profile *p, int *host, int *nhosts) {
    *nhosts = 0;
    for (int d = 1; d < p->ndev; d++)
        if (!p->dev[d].host[0] != !p->dev[0].host[0])
            return ht_error(HT_EINPUT,
                            "%s: device %d has a host name and device %d none, expected every "
                            "device's host or none (one host)",
                            path, p->dev[0].host[0] ? 0 : d, p->dev[0].host[0] ? d : 0);
    for (int d = 0; d < p->ndev; d++) {
        int e = 0;
        while (e < d && strcmp(p->dev[e].host, p->dev[d].host))
            e++;
        if (e < d && host[e] != host[d - 1])
            return ht_error(HT_EINPUT,
                            "%s: devices %d and %d are on host '%s' but device %d between them "
                            "is not, expected each host's devices numbered together (mpirun "
                            "--map-by slot), or a cluster description (hetsim --cluster)",
                            path, e, d, p->dev[d].host, d - 1);
        host[d] = e < d ? host[e] : (*nhosts)++;
    }
    return HT_OK;
}

int ht_sim_cluster_from_profile(const char *path, ht_sim_cluster *c) {
    memset(c, 0, sizeof *c);
    ht_strlcpy(c->source, path, sizeof c->source);
    c->prof = ht_xcalloc(1, sizeof *c->prof);
    int rc = ht_profile_load(path, c->prof);
    int n = c->prof->ndev, *host = ht_xcalloc((size_t)(n > 0 ? n : 1), sizeof *host);
    if (rc == HT_OK) rc = profile_hosts(path, c->prof, host, &c->nhosts);
    int intra = 0, inter = 0;
    if (rc == HT_OK) {
        intra = slowest_link(c->prof, host, 1, &c->intra);
        inter = slowest_link(c->prof, host, 0, &c->inter);
        if (!intra && !inter) /* one device: no link is used */
            c->intra = c->inter = (ht_sim_link){0, INFINITY, 0};
        if (!intra) c->intra = c->inter;
        if (!inter) c->inter = c->intra;
        if (n > 1 && !intra && !inter)
            rc = ht_error(HT_EINPUT,
                          "%s: %d devices but no links between them, expected a profile taken "
                          "under mpirun (its links list), or a cluster description (hetsim "
                          "--cluster)",
                          path, n);
    }
    if (rc != HT_OK) {
        free(host);
        ht_sim_cluster_free(c);
        return rc;
    }
    c->ntypes = c->nranks = n;
    c->types = ht_xcalloc((size_t)n, sizeof *c->types);
    c->rank_type = ht_xcalloc((size_t)n, sizeof *c->rank_type);
    c->rank_host = host;
    c->slowdown = ht_xcalloc((size_t)n, sizeof *c->slowdown);
    for (int d = 0; d < n; d++) {
        const ht_prof_dev *pd = &c->prof->dev[d];
        ht_sim_devtype *t = &c->types[d];
        *t = (ht_sim_devtype){.prof_dev = d, .scale = 1, .mem_gb = pd->mem_mb * 1048576 / 1e9};
        snprintf(t->name, sizeof t->name, "%d: %.50s", d, pd->name);
        /* a CPU device's kernels run on the host cores its rank's all-reduce needs */
        if (!strcmp(pd->type, "cpu")) {
            t->cores = 1;
            if (c->host_add_gbs <= 0) c->host_add_gbs = pd->mem_bw_gbs;
        }
        c->rank_type[d] = d;
        c->slowdown[d] = 1;
    }
    return HT_OK;
}
