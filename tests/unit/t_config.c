/* Tests for src/config: values and defaults from a file, --set overrides, and every error
 * class (syntax, unknown key/group with did-you-mean, wrong type, missing, range, enum,
 * length) with the exact file:line computed from the text written to a temp dir. */
#include "config/config.h"
#include "core/err.h"
#include "tap.h"
#include "tconfig.h"
#include "tfile.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 1-based line of the first occurrence of needle in text (0 if absent). */
static int line_of(const char *text, const char *needle) {
    const char *hit = strstr(text, needle);
    if (!hit) return 0;
    int line = 1;
    for (const char *p = text; p < hit; p++)
        line += *p == '\n';
    return line;
}

static void is_ok(int rc, const char *what) {
    if (!tap_ok(rc == HT_OK, "%s", what)) tap_diag("rc=%d message: %s", rc, ht_errmsg());
}

/* "FILE:LINE:" for the file at path and the line of needle in text. */
static const char *at(const char *path, const char *text, const char *needle) {
    static char buf[HT_PATH_MAX + 32];
    snprintf(buf, sizeof buf, "%s:%d:", path, line_of(text, needle));
    return buf;
}

static void test_write_changes(void);
static const char *BASE = "train = { batch = 32; steps = 100; };\noptim = { lr = 0.1; };\n";

/* A valid file with BASE plus extra settings appended (groups must not repeat BASE's). */
static const char *with_base(const char *name, const char *extra) {
    static char text[8192];
    snprintf(text, sizeof text, "%s%s", BASE, extra);
    return put_text(name, text);
}

/* ------------------------------------------------------------------------------------ */

static void test_full_file(void) {
    const char *text = "# every group\n"
                       "model = {\n  type = \"mlp\";\n  hidden = [256, 128, 64];\n"
                       "  activation = \"gelu\";\n};\n"
                       "data = {\n  kind = \"idx\";\n  images = \"/d/train-images.gz\";\n"
                       "  labels = \"/d/train-labels.gz\";\n  val_fraction = 0.25;\n"
                       "  shuffle = false;\n};\n"
                       "train = {\n  batch = 64;\n  epochs = 2.5;\n  seed = 7L;\n"
                       "  eval_every = 50;\n};\n"
                       "optim = {\n  type = \"adamw\";\n  lr = 3e-4;\n  beta2 = 0.95;\n"
                       "  weight_decay = 0.01;\n  schedule = \"cosine\";\n  warmup = 100;\n"
                       "  min_lr = 1e-5;\n  clip = 1.0;\n};\n"
                       "device = { select = \"gpu\"; cache = false; };\n"
                       "log = { metrics = \"m.jsonl\"; progress = \"plain\"; every = 5; };\n"
                       "checkpoint = { path = \"ck.safetensors\"; every = 1000; };\n";
    const char *p = put_text("full.cfg", text);
    ht_config c;
    is_ok(cfg_load(&c, p, NULL), "full file loads");
    tap_ok(strcmp(c.source, p) == 0, "source is the path");
    tap_ok(strcmp(c.model.type, "mlp") == 0 && strcmp(c.model.activation, "gelu") == 0,
           "model.type, model.activation");
    tap_ok(c.model.nhidden == 3 && c.model.hidden[0] == 256 && c.model.hidden[1] == 128 &&
               c.model.hidden[2] == 64,
           "model.hidden = [256, 128, 64]");
    tap_ok(strcmp(c.data.kind, "idx") == 0 && strcmp(c.data.images, "/d/train-images.gz") == 0 &&
               strcmp(c.data.labels, "/d/train-labels.gz") == 0,
           "data.kind, images, labels");
    tap_ok(c.data.val_fraction == 0.25 && c.data.shuffle == 0, "data.val_fraction, shuffle");
    tap_ok(c.train.batch == 64 && c.train.steps == 0 && c.train.epochs == 2.5 &&
               c.train.seed == 7 && c.train.eval_every == 50,
           "train.batch, steps (default 0), epochs, seed (7L), eval_every");
    tap_ok(strcmp(c.optim.type, "adamw") == 0 && c.optim.lr == 3e-4 && c.optim.beta2 == 0.95 &&
               c.optim.weight_decay == 0.01 && strcmp(c.optim.schedule, "cosine") == 0 &&
               c.optim.warmup == 100 && c.optim.min_lr == 1e-5 && c.optim.clip == 1.0,
           "optim values");
    tap_ok(c.optim.beta1 == 0.9 && c.optim.eps == 1e-8 && c.optim.momentum == 0.9 &&
               c.optim.step_size == 1000 && c.optim.gamma == 0.1 && c.optim.nesterov == 0,
           "optim defaults beside given values");
    tap_ok(strcmp(c.device.select, "gpu") == 0 && c.device.cache == 0 && !c.device.cache_dir[0],
           "device values");
    tap_ok(strcmp(c.log.metrics, "m.jsonl") == 0 && strcmp(c.log.progress, "plain") == 0 &&
               c.log.every == 5,
           "log values");
    tap_ok(strcmp(c.checkpoint.path, "ck.safetensors") == 0 && c.checkpoint.every == 1000,
           "checkpoint values");
}

