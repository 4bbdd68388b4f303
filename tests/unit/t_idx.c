/* Tests for the IDX loader: small hand-made files (plain and gzip) in a temporary
 * directory, one per malformation, each expected to fail with HT_EINPUT and a
 * message naming the file, offset, found and expected; then the real MNIST t10k
 * set when it is present (a TAP skip otherwise). */
#include "data/data.h"

#include "core/err.h"
#include "tap.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define MAGIC_IMG 0x00000803u
#define MAGIC_LAB 0x00000801u
enum { N = 3, ROWS = 5, COLS = 7, NPIX = N * ROWS * COLS };

static char g_dir[512];
static unsigned char g_pix[NPIX];
static const unsigned char g_lab[N] = {7, 2, 1};

/* ------------------------------------------------------------ file making */

/* Paths of the files made, kept for the whole run and removed at the end. */
static char g_paths[128][1024];
static int g_npaths;

static const char *at(const char *name) {
    for (int k = 0; k < g_npaths; k++)
        if (!strcmp(strrchr(g_paths[k], '/') + 1, name)) return g_paths[k];
    if (g_npaths == 128) {
        tap_diag("too many test files");
        exit(1);
    }
    snprintf(g_paths[g_npaths], sizeof g_paths[0], "%s/%s", g_dir, name);
    return g_paths[g_npaths++];
}

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* A byte buffer holding a file's content. */
typedef struct blob {
    unsigned char b[4096];
    size_t len;
} blob;

static void add32(blob *f, uint32_t v) {
    put_be32(f->b + f->len, v);
    f->len += 4;
}

static void add(blob *f, const void *p, size_t n) {
    memcpy(f->b + f->len, p, n);
    f->len += n;
}

static blob images(uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols, size_t npix) {
    blob f = {{0}, 0};
    add32(&f, magic);
    add32(&f, n);
    add32(&f, rows);
    add32(&f, cols);
    add(&f, g_pix, npix);
    return f;
}

static blob labels(uint32_t magic, uint32_t n, const unsigned char *lab, size_t nlab) {
    blob f = {{0}, 0};
    add32(&f, magic);
    add32(&f, n);
    add(&f, lab, nlab);
    return f;
}

static const char *write_plain(const char *name, const blob *f, size_t len) {
    const char *p = at(name);
    FILE *fp = fopen(p, "wb");
    if (!fp || fwrite(f->b, 1, len, fp) != len || fclose(fp) != 0) tap_diag("cannot write %s", p);
    return p;
}

static const char *write_gz(const char *name, const blob *f) {
    const char *p = at(name);
    gzFile gz = gzopen(p, "wb");
    if (!gz || gzwrite(gz, f->b, (unsigned)f->len) != (int)f->len || gzclose(gz) != Z_OK)
        tap_diag("cannot write %s", p);
    return p;
}

static long file_size(const char *p) {
    FILE *fp = fopen(p, "rb");
    if (!fp) return -1;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fclose(fp);
    return n;
}

/* Rewrites a file keeping its first `len` bytes, optionally flipping one byte. */
static void mangle(const char *p, long len, long flip_at) {
    unsigned char buf[8192];
    FILE *fp = fopen(p, "rb");
    size_t n = fp ? fread(buf, 1, sizeof buf, fp) : 0;
    if (fp) fclose(fp);
    if (len > (long)n) len = (long)n;
    if (flip_at >= 0 && flip_at < len) buf[flip_at] ^= 0x5a;
    fp = fopen(p, "wb");
    if (fp) {
        fwrite(buf, 1, (size_t)len, fp);
        fclose(fp);
    }
}

/* ----------------------------------------------------------------- checks */

/* rc must be HT_EINPUT, *ds left empty, and the message must hold every
 * fragment (NULL-terminated list). */
static void expect_fail(int rc, const ht_dataset *ds, const char *what, ...) {
    const char *msg = ht_errmsg();
    int ok = rc == HT_EINPUT && ds->n == 0 && ds->x == NULL && ds->y == NULL;
    va_list ap;
    va_start(ap, what);
    for (const char *frag; (frag = va_arg(ap, const char *)) != NULL;)
        if (!strstr(msg, frag)) {
            ok = 0;
            tap_diag("missing fragment \"%s\"", frag);
        }
    va_end(ap);
    tap_ok(ok, "%s -> %s", what, msg);
}

static float norm(int p) { return (float)((p / 255.0 - 0.1307) / 0.3081); }

