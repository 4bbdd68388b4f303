/* In-memory dataset helpers: freeing, the train/validation split and gathering
 * a batch's rows into contiguous buffers for upload to a device. */
#include "data/data.h"

#include "core/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ht_dataset_free(ht_dataset *ds) {
    if (!ds) return;
    free(ds->x);
    free(ds->y);
    memset(ds, 0, sizeof *ds);
}

/* Copies rows [lo, lo+n) of all into out (NULL buffers when n == 0). */
static void copy_rows(const ht_dataset *all, int lo, int n, ht_dataset *out) {
    out->n = n;
    out->features = all->features;
    out->classes = all->classes;
    out->x = NULL;
    out->y = NULL;
    if (n == 0) return;
    size_t f = (size_t)all->features;
    out->x = ht_xmalloc((size_t)n * f * sizeof *out->x);
    out->y = ht_xmalloc((size_t)n * sizeof *out->y);
    memcpy(out->x, all->x + (size_t)lo * f, (size_t)n * f * sizeof *out->x);
    memcpy(out->y, all->y + lo, (size_t)n * sizeof *out->y);
}

int ht_dataset_split(const ht_dataset *all, double val_fraction, ht_dataset *train,
                     ht_dataset *val) {
    memset(train, 0, sizeof *train);
    memset(val, 0, sizeof *val);
    if (!(val_fraction >= 0.0 && val_fraction < 1.0))
        return ht_error(HT_EINPUT, "data.val_fraction: found %g, expected a value in [0, 1)",
                        val_fraction);
    /* round half up, computed in double so 0.2 * 10000 is exactly 2000 */
    int nval = (int)floor(val_fraction * all->n + 0.5);
    if (nval > all->n) nval = all->n;
    int ntrain = all->n - nval;
    if (ntrain < 1)
        return ht_error(
            HT_EINPUT,
            "data.val_fraction: %g of %d samples leaves %d for training, expected at least 1",
            val_fraction, all->n, ntrain);
    copy_rows(all, 0, ntrain, train);
    copy_rows(all, ntrain, nval, val);
    return HT_OK;
}

void ht_dataset_gather(const ht_dataset *ds, const int *idx, int count, float *x_out,
                       int32_t *y_out) {
    size_t f = (size_t)ds->features;
    for (int i = 0; i < count; i++) {
        if (x_out) memcpy(x_out + (size_t)i * f, ds->x + (size_t)idx[i] * f, f * sizeof *x_out);
        if (y_out) y_out[i] = ds->y[idx[i]];
    }
}
