/* libFuzzer harness: the byte-level text loader and its split and windows (src/data/text.c).
 * Input: byte 0 the context (1..64), byte 1 the validation fraction in 1/256ths (kept below
 * 1), the rest the text. Every window drawn must lie inside its part. */
#include "data/data.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_quiet();
    if (size < 2) return 0;
    int T = 1 + data[0] % 64;
    double vf = data[1] / 256.0;
    const char *path = fuzz_file("txt", data + 2, size - 2);
    ht_text all, tr, va;
    int rc = ht_text_load(&all, path);
    if (rc != HT_OK && (rc != HT_EINPUT || !ht_errmsg()[0])) abort();
    if (rc != HT_OK) return ht_error_clear(), 0;
    if (all.n != size - 2 || memcmp(all.bytes, data + 2, all.n) != 0) abort();
    rc = ht_text_split(&all, vf, T, path, &tr, &va);
    if (rc != HT_OK && (rc != HT_EINPUT || !ht_errmsg()[0])) abort();
    if (rc == HT_OK) {
        if (tr.n + va.n != all.n) abort();
        int32_t tok[4 * 64], tgt[4 * 64];
        for (int64_t step = 0; step < 3; step++) {
            for (int b = 0; b < 4; b++)
                if (ht_text_window(&tr, T, 7, step, b) + (size_t)T + 1 > tr.n) abort();
            ht_text_batch(&tr, 7, step, 4, T, tok, tgt);
            if (va.n) ht_text_batch(&va, 7, step, 4, T, tok, tgt);
        }
    }
    ht_text_free(&all);
    ht_error_clear();
    return 0;
}
