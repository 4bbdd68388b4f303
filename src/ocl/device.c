/* Devices: enumeration across all platforms, selection, and opening a device
 * (context, in-order queue, program, CLBlast tuning); buffers on an opened device. */
#include "ocl/internal.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"

/* ---------------------------------------------------------------- enumeration */

static ht_devinfo *g_devs;
static cl_device_id *g_ids;
static cl_platform_id *g_plats;
static int g_ndev = -1;

/* Blanks around a name dropped (some drivers pad them), so that the table shows what a
 * selector can match. */
static void trim(char *s) {
    size_t b = 0, l = strlen(s);
    while (l && isspace((unsigned char)s[l - 1]))
        s[--l] = 0;
    while (s[b] && isspace((unsigned char)s[b]))
        b++;
    memmove(s, s + b, l - b + 1);
}

static void str_info(cl_device_id id, cl_device_info what, char *out, size_t n) {
    if (clGetDeviceInfo(id, what, n, out, NULL) != CL_SUCCESS) ht_strlcpy(out, "?", n);
    out[n - 1] = 0;
    trim(out);
}

static void fill_info(ht_devinfo *di, cl_platform_id p, cl_device_id id) {
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof di->platform, di->platform, NULL);
    clGetPlatformInfo(p, CL_PLATFORM_VENDOR, sizeof di->platform_vendor, di->platform_vendor,
                      NULL);
    clGetPlatformInfo(p, CL_PLATFORM_VERSION, sizeof di->platform_version, di->platform_version,
                      NULL);
    di->platform[sizeof di->platform - 1] = 0;
    di->platform_version[sizeof di->platform_version - 1] = 0;
    di->platform_vendor[sizeof di->platform_vendor - 1] = 0;
    trim(di->platform);
    trim(di->platform_vendor);
    str_info(id, CL_DEVICE_VENDOR, di->vendor, sizeof di->vendor);
    str_info(id, CL_DEVICE_NAME, di->name, sizeof di->name);
    str_info(id, CL_DRIVER_VERSION, di->driver, sizeof di->driver);
    str_info(id, CL_DEVICE_OPENCL_C_VERSION, di->clc_version, sizeof di->clc_version);
    cl_device_type t = 0;
    clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof t, &t, NULL);
    ht_strlcpy(di->type,
               (t & CL_DEVICE_TYPE_GPU)           ? "gpu"
               : (t & CL_DEVICE_TYPE_CPU)         ? "cpu"
               : (t & CL_DEVICE_TYPE_ACCELERATOR) ? "accel"
                                                  : "other",
               sizeof di->type);
    cl_uint u = 0;
    clGetDeviceInfo(id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof u, &u, NULL);
    di->compute_units = u;
    u = 0;
    clGetDeviceInfo(id, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof u, &u, NULL);
    di->clock_mhz = u;
    cl_ulong l = 0;
    clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof l, &l, NULL);
    di->global_mem = l;
    l = 0;
    clGetDeviceInfo(id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof l, &l, NULL);
    di->local_mem = l;
    l = 0;
    clGetDeviceInfo(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof l, &l, NULL);
    di->max_alloc = l;
    size_t s = 0;
    clGetDeviceInfo(id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof s, &s, NULL);
    di->max_wg = s;
}

