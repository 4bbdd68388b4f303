/* Row-major SGEMM on CPU devices through a native kernel: clEnqueueNativeKernel runs a host
 * function in the device's own queue order, on the buffers' memory (the runtime hands it
 * their host addresses), and that function calls OpenBLAS's cblas_sgemm. Why: on this
 * machine's CPUs OpenBLAS's assembly kernels run at 1.5-3x our packed OpenCL kernels
 * (cl/gemm.cl) at the models' shapes, and the queue order keeps the product between the
 * kernels that produce and consume its operands without a host-side finish.
 * Only on devices that say they run native kernels (CL_EXEC_NATIVE_KERNEL: PoCL's CPU
 * devices; rusticl says no) and are CPU devices: a GPU's buffers are not host memory, so a
 * native kernel there would copy them both ways. OpenBLAS runs as many threads as the
 * device has compute units (PoCL: its cores), so a rank's CPU share is what PoCL's was.
 * Chosen per device by measurement with the other variants (choose.c); HT_GEMM=native
 * forces it (an error on a device without native kernels). */
#include "ocl/internal.h"

#include <cblas.h>
#include <limits.h>
#include <stdio.h>

#include "core/err.h"

/* What the native function gets. The runtime copies the struct and writes the buffers'
 * addresses at the locations args_mem_loc lists, but PoCL 3.1 writes them in its own order
 * (it sorts and de-duplicates the buffer list by an internal id before pairing it with the
 * locations), so which address lands where is not ours to know. So each buffer's address is
 * learnt once, alone (addr_of: one buffer, no order to get wrong), and kept in the ht_buf;
 * the product lists its buffers only so that the runtime orders and migrates them, and the
 * function checks that the addresses it was given are the ones kept, as a set. */
typedef struct {
    void *p[3];  /* written by the runtime, in its order */
    float *a, *b, *c;
    void *want[3];
    int nmem, ta, tb, m, n, k, lda, ldb, ldc, threads;
    float alpha, beta;
    volatile int *bad;
} native_args;

static void record_addr(void *p) {
    void **x = p;
    *(void **)x[1] = x[0];
}

/* The address of b's memory as the device's native kernels see it: one native kernel with b
 * alone writes it to the host, once per buffer (a queue finish: the first product per
 * buffer only). The runtime keeps a CPU buffer's memory where it first put it. */
static void *addr_of(ht_dev *d, const ht_buf *cb, const char *file, int line) {
    ht_buf *b = (ht_buf *)cb; /* the cache only: the buffer's contents stay untouched */
    if (b->host) return b->host;
    void *got = NULL, *x[2] = {b->mem, &got};
    const void *loc[1] = {&x[0]};
    cl_int err = clEnqueueNativeKernel(d->queue, record_addr, x, sizeof x, 1, &b->mem, loc, 0,
                                       NULL, NULL);
    if (err == CL_SUCCESS) err = clFinish(d->queue);
    if (err != CL_SUCCESS) ht_cl_fail(d, "clEnqueueNativeKernel (buffer address)", err, file, line);
    if (!got)
        ht_die(HT_ERUNTIME, "device '%s': a native kernel got no address for buffer '%s' at %s:%d",
               d->info.name, b->what, file, line);
    return b->host = got;
}

/* OpenBLAS's thread count is process-wide; set only when it changes (one device per rank,
 * so it changes only in tests that open several devices). Called from the runtime's
 * thread that runs the queue: no two native kernels of one queue overlap. */
static void run_sgemm(void *p) {
    static int threads;
    native_args *x = p;
    for (int i = 0; i < x->nmem; i++) {
        int found = 0;
        for (int j = 0; j < x->nmem; j++)
            found |= x->p[i] == x->want[j];
        if (!found) { /* never compute on memory we did not mean */
            *x->bad = 1;
            return;
        }
    }
    if (x->threads != threads) openblas_set_num_threads(x->threads), threads = x->threads;
    cblas_sgemm(CblasRowMajor, x->ta ? CblasTrans : CblasNoTrans, x->tb ? CblasTrans : CblasNoTrans,
                x->m, x->n, x->k, x->alpha, x->a, x->lda, x->b, x->ldb, x->beta, x->c, x->ldc);
}

void ht_native_open(ht_dev *d) {
    cl_device_exec_capabilities caps = 0;
    cl_device_type type = 0;
    if (clGetDeviceInfo(d->device, CL_DEVICE_EXECUTION_CAPABILITIES, sizeof caps, &caps, NULL) !=
            CL_SUCCESS ||
        clGetDeviceInfo(d->device, CL_DEVICE_TYPE, sizeof type, &type, NULL) != CL_SUCCESS)
        caps = 0, type = 0;
    d->native = (caps & CL_EXEC_NATIVE_KERNEL) && (type & CL_DEVICE_TYPE_CPU) &&
                !(type & CL_DEVICE_TYPE_GPU);
}

