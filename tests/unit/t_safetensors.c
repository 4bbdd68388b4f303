/* safetensors: round trip, the written bytes checked by hand (and by numpy when present),
 * hostile files refused with HT_EINPUT and a byte offset, fuzzed files never crash, and the
 * writer's atomicity (failed writes leave the old file and no temp file). */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "tap.h"
#include "tfile.h"

/* A file of header text hdr (length field = its length unless hlen >= 0) and data bytes. */
static void make_st(const char *path, const char *hdr, long long hlen, const void *data,
                    size_t ndata) {
    size_t n = strlen(hdr);
    uint64_t len = hlen >= 0 ? (uint64_t)hlen : n;
    unsigned char *b = malloc(8 + n + ndata + 1);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(len >> (8 * i));
    memcpy(b + 8, hdr, n);
    if (ndata) memcpy(b + 8 + n, data, ndata);
    put_file(path, b, 8 + n + ndata);
    free(b);
}

static float *seq(size_t n, float a, float b) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = a * (float)i + b;
    return x;
}

/* ---- round trip ------------------------------------------------------------------------ */

static const char *k_meta_keys[] = {"step", "quote\"key\\", "text"};
static const char *k_meta_vals[] = {"123", "v",
                                    "tab\t nl\n quote\" bs\\ \xc3\xbc \xf0\x9f\x98\x80 \x01"};
#define NMETA 3
#define NT 6

static void fill_tensors(ht_st_tensor *t, float **bufs) {
    static const char *names[NT] = {"w1",    "b1", "scalar",
                                    "empty", "t4", "odd \"name\" \\ \xc3\xa9"};
    static const int nd[NT] = {2, 1, 0, 2, 4, 1};
    static const int64_t sh[NT][4] = {{3, 5}, {5}, {0}, {0, 7}, {2, 3, 1, 4}, {1}};
    static const size_t ne[NT] = {15, 5, 1, 0, 24, 1};
    for (int i = 0; i < NT; i++) {
        bufs[i] = seq(ne[i], 0.25f * (float)(i + 1), -3.0f + (float)i);
        t[i].name = names[i];
        t[i].ndim = nd[i];
        memcpy(t[i].shape, sh[i], sizeof sh[i]);
        t[i].data = bufs[i];
    }
}

static void test_round_trip(void) {
    ht_st_tensor t[NT];
    float *bufs[NT];
    fill_tensors(t, bufs);
    const char *p = tpath("rt.safetensors");
    int rc = ht_st_write(p, t, NT, k_meta_keys, k_meta_vals, NMETA);
    tap_ok(rc == HT_OK, "write round-trip file (%s)", ht_errmsg());
    ht_st_file *f = NULL;
    rc = ht_st_open(&f, p);
    tap_ok(rc == HT_OK && f, "open it back (%s)", ht_errmsg());
    if (!f) return;
    tap_ok(ht_st_count(f) == NT, "count %d", ht_st_count(f));
    int names_ok = 1, data_ok = 1, shape_ok = 1;
    for (int i = 0; i < NT; i++) {
        names_ok &= ht_st_name(f, i) && !strcmp(ht_st_name(f, i), t[i].name);
        int nd = -1;
        int64_t sh[4];
        const float *d = ht_st_get(f, t[i].name, &nd, sh);
        size_t n = 1;
        shape_ok &= d != NULL && nd == t[i].ndim;
        for (int k = 0; k < t[i].ndim; k++) {
            shape_ok &= sh[k] == t[i].shape[k];
            n *= (size_t)t[i].shape[k];
        }
        for (int k = t[i].ndim; k < 4; k++)
            shape_ok &= sh[k] == 1;
        data_ok &= d && (n == 0 || memcmp(d, t[i].data, n * sizeof(float)) == 0);
    }
    tap_ok(names_ok, "names in written order, including escaped/unicode ones");
    tap_ok(shape_ok, "ndim and shapes (scalar, empty, 4-d)");
    tap_ok(data_ok, "data bit-identical");
    int meta_ok = 1;
    for (int i = 0; i < NMETA; i++)
        meta_ok &=
            ht_st_meta(f, k_meta_keys[i]) && !strcmp(ht_st_meta(f, k_meta_keys[i]), k_meta_vals[i]);
    tap_ok(meta_ok, "metadata with quotes, backslashes, control chars, unicode round-trips");
    tap_ok(ht_st_meta(f, "nope") == NULL && ht_st_get(f, "nope", NULL, NULL) == NULL,
           "absent names give NULL");
    tap_ok(!strcmp(ht_st_dtype(f, "w1"), "F32"), "dtype F32");
    ht_st_close(f);
    for (int i = 0; i < NT; i++)
        free(bufs[i]);
}

