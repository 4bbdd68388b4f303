/* Token files for BPE language models: nanoGPT's raw uint16 files and llm.c's shards (header
 * of 256 int32: 20240520, 1, count), a glob of shards read in name order as one stream with
 * windows that cross shard boundaries, every token checked against the vocabulary (the byte
 * offset of the first bad one), the split by position, and windows drawn by the same rule
 * as byte-level text. The files are written here byte by byte (little-endian by hand). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/rng.h"
#include "data/data.h"
#include "tap.h"

static char dir[64];

static const char *path_of(const char *name) {
    static char p[4][160];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void put_bytes(const char *name, const unsigned char *b, size_t n) {
    FILE *f = fopen(path_of(name), "wb");
    if (!f || (n && fwrite(b, 1, n, f) != n) || fclose(f)) {
        perror(name);
        exit(1);
    }
}

/* raw: the ids as little-endian uint16; shard: an llm.c header first (count `hdr_count`). */
static void put_tokens(const char *name, const int *ids, size_t n, int shard, long hdr_count,
                       int version) {
    size_t hdr = shard ? 1024 : 0;
    unsigned char *b = calloc(hdr + 2 * n + 1, 1);
    if (shard) {
        const long h[3] = {20240520, version, hdr_count};
        for (int w = 0; w < 3; w++)
            for (int k = 0; k < 4; k++)
                b[4 * w + k] = (unsigned char)(h[w] >> (8 * k));
    }
    for (size_t i = 0; i < n; i++) {
        b[hdr + 2 * i] = (unsigned char)(ids[i] & 0xff);
        b[hdr + 2 * i + 1] = (unsigned char)(ids[i] >> 8);
    }
    put_bytes(name, b, hdr + 2 * n);
    free(b);
}

enum { N1 = 700, N2 = 500, N3 = 300, V = 50257 };
static int ids[N1 + N2 + N3]; /* the three shards' tokens, concatenated */

static void test_formats(void) {
    for (int i = 0; i < N1 + N2 + N3; i++)
        ids[i] = (int)((i * 7919u + (unsigned)(i >> 3)) % V); /* ids up to 50256 */
    put_tokens("raw.bin", ids, N1, 0, 0, 1);
    ht_tokens t;
    int rc = ht_tokens_open(&t, path_of("raw.bin"), V, "key 'data.path'");
    int ok = rc == HT_OK && t.nfiles == 1 && t.n == N1;
    for (int i = 0; ok && i < N1; i++)
        ok = t.f[0].tok[i] == ids[i];
    tap_ok(ok, "a raw uint16 file of %d tokens maps id for id (ids up to 50256)", N1);
    ht_tokens_free(&t);

    put_tokens("sh_000.bin", ids, N1, 1, N1, 1);
    put_tokens("sh_001.bin", ids + N1, N2, 1, N2, 1);
    put_tokens("sh_002.bin", ids + N1 + N2, N3, 1, N3, 1);
    rc = ht_tokens_open(&t, path_of("sh_*.bin"), V, "key 'data.path'");
    ok = rc == HT_OK && t.nfiles == 3 && t.n == N1 + N2 + N3 && t.f[1].first_byte == 1024;
    tap_ok(ok, "a glob of three llm.c shards: one stream of %d tokens in name order (%s)",
           N1 + N2 + N3, rc == HT_OK ? "ok" : ht_errmsg());

    /* windows over the whole stream, crossing both shard boundaries; the expected tokens
     * come from the concatenated array at the starts the rule draws */
    enum { B = 16, T = 40 };
    ht_tokview all = {&t, 0, t.n};
    int32_t tok[B * T], tgt[B * T];
    int crossed = 0;
    ok = 1;
    for (int64_t step = 0; step < 100; step++) {
        ht_tokens_batch(&all, 7, step, B, T, tok, tgt);
        for (int b = 0; b < B; b++) {
            size_t s = ht_window_start(t.n, T, 7, step, b);
            ok &= s + T + 1 <= t.n;
            crossed += (s < N1 && s + T >= N1) || (s < N1 + N2 && s + T >= N1 + N2);
            for (int j = 0; j < T; j++)
                ok &= tok[b * T + j] == ids[s + j] && tgt[b * T + j] == ids[s + j + 1];
        }
    }
    tap_ok(ok && crossed > 0,
           "1600 windows of 41 tokens equal the concatenated shards at their starts, targets "
           "shifted by one (%d windows cross a shard boundary)",
           crossed);

    ht_tokview tr, va;
    rc = ht_tokens_split(&t, 0.1, T, "sh", &tr, &va);
    tap_ok(rc == HT_OK && tr.lo == 0 && tr.n == 1350 && va.lo == 1350 && va.n == 150,
           "val_fraction 0.1 of 1500 tokens: the first 1350 train, the last 150 validate");
    ht_tokens_batch(&va, 3, 0, B, T, tok, tgt);
    ok = 1;
    for (int b = 0; b < B; b++) {
        size_t s = ht_window_start(va.n, T, 3, 0, b);
        ok &= tok[b * T] == ids[1350 + s] && tgt[b * T + T - 1] == ids[1350 + s + T];
    }
    tap_ok(ok, "validation windows come from the held-out end of the stream");
    rc = ht_tokens_split(&t, 0.01, T, "sh", &tr, &va);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "holds out 15 tokens") &&
               strstr(ht_errmsg(), "41"),
           "a validation part shorter than a window: %s", ht_errmsg());
    ht_tokens_free(&t);
    tap_ok(t.f == NULL && t.n == 0, "ht_tokens_free zeroes the set");
}

