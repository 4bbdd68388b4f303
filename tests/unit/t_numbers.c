/* Numbers wherever they are written (issue 31): the literal lexer of core/intlit.h against
 * hand-computed cases (what libconfig 1.5 reads, what was written, the digits' line), every
 * position of a number in a job file (the line after its key, arrays and lists over lines,
 * nested @includes, hex, L, floats past both ends of a double), the same check for the other
 * libconfig formats (ht_cfg_read_file), and the one reader of command-line numbers
 * (core/args.h) with its bounds. Expected lines are counted in the text written here. */
#include "cli/opts.h"
#include "config/config.h"
#include "core/args.h"
#include "core/cfgfile.h"
#include "core/err.h"
#include "core/intlit.h"
#include "tap.h"
#include "tfile.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void has(int rc, const char *what, const char *a, const char *b) {
    const char *m = ht_errmsg();
    int ok = rc == HT_EINPUT && strstr(m, a) && (!b || strstr(m, b));
    if (!tap_ok(ok, "%s", what)) tap_diag("rc=%d message: %s", rc, m);
    ht_error_clear();
}

/* The lexer: every literal, libconfig 1.5's reading of it and whether it is lost, with
 * comments, strings and names skipped. */
static void test_lexer(void) {
    ht_numlits L = {0};
    ht_numlits_scan_text(&L,
                         "a = 4294967312; # 99999999999\n"
                         "b = \"12 345\" /* 0xFFFFFFFF\n 7 */ ; c-5 = [1,\n"
                         "  -2147483649, 0xFFFFFFFF, 0x7fffffffL, 18446744073709551617L];\n"
                         "d = (.5, 5., 1e999, -1e-400, 2.5e-3, +7, 00012);\n",
                         "t");
    static const struct {
        const char *text;
        int line, kind, lost;
        long long ival;
    } want[] = {
        {"4294967312", 1, HT_LIT_INT, 1, 16},
        {"1", 3, HT_LIT_INT, 0, 1},
        {"-2147483649", 4, HT_LIT_INT, 1, 2147483647},
        {"0xFFFFFFFF", 4, HT_LIT_INT, 1, -1},
        {"0x7fffffffL", 4, HT_LIT_INT64, 0, 2147483647},
        {"18446744073709551617L", 4, HT_LIT_INT64, 1, LLONG_MAX},
        {".5", 5, HT_LIT_FLOAT, 0, 0},
        {"5.", 5, HT_LIT_FLOAT, 0, 0},
        {"1e999", 5, HT_LIT_FLOAT, 1, 0},
        {"-1e-400", 5, HT_LIT_FLOAT, 1, 0},
        {"2.5e-3", 5, HT_LIT_FLOAT, 0, 0},
        {"+7", 5, HT_LIT_INT, 0, 7},
        {"00012", 5, HT_LIT_INT, 0, 12},
    };
    int n = (int)(sizeof want / sizeof want[0]), ok = L.n == n;
    for (int i = 0; ok && i < n; i++) {
        const ht_numlit *l = &L.v[i];
        ok = !strcmp(l->text, want[i].text) && l->line == want[i].line &&
             l->kind == want[i].kind && l->lost == want[i].lost &&
             (l->kind == HT_LIT_FLOAT || l->ival == want[i].ival);
        if (!ok) tap_diag("literal %d: %s line %d kind %d lost %d value %lld", i, l->text, l->line,
                          l->kind, l->lost, l->ival);
    }
    tap_ok(ok, "lexer: 13 literals with their lines, libconfig's values and what it lost (%d found)",
           L.n);
    ht_numlits_free(&L);
}

static const char *BASE = "train = { batch = 32; steps = 100; };\noptim = { lr = 0.1; };\n";

