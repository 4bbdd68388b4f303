/* Loading a configuration: defaults from the schema, then the libconfig file, then the
 * --set overrides, each value checked against its schema row (type, range, choices,
 * length), then the checks that span keys. Errors name file:line (or the override). */
#include "config/config.h"

#include "config/schema.h"
#include "core/err.h"
#include "core/intlit.h"
#include "core/path.h"

#include <errno.h>
#include <float.h>
#include <libconfig.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_KEYS 128

/* Where a value came from: a file line, a --set override, or the schema default. */
typedef struct {
    const char *file; /* as libconfig names it (an @include'd file is relative to dir) */
    int line;
    const char *set; /* the whole "a.b=value" text */
    int opened;      /* file is the path as opened (a literal's, core/intlit.h) */
} origin;

typedef struct {
    ht_config *cfg;
    const char *path;       /* the main file, NULL when none */
    char dir[HT_PATH_MAX];  /* its folder ("" = the working directory) */
    int given[MAX_KEYS];    /* set by the file or an override, not by the default */
    origin where[MAX_KEYS]; /* the last place each key was set */
    ht_numlits lits;        /* the file's numbers as written, bound to its settings */
} loader;

/* ------------------------------------------------------------------------------------ */
/* Error messages                                                                       */

/* The file as the user can find it: libconfig names included files as written. */
static void resolve_file(const loader *L, const char *file, char *buf, size_t n) {
    if (!file) file = L->path ? L->path : "configuration";
    if (file[0] == '/' || !L->dir[0] || (L->path && strcmp(file, L->path) == 0))
        snprintf(buf, n, "%s", file);
    else
        snprintf(buf, n, "%s/%s", L->dir, file);
}

HT_PRINTF(3, 4)
static int fail(const loader *L, const origin *o, const char *fmt, ...) {
    char msg[2048], file[HT_PATH_MAX + 32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (o->set) return ht_error(HT_EINPUT, "--set %s: %s", o->set, msg);
    if (o->opened) snprintf(file, sizeof file, "%s", o->file);
    else resolve_file(L, o->file, file, sizeof file);
    if (o->line > 0) return ht_error(HT_EINPUT, "%s:%d: %s", file, o->line, msg);
    return ht_error(HT_EINPUT, "%s: %s", file, msg);
}

/* "a string", "a float (0.5)", ... for "found X". */
static void describe(const config_setting_t *s, char *buf, size_t n) {
    char num[40];
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64:
        if (ht_numlit_of(s)) snprintf(buf, n, "an integer (%s)", ht_numlit_of(s)->text);
        else snprintf(buf, n, "an integer (%lld)", config_setting_get_int64(s));
        break;
    case CONFIG_TYPE_FLOAT:
        ht_fmt_num(config_setting_get_float(s), num, sizeof num);
        snprintf(buf, n, "a float (%s)", ht_numlit_of(s) ? ht_numlit_of(s)->text : num);
        break;
    case CONFIG_TYPE_BOOL:
        snprintf(buf, n, "a boolean (%s)", config_setting_get_bool(s) ? "true" : "false");
        break;
    case CONFIG_TYPE_STRING:
        snprintf(buf, n, "a string");
        break;
    case CONFIG_TYPE_GROUP:
        snprintf(buf, n, "a group");
        break;
    case CONFIG_TYPE_ARRAY:
        snprintf(buf, n, "an array");
        break;
    case CONFIG_TYPE_LIST:
        snprintf(buf, n, "a list");
        break;
    default:
        snprintf(buf, n, "nothing");
        break;
    }
}

static int wrong_type(const loader *L, const origin *o, const char *key, const config_setting_t *s,
                      const char *expect) {
    char found[64];
    describe(s, found, sizeof found);
    return fail(L, o, "key '%s': found %s, expected %s", key, found, expect);
}

/* Unknown group.leaf (group "" at top level): suggest the closest key, or list the
 * group's keys when nothing is close. */
static int unknown_key(const loader *L, const origin *o, const char *group, const char *leaf) {
    char full[256], keys[1024];
    snprintf(full, sizeof full, "%s%s%s", group, group[0] ? "." : "", leaf);
    const char *best = ht_closest_key(group, leaf);
    if (best) return fail(L, o, "unknown key '%s' (did you mean '%s'?)", full, best);
    size_t glen = strlen(group), len = 0;
    keys[0] = 0;
    for (int i = 0; i < ht_config_nkeys && glen; i++) {
        const char *p = ht_config_keys[i].path;
        if (strncmp(p, group, glen) == 0 && p[glen] == '.' && len < sizeof keys)
            len += (size_t)snprintf(keys + len, sizeof keys - len, "%s%s", len ? ", " : "",
                                    p + glen + 1);
    }
    if (len) return fail(L, o, "unknown key '%s' (keys in '%s': %s)", full, group, keys);
    return fail(L, o,
                "unknown key '%s' (settings go in a group: model, data, train, optim, "
                "device, log, checkpoint, cluster)",
                full);
}