static void test_defaults(void) {
    ht_config c;
    is_ok(cfg_load(&c, put_text("min.cfg", BASE), NULL), "minimal file loads");
    tap_ok(strcmp(c.model.type, "mlp") == 0 && c.model.nhidden == 1 && c.model.hidden[0] == 128 &&
               strcmp(c.model.activation, "relu") == 0,
           "model defaults: mlp, [128], relu");
    tap_ok(strcmp(c.data.kind, "synthetic") == 0 && !c.data.images[0] && !c.data.labels[0] &&
               c.data.val_fraction == 0.2 && c.data.samples == 10000 && c.data.features == 64 &&
               c.data.classes == 10 && c.data.seed == 1 && c.data.shuffle == 1,
           "data defaults");
    tap_ok(c.train.batch == 32 && c.train.steps == 100 && c.train.epochs == 0 &&
               c.train.seed == 42 && c.train.eval_every == 0,
           "train values and defaults");
    tap_ok(strcmp(c.optim.type, "sgd") == 0 && c.optim.lr == 0.1 && c.optim.momentum == 0.9 &&
               c.optim.nesterov == 0 && c.optim.beta1 == 0.9 && c.optim.beta2 == 0.999 &&
               c.optim.eps == 1e-8 && c.optim.weight_decay == 0 &&
               strcmp(c.optim.schedule, "constant") == 0 && c.optim.warmup == 0 &&
               c.optim.step_size == 1000 && c.optim.gamma == 0.1 && c.optim.min_lr == 0 &&
               c.optim.clip == 0,
           "optim defaults");
    tap_ok(!c.device.select[0] && c.device.cache == 1 && !c.device.cache_dir[0] &&
               !c.device.tuning[0],
           "device defaults");
    tap_ok(!c.log.metrics[0] && strcmp(c.log.progress, "auto") == 0 && c.log.every == 10 &&
               !c.checkpoint.path[0] && c.checkpoint.every == 0,
           "log and checkpoint defaults");
}

static void test_numbers(void) {
    ht_config c;
    const char *p = put_text("ints.cfg", "train = { batch = 8; epochs = 3; seed = 5000000000L; };\n"
                                         "optim = { lr = 1; weight_decay = 0; gamma = 2; };\n"
                                         "data = { seed = 9; };\n");
    is_ok(cfg_load(&c, p, NULL), "integers accepted for numbers");
    tap_ok(c.optim.lr == 1.0 && c.optim.weight_decay == 0.0 && c.optim.gamma == 2.0 &&
               c.train.epochs == 3.0,
           "lr = 1, epochs = 3 read as numbers");
    tap_ok(c.train.seed == 5000000000ULL && c.data.seed == 9, "seeds as int64 (42L) and int");

    const char *t =
        "train = { batch = 8; steps = 10;\n  seed = 5000000000; };\noptim = { lr = 1; };\n";
    p = put_text("wrap.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "64-bit seed without L is refused, not wrapped",
                at(p, t, "seed"), "found 5000000000", "5000000000L");
    t = "train = { batch = 8;\n steps = 3000000000; };\noptim = { lr = 1; };\n";
    p = put_text("wrap2.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "int past 2^31 is out of range", at(p, t, "steps"),
                "key 'train.steps': found 3000000000", "<= 2147483647");
    t = "train = { batch = 8; steps = 10; };\noptim = { lr = 1e400; };\n";
    p = put_text("inf.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "infinite number refused", at(p, t, "lr"), "found inf",
                "expected a finite number");
    t = "train = { batch = 8; steps = 10; seed = -1; };\noptim = { lr = 1; };\n";
    p = put_text("neg.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "negative seed refused", "key 'train.seed': found -1",
                "expected an integer >= 0", NULL);
}

/* libconfig 1.5 wraps integer literals past 32 bits (without L) and clamps past 64 (with
 * L): each is refused quoting the literal, in scalars, arrays (on any line of a multi-line
 * array), hex, and --set values. (When a small element on the same line equals the wrapped
 * value, the error may name that element's index; it still quotes the literal.) Numbers are
 * 0 or normal floats; derived sizes are bounded. */
static void test_lost_numbers(void) {
    ht_config c;
    const char *t = "train = { batch = 32; steps = 100; };\noptim = { lr = 0.1; };\n"
                    "model = { hidden = [16,\n   4294967312]; };\n";
    const char *p = put_text("lost1.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "hidden = [..., 4294967312] on the array's second line",
                at(p, t, "4294967312"), "key 'model.hidden[1]': found 4294967312", "<= 2147483647");
    t = "train = { batch = 32; steps = 100; };\noptim = { lr = 0.1; };\n"
        "model = { hidden = [4294967312, 16]; };\n";
    p = put_text("lost2.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "the wrapped element comes first",
                "key 'model.hidden[0]': found 4294967312", NULL, NULL);
    t = "train = { batch = 0x100000020; steps = 100; };\noptim = { lr = 0.1; };\n";
    p = put_text("lost3.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "a hex literal past 32 bits",
                "key 'train.batch': found 0x100000020", NULL, NULL);
    t = "train = { batch = 32; steps = 100; seed = 18446744073709551617L; };\n"
        "optim = { lr = 0.1; };\n";
    p = put_text("lost4.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "a seed past 64 bits (clamped by libconfig)",
                "found 18446744073709551617L, which does not fit in 64 bits", NULL, NULL);
    t = "train = { batch = 16; steps = 4294967312; };\noptim = { lr = 0.1; };\n";
    p = put_text("lost6.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "two keys on a line: the wrapped one is named, not its twin",
                "key 'train.steps': found 4294967312", NULL, NULL);
    t = "# 4294967312 in a comment, \"4294967312\" in a string\n"
        "train = { batch = 32; steps = 100; };\noptim = { lr = 0.1; };\n"
        "model = { hidden = [16]; }; # 4294967312\n";
    p = put_text("lost5.cfg", t);
    is_ok(cfg_load(&c, p, NULL), "big numbers in comments do not count");
    p = with_base("ok.cfg", "");
    cfg_refused(
        cfg_load(&c, p, "model.hidden=[7, 4294967304]", NULL), "--set array element past 32 bits",
        "--set model.hidden=[7, 4294967304]: key 'model.hidden[1]': found 4294967304", NULL, NULL);
    cfg_refused(cfg_load(&c, p, "data.seed=99999999999999999999", NULL), "--set seed past 64 bits",
                "found 99999999999999999999, which does not fit in 64 bits", NULL, NULL);
    is_ok(cfg_load(&c, p, "data.seed=9223372036854775807", NULL), "--set seed 2^63 - 1");
    cfg_refused(cfg_load(&c, p, "optim.lr=1e-320", NULL), "denormal lr refused",
                "key 'optim.lr': found", "expected 0 or a magnitude between 1.17549435e-38", NULL);
    cfg_refused(cfg_load(&c, p, "optim.weight_decay=1e300", NULL), "beyond float refused",
                "key 'optim.weight_decay'", "3.40282347e+38", NULL);
    is_ok(cfg_load(&c, p, "optim.weight_decay=0", NULL), "0 is still fine");
    cfg_refused(cfg_load(&c, p, "train.epochs=1e30", "train.steps=0", NULL),
                "epochs = 1e30 refused", "key 'train.epochs': found 1e+30", "<= 1000000", NULL);
    cfg_refused(cfg_load(&c, p, "model.type=cnn", "model.input_shape=[3, 65536, 65536]", NULL),
                "input_shape product past 2^31", "= 12884901888 values per sample", NULL, NULL);
}

