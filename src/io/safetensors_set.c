/* Sharded safetensors sets in Hugging Face's layout (safetensors.h describes the files and
 * the commit protocol): writing one shard, committing a set, and reading a set back as one
 * in-memory file, so that every loader reads either form. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"
#include "core/path.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "io/st_internal.h"

#define SET_MAX_INDEX (64u << 20) /* an index of millions of tensors is still far below */

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static void stem(const char *p, char *out, size_t n) {
    size_t l = strlen(p);
    if (ends_with(p, ".safetensors")) l -= strlen(".safetensors");
    snprintf(out, n, "%.*s", (int)l, p);
}

void ht_st_set_shard_path(const char *p, int i, int k, char *out, size_t n) {
    char s[HT_ST_PATH];
    stem(p, s, sizeof s);
    int w = snprintf(out, n, "%s-%05d-of-%05d.safetensors", s, i, k);
    if (w < 0 || (size_t)w >= n)
        ht_die(HT_EINPUT, "checkpoint %s: shard %d of %d: the name is too long (at most %zu bytes)", p,
               i, k, n - 1);
}

void ht_st_set_index_path(const char *p, char *out, size_t n) {
    char s[HT_ST_PATH];
    stem(p, s, sizeof s);
    int w = snprintf(out, n, "%s.safetensors.index.json", s);
    if (w < 0 || (size_t)w >= n)
        ht_die(HT_EINPUT, "checkpoint %s: the index's name is too long (at most %zu bytes)", p, n - 1);
}

int ht_st_set_index(const char *path, char *idx, size_t n) {
    struct stat st;
    if (ends_with(path, ".index.json")) {
        snprintf(idx, n, "%s", path);
        return 1;
    }
    if (lstat(path, &st) == 0 || errno != ENOENT) return 0;
    ht_st_set_index_path(path, idx, n);
    return stat(idx, &st) == 0;
}

