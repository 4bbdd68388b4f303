/* The shared error path of our libconfig readers (see reader.h). */
#include "config/reader.h"

#include <stdarg.h>
#include <stdio.h>

int ht_cfg_line(const config_setting_t *s) {
    for (; s; s = config_setting_parent(s)) {
        int l = config_setting_source_line(s);
        if (l > 0) return l;
    }
    return 1;
}

int ht_cfg_fail(ht_cfg_reader *r, const config_setting_t *at, const char *fmt, ...) {
    if (r->rc != HT_OK) return r->rc; /* keep the first error */
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->rc = ht_error(HT_EINPUT, "%s:%d: %s", r->path, ht_cfg_line(at), msg);
    return r->rc;
}
