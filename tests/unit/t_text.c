/* Byte-level text data: loading (every byte value, errors for missing, directory, empty
 * files), the split by position, too-short texts for the context, and batches of windows
 * whose starts are a pure function of (seed, step, b) with targets shifted by one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"
#include "data/data.h"
#include "tap.h"

static char dir[64];

static const char *write_file(const char *name, const unsigned char *b, size_t n) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f)) {
        perror(path);
        exit(1);
    }
    return path;
}

static void test_load(void) {
    enum { N = 1000 };
    unsigned char b[N];
    for (int i = 0; i < N; i++)
        b[i] = (unsigned char)(i * 7 + (i >> 8)); /* every byte value, NUL included */
    const char *path = write_file("t.txt", b, N);
    ht_text t;
    int rc = ht_text_load(&t, path);
    tap_ok(rc == HT_OK && t.n == N && t.owned && !memcmp(t.bytes, b, N),
           "a 1000-byte file loads byte for byte (all 256 values, NULs too)");

    ht_text tr, va;
    rc = ht_text_split(&t, 0.1, 16, path, &tr, &va);
    tap_ok(rc == HT_OK && tr.n == 900 && va.n == 100 && tr.bytes == t.bytes &&
               va.bytes == t.bytes + 900 && !tr.owned && !va.owned,
           "val_fraction 0.1 splits by position: the first 900 bytes train, the last 100 validate");
    ht_text_free(&va); /* a view: nothing freed, just zeroed */
    rc = ht_text_split(&t, 0.0, 16, path, &tr, &va);
    tap_ok(rc == HT_OK && tr.n == N && va.n == 0, "val_fraction 0: everything trains");

    rc = ht_text_split(&t, 0.5, 600, path, &tr, &va);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "too short") && strstr(ht_errmsg(), "500") &&
               strstr(ht_errmsg(), "601"),
           "train part shorter than context + 1: %s", ht_errmsg());
    rc = ht_text_split(&t, 0.01, 16, path, &tr, &va);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "holds out 10 bytes") &&
               strstr(ht_errmsg(), "17"),
           "validation part shorter than context + 1: %s", ht_errmsg());
    rc = ht_text_split(&t, 0.0, 999, path, &tr, &va);
    tap_ok(rc == HT_OK && tr.n == 1000, "a text of exactly context + 1 bytes is one window");

    /* windows: in range, targets shifted by one, pure in (seed, step, b) */
    enum { B = 8, T = 16 };
    rc = ht_text_split(&t, 0.1, T, path, &tr, &va);
    int32_t tok[B * T], tgt[B * T], tok2[B * T], tgt2[B * T];
    int ok = 1;
    size_t lo = (size_t)-1, hi = 0;
    for (int64_t step = 0; step < 200; step++) {
        ht_text_batch(&tr, 42, step, B, T, tok, tgt);
        for (int b2 = 0; b2 < B; b2++) {
            size_t s = ht_text_window(&tr, T, 42, step, b2);
            ok &= s + T + 1 <= tr.n;
            if (s < lo) lo = s;
            if (s > hi) hi = s;
            for (int j = 0; j < T; j++)
                ok &= tok[b2 * T + j] == tr.bytes[s + j] && tgt[b2 * T + j] == tr.bytes[s + j + 1];
        }
    }
    tap_ok(ok && lo < 20 && hi > tr.n - T - 20,
           "1600 windows of 17 bytes stay inside the training part (starts %zu..%zu of %zu "
           "possible), targets are the next bytes",
           lo, hi, tr.n - T);
    ht_text_batch(&tr, 42, 123, B, T, tok, tgt);
    ht_text_batch(&tr, 42, 5, B, T, tok2, tgt2); /* another step in between changes nothing */
    ht_text_batch(&tr, 42, 123, B, T, tok2, tgt2);
    int32_t half[4 * T];
    ht_text_batch(&tr, 42, 123, 4, T, half, NULL);
    tap_ok(!memcmp(tok, tok2, sizeof tok) && !memcmp(tgt, tgt2, sizeof tgt) &&
               !memcmp(half, tok, sizeof half),
           "batch of step 123 is the same whenever asked; its first 4 windows do not depend on B");
    ht_text_batch(&tr, 42, 124, B, T, tok2, tgt2);
    int diff_step = memcmp(tok, tok2, sizeof tok) != 0;
    ht_text_batch(&tr, 43, 123, B, T, tok2, tgt2);
    tap_ok(diff_step && memcmp(tok, tok2, sizeof tok) != 0,
           "another step or another seed draws other windows");
    ht_text_free(&t);
    tap_ok(t.bytes == NULL && t.n == 0, "ht_text_free zeroes the text");
}

static void test_errors(void) {
    ht_text t;
    char path[128];
    snprintf(path, sizeof path, "%s/none.txt", dir);
    int rc = ht_text_load(&t, path);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), path) && strstr(ht_errmsg(), "No such file") &&
               !t.bytes,
           "missing file: %s", ht_errmsg());
    const char *empty = write_file("empty.txt", (const unsigned char *)"", 0);
    rc = ht_text_load(&t, empty);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "is empty") && strstr(ht_errmsg(), empty),
           "empty file: %s", ht_errmsg());
    rc = ht_text_load(&t, dir);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "directory"), "a directory: %s", ht_errmsg());
    rc = ht_text_load(&t, "");
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "data.path"), "no path: %s", ht_errmsg());
    const char *tiny = write_file("tiny.txt", (const unsigned char *)"hello", 5);
    ht_text tr, va;
    rc = ht_text_load(&t, tiny);
    if (rc == HT_OK) rc = ht_text_split(&t, 0.0, 64, tiny, &tr, &va);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "too short") && strstr(ht_errmsg(), "65"),
           "a 5-byte file for a 64-byte context: %s", ht_errmsg());
    ht_text_free(&t);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ht_t_text.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_load();
    test_errors();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", dir);
    return tap_done();
}
