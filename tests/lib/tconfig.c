#include "tconfig.h"

#include <stdarg.h>
#include <string.h>

#include "core/err.h"
#include "tap.h"

int cfg_load(ht_config *c, const char *path, ...) {
    const char *sets[16];
    int n = 0;
    va_list ap;
    va_start(ap, path);
    for (const char *s; (s = va_arg(ap, const char *)) && n < 16;)
        sets[n++] = s;
    va_end(ap);
    ht_error_clear();
    return ht_config_load(c, path, sets, n);
}

void cfg_refused(int rc, const char *what, const char *a, const char *b, const char *c) {
    const char *m = ht_errmsg();
    int ok = rc == HT_EINPUT && strstr(m, a) && (!b || strstr(m, b)) && (!c || strstr(m, c));
    if (!tap_ok(ok, "%s", what)) tap_diag("rc=%d message: %s", rc, m);
}