static void test_file_errors(void) {
    ht_config c;
    const char *t, *p;

    t = "train = {\n  batch = 32;\n  steps = 10;\n};\nmodel = {\n  activation = relu;\n};\n";
    p = put_text("syntax.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "syntax error (unquoted string) names file:line",
                at(p, t, "relu"), "syntax error", "strings in double quotes");
    t = "train = { batch = 32; steps = 10; };\noptim = { lr = 0.1;\n  lr = 0.2; };\n";
    p = put_text("dup.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "duplicate key is a syntax error with libconfig's text",
                at(p, t, "lr = 0.2"), "syntax error: duplicate setting name", NULL);

    t = "train = { batch = 32; steps = 10; };\n\n# learning rate\noptim = {\n  lrr = 0.1;\n};\n";
    p = put_text("unknown.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "unknown key: file:line and did-you-mean", at(p, t, "lrr"),
                "unknown key 'optim.lrr' (did you mean 'optim.lr'?)", NULL);
    p = with_base("moved.cfg", "model = {\n  lr = 3;\n};\n");
    cfg_refused(cfg_load(&c, p, NULL), "key in the wrong group suggests the right one",
                ":4:", "unknown key 'model.lr' (did you mean 'optim.lr'?)", NULL);
    p = with_base("nosugg.cfg", "model = { zzzzzz = 1; };\n");
    cfg_refused(cfg_load(&c, p, NULL), "unknown key far from all lists the group's keys",
                "unknown key 'model.zzzzzz'", "keys in 'model': type, hidden, activation", NULL);
    t = "trian = {\n  batch = 32;\n};\noptim = { lr = 0.1; };\n";
    p = put_text("group.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "unknown group: did-you-mean", at(p, t, "trian"),
                "unknown group 'trian' (did you mean 'train'?)", NULL);
    p = with_base("group2.cfg", "\noptimizer = { lr = 0.1; };\n");
    cfg_refused(cfg_load(&c, p, NULL), "unknown group by prefix",
                ":4:", "unknown group 'optimizer' (did you mean 'optim'?)", NULL);
    t = "batch = 32;\n";
    p = put_text("top.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "top-level key suggests its group",
                ":1:", "unknown key 'batch' (did you mean 'train.batch'?)", NULL);

    t = "optim = { lr = 0.1; };\ntrain = {\n  batch = \"64\";\n  steps = 10;\n};\n";
    p = put_text("type.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "wrong type: string for integer", at(p, t, "batch"),
                "key 'train.batch': found a string, expected an integer", NULL);
    t = "optim = { lr = 0.1; };\ntrain = { steps = 10;\n  batch = 0.5; };\n";
    p = put_text("type2.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "wrong type: float for integer", at(p, t, "batch"),
                "key 'train.batch': found a float (0.5), expected an integer", NULL);
    p = with_base("type3.cfg", "data = {\n  shuffle = 1;\n};\n");
    cfg_refused(cfg_load(&c, p, NULL), "wrong type: integer for boolean",
                ":4:", "key 'data.shuffle': found an integer (1), expected a boolean", NULL);
    p = with_base("type4.cfg", "model = { type = \"mlp\";\n  hidden = 128; };\n");
    cfg_refused(cfg_load(&c, p, NULL), "wrong type: scalar for int array",
                ":4:", "key 'model.hidden': found an integer (128), expected an array of integers",
                NULL);
    p = with_base("type5.cfg", "model = { hidden = (64,\n  32.5); };\n");
    cfg_refused(cfg_load(&c, p, NULL), "wrong element type names the element and its line",
                ":4:", "key 'model.hidden[1]': found a float (32.5), expected an integer", NULL);
    p = put_text("type6.cfg", "train = 5;\n");
    cfg_refused(cfg_load(&c, p, NULL), "group given as a scalar",
                ":1:", "key 'train': found an integer (5), expected a group", NULL);

    t = "train = {\n  steps = 10;\n};\noptim = { lr = 0.1; };\n";
    p = put_text("missing.cfg", t);
    char want[HT_PATH_MAX + 100];
    snprintf(want, sizeof want,
             "%s: missing required key 'train.batch' (integer, global batch size)", p);
    tap_ok(cfg_load(&c, p, NULL) == HT_EINPUT && strcmp(ht_errmsg(), want) == 0,
           "missing train.batch: exact message");
    p = put_text("missing2.cfg", "train = { batch = 4; steps = 10; };\n");
    cfg_refused(cfg_load(&c, p, NULL), "missing optim.lr",
                "missing required key 'optim.lr' (number,", NULL, NULL);
    p = put_text("missing3.cfg", "train = { batch = 4; };\noptim = { lr = 0.1; };\n");
    cfg_refused(cfg_load(&c, p, NULL), "neither steps nor epochs",
                "missing required key 'train.steps' or 'train.epochs'", NULL, NULL);
    p = put_text("epochs.cfg", "train = { batch = 4; epochs = 0.5; };\noptim = { lr = 0.1; };\n");
    is_ok(cfg_load(&c, p, NULL), "epochs alone is enough");

    t = "train = { batch = 32; steps = 10; };\noptim = {\n  type = \"sgd\";\n  lr = -1;\n};\n";
    p = put_text("range.cfg", t);
    snprintf(want, sizeof want, "%s key 'optim.lr': found -1, expected a number > 0",
             at(p, t, "lr ="));
    tap_ok(cfg_load(&c, p, NULL) == HT_EINPUT && strcmp(ht_errmsg(), want) == 0,
           "out of range: exact message with line");
    p = with_base("range2.cfg", "data = {\n  val_fraction = 1.0;\n};\n");
    cfg_refused(cfg_load(&c, p, NULL), "val_fraction = 1 refused",
                ":4:", "key 'data.val_fraction': found 1, expected a number >= 0 and < 1", NULL);
    p = with_base("range3.cfg", "model = { hidden = [64, 0]; };\n");
    cfg_refused(cfg_load(&c, p, NULL), "hidden width 0 refused", "key 'model.hidden[1]': found 0",
                "expected an integer >= 1", NULL);

    t = "train = { batch = 32; steps = 10; };\noptim = {\n  lr = 0.1;\n  type = \"adam\";\n};\n";
    p = put_text("enum.cfg", t);
    cfg_refused(cfg_load(&c, p, NULL), "enum: not one of the choices", at(p, t, "type"),
                "key 'optim.type': found \"adam\", expected one of \"sgd\", \"adamw\"",
                "(did you mean \"adamw\"?)");
    p = with_base("enum2.cfg", "log = { progress = \"fancy\"; };\n");
    cfg_refused(cfg_load(&c, p, NULL), "enum: log.progress", "found \"fancy\"",
                "expected one of \"auto\", \"bar\", \"plain\", \"none\"", NULL);

    char text[8192], big[2100];
    memset(big, 'x', 2000);
    big[2000] = 0;
    snprintf(text, sizeof text, "%sdata = {\n  images = \"/%s\";\n};\n", BASE, big);
    p = put_text("long.cfg", text);
    cfg_refused(
        cfg_load(&c, p, NULL), "string longer than its buffer is refused",
        ":4:", "key 'data.images': found a string of 2001 characters, expected at most 1023", NULL);
    big[256] = 0;
    snprintf(text, sizeof text, "%sdevice = { select = \"%s\"; };\n", BASE, big);
    cfg_refused(cfg_load(&c, put_text("long2.cfg", text), NULL), "device.select of 256 refused",
                "found a string of 256 characters, expected at most 255", NULL, NULL);
    big[255] = 0;
    snprintf(text, sizeof text, "%sdevice = { select = \"%s\"; };\n", BASE, big);
    is_ok(cfg_load(&c, put_text("long3.cfg", text), NULL), "device.select of 255 fits");
    tap_ok(strlen(c.device.select) == 255, "and is kept whole");
    p = with_base("many.cfg",
                  "model = { hidden = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]; };\n");
    cfg_refused(cfg_load(&c, p, NULL), "more than HT_MAX_HIDDEN widths refused",
                "key 'model.hidden': found 17 values, expected at most 16", NULL, NULL);
    p = with_base("sixteen.cfg",
                  "model = { hidden = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]; };\n");
    is_ok(cfg_load(&c, p, NULL), "16 widths fit");
    tap_ok(c.model.nhidden == 16 && c.model.hidden[15] == 16, "all 16 kept");
    is_ok(cfg_load(&c, with_base("empty.cfg", "model = { hidden = []; };\n"), NULL), "[] loads");
    tap_ok(c.model.nhidden == 0, "hidden = [] gives no hidden layer");

    p = with_base("idx.cfg", "data = {\n  kind = \"idx\";\n  images = \"a.gz\";\n};\n");
    cfg_refused(cfg_load(&c, p, NULL), "idx needs labels", "missing required key 'data.labels'",
                NULL, NULL);
    p = with_base("idx2.cfg", "data = { kind = \"idx\"; };\n");
    cfg_refused(cfg_load(&c, p, NULL), "idx needs images", "missing required key 'data.images'",
                NULL, NULL);
    p = with_base("cos.cfg", "model = {};\n");
    cfg_refused(cfg_load(&c, p, "optim.schedule=cosine", "optim.min_lr=0.5", NULL),
                "cosine min_lr above lr refused", "--set optim.min_lr=0.5: key 'optim.min_lr'",
                "<= optim.lr (0.1)", NULL);

    snprintf(want, sizeof want, "cannot open config '%s/nope.cfg': No such file or directory",
             tfile_dir());
    snprintf(text, sizeof text, "%s/nope.cfg", tfile_dir());
    tap_ok(cfg_load(&c, text, NULL) == HT_EINPUT && strcmp(ht_errmsg(), want) == 0,
           "missing file: exact message");
    cfg_refused(cfg_load(&c, tfile_dir(), NULL), "a folder is not a config", "cannot open config",
                "Is a directory", NULL);
}

