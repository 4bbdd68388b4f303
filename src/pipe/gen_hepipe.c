/* HePipe's multi-forward 1F1B (Lizhi Ma, Dan Liu; see shared/DESIGN.md) for stages of unequal
 * speed. Each rank runs a warm-up of w[r] forwards, then one forward and one backward
 * alternate, then the remaining backwards: 1F1B is w[r] = D-1-r. With unequal stages that
 * depth is not the best: a rank that runs more forwards ahead keeps its neighbours fed while a
 * slow stage holds the gradients back, at the price of one activation slot per extra forward.
 * The generator picks the depths from the measured relative stage times: the vector that
 * gives the shortest makespan of the in-order execution (the checker's semantics, backward =
 * p->bf_ratio x forward, communication free), fewest slots on ties, within each rank's slot
 * limit; other depths than 1F1B's (within the limits) only for a predicted makespan at least
 * 1% shorter.
 * Depths must not increase along the pipeline: a rank whose warm-up were shallower than its
 * successor's would wait for a gradient while the successor waits for one more activation
 * (a circular wait). Small searches are exhaustive; larger ones a local search from 1F1B. The
 * result is never slower under that model than 1F1B with the same slot limits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "pipe/internal.h"

#define EXHAUSTIVE_MAX 4096  /* depth vectors tried one by one at most */
#define MIN_GAIN 0.01 /* other depths than 1F1B's only for a predicted makespan >= 1% shorter:
                         the model leaves out what extra slots cost (memory traffic, messages),
                         and its stage times are start-up measurements */

/* ---------------------------------------------------------------- the model */

typedef struct sim {
    int D, N;
    const double *t; /* [D] forward time per stage */
    double bf;       /* backward / forward time */
    double *fwd_end, *bwd_end; /* [D*N], < 0: not run yet */
    int *pos;                  /* [D] next operation of each rank */
    double *clock;             /* [D] */
} sim;

/* Operation j of rank r under warm-up w: *is_fwd and the micro-batch. */
static int op_at(int N, int w, int j, int *is_fwd) {
    if (j < w) return *is_fwd = 1, j;
    if (j < w + 2 * (N - w)) {
        int i = (j - w) / 2;
        *is_fwd = (j - w) % 2 == 0;
        return *is_fwd ? w + i : i;
    }
    *is_fwd = 0;
    return N - w + (j - w - 2 * (N - w));
}

/* Makespan of the in-order execution of depths w; INFINITY on a circular wait. */
static double makespan(sim *m, const int *w) {
    int D = m->D, N = m->N;
    for (int x = 0; x < D * N; x++)
        m->fwd_end[x] = m->bwd_end[x] = -1;
    memset(m->pos, 0, (size_t)D * sizeof *m->pos);
    for (int r = 0; r < D; r++)
        m->clock[r] = 0;
    int left = 2 * D * N, moved = 1;
    while (left && moved) {
        moved = 0;
        for (int r = 0; r < D; r++)
            while (m->pos[r] < 2 * N) {
                int f, k = op_at(N, w[r], m->pos[r], &f);
                double ready;
                if (f) ready = r ? m->fwd_end[(r - 1) * N + k] : 0;
                else ready = r < D - 1 ? m->bwd_end[(r + 1) * N + k] : m->fwd_end[r * N + k];
                if (ready < 0) break;
                double start = ready > m->clock[r] ? ready : m->clock[r];
                m->clock[r] = start + m->t[r] * (f ? 1 : m->bf);
                (f ? m->fwd_end : m->bwd_end)[r * N + k] = m->clock[r];
                m->pos[r]++, left--, moved = 1;
            }
    }
    if (left) return INFINITY;
    double end = 0;
    for (int r = 0; r < D; r++)
        if (m->clock[r] > end) end = m->clock[r];
    return end;
}

/* ---------------------------------------------------------------- the search */

typedef struct search {
    sim m;
    int D;
    const int *u;  /* [D] upper bound of w[r]: min over q <= r of (slots[q] - 1, N - 1) */
    int *w, *best; /* [D] */
    double best_t;
    long best_sum;
} search;

static long sum_of(const int *w, int D) {
    long s = 0;
    for (int r = 0; r < D; r++)
        s += w[r];
    return s;
}

static int try_vector(search *s, const int *w) {
    double t = makespan(&s->m, w);
    long sum = sum_of(w, s->D);
    if (t < s->best_t * (1 - 1e-12) || (t <= s->best_t * (1 + 1e-12) && sum < s->best_sum)) {
        memcpy(s->best, w, (size_t)s->D * sizeof *w);
        s->best_t = t, s->best_sum = sum;
        return 1;
    }
    return 0;
}

/* Every non-increasing w[r..D-2] >= w[r+1] within u, w[D-1] = 0. */
static void enumerate(search *s, int r) {
    if (r < 0) {
        try_vector(s, s->w);
        return;
    }
    for (int x = s->w[r + 1]; x <= s->u[r]; x++) {
        s->w[r] = x;
        enumerate(s, r - 1);
    }
}

