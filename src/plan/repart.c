/* Online re-partitioning of a synchronous pipeline (see repart.h). */
#include "plan/repart.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

int ht_repart_init(ht_repart *r, int D, double alpha, double hysteresis, int min_interval,
                   int warmup) {
    memset(r, 0, sizeof *r);
    if (D < 1 || D > HT_PART_MAX_RANKS)
        return ht_error(HT_EINPUT, "re-partitioning: %d pipeline ranks; expected 1 .. %d", D,
                        HT_PART_MAX_RANKS);
    if (!(alpha > 0 && alpha <= 1) || !(hysteresis >= 0 && hysteresis < 1) || min_interval < 0 ||
        warmup < 0)
        return ht_error(HT_EINPUT,
                        "re-partitioning: alpha %g, hysteresis %g, min_interval %d, warmup %d; "
                        "expected alpha in (0, 1], hysteresis in [0, 1), steps >= 0",
                        alpha, hysteresis, min_interval, warmup);
    r->D = D;
    r->alpha = alpha;
    r->hysteresis = hysteresis;
    r->min_interval = min_interval;
    r->warmup = warmup;
    r->hold = min_interval + HT_REPART_WINDOW;
    return HT_OK;
}

double ht_repart_rank_time(const ht_part_input *in, const int *bounds, int q, double k) {
    const int L = in->model->L;
    double t = 0;
    for (int l = bounds[q]; l < bounds[q + 1]; l++)
        t += in->fwd[(size_t)q * L + l] + in->bwd[(size_t)q * L + l];
    return k * in->B * t;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n) {
    double s[HT_REPART_WINDOW];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* The predicted slowest rank of a cut under the current k. */
static double predicted(const ht_repart *r, const ht_part_input *in, const int *bounds) {
    double worst = 0;
    for (int q = 0; q < r->D; q++) {
        double t = ht_repart_rank_time(in, bounds, q, r->k[q]);
        if (t > worst) worst = t;
    }
    return worst;
}

/* Folds one step's ratios and step time into the windows and k. */
static void observe(ht_repart *r, const ht_part_input *in, const double *compute_s,
                    double step_s, const int *bounds) {
    const int full = r->nratio == HT_REPART_WINDOW, slot = full ? HT_REPART_WINDOW - 1 : r->nratio;
    r->counted++;
    const double w = fmax(r->alpha, 1.0 / (double)r->counted);
    for (int q = 0; q < r->D; q++) {
        double model = ht_repart_rank_time(in, bounds, q, 1.0);
        if (full) memmove(r->ratio[q], r->ratio[q] + 1, (HT_REPART_WINDOW - 1) * sizeof(double));
        r->ratio[q][slot] = model > 0 ? compute_s[q] / model : 1.0;
    }
    if (!full) r->nratio++;
    for (int q = 0; q < r->D; q++) {
        double m = median(r->ratio[q], r->nratio);
        r->k[q] = r->counted == 1 ? m : (1 - w) * r->k[q] + w * m;
    }
    if (r->nstep < HT_REPART_WINDOW) r->tstep[r->nstep++] = step_s;
    else memmove(r->tstep, r->tstep + 1, (HT_REPART_WINDOW - 1) * sizeof *r->tstep),
         r->tstep[HT_REPART_WINDOW - 1] = step_s;
}

/* A change (or its reversal) starts anew: the windows, the warm-up after it. */
static void restart(ht_repart *r, int64_t step) {
    r->last_change = step;
    r->seen = 0;
    r->nratio = 0;
    r->nstep = 0;
}

/* Remembers cut (measured at median t) as the one left, with the factors now. */
static void leave(ht_repart *r, const int *cut, double t) {
    memcpy(r->other, cut, (size_t)(r->D + 1) * sizeof *cut);
    memcpy(r->k_other, r->k, (size_t)r->D * sizeof *r->k);
    r->t_other = t;
    r->has_other = 1;
}

/* 1 when going to cut would return to the cut left, which measured no faster than now,
 * under factors that have hardly moved since. */
static int returns_unsupported(const ht_repart *r, const int *cut) {
    if (!r->has_other || memcmp(cut, r->other, (size_t)(r->D + 1) * sizeof *cut)) return 0;
    const double lim = 1 + 4 * r->hysteresis;
    for (int q = 0; q < r->D; q++) {
        double f = r->k[q] / r->k_other[q];
        if (f > lim || f < 1 / lim) return 0;
    }
    return !(r->t_other < median(r->tstep, r->nstep) * (1 - r->hysteresis));
}

/* The trial of the last change after HT_REPART_WINDOW steps under it: 1 when undone. */
static int judge(ht_repart *r, int64_t step, int *bounds) {
    if (r->nstep < HT_REPART_WINDOW) return 0;
    r->trial = 0;
    r->t_after = median(r->tstep, r->nstep);
    if (r->t_after <= r->t_before * (1 + r->hysteresis)) {
        r->kept = 1;
        r->hold = r->min_interval + HT_REPART_WINDOW;
        return 0;
    }
    leave(r, bounds, r->t_after);
    memcpy(bounds, r->prev, (size_t)(r->D + 1) * sizeof *bounds);
    r->reverted = 1;
    r->hold_until = step + r->hold;
    r->hold *= 2;
    restart(r, step);
    return 1;
}

/* The cut for the current k: the proposer's, or the start-up problem with every rank's times
 * scaled by its k cut again. */
static int propose(const ht_repart *r, const ht_part_input *in, int *cut) {
    if (r->propose) return r->propose(r->ctx, r->k, cut);
    const int L = in->model->L, D = r->D;
    double *f = ht_xmalloc((size_t)D * L * sizeof *f), *b = ht_xmalloc((size_t)D * L * sizeof *b);
    for (int q = 0; q < D; q++)
        for (int l = 0; l < L; l++) {
            f[(size_t)q * L + l] = r->k[q] * in->fwd[(size_t)q * L + l];
            b[(size_t)q * L + l] = r->k[q] * in->bwd[(size_t)q * L + l];
        }
    ht_part_input s = *in;
    s.fwd = f, s.bwd = b;
    ht_partition p;
    int rc = ht_part_hetero(&s, &p);
    if (rc == HT_OK) {
        ht_partition_export(&p, in->model, in->weight_versions, cut, NULL, NULL);
        ht_partition_free(&p);
    }
    free(f), free(b);
    return rc;
}

int ht_repart_update(ht_repart *r, int64_t step, const ht_part_input *in, const double *compute_s,
                     double step_s, int *bounds) {
    r->reverted = r->kept = r->blocked = 0;
    int ok = isfinite(step_s) && step_s > 0;
    for (int q = 0; q < r->D; q++)
        ok &= isfinite(compute_s[q]) && compute_s[q] > 0;
    if (!ok || ++r->seen <= r->warmup) return 0;
    if (r->counted == 0) r->last_change = step;
    observe(r, in, compute_s, step_s, bounds);
    if (r->trial) return judge(r, step, bounds);
    if (step - r->last_change < r->min_interval || step < r->hold_until ||
        r->nratio < HT_REPART_WINDOW)
        return 0;

    int cut[HT_PART_MAX_RANKS + 1], changed = 0;
    const int D = r->D;
    if (propose(r, in, cut) == HT_OK) {
        const double now = predicted(r, in, bounds), next = predicted(r, in, cut);
        if (memcmp(cut, bounds, (size_t)(D + 1) * sizeof *cut) &&
            now - next > r->hysteresis * now && !(r->blocked = returns_unsupported(r, cut))) {
            r->t_before = median(r->tstep, r->nstep);
            leave(r, bounds, r->t_before);
            memcpy(r->prev, bounds, (size_t)(D + 1) * sizeof *bounds);
            memcpy(bounds, cut, (size_t)(D + 1) * sizeof *bounds);
            r->pred_before = now, r->pred_after = next;
            r->trial = 1;
            restart(r, step);
            changed = 1;
        }
    }
    return changed;
}
