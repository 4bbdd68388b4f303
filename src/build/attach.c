/* The model a config describes, on a device (see build.h): the pure description, then its
 * buffers. */
#include "build/build.h"

#include "core/err.h"

int ht_build_model(ht_model *m, ht_dev *d, const ht_config *cfg, int features, int classes,
                   int max_batch) {
    int rc = ht_build_desc(m, cfg, features, classes, max_batch);
    return rc == HT_OK && d ? ht_model_attach(m, d) : rc;
}