int ht_ocl_devices(const ht_devinfo **list, int *n) {
    if (g_ndev < 0) {
        cl_uint np = 0;
        cl_int err = clGetPlatformIDs(0, NULL, &np);
        if (err != CL_SUCCESS && err != -1001 /* CL_PLATFORM_NOT_FOUND_KHR */)
            return ht_error(HT_ERUNTIME, "clGetPlatformIDs failed: %s (%d)", ht_clerr_name(err),
                            (int)err);
        if (np == 0)
            return ht_error(HT_ERUNTIME,
                            "no OpenCL platform found (install an ICD, e.g. pocl-opencl-icd for "
                            "CPUs; check /etc/OpenCL/vendors)");
        cl_platform_id *plats = ht_xcalloc(np, sizeof *plats);
        clGetPlatformIDs(np, plats, NULL);
        int total = 0, cap = 8;
        g_devs = ht_xcalloc(cap, sizeof *g_devs);
        g_ids = ht_xcalloc(cap, sizeof *g_ids);
        g_plats = ht_xcalloc(cap, sizeof *g_plats);
        for (cl_uint p = 0; p < np; p++) {
            cl_uint nd = 0;
            if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || !nd)
                continue;
            cl_device_id *ids = ht_xcalloc(nd, sizeof *ids);
            clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, ids, NULL);
            for (cl_uint i = 0; i < nd; i++) {
                if (total == cap) {
                    cap *= 2;
                    g_devs = ht_xrealloc(g_devs, cap * sizeof *g_devs);
                    g_ids = ht_xrealloc(g_ids, cap * sizeof *g_ids);
                    g_plats = ht_xrealloc(g_plats, cap * sizeof *g_plats);
                }
                memset(&g_devs[total], 0, sizeof g_devs[total]);
                fill_info(&g_devs[total], plats[p], ids[i]);
                g_devs[total].index = total;
                g_devs[total].platform_index = (int)p;
                g_ids[total] = ids[i];
                g_plats[total] = plats[p];
                total++;
            }
            free(ids);
        }
        free(plats);
        if (total == 0)
            return ht_error(HT_ERUNTIME, "OpenCL platforms found, but no devices in them");
        g_ndev = total;
    }
    *list = g_devs;
    *n = g_ndev;
    return HT_OK;
}

cl_device_id ht_ocl_device_id(int index, cl_platform_id *platform) {
    *platform = g_plats[index];
    return g_ids[index];
}

/* The widest text of one column (at least its header), so that no name is cut: a name
 * copied from the table must select its device (issue 31: "pthread-skylake-avx512-Intel(R)"
 * was cut at 32 characters). */
static int col_width(const ht_devinfo *d, int n, size_t field, const char *head) {
    size_t w = strlen(head);
    for (int i = 0; i < n; i++) {
        size_t l = strlen((const char *)&d[i] + field);
        if (l > w) w = l;
    }
    return (int)w;
}

void ht_ocl_format_devices(FILE *f, const ht_devinfo *d, int n) {
    const int wp = col_width(d, n, offsetof(ht_devinfo, platform), "platform");
    const int wv = col_width(d, n, offsetof(ht_devinfo, vendor), "vendor");
    const int wd = col_width(d, n, offsetof(ht_devinfo, name), "device");
    fprintf(f, "%-3s  %-*s  %-*s  %-*s  %-5s %4s %6s %9s %6s  %s\n", "idx", wp, "platform", wv,
            "vendor", wd, "device", "type", "CUs", "MHz", "mem(MiB)", "maxWG", "OpenCL C");
    for (int i = 0; i < n; i++)
        fprintf(f, "%-3d  %-*s  %-*s  %-*s  %-5s %4u %6u %9llu %6zu  %s\n", d[i].index, wp,
                d[i].platform, wv, d[i].vendor, wd, d[i].name, d[i].type, d[i].compute_units,
                d[i].clock_mhz, (unsigned long long)(d[i].global_mem >> 20), d[i].max_wg,
                d[i].clc_version);
}

void ht_ocl_print_devices(FILE *f) {
    const ht_devinfo *d;
    int n;
    if (ht_ocl_devices(&d, &n) != HT_OK) {
        fprintf(f, "%s\n", ht_errmsg());
        return;
    }
    ht_ocl_format_devices(f, d, n);
}

/* ---------------------------------------------------------------- selection */

static int icontains(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n) return 1;
    }
    return n == 0;
}

static int all_digits(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

static int is_kind(const char *s) {
    return !strcmp(s, "cpu") || !strcmp(s, "gpu") || !strcmp(s, "accel");
}

/* A kind matches the device type; any other text is a case-insensitive substring of the
 * device name, its vendor, or its platform's name or vendor ("pocl": PoCL's platform vendor
 * is "The pocl project", its name "Portable Computing Language"). */
static int matches(const ht_devinfo *d, const char *sel) {
    if (is_kind(sel)) return !strcmp(d->type, sel);
    return icontains(d->name, sel) || icontains(d->vendor, sel) || icontains(d->platform, sel) ||
           icontains(d->platform_vendor, sel);
}

/* The devices sel matches, in index order, into m[0..n); their count. */
static int match_all(const ht_devinfo *d, int n, const char *sel, int *m) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (matches(&d[i], sel)) m[k++] = i;
    return k;
}