/* ------------------------------------------------------------------------------------ */
/* Applying one value                                                                   */

static int in_range(const ht_ckey *k, double v) {
    if ((k->flags & HT_CF_GE) && !(v >= k->min)) return 0;
    if ((k->flags & HT_CF_GT) && !(v > k->min)) return 0;
    if ((k->flags & HT_CF_LE) && !(v <= k->max)) return 0;
    if ((k->flags & HT_CF_LT) && !(v < k->max)) return 0;
    return 1;
}

static int is_int(const config_setting_t *s) {
    int t = config_setting_type(s);
    return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
}

/* Where the number of s stands: its literal's own file and line (a value on the line after
 * its key, an element of an array over several lines, an @included file). */
static origin at_number(const config_setting_t *s, const origin *o) {
    const ht_numlit *lit = ht_numlit_of(s);
    origin w = *o;
    if (lit && !o->set) w.file = lit->file, w.line = lit->line, w.opened = 1;
    return w;
}

/* An integer for k (or for one element of it): type, width and range. A literal that
 * libconfig wrapped to 32 bits or clamped to 64 (core/intlit.h) is an error quoting what
 * was written, never a different number. */
static int get_int(const loader *L, const ht_ckey *k, const char *key, const config_setting_t *s,
                   const origin *where, long long *out) {
    char expect[256];
    const origin at = at_number(s, where), *o = &at;
    ht_ckey_expect(k, expect, sizeof expect);
    if (!is_int(s)) return wrong_type(L, o, key, s, expect);
    long long v = config_setting_get_int64(s);
    const ht_numlit *lit = ht_numlit_of(s);
    if (lit && lit->lost) {
        const char *text = lit->text;
        if (k->kind != HT_CK_U64 && !(k->flags & (HT_CF_LE | HT_CF_LT)))
            snprintf(expect + strlen(expect), sizeof expect - strlen(expect), " and <= %d",
                     INT_MAX);
        if (lit->beyond64)
            return fail(L, o, "key '%s': found %s, which does not fit in 64 bits; expected %s",
                        key, text, expect);
        if (k->kind != HT_CK_U64)
            return fail(L, o, "key '%s': found %s, expected %s", key, text, expect);
        return fail(L, o,
                    "key '%s': found %s, which libconfig reads as a 32-bit integer; write it "
                    "as %sL",
                    key, text, text);
    }
    if (!in_range(k, (double)v) || (k->kind != HT_CK_U64 && (v > INT_MAX || v < INT_MIN))) {
        if (k->kind != HT_CK_U64 && !(k->flags & (HT_CF_LE | HT_CF_LT)) && v > INT_MAX)
            snprintf(expect + strlen(expect), sizeof expect - strlen(expect), " and <= %d",
                     INT_MAX);
        return fail(L, o, "key '%s': found %lld, expected %s", key, v, expect);
    }
    *out = v;
    return HT_OK;
}

/* The index of v in k's choices into *index, or an error with a suggestion. */
static int find_choice(const loader *L, const ht_ckey *k, const char *v, const origin *o,
                       int *index) {
    char expect[512];
    int i = 0;
    while (k->choices[i] && strcmp(k->choices[i], v) != 0)
        i++;
    *index = i;
    if (k->choices[i]) return HT_OK;
    const char *best = ht_closest(v, k->choices, i);
    ht_ckey_expect(k, expect, sizeof expect);
    if (best)
        return fail(L, o, "key '%s': found \"%.200s\", expected %s (did you mean \"%s\"?)",
                    k->path, v, expect, best);
    return fail(L, o, "key '%s': found \"%.200s\", expected %s", k->path, v, expect);
}

