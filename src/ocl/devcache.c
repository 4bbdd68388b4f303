/* Small helpers for choices made by measurement outside src/ocl (see ocl.h). */
#include "ocl/internal.h"

#include <stdio.h>

int ht_dev_profile_swap(ht_dev *d, int mode) {
    int old = d->profile;
    d->profile = mode;
    return old;
}

int ht_dev_cache_file(const ht_dev *d, const char *tag, const char *ext, char *out, size_t n) {
    if (!d->use_cache) return 0;
    uint64_t h = d->program_hash;
    const char *parts[] = {tag, d->tuning};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        for (const char *p = parts[i];; p++) {
            h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
            if (!*p) break;
        }
    snprintf(out, n, "%s/%016llx.%s", d->cache_dir, (unsigned long long)h, ext);
    return 1;
}
