/* The OpenCL runtime seen by the rest of hettrain: devices of every platform, one
 * context + in-order queue per opened device, buffers, kernels launched by name from
 * the embedded cl/ program (built once, binaries cached on disk), and CLBlast GEMM.
 * This directory is the only code that calls OpenCL; nothing here exposes CL types.
 * Runtime failures exit 1 naming the device, the call, the CL error and the call site. */
#ifndef HT_OCL_OCL_H
#define HT_OCL_OCL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/roofline.h" /* ht_roof: the ceilings the profile table compares with */

/* ---------------------------------------------------------------- devices */

typedef struct ht_devinfo {
    int index;                 /* position in the global list, across platforms */
    int platform_index;
    char platform[128];        /* platform name */
    char platform_vendor[128]; /* CL_PLATFORM_VENDOR ("The pocl project") */
    char platform_version[128];
    char vendor[128];
    char name[128];
    char driver[64];           /* CL_DRIVER_VERSION */
    char clc_version[64];      /* CL_DEVICE_OPENCL_C_VERSION */
    char type[8];              /* "cpu", "gpu", "accel", "other" */
    unsigned compute_units;
    unsigned clock_mhz;
    uint64_t global_mem;
    uint64_t local_mem;
    uint64_t max_alloc;
    size_t max_wg;
} ht_devinfo;

/* Enumerates every device of every platform (once; later calls return the same list).
 * Returns HT_ERUNTIME when no OpenCL platform is installed. */
int ht_ocl_devices(const ht_devinfo **list, int *n);
/* The table printed by --list-devices: every column as wide as its widest entry, so that
 * a name copied from it selects the device. ht_ocl_format_devices prints any list. */
void ht_ocl_print_devices(FILE *f);
void ht_ocl_format_devices(FILE *f, const ht_devinfo *list, int n);
/* Resolves a selector for the local_rank-th rank of a host (0 for a single process):
 *  - an index ("1"), or "SEL:N", match N of SEL counted from 0 ("cpu:1" is the second
 *    CPU device): that device whatever the local rank (*pinned = 1);
 *  - a kind ("cpu", "gpu", "accel") or a case-insensitive substring of a device name, its
 *    vendor, or its platform's name or vendor ("pocl", "nvidia"): match number
 *    local_rank % matches, so that the ranks of a host take one device each;
 *  - "": the same over the host's GPUs, else its accelerators, else device 0 alone
 *    (several CPU devices are one processor: spreading ranks over them gains nothing).
 * Blanks around the selector are ignored. No match: HT_EINPUT with the devices listed.
 * pinned may be NULL. ht_ocl_pick works on any list (tests); ht_ocl_select_local on the
 * enumerated one; ht_ocl_select(s, i) is ht_ocl_select_local(s, 0, i, NULL). */
int ht_ocl_pick(const ht_devinfo *list, int n, const char *selector, int local_rank, int *index,
                int *pinned);
int ht_ocl_select_local(const char *selector, int local_rank, int *index, int *pinned);
int ht_ocl_select(const char *selector, int *index);
/* "-cl-std=CL1.x" for a CL_DEVICE_OPENCL_C_VERSION string (kernels are OpenCL C 1.2). */
const char *ht_ocl_clstd(const char *clc_version);

/* ---------------------------------------------------------------- opened device */

typedef struct ht_dev ht_dev;
typedef struct ht_buf ht_buf;

/* SGEMM variants: a path (our tiled kernels, OpenBLAS in a native kernel on CPU devices that
 * run native kernels, or CLBlast) and, for CLBlast, a parameter set:
 * CLBlast's own database entry for the device, the built-in set tuned on a CPU device
 * (src/ocl/blas.c), or the tuning file (device.tuning / the profile's, on top of the
 * built-in set). HT_GEMM_AUTO picks one per device by measurement (src/ocl/choose.c); every
 * variant is tried on every device, so a new vendor needs a set, never an if on its name. */
