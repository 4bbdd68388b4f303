/* The discrete-event engine: per-rank op streams run in order of simulated time (a binary
 * heap of (time, rank), ties by rank, so a run is a pure function of its streams). A rank
 * blocked in a RECV or a collective WAIT leaves the heap and is woken by the SEND or the
 * collective's completion. Transfers are serialised on the interfaces of both ends. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "io/json.h"
#include "io/trace.h"
#include "sim/sim.h"

typedef struct stream {
    ht_sim_op *op;
    int n, cap;
} stream;

typedef struct msg { /* one (src, dst, tag) slot of the message table */
    int src, dst;    /* src < 0: empty */
    int64_t tag;
    int state;       /* 1: sent (arrival, start known); 2: receiver waiting */
    double start, arrival;
} msg;

typedef struct coll {
    int *members, n, alg, joined, half; /* half: HT_SIM_RS or HT_SIM_AG, else 0 */
    double bytes, tmax, start, end;
    int done;
} coll;

typedef struct span {
    int rank, name;
    double t0, t1;
} span;

struct ht_sim {
    const ht_sim_cluster *c;
    int n, trace;
    stream *st;
    int *pc;
    double *t, *nic, *mem, *base;
    int *wait_coll;       /* collective a rank is blocked on, -1 */
    double *wait_since;
    msg *tab;             /* open addressing, cap a power of two */
    size_t tcap, tused;
    coll *co;
    int nco, cco;
    char **names;
    int nnames, cnames;
    span *sp;
    size_t nsp, csp;
    struct { double t; int r; } *heap;
    int nheap;
};

ht_sim *ht_sim_new(const ht_sim_cluster *c, int nranks, int trace) {
    ht_sim *s = ht_xcalloc(1, sizeof *s);
    s->c = c;
    s->n = nranks;
    s->trace = trace;
    s->st = ht_xcalloc((size_t)nranks, sizeof *s->st);
    s->pc = ht_xcalloc((size_t)nranks, sizeof *s->pc);
    s->t = ht_xcalloc((size_t)nranks, sizeof *s->t);
    s->nic = ht_xcalloc((size_t)nranks, sizeof *s->nic);
    s->mem = ht_xcalloc((size_t)nranks, sizeof *s->mem);
    s->base = ht_xcalloc((size_t)nranks, sizeof *s->base);
    s->wait_coll = ht_xcalloc((size_t)nranks, sizeof *s->wait_coll);
    s->wait_since = ht_xcalloc((size_t)nranks, sizeof *s->wait_since);
    s->heap = ht_xcalloc((size_t)nranks, sizeof *s->heap);
    s->tcap = 1024;
    s->tab = ht_xmalloc(s->tcap * sizeof *s->tab);
    for (size_t i = 0; i < s->tcap; i++)
        s->tab[i].src = -1;
    return s;
}

void ht_sim_free(ht_sim *s) {
    if (!s) return;
    for (int r = 0; r < s->n; r++)
        free(s->st[r].op);
    for (int i = 0; i < s->nco; i++)
        free(s->co[i].members);
    for (int i = 0; i < s->nnames; i++)
        free(s->names[i]);
    free(s->names);
    free(s->co);
    free(s->st);
    free(s->pc);
    free(s->t);
    free(s->nic);
    free(s->mem);
    free(s->base);
    free(s->wait_coll);
    free(s->wait_since);
    free(s->heap);
    free(s->tab);
    free(s->sp);
    free(s);
}

int ht_sim_name(ht_sim *s, const char *name) {
    for (int i = s->nnames - 1; i >= 0; i--) /* recent names first: streams repeat them */
        if (!strcmp(s->names[i], name)) return i;
    if (s->nnames == s->cnames) {
        s->cnames = s->cnames ? 2 * s->cnames : 64;
        s->names = ht_xrealloc(s->names, (size_t)s->cnames * sizeof *s->names);
    }
    s->names[s->nnames] = ht_xstrdup(name);
    return s->nnames++;
}

void ht_sim_push(ht_sim *s, int r, ht_sim_op op) {
    stream *q = &s->st[r];
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 64;
        q->op = ht_xrealloc(q->op, (size_t)q->cap * sizeof *q->op);
    }
    q->op[q->n++] = op;
}

