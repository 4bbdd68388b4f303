/* The shared error path of our libconfig readers (see cfgfile.h). */
#include "core/cfgfile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/intlit.h"
#include "core/path.h"

/* Every number of the file as written (core/intlit.h): one that libconfig could not hold
 * is an error at the line of its digits, naming the setting when the literals bind. */
static int check_numbers(config_t *cf, const char *path) {
    ht_numlits L = {0};
    ht_numlits_scan_file(&L, path, config_get_include_dir(cf));
    ht_numlits_bind(&L, config_root_setting(cf), 0);
    const ht_numlit *l = ht_numlits_first_lost(&L);
    int rc = HT_OK;
    if (l) {
        char why[512], at[256] = "";
        ht_numlit_why(l, why, sizeof why);
        if (l->setting) ht_cfg_setting_path(l->setting, at, sizeof at);
        rc = ht_error(HT_EINPUT, "%s:%d: %s%s%s", l->file, l->line, at, at[0] ? ": " : "", why);
    }
    ht_numlits_free(&L);
    return rc;
}

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
    int rc;
    if (ok == CONFIG_TRUE) {
        if ((rc = check_numbers(cf, path)) != HT_OK) config_destroy(cf);
        return rc;
    }
    rc = config_error_type(cf) == CONFIG_ERR_FILE_IO
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
