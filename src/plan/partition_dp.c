/* HePipe's two-level partition (pure). Level 2, per host and per end layer e of its group: a
 * dynamic program over suffixes [i, e) of the host's layers and subsets of its devices, each
 * stage placed on a subset (one device, or replicas splitting each micro-batch by speed),
 * cost = (largest memory shortfall, slowest stage time), compared in that order and combined
 * by max. Level 1: a program over hosts in order, each taking a contiguous group (maybe none)
 * of the layers, on top of level 2's results. Suffixes, because a stage's micro-batches in
 * flight under 1F1B depend on how many stages follow it, not on those before. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "plan/partition.h"
#include "plan/plan.h"

typedef struct pval {
    double shortfall, time; /* bytes over the limit (max over ranks), seconds per micro-batch */
} pval;

static const pval PV_INF = {INFINITY, INFINITY};

static int pv_better(pval a, pval b) {
    if (a.shortfall != b.shortfall) return a.shortfall < b.shortfall;
    return a.time < b.time * (1 - 1e-12);
}

static pval pv_max(pval a, pval b) {
    return (pval){fmax(a.shortfall, b.shortfall), fmax(a.time, b.time)};
}

typedef struct link {
    double lat, bw; /* bw <= 0: free; lat < 0: no link (a boundary of the model) */
} link;

static const link NO_LINK = {-1, 0};

static double xfer(link k, double bytes) {
    if (k.lat < 0) return 0;
    return k.lat + (k.bw > 0 ? bytes / k.bw : 0);
}

/* The worse of two links (higher latency, lower bandwidth). */
static link worse(link a, link b) {
    if (a.lat < 0) return b;
    if (b.lat < 0) return a;
    link w = {fmax(a.lat, b.lat), a.bw};
    if (a.bw <= 0 || (b.bw > 0 && b.bw < a.bw)) w.bw = b.bw;
    return w;
}

typedef struct ctx {
    const ht_part_input *in;
    const ht_mem_desc *d;
    int L, R, H, N, mb;
    int nh[HT_PART_MAX_RANKS];                        /* ranks per host */
    int hr[HT_PART_MAX_RANKS][HT_PART_MAX_HOST_RANKS]; /* ranks of each host */
    int hostof[HT_PART_MAX_RANKS];
    int after[HT_PART_MAX_RANKS + 1];  /* ranks on hosts after h */
    link intra[HT_PART_MAX_RANKS];     /* slowest link inside host h */
    link from_before[HT_PART_MAX_RANKS], to_after[HT_PART_MAX_RANKS]; /* to other hosts */
    double *pf, *pb;  /* [R*(L+1)] prefix sums of fwd, bwd per rank */
    double *px;       /* [R*(L+1)] prefix sums of the fixed costs per rank */
    uint8_t *rc;      /* [L] scratch */
    uint8_t *fused;   /* [L] layer l runs fused into l - 1 (no cut before it); NULL: none */
    /* level 2 tables for the current (host, end): [(L+1) * M * (k+1)] */
    pval *V;
    int *ch_i2, *ch_g;
    int k, M;
    /* eval_group's splits of a micro-batch, for the current host and N: share of the i-th
     * rank of group g over layers [lo, hi) at split[((g * W + lo) * W + hi) * k + i],
     * SPLIT_UNSET until computed, SPLIT_NONE when there is none; NULL: too large to keep */
    int *split, *split_buf;
    size_t split_cap;
    double *params; /* [W * W] a stage's parameter bytes, NAN until summed; NULL: not kept */
} ctx;

#define CACHE_MAX ((size_t)1 << 24) /* entries of either cache at most */

enum { SPLIT_UNSET = -1, SPLIT_NONE = -2 };

/* ---------------------------------------------------------------- links */

