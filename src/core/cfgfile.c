/* The shared error path of our libconfig readers (see cfgfile.h). */
#include "core/cfgfile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/path.h"

int ht_cfg_read_file(config_t *cf, const char *path, const char *what) {
    config_init(cf);
    char why[128];
    snprintf(why, sizeof why, "cannot read %s", what);
    FILE *fp = ht_open_input(path, why);
    if (!fp) {
        config_destroy(cf);
        return HT_EINPUT;
    }
    int ok = config_read(cf, fp), err = errno;
    fclose(fp);
    if (ok == CONFIG_TRUE) return HT_OK;
    int rc = config_error_type(cf) == CONFIG_ERR_FILE_IO
                 ? ht_error(HT_EINPUT, "cannot read %s '%s': %s", what, path, strerror(err))
                 : ht_error(HT_EINPUT, "%s:%d: %s", path, config_error_line(cf),
                            config_error_text(cf) ? config_error_text(cf) : "syntax error");
    config_destroy(cf);
    return rc;
}

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