static void check_valid(const char *kind, const char *img, const char *lab) {
    ht_dataset ds;
    int rc = ht_idx_load_classes(&ds, img, lab, 8);
    if (!tap_ok(rc == HT_OK, "%s: valid 3 x 5x7 set loads (%s)", kind, rc ? ht_errmsg() : "ok"))
        return;
    tap_ok(ds.n == 3 && ds.features == 35 && ds.classes == 8,
           "%s: n 3, 35 features, classes = 8 as asked", kind);
    tap_ok(ds.y[0] == 7 && ds.y[1] == 2 && ds.y[2] == 1, "%s: labels 7 2 1", kind);
    /* hand-computed (p/255 - 0.1307)/0.3081 */
    tap_ok(fabsf(ds.x[0] - -0.424212918f) < 1e-6f && fabsf(ds.x[1] - 2.821486530f) < 1e-6f &&
               fabsf(ds.x[2] - 1.205000923f) < 1e-6f && fabsf(ds.x[3] - -0.411484685f) < 1e-6f,
           "%s: pixels 0, 255, 128, 1 -> %.6f %.6f %.6f %.6f", kind, ds.x[0], ds.x[1], ds.x[2],
           ds.x[3]);
    int exact = 1;
    for (int k = 0; k < NPIX; k++)
        exact &= ds.x[k] == norm(g_pix[k]);
    tap_ok(exact, "%s: all 105 pixels equal the documented formula, row-major", kind);
    ht_dataset_free(&ds);
}

/* ------------------------------------------------------------------ cases */

static void test_valid(const char *img, const char *lab, const char *imggz, const char *labgz) {
    check_valid("plain", img, lab);
    check_valid("gzip", imggz, labgz);
    check_valid("mixed", img, labgz);

    ht_dataset ds;
    tap_ok(ht_idx_load_classes(&ds, img, lab, 10) == HT_OK && ds.classes == 10,
           "class count fixed at 10 when asked");
    ht_dataset_free(&ds);
    expect_fail(ht_idx_load_classes(&ds, img, lab, 5), &ds, "label >= class cap", lab,
                "byte offset 8", "found label 7", "expected a class in [0, 5)", NULL);
}

static void test_open_and_header(const char *img, const char *lab) {
    ht_dataset ds;
    const char *missing = at("no-such-file.gz");
    expect_fail(ht_idx_load(&ds, missing, lab), &ds, "missing images file", missing, "cannot open",
                "No such file", NULL);
    expect_fail(ht_idx_load(&ds, img, missing), &ds, "missing labels file", missing, "cannot open",
                NULL);
    expect_fail(ht_idx_load(&ds, g_dir, lab), &ds, "a directory", g_dir, "directory", NULL);

    blob f = images(MAGIC_IMG, N, ROWS, COLS, NPIX);
    const char *p = write_plain("short.idx", &f, 10);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "images shorter than the header", p,
                "truncated at byte offset 10", "expected the 16-byte IDX3", "found 10 bytes", NULL);
    p = write_plain("tiny.idx", &f, 2);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "2-byte images file", p,
                "truncated at byte offset 2", NULL);
    p = write_plain("empty.idx", &f, 0);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "empty images file", p, "truncated at byte offset 0",
                "found 0 bytes", NULL);
    blob g = images(MAGIC_IMG, N, ROWS, COLS, 0);
    g.len = 12;
    p = write_gz("short.gz", &g);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "gzip images shorter than the header", p,
                "truncated at byte offset 12", NULL);
    blob l = labels(MAGIC_LAB, N, g_lab, N);
    p = write_plain("short-labels.idx", &l, 6);
    expect_fail(ht_idx_load(&ds, img, p), &ds, "labels shorter than the header", p,
                "truncated at byte offset 6", "expected the 8-byte IDX1", NULL);

    l = labels(MAGIC_LAB, N, g_lab, N);
    p = write_plain("swapped.idx", &l, l.len);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "labels file given as images", p, "byte offset 0",
                "found magic 0x00000801", "expected 0x00000803 (IDX3 unsigned byte images)",
                "swapped", NULL);
    expect_fail(ht_idx_load(&ds, img, img), &ds, "images file given as labels", img,
                "found magic 0x00000803", "expected 0x00000801 (IDX1 unsigned byte labels)", NULL);
    f = images(0x00000D03u, N, ROWS, COLS, NPIX);
    p = write_plain("float.idx", &f, f.len);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "IDX3 of floats", p, "found magic 0x00000d03",
                "unsigned bytes", NULL);
    f = images(0x00000802u, N, ROWS, COLS, NPIX);
    p = write_plain("idx2.idx", &f, f.len);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "IDX2 of bytes", p, "found magic 0x00000802",
                "dimensions", NULL);
    blob t = {{0}, 0};
    add(&t, "hello, world\n0123", 17);
    p = write_plain("text.txt", &t, t.len);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "a text file", p, "found magic 0x68656c6c",
                "not an IDX file", NULL);
}