enum {
    HT_GEMM_AUTO = 0,
    HT_GEMM_TILED,
    HT_GEMM_NATIVE,        /* OpenBLAS in a native kernel (src/ocl/native.c) */
    HT_GEMM_CLBLAST,       /* CLBlast's own parameters */
    HT_GEMM_CLBLAST_CPU,   /* the built-in set */
    HT_GEMM_CLBLAST_TUNED, /* the tuning file (only with one) */
    HT_GEMM_NVARIANTS
};
/* "auto", "tiled", "native", "clblast", "clblast-cpu", "clblast-tuned" (HT_GEMM's values); NULL out of
 * range. Inline so that the profile reader (fuzzed without OpenCL) shares the one list. */
static inline const char *ht_gemm_name(int v) {
    static const char *const names[HT_GEMM_NVARIANTS] = {"auto", "tiled", "native", "clblast",
                                                         "clblast-cpu", "clblast-tuned"};
    return v >= 0 && v < HT_GEMM_NVARIANTS ? names[v] : NULL;
}
/* Per-kernel timing: none; the device's profiling events (start/end timestamps); or the
 * host clock around each launch, the queue finished before and after it (slower: no
 * overlap, every launch waited for; for devices without timestamps, such as rusticl). */
enum { HT_PROF_OFF = 0, HT_PROF_EVENTS = 1, HT_PROF_HOST = 2 };

typedef struct ht_dev_opts {
    int cache;              /* program binary cache (default 1 via ht_dev_opts_default) */
    const char *cache_dir;  /* NULL/"" = $HT_CACHE_DIR, $XDG_CACHE_HOME/hettrain, ~/.cache/hettrain */
    const char *tuning;     /* CLBlast tuning file (libconfig); NULL/"" = none */
    int profile;            /* HT_PROF_*: record per-kernel times; ht_dev_open turns
                               HT_PROF_EVENTS into HT_PROF_HOST when $HT_PROFILE_TIMING=host */
    int gemm; /* HT_GEMM_AUTO (the fastest variant on this device, measured: see
                 ht_dev_gemm_choice) or a variant forced; default from $HT_GEMM */
} ht_dev_opts;

/* Defaults; gemm from $HT_GEMM (auto or a variant's name; another value exits 2). */
ht_dev_opts ht_dev_opts_default(void);
/* Opens device `index`: context, queue, the kernel program (cached); a tuning file is read
 * and checked here, a forced CLBlast variant's parameters applied. HT_EINPUT for a bad
 * tuning file, HT_ERUNTIME for runtime failures. */
int ht_dev_open(ht_dev **out, int index, const ht_dev_opts *opts);
void ht_dev_close(ht_dev *d);
const ht_devinfo *ht_dev_info(const ht_dev *d);
/* Waits for everything queued on the device. */
void ht_dev_finish(ht_dev *d);
/* Seconds spent building/loading the program in ht_dev_open, and whether the cache hit. */
double ht_dev_build_seconds(const ht_dev *d, int *cache_hit);
/* Applies CLBlast parameters on an open device: the built-in set (HT_GEMM_CLBLAST_CPU),
 * then, kernel by kernel, those of the tuning file (NULL/"" = the built-in set only).
 * The parameters hold for the calls that follow; switching sets between calls is how the
 * CLBlast search (src/prof/tune.c) compares them. HT_EINPUT for a bad tuning file. */
int ht_dev_tune(ht_dev *d, const char *tuning_path);

/* ---------------------------------------------------------------- buffers (offsets in bytes) */

ht_buf *ht_buf_new(ht_dev *d, size_t bytes, const char *what);
void ht_buf_free(ht_buf *b);
size_t ht_buf_size(const ht_buf *b);
/* Device memory in ht_bufs: the bytes alive now, the most alive at once since the device was
 * opened or the last reset (then restarted at `now`), and of `now` the tiled SGEMM's packing
 * workspace (it grows to the largest product's panels). CLBlast's own short-lived temporaries
 * are not counted. For the memory model's validation (issue 11). */
