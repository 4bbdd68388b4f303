/* Per-kernel profiling: launch times from events or the host clock, summed per name with the
 * work each launch was given (ht_prof_work), and the table --profile prints, with each
 * kernel's roofline when the device's ceilings are known (core/roofline.h). */
#include "ocl/internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"

void ht_prof_work(ht_dev *d, double flops, double bytes) {
    d->work_flops = flops, d->work_bytes = bytes, d->work_set = 1;
}

/* The work given for the launch being recorded (flops < 0: none), cleared for the next. */
static void take_work(ht_dev *d, double *flops, double *bytes) {
    *flops = d->work_set ? d->work_flops : -1.0;
    *bytes = d->work_set ? d->work_bytes : -1.0;
    d->work_set = 0;
}

void ht_prof_record(ht_dev *d, const char *name, cl_event ev) {
    if (d->npending == d->cappending) {
        d->cappending = d->cappending ? 2 * d->cappending : 256;
        d->pending = ht_xrealloc(d->pending, d->cappending * sizeof *d->pending);
    }
    ht_prof_rec *r = &d->pending[d->npending++];
    ht_strlcpy(r->name, name, sizeof r->name);
    r->ev = ev;
    take_work(d, &r->flops, &r->bytes);
    if (d->npending >= 4096) { /* fold completed events so the list stays bounded */
        clFinish(d->queue);
        ht_dev_profile_report(d, NULL, NULL);
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

static void add_work(ht_prof_sum *s, double flops, double bytes) {
    s->count++;
    if (flops < 0) return;
    s->nwork++;
    s->flops += flops, s->bytes += bytes;
}

double ht_prof_host_begin(ht_dev *d) {
    HT_CL(d, clFinish(d->queue));
    return ht_now();
}

void ht_prof_host_end(ht_dev *d, const char *name, double t0) {
    HT_CL(d, clFinish(d->queue));
    ht_prof_sum *s = sum_get(d, name);
    double flops, bytes;
    take_work(d, &flops, &bytes);
    add_work(s, flops, bytes);
    s->seconds += ht_now() - t0;
    d->prof_timed++;
}

int ht_dev_profile_no_timestamps(const ht_dev *d) { return d->prof_timed == 0 && d->prof_zero > 0; }

static int cmp_sum(const void *a, const void *b) {
    double x = ((const ht_prof_sum *)a)->seconds, y = ((const ht_prof_sum *)b)->seconds;
    return (x < y) - (x > y);
}

static void fold_pending(ht_dev *d) {
    if (d->npending) clFinish(d->queue);
    for (int i = 0; i < d->npending; i++) {
        cl_ulong t0 = 0, t1 = 0;
        clGetEventProfilingInfo(d->pending[i].ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
        clGetEventProfilingInfo(d->pending[i].ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
        ht_prof_sum *s = sum_get(d, d->pending[i].name);
        add_work(s, d->pending[i].flops, d->pending[i].bytes);
        /* rusticl answers 0, 1, 2, 3 ns for queued, submit, start, end (and a timer
         * resolution of 0): no kernel takes 1 ns, so such spans count as no timestamp */
        int real = t1 > t0 + 1 && d->prof_resolution > 0;
        s->seconds += real ? (double)(t1 - t0) * 1e-9 : 0.0;
        if (real) d->prof_timed++;
        else d->prof_zero++;
        clReleaseEvent(d->pending[i].ev);
    }
    d->npending = 0;
}

static void report_counts(const ht_dev *d, FILE *f) {
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
}

/* The roofline columns of one row: rates, the bound's mean time a call, how much of the
 * measured time it is, and the bound. Blank when some call's work is unknown. */
static void roof_cols(FILE *f, const ht_prof_sum *s, const ht_roof *roof) {
    if (!roof || s->nwork != s->count || s->seconds <= 0) {
        if (roof) fprintf(f, " %8s %8s %9s %6s %-7s", "-", "-", "-", "-", "-");
        return;
    }
    double n = (double)s->count, rs = ht_roof_seconds(roof, s->flops, s->bytes);
    fprintf(f, " %8.1f %8.1f %9.1f %5.0f%% %-7s", s->flops / s->seconds * 1e-9,
            s->bytes / s->seconds * 1e-9, rs / n * 1e6, 100.0 * rs / s->seconds,
            ht_roof_bound_name(ht_roof_bound_of(roof, s->flops / n, s->bytes / n)));
}

/* The kernel with the most time above its roofline, and the kernels' time and bound in all. */
static void roof_summary(const ht_dev *d, FILE *f, const ht_roof *roof, double total) {
    int worst = -1, above = 0;
    double worst_gap = 0, with = 0, bound = 0;
    for (int i = 0; i < d->nsums; i++) {
        const ht_prof_sum *s = &d->sums[i];
        if (s->nwork != s->count || s->seconds <= 0) continue;
        double rs = ht_roof_seconds(roof, s->flops, s->bytes);
        with += s->seconds, bound += rs;
        above += s->flops / roof->flops > 1.05 * s->seconds;
        if (s->seconds - rs > worst_gap) worst_gap = s->seconds - rs, worst = i;
    }
    if (total <= 0 || with <= 0) return;
    if (above)
        fprintf(f, "roofline: %d kernel(s) ran faster than the compute ceiling: it was measured "
                   "low (another process, or a core taken away while it ran); run again\n", above);
    fprintf(f, "roofline: kernels with known work take %.1f%% of the device time and run at %.0f%% "
               "of their roofline together\n", 100.0 * with / total, 100.0 * bound / with);
    if (worst < 0) return;
    const ht_prof_sum *s = &d->sums[worst];
    double n = (double)s->count, rs = ht_roof_seconds(roof, s->flops, s->bytes);
    fprintf(f, "roofline: held back most by '%s': %.1f ms above its roofline (%.1f%% of the "
               "device time), at %.0f%% of it, %s-bound\n", s->name, worst_gap * 1e3,
            100.0 * worst_gap / total, 100.0 * rs / s->seconds,
            ht_roof_bound_name(ht_roof_bound_of(roof, s->flops / n, s->bytes / n)));
}

void ht_dev_profile_report(ht_dev *d, FILE *f, const ht_roof *roof) {
    fold_pending(d);
    if (!f) return;
    if (ht_dev_profile_no_timestamps(d)) {
        report_counts(d, f);
        return;
    }
    if (d->profile == HT_PROF_HOST)
        fprintf(f, "profile: device '%s' (%s): host clock around each launch "
                   "(HT_PROFILE_TIMING=host)\n", d->info.name, d->info.platform);
    if (roof)
        fprintf(f, "profile: device '%s' (%s): ceilings measured on it after the run: compute "
                   "%.1f GFLOP/s (fp32 multiply-add), memory %.1f GB/s (copy, read + write), empty kernel "
                   "%.1f us; 'roof us' is a call's least time under them, '%% roof' that over "
                   "the measured time (over 100%%: data served from caches)\n",
                d->info.name, d->info.platform, roof->flops * 1e-9, roof->bytes_s * 1e-9,
                roof->launch_s * 1e6);
    qsort(d->sums, d->nsums, sizeof *d->sums, cmp_sum);
    double total = 0;
    for (int i = 0; i < d->nsums; i++) total += d->sums[i].seconds;
    fprintf(f, "%-44s %8s %10s %10s %6s", "kernel", "calls", "total ms", "mean us", "share");
    if (roof) fprintf(f, " %8s %8s %9s %6s %-7s", "GFLOP/s", "GB/s", "roof us", "% roof", "bound");
    fputc('\n', f);
    for (int i = 0; i < d->nsums; i++) {
        const ht_prof_sum *s = &d->sums[i];
        fprintf(f, "%-44.44s %8ld %10.2f %10.1f %5.1f%%", s->name, s->count, s->seconds * 1e3,
                s->seconds * 1e6 / (double)s->count,
                total > 0 ? 100.0 * s->seconds / total : 0.0);
        roof_cols(f, s, roof);
        fputc('\n', f);
    }
    if (roof) roof_summary(d, f, roof, total);
}

void ht_dev_profile_reset(ht_dev *d) {
    if (d->npending && d->queue) clFinish(d->queue);
    for (int i = 0; i < d->npending; i++) clReleaseEvent(d->pending[i].ev);
    d->npending = 0;
    d->nsums = 0;
    d->prof_timed = d->prof_zero = 0;
}