/* The file's bytes checked independently of our reader. */
static void test_bytes(void) {
    size_t n;
    unsigned char *b = get_file(tpath("rt.safetensors"), &n);
    if (!tap_ok(b && n > 8, "read written file raw")) return;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | b[i];
    tap_ok(hl % 8 == 0 && 8 + hl + 184 == n,
           "header length %llu LE, 8-aligned, file = 8 + header + 184 data bytes",
           (unsigned long long)hl);
    char *h = malloc(hl + 1);
    memcpy(h, b + 8, hl);
    h[hl] = 0;
    /* offsets by hand: 15*4=60, 5*4=20, 1*4=4, 0, 24*4=96, 1*4=4: 184 bytes */
    tap_ok(strstr(h, "\"w1\":{\"dtype\":\"F32\",\"shape\":[3,5],\"data_offsets\":[0,60]}") != NULL,
           "w1 entry");
    tap_ok(strstr(h, "\"b1\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[60,80]}") != NULL,
           "b1 entry");
    tap_ok(strstr(h, "\"scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[80,84]}") !=
               NULL,
           "scalar entry");
    tap_ok(strstr(h, "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,7],\"data_offsets\":[84,84]}") !=
               NULL,
           "empty entry");
    tap_ok(strstr(h, "\"t4\":{\"dtype\":\"F32\",\"shape\":[2,3,1,4],\"data_offsets\":[84,180]}") !=
               NULL,
           "t4 entry");
    tap_ok(strstr(h, "\"odd \\\"name\\\" \\\\ "
                     "\xc3\xa9\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[180,184]}}") !=
               NULL,
           "escaped name entry, last, closes the header");
    /* metadata first: the header's checksum, the tensors' (t_crc checks them), then ours */
    tap_ok(strncmp(h, "{\"__metadata__\":{\"crc32c_header\":\"", 34) == 0 &&
               strstr(h, "\"step\":\"123\",\"quote\\\"key\\\\\":\"v\",") != NULL,
           "metadata first, escaped");
    tap_ok(strstr(h, "\\u0001") != NULL && strstr(h, "\\t nl\\n") != NULL, "control chars escaped");
    float w0, t4_last;
    memcpy(&w0, b + 8 + hl, 4);
    memcpy(&t4_last, b + 8 + hl + 176, 4);
    tap_ok(w0 == -3.0f && t4_last == 0.25f * 5 * 23 + 1.0f,
           "data at the offsets (w1[0]=%g, t4[23]=%g)", w0, t4_last);
    free(h);
    free(b);
}