static void test_dims(const char *img, const char *lab) {
    ht_dataset ds;
    blob f = images(MAGIC_IMG, 2147483647u, 28, 28, NPIX);
    const char *p = write_plain("huge-n.idx", &f, f.len);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "n = 2^31-1", p, "byte offset 4",
                "2147483647 images", "expected at most 268435456 values", NULL);
    f = images(MAGIC_IMG, 0xFFFFFFFFu, 1, 1, NPIX);
    p = write_plain("huge-n2.idx", &f, f.len);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "n = 2^32-1", p, "4294967295 images", NULL);
    f = images(MAGIC_IMG, 1, 65536, 65536, NPIX);
    p = write_gz("huge-rc.gz", &f);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "rows*cols = 2^32 (gzip)", p,
                "1 images of 65536 x 65536", "expected at most", NULL);
    f = images(MAGIC_IMG, N, 0, COLS, NPIX);
    p = write_plain("zero-rows.idx", &f, f.len);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "zero rows", p, "3 images x 0 rows x 7 cols",
                "at least 1", NULL);
    blob l = labels(MAGIC_LAB, 0, g_lab, 0);
    p = write_plain("zero-labels.idx", &l, l.len);
    expect_fail(ht_idx_load(&ds, img, p), &ds, "zero labels", p, "found 0 labels", NULL);
    l = labels(MAGIC_LAB, 0x80000000u, g_lab, N);
    p = write_plain("huge-labels.idx", &l, l.len);
    expect_fail(ht_idx_load(&ds, img, p), &ds, "2^31 labels", p, "found 2147483648 labels", NULL);

    /* Plausible headers over too little data: the plain file is refused from its
     * size before allocation; the gzip one streams and stops where data ends
     * (7M x 5x7 = 245M values is under the cap, so only growth-on-arrival keeps
     * this cheap). */
    f = images(MAGIC_IMG, 1000, ROWS, COLS, NPIX);
    p = write_plain("overstated.idx", &f, f.len);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "plain header says 1000 images, file has 3", p,
                "truncated at byte offset 121", "expected 35000 bytes of pixel data, found 105",
                NULL);
    f = images(MAGIC_IMG, 7000000, ROWS, COLS, NPIX);
    p = write_gz("overstated.gz", &f);
    l = labels(MAGIC_LAB, 7000000, g_lab, N);
    const char *pl = write_gz("overstated-labels.gz", &l);
    expect_fail(ht_idx_load(&ds, p, pl), &ds, "gzip header says 7M images, stream has 3", p,
                "truncated at byte offset 121", "expected 245000000 bytes of pixel data, found 105",
                NULL);
}

static void test_data(const char *img, const char *lab, const char *imggz, const char *labgz) {
    ht_dataset ds;
    blob f = images(MAGIC_IMG, N, ROWS, COLS, NPIX);
    const char *p = write_plain("trunc.idx", &f, f.len - 5);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "plain pixel data 5 bytes short", p,
                "truncated at byte offset 116", "expected 105 bytes of pixel data, found 100",
                NULL);
    blob g = f;
    g.len -= 5;
    p = write_gz("trunc.gz", &g);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "gzip pixel data 5 bytes short", p,
                "truncated at byte offset 116", "expected 105 bytes of pixel data, found 100",
                NULL);
    blob l = labels(MAGIC_LAB, N, g_lab, N);
    p = write_plain("trunc-labels.idx", &l, l.len - 1);
    expect_fail(ht_idx_load(&ds, img, p), &ds, "labels 1 byte short", p,
                "truncated at byte offset 10", "expected 3 bytes of labels, found 2", NULL);

    l = labels(MAGIC_LAB, 4, g_lab, N);
    unsigned char four = 4;
    add(&l, &four, 1);
    p = write_plain("four-labels.idx", &l, l.len);
    expect_fail(ht_idx_load(&ds, img, p), &ds, "4 labels for 3 images", p, "found 4 labels",
                "expected 3", img, "mismatch", NULL);

    g = f;
    add(&g, "xyz", 3);
    p = write_plain("trailing.idx", &g, g.len);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "3 trailing bytes (plain)", p,
                "trailing data at byte offset 121", "expected end of file", "found 3 more bytes",
                NULL);
    p = write_gz("trailing.gz", &g);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "3 trailing bytes (gzip)", p,
                "trailing data at byte offset 121", "found 3 more bytes", NULL);
    l = labels(MAGIC_LAB, N, g_lab, N);
    add(&l, "\0", 1);
    p = write_gz("trailing-labels.gz", &l);
    expect_fail(ht_idx_load(&ds, img, p), &ds, "1 trailing byte (gzip labels)", p,
                "trailing data at byte offset 11", "found 1 more byte", NULL);

    /* Damaged .gz files: cut in the middle, cut in the trailer, a flipped byte. */
    long sz = file_size(imggz);
    p = at("cut.gz");
    write_gz("cut.gz", &f);
    mangle(p, sz / 2, -1);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "gzip file cut in half", p,
                "truncated at byte offset", "gzip stream ends early", NULL);
    p = at("cut-trailer.gz");
    write_gz("cut-trailer.gz", &f);
    mangle(p, sz - 4, -1);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "gzip file missing its last 4 bytes", p, "gzip",
                NULL);
    p = at("flipped.gz");
    write_gz("flipped.gz", &f);
    mangle(p, sz, sz / 2);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "gzip file with a flipped byte", p,
                "corrupt gzip stream", NULL);
    p = at("flipped-crc.gz");
    write_gz("flipped-crc.gz", &f);
    mangle(p, sz, sz - 6);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "gzip file with a bad CRC", p, "corrupt gzip stream",
                NULL);
    p = at("bad-method.gz");
    write_gz("bad-method.gz", &f);
    mangle(p, sz, 2);
    expect_fail(ht_idx_load(&ds, p, lab), &ds, "gzip header with an unknown method", p, "gzip",
                NULL);
    (void)labgz;
}