void ht_dev_mem(ht_dev *d, uint64_t *now, uint64_t *peak, uint64_t *gemm_ws, int reset_peak);
void ht_buf_write(ht_dev *d, ht_buf *b, size_t off, size_t bytes, const void *src);
void ht_buf_read(ht_dev *d, const ht_buf *b, size_t off, size_t bytes, void *dst);
void ht_buf_zero(ht_dev *d, ht_buf *b, size_t off, size_t bytes);
void ht_buf_copy(ht_dev *d, ht_buf *dst, size_t dst_off, const ht_buf *src, size_t src_off,
                 size_t bytes);

/* ---------------------------------------------------------------- kernels */

typedef enum { HT_ARG_BUF, HT_ARG_INT, HT_ARG_FLOAT, HT_ARG_LOCAL } ht_arg_kind;
typedef struct ht_arg {
    ht_arg_kind kind;
    union {
        const ht_buf *buf;
        int32_t i;
        float f;
        size_t local_bytes;
    } v;
} ht_arg;

#define HT_BUF(b) ((ht_arg){.kind = HT_ARG_BUF, .v.buf = (b)})
#define HT_INT(x) ((ht_arg){.kind = HT_ARG_INT, .v.i = (int32_t)(x)})
#define HT_FLOAT(x) ((ht_arg){.kind = HT_ARG_FLOAT, .v.f = (float)(x)})
#define HT_LOCAL(n) ((ht_arg){.kind = HT_ARG_LOCAL, .v.local_bytes = (n)})

/* Launches kernel `name` over dims (1..3) with global size gws and local size lws (NULL:
 * the runtime chooses; then gws need not be a multiple of anything). */
void ht_launch_at(ht_dev *d, const char *name, int dims, const size_t *gws, const size_t *lws,
                  int nargs, const ht_arg *args, const char *file, int line);
#define HT_NARGS(...) ((int)(sizeof((ht_arg[]){__VA_ARGS__}) / sizeof(ht_arg)))
#define ht_launch(d, name, dims, gws, lws, ...)                                                    \
    ht_launch_at((d), (name), (dims), (gws), (lws), HT_NARGS(__VA_ARGS__),                         \
                 (ht_arg[]){__VA_ARGS__}, __FILE__, __LINE__)
/* One work-item per element i < n: global size rounded up to the local size; the kernel
 * must check its index against n. */
#define ht_launch1d(d, name, n, ...)                                                               \
    ht_launch1d_at((d), (name), (n), HT_NARGS(__VA_ARGS__), (ht_arg[]){__VA_ARGS__}, __FILE__,     \
                   __LINE__)
void ht_launch1d_at(ht_dev *d, const char *name, size_t n, int nargs, const ht_arg *args,
                    const char *file, int line);
/* Largest work-group size usable for kernel `name` on this device. */
size_t ht_kernel_max_wg(ht_dev *d, const char *name);

/* ---------------------------------------------------------------- BLAS (CLBlast, row-major) */

/* C = alpha * op(A) * op(B) + beta * C with op(X) = X or X^T; offsets and leading
 * dimensions in floats. */
void ht_sgemm_at(ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                 const ht_buf *a, size_t a_off, size_t lda, const ht_buf *b, size_t b_off,
                 size_t ldb, float beta, ht_buf *c, size_t c_off, size_t ldc, const char *file,
                 int line);
#define ht_sgemm(d, ta, tb, m, n, k, alpha, a, aoff, lda, b, boff, ldb, beta, c, coff, ldc)        \
    ht_sgemm_at((d), (ta), (tb), (m), (n), (k), (alpha), (a), (aoff), (lda), (b), (boff), (ldb),   \
                (beta), (c), (coff), (ldc), __FILE__, __LINE__)

/* How the tiled SGEMM path (HT_GEMM_TILED) computes a product: pack both operands
 * (gemm_packed), pack B and read A in place (gemm_rows), or read both in place (gemm_direct,
 * B not transposed). The same bits each way; 0 lets src/ocl/gemm.c pick per shape.
 * ht_gemm_tiled_force(d, kind) forces one for every product on d where the shape allows it
 * (tests); $HT_GEMM_KERNEL=packed|rows|direct likewise for every device (benchmarks). */
