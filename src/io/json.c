/* JSON output helpers and a pull parser for untrusted text (safetensors headers, metrics lines).
 * The parser never reads past n, never recurses deeper than HT_JSON_MAX_DEPTH and allocates
 * only the strings a caller asks for. */
#include "io/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- output ---------------------------------------------------------------------------- */

void ht_jbuf_free(ht_jbuf *b) {
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

static void jbuf_reserve(ht_jbuf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    b->s = ht_xrealloc(b->s, cap);
    b->cap = cap;
}

void ht_jbuf_put(ht_jbuf *b, const char *s, size_t n) {
    jbuf_reserve(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void ht_jbuf_putc(ht_jbuf *b, char c) { ht_jbuf_put(b, &c, 1); }
void ht_jbuf_puts(ht_jbuf *b, const char *s) { ht_jbuf_put(b, s, strlen(s)); }

void ht_jbuf_printf(ht_jbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    jbuf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the well-formed UTF-8 sequence at s (1..4), or 0 if it is not well-formed. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned cp, min;
    if ((c & 0xE0) == 0xC0)
        len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
        len = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (n < len) return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

int ht_utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(u + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

void ht_jbuf_put_str(ht_jbuf *b, const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    ht_jbuf_putc(b, '"');
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        if (c == '"' || c == '\\') {
            ht_jbuf_putc(b, '\\');
            ht_jbuf_putc(b, (char)c);
        } else if (c == '\n') {
            ht_jbuf_puts(b, "\\n");
        } else if (c == '\t') {
            ht_jbuf_puts(b, "\\t");
        } else if (c == '\r') {
            ht_jbuf_puts(b, "\\r");
        } else if (c < 0x20 || c == 0x7F) {
            ht_jbuf_printf(b, "\\u%04x", c);
        } else if (c >= 0x80) {
            size_t k = utf8_seq(u + i, n - i);
            if (k) {
                ht_jbuf_put(b, s + i, k);
                i += k;
            } else {
                ht_jbuf_puts(b, "\xEF\xBF\xBD"); /* U+FFFD keeps the output valid JSON */
                i++;
            }
            continue;
        } else {
            ht_jbuf_putc(b, (char)c);
        }
        i++;
    }
    ht_jbuf_putc(b, '"');
}

void ht_jbuf_put_num(ht_jbuf *b, double x) {
    if (!isfinite(x)) {
        ht_jbuf_puts(b, "null"); /* JSON has no NaN/Infinity; null is what readers accept */
        return;
    }
    /* Assumes the "C" numeric locale (the library never calls setlocale). */
    ht_jbuf_printf(b, "%.9g", x);
}

/* ---- input ------------------------------------------------------------------------------ */

void ht_json_init(ht_json *j, const char *s, size_t n) {
    memset(j, 0, sizeof *j);
    j->s = s;
    j->n = n;
}

int ht_json_fail(ht_json *j, size_t off, const char *fmt, ...) {
    if (j->err[0]) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->err, sizeof j->err, fmt, ap);
    va_end(ap);
    j->err_off = off;
    return -1;
}

/* Describes the byte at i for "found ..." in messages. */
static const char *found(const ht_json *j, size_t i, char *buf, size_t size) {
    if (i >= j->n) return "end of text";
    unsigned char c = (unsigned char)j->s[i];
    if (c > 0x20 && c < 0x7F)
        snprintf(buf, size, "'%c'", c);
    else
        snprintf(buf, size, "byte 0x%02x", c);
    return buf;
}

int ht_json_peek(ht_json *j) {
    while (j->i < j->n) {
        char c = j->s[j->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return (unsigned char)c;
        j->i++;
    }
    return -1;
}

int ht_json_expect(ht_json *j, char c, const char *context) {
    char fb[16];
    if (ht_json_peek(j) == (unsigned char)c) {
        j->i++;
        return 0;
    }
    return ht_json_fail(j, j->i, "expected '%c' %s, found %s", c, context,
                        found(j, j->i, fb, sizeof fb));
}

int ht_json_more(ht_json *j, char close, int *count) {
    char fb[16];
    int c = ht_json_peek(j);
    if (c == (unsigned char)close) {
        j->i++;
        return 0;
    }
    if (*count > 0) {
        if (c != ',')
            return ht_json_fail(j, j->i, "expected ',' or '%c' after %s member, found %s", close,
                                close == '}' ? "object" : "array", found(j, j->i, fb, sizeof fb));
        j->i++;
    }
    (*count)++;
    return 1;
}

static int hex4(ht_json *j, size_t at, unsigned *out) {
    unsigned v = 0;
    if (at + 4 > j->n) return ht_json_fail(j, at, "truncated \\u escape (expected 4 hex digits)");
    for (int k = 0; k < 4; k++) {
        char c = j->s[at + k];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return ht_json_fail(j, at + k, "expected a hex digit in \\u escape");
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

static void put_utf8(ht_jbuf *b, unsigned cp) {
    char t[4];
    size_t n;
    if (cp < 0x80)
        t[0] = (char)cp, n = 1;
    else if (cp < 0x800)
        t[0] = (char)(0xC0 | cp >> 6), t[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        t[0] = (char)(0xE0 | cp >> 12), t[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
        t[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    else
        t[0] = (char)(0xF0 | cp >> 18), t[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), t[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    ht_jbuf_put(b, t, n);
}

/* Parses a string at the current position; decodes into dst unless dst is NULL. */
static int parse_string(ht_json *j, ht_jbuf *dst) {
    char fb[16];
    if (ht_json_peek(j) != '"')
        return ht_json_fail(j, j->i, "expected a string, found %s", found(j, j->i, fb, sizeof fb));
    size_t start = j->i++;
    const unsigned char *u = (const unsigned char *)j->s;
    for (;;) {
        if (j->i >= j->n) return ht_json_fail(j, start, "unterminated string");
        unsigned c = u[j->i];
        if (c == '"') {
            j->i++;
            return 0;
        }
        if (c < 0x20)
            return ht_json_fail(j, j->i, "control byte 0x%02x in string (must be escaped)", c);
        if (c >= 0x80) {
            size_t k = utf8_seq(u + j->i, j->n - j->i);
            if (!k) return ht_json_fail(j, j->i, "invalid UTF-8 in string");
            if (dst) ht_jbuf_put(dst, j->s + j->i, k);
            j->i += k;
            continue;
        }
        if (c != '\\') {
            if (dst) ht_jbuf_putc(dst, (char)c);
            j->i++;
            continue;
        }
        size_t esc = j->i++;
        if (j->i >= j->n) return ht_json_fail(j, start, "unterminated string");
        char e = j->s[j->i++];
        unsigned cp;
        switch (e) {
        case '"':
            cp = '"';
            break;
        case '\\':
            cp = '\\';
            break;
        case '/':
            cp = '/';
            break;
        case 'b':
            cp = '\b';
            break;
        case 'f':
            cp = '\f';
            break;
        case 'n':
            cp = '\n';
            break;
        case 'r':
            cp = '\r';
            break;
        case 't':
            cp = '\t';
            break;
        case 'u':
            if (hex4(j, j->i, &cp)) return -1;
            j->i += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return ht_json_fail(j, esc, "unpaired low surrogate in \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (j->i + 2 > j->n || j->s[j->i] != '\\' || j->s[j->i + 1] != 'u')
                    return ht_json_fail(j, esc,
                                        "high surrogate not followed by a \\u low surrogate");
                if (hex4(j, j->i + 2, &lo)) return -1;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return ht_json_fail(j, j->i, "high surrogate not followed by a low surrogate");
                j->i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp == 0 && dst) return ht_json_fail(j, esc, "\\u0000 in string is not supported");
            break;
        default:
            return ht_json_fail(j, esc, "invalid escape '\\%c' in string",
                                (e > 0x20 && e < 0x7F) ? e : '?');
        }
        if (dst) put_utf8(dst, cp);
    }
}

int ht_json_string_append(ht_json *j, ht_jbuf *dst) {
    if (parse_string(j, dst)) return -1;
    ht_jbuf_putc(dst, 0);
    return 0;
}

int ht_json_string(ht_json *j, char **out) {
    ht_jbuf b = {0};
    *out = NULL;
    if (parse_string(j, &b)) {
        ht_jbuf_free(&b);
        return -1;
    }
    if (!b.s) ht_jbuf_puts(&b, "");
    *out = b.s;
    return 0;
}

/* Scans a number token by the JSON grammar; sets *is_int when it has no fraction/exponent. */
static int scan_number(ht_json *j, size_t *start, size_t *len, int *is_int) {
    char fb[16];
    ht_json_peek(j);
    size_t i = j->i, s = i;
    const char *p = j->s;
    *is_int = 1;
    if (i < j->n && p[i] == '-') i++;
    if (i < j->n && p[i] == '0') {
        i++;
    } else if (i < j->n && p[i] >= '1' && p[i] <= '9') {
        while (i < j->n && p[i] >= '0' && p[i] <= '9')
            i++;
    } else {
        return ht_json_fail(j, i, "expected a number, found %s", found(j, i, fb, sizeof fb));
    }
    if (i < j->n && p[i] == '.') {
        *is_int = 0;
        i++;
        if (i >= j->n || p[i] < '0' || p[i] > '9')
            return ht_json_fail(j, i, "expected a digit after '.', found %s",
                                found(j, i, fb, sizeof fb));
        while (i < j->n && p[i] >= '0' && p[i] <= '9')
            i++;
    }
    if (i < j->n && (p[i] == 'e' || p[i] == 'E')) {
        *is_int = 0;
        i++;
        if (i < j->n && (p[i] == '+' || p[i] == '-')) i++;
        if (i >= j->n || p[i] < '0' || p[i] > '9')
            return ht_json_fail(j, i, "expected a digit in exponent, found %s",
                                found(j, i, fb, sizeof fb));
        while (i < j->n && p[i] >= '0' && p[i] <= '9')
            i++;
    }
    *start = s;
    *len = i - s;
    j->i = i;
    return 0;
}

int ht_json_number(ht_json *j, double *out) {
    size_t s, n;
    int is_int;
    if (scan_number(j, &s, &n, &is_int)) return -1;
    /* strtod needs a terminated copy: the text is not NUL-terminated at the token's end. */
    char small[64];
    char *t = n < sizeof small ? small : ht_xmalloc(n + 1);
    memcpy(t, j->s + s, n);
    t[n] = 0;
    *out = strtod(t, NULL);
    if (t != small) free(t);
    return 0;
}

int ht_json_int64(ht_json *j, int64_t *out) {
    size_t s, n;
    int is_int;
    if (scan_number(j, &s, &n, &is_int)) return -1;
    if (!is_int)
        return ht_json_fail(j, s, "expected an integer, found %.*s", (int)(n < 24 ? n : 24),
                            j->s + s);
    int neg = j->s[s] == '-';
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (size_t k = s + (size_t)neg; k < s + n; k++) {
        unsigned d = (unsigned)(j->s[k] - '0');
        if (v > (lim - d) / 10)
            return ht_json_fail(j, s, "integer out of range (more than 64 bits)");
        v = v * 10 + d;
    }
    *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    return 0;
}

static int match_word(ht_json *j, const char *w) {
    size_t n = strlen(w);
    if (j->n - j->i >= n && memcmp(j->s + j->i, w, n) == 0) {
        j->i += n;
        return 0;
    }
    return ht_json_fail(j, j->i, "invalid literal (expected %s)", w);
}

int ht_json_skip(ht_json *j) {
    char fb[16];
    int c = ht_json_peek(j);
    if (c == '{' || c == '[') {
        if (j->depth >= HT_JSON_MAX_DEPTH)
            return ht_json_fail(j, j->i, "nesting deeper than %d levels", HT_JSON_MAX_DEPTH);
        char close = c == '{' ? '}' : ']';
        int count = 0, r;
        j->depth++;
        j->i++;
        while ((r = ht_json_more(j, close, &count)) == 1) {
            if (close == '}') {
                if (parse_string(j, NULL)) return -1;
                if (ht_json_expect(j, ':', "after object key")) return -1;
            }
            if (ht_json_skip(j)) return -1;
        }
        j->depth--;
        return r;
    }
    if (c == '"') return parse_string(j, NULL);
    if (c == 't') return match_word(j, "true");
    if (c == 'f') return match_word(j, "false");
    if (c == 'n') return match_word(j, "null");
    if (c == '-' || (c >= '0' && c <= '9')) {
        size_t s, n;
        int is_int;
        return scan_number(j, &s, &n, &is_int);
    }
    return ht_json_fail(j, j->i, "expected a JSON value, found %s", found(j, j->i, fb, sizeof fb));
}

int ht_json_valid(const char *s, size_t n, size_t *err_off, char *err, size_t errsz) {
    ht_json j;
    ht_json_init(&j, s, n);
    if (ht_json_skip(&j) == 0 && ht_json_peek(&j) != -1)
        ht_json_fail(&j, j.i, "unexpected data after the JSON value");
    if (!j.err[0]) return 1;
    if (err_off) *err_off = j.err_off;
    if (err && errsz) ht_strlcpy(err, j.err, errsz);
    return 0;
}

int ht_json_find(const char *s, size_t n, const char *key, size_t *val_off, size_t *val_len) {
    ht_json j;
    ht_json_init(&j, s, n);
    int count = 0, r, hit = 0;
    if (ht_json_expect(&j, '{', "at the start of an object")) return 0;
    while ((r = ht_json_more(&j, '}', &count)) == 1) {
        char *k;
        if (ht_json_string(&j, &k)) return 0;
        int match = strcmp(k, key) == 0;
        free(k);
        if (ht_json_expect(&j, ':', "after object key")) return 0;
        ht_json_peek(&j);
        size_t v0 = j.i;
        if (ht_json_skip(&j)) return 0;
        if (match && !hit) {
            hit = 1;
            *val_off = v0;
            *val_len = j.i - v0;
        }
    }
    return r == 0 && hit;
}