void ht_sim_compute(ht_sim *s, int r, double dur, int cat, int name) {
    ht_sim_push(s, r, (ht_sim_op){.kind = HT_SIM_COMPUTE, .cat = (uint8_t)cat, .dur = dur,
                                  .name = name, .peer = -1});
}

void ht_sim_send(ht_sim *s, int r, int to, int64_t tag, double bytes, int name) {
    ht_sim_push(s, r, (ht_sim_op){.kind = HT_SIM_SEND, .cat = HT_SIM_CAT_COMM, .peer = to,
                                  .tag = tag, .bytes = bytes, .name = name});
}

void ht_sim_recv(ht_sim *s, int r, int from, int64_t tag, int name) {
    ht_sim_push(s, r, (ht_sim_op){.kind = HT_SIM_RECV, .cat = HT_SIM_CAT_COMM, .peer = from,
                                  .tag = tag, .name = name});
}

int ht_sim_coll_new(ht_sim *s, const int *members, int n, double bytes, int alg) {
    if (s->nco == s->cco) {
        s->cco = s->cco ? 2 * s->cco : 64;
        s->co = ht_xrealloc(s->co, (size_t)s->cco * sizeof *s->co);
    }
    coll *c = &s->co[s->nco];
    memset(c, 0, sizeof *c);
    c->members = ht_xmalloc((size_t)n * sizeof *c->members);
    memcpy(c->members, members, (size_t)n * sizeof *members);
    c->n = n;
    c->bytes = bytes;
    c->alg = alg;
    return s->nco++;
}

int ht_sim_coll_half(ht_sim *s, const int *members, int n, double bytes, int alg, int half) {
    int id = ht_sim_coll_new(s, members, n, bytes, alg);
    s->co[id].half = half;
    return id;
}

void ht_sim_coll(ht_sim *s, int r, int id, int name) {
    ht_sim_push(s, r, (ht_sim_op){.kind = HT_SIM_COLL, .cat = HT_SIM_CAT_COMM, .peer = id,
                                  .name = name});
}

void ht_sim_wait(ht_sim *s, int r, int id, int name) {
    ht_sim_push(s, r, (ht_sim_op){.kind = HT_SIM_WAIT, .cat = HT_SIM_CAT_COMM, .peer = id,
                                  .name = name});
}

void ht_sim_mem_at_last(ht_sim *s, int r, double delta) {
    if (s->st[r].n) s->st[r].op[s->st[r].n - 1].mem += delta;
}

void ht_sim_mem_base(ht_sim *s, int r, double bytes) { s->base[r] = bytes; }

double ht_sim_coll_cost(int alg, int n, double bytes, ht_sim_link l, double add_Bps) {
    if (n <= 1 || bytes <= 0) return 0;
    double chunk = bytes / n;
    /* ring (src/comm/comm.c): reduce-scatter then all-gather, n - 1 steps each of one chunk;
     * the adds of the reduce-scatter read two chunks and write one. A measured step of our
     * ring (hetprof) has them in already, at the average of the two halves' steps; it says
     * nothing of MPI's own algorithms, which stay on bandwidth plus additions. */
    if (alg == HT_SIM_RING && l.ring_Bps > 0)
        return 2.0 * (n - 1) * (l.latency_s + chunk / l.ring_Bps);
    double ring = 2.0 * (n - 1) * (l.latency_s + chunk / l.bw_Bps);
    if (add_Bps > 0) ring += (n - 1) * 3.0 * chunk / add_Bps;
    if (alg == HT_SIM_RING) return ring;
    int lg = 0;
    while ((1 << lg) < n)
        lg++;
    double rd = lg * (l.latency_s + bytes / l.bw_Bps);
    if (add_Bps > 0) rd += lg * 3.0 * bytes / add_Bps;
    return rd < ring ? rd : ring;
}

/* One half of the ring: n - 1 steps of one chunk (the reduce-scatter's adds as the
 * all-reduce's); MPI's reduce-scatter and all-gather taken as the same ring (what Open MPI
 * runs for large messages). */
static double half_cost(int half, int n, double bytes, ht_sim_link l, double add_Bps) {
    if (n <= 1 || bytes <= 0) return 0;
    const double chunk = bytes / n;
    if (l.ring_Bps > 0) return (n - 1) * (l.latency_s + chunk / l.ring_Bps);
    double t = (n - 1) * (l.latency_s + chunk / l.bw_Bps);
    if (half == HT_SIM_RS && add_Bps > 0) t += (n - 1) * 3.0 * chunk / add_Bps;
    return t;
}

