/* Reading the project's other libconfig formats (hetprof profiles, hetsim cluster
 * descriptions): the first error is kept, as "FILE:LINE: message" with the line of the
 * setting it is about (or of its nearest parent that has one). */
#ifndef HT_CORE_CFGFILE_H
#define HT_CORE_CFGFILE_H

#include <libconfig.h>

#include "core/err.h"

typedef struct ht_cfg_reader {
    const char *path;
    int rc; /* HT_OK until the first error */
} ht_cfg_reader;

/* config_init + parse of path, opened without blocking and only when a regular file
 * (core/path.h). HT_OK, or HT_EINPUT ("cannot read WHAT 'path': reason" or "path:line:
 * syntax error") with cf destroyed. */
int ht_cfg_read_file(config_t *cf, const char *path, const char *what);
/* Line of s in its file, else of its nearest parent with one; 1 when none has. */
int ht_cfg_line(const config_setting_t *s);
/* Records HT_EINPUT "path:line: message" unless an error is already recorded; returns r->rc. */
int ht_cfg_fail(ht_cfg_reader *r, const config_setting_t *at, const char *fmt, ...) HT_PRINTF(3, 4);

#endif
