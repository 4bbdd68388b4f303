/* libFuzzer harness: the safetensors reader (src/io/safetensors_read.c), which reads
 * checkpoints. Every tensor and metadata entry it accepts is read back: an F32 tensor's
 * shape must account for exactly its data (ASan catches a read past it). */
#include "fuzz.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_quiet();
    const char *path = fuzz_file("safetensors", data, size);
    ht_st_file *f = NULL;
    int rc = ht_st_open(&f, path);
    if (rc != HT_OK && (rc != HT_EINPUT || !ht_errmsg()[0])) abort();
    if (rc != HT_OK) return ht_error_clear(), 0;
    volatile float sink = 0;
    for (int i = 0; i < ht_st_count(f); i++) {
        const char *name = ht_st_name(f, i);
        if (!name || !ht_st_dtype(f, name)) abort(); /* listed but not found */
        int ndim = 0;
        int64_t shape[HT_ST_MAX_DIM];
        const float *x = ht_st_get(f, name, &ndim, shape);
        if (!x) continue; /* another dtype, or more dimensions than we read */
        int64_t n = 1;
        for (int d = 0; d < ndim; d++)
            n *= shape[d];
        for (int64_t j = 0; j < n; j++)
            sink += x[j];
    }
    (void)ht_st_meta(f, "step");
    ht_st_close(f);
    ht_error_clear();
    return 0;
}
