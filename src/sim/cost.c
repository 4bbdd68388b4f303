/* The cost model: per-layer times from a hetprof profile (interpolated over the batch size
 * as ht_profile_speed does) or from a roofline over the model description's FLOPs and bytes;
 * optimizer time from its memory traffic; links from the cluster. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "nn/model.h"
#include "sim/sim.h"

/* Kernels a layer's forward enqueues (backward: twice as many); a transformer block runs
 * two LayerNorms, the QKV / projection / MLP GEMMs, attention and the residual adds. */
static int launches_of(int kind) {
    switch (kind) {
    case HT_LAYER_BLOCK: return 14;
    case HT_LAYER_FLATTEN: return 0;
    default: return 1;
    }
}

void ht_sim_model_from(ht_sim_model *sm, const ht_model *m, const char *optim) {
    memset(sm, 0, sizeof *sm);
    sm->nlayers = m->nlayers;
    sm->l = ht_xcalloc((size_t)m->nlayers, sizeof *sm->l);
    for (int i = 0; i < m->nlayers; i++) {
        const ht_layer *l = &m->layers[i];
        ht_sim_layer *s = &sm->l[i];
        ht_strlcpy(s->name, l->name, sizeof s->name);
        s->kind = (int)l->kind;
        s->flops_f = ht_layer_flops_forward(l);
        s->flops_b = ht_layer_flops_backward(l, 1);
        s->flops_w = ht_layer_flops_weights(l);
        s->act_bytes = (double)ht_layer_act_bytes(l);
        s->out_bytes = 4.0 * l->out;
        s->in_bytes = 4.0 * l->in;
        s->param_bytes = 4.0 * (double)l->nparams;
        s->launches = launches_of(s->kind);
        sm->param_bytes += s->param_bytes;
        for (int k = 0; k < l->ntensors; k++) {
            if (!l->t[k].tied) continue;
            double c = 4.0;
            for (int d = 0; d < l->t[k].ndim; d++)
                c *= (double)l->t[k].shape[d];
            sm->tied_bytes = c;
        }
    }
    if (m->nlayers) { /* the loss: softmax cross-entropy over rows x classes logits */
        ht_sim_layer *s = &sm->l[m->nlayers - 1];
        double logits = (double)m->rows * m->classes;
        s->flops_f += 5.0 * logits;
        s->flops_b += 2.0 * logits;
        s->act_bytes += 4.0 * logits; /* dlogits */
        s->launches += 2;
    }
    sm->in_bytes = 4.0 * m->in_features;
    int adam = optim && !strcmp(optim, "adamw");
    /* bytes per parameter per step: sgd with momentum reads p, g, v and writes p, v; adamw
     * reads p, g, m, v and writes p, m, v */
    sm->optim_bytes_per_param = adam ? 28 : 20;
    sm->optim_state_floats = adam ? 2 : 1;
    sm->adamw = adam;
}

void ht_sim_model_free(ht_sim_model *sm) {
    free(sm->l);
    memset(sm, 0, sizeof *sm);
}

/* A profile entry's time for layer `name` at batch b (seconds), interpolated linearly
 * between the measured batches around b and in proportion outside them; -1 when absent. */
static double prof_layer(const ht_prof_dev *d, const char *name, int b, int bwd) {
    int lo = -1, hi = -1; /* nearest measured batch below / at-or-above b */
    for (int i = 0; i < d->nlayers; i++) {
        const ht_prof_layer *l = &d->layers[i];
        if (strcmp(l->name, name)) continue;
        if (l->batch < b && (lo < 0 || l->batch > d->layers[lo].batch)) lo = i;
        if (l->batch >= b && (hi < 0 || l->batch < d->layers[hi].batch)) hi = i;
    }
#define T(i) ((bwd ? d->layers[i].bwd_ms : d->layers[i].fwd_ms) * 1e-3)
    if (lo < 0 && hi < 0) return -1;
    if (hi < 0) return T(lo) * b / d->layers[lo].batch;
    if (lo < 0) return T(hi) * b / d->layers[hi].batch;
    double b0 = d->layers[lo].batch, b1 = d->layers[hi].batch;
    return T(lo) + (T(hi) - T(lo)) * (b - b0) / (b1 - b0);
#undef T
}