static void test_include(void) {
    ht_config c;
    put_text("base.cfg", "optim = { lr = 0.5;\n  type = \"adamw\"; };\n");
    const char *p =
        put_text("inc.cfg", "@include \"base.cfg\"\ntrain = { batch = 4; steps = 1; };\n");
    is_ok(cfg_load(&c, p, NULL), "@include relative to the file's folder");
    tap_ok(c.optim.lr == 0.5 && strcmp(c.optim.type, "adamw") == 0, "included values apply");
    put_text("bad.cfg", "optim = { lr = 0.5;\n  typ = \"adamw\"; };\n");
    p = put_text("inc2.cfg", "@include \"bad.cfg\"\ntrain = { batch = 4; steps = 1; };\n");
    char want[HT_PATH_MAX + 32];
    snprintf(want, sizeof want, "%s/bad.cfg:2: unknown key 'optim.typ'", tfile_dir());
    cfg_refused(cfg_load(&c, p, NULL), "error in an included file names that file and line", want,
                "did you mean 'optim.type'?", NULL);
}

static void test_overrides(void) {
    ht_config c;
    const char *p = put_text("set.cfg", BASE);
    is_ok(cfg_load(&c, p, "train.batch=64", "model.hidden=[512,256]", "optim.type=\"adamw\"",
                   "data.shuffle=false", "optim.lr = 1", "train.seed=5000000000", NULL),
          "overrides apply");
    tap_ok(c.train.batch == 64 && c.train.steps == 100, "train.batch=64 over the file's 32");
    tap_ok(c.model.nhidden == 2 && c.model.hidden[0] == 512 && c.model.hidden[1] == 256,
           "model.hidden=[512,256]");
    tap_ok(strcmp(c.optim.type, "adamw") == 0, "quoted string");
    tap_ok(c.data.shuffle == 0 && c.optim.lr == 1.0, "boolean, and int for a number");
    tap_ok(c.train.seed == 5000000000ULL, "64-bit seed in --set without L");
    is_ok(cfg_load(&c, p, "optim.type=adamw", "device.select=1", "log.metrics= /tmp/m 1.jsonl ",
                   "model.hidden=(8)", "optim.type=sgd", NULL),
          "bare strings");
    tap_ok(strcmp(c.optim.type, "sgd") == 0, "later override wins");
    tap_ok(strcmp(c.device.select, "1") == 0, "device.select=1 is the string \"1\"");
    tap_ok(strcmp(c.log.metrics, "/tmp/m 1.jsonl") == 0, "bare string trimmed at the ends only");
    tap_ok(c.model.nhidden == 1 && c.model.hidden[0] == 8, "list form (8)");
    is_ok(cfg_load(&c, NULL, "train.batch=16", "optim.lr=0.01", "train.epochs=1", NULL),
          "no file: required keys from --set");
    tap_ok(c.train.batch == 16 && c.optim.lr == 0.01 && c.train.epochs == 1 && !c.source[0],
           "values from --set alone");
    cfg_refused(cfg_load(&c, NULL, "train.batch=16", NULL), "no file and missing lr",
                "configuration: missing required key 'optim.lr'", NULL, NULL);

    cfg_refused(cfg_load(&c, p, "train.batch=abc", NULL), "--set wrong type",
                "--set train.batch=abc: key 'train.batch': found a string, expected an integer",
                NULL, NULL);
    cfg_refused(cfg_load(&c, p, "train.batch=2.5", NULL), "--set float for integer",
                "--set train.batch=2.5: key 'train.batch': found a float (2.5)", NULL, NULL);
    cfg_refused(cfg_load(&c, p, "optim.lrr=0.1", NULL), "--set unknown key with did-you-mean",
                "--set optim.lrr=0.1: unknown key 'optim.lrr' (did you mean 'optim.lr'?)", NULL,
                NULL);
    cfg_refused(cfg_load(&c, p, "batch=3", NULL), "--set key without group",
                "unknown key 'batch' (did you mean 'train.batch'?)", NULL, NULL);
    cfg_refused(cfg_load(&c, p, "train.batch", NULL), "--set without '='",
                "--set train.batch: malformed override, expected KEY=VALUE", NULL, NULL);
    cfg_refused(cfg_load(&c, p, "=3", NULL), "--set with an empty key",
                "--set =3: malformed override", NULL, NULL);
    cfg_refused(cfg_load(&c, p, "optim.lr=-0.5", NULL), "--set out of range",
                "--set optim.lr=-0.5: key 'optim.lr': found -0.5, expected a number > 0", NULL,
                NULL);
    cfg_refused(cfg_load(&c, p, "optim.type=adam", NULL), "--set enum",
                "--set optim.type=adam: key 'optim.type': found \"adam\"", "did you mean \"adamw\"",
                NULL);
    cfg_refused(cfg_load(&c, p, "model.hidden=[512,256", NULL), "--set malformed array",
                "--set model.hidden=[512,256: key 'model.hidden': found a malformed array", NULL,
                NULL);
    cfg_refused(cfg_load(&c, p, "model.hidden=512", NULL), "--set scalar for array",
                "found an integer (512), expected an array of integers", NULL, NULL);
    cfg_refused(cfg_load(&c, p, "train.batch=1; train = 5", NULL),
                "--set smuggling a second setting",
                "--set train.batch=1; train = 5: key 'train.batch': found a string", NULL, NULL);
    cfg_refused(cfg_load(&c, p, "train.steps=", NULL), "--set empty value",
                "key 'train.steps': found nothing, expected an integer", NULL, NULL);
    cfg_refused(cfg_load(&c, p, "optim.type=\"adamw", NULL), "--set unterminated string",
                "found a malformed string", NULL, NULL);
    cfg_refused(cfg_load(&c, p, "data.kind=idx", NULL), "--set idx without paths",
                "missing required key 'data.images'", NULL, NULL);
    is_ok(cfg_load(&c, p, "data.kind=idx", "data.images=a.gz", "data.labels=b.gz", NULL),
          "--set idx with paths");
}