/* numpy as an independent reader of our file, and as a writer of a foreign file. */
static void test_python(void) {
    if (system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
        tap_skip("python3 with numpy not available: no independent reader check");
        tap_skip("python3 with numpy not available: no foreign file check");
        return;
    }
    const char *py = tpath("check.py");
    const char *script =
        "import json, struct, sys\nimport numpy as np\n"
        "b = open(sys.argv[1], 'rb').read()\n(n,) = struct.unpack('<Q', b[:8])\n"
        "h = json.loads(b[8:8 + n].decode('utf-8'))\ndata = b[8 + n:]\nmeta = "
        "h.pop('__metadata__')\n"
        "assert meta['text'] == 'tab\\t nl\\n quote\" bs\\\\ \\u00fc \\U0001F600 \\x01', meta\n"
        "assert list(h) == ['w1', 'b1', 'scalar', 'empty', 't4', 'odd \"name\" \\\\ \\u00e9'], "
        "list(h)\n"
        "for i, (k, v) in enumerate(h.items()):\n"
        "    b0, e0 = v['data_offsets']\n"
        "    a = np.frombuffer(data[b0:e0], dtype='<f4').reshape(v['shape'])\n"
        "    ref = (np.float32(0.25 * (i + 1)) * np.arange(a.size, dtype=np.float32) + "
        "np.float32(-3.0 + i))\n"
        "    assert np.array_equal(a.ravel(), ref), k\n"
        "# a foreign file: F16 first (misaligning nothing), then F32 at an odd offset after 2 U8s\n"
        "hd = {'h': {'dtype': 'F16', 'shape': [2], 'data_offsets': [0, 4]},\n"
        "      'u': {'dtype': 'U8', 'shape': [2], 'data_offsets': [4, 6]},\n"
        "      'f': {'dtype': 'F32', 'shape': [3], 'data_offsets': [6, 18]},\n"
        "      '__metadata__': {'format': 'pt'}}\n"
        "s = json.dumps(hd).encode()\n"
        "d = np.array([1, 2], '<f2').tobytes() + bytes([7, 9]) + np.array([1.5, -2, 3], "
        "'<f4').tobytes()\n"
        "open(sys.argv[2], 'wb').write(struct.pack('<Q', len(s)) + s + d)\n";
    put_file(py, script, strlen(script));
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s %s", py, tpath("rt.safetensors"),
             tpath("py.safetensors"));
    tap_ok(system(cmd) == 0, "numpy reader agrees with the written file");
    ht_st_file *f = NULL;
    int rc = ht_st_open(&f, tpath("py.safetensors"));
    tap_ok(rc == HT_OK, "open a numpy-written file with F16/U8 and a misaligned F32 (%s)",
           ht_errmsg());
    if (!f) return;
    int nd;
    int64_t sh[4];
    const float *x = ht_st_get(f, "f", &nd, sh);
    tap_ok(x && nd == 1 && sh[0] == 3 && x[0] == 1.5f && x[1] == -2.0f && x[2] == 3.0f &&
               ((uintptr_t)x % 4) == 0,
           "misaligned F32 tensor read through an aligned copy");
    ht_error_clear();
    tap_ok(ht_st_get(f, "h", NULL, NULL) == NULL && strstr(ht_errmsg(), "tensor 'h' has dtype F16"),
           "non-F32 tensor listed but refused by get: %s", ht_errmsg());
    tap_ok(!strcmp(ht_st_dtype(f, "u"), "U8") && !strcmp(ht_st_meta(f, "format"), "pt"),
           "dtype and metadata");
    ht_st_close(f);
}

/* ---- hostile files --------------------------------------------------------------------- */

static void expect_bad(const char *what, const char *hdr, long long hlen, const void *data,
                       size_t nd, const char *want) {
    const char *p = tpath("bad.safetensors");
    make_st(p, hdr, hlen, data, nd);
    ht_st_file *f = NULL;
    ht_error_clear();
    int rc = ht_st_open(&f, p);
    tap_ok(rc == HT_EINPUT && !f && strstr(ht_errmsg(), want) && strstr(ht_errmsg(), ": byte "),
           "%s -> %s", what, ht_errmsg());
    ht_st_close(f);
}