/* A string key, or an enum key (HT_CK_ENUM: its name parsed into the int). */
static int set_string(const loader *L, const ht_ckey *k, const char *v, const origin *o) {
    int i, rc = k->choices ? find_choice(L, k, v, o, &i) : HT_OK;
    if (rc != HT_OK) return rc;
    if (k->kind == HT_CK_ENUM) {
        *(int *)((char *)L->cfg + k->off) = i + (int)k->min;
        return HT_OK;
    }
    size_t len = strlen(v);
    if (len >= k->size)
        return fail(L, o, "key '%s': found a string of %zu characters, expected at most %zu",
                    k->path, len, k->size - 1);
    char *dst = (char *)L->cfg + k->off;
    memset(dst, 0, k->size);
    memcpy(dst, v, len);
    return HT_OK;
}

/* An array or list of strings, each checked by k->check, each element's error naming its
 * own line: "x.cfg:12: key 'model.layers[3]': found \"conv 5\", expected ...". */
static int apply_strings(const loader *L, const ht_ckey *k, const config_setting_t *s,
                         const origin *o) {
    int t = config_setting_type(s), n = config_setting_length(s);
    size_t elem = ht_ckey_elem(k);
    int max = (int)k->max;
    char *field = (char *)L->cfg + k->off, err[512];
    if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
        return wrong_type(L, o, k->path, s, "an array of strings, e.g. [\"relu\", \"linear 10\"]");
    if (n > max)
        return fail(L, o, "key '%s': found %d values, expected at most %d", k->path, n, max);
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        origin eo = *o;
        char key[128];
        if (o->file) eo.line = config_setting_source_line(e);
        snprintf(key, sizeof key, "%s[%d]", k->path, i);
        if (config_setting_type(e) != CONFIG_TYPE_STRING)
            return wrong_type(L, &eo, key, e, "a string");
        const char *v = config_setting_get_string(e);
        if (strlen(v) >= elem)
            return fail(L, &eo, "key '%s': found a string of %zu characters, expected at most %zu",
                        key, strlen(v), elem - 1);
        if (ht_ckey_check_elem(k, v, err, sizeof err) != HT_OK)
            return fail(L, &eo, "key '%s': found \"%.200s\", expected %s", key, v, err);
    }
    memset(field, 0, k->size);
    for (int i = 0; i < n; i++)
        strcpy(field + (size_t)i * elem,
               config_setting_get_string(config_setting_get_elem(s, (unsigned)i)));
    *(int *)((char *)L->cfg + k->off_count) = n;
    return HT_OK;
}

/* A number (a float, or an int literal) within k's range, for key (k->path or an element). */
static int get_num(loader *L, const ht_ckey *k, const char *key, const config_setting_t *s,
                   const origin *where, const char *expect, double *out) {
    const origin at = at_number(s, where), *o = &at;
    const ht_numlit *lit = ht_numlit_of(s);
    char why[512];
    int t = config_setting_type(s);
    if (t != CONFIG_TYPE_FLOAT && !is_int(s)) return wrong_type(L, o, key, s, expect);
    if (lit && lit->lost) { /* 1e999, 1e-400, or an integer libconfig wrapped */
        ht_numlit_why(lit, why, sizeof why);
        return fail(L, o, "key '%s': %s", key, why);
    }
    double v =
        t == CONFIG_TYPE_FLOAT ? config_setting_get_float(s) : (double)config_setting_get_int64(s);
    char num[40];
    ht_fmt_num(v, num, sizeof num);
    if (!isfinite(v)) return fail(L, o, "key '%s': found %s, expected a finite number", key, num);
    /* the devices compute in float: a number that is not 0 must be a normal float, or lr =
     * 1e-320 silently trains with lr 0 */
    if (v != 0 && !(fabs(v) >= FLT_MIN && fabs(v) <= FLT_MAX))
        return fail(L, o,
                    "key '%s': found %s, expected 0 or a magnitude between %.9g and %.9g (the "
                    "range of a normal float, as the devices compute)",
                    key, num, (double)FLT_MIN, (double)FLT_MAX);
    if (!in_range(k, v)) return fail(L, o, "key '%s': found %s, expected %s", key, num, expect);
    *out = v;
    return HT_OK;
}