/* Labels that lie, junk after a gzip stream, a FIFO (must not block). */
static void test_lies(const char *img, const char *imggz) {
    ht_dataset ds;
    blob l = labels(MAGIC_LAB, N, g_lab, N);
    const char *p = write_plain("labels-721.idx", &l, l.len);
    expect_fail(ht_idx_load(&ds, img, p), &ds, "classes from labels 7 2 1 (0 absent)", p,
                "byte offset 8", "found label 7", "no label 0 occurs", NULL);
    const unsigned char stray[N] = {0, 1, 200};
    l = labels(MAGIC_LAB, N, stray, N);
    p = write_plain("labels-200.idx", &l, l.len);
    expect_fail(ht_idx_load(&ds, img, p), &ds, "a stray label 200 among 0 1", p,
                "byte offset 10", "found label 200", "no label 2 occurs", NULL);
    const unsigned char zeros[N] = {0, 0, 0};
    l = labels(MAGIC_LAB, N, zeros, N);
    p = write_plain("labels-0.idx", &l, l.len);
    expect_fail(ht_idx_load(&ds, img, p), &ds, "all labels 0 (inferred)", p, "byte offset 8",
                "at least 2 classes", NULL);
    expect_fail(ht_idx_load_classes(&ds, img, p, 10), &ds, "all labels 0 (10 classes)", p,
                "at least 2 classes", NULL);
    const unsigned char ok3[N] = {1, 0, 1};
    l = labels(MAGIC_LAB, N, ok3, N);
    p = write_plain("labels-101.idx", &l, l.len);
    tap_ok(ht_idx_load(&ds, img, p) == HT_OK && ds.classes == 2, "labels 1 0 1: 2 classes");
    ht_dataset_free(&ds);

    /* junk after the gzip stream: refused like plain trailing data */
    long sz = file_size(imggz);
    unsigned char buf[8192];
    FILE *fp = fopen(imggz, "rb");
    size_t got = fp ? fread(buf, 1, sizeof buf, fp) : 0;
    if (fp) fclose(fp);
    blob j = {{0}, 0};
    add(&j, buf, got);
    add(&j, "junk", 4);
    p = write_plain("junk.gz", &j, j.len);
    expect_fail(ht_idx_load_classes(&ds, p, at("labels.idx"), 8), &ds, "4 junk bytes after the gzip stream", p,
                "trailing data", "found 4 more bytes", NULL);
    tap_ok(got == (size_t)sz, "read the .gz (%zu bytes)", got);
    /* two members, as gzip -c a b > c makes: still one valid file */
    blob f = images(MAGIC_IMG, N, ROWS, COLS, NPIX);
    blob head = {{0}, 0}, rest = {{0}, 0};
    add(&head, f.b, 50);
    add(&rest, f.b + 50, f.len - 50);
    const char *a = write_gz("m1.gz", &head), *b = write_gz("m2.gz", &rest);
    blob two = {{0}, 0};
    fp = fopen(a, "rb");
    two.len = fread(two.b, 1, 2048, fp);
    fclose(fp);
    fp = fopen(b, "rb");
    two.len += fread(two.b + two.len, 1, 2048, fp);
    fclose(fp);
    p = write_plain("two-members.gz", &two, two.len);
    tap_ok(ht_idx_load_classes(&ds, p, at("labels.idx"), 8) == HT_OK && ds.n == N,
           "two concatenated gzip members load (%s)", ht_errmsg());
    ht_dataset_free(&ds);

    /* a FIFO without a writer: refused at once, not a hang */
    p = at("fifo.idx");
    unlink(p);
    if (mkfifo(p, 0600) != 0) tap_diag("mkfifo failed");
    expect_fail(ht_idx_load(&ds, p, at("labels.idx")), &ds, "a FIFO as images", p, "FIFO",
                "expected a regular file", NULL);
}

