/* Deterministic sample order and batch sharding. Epoch e's permutation depends on
 * (seed, e) alone, so the indices of any global step can be recomputed after a
 * checkpoint resume without carrying generator state. */
#include "data/data.h"

#include "core/err.h"
#include "core/rng.h"

#include <stdlib.h>
#include <string.h>

void ht_sampler_init(ht_sampler *s, int n, uint64_t seed, int shuffle) {
    if (n < 1)
        ht_die(HT_ERUNTIME, "ht_sampler_init: n = %d, expected at least 1 (internal error)", n);
    memset(s, 0, sizeof *s);
    s->n = n;
    s->seed = seed;
    s->shuffle = shuffle != 0;
    s->epoch[0] = s->epoch[1] = -1;
}

void ht_sampler_free(ht_sampler *s) {
    free(s->perm[0]);
    free(s->perm[1]);
    memset(s, 0, sizeof *s);
    s->epoch[0] = s->epoch[1] = -1;
}

int64_t ht_sampler_epoch(const ht_sampler *s, int64_t pos) { return pos / s->n; }

/* The permutation of epoch e, computed into slot e&1 unless already there. Two
 * slots because consecutive epochs then never evict each other: a batch that
 * straddles a boundary, and the steps around it, cost one shuffle per epoch. */
static const int *epoch_perm(ht_sampler *s, int64_t e) {
    int k = (int)(e & 1);
    if (s->epoch[k] == e) return s->perm[k];
    if (!s->perm[k]) s->perm[k] = ht_xmalloc((size_t)s->n * sizeof(int));
    int *p = s->perm[k];
    for (int i = 0; i < s->n; i++)
        p[i] = i;
    if (s->shuffle) {
        /* Fisher-Yates; draw i uses counter i of the epoch's own stream. */
        uint64_t st = ht_rng_stream(s->seed, (uint64_t)e);
        for (int i = s->n - 1; i > 0; i--) {
            int j = (int)ht_rng_below(st, (uint64_t)i, (uint32_t)i + 1);
            int t = p[i];
            p[i] = p[j];
            p[j] = t;
        }
    }
    s->epoch[k] = e;
    s->shuffles++;
    return p;
}

int ht_sampler_at(ht_sampler *s, int64_t pos) {
    if (!s->shuffle) return (int)(pos % s->n); /* identity: no table needed */
    return epoch_perm(s, pos / s->n)[pos % s->n];
}

void ht_sampler_batch(ht_sampler *s, int64_t step, int batch, int *idx_out) {
    int64_t pos = step * batch;
    int done = 0;
    while (done < batch) {
        int64_t e = pos / s->n;
        int i = (int)(pos % s->n);
        int run = s->n - i < batch - done ? s->n - i : batch - done;
        if (s->shuffle) {
            memcpy(idx_out + done, epoch_perm(s, e) + i, (size_t)run * sizeof *idx_out);
        } else {
            for (int k = 0; k < run; k++)
                idx_out[done + k] = i + k;
        }
        done += run;
        pos += run;
    }
}

void ht_shard_range(const int *shares, int world, int rank, int *lo, int *hi) {
    int start = 0;
    for (int r = 0; r < rank && r < world; r++)
        start += shares[r];
    *lo = start;
    *hi = start + (rank < world ? shares[rank] : 0);
}
