#include "tfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

static char g_dir[64];

void tfile_init(const char *prefix) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/%s_XXXXXX", tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp",
             prefix);
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

void tfile_done(void) {
    if (getenv("HT_KEEP_TMP")) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", g_dir);
}

const char *tfile_dir(void) { return g_dir; }

const char *tpath(const char *name) {
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
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
