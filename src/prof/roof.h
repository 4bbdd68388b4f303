/* The device ceilings --profile compares each kernel with (core/roofline.h). */
#ifndef HT_PROF_ROOF_H
#define HT_PROF_ROOF_H

#include <stdio.h>

#include "core/roofline.h"
#include "ocl/ocl.h"

/* Measures d's fp32 FMA rate, copy bandwidth and empty-kernel round trip (about 0.3 s on a
 * CPU; the device's queue is finished first). Its launches are not profiled. OpenCL failures
 * exit 1 as everywhere. */
void ht_prof_roof(ht_dev *d, ht_roof *out);
/* The size of the buffers of a copy-bandwidth measurement: `want` bytes, halved (not below
 * 1 MiB) until two such buffers and a third fit the device's limits (hetprof and the
 * roofline). */
size_t ht_prof_copy_bytes(ht_dev *d, size_t want);
/* --profile's table (ht_dev_profile_report) with the ceilings measured now; without them on
 * a device that gives no timestamps. */
void ht_prof_roof_report(ht_dev *d, FILE *f);

#endif