int ht_st_exists(const char *path) {
    struct stat st;
    char idx[HT_ST_PATH];
    return stat(path, &st) == 0 || ht_st_set_index(path, idx, sizeof idx);
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* fsync of the directory holding path: makes a rename in it durable. */
void ht_st_sync_dir(const char *path) {
    char dir[HT_ST_PATH];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) slash[slash == dir ? 1 : 0] = 0;
    int dfd = open(slash ? dir : ".", O_RDONLY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

int ht_st_set_write_shard(const char *p, int i, int k, int64_t step, const ht_st_tensor *t, int nt,
                          const char *const *keys, const char *const *vals, int nmeta) {
    if (k < 1 || k > 99999 || i < 1 || i > k)
        return ht_error(HT_EINPUT, "checkpoint '%s': shard %d of %d, expected 1 <= shard <= "
                                   "shards <= 99999", p, i, k);
    char path[HT_ST_PATH + 8], sv[32], iv[16], kv[16];
    ht_st_set_shard_path(p, i, k, path, HT_ST_PATH);
    strcat(path, ".next");
    snprintf(sv, sizeof sv, "%" PRId64, step);
    snprintf(iv, sizeof iv, "%d", i);
    snprintf(kv, sizeof kv, "%d", k);
    const char **mk = ht_xmalloc((size_t)(nmeta + 3) * sizeof *mk);
    const char **mv = ht_xmalloc((size_t)(nmeta + 3) * sizeof *mv);
    for (int j = 0; j < nmeta; j++) {
        mk[j] = keys[j];
        mv[j] = vals[j];
    }
    mk[nmeta] = "set.step", mv[nmeta] = sv;
    mk[nmeta + 1] = "set.shard", mv[nmeta + 1] = iv;
    mk[nmeta + 2] = "set.shards", mv[nmeta + 2] = kv;
    int rc = ht_st_write(path, t, nt, mk, mv, nmeta + 3);
    free(mk);
    free(mv);
    return rc;
}

/* The metadata value key of f as an exact match of want; HT_EINPUT naming path otherwise. */
static int meta_is(const ht_st_file *f, const char *path, const char *key, const char *want,
                   const char *what) {
    const char *v = ht_st_meta(f, key);
    if (v && !strcmp(v, want)) return HT_OK;
    return ht_error(HT_EINPUT, "%s: metadata '%s' is %s%s%s, expected '%s' (%s)", path, key,
                    v ? "'" : "missing", v ? v : "", v ? "'" : "", want, what);
}

/* Appends the weight_map entries of shard i (at path) to wm; adds its bytes to *total. */
static int commit_check(const char *path, int i, int k, const char *sv, ht_jbuf *wm,
                        int64_t *total) {
    ht_st_file *f = NULL;
    char next[HT_ST_PATH + 8], iv[16], kv[16];
    snprintf(next, sizeof next, "%s.next", path);
    snprintf(iv, sizeof iv, "%d", i);
    snprintf(kv, sizeof kv, "%d", k);
    int rc = ht_st_open_file(&f, next);
    if (rc == HT_OK) rc = meta_is(f, next, "set.step", sv, "the step being committed");
    if (rc == HT_OK) rc = meta_is(f, next, "set.shard", iv, "its place in the set");
    if (rc == HT_OK) rc = meta_is(f, next, "set.shards", kv, "the set's size");
    for (int j = 0; rc == HT_OK && j < f->nt; j++) {
        ht_jbuf_puts(wm, wm->len ? ",\n    " : "\n    ");
        ht_jbuf_put_str(wm, f->t[j].name);
        ht_jbuf_puts(wm, ": ");
        ht_jbuf_put_str(wm, base_name(path));
        *total += (int64_t)(f->t[j].end - f->t[j].begin);
    }
    ht_st_close(f);
    return rc;
}

static int write_file(const char *path, const char *text, size_t n) {
    char tmp[HT_ST_PATH + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    const char *what = "create";
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), e;
    if (fd < 0) goto fail;
    what = "write";
    for (size_t o = 0; o < n;) {
        ssize_t w = write(fd, text + o, n - o);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) goto fail;
        o += (size_t)w;
    }
    what = "fsync";
    if (fsync(fd) != 0) goto fail;
    what = "close";
    e = close(fd);
    fd = -1;
    if (e != 0) goto fail;
    what = "rename";
    if (rename(tmp, path) != 0) goto fail;
    ht_st_sync_dir(path);
    return HT_OK;
fail:
    e = errno;
    if (fd >= 0) close(fd);
    unlink(tmp);
    return ht_error(HT_ERUNTIME, "checkpoint index '%s': cannot %s temp file '%s': %s", path,
                    what, tmp, strerror(e));
}

int ht_st_set_commit(const char *p, int k, int64_t step) {
    char idx[HT_ST_PATH], path[HT_ST_PATH], next[HT_ST_PATH + 8], sv[32];
    snprintf(sv, sizeof sv, "%" PRId64, step);
    ht_st_set_index_path(p, idx, sizeof idx);
    if (ht_check_replaceable(idx, "checkpoint index") != HT_OK) return HT_EINPUT;
    ht_remove_stale_tmp(idx);
    ht_jbuf wm = {0}, doc = {0};
    int64_t total = 0;
    int rc = HT_OK;
    for (int i = 1; rc == HT_OK && i <= k; i++) {
        ht_st_set_shard_path(p, i, k, path, sizeof path);
        rc = commit_check(path, i, k, sv, &wm, &total);
    }
    if (rc == HT_OK) {
        ht_jbuf_printf(&doc,
                       "{\n  \"metadata\": {\"total_size\": %" PRId64 ", \"set.step\": \"%s\", "
                       "\"set.shards\": \"%d\"},\n  \"weight_map\": {%s\n  }\n}\n",
                       total, sv, k, wm.s ? wm.s : "");
        rc = write_file(idx, doc.s, doc.len); /* the commit point */
    }
    for (int i = 1; rc == HT_OK && i <= k; i++) {
        ht_st_set_shard_path(p, i, k, path, sizeof path);
        snprintf(next, sizeof next, "%s.next", path);
        if (rename(next, path) != 0)
            rc = ht_error(HT_ERUNTIME, "checkpoint '%s': cannot rename '%s' to '%s': %s", p,
                          next, path, strerror(errno));
    }
    if (rc == HT_OK) {
        ht_st_sync_dir(idx);
        struct stat st;
        /* the previous save's single file would otherwise shadow the set (ht_st_set_index) */
        if (!ends_with(p, ".index.json") && lstat(p, &st) == 0 && S_ISREG(st.st_mode)) unlink(p);
    }
    ht_jbuf_free(&wm);
    ht_jbuf_free(&doc);
    return rc;
}
