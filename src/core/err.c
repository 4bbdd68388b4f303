/* Error recording, fatal exits and checked allocation. */
#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_msg[4096];
static void (*g_exit_hook)(int);
static const char *g_prog = "hettrain";
static int g_quiet_input;

int ht_error(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return code;
}

const char *ht_errmsg(void) { return g_msg; }
void ht_error_clear(void) { g_msg[0] = 0; }
void ht_set_exit_hook(void (*hook)(int)) { g_exit_hook = hook; }
void ht_set_progname(const char *name) { g_prog = name; }

void ht_set_quiet_input_errors(int on) { g_quiet_input = on; }

void ht_error_print(void) {
    fprintf(stderr, "%s: error: %s\n", g_prog, g_msg[0] ? g_msg : "unknown error");
}

void ht_die(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (!(g_quiet_input && code == HT_EINPUT)) {
        fprintf(stderr, "%s: error: ", g_prog);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
    }
    va_end(ap);
    fflush(stdout);
    fflush(stderr);
    if (g_exit_hook) g_exit_hook(code);
    exit(code);
}

void ht_exit_on_error(int code) {
    if (code != HT_OK) ht_die(code, "%s", g_msg[0] ? g_msg : "unknown error");
}

void *ht_xmalloc_at(size_t n, const char *file, int line) {
    void *p = malloc(n ? n : 1);
    if (!p) ht_die(HT_ERUNTIME, "out of memory allocating %zu bytes (%s:%d)", n, file, line);
    return p;
}

void *ht_xcalloc_at(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) ht_die(HT_ERUNTIME, "out of memory allocating %zu x %zu bytes (%s:%d)", n, size, file, line);
    return p;
}

void *ht_xrealloc_at(void *p, size_t n, const char *file, int line) {
    void *q = realloc(p, n ? n : 1);
    if (!q) ht_die(HT_ERUNTIME, "out of memory reallocating %zu bytes (%s:%d)", n, file, line);
    return q;
}

char *ht_xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = ht_xmalloc(n);
    memcpy(p, s, n);
    return p;
}

size_t ht_strlcpy(char *dst, const char *src, size_t size) {
    size_t n = strlen(src);
    if (size) {
        size_t k = n < size - 1 ? n : size - 1;
        memcpy(dst, src, k);
        dst[k] = 0;
    }
    return n;
}
