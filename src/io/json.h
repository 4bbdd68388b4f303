/* Minimal JSON for the io/ module: a growable output buffer with correct escaping and number
 * formatting (NaN/Inf become null), and a pull parser over untrusted text that reports the byte
 * offset of the first error. No tree: callers walk the text, so memory stays bounded by what
 * they choose to keep (the safetensors reader depends on that for hostile headers). */
#ifndef HT_IO_JSON_H
#define HT_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

/* ---- output ---------------------------------------------------------------------------- */

typedef struct ht_jbuf {
    char *s; /* always NUL-terminated once anything was written */
    size_t len;
    size_t cap;
} ht_jbuf;

void ht_jbuf_free(ht_jbuf *b);
void ht_jbuf_putc(ht_jbuf *b, char c);
void ht_jbuf_put(ht_jbuf *b, const char *s, size_t n);
void ht_jbuf_puts(ht_jbuf *b, const char *s);
void ht_jbuf_printf(ht_jbuf *b, const char *fmt, ...) HT_PRINTF(2, 3);
/* A JSON string literal with quotes. Invalid UTF-8 bytes become U+FFFD (use ht_utf8_valid
 * first where that would lose data). */
void ht_jbuf_put_str(ht_jbuf *b, const char *s);
/* A JSON number with round-trip float precision (%.9g), or null when x is NaN or infinite. */
void ht_jbuf_put_num(ht_jbuf *b, double x);

/* 1 if s[0..n) is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
int ht_utf8_valid(const char *s, size_t n);

/* ---- input: pull parser ----------------------------------------------------------------- */

enum { HT_JSON_MAX_DEPTH = 64 };

typedef struct ht_json {
    const char *s; /* text, not necessarily NUL-terminated */
    size_t n;
    size_t i; /* current position */
    int depth;
    size_t err_off; /* offset of the first error in s */
    char err[200];  /* what was found and what was expected */
} ht_json;

void ht_json_init(ht_json *j, const char *s, size_t n);
/* Records an error at offset off and returns -1; the first error wins. */
int ht_json_fail(ht_json *j, size_t off, const char *fmt, ...) HT_PRINTF(3, 4);
/* Skips whitespace; returns the next byte or -1 at the end of the text. */
int ht_json_peek(ht_json *j);
/* Consumes c (after whitespace) or fails with "expected 'c' <context>". */
int ht_json_expect(ht_json *j, char c, const char *context);
/* Object/array iteration. Call ht_json_expect(j, '{' or '[') first, set *count = 0; each
 * ht_json_more() returns 1 when another member follows (consuming the ',' between members),
 * 0 after consuming the closing bracket, -1 on error. */
int ht_json_more(ht_json *j, char close, int *count);
/* A string; *out is malloc'd, decoded UTF-8 (escapes incl. \uXXXX surrogate pairs). Strings
 * that decode to a NUL byte are refused: every caller here keeps C strings. */
int ht_json_string(ht_json *j, char **out);
/* Same, appended to dst with its terminating NUL counted in dst->len (a string pool:
 * callers keep offsets, since dst->s moves as it grows). */
int ht_json_string_append(ht_json *j, ht_jbuf *dst);
/* A number token as a double; or as an exact int64 (no fraction/exponent, no overflow). */
int ht_json_number(ht_json *j, double *out);
int ht_json_int64(ht_json *j, int64_t *out);
/* Validates and skips any value (depth-limited). */
int ht_json_skip(ht_json *j);

/* 1 if s[0..n) is exactly one JSON value with optional surrounding whitespace; otherwise 0
 * with *err_off/err filled when non-NULL. */
int ht_json_valid(const char *s, size_t n, size_t *err_off, char *err, size_t errsz);
/* In a top-level object, finds key and returns its raw value span (offset, length);
 * 1 if found, 0 if absent or the text is not a valid object. */
int ht_json_find(const char *s, size_t n, const char *key, size_t *val_off, size_t *val_len);

#endif
