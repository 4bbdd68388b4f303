/* Numeric literals of libconfig files, as libconfig 1.5's scanner (lib/scanner.l) reads
 * them (see intlit.h). Its patterns, longest match first:
 *   integer [-+]?[0-9]+          -> int = (int)strtol      integer64 ...L(L)? -> strtoll
 *   hex 0[Xx][0-9A-Fa-f]+        -> int = (int)strtoul     hex64 ...L(L)?     -> strtoull
 *   float [-+]?[0-9]*\.[0-9]*([eE][-+]?[0-9]+)? | [-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+
 * and around them names [A-Za-z*][-A-Za-z0-9_*]*, strings, # // and block comments, and
 * "@include" at the start of a line. */
#include "core/intlit.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/path.h"

#define MAX_DEPTH 10 /* libconfig's own include depth limit */

static size_t run(const char *p, const char *e, int hex) {
    size_t n = 0;
    while (p + n < e && (hex ? isxdigit((unsigned char)p[n]) : isdigit((unsigned char)p[n])))
        n++;
    return n;
}

/* An optional exponent [eE][-+]?[0-9]+ at p: its length, 0 when there is none. */
static size_t exponent(const char *p, const char *e) {
    if (p >= e || (*p != 'e' && *p != 'E')) return 0;
    size_t s = p + 1 < e && (p[1] == '-' || p[1] == '+'), d = run(p + 1 + s, e, 0);
    return d ? 1 + s + d : 0;
}

static size_t suffix_l(const char *p, const char *e) {
    size_t n = 0;
    while (n < 2 && p + n < e && p[n] == 'L')
        n++;
    return n;
}

/* The longest number token at p, its kind in *kind and hex-ness in *hex; 0 when none. */
static size_t match_number(const char *p, const char *e, int *kind, int *hex) {
    size_t best = 0, n;
    *hex = 0;
    if (p + 2 < e && p[0] == '0' && (p[1] == 'x' || p[1] == 'X') && (n = run(p + 2, e, 1))) {
        size_t l = suffix_l(p + 2 + n, e);
        best = 2 + n + l, *kind = l ? HT_LIT_INT64 : HT_LIT_INT, *hex = 1;
    }
    const char *q = p + (p < e && (*p == '-' || *p == '+'));
    size_t d = run(q, e, 0), sign = (size_t)(q - p);
    if (d) {
        size_t l = suffix_l(q + d, e);
        if (sign + d + l > best) best = sign + d + l, *kind = l ? HT_LIT_INT64 : HT_LIT_INT, *hex = 0;
    }
    const char *r = q + d;
    if (r < e && *r == '.') { /* [0-9]*\.[0-9]*(exp)? */
        r++;
        r += run(r, e, 0);
        r += exponent(r, e);
    } else if (d) { /* [0-9]+(exp) */
        size_t x = exponent(r, e);
        r = x ? r + x : p;
    } else {
        r = p;
    }
    if ((size_t)(r - p) > best) best = (size_t)(r - p), *kind = HT_LIT_FLOAT, *hex = 0;
    return best;
}

static void add_literal(ht_numlits *L, const char *p, size_t n, int kind, int hex, int fi,
                        int line) {
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 32;
        L->v = ht_xrealloc(L->v, (size_t)L->cap * sizeof *L->v);
    }
    ht_numlit *l = &L->v[L->n++];
    memset(l, 0, sizeof *l);
    l->file = L->files[fi], l->line = line, l->kind = kind;
    if (n < sizeof l->text) snprintf(l->text, sizeof l->text, "%.*s", (int)n, p);
    else snprintf(l->text, sizeof l->text, "%.*s...", (int)sizeof l->text - 4, p);
    char *t = ht_xmalloc(n + 1);
    memcpy(t, p, n);
    t[n] = 0;
    errno = 0;
    if (kind == HT_LIT_FLOAT) {
        l->fval = strtod(t, NULL);
        int nonzero = 0; /* a digit 1-9 before the exponent: not 0 as written */
        for (const char *c = t; *c && *c != 'e' && *c != 'E'; c++)
            nonzero |= *c >= '1' && *c <= '9';
        l->lost = isinf(l->fval) || (l->fval == 0 && nonzero);
    } else if (hex) {
        unsigned long long u = strtoull(t, NULL, 16);
        int range = errno == ERANGE;
        l->beyond64 = range || u > (unsigned long long)LLONG_MAX;
        l->tval = l->beyond64 ? 0 : (long long)u;
        if (kind == HT_LIT_INT) l->ival = (int32_t)(uint32_t)u, l->lost = range || u > INT_MAX;
        else l->ival = (long long)(int64_t)u, l->lost = range || u > (unsigned long long)LLONG_MAX;
    } else {
        long long v = strtoll(t, NULL, 10);
        int range = errno == ERANGE;
        l->beyond64 = range;
        l->tval = v;
        if (kind == HT_LIT_INT)
            l->ival = (int32_t)(uint32_t)(uint64_t)v, l->lost = range || v > INT_MAX || v < INT_MIN;
        else l->ival = v, l->lost = range;
    }
    free(t);
}

