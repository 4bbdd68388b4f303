/* The outputs a run will write, checked before it starts (core/path.h does the checks), and
 * where a key was set, for messages about values found wrong after loading. */
#include "config/config.h"

#include "config/schema.h"

#include <libconfig.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "core/path.h"

int ht_config_check_outputs(const ht_config *cfg, const char *trace_path) {
    const struct {
        const char *what, *path;
    } out[] = {
        {"key 'checkpoint.path'", cfg->checkpoint.path},
        {"key 'log.metrics'", cfg->log.metrics},
        {"key 'sync.log'", cfg->sync.log},
        {"--trace", trace_path},
    };
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
        if (!out[i].path || !*out[i].path) continue;
        if (ht_check_output(out[i].path, out[i].what) != HT_OK) {
            if (!cfg->source[0] || out[i].path == trace_path) return HT_EINPUT;
            char msg[2 * HT_PATH_MAX + 256];
            snprintf(msg, sizeof msg, "%s", ht_errmsg()); /* ht_error overwrites it */
            return ht_error(HT_EINPUT, "%s: %s", cfg->source, msg);
        }
    }
    return HT_OK;
}

/* 1 when the number s in the file is not the value cfg holds for key: a --set replaced it. */
static int overridden(const ht_config *cfg, const char *key, const config_setting_t *s) {
    int ki = ht_ckey_find(key), t = config_setting_type(s);
    if (ki < 0 || (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64 && t != CONFIG_TYPE_FLOAT))
        return 0;
    const ht_ckey *k = &ht_config_keys[ki];
    const char *field = (const char *)cfg + k->off;
    double file = t == CONFIG_TYPE_FLOAT ? config_setting_get_float(s)
                                         : (double)config_setting_get_int64(s);
    double have = k->kind == HT_CK_INT   ? *(const int *)field
                  : k->kind == HT_CK_U64 ? (double)*(const uint64_t *)field
                  : k->kind == HT_CK_NUM ? *(const double *)field
                                         : file;
    return file != have;
}

void ht_config_where(const ht_config *cfg, const char *key, char *buf, size_t n) {
    snprintf(buf, n, "%s", cfg->source);
    if (!cfg->source[0]) return;
    config_t c;
    config_init(&c);
    char dir[HT_PATH_MAX];
    const char *slash = strrchr(cfg->source, '/');
    dir[0] = 0;
    if (slash) {
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - cfg->source), cfg->source);
        if (!dir[0]) snprintf(dir, sizeof dir, "/");
        config_set_include_dir(&c, dir);
    }
    /* read again only to find the line: the load already checked the file and its includes */
    const config_setting_t *s = config_read_file(&c, cfg->source) ? config_lookup(&c, key) : NULL;
    if (s && overridden(cfg, key, s)) {
        snprintf(buf, n, "--set %s", key);
    } else if (s && config_setting_source_line(s) > 0) {
        const char *file = config_setting_source_file(s);
        if (!file || !strcmp(file, cfg->source) || file[0] == '/' || !dir[0])
            snprintf(buf, n, "%s:%d", file ? file : cfg->source, config_setting_source_line(s));
        else
            snprintf(buf, n, "%s/%s:%d", dir, file, config_setting_source_line(s));
    }
    config_destroy(&c);
}
