/* A pipeline rank's memory decision (pure): which of its layers to recompute and how many
 * micro-batches it may hold in flight under its memory limit (see ht_mem_plan_rank in
 * partition.h). HePipe's dynamic recomputation by memory prediction: recompute only where the
 * predicted peak exceeds the device's memory, the layers that free the most bytes per second
 * of recompute first (Chen et al. 2016's trade of memory for one more forward). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "plan/partition.h"

typedef struct rank_in {
    const ht_mem_desc *d;
    const double *fwd;
    const uint8_t *fused;
    int nchunk;
    const int *lo, *hi;
    int mb, wv;
    double limit;
} rank_in;

static double mem_at(const rank_in *a, int slots, const uint8_t *rc, ht_mem_use *u) {
    return ht_mem_rank(a->d, a->nchunk, a->lo, a->hi, a->mb, slots, a->wv, rc, u);
}

static void clear(const rank_in *a, uint8_t *rc) {
    for (int c = 0; c < a->nchunk; c++)
        memset(rc + a->lo[c], 0, (size_t)(a->hi[c] - a->lo[c]));
}

/* Sets (v = 1) or clears layer l's flag together with the activation fused into it or the
 * layer it is fused into: a pair runs in one kernel pass, so it is recomputed whole. */
static void set_pair(const rank_in *a, uint8_t *rc, int l, uint8_t v) {
    rc[l] = v;
    if (!a->fused) return;
    if (l > 0 && a->fused[l]) rc[l - 1] = v;
    if (l + 1 < a->d->L && a->fused[l + 1]) rc[l + 1] = v;
}

typedef struct cand {
    int l;
    double ratio; /* bytes kept per sample / forward seconds per sample */
} cand;

static int by_ratio(const void *x, const void *y) {
    const cand *p = x, *q = y;
    if (p->ratio != q->ratio) return p->ratio > q->ratio ? -1 : 1;
    return p->l - q->l;
}

/* The layers that keep something, best ratio first, into c; returns their count. */
static int candidates(const rank_in *a, cand *c) {
    int n = 0;
    for (int k = 0; k < a->nchunk; k++)
        for (int l = a->lo[k]; l < a->hi[k]; l++)
            if (a->d->keep_bytes[l] > 0)
                c[n++] =
                    (cand){l, a->fwd && a->fwd[l] > 0 ? a->d->keep_bytes[l] / a->fwd[l] : INFINITY};
    qsort(c, (size_t)n, sizeof *c, by_ratio);
    return n;
}

/* rc for `slots` in flight: none when that fits; else candidates one at a time until it fits,
 * then every chosen one whose removal still fits dropped again (latest first: an early pick
 * may free nothing once a later one shrank the largest chunk). 1 when it fits. */
static int choose(const rank_in *a, const cand *c, int n, int slots, uint8_t *rc) {
    clear(a, rc);
    if (mem_at(a, slots, rc, NULL) <= a->limit) return 1;
    if (slots <= 1) return 0; /* a recomputed layer is live once anyway: nothing to gain */
    int k = 0;
    while (k < n && mem_at(a, slots, rc, NULL) > a->limit)
        set_pair(a, rc, c[k++].l, 1);
    if (mem_at(a, slots, rc, NULL) > a->limit) return 0;
    for (int i = k - 1; i >= 0; i--) {
        if (!rc[c[i].l]) continue;
        set_pair(a, rc, c[i].l, 0);
        if (mem_at(a, slots, rc, NULL) > a->limit) set_pair(a, rc, c[i].l, 1);
    }
    return 1;
}

/* The most slots that fit with rc (memory grows by the same bytes per slot), at most cap. */
static int max_slots(const rank_in *a, const uint8_t *rc, int cap) {
    double base = mem_at(a, 0, rc, NULL), per = mem_at(a, 1, rc, NULL) - base;
    if (base + per > a->limit) return 0;
    if (per <= 0) return cap;
    double s = floor((a->limit - base) / per);
    return s >= cap ? cap : (int)s;
}

static void finish(const rank_in *a, const uint8_t *rc, ht_mem_plan *out) {
    out->nrc = 0, out->extra_s = 0;
    for (int k = 0; k < a->nchunk; k++)
        for (int l = a->lo[k]; l < a->hi[k]; l++)
            if (rc[l]) out->nrc++, out->extra_s += a->mb * (a->fwd ? a->fwd[l] : 0);
    mem_at(a, out->slots, rc, &out->use);
}

int ht_mem_plan_rank(const ht_mem_desc *d, const double *fwd, const uint8_t *fused, int nchunk,
                     const int *lo, const int *hi, int mb, int slots, int min_slots, int cap,
                     int weight_versions, double limit, uint8_t *rc, ht_mem_plan *out) {
    rank_in a = {d, fwd, fused, nchunk, lo, hi, mb, weight_versions, limit};
    memset(out, 0, sizeof *out);
    if (min_slots < 1) min_slots = 1;
    if (min_slots > slots) min_slots = slots;
    clear(&a, rc);
    out->slots = slots;
    if (limit <= 0) {
        out->fits = 1, out->max_slots = cap;
        finish(&a, rc, out);
        return 1;
    }
    int nl = 0;
    for (int k = 0; k < nchunk; k++)
        nl += hi[k] - lo[k];
    cand *c = ht_xmalloc((size_t)(nl ? nl : 1) * sizeof *c);
    int n = candidates(&a, c);
    for (int s = slots; s >= min_slots && !out->fits; s--)
        if (choose(&a, c, n, s, rc)) out->fits = 1, out->slots = s;
    if (out->fits) {
        out->max_slots = max_slots(&a, rc, cap);
    } else { /* the least memory any choice needs: nothing or everything recomputed */
        out->slots = min_slots;
        clear(&a, rc);
        double none = mem_at(&a, min_slots, rc, NULL);
        for (int i = 0; i < n; i++)
            set_pair(&a, rc, c[i].l, 1);
        if (none <= mem_at(&a, min_slots, rc, NULL)) clear(&a, rc);
    }
    free(c);
    finish(&a, rc, out);
    return out->fits;
}