/* ------------------------------------------------------------------------------------ */
/* CNN and GPT keys                                                                     */

static void test_models(void) {
    ht_config c;
    const char *p = put_text("cnn0.cfg", BASE);
    is_ok(cfg_load(&c, p, "model.type=cnn", NULL), "model.type cnn with the default layers");
    const char *mnist[] = {
        "conv 5 32 pad=2", "relu",       "maxpool 2", "conv 5 64 pad=2", "relu", "maxpool 2",
        "flatten",         "linear 512", "relu",      "linear 10"};
    int ok = c.model.nlayers == 10;
    for (int i = 0; ok && i < 10; i++)
        ok &= strcmp(c.model.layers[i], mnist[i]) == 0;
    tap_ok(ok && c.model.ninput_shape == 0,
           "the default model.layers is the MNIST CNN; input shape from the data");
    tap_ok(c.model.n_layer == 4 && c.model.d_model == 128 && c.model.n_head == 4 &&
               c.model.context == 64 && c.model.dropout == 0 && c.train.eval_batches == 20 &&
               !c.data.path[0],
           "GPT defaults: L4 C128 H4 T64, dropout 0; eval_batches 20");

    /* a list of groups would read worse; a list of strings errors per element */
    const char *text = "model = {\n  type = \"cnn\";\n  layers = [\n    \"conv 3 8 stride=2\",\n"
                       "    \"relu\",\n    \"maxpool 2 stride=1\",\n    \"flatten\",\n"
                       "    \"linear 10\"\n  ];\n  input_shape = [3, 32, 32];\n};\n";
    p = with_base("cnn1.cfg", text);
    is_ok(cfg_load(&c, p, NULL), "a CNN layer list and input shape load");
    tap_ok(c.model.nlayers == 5 && strcmp(c.model.layers[2], "maxpool 2 stride=1") == 0 &&
               c.model.ninput_shape == 3 && c.model.input_shape[0] == 3,
           "5 layers kept as written; input [3, 32, 32]");

    const struct {
        const char *elem, *want;
    } bad[] = {
        {"\"conv 5\"", "expected \"conv K N [stride=S] [pad=P]\""},
        {"\"conv 5 32 pad=-1\"", "expected \"conv K N"},
        {"\"conv 5 32 padding=2\"", "expected \"conv K N"},
        {"\"maxpool 2 pad=1\"", "expected \"maxpool K [stride=S]\""},
        {"\"maxpol 2\"", "(did you mean \"maxpool\"?)"},
        {"\"relu 3\"", "expected \"relu\" (no arguments)"},
        {"\"linear\"", "expected \"linear N\""},
        {"\"linear 0\"", "expected \"linear N\""},
        {"\"\"", "expected a layer: conv, maxpool, avgpool, relu, gelu, flatten or linear"},
        {"5", "key 'model.layers[2]': found an integer (5), expected a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char t[512], full[1024], what[160];
        /* a list ( ), which libconfig lets hold mixed types, unlike an array [ ] */
        snprintf(t, sizeof t,
                 "model = {\n  layers = (\"flatten\",\n    \"relu\",\n    %s,\n"
                 "    \"linear 10\");\n};\n",
                 bad[i].elem);
        p = with_base("cnn2.cfg", t);
        snprintf(full, sizeof full, "%s%s", BASE, t);
        snprintf(what, sizeof what, "model.layers element %s: file:line of the element, %s",
                 bad[i].elem, bad[i].want);
        cfg_refused(cfg_load(&c, p, NULL), what, at(p, full, bad[i].elem), "key 'model.layers[2]'",
                    bad[i].want);
    }
    p = with_base("cnn4.cfg", "model = { type = \"cnn\"; layers = []; };\n");
    cfg_refused(cfg_load(&c, p, NULL), "cnn with no layers", "found no layers", NULL, NULL);
    p = with_base("cnn5.cfg", "model = { layers = \"relu\"; };\n");
    cfg_refused(cfg_load(&c, p, NULL), "model.layers as a string", "expected an array of strings",
                NULL, NULL);
    p = with_base("cnn6.cfg", "model = {\n input_shape = [28, 28];\n};\n");
    cfg_refused(cfg_load(&c, p, NULL), "input_shape of 2 values",
                "found 2 values, expected 3 ([C, H, W])", NULL, NULL);
    char many[4096] = "model = { layers = [";
    for (int i = 0; i < 33; i++)
        strcat(many, i ? ", \"relu\"" : "\"relu\"");
    strcat(many, "]; };\n");
    p = with_base("cnn7.cfg", many);
    cfg_refused(cfg_load(&c, p, NULL), "33 layers", "found 33 values, expected at most 32", NULL,
                NULL);
    p = put_text("cnn8.cfg", BASE);
    is_ok(cfg_load(&c, p, "model.layers=[\"conv 3 4\", \"relu\", \"flatten\", \"linear 2\"]", NULL),
          "--set model.layers=[...]");
    tap_ok(c.model.nlayers == 4 && strcmp(c.model.layers[0], "conv 3 4") == 0, "override kept");
    cfg_refused(cfg_load(&c, p, "model.layers=relu", NULL), "--set model.layers=relu",
                "--set model.layers=relu", "expected an array of strings", NULL);
    cfg_refused(cfg_load(&c, p, "model.layers=[\"conv 3\"]", NULL), "--set with a bad element",
                "--set model.layers=", "key 'model.layers[0]': found \"conv 3\"", NULL);

    /* GPT */
    text = "model = {\n  type = \"gpt\";\n  n_layer = 2;\n  d_model = 96;\n  n_head = 5;\n};\n"
           "data = { kind = \"text\"; path = \"in.txt\"; };\n";
    p = with_base("gpt1.cfg", text);
    char full[1024];
    snprintf(full, sizeof full, "%s%s", BASE, text);
    cfg_refused(cfg_load(&c, p, NULL), "n_head must divide d_model (file:line of n_head)",
                at(p, full, "n_head"),
                "key 'model.n_head': found 5, expected a divisor of model.d_model (96)", NULL);
    is_ok(cfg_load(&c, p, "model.n_head=6", "model.dropout=0.1", "model.context=256",
                   "train.eval_batches=4", NULL),
          "a GPT on text loads");
    tap_ok(!strcmp(c.model.type, "gpt") && c.model.n_head == 6 && c.model.dropout == 0.1 &&
               c.model.context == 256 && !strcmp(c.data.path, "in.txt") &&
               c.train.eval_batches == 4,
           "GPT keys and data.path kept");
    cfg_refused(cfg_load(&c, p, "model.dropout=1", NULL), "dropout 1",
                "key 'model.dropout': found 1", "expected a number >= 0 and < 1", NULL);
    cfg_refused(
        cfg_load(&c, p, "model.n_head=6", "data.kind=synthetic", NULL), "gpt needs text",
        "key 'data.kind': found \"synthetic\", expected \"text\" or \"tokens\" for model.type "
        "\"gpt\"",
        NULL, NULL);
    cfg_refused(cfg_load(&c, p, "model.n_head=6", "model.type=mlp", NULL), "text needs gpt",
                "key 'model.type': found \"mlp\", expected \"gpt\" for data.kind \"text\"", NULL,
                NULL);
    cfg_refused(cfg_load(&c, p, "model.n_head=6", "data.path=", NULL), "text needs data.path",
                "missing required key 'data.path'", NULL, NULL);
    cfg_refused(cfg_load(&c, p, "model.type=gtp", NULL), "a misspelt model type",
                "expected one of \"mlp\", \"cnn\", \"gpt\" (did you mean \"gpt\"?)", NULL, NULL);
    cfg_refused(cfg_load(&c, p, "model.n_heads=6", NULL), "a misspelt GPT key",
                "did you mean 'model.n_head'", NULL, NULL);
}

/* ------------------------------------------------------------------------------------ */

static char *read_all(FILE *f) {
    long n;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0) return NULL;
    rewind(f);
    char *s = calloc((size_t)n + 1, 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    return s;
}

static const char *const ALL_KEYS[] = {
    "model.type",        "model.hidden",       "model.activation",  "model.layers",
    "model.input_shape", "model.n_layer",      "model.d_model",     "model.n_head",
    "model.context",     "model.dropout",      "model.vocab",       "model.tie_embeddings",
    "model.init_from",   "data.kind",          "data.path",         "data.val_path",
    "data.images",       "data.labels",        "data.val_fraction", "data.samples",
    "data.features",     "data.classes",       "data.seed",         "data.shuffle",
    "train.batch",       "train.steps",        "train.epochs",      "train.seed",
    "train.eval_every",  "train.eval_batches", "optim.type",        "optim.lr",
    "optim.momentum",    "optim.nesterov",     "optim.beta1",       "optim.beta2",
    "optim.eps",         "optim.weight_decay", "optim.schedule",    "optim.warmup",
    "optim.step_size",   "optim.gamma",        "optim.min_lr",      "optim.clip",
    "device.select",     "device.cache",       "device.cache_dir",  "device.tuning",  "device.memory_mb",
    "log.metrics",       "log.tensorboard",    "log.progress",       "log.every",         "checkpoint.path",
    "checkpoint.every",  "cluster.shares",     "cluster.split",     "cluster.devices",
    "cluster.slowdown",  "cluster.slowdown_from", "cluster.allreduce", "cluster.overlap",
    "cluster.rebalance",
    "cluster.exclude_slow", "cluster.bucket_first_mb", "cluster.bucket_cap_mb", "cluster.profile",
    "sync.mode",         "sync.servers",       "sync.staleness",    "sync.group",
    "sync.deadline_ms",  "sync.global_every",  "sync.alpha",        "sync.period",
    "sync.threshold",    "sync.max_period",    "sync.similar",      "sync.interval",
    "sync.max_ahead",    "sync.log",           "pipe.schedule",     "pipe.stages",
    "pipe.micro_batches", "pipe.chunks",       "pipe.partition",    "pipe.boundaries",
    "pipe.recompute", "pipe.rebalance", "pipe.replicate", "pipe.stage_ranks", "cluster.hosts",
    "checkpoint.shards", "cluster.shard"};
#define NKEYS (int)(sizeof ALL_KEYS / sizeof ALL_KEYS[0])

static void test_schema_and_write(void) {
    FILE *f = tmpfile();
    ht_config_print_schema(f);
    char *s = read_all(f);
    fclose(f);
    int lines = 0, found = 0;
    for (char *p = s; p && *p; p++)
        lines += *p == '\n';
    for (int i = 0; s && i < NKEYS; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, "\n%s ", ALL_KEYS[i]);
        found += strstr(s, pat) != NULL;
    }
    tap_ok(found == NKEYS && lines == NKEYS + 1, "schema lists all %d keys, one line each", NKEYS);
    tap_ok(s && strstr(s, "(required)") && strstr(s, "\"sgd\"") && strstr(s, "[128]") &&
               strstr(s, "global batch size"),
           "schema shows defaults, required keys and docs");
    free(s);

    /* conf/README.md documents every key (found from this file's path in the tree) */
    char readme[HT_PATH_MAX];
    const char *me = __FILE__, *cut = strstr(me, "tests/unit/t_config.c");
    snprintf(readme, sizeof readme, "%.*sconf/README.md", cut ? (int)(cut - me) : 0, me);
    FILE *r = fopen(readme, "r");
    if (!r) {
        tap_skip("conf/README.md not found from __FILE__");
    } else {
        char *doc = read_all(r);
        fclose(r);
        int documented = 0;
        for (int i = 0; doc && i < NKEYS; i++) {
            char pat[64];
            snprintf(pat, sizeof pat, "`%s`", ALL_KEYS[i]);
            documented += strstr(doc, pat) != NULL;
            if (doc && !strstr(doc, pat)) tap_diag("conf/README.md lacks %s", pat);
        }
        tap_ok(documented == NKEYS, "conf/README.md documents every key");
        free(doc);
    }

    ht_config a, b;
    const char *p = put_text("rt.cfg", BASE);
    is_ok(cfg_load(&a, p, "model.hidden=[300, 7]", "optim.lr=0.30000000000000004",
                   "model.layers=[\"conv 3 4 pad=1\", \"maxpool 2 stride=1\"]",
                   "model.input_shape=[1, 2, 3]", "data.seed=9000000000",
                   "device.select=say \"hi\"\\", "optim.eps=3e-9", "train.epochs=0.3", NULL),
          "config for the round trip");
    char out[HT_PATH_MAX];
    snprintf(out, sizeof out, "%s/written.cfg", tfile_dir());
    f = fopen(out, "w");
    ht_config_write(f, &a);
    fclose(f);
    is_ok(cfg_load(&b, out, NULL), "written config loads");
    memcpy(b.source, a.source, sizeof b.source);
    tap_ok(memcmp(&a, &b, sizeof a) == 0, "written config reads back identical");
    test_write_changes();
}