/* How many vectors enumerate() would try, stopping above limit. */
static long count_vectors(const int *u, int D, long limit) {
    int hi = D > 1 ? u[0] : 0;
    long *c = calloc((size_t)hi + 1, sizeof *c), total = 0; /* c[x]: ways with w[r] = x */
    if (!c) return limit + 1;
    c[0] = 1; /* w[D-1] = 0 */
    for (int r = D - 2; r >= 0; r--) {
        long run = 0;
        for (int x = 0; x <= hi; x++) { /* w[r] = x takes any w[r+1] <= x */
            run += c[x];
            if (run > limit) run = limit + 1;
            c[x] = x <= u[r] ? run : 0;
        }
    }
    for (int x = 0; x <= hi; x++)
        total += c[x];
    free(c);
    return total;
}

/* Moves of one step (a depth +-1, or the warm-ups of ranks 0..r one deeper) while any
 * improves; s->best holds the start. */
static void local_search(search *s) {
    int D = s->D, *w = s->w;
    for (int improved = 1, rounds = 0; improved && rounds < 64 * D; rounds++) {
        improved = 0;
        for (int r = 0; r < D - 1 && !improved; r++)
            for (int move = 0; move < 3 && !improved; move++) {
                memcpy(w, s->best, (size_t)D * sizeof *w);
                if (move == 0) w[r]++;
                if (move == 1) w[r]--;
                if (move == 2)
                    for (int q = 0; q <= r; q++)
                        w[q]++;
                int ok = 1;
                for (int q = 0; q < D - 1; q++)
                    ok &= w[q] >= w[q + 1] && w[q] <= s->u[q];
                if (ok) improved = try_vector(s, w);
            }
    }
}

/* ---------------------------------------------------------------- the generator */

static int check_hepipe(const ht_pipe_params *p) {
    for (int r = 0; p->stage_time && r < p->D; r++)
        if (!isfinite(p->stage_time[r]) || p->stage_time[r] <= 0)
            return ht_error(HT_EINPUT,
                            "schedule \"hepipe\": stage %d has relative time %g; stage times "
                            "must be finite and > 0 (were the stages measured?)",
                            r, p->stage_time[r]);
    for (int r = 0; p->max_inflight && r < p->D; r++)
        if (p->max_inflight[r] < 1)
            return ht_error(HT_EINPUT,
                            "schedule \"hepipe\": rank %d may hold %d micro-batches in flight; "
                            "every rank needs room for at least 1 (free device memory or "
                            "recompute)",
                            r, p->max_inflight[r]);
    return HT_OK;
}

/* The warm-up depths for p (see the top of the file) into w[D]. */
static void choose_depths(const ht_pipe_params *p, int *w) {
    int D = p->D, N = p->N;
    double *ones = NULL;
    const double *t = p->stage_time;
    if (!t) {
        ones = ht_xmalloc((size_t)D * sizeof *ones);
        for (int r = 0; r < D; r++)
            ones[r] = 1;
        t = ones;
    }
    int *u = ht_xmalloc((size_t)D * sizeof *u);
    for (int r = 0, lim = N - 1; r < D; r++) {
        int cap = p->max_inflight ? p->max_inflight[r] - 1 : N - 1;
        if (cap < lim) lim = cap;
        u[r] = r == D - 1 ? 0 : lim;
    }
    search s = {.m = {D, N, t, p->bf_ratio > 0 ? p->bf_ratio : 1}, .D = D, .u = u, .best_t = INFINITY, .best_sum = 0};
    s.m.fwd_end = ht_xmalloc((size_t)D * N * sizeof(double));
    s.m.bwd_end = ht_xmalloc((size_t)D * N * sizeof(double));
    s.m.pos = ht_xmalloc((size_t)D * sizeof(int));
    s.m.clock = ht_xmalloc((size_t)D * sizeof(double));
    s.w = ht_xcalloc((size_t)D, sizeof(int));
    s.best = ht_xcalloc((size_t)D, sizeof(int));
    for (int r = 0; r < D; r++) /* 1F1B within the limits */
        s.w[r] = D - 1 - r < u[r] ? D - 1 - r : u[r];
    try_vector(&s, s.w);
    double t_1f1b = s.best_t;
    memcpy(w, s.w, (size_t)D * sizeof *w);
    if (count_vectors(u, D, EXHAUSTIVE_MAX) <= EXHAUSTIVE_MAX) {
        s.w[D - 1] = 0;
        enumerate(&s, D - 2);
    } else {
        local_search(&s);
    }
    /* Only a clear gain moves off 1F1B (within the limits), not a tie with fewer slots: the
     * stage times are start-up measurements, and a warm-up made shallower because the
     * slowest stage hides it costs bubble as soon as another stage turns out as slow (4 ranks
     * on 2 shared cores, stage times 0.06, 6.8, 13.0, 13.7 ms: a tie under them, a bubble of
     * 0.62 against 1F1B's 0.41 under the costs measured in the run). */
    if (s.best_t <= t_1f1b * (1 - MIN_GAIN)) memcpy(w, s.best, (size_t)D * sizeof *w);
    free(s.m.fwd_end), free(s.m.bwd_end), free(s.m.pos), free(s.m.clock);
    free(s.w), free(s.best), free(u), free(ones);
}

int ht_pipe_gen_hepipe(const ht_pipe_params *p, ht_pipe_sched *s) {
    int rc = check_hepipe(p);
    if (rc) return rc;
    int *w = ht_xmalloc((size_t)p->D * sizeof *w);
    choose_depths(p, w);
    ht_pipe_emit_warmup(s, p->D, p->N, w);
    free(w);
    return HT_OK;
}