/* Every position of a number in a job file: refused at the line its digits stand on. */
static void test_positions(void) {
    ht_config c;
    char t[2048], want[HT_PATH_MAX + 64];
    const char *p;
    snprintf(t, sizeof t, "%sdata = { samples\n  =\n\n   4294967312\n  ; };\n", BASE);
    p = put_text("nextline.cfg", t);
    snprintf(want, sizeof want, "%s:6: key 'data.samples': found 4294967312", p);
    has(ht_config_load(&c, p, NULL, 0), "the digits two lines below the key: their own line", want,
        NULL);
    snprintf(t, sizeof t,
             "train = { batch =\n 4294967328; steps = 3; };\noptim = { lr = 0.1; };\n");
    p = put_text("scalar.cfg", t);
    snprintf(want, sizeof want, "%s:2: key 'train.batch': found 4294967328, expected an integer >= 1 and <= 2147483647", p);
    has(ht_config_load(&c, p, NULL, 0), "a scalar on the line after its key (wraps to 32)", want, NULL);
    snprintf(t, sizeof t, "%scluster = { shares = (16,\n 8,\n\n 0x100000008); };\n", BASE);
    p = put_text("list.cfg", t);
    snprintf(want, sizeof want, "%s:6: key 'cluster.shares[2]': found 0x100000008", p);
    has(ht_config_load(&c, p, NULL, 0), "hex past 32 bits in a list, third line of it", want, NULL);
    snprintf(t, sizeof t, "%scluster = { slowdown = [1.0,\n 1e-400]; };\n", BASE);
    p = put_text("tiny.cfg", t);
    snprintf(want, sizeof want, "%s:4: key 'cluster.slowdown[1]': found 1e-400, below the smallest double", p);
    has(ht_config_load(&c, p, NULL, 0), "a float that reads as 0 (underflow) in an array", want, NULL);
    put_text("deep.cfg", "model = { hidden = [8,\n  -2147483649]; };\n");
    put_text("mid.cfg", "@include \"deep.cfg\"\n");
    snprintf(t, sizeof t, "%s@include \"mid.cfg\"\n", BASE);
    p = put_text("top.cfg", t);
    snprintf(want, sizeof want, "%s/deep.cfg:2: key 'model.hidden[1]': found -2147483649",
             tfile_dir());
    has(ht_config_load(&c, p, NULL, 0), "a nested @include: the included file's own line", want,
        NULL);
    snprintf(t, sizeof t, "%smodel = { type = 0xFFFFFFFF; };\n", BASE);
    p = put_text("type.cfg", t);
    has(ht_config_load(&c, p, NULL, 0), "a wrong type quotes the literal, not libconfig's -1",
        "key 'model.type': found an integer (0xFFFFFFFF)", NULL);
    snprintf(t, sizeof t, "%sdata = { seed = 0x7FFFFFFFFFFFFFFFL; samples =\n 100; };\n", BASE);
    p = put_text("good.cfg", t);
    int rc = ht_config_load(&c, p, NULL, 0);
    tap_ok(rc == HT_OK && c.data.seed == 0x7FFFFFFFFFFFFFFFull && c.data.samples == 100,
           "numbers libconfig holds load as written (hex L seed 2^63 - 1, a value on the next line)");
    has(ht_config_load(&c, p, (const char *[]){"cluster.shares=(1, 0xFFFFFFFFFFFFFFFFL)"}, 1),
        "--set: hex with L past 2^63 in a list",
        "--set cluster.shares=(1, 0xFFFFFFFFFFFFFFFFL): key 'cluster.shares[1]': found "
        "0xFFFFFFFFFFFFFFFFL, which does not fit in 64 bits", NULL);
    has(ht_config_load(&c, p, (const char *[]){"cluster.slowdown=[1.0, 2e6]"}, 1),
        "cluster.slowdown past its bound (a step that would never finish)",
        "key 'cluster.slowdown[1]': found 2000000, expected a number >= 1 and <= 1000000", NULL);
    has(ht_config_load(&c, p,
                       (const char *[]){"model.type=gpt", "data.kind=text", "data.path=x",
                                        "model.context=1048576", "model.d_model=1024"},
                       5),
        "gpt: context x 4 d_model past 2^31 - 1 (an int product)",
        "key 'model.context': found 1048576", "= 4294967296 values per sample");
}

/* Profiles, cluster descriptions and tuning files: the same check, the setting's path. */
static void test_other_formats(void) {
    config_t cf;
    const char *p = put_text("prof.cfg", "version = 1;\ndevices = ( { name = \"x\";\n"
                                         "  samples_per_s = ( { batch =\n 4294967360; } ); } );\n");
    char want[HT_PATH_MAX + 64];
    snprintf(want, sizeof want, "%s:4: devices[0].samples_per_s[0].batch: found 4294967360", p);
    has(ht_cfg_read_file(&cf, p, "profile"), "ht_cfg_read_file: a wrapped batch in a profile",
        want, "or 4294967360L for 64 bits");
    p = put_text("clu.cfg",
                 "links = { intra = { latency_us = 1; bandwidth_gbs =\n\n 1e400; }; };\n");
    snprintf(want, sizeof want, "%s:3: links.intra.bandwidth_gbs: found inf", p);
    has(ht_cfg_read_file(&cf, p, "cluster"), "ht_cfg_read_file: 1e400 in a cluster description",
        want, "1e400 is beyond the largest double");
    p = put_text("fine.cfg", "a = [1, 2, 3];\nb = 2147483647;\nc = -9223372036854775808L;\n");
    int rc = ht_cfg_read_file(&cf, p, "test");
    tap_ok(rc == HT_OK, "ht_cfg_read_file: the extremes libconfig holds load");
    if (rc == HT_OK) config_destroy(&cf);
}