static void test_hostile(void) {
    static const unsigned char z[64];
    const char *p = tpath("short.safetensors");
    put_file(p, "\x10\0\0\0\0", 5);
    ht_st_file *f = NULL;
    int rc = ht_st_open(&f, p);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "byte 0: file is 5 bytes, too short"),
           "short file: %s", ht_errmsg());
    rc = ht_st_open(&f, tpath("does-not-exist"));
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "No such file"), "missing file: %s", ht_errmsg());

    expect_bad("header longer than file", "{}", 1000, NULL, 0,
               "byte 0: header length 1000 exceeds the 2 bytes");
    expect_bad("absurd header length", "{}", 1LL << 40, NULL, 0,
               "header length 1099511627776 is absurd");
    expect_bad("missing colon", "{\"a\" 1}", -1, NULL, 0,
               "byte 13: expected ':' after object key, found '1'");
    expect_bad("empty header", "", -1, NULL, 0,
               "byte 8: expected '{' at the start of the header, found end of text");
    expect_bad("not an object", "[1,2]", -1, NULL, 0,
               "byte 8: expected '{' at the start of the header");
    expect_bad("truncated JSON", "{\"a\":{\"dtype\":\"F3", -1, NULL, 0,
               "byte 22: unterminated string");
    expect_bad("trailing comma", "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},}",
               -1, z, 4, "expected a string, found '}'");
    expect_bad("trailing garbage", "{} x", -1, NULL, 0,
               "byte 11: unexpected data after the header");
    expect_bad("bad escape", "{\"a\\q\":1}", -1, NULL, 0, "byte 11: invalid escape");
    expect_bad("lone surrogate", "{\"\\ud800x\":1}", -1, NULL, 0, "high surrogate not followed");
    expect_bad("invalid UTF-8", "{\"\xc3\x28\":1}", -1, NULL, 0, "byte 10: invalid UTF-8");
    expect_bad("raw newline in string", "{\"a\nb\":1}", -1, NULL, 0, "control byte 0x0a");
    expect_bad("unknown dtype", "{\"w\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,1]}}",
               -1, z, 1, "byte 22: unknown dtype \"Q4\" for tensor 'w'");
    expect_bad("offsets past data",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[100],\"data_offsets\":[0,400]}}", -1, z, 16,
               "run past the data buffer (16 bytes)");
    expect_bad("offsets not matching shape",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", -1, z, 16,
               "byte 55: data_offsets [0, 8] of tensor 'w' span 8 bytes, expected 12");
    expect_bad("begin > end", "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}",
               -1, z, 16, "span -4 bytes");
    expect_bad("three offsets",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", -1, z, 16,
               "must be [begin, end]");
    expect_bad("negative offset",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", -1, z, 16,
               "negative data offset");
    expect_bad("overlap",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               -1, z, 12, "of tensor 'b' overlap tensor 'a' [0, 8]");
    expect_bad("negative dim",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,8]}}", -1, z, 8,
               "byte 39: negative dimension -3");
    expect_bad(
        "overflowing shape",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,8]}}",
        -1, z, 8, "overflows 64 bits");
    expect_bad("huge shape",
               "{\"w\":{\"dtype\":\"F64\",\"shape\":[1000000000000000000],\"data_offsets\":[0,8]}}",
               -1, z, 8, "more than any file holds");
    expect_bad(
        "65-bit integer",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}}", -1,
        z, 8, "integer out of range");
    expect_bad("fractional dim",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]}}", -1, z, 8,
               "expected an integer, found 1.5");
    expect_bad("sub-byte remainder",
               "{\"w\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", -1, z, 8,
               "do not fill whole bytes");
    expect_bad("missing field", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", -1, z, 8,
               "byte 9: tensor 'w' lacks \"data_offsets\"");
    expect_bad("duplicate field", "{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", -1, z, 8,
               "duplicate field");
    expect_bad("duplicate names",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               -1, z, 8, "byte 62: duplicate tensor name 'a'");
    expect_bad("duplicate metadata key", "{\"__metadata__\":{\"k\":\"1\",\"j\":\"2\",\"k\":\"3\"}}",
               -1, NULL, 0, "byte 41: duplicate metadata key 'k'");
    expect_bad("duplicate __metadata__", "{\"__metadata__\":{},\"__metadata__\":{}}", -1, NULL, 0,
               "duplicate __metadata__");
    expect_bad("non-string metadata", "{\"__metadata__\":{\"k\":1}}", -1, NULL, 0,
               "byte 29: metadata value for 'k' must be a string");
    expect_bad("control chars in a name are quoted",
               "{\"a\\u001bb\":{\"dtype\":\"F32\",\"shape\":[1]}}", -1, NULL, 0,
               "tensor 'a\\x1bb' lacks");
    char deep[400];
    strcpy(deep, "{\"x\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],\"extra\":");
    size_t dl = strlen(deep);
    for (int i = 0; i < 100; i++)
        deep[dl++] = '[';
    deep[dl] = 0;
    expect_bad("deep nesting in an unknown field", deep, -1, NULL, 0, "nesting deeper than 64");

    /* Accepted oddities: spaces padding, unknown fields, holes, empty tensors anywhere. */
    make_st(tpath("ok.safetensors"),
            "{\"a\":{\"shape\":[1],\"x\":{\"y\":[null,true,false,-1.5e3,\"\\u00e9\"]},\"dtype\":"
            "\"F32\","
            "\"data_offsets\":[4,8]},\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[6,6]}"
            "}    ",
            -1, "\0\0\0\0\0\0\x80\x3f", 8);
    f = NULL;
    ht_error_clear();
    rc = ht_st_open(&f, tpath("ok.safetensors"));
    const float *a = f ? ht_st_get(f, "a", NULL, NULL) : NULL;
    tap_ok(rc == HT_OK && a && a[0] == 1.0f,
           "padding, unknown fields, holes and empty tensors accepted (%s)", ht_errmsg());
    ht_st_close(f);
}