enum { HT_TILED_AUTO, HT_TILED_PACKED, HT_TILED_ROWS, HT_TILED_DIRECT };
void ht_gemm_tiled_force(ht_dev *d, int kind);

/* The SGEMM variant of a device. With HT_GEMM=auto it is chosen by measurement
 * (src/ocl/choose.c): at the first ht_sgemm every variant is timed on layer-shaped products
 * (small ones, then batch 256 x width 512 for those within 8x of the best) and the fastest
 * kept, cached on disk with the program binaries; printed with -v. */
typedef struct ht_gemm_choice {
    int path; /* the variant: HT_GEMM_TILED .. HT_GEMM_CLBLAST_TUNED */
    /* probe time per variant, ms, indexed by variant (0 = not measured: forced by HT_GEMM /
     * opts.gemm, or no tuning file; < 0: minus the time at the small shapes, where it was
     * > 8x the best and dropped) */
    double ms[HT_GEMM_NVARIANTS];
    int cached; /* 1 when read from the disk cache instead of measured now */
} ht_gemm_choice;
/* The choice for device d (measured or loaded now if not yet). */
const ht_gemm_choice *ht_dev_gemm_choice(ht_dev *d);
/* 1 when d runs native kernels and is a CPU device: the native SGEMM path is tried there
 * only (src/ocl/native.c). */
int ht_dev_has_native(const ht_dev *d);
/* Products computed by the native path on d since it was opened (tests: which path ran). */
long ht_dev_native_calls(const ht_dev *d);
/* ht_gemm_name's, "?" out of range. */
const char *ht_gemm_path_name(int path);
/* The current value of CLBlast parameter `name` of kernel `kernel` ("Xgemm", "GemmRoutine",
 * ...) on device d, as CLBlast will use it; HT_OK, or HT_EINPUT when CLBlast has no such
 * kernel or parameter. */
int ht_dev_clblast_param(ht_dev *d, const char *kernel, const char *name, size_t *value);

/* ---------------------------------------------------------------- profiling */

/* Per-kernel totals (count, seconds, share) from profiling events or host timing; needs
 * opts.profile. A device whose events all carried no timestamps (a timer resolution of 0,
 * or end - start <= 1 ns: rusticl gives start = 2, end = 3) gets a line saying so and counts only, never zero times with shares.
 * With roof (the device's ceilings, src/prof/roof.c), each kernel whose launches all had
 * their work given also gets its GFLOP/s, GB/s and roofline (core/roofline.h), and a last
 * line names the kernel with the most time above its roofline; roof NULL: no such columns.
 * f NULL: only folds the finished events into the totals. */
void ht_dev_profile_report(ht_dev *d, FILE *f, const ht_roof *roof);
/* The work of the next launch on d, for the roofline columns: its floating-point operations
 * and the bytes it must move at least (each operand read once, each result written once).
 * Taken by that launch (also when it is not profiled); launches without it show none. */
void ht_prof_work(ht_dev *d, double flops, double bytes);
/* Whether the events folded so far all lacked timestamps (then the times are unknown). */
int ht_dev_profile_no_timestamps(const ht_dev *d);
void ht_dev_profile_reset(ht_dev *d);
/* Sets the profiling mode (HT_PROF_*) and returns the previous one: a measurement that is
 * not the job's (the convolution's algorithm choice) turns recording off around itself. */
int ht_dev_profile_swap(ht_dev *d, int mode);

/* ---------------------------------------------------------------- choices cached on disk */

/* The path of a file beside the device's program cache for a choice keyed by `tag` (hashed
 * with the program's key and the CLBlast tuning file, as the SGEMM choice), with extension
 * `ext`; 0 when the cache is off (nothing written, out untouched). */
int ht_dev_cache_file(const ht_dev *d, const char *tag, const char *ext, char *out, size_t n);

#endif