/* "": the host's GPUs, else its accelerators (a rank takes the one at its local rank); with
 * neither, device 0 alone: several CPU devices are one processor seen through several
 * OpenCL implementations, so spreading ranks over them gains no cores and mixes
 * implementations (name them, e.g. "cpu", to spread). */
static int match_default(const ht_devinfo *d, int n, int *m) {
    int k = match_all(d, n, "gpu", m);
    if (!k) k = match_all(d, n, "accel", m);
    if (!k) m[k++] = 0;
    return k;
}

static int no_match(const ht_devinfo *d, int n, const char *selector, const char *why) {
    char *table = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&table, &len);
    if (f) {
        ht_ocl_format_devices(f, d, n);
        fclose(f);
    }
    int rc = ht_error(HT_EINPUT,
                      "device selector '%s' %s; expected an index, cpu, gpu, accel, or a "
                      "case-insensitive substring of a device, vendor or platform name "
                      "(optionally :N for match N, counted from 0). Devices:\n%s",
                      selector, why, table ? table : "");
    free(table);
    return rc;
}

int ht_ocl_pick(const ht_devinfo *d, int n, const char *selector, int local_rank, int *index,
                int *pinned) {
    char sel[256], why[128] = "matches no device";
    ht_strlcpy(sel, selector ? selector : "", sizeof sel);
    trim(sel); /* a name copied from the padded table may keep a blank */
    int *m = ht_xcalloc((size_t)(n ? n : 1), sizeof *m), k = 0, nth = -1;
    char *colon = strrchr(sel, ':');
    /* "name:N" is match N of "name", unless the whole text is itself in a name */
    if (colon && all_digits(colon + 1) && !match_all(d, n, sel, m)) {
        nth = strlen(colon + 1) < 6 ? atoi(colon + 1) : 999999; /* past any device count */
        *colon = 0;
    }
    if (all_digits(sel)) { /* an index: that device, whatever the local rank */
        const int i = atoi(sel);
        if (strlen(sel) < 6 && i < n && nth <= 0) m[k++] = i, nth = 0;
        else snprintf(why, sizeof why, "names no device (indices 0..%d)", n - 1);
    } else {
        k = sel[0] ? match_all(d, n, sel, m) : match_default(d, n, m);
        if (k && nth >= k)
            snprintf(why, sizeof why, "asks for match %d, but '%s' matches %d device%s "
                     "(counted from 0: %s:0..%s:%d)", nth, sel, k, k > 1 ? "s" : "", sel, sel,
                     k - 1), k = 0;
    }
    if (!k) {
        free(m);
        return no_match(d, n, selector ? selector : "", why);
    }
    if (pinned) *pinned = nth >= 0;
    *index = m[nth >= 0 ? nth : (local_rank > 0 ? local_rank : 0) % k];
    free(m);
    return HT_OK;
}

int ht_ocl_select_local(const char *selector, int local_rank, int *index, int *pinned) {
    const ht_devinfo *d;
    int n, rc = ht_ocl_devices(&d, &n);
    return rc != HT_OK ? rc : ht_ocl_pick(d, n, selector, local_rank, index, pinned);
}

int ht_ocl_select(const char *selector, int *index) {
    return ht_ocl_select_local(selector, 0, index, NULL);
}

const char *ht_ocl_clstd(const char *clc) {
    /* "OpenCL C 1.1 ..." -> CL1.1; anything newer runs our 1.2 kernels as CL1.2. */
    const char *v = strstr(clc, "OpenCL C ");
    if (v && !strncmp(v + 9, "1.0", 3)) return "-cl-std=CL1.0";
    if (v && !strncmp(v + 9, "1.1", 3)) return "-cl-std=CL1.1";
    return "-cl-std=CL1.2";
}

/* ---------------------------------------------------------------- opened device */

ht_dev_opts ht_dev_opts_default(void) {
    ht_dev_opts o = {.cache = 1, .cache_dir = NULL, .tuning = NULL, .profile = 0,
                     .gemm = HT_GEMM_AUTO};
    const char *e = getenv("HT_GEMM");
    if (!e || !*e) return o;
    for (o.gemm = 0; o.gemm < HT_GEMM_NVARIANTS; o.gemm++)
        if (!strcmp(e, ht_gemm_name(o.gemm))) return o;
    ht_die(HT_EINPUT,
           "HT_GEMM='%s': expected auto, tiled, native, clblast, clblast-cpu or clblast-tuned",
           e);
    return o;
}