/* Every truncation and many random byte flips of a valid file: never a crash (run under ASan),
 * only HT_OK or HT_EINPUT. */
static void test_fuzz(void) {
    size_t n;
    unsigned char *orig = get_file(tpath("rt.safetensors"), &n);
    unsigned char *b = malloc(n);
    /* Thousands of small files: tmpfs when there is one, as /tmp may be slow under load. */
    char p[128];
    if (access("/dev/shm", W_OK) == 0)
        snprintf(p, sizeof p, "/dev/shm/ht_st_fuzz_%ld.safetensors", (long)getpid());
    else
        snprintf(p, sizeof p, "%s", tpath("fuzz.safetensors"));
    int bad = 0, ok = 0, refused = 0;
    for (size_t len = 0; len < n; len++) {
        put_file(p, orig, len);
        ht_st_file *f = NULL;
        int rc = ht_st_open(&f, p);
        bad += rc != HT_EINPUT;
        ht_st_close(f);
    }
    tap_ok(bad == 0, "all %zu truncations refused with HT_EINPUT", n);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    bad = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(b, orig, n);
        int flips = 1 + it % 4;
        for (int k = 0; k < flips; k++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            size_t at = it % 3 == 0
                            ? s % 8
                            : 8 + (s >> 8) % (n - 8 > 400 ? 400 : n - 8); /* mostly the header */
            b[at] = (unsigned char)(s >> 32);
        }
        put_file(p, b, n);
        ht_st_file *f = NULL;
        int rc = ht_st_open(&f, p);
        if (rc == HT_OK) {
            ok++;
            for (int i = 0; i < ht_st_count(f); i++)
                ht_st_get(f, ht_st_name(f, i), NULL, NULL);
        } else {
            refused += rc == HT_EINPUT;
            bad += rc != HT_EINPUT;
        }
        ht_st_close(f);
    }
    tap_ok(bad == 0, "3000 mutated files: %d opened, %d refused with HT_EINPUT, %d other", ok,
           refused, bad);
    unlink(p);
    free(b);
    free(orig);
}

/* ---- atomic writes --------------------------------------------------------------------- */

static int tmp_left(const char *path) {
    char t[300];
    snprintf(t, sizeof t, "%s.tmp.%ld", path, (long)getpid());
    return access(t, F_OK) == 0;
}

