/* The kernel program: the cl/ kernel files embedded at build time (or read from $HT_KERNEL_DIR for
 * kernel work), built once per device with -cl-std from the device's OpenCL C version.
 * Binaries are cached on disk keyed by a hash of source, options, device name, driver
 * and platform versions; entries are written atomically and verified by a checksum,
 * and a bad entry is rebuilt, never fatal. */
#include "ocl/internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "core/path.h"

struct ht_cl_source {
    const char *name;
    const char *text;
    size_t len;
};
extern const struct ht_cl_source ht_cl_sources[];

/* ---------------------------------------------------------------- source */

typedef struct strbuf {
    char *p;
    size_t n, cap;
} strbuf;

static void sb_add(strbuf *s, const char *t, size_t n) {
    if (s->n + n + 1 > s->cap) {
        s->cap = (s->n + n + 1) * 2;
        s->p = ht_xrealloc(s->p, s->cap);
    }
    memcpy(s->p + s->n, t, n);
    s->n += n;
    s->p[s->n] = 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Concatenates the kernel sources, sorted by file name, each after a #line marker. */
static int load_source(strbuf *src) {
    const char *dir = getenv("HT_KERNEL_DIR");
    if (!dir || !*dir) {
        for (const struct ht_cl_source *s = ht_cl_sources; s->name; s++) {
            char hdr[160];
            int k = snprintf(hdr, sizeof hdr, "\n/* ---- %s */\n", s->name);
            sb_add(src, hdr, (size_t)k);
            sb_add(src, s->text, s->len);
        }
        return HT_OK;
    }
    DIR *d = opendir(dir);
    if (!d) return ht_error(HT_EINPUT, "HT_KERNEL_DIR '%s': %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l > 3 && !strcmp(e->d_name + l - 3, ".cl")) {
            names = ht_xrealloc(names, (n + 1) * sizeof *names);
            names[n++] = ht_xstrdup(e->d_name);
        }
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    int rc = HT_OK;
    for (int i = 0; i < n; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = ht_open_input(path, "cannot read kernel file"); /* HT_KERNEL_DIR: user's */
        if (!f) {
            rc = HT_EINPUT;
        } else {
            char hdr[160], buf[8192];
            int k = snprintf(hdr, sizeof hdr, "\n/* ---- %s */\n", names[i]);
            sb_add(src, hdr, (size_t)k);
            for (size_t r; (r = fread(buf, 1, sizeof buf, f)) > 0;) sb_add(src, buf, r);
            fclose(f);
        }
        free(names[i]);
    }
    free(names);
    if (rc == HT_OK && n == 0)
        rc = ht_error(HT_EINPUT, "HT_KERNEL_DIR '%s' holds no .cl files", dir);
    return rc;
}

/* ---------------------------------------------------------------- cache */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s) { return fnv1a(h, s, strlen(s) + 1); }

static void cache_dir_path(const ht_dev_opts *o, char *out, size_t n) {
    const char *env = getenv("HT_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    if (o->cache_dir && *o->cache_dir) snprintf(out, n, "%s", o->cache_dir);
    else if (env && *env) snprintf(out, n, "%s", env);
    else if (xdg && *xdg) snprintf(out, n, "%s/hettrain", xdg);
    else snprintf(out, n, "%s/.cache/hettrain", home && *home ? home : "/tmp");
}

static void mkdir_p(const char *path) {
    char tmp[2048];
    ht_strlcpy(tmp, path, sizeof tmp);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0755);
            *p = '/';
        }
    mkdir(tmp, 0755);
}

static const char CACHE_MAGIC[8] = {'H', 'T', 'C', 'L', 'B', 'I', 'N', '1'};

/* Reads a cache entry; returns a malloc'd binary or NULL if absent or damaged. */
static unsigned char *cache_read(const char *path, size_t *len) {
    FILE *f = ht_open_input(path, "program cache"); /* a FIFO there must not hang the run */
    if (!f) {
        ht_error_clear(); /* a miss, not an error */
        return NULL;
    }
    char magic[8];
    uint64_t n = 0, sum = 0;
    unsigned char *bin = NULL;
    if (fread(magic, 1, 8, f) == 8 && !memcmp(magic, CACHE_MAGIC, 8) &&
        fread(&n, sizeof n, 1, f) == 1 && fread(&sum, sizeof sum, 1, f) == 1 && n > 0 &&
        n < ((uint64_t)1 << 31)) {
        bin = ht_xmalloc(n);
        if (fread(bin, 1, n, f) != n || fnv1a(0xcbf29ce484222325ull, bin, n) != sum ||
            fgetc(f) != EOF) {
            ht_log_warn("program cache entry '%s' is damaged; rebuilding it", path);
            free(bin);
            bin = NULL;
        }
    }
    fclose(f);
    *len = n;
    return bin;
}

static void cache_write(const char *dir, const char *path, const unsigned char *bin, size_t n) {
    mkdir_p(dir);
    char tmp[2300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        ht_log_warn("cannot write program cache '%s': %s", tmp, strerror(errno));
        return;
    }
    uint64_t len = n, sum = fnv1a(0xcbf29ce484222325ull, bin, n);
    int ok = fwrite(CACHE_MAGIC, 1, 8, f) == 8 && fwrite(&len, sizeof len, 1, f) == 1 &&
             fwrite(&sum, sizeof sum, 1, f) == 1 && fwrite(bin, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        ht_log_warn("cannot write program cache '%s': %s", path, strerror(errno));
        remove(tmp);
    }
}

/* ---------------------------------------------------------------- build */