/* CLBlast's parameter sets: its own read back, the tuning file checked by applying it, a
 * forced variant's set applied (with HT_GEMM_AUTO the choice applies the winner's). */
static int open_gemm(ht_dev *d) {
    ht_native_open(d);
    if (d->gemm == HT_GEMM_NATIVE && !d->native)
        return ht_error(HT_EINPUT, "HT_GEMM=native on device '%s': it does not run native "
                                   "kernels on host memory (CL_EXEC_NATIVE_KERNEL on a CPU "
                                   "device); expected auto, tiled or a clblast variant",
                        d->info.name);
    if (d->gemm == HT_GEMM_CLBLAST_TUNED && !d->tuning[0])
        return ht_error(HT_EINPUT, "HT_GEMM=clblast-tuned on device '%s': no tuning file "
                                   "(device.tuning, or the profile's) was given",
                        d->info.name);
    int rc = ht_blas_open(d);
    if (rc == HT_OK && d->tuning[0]) rc = ht_blas_use(d, HT_GEMM_CLBLAST_TUNED);
    if (rc == HT_OK && d->gemm >= HT_GEMM_CLBLAST) rc = ht_blas_use(d, d->gemm);
    return rc;
}

int ht_dev_open(ht_dev **out, int index, const ht_dev_opts *opts) {
    const ht_devinfo *list;
    int n, rc = ht_ocl_devices(&list, &n);
    if (rc != HT_OK) return rc;
    if (index < 0 || index >= n)
        return ht_error(HT_EINPUT, "device index %d out of range (0..%d)", index, n - 1);
    ht_dev_opts def = ht_dev_opts_default();
    if (!opts) opts = &def;
    if (opts->gemm < 0 || opts->gemm >= HT_GEMM_NVARIANTS)
        return ht_error(HT_EINPUT, "ht_dev_open: GEMM variant %d out of range", opts->gemm);
    ht_dev *d = ht_xcalloc(1, sizeof *d);
    d->info = list[index];
    d->device = ht_ocl_device_id(index, &d->platform);
    d->profile = opts->profile ? HT_PROF_EVENTS : HT_PROF_OFF;
    const char *pt = getenv("HT_PROFILE_TIMING");
    if (pt && !strcmp(pt, "host") && d->profile) d->profile = HT_PROF_HOST;
    else if (pt && *pt && strcmp(pt, "events") && strcmp(pt, "host"))
        ht_die(HT_EINPUT, "HT_PROFILE_TIMING='%s': expected events or host", pt);
    if (opts->profile == HT_PROF_HOST) d->profile = HT_PROF_HOST;
    if (clGetDeviceInfo(d->device, CL_DEVICE_PROFILING_TIMER_RESOLUTION,
                        sizeof d->prof_resolution, &d->prof_resolution, NULL) != CL_SUCCESS)
        d->prof_resolution = 0;
    d->gemm = opts->gemm;
    ht_strlcpy(d->tuning, opts->tuning ? opts->tuning : "", sizeof d->tuning);
    cl_int err;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->platform, 0};
    d->ctx = clCreateContext(props, 1, &d->device, NULL, NULL, &err);
    if (err != CL_SUCCESS) ht_cl_fail(d, "clCreateContext", err, __FILE__, __LINE__);
    d->queue = clCreateCommandQueue(d->ctx, d->device,
                                    d->profile == HT_PROF_EVENTS ? CL_QUEUE_PROFILING_ENABLE : 0,
                                    &err);
    if (err != CL_SUCCESS) ht_cl_fail(d, "clCreateCommandQueue", err, __FILE__, __LINE__);
    rc = ht_program_build(d, opts);
    if (rc == HT_OK) rc = open_gemm(d);
    if (rc != HT_OK) {
        ht_dev_close(d);
        return rc;
    }
    *out = d;
    return HT_OK;
}

void ht_dev_close(ht_dev *d) {
    if (!d) return;
    if (d->queue) clFinish(d->queue);
    ht_dev_profile_reset(d);
    if (d->gemm_ws) ht_buf_free(d->gemm_ws);
    free(d->pending);
    free(d->sums);
    for (int i = 0; i < d->nkerns; i++) clReleaseKernel(d->kerns[i].k);
    free(d->kerns);
    if (d->program) clReleaseProgram(d->program);
    if (d->queue) clReleaseCommandQueue(d->queue);
    if (d->ctx) clReleaseContext(d->ctx);
    free(d);
}

