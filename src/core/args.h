/* Command lines: every tool (hettrain and its subcommands, hetsim, hetprof) describes its
 * options in a table (src/cli/opts.c) and reads argv through ht_opts_parse, so that every
 * number given on any command line goes through the same checks: the whole argument,
 * decimal, no blanks, no hex, no inf or nan, within the option's bounds (a number too large
 * for its type is out of bounds, never wrapped or clamped). Nothing here exits: a mistake
 * is HT_EINPUT "OPT VALUE: expected ..." (core/err.h), so that the parsers can be fuzzed. */
#ifndef HT_CORE_ARGS_H
#define HT_CORE_ARGS_H

#include <stddef.h>

typedef enum {
    HT_OPT_FLAG, /* int, set to 1 */
    HT_OPT_STR,  /* const char *: the argument itself */
    HT_OPT_STRS, /* const char *[max] and an int count at off_count: each use adds one */
    HT_OPT_INT,  /* long long in [lo, hi] */
    HT_OPT_NUM,  /* double in [lo, hi] ((lo, hi] with lo_open) */
    HT_OPT_NUMS, /* comma-separated, double[max] and an int count at off_count; each as NUM,
                    and whole numbers with ints */
} ht_optkind;

typedef struct ht_opt {
    const char *name;  /* "--stages"; NULL ends the table */
    const char *alias; /* "-c", or NULL */
    ht_optkind kind;
    double lo, hi;
    int lo_open, ints, eq; /* eq: --name=VALUE is accepted too */
    const char *note;      /* after the expectation: "(0 = greedy)", or NULL */
    size_t off, off_count;
    int max;
} ht_opt;

/* argv[1..argc) into out by the table t. HT_OK, or HT_EINPUT with the message; *bad (when
 * not NULL) is then the index of the argument at fault, and *unknown is 1 when no option
 * has that name (the caller prints its usage). */
int ht_opts_parse(const ht_opt *t, int argc, char **argv, void *out, int *bad, int *unknown);

/* The readers the table uses, for the few numbers read elsewhere (the environment). */
int ht_arg_int(const char *opt, const char *v, long long lo, long long hi, long long *out);
int ht_arg_num(const char *opt, const char *v, double lo, int lo_open, double hi,
               const char *note, double *out);
/* v as comma-separated numbers, at most max; returns HT_OK and the count in *n. */
int ht_arg_nums(const char *opt, const char *v, double lo, int lo_open, double hi, int ints,
                int max, double *out, int *n);

#endif