/* The compiler's output. Some runtimes also write it to our stderr themselves (PoCL's
 * clang prints "N warnings generated." there), so a build runs with fd 2 sent to a
 * temporary file; what it caught and the program's build log are kept for -v and for a
 * failure, instead of reaching the user of a build that worked. */
typedef struct {
    int saved; /* the real stderr, -1 when not redirected */
    FILE *tmp;
} capture;

static void capture_begin(capture *c) {
    c->saved = -1;
    fflush(stderr);
    if (!(c->tmp = tmpfile())) return;
    if ((c->saved = dup(2)) < 0 || dup2(fileno(c->tmp), 2) < 0) {
        if (c->saved >= 0) close(c->saved);
        c->saved = -1;
        fclose(c->tmp);
        c->tmp = NULL;
    }
}

/* Restores stderr and appends what the build wrote there to *log. */
static void capture_end(capture *c, strbuf *log) {
    if (!c->tmp) return;
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    rewind(c->tmp);
    char buf[4096];
    for (size_t r; (r = fread(buf, 1, sizeof buf, c->tmp)) > 0;) sb_add(log, buf, r);
    fclose(c->tmp);
    c->tmp = NULL;
}

/* Appends the program's build log (CL_PROGRAM_BUILD_LOG) to *log. */
static void add_build_log(ht_dev *d, strbuf *log) {
    size_t n = 0;
    if (clGetProgramBuildInfo(d->program, d->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) !=
            CL_SUCCESS || n < 2)
        return;
    char *b = ht_xcalloc(n + 1, 1);
    if (clGetProgramBuildInfo(d->program, d->device, CL_PROGRAM_BUILD_LOG, n, b, NULL) ==
        CL_SUCCESS)
        sb_add(log, b, strlen(b));
    free(b);
}

/* clBuildProgram with the compiler's output captured into *log (build log last). */
static cl_int build_captured(ht_dev *d, const char *opts, strbuf *log) {
    capture c;
    capture_begin(&c);
    cl_int err = clBuildProgram(d->program, 1, &d->device, opts, NULL, NULL);
    capture_end(&c, log);
    add_build_log(d, log);
    return err;
}

static void fail_build(ht_dev *d, cl_int err, const char *opts, const strbuf *log) {
    ht_die(HT_ERUNTIME, "device '%s': clBuildProgram(%s) failed: %s (%d); build log:\n%s",
           d->info.name, opts, ht_clerr_name(err), (int)err, log->p ? log->p : "(empty)");
}

static int try_binary(ht_dev *d, const unsigned char *bin, size_t n, const char *opts) {
    cl_int err, status;
    d->program = clCreateProgramWithBinary(d->ctx, 1, &d->device, &n, &bin, &status, &err);
    strbuf log = {0}; /* a cached binary has nothing to say; a rejected one is rebuilt */
    int ok = err == CL_SUCCESS && status == CL_SUCCESS &&
             build_captured(d, opts, &log) == CL_SUCCESS;
    free(log.p);
    if (ok) return 1;
    if (d->program) clReleaseProgram(d->program);
    d->program = NULL;
    return 0;
}

int ht_program_build(ht_dev *d, const ht_dev_opts *o) {
    double t0 = ht_now();
    strbuf src = {0};
    int rc = load_source(&src);
    if (rc != HT_OK) return rc;
    const char *opts = ht_ocl_clstd(d->info.clc_version);

    char dir[1024], path[1200];
    int use_cache = o->cache && !getenv("HT_NO_CACHE");
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv1a(h, src.p, src.n);
    h = fnv_str(fnv_str(fnv_str(fnv_str(h, opts), d->info.name), d->info.driver),
                d->info.platform_version);
    cache_dir_path(o, dir, sizeof dir);
    ht_strlcpy(d->cache_dir, dir, sizeof d->cache_dir);
    d->program_hash = h;
    d->use_cache = use_cache;
    snprintf(path, sizeof path, "%s/%016llx.clbin", dir, (unsigned long long)h);

    d->cache_hit = 0;
    if (use_cache) {
        size_t n = 0;
        unsigned char *bin = cache_read(path, &n);
        if (bin && try_binary(d, bin, n, opts)) d->cache_hit = 1;
        else if (bin) ht_log_warn("program cache entry '%s' was rejected by the driver; rebuilding", path);
        free(bin);
    }
    if (!d->cache_hit) {
        cl_int err;
        const char *s = src.p;
        /* the wait is long on a CPU (PoCL: ~20 s on 2 cores); say why it is silent */
        ht_log_info("compiling kernels for %s (first run only, cached afterwards)",
                    d->info.name);
        d->program = clCreateProgramWithSource(d->ctx, 1, &s, &src.n, &err);
        if (err != CL_SUCCESS) ht_cl_fail(d, "clCreateProgramWithSource", err, __FILE__, __LINE__);
        strbuf log = {0};
        err = build_captured(d, opts, &log);
        if (err != CL_SUCCESS) fail_build(d, err, opts, &log);
        if (log.n && log.p[strspn(log.p, " \t\r\n")])
            ht_log_debug("compiler output for '%s':\n%s", d->info.name, log.p);
        free(log.p);
        if (use_cache) {
            size_t n = 0;
            HT_CL(d, clGetProgramInfo(d->program, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL));
            if (n > 0) {
                unsigned char *bin = ht_xmalloc(n);
                HT_CL(d, clGetProgramInfo(d->program, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL));
                cache_write(dir, path, bin, n);
                free(bin);
            }
        }
    }
    free(src.p);
    d->build_seconds = ht_now() - t0;
    ht_log_debug("program for '%s' %s in %.2f s", d->info.name,
                 d->cache_hit ? "loaded from cache" : "built", d->build_seconds);
    return HT_OK;
}