static double coll_cost_of(const ht_sim_cluster *c, int alg, int half, const int *members,
                           int n, double bytes) {
    ht_sim_link l = {0, INFINITY, INFINITY}; /* one link without a measured step: 0, from bw */
    for (int k = 0; k < n; k++)
        l = ht_sim_link_slower(l, ht_sim_link_of(c, members[k], members[(k + 1) % n]));
    return half ? half_cost(half, n, bytes, l, c->host_add_gbs * 1e9)
                : ht_sim_coll_cost(alg, n, bytes, l, c->host_add_gbs * 1e9);
}

double ht_sim_ring_cost(const ht_sim_cluster *c, int alg, const int *members, int n,
                        double bytes) {
    return coll_cost_of(c, alg, 0, members, n, bytes);
}

/* ---------------------------------------------------------------- message table */

static size_t slot_of(const ht_sim *s, int src, int dst, int64_t tag) {
    uint64_t h = (uint64_t)src * 0x9E3779B97F4A7C15ull ^ (uint64_t)dst * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)tag * 0x165667B19E3779F9ull;
    h ^= h >> 29;
    size_t i = (size_t)h & (s->tcap - 1);
    while (s->tab[i].src >= 0 &&
           !(s->tab[i].src == src && s->tab[i].dst == dst && s->tab[i].tag == tag))
        i = (i + 1) & (s->tcap - 1);
    return i;
}

static void grow_table(ht_sim *s) {
    msg *old = s->tab;
    size_t ocap = s->tcap;
    s->tcap *= 2;
    s->tab = ht_xmalloc(s->tcap * sizeof *s->tab);
    for (size_t i = 0; i < s->tcap; i++)
        s->tab[i].src = -1;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].src >= 0) s->tab[slot_of(s, old[i].src, old[i].dst, old[i].tag)] = old[i];
    free(old);
}

/* Slots are never removed (a run is one step), so the table only grows. */
static msg *lookup(ht_sim *s, int src, int dst, int64_t tag, int create) {
    size_t i = slot_of(s, src, dst, tag);
    if (s->tab[i].src >= 0) return &s->tab[i];
    if (!create) return NULL;
    if (2 * (s->tused + 1) > s->tcap) {
        grow_table(s);
        i = slot_of(s, src, dst, tag);
    }
    s->tused++;
    s->tab[i] = (msg){.src = src, .dst = dst, .tag = tag};
    return &s->tab[i];
}

/* ---------------------------------------------------------------- heap */

static int before(const ht_sim *s, int a, int b) {
    return s->heap[a].t < s->heap[b].t || (s->heap[a].t == s->heap[b].t && s->heap[a].r < s->heap[b].r);
}

static void swap_h(ht_sim *s, int a, int b) {
    double t = s->heap[a].t;
    int r = s->heap[a].r;
    s->heap[a] = s->heap[b];
    s->heap[b].t = t;
    s->heap[b].r = r;
}

