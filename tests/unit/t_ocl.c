/* The OpenCL runtime layer: enumeration, selection errors, -cl-std choice, launches,
 * CLBlast SGEMM (all transposes, odd shapes, the MLP's real shapes) against a plain-C
 * reference, the program binary cache (miss, hit, corrupt entry rebuilt), kernels
 * loaded from HT_KERNEL_DIR, and a build failure reported with its build log. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ref.h"
#include "tap.h"
#include "testdev.h"

/* Leading dimensions are the operands' widths plus pad (a view into a wider matrix). */
static void check_gemm_ld(ht_dev *d, int ta, int tb, int m, int n, int k, float alpha, float beta,
                          int pad) {
    int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc;
    float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4), *c0 = malloc(nc * 4),
          *r = malloc(nc * 4);
    ref_fill_uniform(a, na, -1, 1, 11 + m);
    ref_fill_uniform(b, nb, -1, 1, 12 + n);
    ref_fill_uniform(c0, nc, -1, 1, 13 + k);
    /* A at a float offset of 3 inside its buffer exercises the offset arguments. */
    ht_buf *ba = ht_buf_new(d, (na + 3) * 4, "A"), *bb = ht_buf_new(d, nb * 4, "B"),
           *bc = ht_buf_new(d, nc * 4, "C");
    ht_buf_write(d, ba, 12, na * 4, a);
    ht_buf_write(d, bb, 0, nb * 4, b);
    ht_buf_write(d, bc, 0, nc * 4, c0);
    ht_sgemm(d, ta, tb, m, n, k, alpha, ba, 3, lda, bb, 0, ldb, beta, bc, 0, ldc);
    ht_buf_read(d, bc, 0, nc * 4, c);
    ref_gemm(ta, tb, m, n, k, 1, a, lda, b, ldb, 0, NULL, r, ldc);
    /* the padding columns of C must be left alone */
    for (size_t i = 0; i < nc; i++)
        r[i] = i % ldc < (size_t)n ? alpha * r[i] + beta * c0[i] : c0[i];
    /* fp32 accumulation over k terms of magnitude <= 1: error grows ~sqrt(k) * eps. */
    double err = tap_max_abserr(c, r, nc);
    double tol = (1e-6 * k + 1e-5) * (fabs(alpha) > 1 ? fabs(alpha) : 1);
    if (alpha == 1.0f && pad == 0)
        tap_ok(err < tol, "sgemm %c%c m=%d n=%d k=%d beta=%g: max abs err %.2e < %.1e",
               ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, beta, err, tol);
    else
        tap_ok(err < tol,
               "sgemm %c%c m=%d n=%d k=%d alpha=%g beta=%g ld pad %d: max abs err %.2e < %.1e",
               ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, beta, pad, err, tol);
    ht_buf_free(ba);
    ht_buf_free(bb);
    ht_buf_free(bc);
    free(a), free(b), free(c), free(c0), free(r);
}

static void check_gemm(ht_dev *d, int ta, int tb, int m, int n, int k, float beta) {
    check_gemm_ld(d, ta, tb, m, n, k, 1.0f, beta, 0);
}

/* Opens the device with the kernels of `dir` (a build that fails): ht_dev_open exits. */
static void open_broken(const char *dir) {
    setenv("HT_KERNEL_DIR", dir, 1);
    ht_dev_opts o = ht_dev_opts_default();
    o.cache = 0;
    ht_dev *d;
    ht_dev_open(&d, 0, &o);
}

/* Runs this program again as `--open-broken dir` with stderr captured; returns its exit
 * status and output. A fresh process, not a bare fork: the OpenCL runtime's threads in this
 * one may hold locks at fork time that the child would then wait on for ever. */
