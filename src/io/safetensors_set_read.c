/* Reading a sharded safetensors set (safetensors.h) as one in-memory file: the index's
 * weight_map, each shard verified and of the index's step (a shard of another save is refused
 * naming it: a torn set), flat pieces joined back into their tensor. */
#include <errno.h>
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

#define SET_MAX_INDEX (64u << 20)

typedef struct set_idx {
    char *step;         /* metadata "set.step", NULL for another tool's index */
    char **name, **file; /* weight_map, nw entries */
    int nw;
    char **files; /* distinct files, nf */
    int nf;
} set_idx;

static void idx_free(set_idx *x) {
    for (int i = 0; i < x->nw; i++) {
        free(x->name[i]);
        free(x->file[i]);
    }
    for (int i = 0; i < x->nf; i++)
        free(x->files[i]);
    free(x->name);
    free(x->file);
    free(x->files);
    free(x->step);
}

static char *slurp(const char *path, size_t *n) {
    int fd;
    long long size;
    if (ht_open_input_fd(path, "checkpoint index", &fd, &size) != HT_OK) return NULL;
    if ((unsigned long long)size > SET_MAX_INDEX) {
        close(fd);
        ht_error(HT_EINPUT, "%s: index of %lld bytes, expected at most %u", path, size,
                 SET_MAX_INDEX);
        return NULL;
    }
    char *b = ht_xmalloc((size_t)size + 1);
    size_t got = 0;
    while (got < (size_t)size) {
        ssize_t r = read(fd, b + got, (size_t)size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    *n = got;
    return b;
}

/* "metadata": keeps set.step, skips the rest. */
static int parse_meta(ht_json *j, set_idx *x) {
    int count = 0, r;
    if (ht_json_expect(j, '{', "for metadata")) return -1;
    while ((r = ht_json_more(j, '}', &count)) == 1) {
        char *k = NULL;
        if (ht_json_string(j, &k) || ht_json_expect(j, ':', "after a metadata key")) {
            free(k);
            return -1;
        }
        int is_step = !strcmp(k, "set.step");
        free(k);
        if (is_step && !x->step ? ht_json_string(j, &x->step) : ht_json_skip(j)) return -1;
    }
    return r;
}

static int parse_map(ht_json *j, set_idx *x) {
    int count = 0, r, cap = 0;
    if (ht_json_expect(j, '{', "for weight_map")) return -1;
    while ((r = ht_json_more(j, '}', &count)) == 1) {
        if (x->nw == cap) {
            cap = cap ? 2 * cap : 64;
            x->name = ht_xrealloc(x->name, (size_t)cap * sizeof *x->name);
            x->file = ht_xrealloc(x->file, (size_t)cap * sizeof *x->file);
        }
        x->name[x->nw] = x->file[x->nw] = NULL;
        int bad = ht_json_string(j, &x->name[x->nw]) ||
                  ht_json_expect(j, ':', "after a tensor name") ||
                  ht_json_string(j, &x->file[x->nw]);
        x->nw++;
        if (bad) return -1;
    }
    return r;
}

/* The distinct files of the weight_map, each a plain name beside the index. */
static int list_files(const char *index, set_idx *x) {
    x->files = ht_xmalloc((size_t)(x->nw ? x->nw : 1) * sizeof *x->files);
    for (int i = 0; i < x->nw; i++) {
        const char *f = x->file[i];
        if (strchr(f, '/') || !*f || !strcmp(f, "..") || !strcmp(f, "."))
            return ht_error(HT_EINPUT, "%s: weight_map names file '%s' for tensor '%s', "
                                       "expected a file name beside the index", index, f,
                            x->name[i]);
        int seen = 0;
        for (int k = 0; k < x->nf && !seen; k++)
            seen = !strcmp(x->files[k], f);
        if (!seen) x->files[x->nf++] = ht_xstrdup(f);
    }
    if (!x->nf) return ht_error(HT_EINPUT, "%s: empty weight_map, expected its tensors", index);
    return HT_OK;
}

static int read_index(const char *index, set_idx *x) {
    size_t n = 0;
    char *text = slurp(index, &n);
    if (!text) return HT_EINPUT;
    ht_json j;
    ht_json_init(&j, text, n);
    int count = 0, r, found = 0, rc = HT_OK;
    if (ht_json_expect(&j, '{', "at the start of the index")) r = -1;
    else
        while ((r = ht_json_more(&j, '}', &count)) == 1) {
            char *k = NULL;
            if (ht_json_string(&j, &k) || ht_json_expect(&j, ':', "after a key")) r = -1;
            else if (!strcmp(k, "weight_map")) r = found++ ? ht_json_fail(&j, j.i, "a second "
                                                    "weight_map") : parse_map(&j, x);
            else if (!strcmp(k, "metadata")) r = parse_meta(&j, x);
            else r = ht_json_skip(&j);
            free(k);
            if (r < 0) break;
        }
    if (r < 0) rc = ht_error(HT_EINPUT, "%s: byte %zu: %s", index, j.err_off, j.err);
    else if (!found)
        rc = ht_error(HT_EINPUT, "%s: no \"weight_map\", expected a safetensors index json", index);
    free(text);
    return rc == HT_OK ? list_files(index, x) : rc;
}

/* Shard file (dir + name) of the index's step: the file itself, or its ".next" when the kill
 * came after the commit point (the index) and before that shard's rename. */
static int open_shard(const char *index, const char *dir, const char *name, const char *step,
                      ht_st_file **out, int lazy) {
    char path[HT_ST_PATH], next[HT_ST_PATH + 8];
    struct stat st;
    snprintf(path, sizeof path, "%s%s", dir, name);
    snprintf(next, sizeof next, "%s.next", path);
    *out = NULL;
    if (step && stat(next, &st) == 0 && ht_st_open_file_mode(out, next, lazy) == HT_OK) {
        const char *s = ht_st_meta(*out, "set.step");
        if (s && !strcmp(s, step)) return HT_OK;
        ht_st_close(*out); /* a later save that was never committed */
        *out = NULL;
    }
    int rc = ht_st_open_file_mode(out, path, lazy);
    if (rc != HT_OK) return rc;
    const char *s = ht_st_meta(*out, "set.step");
    if (!step || (s && !strcmp(s, step))) return HT_OK;
    rc = ht_error(HT_EINPUT,
                  "%s: shard of save step %s, but its index %s is of step %s: a torn set (a "
                  "shard from another save), expected every shard of one save",
                  path, s ? s : "(none)", index, step);
    ht_st_close(*out);
    *out = NULL;
    return rc;
}

/* 1 when name is a piece "BASE#OFFSET" (*off) of a flat tensor the shard declares (*total). */
static int piece_of(const ht_st_file *f, const char *name, size_t *blen, int64_t *off,
                    int64_t *total) {
    const char *h = strrchr(name, HT_ST_SET_PIECE);
    if (!h || !h[1]) return 0;
    char *end;
    errno = 0;
    long long o = strtoll(h + 1, &end, 10);
    if (*end || errno || o < 0) return 0;
    char key[512];
    snprintf(key, sizeof key, "set.flat.%.*s", (int)(h - name), name);
    const char *v = ht_st_meta(f, key);
    long long t = v ? strtoll(v, &end, 10) : -1;
    if (!v || *end || t < 0) return 0;
    *blen = (size_t)(h - name);
    *off = o;
    *total = t;
    return 1;
}

static int set_merge(ht_st_file **out, const char *index, ht_st_file **sh, char **paths, int n);

int ht_st_open_set(ht_st_file **out, const char *index) {
    return ht_st_open_set_mode(out, index, 0);
}

int ht_st_open_set_mode(ht_st_file **out, const char *index, int lazy) {
    *out = NULL;
    set_idx x = {0};
    int rc = read_index(index, &x);
    char dir[HT_ST_PATH];
    snprintf(dir, sizeof dir, "%s", index);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = 0;
    else dir[0] = 0;
    ht_st_file **sh = ht_xcalloc((size_t)(x.nf ? x.nf : 1), sizeof *sh);
    char **paths = ht_xcalloc((size_t)(x.nf ? x.nf : 1), sizeof *paths);
    for (int i = 0; rc == HT_OK && i < x.nf; i++) {
        rc = open_shard(index, dir, x.files[i], x.step, &sh[i], lazy);
        size_t l = strlen(dir) + strlen(x.files[i]) + 1;
        paths[i] = ht_xmalloc(l);
        snprintf(paths[i], l, "%s%s", dir, x.files[i]);
    }
    /* the weight_map and the shards agree: each name in its file, and as many */
    for (int i = 0; rc == HT_OK && i < x.nw; i++) {
        int k = 0;
        while (strcmp(x.files[k], x.file[i]))
            k++;
        if (!ht_st_dtype(sh[k], x.name[i]))
            rc = ht_error(HT_EINPUT, "%s: the index %s places tensor '%s' here, but the file "
                                     "does not hold it", paths[k], index, x.name[i]);
    }
    for (int k = 0; rc == HT_OK && k < x.nf; k++) {
        int want = 0;
        for (int i = 0; i < x.nw; i++)
            want += !strcmp(x.file[i], x.files[k]);
        if (sh[k]->nt != want)
            rc = ht_error(HT_EINPUT, "%s: holds %d tensors, but the index %s places %d here",
                          paths[k], sh[k]->nt, index, want);
    }
    if (rc == HT_OK) rc = set_merge(out, index, sh, paths, x.nf);
    for (int i = 0; i < x.nf; i++) {
        ht_st_close(sh[i]);
        free(paths[i]);
    }
    free(sh);
    free(paths);
    idx_free(&x);
    return rc;
}

int ht_st_set_recover(const char *p) {
    char idx[HT_ST_PATH], dir[HT_ST_PATH], path[HT_ST_PATH], next[HT_ST_PATH + 8];
    struct stat st;
    ht_st_set_index_path(p, idx, sizeof idx);
    if (stat(idx, &st) != 0) return HT_OK; /* no set yet */
    set_idx x = {0};
    int rc = HT_OK;
    if (read_index(idx, &x) != HT_OK || !x.step) { /* not ours to finish: the save replaces it */
        ht_error_clear();
        idx_free(&x);
        return HT_OK;
    }
    snprintf(dir, sizeof dir, "%s", idx);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = 0;
    else dir[0] = 0;
    for (int i = 0; rc == HT_OK && i < x.nf; i++) {
        ht_st_file *f = NULL;
        snprintf(path, sizeof path, "%s%s", dir, x.files[i]);
        snprintf(next, sizeof next, "%s.next", path);
        if (stat(next, &st) != 0 || ht_st_open_file(&f, next) != HT_OK) continue;
        const char *v = ht_st_meta(f, "set.step");
        int committed = v && !strcmp(v, x.step);
        ht_st_close(f);
        if (committed && rename(next, path) != 0)
            rc = ht_error(HT_ERUNTIME, "checkpoint '%s': cannot rename '%s' to '%s': %s", p, next,
                          path, strerror(errno));
    }
    ht_error_clear();
    if (rc == HT_OK) ht_st_sync_dir(idx);
    idx_free(&x);
    return rc;
}

/* ---- one file out of the shards ----------------------------------------------------------- */

static int user_meta(const char *k) { return strncmp(k, "set.", 4) && strncmp(k, "crc32c", 6); }

/* Every shard carries the writer's metadata: the same in each, else they are of two saves. */
static int same_meta(ht_st_file **sh, char **paths, int n) {
    for (int k = 1; k < n; k++) {
        int a = 0, b = 0;
        for (int i = 0; i < sh[0]->nmeta; i++)
            a += user_meta(sh[0]->meta[i].key);
        for (int i = 0; i < sh[k]->nmeta; i++) {
            const char *key = sh[k]->meta[i].key, *v0 = ht_st_meta(sh[0], key);
            if (!user_meta(key)) continue;
            b++;
            if (!v0 || strcmp(v0, sh[k]->meta[i].val))
                return ht_error(HT_EINPUT, "%s: metadata '%s' is '%s', but %s has %s%s%s: a "
                                           "torn set, expected the metadata of one save",
                                paths[k], key, sh[k]->meta[i].val, paths[0], v0 ? "'" : "none",
                                v0 ? v0 : "", v0 ? "'" : "");
        }
        if (a != b)
            return ht_error(HT_EINPUT, "%s: %d metadata keys, but %s has %d: a torn set", paths[k],
                            b, paths[0], a);
    }
    return HT_OK;
}

typedef struct piece {
    int shard;
    const st_entry *e;
    int64_t off, total;
    size_t blen; /* the base name's length */
} piece;

static int cmp_piece(const void *a, const void *b) {
    const piece *x = a, *y = b;
    int c = x->blen != y->blen ? (x->blen < y->blen ? -1 : 1)
                               : strncmp(x->e->name, y->e->name, x->blen);
    return c ? c : (x->off > y->off) - (x->off < y->off);
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp((*(st_entry *const *)a)->name, (*(st_entry *const *)b)->name);
}

static int cmp_m(const void *a, const void *b) {
    return strcmp(((const st_meta *)a)->key, ((const st_meta *)b)->key);
}

static void add_entry(ht_st_file *f, size_t *at, const char *name, size_t nlen,
                      const st_dtype *dt, int ndim, const int64_t *shape, uint64_t bytes,
                      int shard) {
    st_entry *e = &f->t[f->nt++];
    memset(e, 0, sizeof *e);
    e->name_at = f->pool.len;
    ht_jbuf_put(&f->pool, name, nlen);
    ht_jbuf_put(&f->pool, "", 1);
    e->dtype = dt;
    e->ndim = ndim;
    for (int d = 0; d < HT_ST_MAX_DIM; d++)
        e->shape[d] = shape[d];
    e->begin = *at;
    e->end = *at + bytes;
    e->key_off = (uint64_t)shard; /* for messages: which shard it came from */
    *at += (bytes + 7) / 8 * 8;
}

/* A header-only set: the bytes of shard k's tensor e become those at byte lo of entry t. */
static void add_ext(st_entry *t, const st_entry *e, int k, uint64_t lo) {
    t->x = ht_xrealloc(t->x, (size_t)(t->nx + 1) * sizeof *t->x);
    t->x[t->nx] = e->x[0];
    t->x[t->nx].src = k;
    t->x[t->nx].lo = lo;
    t->nx++;
}

/* Pieces p[0..n) (sorted) of one base tensor cover [0, total) exactly. */
static int check_cover(const piece *p, int n, char **paths) {
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        int ok = !strcmp(p[i].e->dtype->name, "F32") && p[i].e->ndim == 1 && p[i].off == at &&
                 p[i].total == p[0].total;
        if (!ok)
            return ht_error(HT_EINPUT, "%s: piece '%s' (%lld floats at %lld of %lld) does not "
                                       "continue the pieces before it at %lld: expected 1-D F32 "
                                       "pieces that cover the tensor once",
                            paths[p[i].shard], p[i].e->name, (long long)p[i].e->shape[0],
                            (long long)p[i].off, (long long)p[i].total, (long long)at);
        at += p[i].e->shape[0];
    }
    if (at != p[0].total)
        return ht_error(HT_EINPUT, "%s: the pieces of '%.*s' cover %lld of its %lld floats: a "
                                   "shard is missing", paths[p[n - 1].shard], (int)p[0].blen,
                        p[0].e->name, (long long)at, (long long)p[0].total);
    return HT_OK;
}

/* Lays out f's entries (whole tensors, then each pieced tensor) and fills f->data. */
static int merge_data(ht_st_file *f, ht_st_file **sh, char **paths, int n, piece *pc, int np) {
    size_t at = 0;
    int total_t = 0;
    for (int k = 0; k < n; k++)
        total_t += sh[k]->nt;
    f->t = ht_xcalloc((size_t)(total_t ? total_t : 1), sizeof *f->t);
    for (int pass = 0; pass < 2; pass++) {
        at = 0;
        f->nt = 0;
        f->pool.len = 0;
        for (int k = 0; k < n; k++)
            for (int i = 0; i < sh[k]->nt; i++) {
                const st_entry *e = &sh[k]->t[i];
                int is_piece = 0;
                for (int q = 0; q < np && !is_piece; q++)
                    is_piece = pc[q].e == e;
                if (is_piece) continue;
                if (pass && !f->lazy) memcpy(f->data + at, sh[k]->data + e->begin, e->end - e->begin);
                add_entry(f, &at, e->name, strlen(e->name), e->dtype, e->ndim, e->shape,
                          e->end - e->begin, k);
                if (pass && f->lazy) add_ext(&f->t[f->nt - 1], e, k, 0);
            }
        for (int q = 0; q < np;) {
            int r = q;
            while (r < np && pc[r].blen == pc[q].blen &&
                   !strncmp(pc[r].e->name, pc[q].e->name, pc[q].blen))
                r++;
            int rc = pass ? HT_OK : check_cover(pc + q, r - q, paths);
            if (rc != HT_OK) return rc;
            int64_t shape[HT_ST_MAX_DIM] = {pc[q].total, 1, 1, 1};
            size_t base = at;
            add_entry(f, &at, pc[q].e->name, pc[q].blen, ht_st_dtype_find("F32"), 1, shape,
                      (uint64_t)pc[q].total * 4, pc[q].shard);
            for (int s = q; pass && s < r; s++)
                if (f->lazy)
                    add_ext(&f->t[f->nt - 1], pc[s].e, pc[s].shard, (uint64_t)pc[s].off * 4);
                else
                    memcpy(f->data + base + (size_t)pc[s].off * 4,
                           sh[pc[s].shard]->data + pc[s].e->begin, pc[s].e->end - pc[s].e->begin);
            q = r;
        }
        if (!pass && !f->lazy) f->data = ht_xmalloc(at ? at : 1);
    }
    return HT_OK;
}

/* The pieces of every shard, sorted by base name and offset (*np of them). */
static piece *find_pieces(ht_st_file **sh, int n, int *np) {
    int cap = 0;
    piece *pc = NULL;
    *np = 0;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < sh[k]->nt; i++) {
            piece p = {.shard = k, .e = &sh[k]->t[i]};
            if (!piece_of(sh[k], p.e->name, &p.blen, &p.off, &p.total)) continue;
            if (*np == cap) pc = ht_xrealloc(pc, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *pc);
            pc[(*np)++] = p;
        }
    if (*np) qsort(pc, (size_t)*np, sizeof *pc, cmp_piece);
    return pc;
}

