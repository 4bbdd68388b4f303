/* io/: the JSON parser on valid and invalid text, metrics lines (valid JSON, NaN as null,
 * append vs truncate, write failures), and progress output in plain and bar mode captured
 * from a tmpfile() with a fake clock. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "io/json.h"
#include "io/metrics.h"
#include "io/progress.h"
#include "tap.h"

/* ---- JSON parser ------------------------------------------------------------------------ */

static void test_json(void) {
    static const struct {
        const char *s;
        int ok;
        long off;
    } cases[] = {
        {"{}", 1, 0},
        {" [ ] ", 1, 0},
        {"0", 1, 0},
        {"-0.5e+3", 1, 0},
        {"1E9", 1, 0},
        {"\"\\uD83D\\uDE00 \\u00e9 \\/\\b\\f\\n\\r\\t\"", 1, 0},
        {"\"\x7f \xc3\xa9\"", 1, 0},
        {"[true,false,null,{\"a\":[1,{\"b\":\"c\"}]}]", 1, 0},
        {"", 0, 0},
        {"01", 0, 1},
        {"1.", 0, 2},
        {"-", 0, 1},
        {"1e", 0, 2},
        {".5", 0, 0},
        {"+1", 0, 0},
        {"[1,]", 0, 3},
        {"{\"a\":1,}", 0, 7},
        {"{\"a\" 1}", 0, 5},
        {"{1:2}", 0, 1},
        {"tru", 0, 0},
        {"nulll", 0, 4},
        {"[1 2]", 0, 3},
        {"\"abc", 0, 0},
        {"\"\\x\"", 0, 1},
        {"\"\\u12g4\"", 0, 5},
        {"\"\\udc00\"", 0, 1},
        {"\"a\tb\"", 0, 2},
        {"\"\xff\"", 0, 1},
        {"\"\xe0\x80\x80\"", 0, 1},
        {"{} {}", 0, 3},
        {"NaN", 0, 0},
        {"[Infinity]", 0, 1},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t off = 0;
        char err[200] = "";
        int ok = ht_json_valid(cases[i].s, strlen(cases[i].s), &off, err, sizeof err);
        if (ok != cases[i].ok || (!ok && (long)off != cases[i].off)) {
            tap_diag("case %zu \"%s\": valid %d (want %d), offset %zu (want %ld): %s", i,
                     cases[i].s, ok, cases[i].ok, off, cases[i].off, err);
            bad++;
        }
    }
    tap_ok(bad == 0, "%zu validity cases with error offsets", sizeof cases / sizeof cases[0]);

    char deep[200];
    for (int d = 64; d <= 65; d++) {
        for (int k = 0; k < d; k++)
            deep[k] = '[', deep[d + k] = ']';
        tap_ok(ht_json_valid(deep, 2 * (size_t)d, NULL, NULL, 0) == (d == 64), "depth %d %s", d,
               d == 64 ? "accepted" : "refused");
    }

    ht_json j;
    char *s = NULL;
    const char *txt = "\"a\\\"b\\\\c\\u00e9\\ud83d\\ude00\\n\"";
    ht_json_init(&j, txt, strlen(txt));
    tap_ok(ht_json_string(&j, &s) == 0 && !strcmp(s, "a\"b\\c\xc3\xa9\xf0\x9f\x98\x80\n"),
           "string escapes decode");
    free(s);
    ht_json_init(&j, "\"a\\u0000b\"", 10);
    tap_ok(ht_json_string(&j, &s) == -1 && strstr(j.err, "\\u0000"),
           "\\u0000 refused when decoding: %s", j.err);

    int64_t v = 0;
    const char *big = "9223372036854775807 -9223372036854775808 9223372036854775808";
    ht_json_init(&j, big, strlen(big));
    int r1 = ht_json_int64(&j, &v);
    tap_ok(r1 == 0 && v == INT64_MAX, "INT64_MAX");
    int r2 = ht_json_int64(&j, &v);
    tap_ok(r2 == 0 && v == INT64_MIN, "INT64_MIN");
    int r3 = ht_json_int64(&j, &v);
    tap_ok(r3 == -1 && j.err_off == 41 && strstr(j.err, "out of range"),
           "2^63 refused at offset %zu: %s", j.err_off, j.err);
    double d = 0;
    ht_json_init(&j, "-1.25e2", 7);
    tap_ok(ht_json_number(&j, &d) == 0 && d == -125.0, "number -1.25e2");

    size_t vo = 0, vl = 0;
    const char *obj = "{\"a\":[1,{\"loss\":2}],\"loss\": null ,\"b\":\"x\"}";
    tap_ok(ht_json_find(obj, strlen(obj), "loss", &vo, &vl) && vl == 4 &&
               !strncmp(obj + vo, "null", 4),
           "find a top-level key, not a nested one");
    tap_ok(!ht_json_find(obj, strlen(obj), "zz", &vo, &vl), "find an absent key");

    ht_jbuf b = {0};
    ht_jbuf_put_str(&b, "q\"\\\x01\n\xc3\xa9\xff");
    tap_ok(!strcmp(b.s, "\"q\\\"\\\\\\u0001\\n\xc3\xa9\xef\xbf\xbd\"") &&
               ht_json_valid(b.s, b.len, NULL, NULL, 0),
           "escaping (invalid UTF-8 -> U+FFFD): %s", b.s);
    b.len = 0;
    ht_jbuf_put_num(&b, NAN);
    ht_jbuf_putc(&b, ' ');
    ht_jbuf_put_num(&b, -INFINITY);
    ht_jbuf_putc(&b, ' ');
    ht_jbuf_put_num(&b, 0.1f);
    ht_jbuf_putc(&b, ' ');
    ht_jbuf_put_num(&b, 1e300);
    tap_ok(!strcmp(b.s, "null null 0.100000001 1e+300"), "numbers: %s", b.s);
    ht_jbuf_free(&b);
}