/* How much longer the layers take inside a step than measured one at a time, at batch b:
 * hetprof times each layer alone, repeated back to back (its weights and activations warm in
 * the caches, no other kernel between), and also whole steps; a training step runs the
 * layers in sequence, like the latter. On this machine (BENCHMARKS.md, 2026-11-23 hetsim
 * calibration) the whole step took 1.1-1.2x the sum of its layers at batch 128. The ratio
 * step / sum of the profile's layers at each measured batch, interpolated linearly between
 * them, the nearest one outside; 1 without whole-step rates. The layers keep their shares of
 * the step: only the total comes from the step measurement. */
static double in_step_ratio(const ht_prof_dev *d, int b) {
    double rb[HT_PROF_MAX_BATCHES], rr[HT_PROF_MAX_BATCHES];
    int n = 0;
    for (int i = 0; i < d->nrates; i++) {
        const ht_prof_rate *q = &d->rates[i];
        double sum = 0;
        for (int k = 0; k < d->nlayers; k++)
            if (d->layers[k].batch == q->batch) sum += d->layers[k].fwd_ms + d->layers[k].bwd_ms;
        if (q->value <= 0 || sum <= 0) continue;
        int j = n++; /* insertion by batch */
        for (; j > 0 && rb[j - 1] > q->batch; j--)
            rb[j] = rb[j - 1], rr[j] = rr[j - 1];
        rb[j] = q->batch, rr[j] = 1e3 * q->batch / q->value / sum;
    }
    if (n == 0) return 1;
    if (b <= rb[0]) return rr[0];
    for (int i = 1; i < n; i++)
        if (b <= rb[i]) return rr[i - 1] + (rr[i] - rr[i - 1]) * (b - rb[i - 1]) / (rb[i] - rb[i - 1]);
    return rr[n - 1];
}

/* Sustained GFLOP/s of a kind: its own figure, else the profile entry's best GEMM. */
static double gflops_of(const ht_sim_cluster *c, const ht_sim_devtype *t) {
    if (t->gflops > 0) return t->gflops * t->scale;
    double g = 0;
    if (c->prof && t->prof_dev >= 0)
        for (int i = 0; i < c->prof->dev[t->prof_dev].ngemm; i++)
            if (c->prof->dev[t->prof_dev].gemm[i].gflops > g) g = c->prof->dev[t->prof_dev].gemm[i].gflops;
    return g * t->scale;
}

static double bw_of(const ht_sim_cluster *c, const ht_sim_devtype *t) {
    if (t->mem_bw_gbs > 0) return t->mem_bw_gbs * t->scale;
    if (c->prof && t->prof_dev >= 0) return c->prof->dev[t->prof_dev].mem_bw_gbs * t->scale;
    return 0;
}

static double launch_of(const ht_sim_cluster *c, const ht_sim_devtype *t) {
    if (t->launch_us > 0) return t->launch_us * 1e-6;
    if (c->prof && t->prof_dev >= 0) return c->prof->dev[t->prof_dev].launch_us * 1e-6;
    return 0;
}

/* Roofline: the larger of compute at the sustained rate and memory traffic at the memory
 * bandwidth (parameters once, activations in, out and kept), plus launches. */
static double roofline(const ht_sim_cluster *c, const ht_sim_devtype *t, const ht_sim_layer *l,
                       int b, int bwd) {
    double g = gflops_of(c, t), bw = bw_of(c, t);
    double flops = (bwd ? l->flops_b : l->flops_f) * b;
    double bytes = l->param_bytes + (l->in_bytes + l->out_bytes + l->act_bytes) * b;
    if (bwd) bytes *= 2;
    double tc = g > 0 ? flops / (g * 1e9) : 0, tm = bw > 0 ? bytes / (bw * 1e9) : 0;
    return (tc > tm ? tc : tm) + (bwd ? 2 : 1) * l->launches * launch_of(c, t);
}