static int add_file(ht_numlits *L, const char *name) {
    L->files = ht_xrealloc(L->files, (size_t)(L->nfiles + 1) * sizeof *L->files);
    size_t n = strlen(name) + 1;
    L->files[L->nfiles] = ht_xmalloc(n);
    memcpy(L->files[L->nfiles], name, n);
    return L->nfiles++;
}

static int lex_file(ht_numlits *L, const char *path, const char *incdir, int depth);

/* At p (after blanks at the start of a line): @include "name". Lexes the file, returns the
 * position after the closing quote, or p when this is no include. */
static const char *include(ht_numlits *L, const char *p, const char *e, const char *incdir,
                           int depth, int *rc) {
    static const char kw[] = "@include";
    size_t k = sizeof kw - 1;
    if ((size_t)(e - p) <= k || memcmp(p, kw, k) != 0 || (p[k] != ' ' && p[k] != '\t')) return p;
    const char *q = p + k;
    while (q < e && (*q == ' ' || *q == '\t'))
        q++;
    if (q >= e || *q != '"') return p;
    const char *name = ++q;
    while (q < e && *q != '"')
        q++;
    if (q >= e) return p;
    size_t n = (size_t)(q - name), dn = incdir && *incdir ? strlen(incdir) + 1 : 0;
    char *full = ht_xmalloc(dn + n + 1);
    if (dn) snprintf(full, dn + 1, "%s/", incdir);
    memcpy(full + dn, name, n);
    full[dn + n] = 0;
    if (depth >= MAX_DEPTH || lex_file(L, full, incdir, depth + 1) != 0) *rc = -1;
    free(full);
    return q + 1;
}

/* The numbers of text [p, e) of file fi, in order. */
static int lex(ht_numlits *L, const char *p, const char *e, int fi, const char *incdir,
               int depth) {
    int line = 1, bol = 1, rc = 0, kind, hex;
    while (p < e) {
        char c = *p;
        if (c == '\n') {
            line++, p++, bol = 1;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
            p++;
            continue;
        }
        if (c == '@' && bol) {
            const char *q = include(L, p, e, incdir, depth, &rc);
            bol = 0;
            p = q == p ? p + 1 : q;
            continue;
        }
        bol = 0;
        size_t n;
        if (c == '#' || (c == '/' && p + 1 < e && p[1] == '/')) {
            while (p < e && *p != '\n')
                p++;
        } else if (c == '/' && p + 1 < e && p[1] == '*') {
            for (p += 2; p < e && !(*p == '*' && p + 1 < e && p[1] == '/'); p++)
                line += *p == '\n';
            p = p < e ? p + 2 : e;
        } else if (c == '"') {
            for (p++; p < e && *p != '"'; p++) {
                if (*p == '\\' && p + 1 < e) p++;
                line += *p == '\n';
            }
            p = p < e ? p + 1 : e;
        } else if (isalpha((unsigned char)c) || c == '*') {
            while (p < e && (isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '*'))
                p++;
        } else if ((isdigit((unsigned char)c) || c == '-' || c == '+' || c == '.') &&
                   (n = match_number(p, e, &kind, &hex)) > 0) {
            add_literal(L, p, n, kind, hex, fi, line);
            p += n;
        } else {
            p++;
        }
    }
    return rc;
}

static int lex_file(ht_numlits *L, const char *path, const char *incdir, int depth) {
    FILE *f = ht_open_input(path, "config");
    if (!f) {
        ht_error_clear();
        return -1;
    }
    size_t cap = 4096, n = 0, got;
    char *buf = ht_xmalloc(cap);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap) buf = ht_xrealloc(buf, cap *= 2);
    int bad = ferror(f);
    fclose(f);
    int rc = bad ? -1 : lex(L, buf, buf + n, add_file(L, path), incdir, depth);
    free(buf);
    return rc;
}

int ht_numlits_scan_file(ht_numlits *L, const char *path, const char *incdir) {
    return lex_file(L, path, incdir, 0);
}

