/* Opens the OpenCL device the tests run on: $HT_TEST_DEVICE (a selector, as --device)
 * or the first device. Exits 1 with the reason when none can be opened. */
#ifndef HT_TESTS_TESTDEV_H
#define HT_TESTS_TESTDEV_H

#include <stdio.h>
#include <stdlib.h>

#include "core/err.h"
#include "ocl/ocl.h"

/* The index of that device, for a test that opens it with its own options. */
static inline int test_dev_index(void) {
    const char *sel = getenv("HT_TEST_DEVICE");
    int idx = 0;
    ht_exit_on_error(ht_ocl_select(sel ? sel : "", &idx));
    return idx;
}

static inline ht_dev *test_dev_open(void) {
    ht_dev *d = NULL;
    ht_exit_on_error(ht_dev_open(&d, test_dev_index(), NULL));
    printf("# device: %s (%s)\n", ht_dev_info(d)->name, ht_dev_info(d)->platform);
    return d;
}

#endif