static void heap_push(ht_sim *s, int r) {
    int i = s->nheap++;
    s->heap[i].t = s->t[r];
    s->heap[i].r = r;
    while (i > 0 && before(s, i, (i - 1) / 2)) {
        swap_h(s, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static int heap_pop(ht_sim *s) {
    int r = s->heap[0].r;
    s->heap[0] = s->heap[--s->nheap];
    for (int i = 0;;) {
        int l = 2 * i + 1, m = i;
        if (l < s->nheap && before(s, l, m)) m = l;
        if (l + 1 < s->nheap && before(s, l + 1, m)) m = l + 1;
        if (m == i) break;
        swap_h(s, i, m);
        i = m;
    }
    return r;
}

/* ---------------------------------------------------------------- running */

static void record(ht_sim *s, int r, int name, double t0, double t1) {
    if (!s->trace || t1 <= t0) return;
    if (s->nsp == s->csp) {
        s->csp = s->csp ? 2 * s->csp : 4096;
        s->sp = ht_xrealloc(s->sp, s->csp * sizeof *s->sp);
    }
    s->sp[s->nsp++] = (span){r, name, t0, t1};
}

/* Rank r waited from t0 to t1 for something in flight from `from`: the part before it left
 * is idle (waiting for the peer), the rest communication. */
static void waited(ht_sim *s, ht_sim_rank *a, int r, int name, double t0, double t1, double from) {
    if (t1 <= t0) return;
    double c = t1 - (from > t0 ? from : t0);
    if (c < 0) c = 0;
    a->comm += c;
    record(s, r, name, t1 - c, t1);
}

static void coll_complete(ht_sim *s, int id, ht_sim_rank *acc) {
    coll *c = &s->co[id];
    double start = c->tmax;
    for (int k = 0; k < c->n; k++)
        if (s->nic[c->members[k]] > start) start = s->nic[c->members[k]];
    c->start = start;
    c->end = start + coll_cost_of(s->c, c->alg, c->half, c->members, c->n, c->bytes);
    c->done = 1;
    double sent = c->n > 1 ? (c->half ? (c->n - 1.0) / c->n * c->bytes
                              : c->alg == HT_SIM_RING ? 2.0 * (c->n - 1) / c->n * c->bytes
                                                      : c->bytes)
                           : 0;
    for (int k = 0; k < c->n; k++) {
        int r = c->members[k];
        s->nic[r] = c->end;
        acc[r].bytes_sent += sent;
        if (s->wait_coll[r] == id) {
            s->wait_coll[r] = -1;
            s->t[r] = c->end;
            waited(s, &acc[r], r, s->st[r].op[s->pc[r]].name, s->wait_since[r], c->end, c->start);
            s->pc[r]++;
            heap_push(s, r);
        }
    }
}

static void do_send(ht_sim *s, ht_sim_rank *acc, int r, const ht_sim_op *o) {
    int d = o->peer;
    ht_sim_link l = ht_sim_link_of(s->c, r, d);
    double start = s->t[r];
    if (s->nic[r] > start) start = s->nic[r];
    if (s->nic[d] > start) start = s->nic[d];
    double x = o->bytes / l.bw_Bps;
    if (d == r) { /* both stages on this rank: a local copy, no link (counted in compute) */
        start = s->t[r];
        x = l.latency_s = 0;
    } else {
        s->nic[r] = s->nic[d] = start + x;
        acc[r].bytes_sent += o->bytes;
    }
    msg *m = lookup(s, r, d, o->tag, 1);
    int waiting = m->state == 2;
    m->state = 1;
    m->start = start;
    m->arrival = start + l.latency_s + x;
    if (waiting) { /* the receiver is parked on this message */
        double t0 = s->wait_since[d];
        s->t[d] = m->arrival > t0 ? m->arrival : t0;
        waited(s, &acc[d], d, s->st[d].op[s->pc[d]].name, t0, s->t[d], m->start);
        s->pc[d]++;
        heap_push(s, d);
    }
}

/* Executes rank r's next op; returns 1 when r goes on (back on the heap). */
static int step(ht_sim *s, ht_sim_rank *acc, int r) {
    const ht_sim_op *o = &s->st[r].op[s->pc[r]];
    if (o->mem != 0) {
        s->mem[r] += o->mem;
        if (s->mem[r] > acc[r].peak_mem) acc[r].peak_mem = s->mem[r];
    }
    switch (o->kind) {
    case HT_SIM_COMPUTE: {
        double t0 = s->t[r];
        s->t[r] += o->dur;
        if (o->cat == HT_SIM_CAT_COMPUTE) acc[r].busy += o->dur;
        else if (o->cat == HT_SIM_CAT_OPT) acc[r].opt += o->dur;
        else acc[r].comm += o->dur;
        record(s, r, o->name, t0, s->t[r]);
        break;
    }
    case HT_SIM_SEND:
        do_send(s, acc, r, o);
        break;
    case HT_SIM_RECV: {
        msg *m = lookup(s, o->peer, r, o->tag, 1);
        if (m->state != 1) {
            m->state = 2;
            s->wait_since[r] = s->t[r];
            return 0;
        }
        double t0 = s->t[r];
        if (m->arrival > t0) s->t[r] = m->arrival;
        waited(s, &acc[r], r, o->name, t0, s->t[r], m->start);
        break;
    }
    case HT_SIM_COLL: {
        coll *c = &s->co[o->peer];
        if (s->t[r] > c->tmax) c->tmax = s->t[r];
        s->pc[r]++;
        if (++c->joined == c->n) coll_complete(s, o->peer, acc);
        return 1;
    }
    case HT_SIM_WAIT: {
        coll *c = &s->co[o->peer];
        if (!c->done) {
            s->wait_coll[r] = o->peer;
            s->wait_since[r] = s->t[r];
            return 0;
        }
        double t0 = s->t[r];
        if (c->end > t0) s->t[r] = c->end;
        waited(s, &acc[r], r, o->name, t0, s->t[r], c->start);
        break;
    }
    }
    s->pc[r]++;
    return 1;
}

int ht_sim_run(ht_sim *s, ht_sim_result *res) {
    memset(res, 0, sizeof *res);
    res->nranks = s->n;
    res->rank = ht_xcalloc((size_t)s->n, sizeof *res->rank);
    ht_sim_rank *acc = res->rank;
    for (int r = 0; r < s->n; r++) {
        s->wait_coll[r] = -1;
        s->mem[r] = s->base[r];
        acc[r].peak_mem = s->base[r];
        if (s->st[r].n) heap_push(s, r);
    }
    while (s->nheap) {
        int r = heap_pop(s);
        res->events++;
        if (step(s, acc, r) && s->pc[r] < s->st[r].n) heap_push(s, r);
    }
    for (int r = 0; r < s->n; r++)
        if (s->pc[r] < s->st[r].n) {
            const ht_sim_op *o = &s->st[r].op[s->pc[r]];
            return ht_error(HT_EINPUT,
                            "simulation deadlock: rank %d waits forever at op %d (%s %s %d)", r,
                            s->pc[r], o->kind == HT_SIM_RECV ? "recv" : "collective",
                            o->kind == HT_SIM_RECV ? "from rank" : "id", o->peer);
        }
    for (int r = 0; r < s->n; r++) {
        acc[r].end = s->t[r];
        if (s->t[r] > res->makespan) res->makespan = s->t[r];
    }
    for (int r = 0; r < s->n; r++) {
        acc[r].idle = res->makespan - acc[r].busy - acc[r].comm - acc[r].opt;
        if (acc[r].idle < 0) acc[r].idle = 0;
        res->bytes += acc[r].bytes_sent;
        if (acc[r].peak_mem > res->peak_mem) res->peak_mem = acc[r].peak_mem;
        res->busy += acc[r].busy / s->n;
        res->comm += acc[r].comm / s->n;
        res->opt += acc[r].opt / s->n;
        res->idle += acc[r].idle / s->n;
    }
    return HT_OK;
}

void ht_sim_result_free(ht_sim_result *res) {
    free(res->rank);
    res->rank = NULL;
}

int ht_sim_write_trace(const ht_sim *s, const char *path) {
    /* one part per rank, as the trainer's ranks serialise theirs (src/io/trace.c) */
    ht_jbuf *b = ht_xcalloc((size_t)s->n, sizeof *b);
    for (int r = 0; r < s->n; r++) {
        ht_jbuf_printf(&b[r],
                       "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                       "\"args\":{\"name\":\"rank %d (simulated)\"}},\n{\"name\":"
                       "\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":"
                       "{\"sort_index\":%d}}",
                       r, r, r, r);
    }
    for (size_t i = 0; i < s->nsp; i++) {
        const span *e = &s->sp[i];
        ht_jbuf *q = &b[e->rank];
        ht_jbuf_puts(q, ",\n{\"name\":");
        ht_jbuf_put_str(q, s->names[e->name]);
        ht_jbuf_printf(q, ",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f}", e->rank,
                       e->t0 * 1e6, (e->t1 - e->t0) * 1e6);
    }
    const char **parts = ht_xmalloc((size_t)s->n * sizeof *parts);
    size_t *lens = ht_xmalloc((size_t)s->n * sizeof *lens);
    for (int r = 0; r < s->n; r++) {
        parts[r] = b[r].s;
        lens[r] = b[r].len;
    }
    int rc = ht_trace_write(path, parts, lens, s->n);
    for (int r = 0; r < s->n; r++)
        ht_jbuf_free(&b[r]);
    free(b);
    free(parts);
    free(lens);
    return rc;
}
