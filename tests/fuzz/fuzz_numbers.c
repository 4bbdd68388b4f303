/* libFuzzer harness: numbers in every position of a job file. The input drives a generator
 * that picks numeric keys of the schema (integers, 64-bit seeds, floats, int and float arrays),
 * a value for each (small, at the 32- and 64-bit edges, past 64 bits, tiny and huge floats),
 * how it is written (decimal, +, leading zeros, L, LL, hex, exponents) and where (the key's
 * line, the line after "=", arrays and lists over several lines, an @included file, a --set
 * override), with comments holding other numbers in between. The generator knows each value
 * it wrote, so the oracle is independent of the code under test: a value libconfig cannot
 * hold or outside its key's range must be refused (exit 2 with a message), and when the file
 * loads every key holds exactly the value written. */
#include <float.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>

#include "config/config.h"
#include "config/schema.h"
#include "fuzz.h"

typedef __int128 i128;

typedef struct {
    const uint8_t *p;
    size_t n;
} src;

static unsigned take(src *s, unsigned mod) {
    if (!s->n) return 0;
    unsigned v = *s->p++;
    s->n--;
    return mod ? v % mod : v;
}

static void put_i128(char *buf, size_t n, i128 v) {
    char tmp[64];
    int k = 0, neg = v < 0;
    unsigned __int128 u = neg ? -(unsigned __int128)v : (unsigned __int128)v;
    do
        tmp[k++] = (char)('0' + (int)(u % 10));
    while ((u /= 10) && k < 60);
    size_t j = 0;
    if (neg && j + 1 < n) buf[j++] = '-';
    while (k && j + 1 < n)
        buf[j++] = tmp[--k];
    buf[j] = 0;
}

static void put_hex(char *buf, size_t n, i128 v, int upper) {
    unsigned __int128 u = (unsigned __int128)v;
    char tmp[64];
    int k = 0;
    do
        tmp[k++] = "0123456789abcdef"[(int)(u & 15)];
    while ((u >>= 4) && k < 60);
    size_t j = (size_t)snprintf(buf, n, "0%c", upper ? 'X' : 'x');
    while (k && j + 1 < n)
        buf[j++] = tmp[--k];
    buf[j] = 0;
}

/* One value as written, and what it must be read as. */
typedef struct {
    char text[160];
    int is_float; /* written as a float literal */
    int holds;    /* libconfig holds exactly the value written */
    i128 iv;      /* the integer written */
    double dv;    /* the number written (float literals: strtod, an independent reader) */
} lit;

static i128 pick_int(src *s) {
    static const i128 edges[] = {0,
                                 1,
                                 -1,
                                 (i128)INT_MAX,
                                 (i128)INT_MAX + 1,
                                 (i128)INT_MIN,
                                 (i128)INT_MIN - 1,
                                 (i128)1 << 32,
                                 ((i128)1 << 32) + 16,
                                 (i128)LLONG_MAX,
                                 (i128)LLONG_MAX + 1,
                                 (i128)LLONG_MIN,
                                 (i128)LLONG_MIN - 1,
                                 (i128)1 << 64,
                                 ((i128)1 << 64) + 1,
                                 -((i128)1 << 64),
                                 ((i128)1 << 100) + 7};
    unsigned c = take(s, 3);
    if (c == 0) return (i128)take(s, 0) - 3;
    if (c == 1) return edges[take(s, sizeof edges / sizeof edges[0])];
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = u << 8 | take(s, 0);
    return (i128)(int64_t)u * ((i128)1 << take(s, 8));
}

/* An integer literal; set: the whole --set value (hettrain adds L to one past 32 bits). */
static void int_literal(src *s, lit *l, int set) {
    i128 v = pick_int(s);
    unsigned form = take(s, 8);
    if (v < 0 && form >= 3) form = 0; /* +, leading zeros and hex: non-negative only */
    char num[64];
    l->iv = v, l->dv = (double)v, l->is_float = 0;
    int dec = form <= 4, L = form == 1 || form == 2 || form == 6 || form == 7;
    if (dec) put_i128(num, sizeof num, v);
    else put_hex(num, sizeof num, v, form == 7);
    snprintf(l->text, sizeof l->text, "%s%s%s%s", form == 3 ? "+" : form == 4 ? "000" : "", num,
             L ? "L" : "", form == 2 || form == 7 ? "L" : "");
    int in32 = v >= INT_MIN && v <= INT_MAX, in64 = v >= LLONG_MIN && v <= LLONG_MAX;
    if (dec && !L) l->holds = set ? in64 : in32;
    else if (dec) l->holds = in64;
    else l->holds = v >= 0 && (L ? v <= LLONG_MAX : v <= INT_MAX);
}

