/* Byte-level text for the GPT: a whole file in memory, a train/validation split by
 * position (the end of the file is validation, so no window straddles both), and batches of
 * random windows whose starts are a pure function of (seed, step, b): resume is exact. */
#include "data/data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/path.h"
#include "core/rng.h"

int ht_text_load(ht_text *t, const char *path) {
    memset(t, 0, sizeof *t);
    if (!path || !*path) return ht_error(HT_EINPUT, "data.path is empty: expected a text file");
    int fd;
    long long size;
    /* without blocking (a FIFO would hang), and only a regular file */
    if (ht_open_input_fd(path, "cannot open text", &fd, &size) != HT_OK) return HT_EINPUT;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return ht_error(HT_EINPUT, "cannot open text '%s': %s", path, strerror(errno));
    }
    /* read in chunks rather than trust the size (files that change underneath) */
    size_t cap = size > 0 ? (size_t)size + 1 : 1 << 16, n = 0;
    if (cap > HT_TEXT_MAX_BYTES + 1) cap = HT_TEXT_MAX_BYTES + 1;
    uint8_t *buf = ht_xmalloc(cap);
    for (;;) {
        if (n == cap) {
            if (cap > HT_TEXT_MAX_BYTES) break;
            cap = cap * 2 > HT_TEXT_MAX_BYTES + 1 ? HT_TEXT_MAX_BYTES + 1 : cap * 2;
            buf = ht_xrealloc(buf, cap);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f), errnum = errno;
    fclose(f);
    int rc = HT_OK;
    if (err)
        rc = ht_error(HT_EINPUT, "cannot read text '%s' (after %zu bytes): %s", path, n,
                      strerror(errnum));
    else if (n > HT_TEXT_MAX_BYTES)
        rc = ht_error(HT_EINPUT, "text '%s' is larger than %zu bytes, the most accepted", path,
                      HT_TEXT_MAX_BYTES);
    else if (n == 0)
        rc = ht_error(HT_EINPUT, "text '%s' is empty: expected some text to train on", path);
    if (rc != HT_OK) {
        free(buf);
        return rc;
    }
    t->bytes = buf;
    t->n = n;
    t->owned = 1;
    return HT_OK;
}

void ht_text_free(ht_text *t) {
    if (t->owned) free(t->bytes);
    memset(t, 0, sizeof *t);
}

int ht_stream_split(size_t n, double val_fraction, int T, const char *kind, const char *path,
                    const char *unit, size_t *ntrain, size_t *nval) {
    if (!(val_fraction >= 0 && val_fraction < 1))
        return ht_error(HT_EINPUT, "data.val_fraction: found %g, expected a value in [0, 1)",
                        val_fraction);
    if (T < 1) return ht_error(HT_EINPUT, "%s: context %d must be >= 1", kind, T);
    *nval = (size_t)llround(val_fraction * (double)n);
    *ntrain = n - *nval;
    size_t need = (size_t)T + 1;
    if (*ntrain < need)
        return ht_error(HT_EINPUT,
                        "%s '%s' is too short: %zu %s leave %zu for training, fewer than one "
                        "window of model.context + 1 = %zu %s",
                        kind, path, n, unit, *ntrain, need, unit);
    if (*nval > 0 && *nval < need)
        return ht_error(HT_EINPUT,
                        "%s '%s' is too short: data.val_fraction %g holds out %zu %s for "
                        "validation, fewer than one window of model.context + 1 = %zu %s (use "
                        "more data, a larger val_fraction, or 0 for none)",
                        kind, path, val_fraction, *nval, unit, need, unit);
    return HT_OK;
}

int ht_text_split(const ht_text *all, double val_fraction, int T, const char *path, ht_text *train,
                  ht_text *val) {
    memset(train, 0, sizeof *train);
    memset(val, 0, sizeof *val);
    size_t ntrain, nval;
    int rc = ht_stream_split(all->n, val_fraction, T, "text", path, "bytes", &ntrain, &nval);
    if (rc != HT_OK) return rc;
    *train = (ht_text){all->bytes, ntrain, 0};
    *val = (ht_text){all->bytes + ntrain, nval, 0};
    return HT_OK;
}

size_t ht_window_start(size_t n, int T, uint64_t seed, int64_t step, int b) {
    uint64_t starts = n - (size_t)T, stream = ht_rng_stream(seed, (uint64_t)step); /* s+T+1 <= n */
    if (starts <= UINT32_MAX) return ht_rng_below(stream, (uint64_t)b, (uint32_t)starts);
    /* token sets past 2^32 windows: the same draw with a 64-bit multiply-high */
    return (size_t)(((unsigned __int128)ht_rng_u64(stream, (uint64_t)b) * starts) >> 64);
}

size_t ht_text_window(const ht_text *t, int T, uint64_t seed, int64_t step, int b) {
    return ht_window_start(t->n, T, seed, step, b);
}

void ht_text_batch(const ht_text *t, uint64_t seed, int64_t step, int B, int T, int32_t *tokens,
                   int32_t *targets) {
    for (int b = 0; b < B; b++) {
        const uint8_t *w = t->bytes + ht_text_window(t, T, seed, step, b);
        int32_t *tok = tokens + (size_t)b * T;
        for (int j = 0; j < T; j++)
            tok[j] = w[j];
        if (targets)
            for (int j = 0; j < T; j++)
                targets[(size_t)b * T + j] = w[j + 1];
    }
}
