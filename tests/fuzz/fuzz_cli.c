/* libFuzzer harness: every tool's command line (hettrain, hettrain generate / schedule /
 * plan, hetsim, hetprof), read through the tables the tools use (src/cli/opts.c, parsed by
 * src/core/args.c). The first byte picks the tool; the rest, split at NUL bytes, is argv.
 * Every input must end in HT_OK or HT_EINPUT with a message, and when it is accepted every
 * number stored is one the option allows: within its bounds, finite, whole for an integer
 * option, a list no longer than its room (checked here from the table, independently of the
 * parser), and every string is an argument of argv. */
#include <math.h>

#include "cli/opts.h"
#include "fuzz.h"

#define MAX_ARGS 64

typedef struct {
    const ht_opt *table;
    size_t size;
    void (*init)(void *);
} tool;

static void init_train(void *a) { ht_args_train_init(a); }
static void init_generate(void *a) { ht_args_generate_init(a); }
static void init_schedule(void *a) { ht_args_schedule_init(a); }
static void init_sim(void *a) { ht_args_sim_init(a); }
static void init_prof(void *a) { ht_args_prof_init(a); }

static const tool tools[] = {
    {ht_opts_train, sizeof(ht_args_train), init_train},
    {ht_opts_generate, sizeof(ht_args_generate), init_generate},
    {ht_opts_schedule, sizeof(ht_args_schedule), init_schedule},
    {ht_opts_sim, sizeof(ht_args_sim), init_sim},
    {ht_opts_plan, sizeof(ht_args_sim), init_sim},
    {ht_opts_prof, sizeof(ht_args_prof), init_prof},
};

static int from_argv(const char *s, int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (s >= argv[i] && s <= argv[i] + strlen(argv[i])) return 1;
    return 0;
}

static int num_ok(const ht_opt *o, double v, double dflt) {
    if (v == dflt) return 1; /* not given */
    return isfinite(v) && (o->lo_open ? v > o->lo : v >= o->lo) && v <= o->hi &&
           (!o->ints || v == floor(v));
}

/* Every field of out holds what its option allows (or its default, from dflt). */
static void check(const ht_opt *t, const char *out, const char *dflt, int argc, char **argv) {
    for (const ht_opt *o = t; o->name; o++) {
        const char *f = out + o->off, *d = dflt + o->off;
        int n = o->off_count ? *(const int *)(out + o->off_count) : 0, bad = 0;
        switch (o->kind) {
        case HT_OPT_INT: {
            long long v = *(const long long *)f, dv = *(const long long *)d;
            bad = v != dv && !((double)v >= o->lo && (double)v <= o->hi);
            break;
        }
        case HT_OPT_NUM:
            bad = !num_ok(o, *(const double *)f, *(const double *)d);
            break;
        case HT_OPT_NUMS:
            bad = n < 0 || n > o->max;
            for (int i = 0; i < n && !bad; i++)
                bad = !num_ok(o, ((const double *)f)[i], NAN);
            break;
        case HT_OPT_STR: {
            const char *s = *(const char *const *)f;
            bad = s && !from_argv(s, argc, argv);
            break;
        }
        case HT_OPT_STRS:
            bad = n < 0 || n > o->max;
            for (int i = 0; i < n && !bad; i++)
                bad = !from_argv(((const char *const *)f)[i], argc, argv);
            break;
        case HT_OPT_FLAG:
            bad = *(const int *)f != 0 && *(const int *)f != 1;
            break;
        }
        if (bad) {
            fprintf(stderr, "fuzz_cli: %s holds a value its table does not allow\n", o->name);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_quiet();
    if (!size) return 0;
    const tool *tl = &tools[data[0] % (sizeof tools / sizeof tools[0])];
    char *buf = malloc(size); /* the rest, NUL-terminated pieces */
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = "tool";
    for (char *p = buf; p < buf + size - 1 && argc < MAX_ARGS; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;
    char *out = malloc(tl->size), *dflt = malloc(tl->size);
    tl->init(out), tl->init(dflt);
    int bad = -1, unknown = -1;
    int rc = ht_opts_parse(tl->table, argc, argv, out, &bad, &unknown);
    if (rc != HT_OK && (rc != HT_EINPUT || !ht_errmsg()[0] || bad < 1 || bad >= argc))
        abort();
    if (rc == HT_OK) check(tl->table, out, dflt, argc, argv);
    ht_error_clear();
    free(out), free(dflt), free(buf);
    return 0;
}