/* ------------------------------------------------------------- real MNIST */

static void test_mnist(void) {
    /* HT_MNIST_DIR, or the copy shipped in the repository (found from this file's path) */
    const char *dir = getenv("HT_MNIST_DIR");
    char shipped[960];
    if (!dir || !*dir) {
        const char *me = __FILE__, *cut = strstr(me, "tests/unit/t_idx.c");
        snprintf(shipped, sizeof shipped, "%.*sdata/mnist", cut ? (int)(cut - me) : 0, me);
        dir = shipped;
    }
    char img[1024], lab[1024];
    snprintf(img, sizeof img, "%s/t10k-images-idx3-ubyte.gz", dir);
    snprintf(lab, sizeof lab, "%s/t10k-labels-idx1-ubyte.gz", dir);
    if (access(img, R_OK) != 0 || access(lab, R_OK) != 0) {
        char why[1200];
        snprintf(why, sizeof why, "MNIST t10k not found in %s (set HT_MNIST_DIR)", dir);
        tap_skip(why);
        return;
    }
    ht_dataset ds, tr, va;
    int rc = ht_idx_load(&ds, img, lab);
    if (!tap_ok(rc == HT_OK, "MNIST t10k loads (%s)", rc ? ht_errmsg() : img)) return;
    tap_ok(ds.n == 10000 && ds.features == 784 && ds.classes == 10,
           "MNIST: n %d, %d features, %d classes", ds.n, ds.features, ds.classes);
    tap_ok(ds.y[0] == 7 && ds.y[1] == 2, "MNIST: first labels %d %d (expected 7 2)", ds.y[0],
           ds.y[1]);
    float lo = ds.x[0], hi = ds.x[0];
    double mean = 0;
    for (size_t k = 0; k < (size_t)ds.n * ds.features; k++) {
        lo = ds.x[k] < lo ? ds.x[k] : lo;
        hi = ds.x[k] > hi ? ds.x[k] : hi;
        mean += ds.x[k];
    }
    mean /= (double)ds.n * ds.features;
    tap_ok(lo == norm(0) && hi == norm(255) && fabs(mean) < 0.05,
           "MNIST: range [%.4f, %.4f], mean %.4f", lo, hi, mean);
    rc = ht_dataset_split(&ds, 0.2, &tr, &va);
    tap_ok(rc == HT_OK && tr.n == 8000 && va.n == 2000 && va.y[0] == ds.y[8000],
           "MNIST: split 0.2 gives %d / %d, validation is the tail", tr.n, va.n);
    ht_dataset_free(&tr);
    ht_dataset_free(&va);
    ht_dataset_free(&ds);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/ht_idx_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        tap_ok(0, "mkdtemp %s", g_dir);
        return tap_done();
    }
    for (int k = 0; k < NPIX; k++)
        g_pix[k] = (unsigned char)((k * 37 + 11) % 256);
    g_pix[0] = 0;
    g_pix[1] = 255;
    g_pix[2] = 128;
    g_pix[3] = 1;

    blob f = images(MAGIC_IMG, N, ROWS, COLS, NPIX);
    blob l = labels(MAGIC_LAB, N, g_lab, N);
    const char *img = write_plain("images.idx", &f, f.len);
    const char *lab = write_plain("labels.idx", &l, l.len);
    const char *imggz = write_gz("images.gz", &f);
    const char *labgz = write_gz("labels.gz", &l);

    test_valid(img, lab, imggz, labgz);
    test_open_and_header(img, lab);
    test_dims(img, lab);
    test_data(img, lab, imggz, labgz);
    test_lies(img, imggz);
    test_mnist();

    /* Leave nothing behind. */
    for (int k = 0; k < g_npaths; k++)
        unlink(g_paths[k]);
    if (rmdir(g_dir) != 0) tap_diag("could not remove %s", g_dir);
    return tap_done();
}
