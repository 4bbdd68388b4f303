/* The decision rules of the synchronisation policies (pure; see rules.h for the contracts and
 * the papers). Nothing here allocates except ht_pgroup_init, and nothing keeps state outside
 * the structs the caller passes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "sync/rules.h"

/* ------------------------------------------------------------------ SAP-Reduce weights */

/* SAP-Reduce (Ma, Hu, Wong): geometric masses over staleness levels. Group sizes are small,
 * so members at the same level are counted in O(p^2) rather than with a table over levels
 * (T can be large). The mass of the empty levels is the total, 1 - alpha^T, less the occupied
 * levels' masses; level 1 always has a member (the freshest). */
void ht_sap_weights(const int64_t *t, int p, double alpha, double *w) {
    int64_t tmax = t[0], T = 1;
    for (int i = 1; i < p; i++)
        if (t[i] > tmax) tmax = t[i];
    for (int i = 0; i < p; i++)
        if (tmax - t[i] + 1 > T) T = tmax - t[i] + 1;
    double total = 1.0 - pow(alpha, (double)T), occupied = 0.0;
    for (int i = 0; i < p; i++) {
        int64_t s = tmax - t[i] + 1, first = 1, count = 0;
        for (int j = 0; j < p; j++)
            if (tmax - t[j] + 1 == s) {
                count++;
                if (j < i) first = 0;
            }
        double mass = pow(alpha, (double)(s - 1)) * (1.0 - alpha);
        if (first) occupied += mass;
        w[i] = mass / (double)count; /* level 1's share of the empty mass is added below */
    }
    int n1 = 0;
    for (int i = 0; i < p; i++)
        n1 += t[i] == tmax;
    double extra = (total - occupied) / n1;
    for (int i = 0; i < p; i++)
        w[i] = (w[i] + (t[i] == tmax ? extra : 0.0)) / total;
}

/* SAP update: this member's own model keeps weight 1/p, the others share (p-1)/p in the
 * proportions of their SAP weights ((S - w x) / (1 - w) is their normalised weighted mean). */
void ht_sap_update(float *x, const float *S, size_t n, double w, int p) {
    if (p <= 1) return;
    double k = (double)(p - 1) / (1.0 - w);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(((S[i] - w * x[i]) * k + x[i]) / p);
}

/* ------------------------------------------------------------------------------- SSP */

/* Stale synchronous parallel (Ho et al.): a worker may run ahead of the slowest active one by
 * at most s clocks. */
int64_t ht_ssp_min_clock(const int64_t *clock, const int *active, int n) {
    int64_t m = INT64_MAX;
    for (int i = 0; i < n; i++)
        if (active[i] && clock[i] < m) m = clock[i];
    return m;
}

int ht_ssp_may_run(int64_t c, int64_t min_clock, int s) {
    if (min_clock >= c) return 1; /* also INT64_MAX (nobody active) without overflow */
    return c - min_clock <= s;
}

/* ------------------------------------------------------------------------------ DASP */

/* DASP (Ma Xiang et al.): workers of similar speed average synchronously, the rest update the
 * server asynchronously with staleness-scaled gradients. state[] holds the sorted order of the
 * known active workers while the groups are cut, then is overwritten with the states. */
int ht_dasp_assign(const double *tau, const int *active, int n, double similar, int *state,
                   int *group) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        group[i] = -1;
        if (!active[i] || !(tau[i] > 0)) continue; /* !(> 0) also catches NaN */
        int k = m++;
        for (; k > 0 && tau[state[k - 1]] > tau[i]; k--) /* stable: ties stay by index */
            state[k] = state[k - 1];
        state[k] = i;
    }
    int nsync = 0;
    for (int a = 0, b; a < m; a = b) {
        double limit = similar * tau[state[a]];
        for (b = a + 1; b < m && tau[state[b]] <= limit; b++) {
        }
        if (b - a < 2) continue;
        for (int k = a; k < b; k++)
            group[state[k]] = nsync;
        nsync++;
    }
    int units = nsync;
    for (int i = 0; i < n; i++) {
        state[i] = group[i] >= 0 ? HT_DASP_SYNC : HT_DASP_ASYNC;
        units += active[i] && group[i] < 0;
    }
    return units;
}

double ht_dasp_scale(int64_t sigma, int units) {
    double r = (double)(units < 1 ? 1 : units) / (double)(sigma < 1 ? 1 : sigma);
    return r < 1.0 ? r : 1.0;
}

void ht_ps_share_scales(int adamw, double share, double *gscale, double *lrscale) {
    *gscale = adamw ? 1.0 : share;
    *lrscale = adamw ? share : 1.0;
}

/* ---------------------------------------------------------- P-Reduce group generator */