static int run_open_broken(const char *dir, char *out, size_t n) {
    int p[2];
    if (pipe(p) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 1);
        dup2(p[1], 2);
        execl("/proc/self/exe", "t_ocl.t", "--open-broken", dir, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    size_t len = 0;
    ssize_t r;
    while (len + 1 < n && (r = read(p[0], out + len, n - 1 - len)) > 0)
        len += (size_t)r;
    out[len] = 0;
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The SGEMM variant by measurement (src/ocl/choose.c), on an open device d (closed here):
 * with HT_GEMM forced, that variant and no times; with auto, the chosen variant measured,
 * faster than every variant tried before it and no more than 1/0.9 slower than any after it
 * (a later one must win by 10%), the tuning-file variant untried without a file, the native
 * one untried on a device without native kernels, and a
 * second open reads the same choice from the disk cache. */
static void check_gemm_choice(ht_dev *d) {
    const char *forced = getenv("HT_GEMM");
    ht_gemm_choice c = *ht_dev_gemm_choice(d);
    const char *name = ht_gemm_path_name(c.path);
    int idx = ht_dev_info(d)->index, any = 0, native = ht_dev_has_native(d);
    ht_dev_close(d);
    for (int v = 0; v < HT_GEMM_NVARIANTS; v++)
        any |= c.ms[v] != 0;
    if (forced && *forced && strcmp(forced, "auto")) {
        tap_ok(!strcmp(name, forced) && !any, "HT_GEMM=%s: the forced variant, nothing measured",
               forced);
        return;
    }
    int ok = c.path >= HT_GEMM_TILED && c.path < HT_GEMM_NVARIANTS && c.ms[c.path] > 0 &&
             c.ms[HT_GEMM_CLBLAST_TUNED] == 0 && c.ms[HT_GEMM_AUTO] == 0 &&
             (native || c.ms[HT_GEMM_NATIVE] == 0); /* never tried without native kernels */
    char times[256] = "";
    for (int v = HT_GEMM_TILED; v < HT_GEMM_NVARIANTS; v++) {
        if (ok && c.ms[v] > 0 && v < c.path) ok = c.ms[c.path] < c.ms[v];
        if (ok && c.ms[v] > 0 && v > c.path) ok = c.ms[v] >= 0.9 * c.ms[c.path];
        snprintf(times + strlen(times), sizeof times - strlen(times), " %s %.3g ms",
                 ht_gemm_path_name(v), c.ms[v]);
    }
    tap_ok(ok, "GEMM variant by measurement: %s (%s%s)", name, times,
           c.cached ? ", from the cache" : "");
    if (getenv("HT_NO_CACHE")) return;
    ht_exit_on_error(ht_dev_open(&d, idx, NULL));
    const ht_gemm_choice *again = ht_dev_gemm_choice(d);
    tap_ok(again->cached && again->path == c.path && !memcmp(again->ms, c.ms, sizeof c.ms),
           "reopened: the same choice from the cache (%s)", ht_gemm_path_name(again->path));
    ht_dev_close(d);
}

/* CLBlast keeps parameter overrides per device for the life of the process: after the
 * built-in set (GemmRoutine threshold 64, Xgemm tile 128, the values of conf/tuning/
 * pocl-cpu.cfg), a device opened with CLBlast's own variant must run CLBlast's own values
 * again, as CLBlast reported them before any override, and compute right. */
static void check_clblast_restore(int idx) {
    ht_dev_opts o = ht_dev_opts_default();
    o.gemm = HT_GEMM_CLBLAST;
    ht_dev *d;
    size_t own_t = 0, own_m = 0, t = 0, mwg = 0, t2 = 0, m2 = 0;
    ht_exit_on_error(ht_dev_open(&d, idx, &o));
    int rc = ht_dev_clblast_param(d, "GemmRoutine", "XGEMM_MIN_INDIRECT_SIZE", &own_t) |
             ht_dev_clblast_param(d, "Xgemm", "MWG", &own_m);
    ht_exit_on_error(ht_dev_tune(d, NULL));
    rc |= ht_dev_clblast_param(d, "GemmRoutine", "XGEMM_MIN_INDIRECT_SIZE", &t) |
          ht_dev_clblast_param(d, "Xgemm", "MWG", &mwg);
    ht_dev_close(d);
    ht_exit_on_error(ht_dev_open(&d, idx, &o));
    rc |= ht_dev_clblast_param(d, "GemmRoutine", "XGEMM_MIN_INDIRECT_SIZE", &t2) |
          ht_dev_clblast_param(d, "Xgemm", "MWG", &m2);
    tap_ok(rc == HT_OK && t == 64 && mwg == 128 && t2 == own_t && m2 == own_m,
           "CLBlast's own parameters restored after the built-in set (threshold %zu -> %zu -> "
           "%zu, Xgemm MWG %zu -> %zu -> %zu)",
           own_t, t, t2, own_m, mwg, m2);
    tap_ok(ht_dev_clblast_param(d, "Xgemm", "NOPE", &t) == HT_EINPUT &&
               strstr(ht_errmsg(), "'NOPE' of kernel 'Xgemm'"),
           "an unknown CLBlast parameter is HT_EINPUT naming it");
    check_gemm(d, 0, 1, 67, 45, 300, 0.0f); /* indirect under the built-in set */
    check_gemm(d, 1, 0, 13, 37, 29, 1.0f);
    ht_dev_close(d);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static ht_devinfo fake(int index, const char *type, const char *name, const char *vendor,
                       const char *platform, const char *pvendor) {
    ht_devinfo d;
    memset(&d, 0, sizeof d);
    d.index = index;
    snprintf(d.type, sizeof d.type, "%s", type);
    snprintf(d.name, sizeof d.name, "%s", name);
    snprintf(d.vendor, sizeof d.vendor, "%s", vendor);
    snprintf(d.platform, sizeof d.platform, "%s", platform);
    snprintf(d.platform_vendor, sizeof d.platform_vendor, "%s", pvendor);
    snprintf(d.clc_version, sizeof d.clc_version, "OpenCL C 1.2");
    return d;
}

/* ht_ocl_pick(list, sel, local rank) == want (pinned as given; -1: HT_EINPUT) */
static int picks(const ht_devinfo *l, int n, const char *sel, int local, int want, int pin) {
    int idx = -1, pinned = -1, rc = ht_ocl_pick(l, n, sel, local, &idx, &pinned);
    if (want < 0) return rc == HT_EINPUT && strstr(ht_errmsg(), "Devices:");
    return rc == HT_OK && idx == want && pinned == pin;
}

#define LONG_NAME "pthread-skylake-avx512-Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz"

/* Selection on made-up hosts (hand-computed answers, whatever this machine has): a host with
 * one CPU device (a long PoCL name) and two GPUs; one with two CPU implementations. */
static void check_pick(void) {
    ht_devinfo a[3] = {
        fake(0, "cpu", LONG_NAME, "GenuineIntel", "Portable Computing Language", "The pocl project"),
        fake(1, "gpu", "NVIDIA A100-SXM4-80GB", "NVIDIA Corporation", "NVIDIA CUDA", "NVIDIA Corporation"),
        fake(2, "gpu", "NVIDIA A100-SXM4-80GB", "NVIDIA Corporation", "NVIDIA CUDA", "NVIDIA Corporation")};
    tap_ok(picks(a, 3, "", 0, 1, 0) && picks(a, 3, "", 1, 2, 0) && picks(a, 3, "", 2, 1, 0),
           "1 CPU + 2 GPUs, \"\": local ranks 0, 1, 2 -> GPUs 1, 2, 1 (never the CPU)");
    tap_ok(picks(a, 3, "gpu", 0, 1, 0) && picks(a, 3, "gpu", 1, 2, 0) &&
               picks(a, 3, "nvidia", 1, 2, 0) && picks(a, 3, "A100", 3, 2, 0),
           "gpu / a name matching both GPUs: local rank 0 -> 1, 1 -> 2 (one each)");
    tap_ok(picks(a, 3, "cpu", 1, 0, 0) && picks(a, 3, "pocl", 0, 0, 0) &&
               picks(a, 3, "PoCL", 1, 0, 0),
           "cpu, pocl, PoCL (the platform's vendor 'The pocl project'): device 0 at any local rank");
    tap_ok(picks(a, 3, "gpu:1", 0, 2, 1) && picks(a, 3, "gpu:0", 1, 1, 1) &&
               picks(a, 3, "2", 0, 2, 1) && picks(a, 3, "0", 1, 0, 1),
           "gpu:1 is the second GPU (match N counted from 0), an index is that device: pinned, "
           "whatever the local rank");
    tap_ok(picks(a, 3, "  " LONG_NAME "  ", 1, 0, 0),
           "the whole long name (blanks around it, as copied) selects device 0");
    tap_ok(picks(a, 3, "gpu:2", 0, -1, 0) && strstr(ht_errmsg(), "gpu:0..gpu:1") &&
               picks(a, 3, "3", 0, -1, 0) && picks(a, 3, "amd", 0, -1, 0),
           "gpu:2 of 2 GPUs, index 3 of 3 devices, an unmatched name: HT_EINPUT");
    picks(a, 3, "no-such-vendor-xyz", 0, -1, 0);
    tap_ok(strstr(ht_errmsg(), "'no-such-vendor-xyz'") && strstr(ht_errmsg(), LONG_NAME),
           "unmatched selector on a made-up host: the message lists the whole long name");
    /* a name copied from the table, at the device column's position, selects its device */
    char *table = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&table, &len);
    ht_ocl_format_devices(f, a, 3);
    fclose(f);
    const char *col = strstr(table, "device"), *row = strchr(table, '\n') + 1;
    const size_t at = (size_t)(col - table), wd = strlen(LONG_NAME);
    int ok = 1;
    for (int i = 0; i < 3; i++, row = strchr(row, '\n') + 1) {
        char copy[256];
        snprintf(copy, sizeof copy, "%.*s", (int)wd, row + at); /* the whole column, padding too */
        ok &= picks(a, 3, copy, 0, i == 2 ? 1 : i, 0) && !strncmp(copy, a[i].name, strlen(a[i].name));
    }
    tap_ok(ok, "every name copied from the table's device column selects its device (identical "
               "GPU names: the first)");
    free(table);
    ht_devinfo b[2] = {
        fake(0, "cpu", "pthread-haswell-AMD EPYC", "AuthenticAMD", "Portable Computing Language", "The pocl project"),
        fake(1, "cpu", "llvmpipe (LLVM 15.0.6, 256 bits)", "Mesa/X.org", "rusticl", "Mesa/X.org")};
    tap_ok(picks(b, 2, "", 1, 0, 0) && picks(b, 2, "cpu", 1, 1, 0) && picks(b, 2, "cpu", 2, 0, 0) &&
               picks(b, 2, "rusticl", 0, 1, 0),
           "CPU devices only: \"\" keeps every rank on device 0; cpu spreads local ranks 0, 1, 2 "
           "over 0, 1, 0");
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--open-broken")) {
        open_broken(argv[2]);
        return 0;
    }
    const ht_devinfo *list;
    int n = 0, rc = ht_ocl_devices(&list, &n);
    tap_ok(rc == HT_OK && n >= 1, "enumerates %d device(s)", n);
    tap_ok(list[0].max_wg >= 1 && list[0].compute_units >= 1 && list[0].clc_version[0],
           "device 0 reports limits: max_wg %zu, CUs %u, '%s'", list[0].max_wg,
           list[0].compute_units, list[0].clc_version);

    /* selection */
    check_pick();
    int idx = -1;
    tap_ok(ht_ocl_select("0", &idx) == HT_OK && idx == 0, "selector '0' -> index 0");
    tap_ok(ht_ocl_select(list[0].type, &idx) == HT_OK && idx == 0, "selector '%s' -> index 0",
           list[0].type);
    int want = -1; /* "": the first GPU, else the first accelerator, else device 0 */
    for (int i = 0; i < n && want < 0; i++)
        if (!strcmp(list[i].type, "gpu")) want = i;
    for (int i = 0; i < n && want < 0; i++)
        if (!strcmp(list[i].type, "accel")) want = i;
    tap_ok(ht_ocl_select("", &idx) == HT_OK && idx == (want < 0 ? 0 : want),
           "empty selector -> device %d (first GPU, else accelerator, else 0)", idx);
    rc = ht_ocl_select("no-such-vendor-xyz", &idx);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "no-such-vendor-xyz") &&
               strstr(ht_errmsg(), list[0].name),
           "unmatched selector: HT_EINPUT naming it and listing devices");
    rc = ht_ocl_select("99", &idx);
    tap_ok(rc == HT_EINPUT, "index past the last device: HT_EINPUT");

    /* -cl-std from CL_DEVICE_OPENCL_C_VERSION */
    tap_ok(!strcmp(ht_ocl_clstd("OpenCL C 1.1 "), "-cl-std=CL1.1") &&
               !strcmp(ht_ocl_clstd("OpenCL C 1.2 PoCL"), "-cl-std=CL1.2") &&
               !strcmp(ht_ocl_clstd("OpenCL C 3.0 "), "-cl-std=CL1.2"),
           "-cl-std follows the device's OpenCL C version (1.1, 1.2, 3.0 -> CL1.2)");

    /* program cache: miss, hit, corrupt entry rebuilt */
    char dir[] = "/tmp/ht_cacheXXXXXX";
    if (!mkdtemp(dir)) return 1;
    ht_dev_opts o = ht_dev_opts_default();
    o.cache_dir = dir;
    ht_dev *d;
    int hit = -1;
    ht_exit_on_error(ht_dev_open(&d, 0, &o));
    double t_build = ht_dev_build_seconds(d, &hit);
    tap_ok(hit == 0, "first open builds from source (%.2f s)", t_build);
    ht_dev_close(d);
    ht_exit_on_error(ht_dev_open(&d, 0, &o));
    double t_hit = ht_dev_build_seconds(d, &hit);
    tap_ok(hit == 1, "second open loads the cached binary (%.3f s)", t_hit);
    ht_dev_close(d);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "for f in %s/*.clbin; do printf 'garbage' | dd of=$f bs=1 seek=40 "
             "conv=notrunc 2>/dev/null; done",
             dir);
    tap_ok(system(cmd) == 0, "corrupted the cache entry");
    ht_exit_on_error(ht_dev_open(&d, 0, &o));
    ht_dev_build_seconds(d, &hit);
    tap_ok(hit == 0, "corrupt cache entry is detected and rebuilt, not fatal");
    ht_dev_close(d);
    ht_exit_on_error(ht_dev_open(&d, 0, &o));
    ht_dev_build_seconds(d, &hit);
    tap_ok(hit == 1, "rebuilt entry is used next time");
    ht_dev_close(d);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", dir);

    /* kernels from HT_KERNEL_DIR, and a build failure with its log */
    char kdir[] = "/tmp/ht_kdirXXXXXX";
    if (!mkdtemp(kdir)) return 1;
    char path[256];
    snprintf(path, sizeof path, "%s/k.cl", kdir);
    write_file(path, "__kernel void twice(__global float *x, const int n) {\n"
                     "  int i = get_global_id(0); if (i < n) x[i] *= 2.0f; }\n");
    setenv("HT_KERNEL_DIR", kdir, 1);
    o = ht_dev_opts_default();
    o.cache = 0;
    ht_exit_on_error(ht_dev_open(&d, 0, &o));
    float v[5] = {1, 2, 3, 4, 5}, w[5];
    ht_buf *b = ht_buf_new(d, sizeof v, "v");
    ht_buf_write(d, b, 0, sizeof v, v);
    ht_launch1d(d, "twice", 5, HT_BUF(b), HT_INT(5));
    ht_buf_read(d, b, 0, sizeof w, w);
    tap_ok(w[0] == 2 && w[4] == 10, "kernel loaded from HT_KERNEL_DIR runs (x*2: %g..%g)", w[0],
           w[4]);
    ht_buf_free(b);
    ht_dev_close(d);
    unsetenv("HT_KERNEL_DIR");
    write_file(path, "__kernel void broken(__global float *x) { x[0] = undefined_name; }\n");
    char out[8192];
    int st = run_open_broken(kdir, out, sizeof out);
    tap_ok(st == 1 && strstr(out, "clBuildProgram") && strstr(out, "CL_BUILD_PROGRAM_FAILURE") &&
               strstr(out, "undefined_name") && strstr(out, list[0].name),
           "build failure exits 1 with device, call, CL error name and build log (exit %d)", st);
    snprintf(cmd, sizeof cmd, "rm -rf %s", kdir);
    if (system(cmd) != 0) tap_diag("could not remove %s", kdir);

    /* launches and GEMM on the embedded program */
    d = test_dev_open();
    float f[37];
    b = ht_buf_new(d, sizeof f, "fill");
    ht_launch1d(d, "fill_f32", 30, HT_BUF(b), HT_INT(7), HT_INT(30), HT_FLOAT(2.5f));
    ht_buf_read(d, b, 28, 4 * 9, f + 7);
    tap_ok(f[7] == 2.5f && f[15] == 2.5f, "fill_f32 with an offset and n not a multiple of 64");
    ht_buf_free(b);

    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            check_gemm(d, ta, tb, 13, 37, 29, ta ? 1.0f : 0.0f);
    check_gemm(d, 0, 0, 1, 10, 1, 0.0f);
    /* alpha, beta and leading dimensions wider than the operands, at shapes with partial
     * 6-row and 16-column tiles, k past the packing chunks (256 steps), and more panels than
     * one packing work-item takes (21 of A^T, 8 of B) */
    check_gemm_ld(d, 0, 0, 37, 53, 300, 0.5f, 0.25f, 5);
    check_gemm_ld(d, 1, 1, 20, 33, 17, -1.5f, 1.0f, 3);
    check_gemm_ld(d, 0, 1, 7, 16, 513, 2.0f, 0.0f, 1);
    check_gemm_ld(d, 1, 0, 131, 300, 40, 1.0f, 0.5f, 7);
    /* one column panel with A read in place (gemm_rows): rows past M in the last tile */
    check_gemm_ld(d, 0, 1, 13, 10, 1027, 1.0f, 0.5f, 2);
    check_gemm_ld(d, 0, 0, 5, 3, 7, -0.5f, 0.0f, 4);
    /* The MLP's forward and weight-gradient shapes (784-1024 layer, batch 256). */
    check_gemm(d, 0, 1, 256, 1024, 784, 0.0f);
    check_gemm(d, 1, 0, 1024, 784, 256, 0.0f);
    const int at = ht_dev_info(d)->index;
    check_gemm_choice(d);
    check_clblast_restore(at);
    return tap_done();
}