/* Checks s against row k and stores it into the config; records where it came from. */
static int apply(loader *L, int ki, const config_setting_t *s, const origin *o) {
    const ht_ckey *k = &ht_config_keys[ki];
    char *field = (char *)L->cfg + k->off, expect[256];
    long long iv;
    int rc = HT_OK;
    ht_ckey_expect(k, expect, sizeof expect);
    switch (k->kind) {
    case HT_CK_INT:
        rc = get_int(L, k, k->path, s, o, &iv);
        if (rc == HT_OK) *(int *)field = (int)iv;
        break;
    case HT_CK_U64:
        rc = get_int(L, k, k->path, s, o, &iv);
        if (rc == HT_OK) *(uint64_t *)field = (uint64_t)iv;
        break;
    case HT_CK_NUM:
        rc = get_num(L, k, k->path, s, o, expect, (double *)field);
        break;
    case HT_CK_BOOL:
        if (config_setting_type(s) != CONFIG_TYPE_BOOL) return wrong_type(L, o, k->path, s, expect);
        *(int *)field = config_setting_get_bool(s) != 0;
        break;
    case HT_CK_STR:
    case HT_CK_ENUM:
        if (config_setting_type(s) != CONFIG_TYPE_STRING)
            return wrong_type(L, o, k->path, s, expect);
        rc = set_string(L, k, config_setting_get_string(s), o);
        break;
    case HT_CK_INTS:
    case HT_CK_NUMS: {
        int ints = k->kind == HT_CK_INTS;
        int t = config_setting_type(s), n = config_setting_length(s);
        int max = (int)(k->size / (ints ? sizeof(int) : sizeof(double)));
        if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
            return wrong_type(L, o, k->path, s,
                              ints ? "an array of integers, e.g. [512, 256]"
                                   : "an array of numbers, e.g. [1.0, 2.5]");
        if (n > max)
            return fail(L, o, "key '%s': found %d values, expected at most %d", k->path, n, max);
        for (int i = 0; i < n && rc == HT_OK; i++) {
            const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
            char key[128];
            origin eo = *o;
            if (o->file) eo.line = config_setting_source_line(e);
            snprintf(key, sizeof key, "%s[%d]", k->path, i);
            if (ints && (rc = get_int(L, k, key, e, &eo, &iv)) == HT_OK)
                ((int *)field)[i] = (int)iv;
            else if (!ints)
                rc = get_num(L, k, key, e, &eo, expect, (double *)field + i);
        }
        if (rc == HT_OK) *(int *)((char *)L->cfg + k->off_count) = n;
        break;
    }
    case HT_CK_STRS:
        rc = apply_strings(L, k, s, o);
        break;
    }
    if (rc == HT_OK) L->where[ki] = *o;
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* Defaults, the file, the overrides                                                    */

/* Parses "v = <text>" with libconfig into c; the single setting, or NULL. */
static config_setting_t *parse_value(config_t *c, const char *text) {
    size_t n = strlen(text) + 16;
    char *doc = ht_xmalloc(n);
    snprintf(doc, n, "v = %s\n;", text);
    int ok = config_read_string(c, doc);
    free(doc);
    config_setting_t *root = config_root_setting(c);
    if (!ok || config_setting_length(root) != 1) return NULL;
    config_setting_t *s = config_setting_get_elem(root, 0);
    return strcmp(config_setting_name(s), "v") == 0 ? s : NULL;
}

static int apply_defaults(loader *L) {
    for (int i = 0; i < ht_config_nkeys; i++) {
        if (!ht_config_keys[i].def) continue;
        config_t c;
        config_init(&c);
        origin o = {NULL, 0, NULL, 0};
        config_setting_t *s = parse_value(&c, ht_config_keys[i].def);
        int rc = s ? apply(L, i, s, &o)
                   : ht_error(HT_EINPUT, "bad default for '%s' in the schema: %s",
                              ht_config_keys[i].path, ht_config_keys[i].def);
        config_destroy(&c);
        if (rc != HT_OK) return rc;
    }
    memset(L->given, 0, sizeof L->given);
    return HT_OK;
}

/* @include "x" lines of file (and of what they include, depth-first): each must be a
 * regular file, checked without blocking before libconfig opens it (libconfig 1.5 has no
 * include hook; a FIFO would block it for ever, a folder fails with no file or line). */
static int check_includes(const loader *L, const char *file, int depth) {
    FILE *f = ht_open_input(file, "cannot open config");
    if (!f) return HT_EINPUT;
    char line[HT_PATH_MAX + 64], inc[HT_PATH_MAX + 32], full[2 * HT_PATH_MAX + 64];
    int rc = HT_OK;
    for (int n = 1; rc == HT_OK && fgets(line, sizeof line, f); n++) {
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp(p, "@include", 8) != 0 || sscanf(p + 8, " \"%1055[^\"]\"", inc) != 1) continue;
        if (inc[0] == '/' || !L->dir[0]) snprintf(full, sizeof full, "%s", inc);
        else snprintf(full, sizeof full, "%s/%s", L->dir, inc);
        origin o = {file, n, NULL, 0};
        if (depth >= 10)
            rc = fail(L, &o, "@include \"%s\": includes nested more than 10 deep", inc);
        else if (ht_check_input(full, "@include") != HT_OK)
            rc = fail(L, &o, "%s", ht_errmsg());
        else
            rc = check_includes(L, full, depth + 1);
    }
    fclose(f);
    return rc;
}