/* P-Reduce (Miao et al.): the first P ready workers average together, so fast workers do not
 * wait for slow ones; a periodic global group keeps the models from drifting apart (the
 * SAP-Reduce variant), and a deadline keeps a lone worker from waiting forever. */
void ht_pgroup_init(ht_pgroup *g, int n, int P, double deadline_s, int global_every) {
    memset(g, 0, sizeof *g);
    g->n = n;
    g->P = P > n ? n : P;
    g->deadline_s = deadline_s;
    g->global_every = global_every;
    g->queue = ht_xmalloc((size_t)n * sizeof *g->queue);
    g->since = ht_xmalloc((size_t)n * sizeof *g->since);
    g->active = ht_xmalloc((size_t)n * sizeof *g->active);
    for (int i = 0; i < n; i++)
        g->active[i] = 1;
    g->nactive = n;
}

void ht_pgroup_free(ht_pgroup *g) {
    free(g->queue);
    free(g->since);
    free(g->active);
    memset(g, 0, sizeof *g);
}

static int queued_at(const ht_pgroup *g, int w) {
    for (int k = 0; k < g->len; k++)
        if (g->queue[k] == w) return k;
    return -1;
}

/* Takes the first k waiting workers off the queue into out[]. */
static int take(ht_pgroup *g, int k, int *out) {
    memcpy(out, g->queue, (size_t)k * sizeof *out);
    memmove(g->queue, g->queue + k, (size_t)(g->len - k) * sizeof *g->queue);
    memmove(g->since, g->since + k, (size_t)(g->len - k) * sizeof *g->since);
    g->len -= k;
    if (k >= 2) g->groups++;
    return k;
}

void ht_pgroup_ready(ht_pgroup *g, int w, double now) {
    if (w < 0 || w >= g->n || !g->active[w] || queued_at(g, w) >= 0) return;
    g->queue[g->len] = w;
    g->since[g->len++] = now;
}

void ht_pgroup_leave(ht_pgroup *g, int w) {
    if (w < 0 || w >= g->n || !g->active[w]) return;
    int k = queued_at(g, w);
    if (k >= 0) {
        memmove(g->queue + k, g->queue + k + 1, (size_t)(g->len - k - 1) * sizeof *g->queue);
        memmove(g->since + k, g->since + k + 1, (size_t)(g->len - k - 1) * sizeof *g->since);
        g->len--;
    }
    g->active[w] = 0;
    g->nactive--;
}

int ht_pgroup_next(ht_pgroup *g, double now, int *out) {
    if (g->len == 0) return 0;
    /* queued workers are all active (leave dequeues), so len == nactive: everyone waits */
    if (g->global_every > 0 && (g->groups + 1) % g->global_every == 0)
        return g->len == g->nactive ? take(g, g->len, out) : 0;
    if (g->len >= g->P) return take(g, g->P, out);
    if (g->nactive < g->P && g->len == g->nactive) return take(g, g->len, out);
    if (g->deadline_s > 0 && now - g->since[0] >= g->deadline_s) return take(g, g->len, out);
    return 0;
}

double ht_pgroup_wait_hint(const ht_pgroup *g, double now) {
    if (g->len == 0 || g->deadline_s <= 0) return -1.0;
    double h = g->since[0] + g->deadline_s - now;
    return h > 0 ? h : 0.0;
}

/* ------------------------------------------------------------------------------ gossip */

/* Circle method over m = n-1 (even n; worker n-1 is the centre) or m = n (odd n) positions:
 * in round r, i and j < m meet when i + j == 2r (mod m). m is odd, so 2 is invertible mod m
 * and each pair meets in exactly one round of the cycle; the position with 2i == 2r, i == r,
 * meets the centre (even n) or sits out (odd n). */
int ht_gossip_peer(int i, int r, int n) {
    if (n <= 1 || i < 0 || i >= n) return -1;
    int m = n % 2 ? n : n - 1;
    int rr = (r % m + m) % m;
    if (n % 2 == 0 && i == n - 1) return rr;
    if (i == rr) return n % 2 ? -1 : n - 1;
    return ((2 * rr - i) % m + m) % m;
}

/* Adaptive gossip (Ho, Wu, Liu): exchange when the model has moved by more than theta
 * relative to the last exchange, with max_period as a floor on the exchange rate. */
int ht_gossip_due(double change_norm, double w_last_norm, double theta, int since, int max_period) {
    if (max_period > 0 && since >= max_period) return 1;
    if (w_last_norm == 0) return 1;
    return change_norm / w_last_norm > theta;
}

/* Push-sum (Kempe et al.; GoSGD, Blot et al.): a weighted mean keeps the sum of weight x model
 * over all workers invariant, so the models converge to the true average. */
void ht_pushsum_merge(float *x, double a, const float *y, double b, size_t n) {
    double s = a + b;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((a * x[i] + b * y[i]) / s);
}
