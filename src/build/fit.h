/* Whether a model fits a device, checked before anything is allocated: the model a config
 * describes at the real batch is built as a description (no device), its buffers are summed
 * and compared with the device's memory and allocation limits. */
#ifndef HT_BUILD_FIT_H
#define HT_BUILD_FIT_H

#include <stddef.h>

#include "config/config.h"
#include "ocl/ocl.h"

/* Bytes of each device buffer group of the model a config describes, at batch `batch`. */
typedef struct ht_fit {
    size_t nparams;
    double params, grads, optim, acts, saved, work, rows; /* bytes */
    double total, largest;                                 /* bytes; largest one buffer */
    size_t largest_elems;
    const char *largest_name; /* "parameters", "activations", "workspace", ... */
    size_t over_elems;        /* the first buffer past 2^31 - 1 elements, if any */
    const char *over_name;
} ht_fit;

/* Fills *f for the model of cfg (features and classes from the data) at `batch` samples.
 * HT_EINPUT when the model cannot be described (the builders' own errors). */
int ht_fit_measure(const ht_config *cfg, int features, int classes, int batch, ht_fit *f);

/* HT_EINPUT naming the keys and the bytes needed vs available when the model of cfg at
 * `batch` does not fit device di: the total over its global memory, one buffer over its
 * largest allocation, or over 2^31 - 1 elements (kernels index with int). HT_OK otherwise.
 * The trainer calls it after the data is loaded and the device chosen, before building the
 * model on the device. */
int ht_fit_check(const ht_config *cfg, const ht_devinfo *di, int features, int classes, int batch);

#endif