/* The command-line reader: whole decimal arguments within bounds, nothing else. */
static void test_args(void) {
    long long x = 7;
    double d = 7, list[4];
    int n;
    static const struct {
        const char *v;
        int ok;
    } ints[] = {{"5", 1},  {"-0", 1},  {"+5", 0},  {" 5", 0},     {"5 ", 0},
                {"0x5", 0}, {"", 0},   {"5L", 0},  {"99999999999999999999", 0},
                {"11", 0}, {"-1", 0}, {"1e1", 0}, {"10", 1}};
    int all = 1;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int rc = ht_arg_int("--n", ints[i].v, 0, 10, &x);
        if ((rc == HT_OK) != ints[i].ok) all = 0, tap_diag("--n '%s': rc %d", ints[i].v, rc);
        ht_error_clear();
    }
    tap_ok(all, "integers: only whole decimal arguments in [0, 10]");
    static const struct {
        const char *v;
        int ok;
    } nums[] = {{"0.5", 1}, {".5", 1},  {"5.", 1},    {"1e3", 1},  {"inf", 0},  {"nan", 0},
                {"1e999", 0}, {"1e-400", 0}, {"0x1p3", 0}, {" 1", 0}, {"", 0},  {"0", 0},
                {"1e6", 1}, {"1000001", 0}, {"-.5", 0}};
    all = 1;
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        int rc = ht_arg_num("--x", nums[i].v, 0, 1, 1e6, NULL, &d);
        if ((rc == HT_OK) != nums[i].ok) all = 0, tap_diag("--x '%s': rc %d", nums[i].v, rc);
        ht_error_clear();
    }
    tap_ok(all, "numbers: finite decimal arguments in (0, 1e6], no inf, nan, hex or underflow");
    has(ht_arg_nums("--l", "1,2,3,4,5", 0, 1, 10, 1, 4, list, &n), "a list longer than its room",
        "--l 1,2,3,4,5: expected at most 4", NULL);
    has(ht_arg_nums("--l", "1,2.5", 0, 1, 10, 1, 4, list, &n), "a fraction where integers go",
        "--l 1,2.5: expected an integer > 0 and <= 10", NULL);
    tap_ok(ht_arg_nums("--l", "1,2,3", 0, 1, 10, 1, 4, list, &n) == HT_OK && n == 3 &&
               list[2] == 3,
           "a list within its room");
    ht_args_schedule a;
    ht_args_schedule_init(&a);
    char *argv[] = {"schedule", "--stages", "4", "--max-inflight", "1,99999999999", NULL};
    has(ht_opts_parse(ht_opts_schedule, 5, argv, &a, NULL, NULL),
        "schedule --max-inflight past an int (it was cast to int unchecked)",
        "--max-inflight 1,99999999999: expected an integer >= 1 and <= 1048576", NULL);
    ht_args_prof pa;
    ht_args_prof_init(&pa);
    char *pargv[] = {"hetprof", "--seed", "-1", NULL};
    has(ht_opts_parse(ht_opts_prof, 3, pargv, &pa, NULL, NULL),
        "hetprof --seed -1 (strtoull made it 2^64 - 1)", "--seed -1: expected an integer in [0, ", NULL);
    char *targv[] = {"hettrain", "--config=x.cfg", "--set=a.b=1", "--stop-after", "7", NULL};
    ht_args_train ta;
    ht_args_train_init(&ta);
    int rc = ht_opts_parse(ht_opts_train, 5, targv, &ta, NULL, NULL);
    tap_ok(rc == HT_OK && !strcmp(ta.config, "x.cfg") && ta.nset == 1 &&
               !strcmp(ta.sets[0], "a.b=1") && ta.stop_after == 7,
           "hettrain: --config=, --set= and --stop-after N");
}

int main(void) {
    tfile_init("t_numbers");
    test_lexer();
    test_positions();
    test_other_formats();
    test_args();
    tfile_done();
    return tap_done();
}