static link rank_link(const ctx *c, int a, int b) {
    const ht_part_input *in = c->in;
    if (in->lat && in->bw) return (link){in->lat[a * c->R + b], in->bw[a * c->R + b]};
    if (c->hostof[a] == c->hostof[b]) return (link){in->lat_intra, in->bw_intra};
    return (link){in->lat_inter, in->bw_inter};
}

static void setup_links(ctx *c) {
    for (int h = 0; h < c->H; h++) {
        c->intra[h] = c->from_before[h] = c->to_after[h] = NO_LINK;
        for (int a = 0; a < c->R; a++)
            for (int b = 0; b < c->R; b++) {
                if (a == b || c->hostof[a] != h) continue;
                int hb = c->hostof[b];
                link k = rank_link(c, a, b);
                if (hb == h) c->intra[h] = worse(c->intra[h], k);
                if (hb < h) c->from_before[h] = worse(c->from_before[h], k);
                if (hb > h) c->to_after[h] = worse(c->to_after[h], k);
            }
        if (c->intra[h].lat < 0) c->intra[h] = (link){0, 0};
    }
}

/* ---------------------------------------------------------------- one stage */

static double in_bytes(const ctx *c, int lo) {
    return lo == 0 ? c->d->in_bytes : c->d->out_bytes[lo - 1];
}

/* Stage [lo, hi) on rank r, m samples per micro-batch, `slots` in flight; rc (may be NULL)
 * receives the recomputed layers. */
static pval eval_rank(ctx *c, int r, int lo, int hi, int m, int slots, link tin, link tout,
                      uint8_t *rc) {
    const ht_part_input *in = c->in;
    const double *pf = c->pf + (size_t)r * (c->L + 1), *pb = c->pb + (size_t)r * (c->L + 1);
    const double *px = c->px + (size_t)r * (c->L + 1);
    double t = m * (pf[hi] - pf[lo] + pb[hi] - pb[lo]) + px[hi] - px[lo] + in->overhead;
    double limit = in->mem_limit && in->mem_limit[r] > 0 ? in->mem_limit[r] : 0;
    uint8_t *set = rc ? rc : c->rc;
    ht_mem_use u;
    double extra = 0;
    if (in->allow_recompute) { /* the engine's own decision (pipe_mem.c), fused pairs whole */
        ht_mem_plan mp;
        ht_mem_plan_rank(c->d, in->fwd + (size_t)r * c->L, c->fused, 1, &lo, &hi, m, slots, slots,
                         slots, in->weight_versions, limit, set, &mp);
        extra = mp.extra_s;
        u = mp.use;
    } else {
        memset(set + lo, 0, (size_t)(hi - lo));
        ht_mem_stage(c->d, lo, hi, m, slots, in->weight_versions, NULL, &u);
    }
    t += extra + xfer(tin, m * in_bytes(c, lo)) + xfer(tout, m * c->d->out_bytes[hi - 1]);
    return (pval){limit > 0 ? fmax(0, u.total - limit) : 0, t};
}

/* Stage [lo, hi) on ranks[0..k): replicas split mb by speed and all-reduce the stage's
 * gradients once per step over link `red` (ring: 2 (k-1) messages of 1/k of the parameters),
 * charged per micro-batch. share (may be NULL) receives the split; rc (may be NULL) the
 * recomputed layers, row ranks[i] of an [R*L] array. */
/* The split of a micro-batch over ranks[0..k) (k > 1) for layers [lo, hi), by their speed
 * and fixed cost there; 0 when there is none (fewer samples than ranks). */
static int split_ranks(const ctx *c, const int *ranks, int k, int lo, int hi, int *sh) {
    if (c->mb < k) return 0;
    double speed[HT_PART_MAX_REP], fixed[HT_PART_MAX_REP];
    for (int i = 0; i < k; i++) {
        const double *pf = c->pf + (size_t)ranks[i] * (c->L + 1);
        const double *pb = c->pb + (size_t)ranks[i] * (c->L + 1);
        const double *px = c->px + (size_t)ranks[i] * (c->L + 1);
        double t = pf[hi] - pf[lo] + pb[hi] - pb[lo];
        speed[i] = t > 0 ? 1 / t : 1e300;
        fixed[i] = px[hi] - px[lo];
    }
    return ht_plan_batch_split_affine(c->mb, k, speed, fixed, NULL, sh) == HT_OK;
}

