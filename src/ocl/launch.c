/* Kernels by name (created on first use, kept per device), argument binding and launches;
 * their profiling is src/ocl/prof.c. */
#include "ocl/internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"

static ht_kern *kern_get(ht_dev *d, const char *name) {
    for (int i = 0; i < d->nkerns; i++)
        if (!strcmp(d->kerns[i].name, name)) return &d->kerns[i];
    if (d->nkerns == d->capkerns) {
        d->capkerns = d->capkerns ? 2 * d->capkerns : 32;
        d->kerns = ht_xrealloc(d->kerns, d->capkerns * sizeof *d->kerns);
    }
    ht_kern *k = &d->kerns[d->nkerns];
    memset(k, 0, sizeof *k);
    if (ht_strlcpy(k->name, name, sizeof k->name) >= sizeof k->name)
        ht_die(HT_ERUNTIME, "kernel name '%s' too long", name);
    cl_int err;
    k->k = clCreateKernel(d->program, name, &err);
    if (err != CL_SUCCESS) {
        char call[128];
        snprintf(call, sizeof call, "clCreateKernel(\"%s\")", name);
        ht_cl_fail(d, call, err, __FILE__, __LINE__);
    }
    HT_CL(d, clGetKernelWorkGroupInfo(k->k, d->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof k->max_wg,
                                      &k->max_wg, NULL));
    if (k->max_wg > d->info.max_wg) k->max_wg = d->info.max_wg;
    d->nkerns++;
    return k;
}

size_t ht_kernel_max_wg(ht_dev *d, const char *name) { return kern_get(d, name)->max_wg; }

static void bind_args(ht_dev *d, ht_kern *k, int nargs, const ht_arg *args, const char *file,
                      int line) {
    for (int i = 0; i < nargs; i++) {
        cl_int err;
        switch (args[i].kind) {
        case HT_ARG_BUF: err = clSetKernelArg(k->k, i, sizeof(cl_mem), &args[i].v.buf->mem); break;
        case HT_ARG_INT: err = clSetKernelArg(k->k, i, sizeof(cl_int), &args[i].v.i); break;
        case HT_ARG_FLOAT: err = clSetKernelArg(k->k, i, sizeof(cl_float), &args[i].v.f); break;
        case HT_ARG_LOCAL: err = clSetKernelArg(k->k, i, args[i].v.local_bytes, NULL); break;
        default: err = CL_INVALID_ARG_VALUE;
        }
        if (err != CL_SUCCESS) {
            char call[160];
            snprintf(call, sizeof call, "clSetKernelArg(%s, arg %d)", k->name, i);
            ht_cl_fail(d, call, err, file, line);
        }
    }
}

void ht_launch_at(ht_dev *d, const char *name, int dims, const size_t *gws, const size_t *lws,
                  int nargs, const ht_arg *args, const char *file, int line) {
    ht_kern *k = kern_get(d, name);
    for (int i = 0; i < dims; i++)
        if (gws[i] == 0) {
            d->work_set = 0; /* nothing to do; OpenCL rejects empty ranges */
            return;
        }
    bind_args(d, k, nargs, args, file, line);
    cl_event ev = NULL;
    double t0 = d->profile == HT_PROF_HOST ? ht_prof_host_begin(d) : 0.0;
    cl_int err = clEnqueueNDRangeKernel(d->queue, k->k, (cl_uint)dims, NULL, gws, lws, 0, NULL,
                                        d->profile == HT_PROF_EVENTS ? &ev : NULL);
    if (err != CL_SUCCESS) {
        char call[160];
        snprintf(call, sizeof call, "clEnqueueNDRangeKernel(%s)", name);
        ht_cl_fail(d, call, err, file, line);
    }
    if (ev) ht_prof_record(d, d->prof_name ? d->prof_name : name, ev);
    if (d->profile == HT_PROF_HOST) ht_prof_host_end(d, d->prof_name ? d->prof_name : name, t0);
    d->work_set = 0; /* ht_prof_work describes one launch */
}

void ht_launch1d_at(ht_dev *d, const char *name, size_t n, int nargs, const ht_arg *args,
                    const char *file, int line) {
    size_t local = ht_kernel_max_wg(d, name);
    if (local > 64) local = 64;
    size_t global = (n + local - 1) / local * local;
    ht_launch_at(d, name, 1, &global, &local, nargs, args, file, line);
}
