/* A tied head under a pipeline: the two copies of wte kept equal (see pipe_tied.h). */
#include "train/pipe_tied.h"

#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/crc32c.h"
#include "core/err.h"
#include "core/log.h"
#include "io/trace.h"

int ht_pipe_holders(const ht_pipe_sched *s, const int *first, int D, int R, int st, int *out) {
    int n = 0;
    for (int r = 0; r < R; r++)
        for (int d = 0; d < s->ndir; d++) {
            const int q = ht_pipe_stage_rank(s->p.kind, s->p.D, s->p.v, d, st);
            for (int p = first[q]; p < first[q + 1]; p++) {
                int w = r * D + p, dup = 0;
                for (int k = 0; k < n; k++)
                    dup |= out[k] == w;
                if (!dup) out[n++] = w;
            }
        }
    for (int a = 1; a < n; a++) /* insertion sort: every member lists them alike */
        for (int b = a; b > 0 && out[b - 1] > out[b]; b--) {
            int t = out[b];
            out[b] = out[b - 1], out[b - 1] = t;
        }
    return n;
}

/* The tensor a tied layer shares (the head's weight: wte), or none. */
static int tied_tensor(const ht_model *m, size_t *off, size_t *n) {
    for (int i = 0; m->tied && i < m->nlayers; i++)
        for (int k = 0; k < m->layers[i].ntensors; k++) {
            const ht_param_tensor *t = &m->layers[i].t[k];
            if (!t->tied) continue;
            size_t c = 1;
            for (int d = 0; d < t->ndim; d++)
                c *= (size_t)t->shape[d];
            *off = t->off, *n = c;
            return 1;
        }
    return 0;
}

void ht_pipe_tied_init(ht_pipe_tied *t, const ht_model *m, const ht_pipe_sched *s, const int *first,
                       int D, int R, int me) {
    memset(t, 0, sizeof *t);
    if (s->S < 2 || !tied_tensor(m, &t->off, &t->n)) return;
    t->on = 1;
    int *a = ht_xmalloc((size_t)(4 * R * D) * sizeof(int));
    int na = ht_pipe_holders(s, first, D, R, 0, a);
    int nb = ht_pipe_holders(s, first, D, R, s->S - 1, a + na);
    t->members = ht_xmalloc((size_t)(na + nb) * sizeof(int));
    for (int i = 0; i < na + nb; i++) { /* the union, ascending */
        int k = t->p;
        while (k > 0 && t->members[k - 1] > a[i])
            k--;
        if (k > 0 && t->members[k - 1] == a[i]) continue;
        memmove(t->members + k + 1, t->members + k, (size_t)(t->p - k) * sizeof(int));
        t->members[k] = a[i], t->p++;
    }
    for (int i = 0; i < t->p; i++)
        t->mine |= t->members[i] == me;
    t->tag = HT_COMM_GROUP_TAG + s->S; /* the stages' REDUCE_GRADS use GROUP_TAG + stage */
    free(a);
}

void ht_pipe_tied_free(ht_pipe_tied *t) {
    free(t->members);
    memset(t, 0, sizeof *t);
}

int ht_pipe_tied_parts(const ht_pipe_tied *t, int st, size_t off, size_t n, size_t *at,
                       size_t *cnt) {
    const size_t end = off + n, wa = t->off, wb = t->off + t->n;
    if (!t->on || st != 0 || wb <= off || wa >= end) {
        at[0] = off, cnt[0] = n;
        return n > 0;
    }
    int k = 0;
    if (wa > off) at[k] = off, cnt[k++] = wa - off;
    if (wb < end) at[k] = wb, cnt[k++] = end - wb;
    return k;
}

/* Where this member holds wte (floats into params / grads): in the first stage's window, or
 * the window of the last stage's copy. */
static size_t held_at(const ht_pipe_tied *t, const ht_model *m) {
    const size_t at = ht_model_span(m, t->off, t->n);
    if (at == (size_t)-1)
        ht_die(HT_ERUNTIME, "pipe: rank %d holds a stage with the tied wte but not wte "
                            "(%zu parameters in %d window(s) from %zu)",
               ht_comm_rank(), m->pres, m->nwin, m->pbase);
    return at;
}

void ht_pipe_tied_reduce(const ht_pipe_tied *t, ht_model *m, float *host) {
    if (!t->on || !t->mine || t->p < 2 || !t->n) return;
    const double t0 = ht_now();
    const size_t off = held_at(t, m) * sizeof(float), bytes = t->n * sizeof(float);
    ht_buf_read(m->dev, m->grads, off, bytes, host);
    ht_comm_group_allreduce(host, t->n, t->members, t->p, t->tag);
    ht_buf_write(m->dev, m->grads, off, bytes, host);
    ht_trace_span("REDUCE_TIED (wte, first + last stage)", t0, ht_now());
}

void ht_pipe_tied_verify(ht_pipe_tied *t, ht_model *m) {
    if (!t->on) return;
    uint32_t mine[2] = {(uint32_t)t->mine, 0};
    enum { CHUNK = 1 << 20 };
    float *h = t->mine ? ht_xmalloc((t->n < CHUNK ? t->n : CHUNK) * sizeof(float)) : NULL;
    const size_t base = t->mine ? held_at(t, m) : 0;
    for (size_t at = 0; t->mine && at < t->n; at += CHUNK) { /* in pieces: wte may be large */
        const size_t k = t->n - at < CHUNK ? t->n - at : CHUNK;
        ht_buf_read(m->dev, m->params, (base + at) * sizeof(float), k * sizeof(float), h);
        mine[1] = ht_crc32c(mine[1], h, k * sizeof(float));
    }
    free(h);
    const int world = ht_comm_size();
    uint32_t *all = ht_xmalloc((size_t)world * sizeof mine);
    ht_comm_allgather(mine, sizeof mine, all);
    int ref = -1;
    for (int r = 0; r < world; r++) {
        if (!all[2 * r]) continue;
        if (ref < 0) ref = r;
        if (all[2 * r + 1] != all[2 * ref + 1])
            ht_die(HT_ERUNTIME,
                   "pipe: the tied head's copies of wte differ: rank %d's CRC32C "
                   "%08x, rank %d's %08x (a bug: their gradients are summed every step)",
                   ref, all[2 * ref + 1], r, all[2 * r + 1]);
    }
    if (!t->told && ht_comm_rank() == 0 && ref >= 0)
        ht_log_info("tied head: wte on the %d ranks of the first and last stages is bit-equal "
                    "(CRC32C %08x); checked at every evaluation and checkpoint",
                    t->p, all[2 * ref + 1]);
    t->told = 1;
    free(all);
}
