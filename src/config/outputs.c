/* The outputs a run will write, checked before it starts (core/path.h does the checks). */
#include "config/config.h"

#include <stdio.h>

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