static void test_atomic(void) {
    float *big = seq(1 << 14, 1.0f, 0.0f);
    float one = 42.0f;
    ht_st_tensor small = {"x", 1, {1}, &one}, large = {"x", 1, {1 << 14}, big};
    const char *nodir = tpath("no/such/dir/c.safetensors");
    int rc = ht_st_write(nodir, &small, 1, NULL, NULL, 0);
    tap_ok(rc == HT_ERUNTIME && strstr(ht_errmsg(), "No such file") && !tmp_left(nodir),
           "non-existent directory: HT_ERUNTIME, no temp file: %s", ht_errmsg());

    const char *p = tpath("atomic.safetensors");
    rc = ht_st_write(p, &small, 1, NULL, NULL, 0);
    rc |= ht_st_write(p, &large, 1, NULL, NULL, 0);
    ht_st_file *f = NULL;
    rc |= ht_st_open(&f, p);
    int64_t sh[4];
    const float *x = f ? ht_st_get(f, "x", NULL, sh) : NULL;
    tap_ok(rc == HT_OK && x && sh[0] == 1 << 14 && x[100] == 100.0f && !tmp_left(p),
           "overwrite gives the new file, no temp left");
    ht_st_close(f);

    /* Disk full, simulated by a file size limit: the old checkpoint must survive intact. */
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit lim = {4096, old.rlim_max};
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
        big[100] = -1.0f;
        rc = ht_st_write(p, &large, 1, NULL, NULL, 0);
        setrlimit(RLIMIT_FSIZE, &old);
        tap_ok(rc == HT_ERUNTIME && strstr(ht_errmsg(), "cannot write temp file"),
               "write past the size limit fails: %s", ht_errmsg());
        f = NULL;
        rc = ht_st_open(&f, p);
        x = f ? ht_st_get(f, "x", NULL, NULL) : NULL;
        tap_ok(rc == HT_OK && x && x[100] == 100.0f && !tmp_left(p),
               "old checkpoint intact, temp removed");
        ht_st_close(f);
    } else {
        tap_skip("cannot lower RLIMIT_FSIZE");
        tap_skip("cannot lower RLIMIT_FSIZE");
    }
    signal(SIGXFSZ, prev);

    /* a directory, a FIFO or a device is never replaced: refused before any temp file */
    const char *d = tpath("adir");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/keep'", d);
    (void)!system(cmd);
    rc = ht_st_write(d, &small, 1, NULL, NULL, 0);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "found a directory") && !tmp_left(d) &&
               access(tpath("adir/keep"), F_OK) == 0,
           "a directory is not replaced: %s", ht_errmsg());
    const char *fifo = tpath("afifo");
    unlink(fifo);
    struct stat sb;
    rc = mkfifo(fifo, 0600) == 0 ? ht_st_write(fifo, &small, 1, NULL, NULL, 0) : -1;
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "found a FIFO") && stat(fifo, &sb) == 0 &&
               S_ISFIFO(sb.st_mode) && !tmp_left(fifo),
           "a FIFO is not replaced: %s", ht_errmsg());
    unlink(fifo);
    /* a dead writer's temp file goes, a live process's stays */
    const char *keep = tpath("stale.safetensors");
    char dead[600], live[600];
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    snprintf(dead, sizeof dead, "%s.tmp.%d", keep, (int)child);
    snprintf(live, sizeof live, "%s.tmp.%d", keep, (int)getppid());
    FILE *tf = fopen(dead, "w");
    if (tf) fclose(tf);
    tf = fopen(live, "w");
    if (tf) fclose(tf);
    rc = ht_st_write(keep, &small, 1, NULL, NULL, 0);
    tap_ok(rc == HT_OK && access(dead, F_OK) != 0 && access(live, F_OK) == 0,
           "stale temp of a dead writer removed, a live one's kept");
    unlink(live);

    const char *bad_keys[] = {"k", "k"}, *vals[] = {"1", "2"};
    ht_st_tensor dup[2] = {small, small}, neg = {"n", 1, {-1}, &one};
    tap_ok(ht_st_write(p, &small, 1, bad_keys, vals, 2) == HT_EINPUT,
           "duplicate metadata key refused: %s", ht_errmsg());
    tap_ok(ht_st_write(p, dup, 2, NULL, NULL, 0) == HT_EINPUT, "duplicate tensor name refused: %s",
           ht_errmsg());
    tap_ok(ht_st_write(p, &neg, 1, NULL, NULL, 0) == HT_EINPUT, "negative shape refused: %s",
           ht_errmsg());
    free(big);
}

int main(void) {
    tfile_init("ht_st");
    double t0 = ht_now();
    test_round_trip();
    test_bytes();
    double t1 = ht_now();
    test_python();
    double t2 = ht_now();
    test_hostile();
    double t3 = ht_now();
    test_fuzz();
    double t4 = ht_now();
    test_atomic();
    tap_diag("seconds: round trip %.2f, python %.2f, hostile %.2f, fuzz %.2f, atomic %.2f", t1 - t0,
             t2 - t1, t3 - t2, t4 - t3, ht_now() - t4);
    tfile_done();
    return tap_done();
}
