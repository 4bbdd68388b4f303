/* Lost integer literals of libconfig 1.5 (see intlit.h): a small scanner over one line. */
#include "core/intlit.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/path.h"

/* Reads line `line` (1-based) of file into buf; 0 when there is none. */
static int read_line(const char *file, int line, char *buf, size_t n) {
    FILE *f = ht_open_input(file, "config");
    if (!f) return 0;
    int l = 1, c = 0;
    while (l < line && (c = fgetc(f)) != EOF)
        if (c == '\n') l++;
    char *got = l == line ? fgets(buf, (int)n, f) : NULL;
    fclose(f);
    return got != NULL;
}

/* One integer token at p (sign included); *len its length with the suffix. 1 if it lost
 * its value as described for ht_int_literal_lost. */
static int token_lost(const char *p, size_t *len, long long got, int is64) {
    char *end;
    errno = 0;
    long long x = strtoll(p, &end, 0);
    int range = errno == ERANGE;
    const char *q = end;
    while (isalnum((unsigned char)*q) || *q == '.' ||
           ((*q == '-' || *q == '+') && (q[-1] == 'e' || q[-1] == 'E')))
        q++; /* a float (1.5e3), or L / LL */
    *len = (size_t)(q - p);
    if (q == end) /* no suffix */
        return !is64 && (range || x > INT_MAX || x < INT_MIN) && (int32_t)(uint64_t)x == got;
    int L = (*end == 'L' || *end == 'l') && q - end <= 2;
    return L && is64 && range && x == got;
}

int ht_int_literal_lost(const char *file, int line, const char *name, long long got, int is64,
                        char *text, size_t n) {
    char buf[8192];
    if (!file || line < 1 || !read_line(file, line, buf, sizeof buf)) return 0;
    return ht_int_literal_lost_in(buf, name, got, is64, text, n);
}

static int ident(char c) { return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '*'; }

/* The literal right after "name =" (or "name :") on the line, so that another key's value
 * on the same line is never taken for this one's. */
static int named_lost(const char *buf, const char *name, long long got, int is64, char *text,
                      size_t n) {
    size_t nlen = strlen(name), len;
    for (const char *p = strstr(buf, name); p; p = strstr(p + 1, name)) {
        const char *q = p + nlen;
        if ((p > buf && ident(p[-1])) || ident(*q)) continue;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q != '=' && *q != ':') continue;
        for (q++; *q == ' ' || *q == '\t';)
            q++;
        int sign = (*q == '-' || *q == '+') && isdigit((unsigned char)q[1]);
        if (!isdigit((unsigned char)*q) && !sign) continue;
        if (token_lost(q, &len, got, is64)) {
            snprintf(text, n, "%.*s", (int)len, q);
            return 1;
        }
    }
    return 0;
}

int ht_int_literal_lost_in(const char *buf, const char *name, long long got, int is64, char *text,
                           size_t n) {
    if (name) return named_lost(buf, name, got, is64, text, n);
    for (const char *p = buf; *p;) {
        if (*p == '"') { /* a string: skip to its closing quote */
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1]) p++;
            if (*p) p++;
            continue;
        }
        if (*p == '#' || (p[0] == '/' && p[1] == '/')) break;
        int start = isdigit((unsigned char)*p) ||
                    ((*p == '-' || *p == '+') && isdigit((unsigned char)p[1]));
        char prev = p > buf ? p[-1] : ' ';
        if (!start || isalnum((unsigned char)prev) || prev == '_' || prev == '.') {
            p++;
            continue;
        }
        size_t len;
        if (token_lost(p, &len, got, is64)) {
            snprintf(text, n, "%.*s", (int)len, p);
            return 1;
        }
        p += len ? len : 1;
    }
    return 0;
}

int ht_int_text_beyond64(const char *s) {
    char *end;
    errno = 0;
    (void)strtoll(s, &end, 0);
    if (end == s) return 0;
    if (*end == 'L' || *end == 'l') end++;
    if (*end == 'L' || *end == 'l') end++;
    return !*end && errno == ERANGE;
}
