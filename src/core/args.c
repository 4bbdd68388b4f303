/* Command-line options by table, and the one reader of numbers on a command line (args.h). */
#include "core/args.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

/* [-]digits, nothing else: the length of the digits, 0 when v is not that. */
static size_t int_syntax(const char *v) {
    const char *p = v + (*v == '-');
    size_t n = strspn(p, "0123456789");
    return n && !p[n] ? n : 0;
}

/* [-]digits[.digits][e[-+]digits] (or .digits): 1 when v is a plain decimal number. */
static int num_syntax(const char *v) {
    const char *p = v + (*v == '-');
    size_t a = strspn(p, "0123456789"), b = 0;
    p += a;
    if (*p == '.') b = strspn(++p, "0123456789"), p += b;
    if (!a && !b) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        p += *p == '-' || *p == '+';
        size_t e = strspn(p, "0123456789");
        if (!e) return 0;
        p += e;
    }
    return !*p;
}

/* The argument as quoted in a message: at most 64 characters. */
#define ARG "%.64s%s"
#define ARGV(v) (v), strlen(v) > 64 ? "..." : ""

int ht_arg_int(const char *opt, const char *v, long long lo, long long hi, long long *out) {
    errno = 0;
    char *end;
    long long x = int_syntax(v) ? strtoll(v, &end, 10) : 0;
    if (!int_syntax(v) || errno == ERANGE || x < lo || x > hi)
        return ht_error(HT_EINPUT, "%s " ARG ": expected an integer in [%lld, %lld]", opt, ARGV(v),
                        lo, hi);
    *out = x;
    return HT_OK;
}

static void expect_num(char *buf, size_t n, double lo, int lo_open, double hi, int ints,
                       const char *note) {
    snprintf(buf, n, "%s %s %.15g and <= %.15g%s%s", ints ? "an integer" : "a number",
             lo_open ? ">" : ">=", lo, hi, note ? " " : "", note ? note : "");
}

/* One number of v (ending at a NUL or a comma, *endp after it), checked. */
static int one_num(const char *opt, const char *whole, const char *v, size_t len, double lo,
                   int lo_open, double hi, int ints, const char *note, double *out) {
    char tok[64], expect[160];
    int ok = len > 0 && len < sizeof tok;
    if (ok) {
        memcpy(tok, v, len);
        tok[len] = 0;
        ok = num_syntax(tok);
    }
    double x = 0;
    if (ok) {
        errno = 0;
        x = strtod(tok, NULL);
        int nonzero = strcspn(tok, "123456789") < strcspn(tok, "eE");
        /* overflow (inf) or underflow (0 for a number that is not) is out of range */
        ok = isfinite(x) && !(x == 0 && nonzero) && (lo_open ? x > lo : x >= lo) && x <= hi &&
             (!ints || x == floor(x));
    }
    if (ok) {
        *out = x;
        return HT_OK;
    }
    expect_num(expect, sizeof expect, lo, lo_open, hi, ints, note);
    return ht_error(HT_EINPUT, "%s " ARG ": expected %s", opt, ARGV(whole), expect);
}

int ht_arg_num(const char *opt, const char *v, double lo, int lo_open, double hi,
               const char *note, double *out) {
    return one_num(opt, v, v, strlen(v), lo, lo_open, hi, 0, note, out);
}

int ht_arg_nums(const char *opt, const char *v, double lo, int lo_open, double hi, int ints,
                int max, double *out, int *n) {
    *n = 0;
    for (const char *p = v;;) {
        size_t len = strcspn(p, ",");
        if (*n == max)
            return ht_error(HT_EINPUT, "%s " ARG ": expected at most %d comma-separated %s",
                            opt, ARGV(v), max, ints ? "integers" : "numbers");
        int rc = one_num(opt, v, p, len, lo, lo_open, hi, ints, NULL, &out[*n]);
        if (rc != HT_OK) return rc;
        ++*n;
        if (!p[len]) return HT_OK;
        p += len + 1;
    }
}

static int matches(const ht_opt *o, const char *a, const char **inline_value) {
    *inline_value = NULL;
    if (!strcmp(a, o->name) || (o->alias && !strcmp(a, o->alias))) return 1;
    size_t n = strlen(o->name);
    if (o->eq && !strncmp(a, o->name, n) && a[n] == '=') {
        *inline_value = a + n + 1;
        return 1;
    }
    return 0;
}

/* One option's value v into out. */
static int store(const ht_opt *o, const char *v, void *out) {
    char *field = (char *)out + o->off;
    int *count = (int *)((char *)out + o->off_count);
    switch (o->kind) {
    case HT_OPT_STR:
        *(const char **)field = v;
        return HT_OK;
    case HT_OPT_STRS:
        if (*count == o->max)
            return ht_error(HT_EINPUT, "%s: at most %d of these options", o->name, o->max);
        ((const char **)field)[(*count)++] = v;
        return HT_OK;
    case HT_OPT_INT: /* bounds past 2^63 as a double would not convert */
        return ht_arg_int(o->name, v, o->lo <= -0x1p63 ? LLONG_MIN : (long long)o->lo,
                          o->hi >= 0x1p63 ? LLONG_MAX : (long long)o->hi, (long long *)field);
    case HT_OPT_NUM:
        return ht_arg_num(o->name, v, o->lo, o->lo_open, o->hi, o->note, (double *)field);
    case HT_OPT_NUMS:
        return ht_arg_nums(o->name, v, o->lo, o->lo_open, o->hi, o->ints, o->max,
                           (double *)field, count);
    case HT_OPT_FLAG:
        break;
    }
    return HT_OK;
}

int ht_opts_parse(const ht_opt *t, int argc, char **argv, void *out, int *bad, int *unknown) {
    if (unknown) *unknown = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        const ht_opt *o = t;
        while (o->name && !matches(o, a, &v))
            o++;
        if (bad) *bad = i;
        if (!o->name) {
            if (unknown) *unknown = 1;
            return ht_error(HT_EINPUT, "unknown argument '" ARG "'", ARGV(a));
        }
        if (o->kind == HT_OPT_FLAG) {
            if (v) return ht_error(HT_EINPUT, "option %s takes no value", o->name);
            *(int *)((char *)out + o->off) = 1;
            continue;
        }
        if (!v) {
            if (i + 1 >= argc) return ht_error(HT_EINPUT, "option %s needs a value", a);
            v = argv[++i];
        }
        int rc = store(o, v, out);
        if (rc != HT_OK) return rc;
    }
    return HT_OK;
}