/* ht_config_write_changes: an MLP job with settings of every kind reads back identical; a
 * GPT job keeps its own model keys (at their defaults too) and none of another family's,
 * and nothing else at its default. */
static void test_write_changes(void) {
    ht_config a, b;
    char out[HT_PATH_MAX];
    snprintf(out, sizeof out, "%s/changes.cfg", tfile_dir());
    is_ok(cfg_load(&a, put_text("ch.cfg", BASE), "model.hidden=[300, 7]",
                   "optim.lr=0.30000000000000004", "data.seed=9000000000",
                   "device.select=say \"hi\"\\", "optim.eps=3e-9", "pipe.boundaries=[2]",
                   "cluster.split=speed", "log.progress=none", NULL),
          "an MLP job for ht_config_write_changes");
    FILE *f = fopen(out, "w");
    int rc = ht_config_write_changes(f, &a);
    fclose(f);
    is_ok(rc == HT_OK && cfg_load(&b, out, NULL) == HT_OK ? HT_OK : HT_EINPUT, "the changes load");
    memcpy(b.source, a.source, sizeof b.source);
    tap_ok(memcmp(&a, &b, sizeof a) == 0, "the changes read back to the same job");
    f = fopen(out, "r");
    char *text = read_all(f);
    fclose(f);
    /* 12 keys by hand: model (type, hidden, activation), data.seed, train (batch, steps),
     * optim (lr, eps), device.select, log.progress, cluster.split, pipe.boundaries, and 8
     * group lines ("x = {", "};") for model, data, train, optim, device, log, cluster, pipe */
    int lines = 0;
    for (const char *c = text; c && *c; c++)
        lines += *c == '\n';
    tap_ok(text && lines == 12 + 2 * 8 && !strstr(text, "layers") && !strstr(text, "n_layer") &&
               !strstr(text, "momentum") && !strstr(text, "sync"),
           "only the changes, the model's own keys and the required ones (%d lines)", lines);
    if (lines != 28 && text) tap_diag("%s", text);
    free(text);

    is_ok(cfg_load(&a, put_text("gpt.cfg", BASE), "model.type=gpt", "model.hidden=[300]",
                   "model.d_model=64", "data.kind=text", "data.path=x.txt", "train.steps=1", NULL),
          "a GPT job with an MLP width set");
    f = fopen(out, "w");
    rc = ht_config_write_changes(f, &a);
    fclose(f);
    f = fopen(out, "r");
    text = read_all(f);
    fclose(f);
    tap_ok(rc == HT_OK && text && strstr(text, "    n_layer = 4;\n") && strstr(text, "    d_model = 64;\n") &&
               strstr(text, "    dropout = 0;\n") && !strstr(text, "hidden") && !strstr(text, "activation") &&
               !strstr(text, "layers = ") && strstr(text, "    path = \"x.txt\";\n") &&
               strstr(text, "    steps = 1;\n"),
           "a GPT job: its own keys at their defaults too, no MLP or CNN key; train.steps = 1 kept");
    free(text);
}

int main(void) {
    tfile_init("t_config");
    test_full_file();
    test_defaults();
    test_numbers();
    test_lost_numbers();
    test_file_errors();
    test_include();
    test_overrides();
    test_models();
    test_schema_and_write();
    tfile_done();
    return tap_done();
}