/* Parameter bytes of layers [lo, hi), summed once. */
static double stage_params(ctx *c, int lo, int hi) {
    double *at = c->params ? &c->params[(size_t)lo * (c->L + 1) + hi] : NULL;
    if (at && !isnan(*at)) return *at;
    double params = 0;
    for (int l = lo; l < hi; l++)
        params += c->d->param_bytes[l];
    if (at) *at = params;
    return params;
}

/* As eval_ranks below, with the split of a micro-batch given (sh: k shares). */
static pval eval_split(ctx *c, const int *ranks, int k, const int *sh, link red, int lo, int hi,
                       int slots, link tin, link tout, uint8_t *rc) {
    pval v = {0, 0};
    for (int i = 0; i < k; i++)
        v = pv_max(v, eval_rank(c, ranks[i], lo, hi, sh[i], slots, tin, tout,
                                rc ? rc + (size_t)ranks[i] * c->L : NULL));
    if (k > 1) v.time += 2.0 * (k - 1) * xfer(red, stage_params(c, lo, hi) / k) / c->N;
    return v;
}

static pval eval_ranks(ctx *c, const int *ranks, int k, link red, int lo, int hi, int slots,
                       link tin, link tout, int *share, uint8_t *rc) {
    int sh[HT_PART_MAX_REP] = {c->mb};
    if (k > 1 && !split_ranks(c, ranks, k, lo, hi, sh)) return PV_INF;
    if (share) memcpy(share, sh, (size_t)k * sizeof *sh);
    return eval_split(c, ranks, k, sh, red, lo, hi, slots, tin, tout, rc);
}

/* The ranks of host h in mask g (bit i: c->hr[h][i]); returns how many (0: too many). */
static int group_ranks(const ctx *c, int h, int g, int *ranks) {
    int k = 0;
    for (int i = 0; i < c->nh[h]; i++)
        if (g >> i & 1) {
            if (k == HT_PART_MAX_REP) return 0;
            ranks[k++] = c->hr[h][i];
        }
    return k;
}

static pval eval_group(ctx *c, int h, int g, int lo, int hi, int slots, link tin, link tout) {
    int ranks[HT_PART_MAX_REP], k = group_ranks(c, h, g, ranks);
    if (!k) return PV_INF;
    if (k == 1 || !c->split)
        return eval_ranks(c, ranks, k, c->intra[h], lo, hi, slots, tin, tout, NULL, NULL);
    /* the same group and layers come back for every suffix state and end: split once */
    size_t W = (size_t)c->L + 1;
    int *sh = c->split + ((g * W + (size_t)lo) * W + (size_t)hi) * (size_t)c->k;
    if (sh[0] == SPLIT_UNSET && !split_ranks(c, ranks, k, lo, hi, sh)) sh[0] = SPLIT_NONE;
    if (sh[0] == SPLIT_NONE) return PV_INF;
    return eval_split(c, ranks, k, sh, c->intra[h], lo, hi, slots, tin, tout, NULL);
}

/* Prepares the split cache for host h (its k ranks, M subsets) at the current N. */
static void split_reset(ctx *c, int h) {
    size_t W = (size_t)c->L + 1, k = (size_t)c->nh[h], n = ((size_t)1 << k) * W * W * k;
    if (k < 2 || n > c->split_cap) { /* single devices never split; too large: no cache */
        c->split = NULL;
        return;
    }
    c->split = c->split_buf;
    for (size_t x = 0; x < n; x += k)
        c->split[x] = SPLIT_UNSET;
}