static void float_literal(src *s, lit *l) {
    char *t = l->text;
    size_t k = 0, cap = sizeof l->text;
    if (take(s, 4) == 0) t[k++] = '-';
    unsigned a = take(s, 24), b = take(s, 24);
    for (unsigned i = 0; i < a && k < 60; i++)
        t[k++] = (char)('0' + take(s, 10));
    t[k++] = '.';
    for (unsigned i = 0; i < b && k < 110; i++)
        t[k++] = (char)('0' + take(s, 10));
    if (take(s, 2)) {
        int e = (int)take(s, 0) * 4 - 512; /* -512 .. 508: past both ends of a double */
        k += (size_t)snprintf(t + k, cap - k, "e%s%d", e >= 0 && take(s, 2) ? "+" : "", e);
    }
    t[k] = 0;
    if (a == 0 && b == 0) { /* "." alone, or "-.": libconfig reads 0; keep it plain */
        snprintf(t, cap, "0.0");
    }
    l->is_float = 1;
    l->dv = strtod(t, NULL);
    int nonzero = strcspn(t, "123456789") < strcspn(t, "eE");
    l->holds = !isinf(l->dv) && !(l->dv == 0 && nonzero);
}

/* Whether key k accepts value l (one element for arrays), as its schema row says. */
static int in_range(const ht_ckey *k, const lit *l) {
    int ints = k->kind == HT_CK_INT || k->kind == HT_CK_U64 || k->kind == HT_CK_INTS;
    if (!l->holds) return 0;
    if (ints && l->is_float) return 0;
    double v = l->dv;
    if (ints) {
        if (k->kind == HT_CK_U64 ? l->iv < 0 : (l->iv < INT_MIN || l->iv > INT_MAX)) return 0;
        v = (double)l->iv;
    } else if (v != 0 && !(fabs(v) >= FLT_MIN && fabs(v) <= FLT_MAX)) {
        return 0; /* the devices compute in float */
    }
    if ((k->flags & HT_CF_GE) && !(v >= k->min)) return 0;
    if ((k->flags & HT_CF_GT) && !(v > k->min)) return 0;
    if ((k->flags & HT_CF_LE) && !(v <= k->max)) return 0;
    if ((k->flags & HT_CF_LT) && !(v < k->max)) return 0;
    return 1;
}

/* The value k holds in cfg (element i) equals what was written. */
static int holds_written(const ht_config *cfg, const ht_ckey *k, int i, const lit *l) {
    const char *p = (const char *)cfg + k->off;
    switch (k->kind) {
    case HT_CK_INT:
        return *(const int *)p == l->iv;
    case HT_CK_U64:
        return *(const uint64_t *)p == (uint64_t)l->iv;
    case HT_CK_INTS:
        return ((const int *)p)[i] == l->iv;
    case HT_CK_NUM:
        return *(const double *)p == (l->is_float ? l->dv : (double)l->iv);
    case HT_CK_NUMS:
        return ((const double *)p)[i] == (l->is_float ? l->dv : (double)l->iv);
    default:
        return 1;
    }
}

#define MAX_PICK 6
#define MAX_ELEM 4

typedef struct {
    int ki, n, set;
    lit v[MAX_ELEM];
} pick;

static int numeric(const ht_ckey *k) {
    return k->kind == HT_CK_INT || k->kind == HT_CK_U64 || k->kind == HT_CK_NUM ||
           k->kind == HT_CK_INTS || k->kind == HT_CK_NUMS;
}

/* Appends to buf the text of one setting, laid out as the input says. */
static size_t write_setting(char *buf, size_t cap, size_t len, src *s, const pick *pk) {
    const ht_ckey *k = &ht_config_keys[pk->ki];
    const char *leaf = strchr(k->path, '.') + 1;
    static const char *const gaps[] = {" ", "\n", "\n\n   ", " # 4294967312\n",
                                       " /* 99999999999999999999L 0xFFFFFFFF */ ", "\n// 1e999\n"};
    const char *g1 = gaps[take(s, 6)], *g2 = gaps[take(s, 6)];
    int array = k->kind == HT_CK_INTS || k->kind == HT_CK_NUMS;
    int list = array && take(s, 2);
    len += (size_t)snprintf(buf + len, cap - len, "  %s%s=%s", leaf, take(s, 2) ? "\n" : " ", g1);
    if (array) len += (size_t)snprintf(buf + len, cap - len, "%c", list ? '(' : '[');
    for (int i = 0; i < pk->n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s%s", i ? "," : "", i ? gaps[take(s, 6)] : "",
                                pk->v[i].text);
    if (array && len < cap) len += (size_t)snprintf(buf + len, cap - len, "%c", list ? ')' : ']');
    if (len < cap) len += (size_t)snprintf(buf + len, cap - len, "%s;\n", g2);
    return len < cap ? len : cap - 1;
}