void ht_native_check(const ht_dev *d, const char *file, int line) {
    if (d->native_bad)
        ht_die(HT_ERUNTIME, "device '%s': a native kernel was given other buffer addresses than "
                            "those learnt for its buffers; its product was not computed (seen at "
                            "%s:%d)",
               d->info.name, file, line);
}

int ht_dev_has_native(const ht_dev *d) { return d->native; }
long ht_dev_native_calls(const ht_dev *d) { return d->native_calls; }

static int fits(size_t x) { return x <= (size_t)INT_MAX; }

int ht_gemm_native_wanted(ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k,
                          size_t lda, size_t ldb, size_t ldc) {
    if (!d->native || (d->gemm != HT_GEMM_AUTO && d->gemm != HT_GEMM_NATIVE)) return 0;
    if (d->gemm == HT_GEMM_AUTO && ht_gemm_choose(d) != HT_GEMM_NATIVE) return 0;
    /* CBLAS's argument checks (row-major): a call that fails them computes nothing, so it
     * goes to the OpenCL paths, which take any leading dimension */
    size_t wa = trans_a ? m : k, wb = trans_b ? k : n;
    return fits(m) && fits(n) && fits(k) && fits(lda) && fits(ldb) && fits(ldc) &&
           lda >= (wa ? wa : 1) && ldb >= (wb ? wb : 1) && ldc >= (n ? n : 1);
}

/* Threads for one product: the device's compute units, but one below SMALL multiply-adds
 * or with a side of at most SKINNY.
 * OpenBLAS splits a product statically over its threads, so each call waits for the slowest;
 * on a busy machine (load 7-10 on 2 cores, other processes') a thread that lost its core
 * stalled the MNIST CNN's 64x10x512 forward for 13-19 ms a call against 0.02-0.6 ms for the
 * tiled kernels, whose work-groups go to whichever worker runs. One thread has nothing to
 * wait for, and below SMALL (~25 us of one core's work) a second one gains nothing. */
#define SMALL (1u << 21)
/* Nor for a skinny product (a side of at most SKINNY: the MLP's n = 10 and k = 10 layers):
 * 256x10x1024 took 2.4 ms a call on two threads at load 9-14, for ~0.1 ms of one core's work. */
#define SKINNY 16
static int threads_for(const ht_dev *d, size_t m, size_t n, size_t k) {
    int cu = d->info.compute_units ? (int)d->info.compute_units : 1;
    size_t lo = m < n ? (m < k ? m : k) : (n < k ? n : k);
    return (double)m * (double)n * (double)k < SMALL || lo <= SKINNY ? 1 : cu;
}

void ht_gemm_native(ht_dev *d, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                    const ht_buf *a, size_t a_off, size_t lda, const ht_buf *b, size_t b_off,
                    size_t ldb, float beta, ht_buf *c, size_t c_off, size_t ldc, const char *file,
                    int line) {
    ht_native_check(d, file, line);
    native_args x = {.a = (float *)addr_of(d, a, file, line) + a_off,
                     .b = (float *)addr_of(d, b, file, line) + b_off,
                     .c = (float *)addr_of(d, c, file, line) + c_off,
                     .ta = trans_a,
                     .tb = trans_b,
                     .m = (int)m,
                     .n = (int)n,
                     .k = (int)k,
                     .lda = (int)lda,
                     .ldb = (int)ldb,
                     .ldc = (int)ldc,
                     .threads = threads_for(d, m, n, k),
                     .alpha = alpha,
                     .beta = beta,
                     .bad = &d->native_bad};
    const ht_buf *all[3] = {a, b, c};
    cl_mem mems[3];
    const void *locs[3];
    for (int i = 0; i < 3; i++) {
        int j = 0;
        while (j < i && all[j]->mem != all[i]->mem)
            j++;
        if (j < i) continue; /* listed once: the runtime de-duplicates */
        x.want[x.nmem] = all[i]->host, x.p[x.nmem] = all[i]->mem;
        mems[x.nmem] = all[i]->mem, locs[x.nmem] = &x.p[x.nmem];
        x.nmem++;
    }
    char name[96];
    snprintf(name, sizeof name, "sgemm %c%c %zux%zux%zu", trans_a ? 'T' : 'N', trans_b ? 'T' : 'N',
             m, n, k);
    cl_event ev = NULL;
    double t0 = d->profile == HT_PROF_HOST ? ht_prof_host_begin(d) : 0.0;
    ht_gemm_work(d, m, n, k, beta);
    cl_int err = clEnqueueNativeKernel(d->queue, run_sgemm, &x, sizeof x, (cl_uint)x.nmem, mems,
                                       locs, 0, NULL, d->profile == HT_PROF_EVENTS ? &ev : NULL);
    if (err != CL_SUCCESS) {
        char call[160];
        snprintf(call, sizeof call, "clEnqueueNativeKernel(cblas_sgemm %s)", name + 6);
        ht_cl_fail(d, call, err, file, line);
    }
    d->native_calls++;
    if (d->profile == HT_PROF_HOST) ht_prof_host_end(d, name, t0);
    if (ev) ht_prof_record(d, name, ev);
}
