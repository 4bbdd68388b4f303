/* The decision rules of the synchronisation policies, as pure functions over plain arrays:
 * no MPI, no OpenCL, no clocks of their own (callers pass the time). The runtime in
 * src/sync (parameter server, group generator, gossip) calls them; tests call them directly.
 *
 * Seeds: SAP-Reduce (Lizhi Ma, Chengcheng Hu, Fuxian Wong, "SAP-Reduce: Staleness-Aware
 * P-Reduce with Weight Generator"); P-Reduce (Miao et al., "Heterogeneity-aware distributed
 * machine learning training via partial reduce", SIGMOD 2021); SSP (Ho et al., NIPS 2013);
 * DASP (Ma Xiang et al., CAAI Trans. Intelligent Systems 18(5), 2023); adaptive gossip
 * (Ho, Wu, Liu, CCGrid 2018); push-sum gossip (Kempe et al. 2003; Blot et al., GoSGD). */
#ifndef HT_SYNC_RULES_H
#define HT_SYNC_RULES_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ SAP-Reduce weights */

/* Weights w[0..p) of a group's members from their timestamps t[0..p) (p >= 1, 0 < alpha < 1):
 * s_i = max_j t_j - t_i + 1 (staleness, >= 1), T = max_i s_i; staleness level k = 1..T has
 * mass alpha^(k-1) (1 - alpha); the mass of levels that no member has goes to level 1; a
 * level's mass is split equally among the members at that level; everything is divided by
 * (1 - alpha^T), so the weights sum to 1. Equal timestamps give 1/p each. */
void ht_sap_weights(const int64_t *t, int p, double alpha, double *w);

/* One member's SAP update, elementwise over n values: x <- [ (S - w x)(p-1)/(1-w) + x ] / p,
 * where S = sum_j w_j x_j over the group (p members, this member's weight w < 1). With equal
 * weights 1/p it is the plain average S. p == 1 leaves x unchanged. */
void ht_sap_update(float *x, const float *S, size_t n, double w, int p);

/* ------------------------------------------------------------------------------- SSP */

/* The smallest clock among the active workers (active[i] != 0), INT64_MAX when none is. */
int64_t ht_ssp_min_clock(const int64_t *clock, const int *active, int n);

/* 1 when a worker about to compute at clock c may run under staleness bound s: every active
 * worker has reached c - s (c - min_clock <= s). */
int ht_ssp_may_run(int64_t c, int64_t min_clock, int s);

/* ------------------------------------------------------------------------------ DASP */

enum { HT_DASP_ASYNC = 0, HT_DASP_SYNC = 1 };

/* The parallel state of every worker from its moving-average iteration time tau[i] (seconds;
 * <= 0: not known yet) and whether it is active. Known active workers are sorted by tau
 * (ties by index) and cut into speed groups: a worker joins the current group when its tau
 * is at most `similar` (>= 1) times the tau of the group's fastest member, else it starts a
 * new group. Members of groups of two or more get HT_DASP_SYNC and group[i] = the group's
 * number (0, 1, ... from the fastest such group; singletons take no number); everybody else
 * (singletons, unknown tau, inactive) gets HT_DASP_ASYNC and group[i] = -1. Returns the
 * number of independent update sources: SYNC groups plus ASYNC active workers. */
int ht_dasp_assign(const double *tau, const int *active, int n, double similar, int *state,
                   int *group);

/* The factor an asynchronous gradient of staleness sigma (server updates since the worker's
 * parameters were read, >= 0) is scaled by, with `units` independent update sources:
 * min(1, units / max(sigma, 1)). Equal speeds give sigma ~ units - 1 and no scaling; a worker
 * k times slower than the rest is scaled by about 1/k. units < 1 counts as 1. */
double ht_dasp_scale(int64_t sigma, int units);

/* A parameter server's update worth `share` of a bsp step (a push's b / train.batch, times
 * DASP's staleness factor): SGD scales the gradient by share (*gscale = share, *lrscale = 1);
 * AdamW (adamw != 0), whose step is the same for any scaling of its gradients, takes share of
 * the learning rate instead (*gscale = 1, *lrscale = share). */
void ht_ps_share_scales(int adamw, double share, double *gscale, double *lrscale);

/* ---------------------------------------------------------- P-Reduce group generator */

/* First-come first-served groups of ready workers. Rules, checked in this order by
 * ht_pgroup_next:
 *  1. global: when global_every > 0 and the next group's number (groups formed so far, plus
 *     one) is a multiple of global_every, the next group waits for every active worker and
 *     then holds them all (in queue order); rules 2-4 (the deadline too) wait with it;
 *  2. full: P or more are waiting: the first P;
 *  3. fewer active than P: when every active worker waits, all of them;
 *  4. deadline: deadline_s > 0 and the oldest waiting worker has waited at least deadline_s:
 *     everyone waiting (possibly one worker alone).
 * A group of one is returned so that the worker goes on, but it is not counted as a group
 * (it averages nothing). Workers are 0..n-1 and each is in the queue at most once. */
typedef struct ht_pgroup {
    int n, P, global_every;
    double deadline_s;
    int *queue;    /* [n] waiting workers, oldest first */
    double *since; /* [n] when queue[k] became ready */
    int len;
    int *active; /* [n] 1 until ht_pgroup_leave */
    int nactive;
    int64_t groups; /* groups of two or more formed */
} ht_pgroup;

/* n >= 1 workers, 2 <= P (P > n behaves as n), deadline_s >= 0 (0: none), global_every >= 0
 * (0: never). */
void ht_pgroup_init(ht_pgroup *g, int n, int P, double deadline_s, int global_every);
void ht_pgroup_free(ht_pgroup *g);
/* Worker w is ready at time now (seconds, any origin). Ignored when already queued or
 * inactive. */
void ht_pgroup_ready(ht_pgroup *g, int w, double now);
/* Worker w has finished: out of the queue, not waited for by global groups any more. */
void ht_pgroup_leave(ht_pgroup *g, int w);
/* The next group due at time now: writes its members (queue order) to out[] (room for n),
 * takes them off the queue and returns how many (0: none due yet). */
int ht_pgroup_next(ht_pgroup *g, double now, int *out);
/* Seconds from now until rule 4 would fire for the oldest waiting worker (>= 0), or -1 when
 * nothing is waiting or there is no deadline: how long a caller may sleep. */
double ht_pgroup_wait_hint(const ht_pgroup *g, double now);

/* ------------------------------------------------------------------------------ gossip */

/* The peer of worker i in round r among n workers (n >= 1, r >= 0): the round-robin
 * ("circle method") 1-factorisation of the complete graph, round r mod (n-1) for even n (every
 * worker has a peer) and r mod n for odd n (one worker sits out: -1). peer(peer(i)) == i in
 * every round, and every pair meets once in each cycle of rounds. n == 1: -1. */
int ht_gossip_peer(int i, int r, int n);

/* Adaptive gossip trigger (Ho, Wu, Liu): 1 when the model moved enough since the last
 * exchange, ||w - w_last|| / ||w_last|| > theta (w_last_norm == 0 counts as moved), or when
 * `since` steps have passed since it (max_period > 0 and since >= max_period). */
int ht_gossip_due(double change_norm, double w_last_norm, double theta, int since, int max_period);

/* Push-sum merge of a received model y of weight b into x of weight a (a, b > 0):
 * x <- (a x + b y) / (a + b), elementwise over n; the caller's weight becomes a + b. */
void ht_pushsum_merge(float *x, double a, const float *y, double b, size_t n);

#endif