/* Every number of the file and its @includes as written, bound to its setting (get_int,
 * get_num quote it). Should the literals not bind (a file that changed under us), one that
 * libconfig could not hold is still an error, at its own line. */
static int bind_numbers(loader *L, config_t *c, const char *path) {
    ht_numlits_scan_file(&L->lits, path, L->dir);
    if (ht_numlits_bind(&L->lits, config_root_setting(c), 1)) return HT_OK;
    const ht_numlit *l = ht_numlits_first_lost(&L->lits);
    if (!l) return HT_OK;
    char why[512];
    ht_numlit_why(l, why, sizeof why);
    origin o = {l->file, l->line, NULL, 1};
    return fail(L, &o, "%s", why);
}

static int read_file(loader *L, config_t *c, const char *path) {
    if (ht_check_input(path, "cannot open config") != HT_OK) return HT_EINPUT;
    const char *slash = strrchr(path, '/');
    if (slash) {
        snprintf(L->dir, sizeof L->dir, "%.*s", (int)(slash - path), path);
        if (!L->dir[0]) snprintf(L->dir, sizeof L->dir, "/");
        config_set_include_dir(c, L->dir);
    }
    int rc = check_includes(L, path, 0);
    if (rc != HT_OK) return rc;
    if (config_read_file(c, path)) return bind_numbers(L, c, path);
    if (config_error_type(c) == CONFIG_ERR_FILE_IO)
        return ht_error(HT_EINPUT, "cannot read config '%s': %s", path, strerror(errno));
    origin o = {config_error_file(c), config_error_line(c), NULL, 0};
    const char *text = config_error_text(c);
    if (strcmp(text, "syntax error") == 0)
        return fail(L, &o,
                    "syntax error: expected 'name = value;' (strings in double quotes, "
                    "lists in [ ], groups as name = { ... };) on this line or the one "
                    "before");
    return fail(L, &o, "syntax error: %s", text);
}

static int walk_file(loader *L, const config_setting_t *root) {
    int ngroups = 0;
    while (ht_config_groups[ngroups])
        ngroups++;
    for (int i = 0; i < config_setting_length(root); i++) {
        const config_setting_t *g = config_setting_get_elem(root, (unsigned)i);
        const char *gname = config_setting_name(g);
        origin o = {config_setting_source_file(g), config_setting_source_line(g), NULL, 0};
        int known = 0;
        for (int j = 0; j < ngroups; j++)
            known |= strcmp(gname, ht_config_groups[j]) == 0;
        if (!known && config_setting_is_group(g)) {
            const char *best = ht_closest(gname, ht_config_groups, ngroups);
            if (best) return fail(L, &o, "unknown group '%s' (did you mean '%s'?)", gname, best);
            return fail(L, &o,
                        "unknown group '%s' (groups: model, data, train, optim, device, "
                        "log, checkpoint, cluster)",
                        gname);
        }
        if (!known) return unknown_key(L, &o, "", gname);
        if (!config_setting_is_group(g))
            return wrong_type(L, &o, gname, g, "a group (name = { key = value; ... };)");
        for (int j = 0; j < config_setting_length(g); j++) {
            const config_setting_t *s = config_setting_get_elem(g, (unsigned)j);
            char path[256];
            origin so = {config_setting_source_file(s), config_setting_source_line(s), NULL, 0};
            snprintf(path, sizeof path, "%s.%s", gname, config_setting_name(s));
            int ki = ht_ckey_find(path);
            if (ki < 0) return unknown_key(L, &so, gname, config_setting_name(s));
            int rc = apply(L, ki, s, &so);
            if (rc != HT_OK) return rc;
            L->given[ki] = 1;
        }
    }
    return HT_OK;
}

/* Copies s[0..n) without surrounding blanks into buf. */
static void trim_copy(char *buf, size_t size, const char *s, size_t n) {
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n'))
        n--;
    snprintf(buf, size, "%.*s", (int)n, s);
}