static ht_config g_cfg;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_quiet();
    src s = {data, size};
    pick pk[MAX_PICK];
    int np = 0, nkeys = 0, idx[128];
    for (int i = 0; i < ht_config_nkeys; i++)
        if (numeric(&ht_config_keys[i])) idx[nkeys++] = i;
    int want = 1 + (int)take(&s, MAX_PICK);
    while (np < want && s.n) {
        int ki = idx[take(&s, 0) % nkeys], dup = 0;
        for (int j = 0; j < np; j++)
            dup |= pk[j].ki == ki;
        if (dup) continue;
        const ht_ckey *k = &ht_config_keys[ki];
        int array = k->kind == HT_CK_INTS || k->kind == HT_CK_NUMS;
        int ints = k->kind != HT_CK_NUM && k->kind != HT_CK_NUMS;
        pick *p = &pk[np++];
        p->ki = ki, p->n = array ? 1 + (int)take(&s, MAX_ELEM) : 1;
        p->set = !array && take(&s, 4) == 0;
        for (int i = 0; i < p->n; i++) {
            if (ints || take(&s, 2)) int_literal(&s, &p->v[i], p->set);
            else float_literal(&s, &p->v[i]);
        }
    }
    /* the job file: each group once, the picked keys in it, and what a job needs */
    static char text[16384], inc[8192], sets[MAX_PICK][200];
    const char *setv[MAX_PICK];
    int nset = 0, include_group = (int)take(&s, 12); /* >= the groups: none included */
    size_t len = 0, ilen = 0;
    int have_batch = 0, have_len = 0, have_lr = 0;
    for (int g = 0; ht_config_groups[g]; g++) {
        char *out = g == include_group ? inc : text;
        size_t *olen = g == include_group ? &ilen : &len, cap = g == include_group ? sizeof inc : sizeof text;
        const char *gname = ht_config_groups[g];
        *olen += (size_t)snprintf(out + *olen, cap - *olen, "%s = {\n", gname);
        for (int j = 0; j < np; j++) {
            const ht_ckey *k = &ht_config_keys[pk[j].ki];
            if (strncmp(k->path, gname, strlen(gname)) || k->path[strlen(gname)] != '.') continue;
            have_batch |= !strcmp(k->path, "train.batch");
            have_len |= !strcmp(k->path, "train.steps") || !strcmp(k->path, "train.epochs");
            have_lr |= !strcmp(k->path, "optim.lr");
            if (pk[j].set) {
                snprintf(sets[nset], sizeof sets[nset], "%s=%s", k->path, pk[j].v[0].text);
                setv[nset] = sets[nset];
                nset++;
            } else {
                *olen = write_setting(out, cap, *olen, &s, &pk[j]);
            }
        }
        if (!strcmp(gname, "train") && !have_batch)
            *olen += (size_t)snprintf(out + *olen, cap - *olen, "  batch = 16;\n");
        if (!strcmp(gname, "train") && !have_len)
            *olen += (size_t)snprintf(out + *olen, cap - *olen, "  steps = 1;\n");
        if (!strcmp(gname, "optim") && !have_lr)
            *olen += (size_t)snprintf(out + *olen, cap - *olen, "  lr = 0.1;\n");
        *olen += (size_t)snprintf(out + *olen, cap - *olen, "};\n");
    }
    if (ilen) { /* beside the job file, named relative to it */
        char name[256];
        snprintf(name, sizeof name, "%s", fuzz_file("inc.cfg", inc, ilen));
        len += (size_t)snprintf(text + len, sizeof text - len, "@include \"%s\"\n", basename(name));
    }
    const char *path = fuzz_file("cfg", text, len);
    int rc = ht_config_load(&g_cfg, path, setv, nset);
    if (rc != HT_OK && (rc != HT_EINPUT || !ht_errmsg()[0])) abort();
    for (int j = 0; j < np; j++) {
        const ht_ckey *k = &ht_config_keys[pk[j].ki];
        for (int i = 0; i < pk[j].n; i++) {
            char num[64];
            if (rc == HT_OK && !in_range(k, &pk[j].v[i])) {
                put_i128(num, sizeof num, pk[j].v[i].iv);
                fprintf(stderr, "fuzz_numbers: %s = %s (%s) was accepted; libconfig cannot hold "
                        "it or it is out of range\n%s", k->path, pk[j].v[i].text, num, text);
                abort();
            }
            if (rc == HT_OK && !holds_written(&g_cfg, k, i, &pk[j].v[i])) {
                fprintf(stderr, "fuzz_numbers: %s[%d] = %s loaded as another value\n%s", k->path, i,
                        pk[j].v[i].text, text);
                abort();
            }
        }
    }
    ht_error_clear();
    return 0;
}