double ht_sim_layer_time(const ht_sim_cluster *c, int r, const ht_sim_model *m, int l, int b,
                         int bwd) {
    if (b <= 0) return 0;
    const ht_sim_devtype *t = &c->types[c->rank_type[r]];
    double s = c->slowdown ? c->slowdown[r] : 1;
    if (c->prof && t->prof_dev >= 0) {
        const ht_prof_dev *d = &c->prof->dev[t->prof_dev];
        double x = prof_layer(d, m->l[l].name, b, bwd);
        if (x >= 0 && !bwd && l == m->nlayers - 1) { /* the loss runs after the last layer */
            double y = prof_layer(d, HT_PROF_LOSS, b, 0);
            if (y > 0) x += y;
        }
        if (x >= 0) return s * x * in_step_ratio(d, b) / t->scale;
    }
    return s * roofline(c, t, &m->l[l], b, bwd);
}

double ht_sim_range_time(const ht_sim_cluster *c, int r, const ht_sim_model *m, int lo, int hi,
                         int b, int bwd) {
    double s = 0;
    for (int i = lo; i < hi; i++)
        s += ht_sim_layer_time(c, r, m, i, b, bwd);
    return s;
}

double ht_sim_optim_time(const ht_sim_cluster *c, int r, const ht_sim_model *m, double param_bytes) {
    const ht_sim_devtype *t = &c->types[c->rank_type[r]];
    double bw = bw_of(c, t);
    double s = c->slowdown ? c->slowdown[r] : 1;
    double bytes = param_bytes / 4.0 * m->optim_bytes_per_param;
    return s * ((bw > 0 ? bytes / (bw * 1e9) : 0) + launch_of(c, t));
}

double ht_sim_copy_time(const ht_sim_cluster *c, int r, double bytes) {
    const ht_sim_devtype *t = &c->types[c->rank_type[r]];
    double bw = bw_of(c, t);
    double s = c->slowdown ? c->slowdown[r] : 1;
    return s * ((bw > 0 ? 2 * bytes / (bw * 1e9) : 0) + launch_of(c, t));
}

double ht_sim_host_copy(const ht_sim_cluster *c, int r, double *d2h) {
    const ht_sim_devtype *t = &c->types[c->rank_type[r]];
    double dg = t->d2h_gbs, hg = t->h2d_gbs;
    if (c->prof && t->prof_dev >= 0 && dg <= 0) dg = c->prof->dev[t->prof_dev].d2h_gbs;
    if (c->prof && t->prof_dev >= 0 && hg <= 0) hg = c->prof->dev[t->prof_dev].h2d_gbs;
    if (d2h) *d2h = dg > 0 ? 1 / (dg * 1e9) : 0;
    return hg > 0 ? 1 / (hg * 1e9) : 0;
}

ht_sim_link ht_sim_link_of(const ht_sim_cluster *c, int a, int b) {
    return c->rank_host[a] == c->rank_host[b] ? c->intra : c->inter;
}

ht_sim_link ht_sim_link_slower(ht_sim_link a, ht_sim_link b) {
    return (ht_sim_link){a.latency_s > b.latency_s ? a.latency_s : b.latency_s,
                         a.bw_Bps < b.bw_Bps ? a.bw_Bps : b.bw_Bps,
                         a.ring_Bps < b.ring_Bps ? a.ring_Bps : b.ring_Bps};
}

void ht_sim_cluster_uniform(ht_sim_cluster *c, const ht_sim_devtype *t, int n, int per_host,
                            ht_sim_link intra, ht_sim_link inter) {
    memset(c, 0, sizeof *c);
    c->types = ht_xmalloc(sizeof *c->types);
    c->types[0] = *t;
    if (c->types[0].scale <= 0) c->types[0].scale = 1;
    c->ntypes = 1;
    c->nranks = n;
    c->rank_type = ht_xcalloc((size_t)n, sizeof *c->rank_type);
    c->rank_host = ht_xcalloc((size_t)n, sizeof *c->rank_host);
    c->slowdown = ht_xcalloc((size_t)n, sizeof *c->slowdown);
    if (per_host < 1) per_host = 1;
    for (int r = 0; r < n; r++) {
        c->rank_host[r] = r / per_host;
        c->slowdown[r] = 1;
    }
    c->nhosts = (n + per_host - 1) / per_host;
    c->intra = intra;
    c->inter = inter;
}

void ht_sim_cluster_free(ht_sim_cluster *c) {
    free(c->prof);
    free(c->types);
    free(c->rank_type);
    free(c->rank_host);
    free(c->slowdown);
    memset(c, 0, sizeof *c);
}
