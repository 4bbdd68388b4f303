/* libFuzzer harness: the IDX loader (src/data/idx.c), plain and gzip. Input: byte 0 flags
 * (bit 0: gzip the images, bit 1: gzip the labels, bits 2-5: the configured class count,
 * 0 = from the labels), bytes 1-2 the images' length (little endian, clipped), then the
 * images and the labels. "gzip" compresses the fuzzed bytes, so the IDX parser behind zlib
 * sees them as they are; a fuzzed gzip stream itself reaches zlib with the flag clear (the
 * loader decides by content: gzread reads plain files through). */
#include <zlib.h>

#include "data/data.h"
#include "fuzz.h"

static const char *write_part(const char *role, const uint8_t *p, size_t n, int gz) {
    if (!gz) return fuzz_file(role, p, n);
    const char *path = fuzz_path(role);
    gzFile f = gzopen(path, "wb1");
    if (!f || (n && gzwrite(f, p, (unsigned)n) != (int)n) || gzclose(f) != Z_OK) abort();
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_quiet();
    if (size < 3) return 0;
    int flags = data[0];
    size_t nimg = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3, size -= 3;
    if (nimg > size) nimg = size;
    const char *img = write_part("images", data, nimg, flags & 1);
    const char *lab = write_part("labels", data + nimg, size - nimg, flags & 2);
    ht_dataset ds;
    int rc = ht_idx_load_classes(&ds, img, lab, (flags >> 2) & 15);
    if (rc != HT_OK && (rc != HT_EINPUT || !ht_errmsg()[0])) abort();
    if (rc == HT_OK) {
        /* what the trainer does next: split, and gather every sample */
        ht_dataset tr, va;
        if (ht_dataset_split(&ds, 0.25, &tr, &va) == HT_OK) {
            int *idx = malloc(sizeof(int) * (size_t)tr.n);
            float *x = malloc(sizeof(float) * (size_t)tr.n * (size_t)tr.features);
            int32_t *y = malloc(sizeof(int32_t) * (size_t)tr.n);
            for (int i = 0; i < tr.n; i++)
                idx[i] = i;
            ht_dataset_gather(&tr, idx, tr.n, x, y);
            for (int i = 0; i < tr.n; i++)
                if (y[i] < 0 || y[i] >= tr.classes) abort(); /* a label the model cannot have */
            free(idx), free(x), free(y);
            ht_dataset_free(&tr), ht_dataset_free(&va);
        }
        ht_dataset_free(&ds);
    }
    ht_error_clear();
    return 0;
}