/* Names, sorted lookup, duplicates (a tensor in two shards) and the metadata. */
static int finish(ht_st_file *f, ht_st_file *first, char **paths) {
    for (int i = 0; i < f->nt; i++)
        f->t[i].name = f->pool.s + f->t[i].name_at;
    f->by_name = ht_xmalloc((size_t)(f->nt ? f->nt : 1) * sizeof *f->by_name);
    for (int i = 0; i < f->nt; i++)
        f->by_name[i] = &f->t[i];
    qsort(f->by_name, (size_t)f->nt, sizeof *f->by_name, cmp_entry);
    for (int i = 1; i < f->nt; i++)
        if (!strcmp(f->by_name[i]->name, f->by_name[i - 1]->name))
            return ht_error(HT_EINPUT, "%s: tensor '%s' is also in %s: expected each tensor in "
                                       "one shard", paths[f->by_name[i]->key_off],
                            f->by_name[i]->name, paths[f->by_name[i - 1]->key_off]);
    f->meta = ht_xmalloc((size_t)(first->nmeta ? first->nmeta : 1) * sizeof *f->meta);
    for (int i = 0; i < first->nmeta; i++) {
        if (!user_meta(first->meta[i].key)) continue;
        st_meta *m = &f->meta[f->nmeta++];
        memset(m, 0, sizeof *m);
        m->key_at = f->pool.len;
        ht_jbuf_put(&f->pool, first->meta[i].key, strlen(first->meta[i].key) + 1);
        m->val_at = f->pool.len;
        ht_jbuf_put(&f->pool, first->meta[i].val, strlen(first->meta[i].val) + 1);
    }
    for (int i = 0; i < f->nt; i++) /* the pool may have moved */
        f->t[i].name = f->pool.s + f->t[i].name_at;
    for (int i = 0; i < f->nmeta; i++) {
        f->meta[i].key = f->pool.s + f->meta[i].key_at;
        f->meta[i].val = f->pool.s + f->meta[i].val_at;
    }
    if (f->nmeta) qsort(f->meta, (size_t)f->nmeta, sizeof *f->meta, cmp_m);
    for (int i = 0; i < f->nt && !f->lazy; i++)
        if (!strcmp(f->t[i].dtype->name, "F32")) f->t[i].data = (const float *)(f->data + f->t[i].begin);
    return HT_OK;
}

static int set_merge(ht_st_file **out, const char *index, ht_st_file **sh, char **paths, int n) {
    int rc = same_meta(sh, paths, n), np = 0;
    if (rc != HT_OK) return rc;
    piece *pc = find_pieces(sh, n, &np);
    ht_st_file *f = ht_xcalloc(1, sizeof *f);
    f->path = ht_xstrdup(index);
    f->checksummed = 1;
    for (int k = 0; k < n; k++)
        f->checksummed &= sh[k]->checksummed;
    if (sh[0]->lazy) { /* the shards' descriptors move to the set */
        f->lazy = 1, f->nsrc = n;
        f->src = ht_xmalloc((size_t)n * sizeof *f->src);
        f->fd = ht_xmalloc((size_t)n * sizeof *f->fd);
        for (int k = 0; k < n; k++) {
            f->src[k] = ht_xstrdup(sh[k]->path);
            f->fd[k] = sh[k]->fd[0], sh[k]->fd[0] = -1;
        }
    }
    rc = merge_data(f, sh, paths, n, pc, np);
    if (rc == HT_OK) rc = finish(f, sh[0], paths);
    free(pc);
    if (rc != HT_OK)
        ht_st_close(f);
    else
        *out = f;
    return rc;
}
