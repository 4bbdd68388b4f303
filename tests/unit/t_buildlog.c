/* The compiler's output at a program build (src/ocl/program.c): a build from source first
 * says "compiling kernels for DEVICE (first run only, cached afterwards)"; what the compiler
 * says about a program that builds (here a #warning) stays off stderr, and -v (debug level)
 * shows it; a cached binary is loaded without the notice. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "ocl/ocl.h"
#include "tap.h"

static char g_err[256];

/* Opens device `idx` with stderr sent to a file; returns what was written there. */
static char *open_capturing(int idx, const ht_dev_opts *o, int *rc) {
    fflush(stderr);
    int saved = dup(2), fd = open(g_err, O_RDWR | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    ht_dev *d = NULL;
    *rc = ht_dev_open(&d, idx, o);
    if (*rc == HT_OK) ht_dev_close(d);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    static char buf[1 << 16];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    close(fd);
    return buf;
}

int main(void) {
    char kdir[] = "/tmp/ht_blogXXXXXX", cdir[] = "/tmp/ht_bcacheXXXXXX";
    if (!mkdtemp(kdir) || !mkdtemp(cdir)) return 1;
    snprintf(g_err, sizeof g_err, "%s/stderr", kdir);
    char path[300];
    snprintf(path, sizeof path, "%s/k.cl", kdir);
    FILE *f = fopen(path, "w");
    fputs("#warning \"ht-test-warning\"\n"
          "__kernel void twice(__global float *x) { x[get_global_id(0)] *= 2.0f; }\n",
          f);
    fclose(f);
    setenv("HT_KERNEL_DIR", kdir, 1);
    const char *sel = getenv("HT_TEST_DEVICE");
    int idx = 0, rc;
    ht_exit_on_error(ht_ocl_select(sel ? sel : "", &idx));
    ht_dev_opts o = ht_dev_opts_default();
    o.cache_dir = cdir;

    ht_log_set_level(HT_LOG_INFO);
    char *err = open_capturing(idx, &o, &rc);
    tap_ok(rc == HT_OK, "a program with a #warning builds");
    tap_ok(strstr(err, "compiling kernels for ") &&
               strstr(err, "(first run only, cached afterwards)"),
           "a build from source says it compiles, first run only");
    if (!tap_ok(!strstr(err, "ht-test-warning") && !strstr(err, "warning generated"),
                "the compiler's warning stays off stderr"))
        tap_diag("stderr: %s", err);
    err = open_capturing(idx, &o, &rc);
    tap_ok(rc == HT_OK && !strstr(err, "compiling kernels"), "from the cache: no notice");

    ht_log_set_level(HT_LOG_DEBUG);
    o.cache = 0;
    err = open_capturing(idx, &o, &rc);
    if (!tap_ok(rc == HT_OK && strstr(err, "compiler output for") && strstr(err, "ht-test-warning"),
                "-v shows the compiler's output, the warning included"))
        tap_diag("stderr: %s", err);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", kdir, cdir);
    if (system(cmd) != 0) tap_diag("could not remove %s, %s", kdir, cdir);
    return tap_done();
}