/* ---- metrics ---------------------------------------------------------------------------- */

static char *slurp(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    char *s = calloc(1, 65536);
    size_t n = fread(s, 1, 65535, fp);
    s[n] = 0;
    fclose(fp);
    return s;
}

/* Every line a valid JSON object; returns the number of lines or -1. */
static int check_lines(const char *text) {
    int n = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        if (!e) return -1;
        size_t off = 0;
        char err[200] = "not an object";
        if (*p != '{' || !ht_json_valid(p, (size_t)(e - p), &off, err, sizeof err)) {
            tap_diag("line %d invalid at %zu: %s: %.*s", n + 1, off, err, (int)(e - p), p);
            return -1;
        }
        n++;
        p = e + 1;
    }
    return n;
}

static int field_is(const char *text, int line, const char *key, const char *want) {
    const char *p = text;
    for (int i = 0; i < line && p; i++)
        p = strchr(p, '\n'), p = p ? p + 1 : NULL;
    if (!p) return 0;
    size_t vo, vl;
    const char *e = strchr(p, '\n');
    if (!ht_json_find(p, (size_t)(e - p), key, &vo, &vl)) return 0;
    return vl == strlen(want) && !strncmp(p + vo, want, vl);
}

static void test_metrics(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/ht_metrics_%ld.jsonl", (long)getpid());
    ht_metrics *m = NULL;
    const char *no_str = getenv("HT_TEST_UNSET_VARIABLE"); /* a NULL the compiler cannot see */
    int rc = ht_metrics_open(&m, path, 0);
    tap_ok(rc == HT_OK, "open metrics (%s)", ht_errmsg());
    rc |= ht_metrics_train(m, 1, 2.5, 0.001, 1234.5);
    rc |= ht_metrics_train(m, 2, NAN, INFINITY, -INFINITY);
    rc |= ht_metrics_eval(m, 2, 1.75, 0.5, 12.5);
    rc |= ht_metrics_write(m, "type=%s note=%s none=%s n=%zu big=%llu neg=%d l=%ld x=%g", "custom",
                           "quote\" bs\\ nl\n \xe2\x82\xac", no_str, (size_t)7,
                           18446744073709551615ull, -3, -4L, -0.0);
    tap_ok(rc == HT_OK, "records written (%s)", ht_errmsg());
    int bad = ht_metrics_write(m, "type=%s loss=%x", "train", 1u);
    tap_ok(bad == HT_ERUNTIME && strstr(ht_errmsg(), "unsupported conversion at offset 13"),
           "%%x refused: %s", ht_errmsg());
    bad = ht_metrics_write(m, "bad key=%d", 1);
    tap_ok(bad == HT_ERUNTIME && strstr(ht_errmsg(), "expected key=%conv at offset 0"),
           "key without value refused: %s", ht_errmsg());
    tap_ok(ht_metrics_close(m) == HT_OK, "close");
    char *t = slurp(path);
    tap_ok(t && check_lines(t) == 4, "4 lines, each a valid JSON object");
    tap_ok(t && !strncmp(t,
                         "{\"type\":\"train\",\"step\":1,\"loss\":2.5,\"lr\":0.001,\"samples_per_"
                         "s\":1234.5}\n",
                         71),
           "train record shape");
    tap_ok(t && field_is(t, 1, "loss", "null") && field_is(t, 1, "lr", "null") &&
               field_is(t, 1, "samples_per_s", "null"),
           "NaN and Inf written as null");
    tap_ok(t && field_is(t, 2, "type", "\"eval\"") && field_is(t, 2, "val_loss", "1.75") &&
               field_is(t, 2, "val_acc", "0.5") && field_is(t, 2, "time_s", "12.5"),
           "eval record shape");
    tap_ok(t && field_is(t, 3, "note", "\"quote\\\" bs\\\\ nl\\n \xe2\x82\xac\"") &&
               field_is(t, 3, "none", "null") && field_is(t, 3, "big", "18446744073709551615") &&
               field_is(t, 3, "neg", "-3") && field_is(t, 3, "x", "-0"),
           "strings escaped, NULL -> null, integer widths");
    free(t);

    rc = ht_metrics_open(&m, path, 1);
    rc |= ht_metrics_eval(m, 3, 1.5, 0.625, 20);
    rc |= ht_metrics_close(m);
    t = slurp(path);
    tap_ok(rc == HT_OK && t && check_lines(t) == 5 && field_is(t, 4, "step", "3"),
           "append keeps earlier lines");
    free(t);
    rc = ht_metrics_open(&m, path, 0);
    rc |= ht_metrics_train(m, 9, 1, 1, 1);
    rc |= ht_metrics_close(m);
    t = slurp(path);
    tap_ok(rc == HT_OK && t && check_lines(t) == 1, "no append truncates");
    free(t);
    unlink(path);

    rc = ht_metrics_open(&m, "/nonexistent-dir/m.jsonl", 0);
    tap_ok(rc == HT_ERUNTIME && !m && strstr(ht_errmsg(), "No such file"), "open failure: %s",
           ht_errmsg());
    if (access("/dev/full", W_OK) == 0 && ht_metrics_open(&m, "/dev/full", 0) == HT_OK) {
        tap_ok(ht_metrics_status(m) == HT_OK, "no failure before the first write");
        rc = ht_metrics_train(m, 1, 1, 1, 1);
        tap_ok(rc == HT_ERUNTIME && strstr(ht_errmsg(), "No space"), "disk full reported: %s",
               ht_errmsg());
        rc = ht_metrics_train(m, 2, 1, 1, 1);
        tap_ok(rc == HT_ERUNTIME && ht_metrics_status(m) == HT_ERUNTIME &&
                   strstr(ht_errmsg(), "2 metrics records could not be written") &&
                   strstr(ht_errmsg(), "No space"),
               "the failure sticks and counts: %s", ht_errmsg());
        rc = ht_metrics_close(m);
        tap_ok(rc == HT_ERUNTIME && strstr(ht_errmsg(), "2 metrics records"),
               "close reports the lost records (exit 1 at the end): %s", ht_errmsg());
    } else {
        tap_skip("no /dev/full");
    }
}

