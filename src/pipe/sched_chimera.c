/* Chimera (Li and Hoefler, SC'21): two pipelines over the same D ranks in opposite
 * directions. The "down" pipeline (dir 0) runs stage s on rank s, the "up" one (dir 1) on
 * rank D-1-s, so rank r holds two model replicas: chunk 0 = stage r of the down pipeline and
 * chunk 1 = stage D-1-r of the up pipeline. Micro-batches come in basic units of D: the
 * first half of a unit goes down, the second half up, so each pipeline's bubbles are filled
 * by the other's work.
 *
 * The order on each rank comes from a list scheduler on unit time (F = 1, B = bf_ratio;
 * F = B is the paper's assumption for its bubble count D-2): each time a rank is idle it
 * starts the ready
 * operation that comes first by (backward before forward, earlier basic unit, forward of
 * the deeper stage first, backward of the shallower stage first, micro-batch id). With
 * N = D this gives the paper's basic unit: makespan 3D-2 = 2N+D-2, D-2 idle slots per rank,
 * D/2+1 .. D micro-batches in flight; with N = kD, units are concatenated and the next
 * unit's forwards fill the previous unit's trailing bubbles, makespan 2N+D-2 (the paper's
 * "direct concatenation" with F = B). With B = 2F the paper notes that concatenated units
 * leave intermediate bubbles (its remedies, forward doubling and backward halving, are not
 * done here): planned for F = B but run at B = 2F, D=8 N=32 takes 125 against 117 for 1F1B;
 * planned for B = 2F (bf_ratio) 110, at the price of up to ~1.5 D micro-batches in flight
 * (12 at D=8), the idle slots being filled with the next unit's forwards. Only the current
 * and the next unit are candidates on a
 * rank, so at most two units' activations are ever started. Each stage's two replicas
 * (rank s chunk 0, rank D-1-s chunk 1) get their REDUCE_GRADS right after their last
 * backward; by the symmetry r <-> D-1-r both ranks of a pair reach their two reductions in
 * the same order, so blocking collectives cannot cross. */
#include <math.h>
#include <stdlib.h>

#include "core/err.h"
#include "pipe/internal.h"

/* Down (0) or up (1) for micro-batch m: the first ceil(u/2) of each unit of u micro-batches
 * (u = D except for a last, partial unit when D does not divide N) go down. */
static int chimera_dir(int m, int D, int N) {
    int u0 = m / D * D, u = N - u0 < D ? N - u0 : D;
    return m - u0 >= (u + 1) / 2;
}

typedef struct pick {
    int op, mb, stage;
} pick;

/* Lexicographic priority described above; smaller wins. */
static int better(const pick *a, const pick *b, int D) {
    int ka[4] = {a->op != HT_PI_BWD, a->mb / D, a->op == HT_PI_BWD ? a->stage : -a->stage, a->mb};
    int kb[4] = {b->op != HT_PI_BWD, b->mb / D, b->op == HT_PI_BWD ? b->stage : -b->stage, b->mb};
    for (int i = 0; i < 4; i++)
        if (ka[i] != kb[i]) return ka[i] < kb[i];
    return 0;
}

/* Ready at time t on rank r: what micro-batch m can start there. fend / bend: end time of
 * the FWD / BWD of (m, stage) as [m * D + stage], -1 while not run. */
static int ready(const int *fend, const int *bend, int D, int m, int st, int t, pick *p) {
    const int *f = fend + (size_t)m * D, *b = bend + (size_t)m * D;
    if (f[st] < 0) {
        if (st > 0 && (f[st - 1] < 0 || f[st - 1] > t)) return 0;
        *p = (pick){HT_PI_FWD, m, st};
        return 1;
    }
    if (b[st] >= 0 || f[st] > t) return 0;
    if (st < D - 1 && (b[st + 1] < 0 || b[st + 1] > t)) return 0;
    *p = (pick){HT_PI_BWD, m, st};
    return 1;
}

/* The list scheduler: fills fend / bend and, per rank r, its 2N operations in time order at
 * rec[2Nr ..] with their start times in t[2Nr ..]. -1 if it got stuck (a bug: the lowest
 * open unit always has a ready operation). */
