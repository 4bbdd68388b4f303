/* Kernels by name (created on first use, kept per device), argument binding, launches,
 * and per-kernel profiling totals from events. */
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
        if (gws[i] == 0) return; /* nothing to do; OpenCL rejects empty ranges */
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
}

void ht_launch1d_at(ht_dev *d, const char *name, size_t n, int nargs, const ht_arg *args,
                    const char *file, int line) {
    size_t local = ht_kernel_max_wg(d, name);
    if (local > 64) local = 64;
    size_t global = (n + local - 1) / local * local;
    ht_launch_at(d, name, 1, &global, &local, nargs, args, file, line);
}

/* ---------------------------------------------------------------- profiling */

void ht_prof_record(ht_dev *d, const char *name, cl_event ev) {
    if (d->npending == d->cappending) {
        d->cappending = d->cappending ? 2 * d->cappending : 256;
        d->pending = ht_xrealloc(d->pending, d->cappending * sizeof *d->pending);
    }
    ht_prof_rec *r = &d->pending[d->npending++];
    ht_strlcpy(r->name, name, sizeof r->name);
    r->ev = ev;
    if (d->npending >= 4096) { /* fold completed events so the list stays bounded */
        clFinish(d->queue);
        ht_dev_profile_report(d, NULL);
    }
}

static ht_prof_sum *sum_get(ht_dev *d, const char *name) {
    for (int i = 0; i < d->nsums; i++)
        if (!strcmp(d->sums[i].name, name)) return &d->sums[i];
    if (d->nsums == d->capsums) {
        d->capsums = d->capsums ? 2 * d->capsums : 32;
        d->sums = ht_xrealloc(d->sums, d->capsums * sizeof *d->sums);
    }
    ht_prof_sum *s = &d->sums[d->nsums++];
    memset(s, 0, sizeof *s);
    ht_strlcpy(s->name, name, sizeof s->name);
    return s;
}

double ht_prof_host_begin(ht_dev *d) {
    HT_CL(d, clFinish(d->queue));
    return ht_now();
}

void ht_prof_host_end(ht_dev *d, const char *name, double t0) {
    HT_CL(d, clFinish(d->queue));
    ht_prof_sum *s = sum_get(d, name);
    s->count++;
    s->seconds += ht_now() - t0;
    d->prof_timed++;
}

int ht_dev_profile_no_timestamps(const ht_dev *d) { return d->prof_timed == 0 && d->prof_zero > 0; }

static int cmp_sum(const void *a, const void *b) {
    double x = ((const ht_prof_sum *)a)->seconds, y = ((const ht_prof_sum *)b)->seconds;
    return (x < y) - (x > y);
}

/* Folds pending events into the totals; prints the table when f != NULL. */
void ht_dev_profile_report(ht_dev *d, FILE *f) {
    if (d->npending) clFinish(d->queue);
    for (int i = 0; i < d->npending; i++) {
        cl_ulong t0 = 0, t1 = 0;
        clGetEventProfilingInfo(d->pending[i].ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
        clGetEventProfilingInfo(d->pending[i].ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
        ht_prof_sum *s = sum_get(d, d->pending[i].name);
        s->count++;
        /* rusticl answers 0, 1, 2, 3 ns for queued, submit, start, end (and a timer
         * resolution of 0): no kernel takes 1 ns, so such spans count as no timestamp */
        int real = t1 > t0 + 1 && d->prof_resolution > 0;
        s->seconds += real ? (double)(t1 - t0) * 1e-9 : 0.0;
        if (real) d->prof_timed++;
        else d->prof_zero++;
        clReleaseEvent(d->pending[i].ev);
    }
    d->npending = 0;
    if (!f) return;
    if (ht_dev_profile_no_timestamps(d)) {
        fprintf(f,
                "profile: device '%s' (%s) gives no profiling timestamps (timer resolution %zu ns, "
                "no event of %ld spans more than 1 ns), so its kernel times are unknown; launch "
                "counts only. For times, "
                "run with HT_PROFILE_TIMING=host (host clock around each launch, the queue "
                "finished before and after: slower, no overlap)\n",
                d->info.name, d->info.platform, d->prof_resolution, d->prof_zero);
        fprintf(f, "%-44s %8s\n", "kernel", "calls");
        for (int i = 0; i < d->nsums; i++)
            fprintf(f, "%-44.44s %8ld\n", d->sums[i].name, d->sums[i].count);
        return;
    }
    if (d->profile == HT_PROF_HOST)
        fprintf(f, "profile: device '%s' (%s): host clock around each launch "
                   "(HT_PROFILE_TIMING=host)\n", d->info.name, d->info.platform);
    qsort(d->sums, d->nsums, sizeof *d->sums, cmp_sum);
    double total = 0;
    for (int i = 0; i < d->nsums; i++) total += d->sums[i].seconds;
    fprintf(f, "%-44s %8s %10s %10s %6s\n", "kernel", "calls", "total ms", "mean us", "share");
    for (int i = 0; i < d->nsums; i++)
        fprintf(f, "%-44.44s %8ld %10.2f %10.1f %5.1f%%\n", d->sums[i].name, d->sums[i].count,
                d->sums[i].seconds * 1e3, d->sums[i].seconds * 1e6 / (double)d->sums[i].count,
                total > 0 ? 100.0 * d->sums[i].seconds / total : 0.0);
}

void ht_dev_profile_reset(ht_dev *d) {
    if (d->npending && d->queue) clFinish(d->queue);
    for (int i = 0; i < d->npending; i++) clReleaseEvent(d->pending[i].ev);
    d->npending = 0;
    d->nsums = 0;
    d->prof_timed = d->prof_zero = 0;
}