/* ---------------------------------------------------------------- level 2: one host */

static size_t vix(const ctx *c, int i, int mask, int j) {
    return ((size_t)i * c->M + (size_t)mask) * (size_t)(c->k + 1) + (size_t)j;
}

static int popcount(int x) {
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

/* 1 when a stage may start at layer i (i == L: the end of the model). */
static int cut_ok(const ctx *c, int i) {
    return i == 0 || i == c->L || !c->in->can_cut || c->in->can_cut[i];
}

static int slots_for(const ctx *c, int after) {
    if (c->in->slots_rule == HT_PART_SLOTS_ALL) return c->N;
    return after + 1 < c->N ? after + 1 : c->N;
}

/* The next group to try after g among the non-empty subsets of `free` (0 when done): every
 * subset with replicas, else single devices. */
static int next_group(const ctx *c, int free, int g) {
    if (c->in->allow_replicas) return (g - free) & free;
    int rest = g ? free & ~((g << 1) - 1) : free;
    return rest & -rest;
}

/* The best first stage of a host's group and the suffix state after it. */
typedef struct choice {
    pval v;
    int i2, g, mask2, j2;
} choice;

/* Relaxes every stage [i, i2) placed before a suffix state (i2, mask2, j2), its in-link tin:
 * into V, or into *best when given. */
static void relax_from(ctx *c, int h, int e, int i, link tin, choice *best) {
    int full = c->M - 1;
    for (int i2 = i + 1; i2 <= e; i2++) {
        if (!cut_ok(c, i2)) continue;
        link tout = i2 < e ? c->intra[h] : (e < c->L ? c->to_after[h] : NO_LINK);
        for (int mask2 = 0; mask2 < c->M; mask2++) {
            int free = full & ~mask2;
            for (int j2 = 0; j2 <= popcount(mask2); j2++) {
                pval after = c->V[vix(c, i2, mask2, j2)];
                if (isinf(after.time) || !free) continue;
                int slots = slots_for(c, c->after[h] + j2);
                for (int g = next_group(c, free, 0); g; g = next_group(c, free, g)) {
                    if (c->in->in_rank_order &&
                        ((mask2 && g > (mask2 & -mask2)) || ((g + (g & -g)) & g) ||
                         (best && (mask2 | g) != full)))
                        continue; /* ranks in order (a replicated stage on adjacent ranks);
                                     a host's group uses all its ranks */
                    pval v = pv_max(eval_group(c, h, g, i, i2, slots, tin, tout), after);
                    if (best) {
                        if (pv_better(v, best->v)) *best = (choice){v, i2, g, mask2, j2};
                        continue;
                    }
                    size_t x = vix(c, i, mask2 | g, j2 + 1);
                    if (pv_better(v, c->V[x])) c->V[x] = v, c->ch_i2[x] = i2, c->ch_g[x] = g;
                }
            }
        }
    }
}

/* Fills V for host h's layers ending at e, and first[i] (i < e): the best for [i, e) when the
 * host's group starts at i (its first stage receiving from the previous host). */
static void host_dp(ctx *c, int h, int e, choice *first) {
    c->k = c->nh[h];
    c->M = 1 << c->k;
    size_t n = (size_t)(e + 1) * c->M * (c->k + 1);
    for (size_t x = 0; x < n; x++)
        c->V[x] = PV_INF;
    c->V[vix(c, e, 0, 0)] = (pval){0, 0};
    for (int i = e - 1; i >= 0; i--) {
        first[i] = (choice){PV_INF, 0, 0, 0, 0};
        if (!cut_ok(c, i)) continue;
        relax_from(c, h, e, i, i ? c->intra[h] : NO_LINK, NULL);
        relax_from(c, h, e, i, i ? c->from_before[h] : NO_LINK, &first[i]);
    }
}

/* ---------------------------------------------------------------- level 1: hosts */

typedef struct plan_stage {
    int lo, hi, host, g;
} plan_stage;

/* Best over hosts h.. for layers [i, L): T[h*(L+1) + i], the group end chosen in E (-1: the
 * host takes nothing). F[(h*(L+1) + e)*(L+1) + i]: host h's best for [i, e). */
static void level1(ctx *c, const pval *F, pval *T, int *E) {
    int L = c->L, W = L + 1;
    for (int i = 0; i <= L; i++)
        T[c->H * W + i] = i == L ? (pval){0, 0} : PV_INF;
    for (int h = c->H - 1; h >= 0; h--)
        for (int i = 0; i <= L; i++) {
            pval best = c->in->in_rank_order ? PV_INF : T[(h + 1) * W + i];
            int be = -1; /* in rank order no host may stay empty */
            for (int e = i + 1; e <= L; e++) {
                pval v = pv_max(F[((size_t)h * W + e) * W + i], T[(h + 1) * W + e]);
                if (pv_better(v, best)) best = v, be = e;
            }
            T[h * W + i] = best, E[h * W + i] = be;
        }
}

/* The stages of host h's group [i, e), in order, appended to st[*D]. */
static void host_stages(ctx *c, int h, int i, int e, choice *first, plan_stage *st, int *D) {
    split_reset(c, h); /* the cache holds the last host's splits */
    host_dp(c, h, e, first);
    choice ch = first[i];
    st[(*D)++] = (plan_stage){i, ch.i2, h, ch.g};
    int at = ch.i2, mask = ch.mask2, j = ch.j2;
    while (at < e) {
        size_t x = vix(c, at, mask, j);
        int i2 = c->ch_i2[x], g = c->ch_g[x];
        st[(*D)++] = (plan_stage){at, i2, h, g};
        at = i2, mask &= ~g, j--;
    }
}

/* The two levels for c->N micro-batches: the stages in st[0..*D), and their value. */
static pval plan_once(ctx *c, plan_stage *st, int *D) {
    int L = c->L, W = L + 1;
    pval *F = ht_xmalloc((size_t)c->H * W * W * sizeof *F);
    pval *T = ht_xmalloc((size_t)(c->H + 1) * W * sizeof *T);
    int *E = ht_xmalloc((size_t)(c->H + 1) * W * sizeof *E);
    choice *first = ht_xmalloc((size_t)W * sizeof *first);
    for (size_t x = 0; x < (size_t)c->H * W * W; x++)
        F[x] = PV_INF;
    for (int h = 0; h < c->H; h++) {
        split_reset(c, h);
        for (int e = 1; e <= L; e++) {
            if (!cut_ok(c, e)) continue;
            host_dp(c, h, e, first);
            for (int i = 0; i < e; i++)
                F[((size_t)h * W + e) * W + i] = first[i].v;
        }
    }
    level1(c, F, T, E);
    pval v = T[0];
    *D = 0;
    for (int h = 0, i = 0; h < c->H && i < L && !isinf(v.time); h++) {
        int e = E[h * W + i];
        if (e < 0) continue;
        host_stages(c, h, i, e, first, st, D);
        i = e;
    }
    free(F), free(T), free(E), free(first);
    return v;
}

/* ---------------------------------------------------------------- the result */

/* The worst link between any rank of stage a and any of stage b. */
static link stage_link(const ctx *c, const ht_part_stage *a, const ht_part_stage *b) {
    link w = NO_LINK;
    for (int i = 0; i < a->nrep; i++)
        for (int j = 0; j < b->nrep; j++)
            w = worse(w, rank_link(c, a->rank[i], b->rank[j]));
    return w;
}

/* Evaluates the stages with their true slot counts and links into p; returns the value. */
static pval finish(ctx *c, const plan_stage *st, int D, ht_partition *p) {
    p->L = c->L, p->R = c->R, p->D = D, p->N = c->N, p->mb = c->mb;
    memset(p->recompute, 0, (size_t)c->R * c->L);
    memset(p->mem, 0, sizeof p->mem);
    for (int r = 0; r < c->R; r++) {
        p->stage_of[r] = -1;
        p->limit[r] = c->in->mem_limit && c->in->mem_limit[r] > 0 ? c->in->mem_limit[r] : 0;
    }
    for (int s = 0; s < D; s++) {
        ht_part_stage *ps = &p->stage[s];
        memset(ps, 0, sizeof *ps);
        ps->lo = st[s].lo, ps->hi = st[s].hi, ps->host = st[s].host;
        ps->nrep = group_ranks(c, st[s].host, st[s].g, ps->rank);
        ps->slots = slots_for(c, D - 1 - s);
        for (int k = 0; k < ps->nrep; k++)
            p->stage_of[ps->rank[k]] = s;
    }
    pval v = {0, 0};
    double sum = 0;
    for (int s = 0; s < D; s++) {
        ht_part_stage *ps = &p->stage[s];
        link tin = s ? stage_link(c, ps, &p->stage[s - 1]) : NO_LINK;
        link tout = s + 1 < D ? stage_link(c, ps, &p->stage[s + 1]) : NO_LINK;
        pval sv = eval_ranks(c, ps->rank, ps->nrep, c->intra[ps->host], ps->lo, ps->hi, ps->slots,
                             tin, tout, ps->share, p->recompute);
        ps->time = sv.time;
        sum += sv.time;
        v = pv_max(v, sv);
        for (int k = 0; k < ps->nrep; k++) {
            int r = ps->rank[k];
            ht_mem_stage(c->d, ps->lo, ps->hi, ps->share[k], ps->slots, c->in->weight_versions,
                         p->recompute + (size_t)r * c->L, &p->mem[r]);
        }
    }
    p->bottleneck = v.time;
    p->step_time = sum + (c->N - 1) * v.time;
    return v;
}

/* ---------------------------------------------------------------- input */

static int check_input(const ht_part_input *in) {
    const ht_mem_desc *d = in->model;
    if (!d || d->L < 1) return ht_error(HT_EINPUT, "hetero partition: the model has no layers");
    if (in->R < 1 || in->R > HT_PART_MAX_RANKS)
        return ht_error(HT_EINPUT, "hetero partition: %d ranks; supported: 1 to %d", in->R,
                        HT_PART_MAX_RANKS);
    if (!in->fwd || !in->bwd)
        return ht_error(HT_EINPUT, "hetero partition: per-layer forward and backward times are "
                                   "missing (profile the devices or calibrate)");
    for (int x = 0; x < in->R * d->L; x++)
        if (!isfinite(in->fwd[x]) || in->fwd[x] < 0 || !isfinite(in->bwd[x]) || in->bwd[x] < 0 ||
            (in->fixed && !(isfinite(in->fixed[x]) && in->fixed[x] >= 0)))
            return ht_error(HT_EINPUT,
                            "hetero partition: rank %d layer %d has forward %g s, backward %g s "
                            "per sample, %g s fixed per micro-batch; times must be finite and >= 0",
                            x / d->L, x % d->L, in->fwd[x], in->bwd[x],
                            in->fixed ? in->fixed[x] : 0.0);
    if (in->B < 1 || in->N < 0 || (in->N > 0 && in->B % in->N))
        return ht_error(HT_EINPUT,
                        "hetero partition: %d micro-batches do not divide the batch of %d "
                        "samples; use a divisor of the batch (or 0 to choose)",
                        in->N, in->B);
    if (in->slots_rule != HT_PART_SLOTS_1F1B && in->slots_rule != HT_PART_SLOTS_ALL)
        return ht_error(HT_EINPUT, "hetero partition: slots_rule %d is unknown", in->slots_rule);
    if (in->in_rank_order && !in->allow_replicas && in->R > d->L)
        return ht_error(HT_EINPUT, "hetero partition: %d ranks in order need a stage each, but "
                                   "the model has %d layers",
                        in->R, d->L);
    if (in->weight_versions != 1 && in->weight_versions != 2)
        return ht_error(HT_EINPUT, "hetero partition: weight_versions %d; 1, or 2 for 2bw",
                        in->weight_versions);
    if (!isfinite(in->overhead) || in->overhead < 0 || !(in->lat_intra >= 0) ||
        !(in->lat_inter >= 0) || !isfinite(in->bw_intra) || !isfinite(in->bw_inter))
        return ht_error(HT_EINPUT, "hetero partition: overhead and link figures must be finite "
                                   "and >= 0");
    return HT_OK;
}

/* Groups ranks by host id, hosts in order of their lowest rank. */
static int setup_hosts(ctx *c) {
    int ids[HT_PART_MAX_RANKS];
    c->H = 0;
    for (int r = 0; r < c->R; r++) {
        int id = c->in->host ? c->in->host[r] : 0, h = 0;
        while (h < c->H && ids[h] != id)
            h++;
        if (h == c->H) ids[c->H] = id, c->nh[c->H++] = 0;
        if (c->nh[h] == HT_PART_MAX_HOST_RANKS)
            return ht_error(HT_EINPUT,
                            "hetero partition: host %d has more than %d ranks; the device-level "
                            "program covers at most %d per host (use \"balanced\")",
                            id, HT_PART_MAX_HOST_RANKS, HT_PART_MAX_HOST_RANKS);
        if (c->in->in_rank_order && h != c->H - 1)
            return ht_error(HT_EINPUT,
                            "hetero partition: rank %d is on host %d after ranks of other "
                            "hosts; with stages in rank order each host's ranks must be "
                            "contiguous (renumber the ranks, e.g. mpirun --map-by node)",
                            r, id);
        c->hr[h][c->nh[h]++] = r;
        c->hostof[r] = h;
    }
    c->after[c->H] = 0;
    for (int h = c->H - 1; h >= 0; h--)
        c->after[h] = h + 1 < c->H ? c->after[h + 1] + c->nh[h + 1] : 0;
    return HT_OK;
}

/* ---------------------------------------------------------------- the partitioner */

static int shortfall_error(const ctx *c, const ht_partition *p) {
    int w = 0;
    double worst = -1;
    for (int r = 0; r < c->R; r++)
        if (p->stage_of[r] >= 0 && p->limit[r] > 0 && p->mem[r].total - p->limit[r] > worst)
            worst = p->mem[r].total - p->limit[r], w = r;
    const ht_part_stage *st = &p->stage[p->stage_of[w]];
    int k = 0;
    while (st->rank[k] != w)
        k++;
    return ht_error(HT_EINPUT,
                    "hetero partition: no partition fits in device memory%s: the closest needs "
                    "%.2f MB on rank %d (host %d) for layers %d..%d with %d slots of %d samples "
                    "(weights and optimizer %.2f MB, activations %.2f MB), but its limit is "
                    "%.2f MB: short by %.2f MB; raise the device's memory (device.memory_mb), "
                    "use smaller micro-batches, %sor add devices",
                    c->in->allow_recompute ? " even with recomputation" : "", p->mem[w].total / 1e6,
                    w, st->host, st->lo, st->hi - 1, st->slots, st->share[k],
                    p->mem[w].state / 1e6, (p->mem[w].acts + p->mem[w].live) / 1e6,
                    p->limit[w] / 1e6, worst / 1e6,
                    c->in->allow_recompute ? "" : "allow recomputation, ");
}

int ht_part_hetero(const ht_part_input *in, ht_partition *p) {
    int rc = check_input(in);
    if (rc) return rc;
    ctx c = {.in = in, .d = in->model, .L = in->model->L, .R = in->R};
    if ((rc = setup_hosts(&c))) return rc;
    setup_links(&c);
    int L = c.L, W = L + 1, kmax = 0;
    for (int h = 0; h < c.H; h++)
        if (c.nh[h] > kmax) kmax = c.nh[h];
    c.pf = ht_xmalloc((size_t)c.R * W * sizeof *c.pf);
    c.pb = ht_xmalloc((size_t)c.R * W * sizeof *c.pb);
    c.px = ht_xmalloc((size_t)c.R * W * sizeof *c.px);
    for (int r = 0; r < c.R; r++) {
        double *pf = c.pf + (size_t)r * W, *pb = c.pb + (size_t)r * W, *px = c.px + (size_t)r * W;
        pf[0] = pb[0] = px[0] = 0;
        for (int l = 0; l < L; l++) {
            pf[l + 1] = pf[l] + in->fwd[r * L + l], pb[l + 1] = pb[l] + in->bwd[r * L + l];
            px[l + 1] = px[l] + (in->fixed ? in->fixed[r * L + l] : 0);
        }
    }
    size_t nv = (size_t)W * ((size_t)1 << kmax) * (size_t)(kmax + 1);
    c.V = ht_xmalloc(nv * sizeof *c.V);
    c.ch_i2 = ht_xmalloc(nv * sizeof *c.ch_i2);
    c.ch_g = ht_xmalloc(nv * sizeof *c.ch_g);
    c.rc = ht_xcalloc((size_t)L, 1);
    if (in->can_cut) {
        c.fused = ht_xcalloc((size_t)L, 1);
        for (int l = 1; l < L; l++)
            c.fused[l] = !in->can_cut[l];
    }
    for (int h = 0; h < c.H; h++) { /* the largest split cache a host needs, if kept */
        size_t k = (size_t)c.nh[h], n = ((size_t)1 << k) * W * W * k;
        if (k > 1 && n <= CACHE_MAX && n > c.split_cap) c.split_cap = n;
    }
    c.split_buf = c.split_cap ? ht_xmalloc(c.split_cap * sizeof *c.split_buf) : NULL;
    if ((size_t)W * W <= CACHE_MAX) {
        c.params = ht_xmalloc((size_t)W * W * sizeof *c.params);
        for (size_t x = 0; x < (size_t)W * W; x++)
            c.params[x] = NAN;
    }
    plan_stage st[HT_PART_MAX_RANKS], best_st[HT_PART_MAX_RANKS];
    int bestN = 0, bestD = 0;
    pval best = PV_INF;
    double best_step = INFINITY;
    memset(p, 0, sizeof *p);
    p->recompute = ht_xcalloc((size_t)c.R * L, 1);
    for (int N = 1; N <= in->B; N++) {
        if (in->B % N || (in->N > 0 && N != in->N)) continue;
        int D;
        c.N = N, c.mb = in->B / N;
        pval v = plan_once(&c, st, &D);
        if (isinf(v.time)) continue;
        v = finish(&c, st, D, p);
        if (v.shortfall < best.shortfall ||
            (v.shortfall == best.shortfall && p->step_time < best_step * (1 - 1e-9))) {
            best = v, best_step = p->step_time, bestN = N, bestD = D;
            memcpy(best_st, st, (size_t)D * sizeof *st);
        }
    }
    if (bestN) {
        c.N = bestN, c.mb = in->B / bestN;
        finish(&c, best_st, bestD, p);
        rc = best.shortfall > 0 ? shortfall_error(&c, p) : HT_OK;
    } else {
        rc = ht_error(HT_EINPUT, "hetero partition: no way to place %d layers on %d ranks", L,
                      c.R);
    }
    if (rc) ht_partition_free(p);
    free(c.pf), free(c.pb), free(c.px), free(c.V), free(c.ch_i2), free(c.ch_g), free(c.rc);
    free(c.fused);
    free(c.split_buf), free(c.params);
    return rc;
}