static int plan(int D, int N, const int *mb_dir, int fq, int bq, int *fend, int *bend, pick *rec,
                int *t) {
    size_t cells = (size_t)N * D;
    int *lo = ht_xcalloc((size_t)D, sizeof *lo); /* per rank: first unit not finished */
    int *n = ht_xcalloc((size_t)D, sizeof *n), *busy = ht_xcalloc((size_t)D, sizeof *busy);
    pick *chosen = ht_xmalloc((size_t)D * sizeof *chosen);
    for (size_t i = 0; i < cells; i++)
        fend[i] = bend[i] = -1;
    for (int now = 0, todo = 2 * N * D; todo > 0; now++) {
        int picked = 0, running = 0;
        for (int r = 0; r < D; r++) {
            chosen[r].op = -1;
            if (busy[r] > now) {
                running = 1;
                continue;
            }
            int hi = (lo[r] + 2) * D < N ? (lo[r] + 2) * D : N;
            for (int m = lo[r] * D; m < hi; m++) {
                pick c;
                if (ready(fend, bend, D, m, mb_dir[m] ? D - 1 - r : r, now, &c) &&
                    (chosen[r].op < 0 || better(&c, &chosen[r], D)))
                    chosen[r] = c;
            }
            picked += chosen[r].op >= 0;
        }
        if (!picked && !running) {
            free(lo), free(n), free(busy), free(chosen);
            return -1;
        }
        for (int r = 0; r < D; r++) {
            pick *c = &chosen[r];
            if (c->op < 0) continue;
            busy[r] = now + (c->op == HT_PI_FWD ? fq : bq);
            (c->op == HT_PI_FWD ? fend : bend)[(size_t)c->mb * D + c->stage] = busy[r];
            rec[(size_t)2 * N * r + n[r]] = *c, t[(size_t)2 * N * r + n[r]++] = now;
            todo--;
            while (lo[r] * D < N) { /* past units whose backwards here are all done */
                int done = 1, hi = (lo[r] + 1) * D < N ? (lo[r] + 1) * D : N;
                for (int m = lo[r] * D; m < hi && done; m++)
                    done = bend[(size_t)m * D + (mb_dir[m] ? D - 1 - r : r)] >= 0;
                if (!done) break;
                lo[r]++;
            }
        }
    }
    free(lo), free(n), free(busy), free(chosen);
    return 0;
}

/* The order of rank r from its operations in time order (rec, 2N of them, start times in
 * t), with the reductions of its two stages placed at the planned time both replicas
 * of the stage are done: in each rank's stream, after every operation that ends by then and
 * before every one that starts later. The two ranks of a pair {r, D-1-r} hold the same two
 * stages and order their reductions by the same (time, stage) key, so even blocking
 * reductions cannot cross; and as every dependency points forward in planned time, a
 * rendezvous at a planned time cannot close a cycle, whatever the real durations. */
static void order_rank(ht_pipe_order *o, int r, int D, const pick *rec, const int *t, int n,
                       const int *ready, const int *mb_dir) {
    int st[2] = {r, D - 1 - r}, dir[2] = {0, 1};
    if (ready[st[1]] < ready[st[0]] || (ready[st[1]] == ready[st[0]] && st[1] > st[0]))
        st[0] = D - 1 - r, st[1] = r, dir[0] = 1, dir[1] = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        for (; k < 2 && ready[st[k]] <= t[i]; k++)
            ht_pipe_order_add(o, r, HT_PI_REDUCE_GRADS, dir[k], st[k], -1);
        ht_pipe_order_add(o, r, rec[i].op, mb_dir[rec[i].mb], rec[i].stage, rec[i].mb);
    }
    for (; k < 2; k++)
        ht_pipe_order_add(o, r, HT_PI_REDUCE_GRADS, dir[k], st[k], -1);
}

int ht_pipe_gen_chimera(const ht_pipe_params *p, ht_pipe_sched *s) {
    int D = p->D, N = p->N;
    char why[512];
    if (ht_pipe_kind_shape(p->kind, D, N, p->v, why, sizeof why) != HT_OK) /* D even */
        return ht_error(HT_EINPUT, "%s", why);
    for (int m = 0; m < N; m++)
        s->mb_dir[m] = chimera_dir(m, D, N);
    size_t cells = (size_t)N * D;
    int *fend = ht_xmalloc(cells * sizeof *fend), *bend = ht_xmalloc(cells * sizeof *bend);
    pick *rec = ht_xmalloc(2 * cells * sizeof *rec); /* rank r's 2N operations at rec[2Nr] */
    int *t = ht_xmalloc(2 * cells * sizeof *t), *ready = ht_xcalloc((size_t)D, sizeof *ready);
    /* time quanta: the fewest per forward that make the backward a whole number of them */
    double bf = p->bf_ratio > 0 ? p->bf_ratio : 1;
    int fq = 8;
    for (int q = 1; q <= 8; q++)
        if (fabs(bf * q - floor(bf * q + 0.5)) < 1e-9) {
            fq = q;
            break;
        }
    int bq = (int)floor(bf * fq + 0.5) > 0 ? (int)floor(bf * fq + 0.5) : 1;
    if (plan(D, N, s->mb_dir, fq, bq, fend, bend, rec, t)) {
        free(fend), free(bend), free(rec), free(t), free(ready);
        return ht_error(HT_ERUNTIME, "schedule \"chimera\" D=%d N=%d: the list scheduler got stuck (a bug)", D, N);
    }
    for (size_t i = 0; i < cells; i++) /* both replicas of stage i % D are done */
        if (bend[i] > ready[i % D]) ready[i % D] = bend[i];
    ht_pipe_order o;
    ht_pipe_order_init(&o, D);
    for (int r = 0; r < D; r++)
        order_rank(&o, r, D, rec + (size_t)2 * N * r, t + (size_t)2 * N * r, 2 * N, ready, s->mb_dir);
    ht_pipe_emit(s, &o);
    ht_pipe_order_free(&o);
    free(fend), free(bend), free(rec), free(t), free(ready);
    return HT_OK;
}
