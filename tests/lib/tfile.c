#include "tfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

static char *g_dir; /* sized from $TMPDIR: any length works, no fallback */

void tfile_init(const char *prefix) {
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    size_t n = strlen(tmp) + strlen(prefix) + sizeof "/_XXXXXX";
    g_dir = malloc(n);
    if (!g_dir) {
        perror("tfile_init");
        exit(1);
    }
    snprintf(g_dir, n, "%s/%s_XXXXXX", tmp, prefix);
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "mkdtemp %s: %s\n", g_dir, strerror(errno));
        exit(1);
    }
}

void tfile_done(void) {
    if (getenv("HT_KEEP_TMP")) return;
    size_t n = strlen(g_dir) + sizeof "rm -rf ''";
    char *cmd = malloc(n);
    if (cmd) snprintf(cmd, n, "rm -rf '%s'", g_dir);
    if (!cmd || system(cmd) != 0) tap_diag("could not remove %s", g_dir);
    free(cmd);
}

const char *tfile_dir(void) { return g_dir; }

const char *tpath(const char *name) {
    static char buf[8][4096]; /* PATH_MAX on Linux */
    static int k;
    k = (k + 1) % 8;
    if (snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name) >= (int)sizeof buf[k]) {
        fprintf(stderr, "tpath: %s/%s is longer than %zu bytes\n", g_dir, name, sizeof buf[k] - 1);
        exit(1);
    }
    return buf[k];
}

void put_file(const char *path, const void *data, size_t n) {
    unlink(path);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(data, 1, n, fp) != n || fclose(fp)) {
        perror(path);
        exit(1);
    }
}

unsigned char *get_file(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, fp);
    b[*n] = 0;
    fclose(fp);
    return b;
}

const char *put_text(const char *name, const char *text) {
    const char *p = tpath(name);
    put_file(p, text, strlen(text));
    return p;
}