/* ---- progress --------------------------------------------------------------------------- */

static double g_clock;
static double fake_now(void) { return g_clock; }

static char *captured(FILE *fp) {
    fflush(fp);
    long n = ftell(fp);
    rewind(fp);
    char *s = calloc(1, (size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, fp);
    s[got] = 0;
    return s;
}

static int count_char(const char *s, char c) {
    int n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

static void test_progress_plain(void) {
    FILE *fp = tmpfile();
    ht_progress p;
    int rc = ht_progress_init(&p, fp, 100, "auto", 25);
    ht_progress_set_clock(&p, fake_now);
    g_clock = 0;
    tap_ok(rc == HT_OK && p.mode == HT_PROGRESS_PLAIN, "auto on a non-terminal is plain");
    for (int s = 1; s <= 100; s++) {
        g_clock = 0.4 * s;
        ht_progress_update(&p, s, 2.5, 1e-3, 100.0);
        if (s == 50) ht_progress_note(&p, "eval step %d val_loss %.3f", s, 1.25);
    }
    ht_progress_finish(&p);
    char *out = captured(fp);
    const char *want =
        "step 25/100 (25%) loss 2.5000 lr 1.00e-03 100.0 samples/s elapsed 0:00:10 ETA 0:00:30\n"
        "step 50/100 (50%) loss 2.5000 lr 1.00e-03 100.0 samples/s elapsed 0:00:20 ETA 0:00:20\n"
        "eval step 50 val_loss 1.250\n"
        "step 75/100 (75%) loss 2.5000 lr 1.00e-03 100.0 samples/s elapsed 0:00:30 ETA 0:00:10\n"
        "step 100/100 (100%) loss 2.5000 lr 1.00e-03 100.0 samples/s elapsed 0:00:40 ETA 0:00:00\n";
    tap_ok(!strcmp(out, want),
           "plain lines every 25 steps, note in between, nothing extra at finish");
    if (strcmp(out, want)) tap_diag("got:\n%s", out);
    free(out);
    fclose(fp);

    fp = tmpfile();
    ht_progress_init(&p, fp, 0, "plain", 0);
    ht_progress_set_clock(&p, fake_now);
    for (int s = 1; s <= 250; s++)
        ht_progress_update(&p, s, 1, 1, 1);
    ht_progress_finish(&p);
    out = captured(fp);
    tap_ok(count_char(out, '\n') == 3 && strstr(out, "step 250 loss") && !strstr(out, "ETA"),
           "unknown total: every 100 steps plus the last, no ETA");
    free(out);
    fclose(fp);

    fp = tmpfile();
    ht_progress_init(&p, fp, 10, "none", 1);
    for (int s = 1; s <= 10; s++)
        ht_progress_update(&p, s, 1, 1, 1);
    ht_progress_note(&p, "x");
    ht_progress_finish(&p);
    tap_ok(ftell(fp) == 0, "none prints nothing");
    fclose(fp);
    tap_ok(ht_progress_init(&p, stderr, 10, "fancy", 1) == HT_EINPUT &&
               strstr(ht_errmsg(), "expected one of auto"),
           "unknown mode: %s", ht_errmsg());
}

static void test_progress_bar(void) {
    FILE *fp = tmpfile();
    ht_progress p;
    ht_progress_init(&p, fp, 1000, "bar", 0);
    ht_progress_set_clock(&p, fake_now);
    g_clock = 0;
    for (int s = 1; s <= 1000; s++) {
        g_clock = 0.01 * s; /* 100 steps/s for 10 s */
        ht_progress_update(&p, s, 3.0 - s * 0.001, 5e-4, 640.0);
        if (s == 500) ht_progress_note(&p, "eval step 500 val_acc 0.9\n");
    }
    ht_progress_finish(&p);
    char *out = captured(fp);
    int redraws = count_char(out, '\r');
    /* 10 s at <= 10 redraws/s, plus the final step, finish, and the note's blank + redraw. */
    tap_ok(redraws >= 90 && redraws <= 106, "throttled: %d redraws for 1000 steps over 10 s",
           redraws);
    tap_ok(count_char(out, '\n') == 2, "only the note and finish end lines");
    const char *last = strrchr(out, '\r');
    tap_ok(last && !strncmp(last,
                            "\r1000/1000 [########################] 100% loss 2.0000 lr 5.00e-04 "
                            "640.0 samples/s "
                            "ETA 0:00:00\n",
                            86),
           "final bar: %.90s", last ? last + 1 : "");
    const char *mid = strstr(out, "\r500/1000");
    tap_ok(mid && !strncmp(mid,
                           "\r500/1000 [############............]  50% loss 2.5000 lr 5.00e-04 "
                           "640.0 samples/s ETA 0:00:05",
                           92),
           "bar at step 500 with ETA h:mm:ss: %.92s", mid ? mid + 1 : "");
    const char *note = strstr(out, "eval step 500");
    tap_ok(note && note[-1] == '\r' && note[-2] == ' ' &&
               !strncmp(note, "eval step 500 val_acc 0.9\n\r500/1000", 35),
           "note blanks the bar, prints its line, redraws the bar");
    free(out);
    fclose(fp);

    char b[32];
    int ok = 1;
    static const struct {
        double s;
        const char *want;
    } hms[] = {
        {0, "0:00:00"},        {59.4, "0:00:59"}, {59.6, "0:01:00"}, {3661, "1:01:01"},
        {360000, "100:00:00"}, {-1, "--:--:--"},  {NAN, "--:--:--"}, {1e12, "--:--:--"},
    };
    for (size_t i = 0; i < sizeof hms / sizeof hms[0]; i++) {
        ht_progress_fmt_hms(b, sizeof b, hms[i].s);
        if (strcmp(b, hms[i].want))
            ok = 0, tap_diag("%g -> %s (want %s)", hms[i].s, b, hms[i].want);
    }
    tap_ok(ok, "h:mm:ss formatting");
}

int main(void) {
    test_json();
    test_metrics();
    test_progress_plain();
    test_progress_bar();
    return tap_done();
}