/* Window starts: the rule byte-level text uses (so a uint16 copy of a text trains on the same
 * windows), in range, and the 64-bit draw past 2^32 starts stays in range. */
static void test_windows(void) {
    unsigned char b[300];
    for (int i = 0; i < 300; i++)
        b[i] = (unsigned char)i;
    ht_text txt = {b, 300, 0};
    int same = 1;
    for (int64_t step = 0; step < 50; step++)
        for (int k = 0; k < 8; k++)
            same &= ht_window_start(300, 16, 9, step, k) == ht_text_window(&txt, 16, 9, step, k);
    tap_ok(same, "token windows start where byte-level text windows start (same seed, step, b)");
    size_t n = (size_t)1 << 34, lo = n, hi = 0;
    int in = 1;
    for (int k = 0; k < 4000; k++) {
        size_t s = ht_window_start(n, 1024, 5, 1, k);
        in &= s <= n - 1024 - 1;
        if (s < lo) lo = s;
        if (s > hi) hi = s;
    }
    tap_ok(in && hi > ((size_t)1 << 33) && lo < ((size_t)1 << 33) && hi > UINT32_MAX * 3.0,
           "a stream of 2^34 tokens: starts spread over the whole range (%zu..%zu)", lo, hi);
}

static void test_errors(void) {
    ht_tokens t;
    int bad[5] = {1, 2, 300, 4, 5};
    put_tokens("bad.bin", bad, 5, 0, 0, 1);
    int rc = ht_tokens_open(&t, path_of("bad.bin"), 256, "key 'data.path'");
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "bad.bin") && strstr(ht_errmsg(), "byte offset 4") &&
               strstr(ht_errmsg(), "token id 300") && strstr(ht_errmsg(), "256") && !t.f,
           "a token >= model.vocab: %s", ht_errmsg());
    put_tokens("badshard.bin", bad, 5, 1, 5, 1);
    rc = ht_tokens_open(&t, path_of("badshard.bin"), 256, "key 'data.path'");
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "byte offset 1028"),
           "the same in an llm.c shard names the offset after the 1024-byte header: %s",
           ht_errmsg());
    put_tokens("short.bin", bad, 5, 1, 6, 1);
    rc = ht_tokens_open(&t, path_of("short.bin"), V, "key 'data.path'");
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "6 tokens") && strstr(ht_errmsg(), "truncated"),
           "a shard shorter than its header says: %s", ht_errmsg());
    put_tokens("v2.bin", bad, 5, 1, 5, 2);
    rc = ht_tokens_open(&t, path_of("v2.bin"), V, "key 'data.path'");
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "version 2"), "another shard version: %s",
           ht_errmsg());
    put_bytes("odd.bin", (const unsigned char *)"abc", 3);
    rc = ht_tokens_open(&t, path_of("odd.bin"), V, "key 'data.path'");
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "odd"), "an odd byte count: %s", ht_errmsg());
    put_bytes("empty.bin", (const unsigned char *)"", 0);
    rc = ht_tokens_open(&t, path_of("empty.bin"), V, "key 'data.path'");
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "empty"), "an empty file: %s", ht_errmsg());
    rc = ht_tokens_open(&t, path_of("none.bin"), V, "key 'data.path'");
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "none.bin") && strstr(ht_errmsg(), "data.path"),
           "a missing file: %s", ht_errmsg());
    rc = ht_tokens_open(&t, path_of("nomatch_*.bin"), V, "key 'data.path'");
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "matches no file"), "a glob matching nothing: %s",
           ht_errmsg());
    rc = ht_tokens_open(&t, path_of("sh_*.bin"), 70000, "key 'data.path'");
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "65536"), "a vocabulary past uint16: %s",
           ht_errmsg());
    rc = ht_tokens_open(&t, path_of("raw.bin"), V, "key 'data.path'");
    ht_tokview v;
    int rc2 = rc == HT_OK ? ht_tokens_whole(&t, 700, "raw.bin", &v) : rc;
    tap_ok(rc2 == HT_EINPUT && strstr(ht_errmsg(), "701"),
           "700 tokens are not one window of a 700-token context: %s", ht_errmsg());
    ht_tokens_free(&t);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ht_t_tokens.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_formats();
    test_windows();
    test_errors();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", dir);
    return tap_done();
}