void ht_numlits_scan_text(ht_numlits *L, const char *text, const char *name) {
    lex(L, text, text + strlen(text), add_file(L, name), NULL, MAX_DEPTH);
}

void ht_numlits_free(ht_numlits *L) {
    for (int i = 0; i < L->nfiles; i++)
        free(L->files[i]);
    free(L->files);
    free(L->v);
    memset(L, 0, sizeof *L);
}

/* Document order: the k-th numeric setting is the k-th numeric literal. With set, binds
 * (set 2: the hooks too). */
static int bind_walk(ht_numlits *L, config_setting_t *s, int *k, int set) {
    int t = config_setting_type(s);
    if (t == CONFIG_TYPE_GROUP || t == CONFIG_TYPE_ARRAY || t == CONFIG_TYPE_LIST) {
        for (int i = 0; i < config_setting_length(s); i++)
            if (!bind_walk(L, config_setting_get_elem(s, (unsigned)i), k, set)) return 0;
        return 1;
    }
    if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64 && t != CONFIG_TYPE_FLOAT) return 1;
    if (*k >= L->n) return 0;
    ht_numlit *l = &L->v[(*k)++];
    if ((t == CONFIG_TYPE_FLOAT) != (l->kind == HT_LIT_FLOAT)) return 0;
    if (t == CONFIG_TYPE_FLOAT) {
        if (config_setting_get_float(s) != l->fval) return 0;
    } else { /* the value libconfig 1.5 reads, or (a later libconfig) the one written */
        long long got = config_setting_get_int64(s);
        int exact = !l->beyond64 && got == l->tval;
        if (got != l->ival && !exact) return 0;
        if (set) l->lost = !exact;
    }
    if (set) l->setting = s;
    if (set == 2) config_setting_set_hook(s, l);
    return 1;
}

int ht_numlits_bind(ht_numlits *L, config_setting_t *root, int hooks) {
    int k = 0;
    L->bound = bind_walk(L, root, &k, 0) && k == L->n;
    if (L->bound) {
        k = 0;
        bind_walk(L, root, &k, hooks ? 2 : 1);
    }
    return L->bound;
}

const ht_numlit *ht_numlit_of(const config_setting_t *s) {
    return s ? (const ht_numlit *)config_setting_get_hook(s) : NULL;
}

const ht_numlit *ht_numlits_first_lost(const ht_numlits *L) {
    for (int i = 0; i < L->n; i++)
        if (L->v[i].lost) return &L->v[i];
    return NULL;
}

void ht_numlit_why(const ht_numlit *l, char *buf, size_t n) {
    int hex = strchr(l->text, 'x') || strchr(l->text, 'X');
    if (l->kind == HT_LIT_FLOAT && isinf(l->fval))
        snprintf(buf, n, "found inf, expected a finite number (%s is beyond the largest double, %.6g)",
                 l->text, DBL_MAX);
    else if (l->kind == HT_LIT_FLOAT)
        snprintf(buf, n,
                 "found %s, below the smallest double (libconfig reads 0); expected 0 or a "
                 "magnitude of at least %.6g",
                 l->text, DBL_MIN);
    else if (l->beyond64)
        snprintf(buf, n, "found %s, which does not fit in 64 bits; expected an integer from %lld to %lld",
                 l->text, LLONG_MIN, LLONG_MAX);
    else if (hex)
        snprintf(buf, n,
                 "found %s, beyond the 32 bits libconfig reads without a suffix (it reads "
                 "%lld); expected at most 0x7FFFFFFF, or %sL for 64 bits",
                 l->text, l->ival, l->text);
    else
        snprintf(buf, n,
                 "found %s, beyond the 32 bits libconfig reads without a suffix (it reads "
                 "%lld); expected an integer from %d to %d, or %sL for 64 bits",
                 l->text, l->ival, INT_MIN, INT_MAX, l->text);
}

void ht_cfg_setting_path(const config_setting_t *s, char *buf, size_t n) {
    const config_setting_t *parent = s ? config_setting_parent(s) : NULL;
    if (!parent) { /* the root */
        if (n) buf[0] = 0;
        return;
    }
    ht_cfg_setting_path(parent, buf, n);
    size_t len = strlen(buf);
    const char *name = config_setting_name(s);
    if (len >= n) return;
    if (name) snprintf(buf + len, n - len, "%s%s", len ? "." : "", name);
    else snprintf(buf + len, n - len, "[%d]", config_setting_index(s));
}