const ht_devinfo *ht_dev_info(const ht_dev *d) { return &d->info; }
void ht_dev_finish(ht_dev *d) {
    HT_CL(d, clFinish(d->queue));
    ht_native_check(d, __FILE__, __LINE__);
}

double ht_dev_build_seconds(const ht_dev *d, int *cache_hit) {
    if (cache_hit) *cache_hit = d->cache_hit;
    return d->build_seconds;
}

/* ---------------------------------------------------------------- buffers */

ht_buf *ht_buf_new(ht_dev *d, size_t bytes, const char *what) {
    if (bytes > d->info.max_alloc)
        ht_die(HT_ERUNTIME,
               "device '%s': buffer '%s' needs %zu bytes, more than CL_DEVICE_MAX_MEM_ALLOC_SIZE "
               "(%llu); use a smaller batch or model",
               d->info.name, what, bytes, (unsigned long long)d->info.max_alloc);
    ht_buf *b = ht_xcalloc(1, sizeof *b);
    cl_int err;
    b->dev = d;
    b->size = bytes;
    ht_strlcpy(b->what, what, sizeof b->what);
    b->mem = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, bytes ? bytes : 4, NULL, &err);
    if (err != CL_SUCCESS) ht_cl_fail(d, "clCreateBuffer", err, __FILE__, __LINE__);
    d->mem_now += bytes;
    if (d->mem_now > d->mem_peak) d->mem_peak = d->mem_now;
    return b;
}

void ht_buf_free(ht_buf *b) {
    if (!b) return;
    b->dev->mem_now -= b->size;
    clReleaseMemObject(b->mem);
    free(b);
}

size_t ht_buf_size(const ht_buf *b) { return b->size; }

void ht_dev_mem(ht_dev *d, uint64_t *now, uint64_t *peak, uint64_t *gemm_ws, int reset_peak) {
    if (now) *now = d->mem_now;
    if (peak) *peak = d->mem_peak;
    if (gemm_ws) *gemm_ws = d->gemm_ws ? d->gemm_ws->size : 0;
    if (reset_peak) d->mem_peak = d->mem_now;
}

static void check_range(const ht_buf *b, size_t off, size_t bytes, const char *op) {
    if (off > b->size || bytes > b->size - off)
        ht_die(HT_ERUNTIME, "device '%s': %s of %zu bytes at offset %zu outside buffer '%s' (%zu bytes)",
               b->dev->info.name, op, bytes, off, b->what, b->size);
}

void ht_buf_write(ht_dev *d, ht_buf *b, size_t off, size_t bytes, const void *src) {
    if (!bytes) return;
    check_range(b, off, bytes, "write");
    HT_CL(d, clEnqueueWriteBuffer(d->queue, b->mem, CL_TRUE, off, bytes, src, 0, NULL, NULL));
}

void ht_buf_read(ht_dev *d, const ht_buf *b, size_t off, size_t bytes, void *dst) {
    if (!bytes) return;
    check_range(b, off, bytes, "read");
    HT_CL(d, clEnqueueReadBuffer(d->queue, b->mem, CL_TRUE, off, bytes, dst, 0, NULL, NULL));
    ht_native_check(d, __FILE__, __LINE__);
}

void ht_buf_zero(ht_dev *d, ht_buf *b, size_t off, size_t bytes) {
    if (!bytes) return;
    check_range(b, off, bytes, "fill");
    const cl_uchar zero = 0;
    HT_CL(d, clEnqueueFillBuffer(d->queue, b->mem, &zero, 1, off, bytes, 0, NULL, NULL));
}

void ht_buf_copy(ht_dev *d, ht_buf *dst, size_t dst_off, const ht_buf *src, size_t src_off,
                 size_t bytes) {
    if (!bytes) return;
    check_range(dst, dst_off, bytes, "copy");
    check_range(src, src_off, bytes, "copy");
    HT_CL(d, clEnqueueCopyBuffer(d->queue, src->mem, dst->mem, src_off, dst_off, bytes, 0, NULL,
                                 NULL));
}
