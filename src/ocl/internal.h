/* Private to src/ocl: the structs behind the opaque handles and the CL check macro. */
#ifndef HT_OCL_INTERNAL_H
#define HT_OCL_INTERNAL_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "ocl/ocl.h"

typedef struct ht_kern {
    char name[64];
    cl_kernel k;
    size_t max_wg;
} ht_kern;

/* flops < 0: the launch's work was not given (ht_prof_work) */
typedef struct ht_prof_rec {
    char name[96];
    cl_event ev;
    double flops, bytes;
} ht_prof_rec;

typedef struct ht_prof_sum {
    char name[96];
    long count, nwork; /* calls; those whose work was given */
    double seconds, flops, bytes;
} ht_prof_sum;

struct ht_dev {
    ht_devinfo info;
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue queue;
    cl_program program;
    ht_kern *kerns;
    int nkerns, capkerns;
    double build_seconds;
    int cache_hit;
    int profile;   /* HT_PROF_OFF, _EVENTS, _HOST (ht_dev_opts.profile, $HT_PROFILE_TIMING) */
    long prof_timed; /* folded events with an end after their start */
    long prof_zero;  /* folded events without (no timestamps: rusticl reports 2 and 3 ns) */
    size_t prof_resolution; /* CL_DEVICE_PROFILING_TIMER_RESOLUTION, ns (rusticl: 0) */
    int gemm; /* HT_GEMM_* from ht_dev_opts */
    int gemm_kind; /* HT_TILED_*: how the tiled path runs every product (0: per shape, gemm.c) */
    int native; /* runs native kernels and is a CPU device (native.c) */
    long native_calls; /* products the native path enqueued (ht_dev_native_calls) */
    volatile int native_bad; /* a native kernel got other addresses than expected (native.c) */
    ht_prof_rec *pending;
    int npending, cappending;
    ht_prof_sum *sums;
    int nsums, capsums;
    const char *prof_name;  /* when set, the name ht_launch_at profiles its kernel under */
    double work_flops, work_bytes; /* ht_prof_work's, for the next launch when work_set */
    int work_set;
    ht_gemm_choice gemm_choice; /* HT_GEMM_AUTO: the measured path (choose.c); 0 = not yet */
    char cache_dir[1024];       /* program cache directory (program.c), also the GEMM choice's */
    int use_cache;
    uint64_t program_hash;      /* the program cache's key: kernel sources, options, device */
    char tuning[1024];          /* CLBlast tuning file given at open ("" = none) */
    struct ht_buf *gemm_ws; /* tiled SGEMM's packed panels (gemm.c), NULL until needed */
    uint64_t mem_now, mem_peak; /* bytes of the ht_bufs alive, and their peak (ht_dev_mem) */
};

struct ht_buf {
    ht_dev *dev;
    cl_mem mem;
    void *host; /* its memory's address as native kernels see it; NULL until asked (native.c) */
    size_t size;
    char what[48];
};

const char *ht_clerr_name(cl_int err);
/* Exits 1: "device 'NAME': CALL failed: CL_ERROR_NAME (-N) at FILE:LINE". */
void ht_cl_fail(const ht_dev *d, const char *call, cl_int err, const char *file, int line);

#define HT_CL(d, call)                                                                             \
    do {                                                                                           \
        cl_int ht_err_ = (call);                                                                   \
        if (ht_err_ != CL_SUCCESS) ht_cl_fail((d), #call, ht_err_, __FILE__, __LINE__);            \
    } while (0)

/* Queries (implemented in device.c). */
cl_device_id ht_ocl_device_id(int index, cl_platform_id *platform);

/* Program build with the disk cache (program.c). */
int ht_program_build(ht_dev *d, const ht_dev_opts *opts);

/* The work of C(m,n) = alpha op(A) op(B) + beta C for the profile's roofline, given by each
 * SGEMM path right before the launch it is profiled under. */
static inline void ht_gemm_work(ht_dev *d, size_t m, size_t n, size_t k, float beta) {
    ht_prof_work(d, ht_roof_gemm_flops((double)m, (double)n, (double)k),
                 ht_roof_gemm_bytes((double)m, (double)n, (double)k, beta != 0.0f));
}

/* Profiling: takes ownership of ev, and the work ht_prof_work gave (prof.c). */
void ht_prof_record(ht_dev *d, const char *name, cl_event ev);
/* Host timing of one launch (profile == HT_PROF_HOST): ht_prof_host_begin finishes the queue
 * and returns the time; ht_prof_host_end finishes it again and adds the difference to name. */
double ht_prof_host_begin(ht_dev *d);
void ht_prof_host_end(ht_dev *d, const char *name, double t0);

/* Tiled SGEMM for CPU devices (gemm.c): whether ht_sgemm_at should use it for this call
 * (HT_GEMM=clblast|tiled|auto; auto: the path measured faster, choose.c), and the call itself. */
int ht_gemm_tiled_wanted(ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k,
                         const ht_buf *a, const ht_buf *b, const ht_buf *c);
void ht_gemm_tiled(ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                   const ht_buf *a, size_t a_off, size_t lda, const ht_buf *b, size_t b_off,
                   size_t ldb, float beta, ht_buf *c, size_t c_off, size_t ldc, const char *file,
                   int line);

/* SGEMM by OpenBLAS in a native kernel (native.c): ht_native_open sets d->native at open;
 * whether ht_sgemm_at should use it for this call, and the call itself. */
void ht_native_open(ht_dev *d);
/* Exits 1 when a native product was skipped (its buffers' addresses were not those learnt):
 * called before each product and after each finish and read. */
void ht_native_check(const ht_dev *d, const char *file, int line);
int ht_gemm_native_wanted(ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k,
                          size_t lda, size_t ldb, size_t ldc);
void ht_gemm_native(ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                    const ht_buf *a, size_t a_off, size_t lda, const ht_buf *b, size_t b_off,
                    size_t ldb, float beta, ht_buf *c, size_t c_off, size_t ldc, const char *file,
                    int line);

/* The SGEMM path for HT_GEMM_AUTO, measured at first use (choose.c). */
int ht_gemm_choose(ht_dev *d);

/* CLBlast parameter sets (blas.c). At open: reads CLBlast's own set for the device (before
 * anything overrides it) and checks the tuning file by applying it. */
int ht_blas_open(ht_dev *d);
/* Makes variant v's parameter set (HT_GEMM_CLBLAST, _CPU, _TUNED) the one CLBlast uses on d
 * from the next call; HT_EINPUT for a bad tuning file. */
int ht_blas_use(ht_dev *d, int v);
/* The built-in set, then the tuning file (NULL/"" = none). */
int ht_blas_tune(ht_dev *d, const char *tuning_path);
/* clblast_params.cpp: CLBlast's current parameters of `kernel` on dev (up to max); the
 * count, or -1 when CLBlast has no such kernel. */
int ht_clblast_retrieve(cl_device_id dev, const char *kernel, int max, char (*names)[32],
                        size_t *values);

#endif