static int apply_set(loader *L, const char *text) {
    origin o = {NULL, 0, text, 0};
    const char *eq = strchr(text, '=');
    char key[128], expect[256];
    if (eq) trim_copy(key, sizeof key, text, (size_t)(eq - text));
    if (!eq || !key[0])
        return fail(L, &o, "malformed override, expected KEY=VALUE (e.g. train.batch=64)");
    int ki = ht_ckey_find(key);
    if (ki < 0) {
        char *dot = strchr(key, '.');
        if (!dot) return unknown_key(L, &o, "", key);
        *dot = 0;
        return unknown_key(L, &o, key, dot + 1);
    }
    const ht_ckey *k = &ht_config_keys[ki];
    size_t vlen = strlen(eq + 1);
    char *value = ht_xmalloc(vlen + 2);
    trim_copy(value, vlen + 2, eq + 1, vlen);
    int rc;
    if ((k->kind == HT_CK_STR || k->kind == HT_CK_ENUM) && value[0] != '"') {
        rc = set_string(L, k, value, &o); /* bare text: optim.type=adamw, device.select=1 */
        if (rc == HT_OK) L->where[ki] = o;
    } else {
        /* a single integer past 32 bits would be wrapped by libconfig: make it 64-bit */
        char *end;
        errno = 0;
        long long x = strtoll(value, &end, 10);
        if (end != value && !*end && errno != ERANGE && (x > INT_MAX || x < INT_MIN))
            strcat(value, "L");
        config_t c;
        config_init(&c);
        config_setting_t *s = parse_value(&c, value);
        ht_numlits lits = {0}; /* its numbers as written (core/intlit.h) */
        ht_numlits_scan_text(&lits, value, "--set");
        if (s) ht_numlits_bind(&lits, config_root_setting(&c), 1);
        const ht_numlit *lost = lits.bound ? NULL : ht_numlits_first_lost(&lits);
        ht_ckey_expect(k, expect, sizeof expect);
        if (k->kind == HT_CK_INTS) snprintf(expect, sizeof expect, "an array of integers");
        if (k->kind == HT_CK_NUMS) snprintf(expect, sizeof expect, "an array of numbers");
        if (k->kind == HT_CK_STRS) snprintf(expect, sizeof expect, "an array of strings");
        if (lost) {
            char why[512];
            ht_numlit_why(lost, why, sizeof why);
            rc = fail(L, &o, "key '%s': %s", key, why);
        } else if (s)
            rc = apply(L, ki, s, &o);
        else if (!value[0])
            rc = fail(L, &o, "key '%s': found nothing, expected %s", key, expect);
        else if (value[0] == '[' || value[0] == '(' || value[0] == '"')
            rc = fail(L, &o, "key '%s': found a malformed %s (%s), expected %s", key,
                      value[0] == '"' ? "string" : "array", config_error_text(&c), expect);
        else
            rc = fail(L, &o, "key '%s': found a string, expected %s", key, expect);
        config_destroy(&c);
        ht_numlits_free(&lits);
    }
    free(value);
    if (rc == HT_OK) L->given[ki] = 1;
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* Checks across keys                                                                   */

static int missing(const loader *L, int ki) {
    const ht_ckey *k = &ht_config_keys[ki];
    origin o = {NULL, 0, NULL, 0};
    return fail(L, &o, "missing required key '%s' (%s, %s)", k->path, ht_ckey_type_name(k->kind),
                k->doc);
}

/* "file:line" or "--set a.b=v" for where key ki was set; "" for its default. */
static void origin_text(const loader *L, int ki, char *buf, size_t n) {
    const origin *o = &L->where[ki];
    char file[HT_PATH_MAX];
    buf[0] = 0;
    if (o->set) {
        snprintf(buf, n, "--set %s", o->set);
    } else if (o->file || (L->given[ki] && L->path)) {
        resolve_file(L, o->file, file, sizeof file);
        if (o->line > 0) snprintf(buf, n, "%s:%d", file, o->line);
        else snprintf(buf, n, "%s", file);
    }
}

/* cluster.*: the shares fill the batch; remember where the per-rank lists came from for
 * the checks against the world size (ht_config_check_world), made after mpirun started. */
static int check_cluster(const loader *L) {
    ht_config *c = L->cfg;
    /* only a non-empty list can be wrong for the world size; an empty one keeps "" so a
     * config written out and read back compares equal */
    int ks = ht_ckey_find("cluster.shares");
    if (c->cluster.nshares) origin_text(L, ks, c->cluster.at_shares, sizeof c->cluster.at_shares);
    if (c->cluster.ndevices)
        origin_text(L, ht_ckey_find("cluster.devices"), c->cluster.at_devices,
                    sizeof c->cluster.at_devices);
    if (c->cluster.nslowdown)
        origin_text(L, ht_ckey_find("cluster.slowdown"), c->cluster.at_slowdown,
                    sizeof c->cluster.at_slowdown);
    if (c->cluster.nhosts)
        origin_text(L, ht_ckey_find("cluster.hosts"), c->cluster.at_hosts,
                    sizeof c->cluster.at_hosts);
    if (c->cluster.nslowdown_from) {
        int kf = ht_ckey_find("cluster.slowdown_from");
        origin_text(L, kf, c->cluster.at_slowdown_from, sizeof c->cluster.at_slowdown_from);
        if (!c->cluster.nslowdown)
            return fail(L, &L->where[kf],
                        "key 'cluster.slowdown_from': found %d values, expected none without "
                        "cluster.slowdown (the factors it times)",
                        c->cluster.nslowdown_from);
    }
    if (c->cluster.nshares == 0) return HT_OK;
    long long sum = 0;
    char list[512];
    size_t len = 0;
    for (int i = 0; i < c->cluster.nshares; i++) {
        sum += c->cluster.shares[i];
        if (len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", i ? " + " : "",
                                    c->cluster.shares[i]);
    }
    if (sum != c->train.batch)
        return fail(L, &L->where[ks],
                    "key 'cluster.shares': found %s = %lld samples, expected a sum equal to "
                    "train.batch (%d): each rank's share of the global batch",
                    list, sum, c->train.batch);
    return HT_OK;
}

/* gpt: the per-sample tensors the kernels index with int (before any batch multiplies
 * them, and before a product of int keys could overflow where the model is built): T x 4C
 * (the MLP branch), T x vocab (the logits), n_head x T x T (the attention scores). */
static int check_gpt_sizes(const loader *L) {
    const ht_config *c = L->cfg;
    double T = c->model.context, C = c->model.d_model, H = c->model.n_head;
    double mlp = T * 4 * C, logits = T * c->model.vocab, scores = H * T * T;
    const char *what = mlp > INT_MAX      ? "model.context x 4 model.d_model (the MLP branch)"
                       : logits > INT_MAX ? "model.context x model.vocab (the logits)"
                       : scores > INT_MAX ? "model.n_head x model.context^2 (the attention scores)"
                                          : NULL;
    if (!what) return HT_OK;
    return fail(L, &L->where[ht_ckey_find("model.context")],
                "key 'model.context': found %d with model.d_model %d and model.n_head %d: %s = "
                "%.0f values per sample, expected at most %d (kernels index a tensor with "
                "32-bit integers)",
                c->model.context, c->model.d_model, c->model.n_head, what,
                mlp > INT_MAX ? mlp : logits > INT_MAX ? logits : scores, INT_MAX);
}

static int check_all(const loader *L) {
    const ht_config *c = L->cfg;
    for (int i = 0; i < ht_config_nkeys; i++)
        if ((ht_config_keys[i].flags & HT_CF_REQ) && !L->given[i]) return missing(L, i);
    if (c->train.steps == 0 && c->train.epochs == 0) {
        origin o = {NULL, 0, NULL, 0};
        return fail(L, &o,
                    "missing required key 'train.steps' or 'train.epochs' (one of them "
                    "must be > 0: integer steps, or a number of epochs)");
    }
    if (strcmp(c->data.kind, "idx") == 0) {
        if (!c->data.images[0]) return missing(L, ht_ckey_find("data.images"));
        if (!c->data.labels[0]) return missing(L, ht_ckey_find("data.labels"));
    }
    int text = !strcmp(c->data.kind, "text"), tokens = !strcmp(c->data.kind, "tokens");
    if ((text || tokens) && !c->data.path[0]) return missing(L, ht_ckey_find("data.path"));
    int gpt = strcmp(c->model.type, "gpt") == 0;
    if (gpt && !text && !tokens)
        return fail(L, &L->where[ht_ckey_find("data.kind")],
                    "key 'data.kind': found \"%s\", expected \"text\" or \"tokens\" for "
                    "model.type \"gpt\" (a language model trains on a text or token files)",
                    c->data.kind);
    if ((text || tokens) && !gpt)
        return fail(L, &L->where[ht_ckey_find("model.type")],
                    "key 'model.type': found \"%s\", expected \"gpt\" for data.kind \"%s\" "
                    "(only the language model reads text or tokens)",
                    c->model.type, c->data.kind);
    if (text && c->model.vocab < 256)
        return fail(L, &L->where[ht_ckey_find("model.vocab")],
                    "key 'model.vocab': found %d, expected at least 256 for data.kind \"text\" "
                    "(every byte is a token)",
                    c->model.vocab);
    if (c->data.val_path[0] && !tokens)
        return fail(L, &L->where[ht_ckey_find("data.val_path")],
                    "key 'data.val_path': set for data.kind \"%s\"; it is read only for "
                    "\"tokens\"",
                    c->data.kind);
    if (gpt && c->model.d_model % c->model.n_head)
        return fail(L, &L->where[ht_ckey_find("model.n_head")],
                    "key 'model.n_head': found %d, expected a divisor of model.d_model (%d)",
                    c->model.n_head, c->model.d_model);
    if (gpt) {
        int rc = check_gpt_sizes(L);
        if (rc != HT_OK) return rc;
    }
    if (c->model.ninput_shape != 0 && c->model.ninput_shape != 3)
        return fail(L, &L->where[ht_ckey_find("model.input_shape")],
                    "key 'model.input_shape': found %d values, expected 3 ([C, H, W]) or [] "
                    "(from the data)",
                    c->model.ninput_shape);
    if (c->model.ninput_shape == 3) {
        const int *d = c->model.input_shape;
        long long vals = (long long)d[0] * d[1] * d[2]; /* each <= 2^31: no overflow */
        if (vals > INT_MAX)
            return fail(L, &L->where[ht_ckey_find("model.input_shape")],
                        "key 'model.input_shape': found [%d, %d, %d] = %lld values per sample, "
                        "expected at most %d",
                        d[0], d[1], d[2], vals, INT_MAX);
    }
    if (strcmp(c->model.type, "cnn") == 0 && c->model.nlayers == 0)
        return fail(L, &L->where[ht_ckey_find("model.layers")],
                    "key 'model.layers': found no layers, expected at least one for model.type "
                    "\"cnn\" (e.g. [\"flatten\", \"linear 10\"])");
    if (strcmp(c->optim.schedule, "cosine") == 0 && c->optim.min_lr > c->optim.lr) {
        char a[40], b[40];
        ht_fmt_num(c->optim.min_lr, a, sizeof a);
        ht_fmt_num(c->optim.lr, b, sizeof b);
        return fail(L, &L->where[ht_ckey_find("optim.min_lr")],
                    "key 'optim.min_lr': found %s, expected a number <= optim.lr (%s) for the "
                    "cosine schedule",
                    a, b);
    }
    int rc = check_cluster(L);
    const char *key = NULL;
    char msg[1024];
    if (rc == HT_OK && ht_config_mode_rules(c, &key, msg, sizeof msg) != HT_OK)
        return fail(L, &L->where[ht_ckey_find(key)], "%s", msg);
    return rc;
}

double ht_config_slowdown_at(const ht_config *cfg, int rank, int64_t step) {
    if (rank < 0 || rank >= cfg->cluster.nslowdown) return 1.0;
    if (rank < cfg->cluster.nslowdown_from && step < cfg->cluster.slowdown_from[rank]) return 1.0;
    return cfg->cluster.slowdown[rank];
}

/* ------------------------------------------------------------------------------------ */

int ht_config_load(ht_config *cfg, const char *path, const char *const *sets, int nset) {
    if (ht_config_nkeys > MAX_KEYS)
        return ht_error(HT_ERUNTIME, "config schema has %d keys, loader holds %d", ht_config_nkeys,
                        MAX_KEYS);
    loader *L = ht_xcalloc(1, sizeof *L);
    memset(cfg, 0, sizeof *cfg);
    L->cfg = cfg;
    L->path = path;
    int rc = apply_defaults(L);
    config_t c;
    config_init(&c);
    if (rc == HT_OK && path) {
        if (strlen(path) >= sizeof cfg->source)
            rc = ht_error(HT_EINPUT, "config path too long (%zu characters, at most %zu): %.80s...",
                          strlen(path), sizeof cfg->source - 1, path);
        else {
            memcpy(cfg->source, path, strlen(path));
            rc = read_file(L, &c, path);
            if (rc == HT_OK) rc = walk_file(L, config_root_setting(&c));
        }
    }
    for (int i = 0; rc == HT_OK && i < nset; i++)
        rc = apply_set(L, sets[i]);
    if (rc == HT_OK) rc = check_all(L);
    config_destroy(&c); /* after check_all: L->where points into it */
    ht_numlits_free(&L->lits);
    free(L);
    return rc;
}
