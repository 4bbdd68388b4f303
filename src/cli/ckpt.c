/* hettrain ckpt merge IN OUT | ckpt split IN OUT --shards K: for users who move checkpoints
 * between clusters. IN is a file or a sharded set (read as one file, every shard verified);
 * OUT must not exist yet (never a checkpoint replaced that is not ours to replace). */
#include "cli/ckpt.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "io/safetensors.h"

static void usage(FILE *f) {
    fprintf(f, "usage: hettrain ckpt merge IN OUT\n"
               "       hettrain ckpt split IN OUT --shards K\n"
               "IN: a checkpoint file, or a sharded set (its PATH, or PATH.safetensors.index.json,\n"
               "as checkpoint.path names them). merge writes the set as the one file OUT; split\n"
               "writes IN as K shards OUT-0000i-of-0000K.safetensors plus the index json\n"
               "(Hugging Face's layout; OUT without its .safetensors). OUT must not exist.\n");
}

/* Every tensor of f (F32) in header order, and its metadata without checksums and set keys. */
static int collect(const ht_st_file *f, ht_st_tensor *t, const char **mk, const char **mv,
                   int *nmeta) {
    int rc = HT_OK;
    for (int i = 0; rc == HT_OK && i < ht_st_count(f); i++) {
        t[i].name = ht_st_name(f, i);
        t[i].data = ht_st_get(f, t[i].name, &t[i].ndim, t[i].shape);
        if (!t[i].data) rc = HT_EINPUT; /* not F32: ht_st_get said why */
    }
    *nmeta = 0;
    for (int i = 0; i < ht_st_meta_count(f); i++) {
        const char *k, *v;
        ht_st_meta_at(f, i, &k, &v);
        if (strncmp(k, "crc32c", 6) && strncmp(k, "set.", 4)) mk[*nmeta] = k, mv[(*nmeta)++] = v;
    }
    return rc;
}

static int64_t bytes_of(const ht_st_tensor *t) {
    int64_t n = 4;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

/* Shards of about equal bytes, tensors whole and in order. */
static int split(const char *out, int k, const ht_st_tensor *t, int nt, const char **mk,
                 const char **mv, int nmeta, int64_t step) {
    int64_t total = 0, acc = 0;
    for (int i = 0; i < nt; i++)
        total += bytes_of(&t[i]);
    int rc = HT_OK, first = 0;
    for (int s = 0; rc == HT_OK && s < k; s++) {
        int last = first;
        /* at least one tensor each, and enough left for the shards after this one */
        while (last < nt - (k - 1 - s) &&
               (last == first || acc + bytes_of(&t[last]) / 2 <= total * (s + 1) / k))
            acc += bytes_of(&t[last++]);
        rc = ht_st_set_write_shard(out, s + 1, k, step, t + first, last - first, mk, mv, nmeta);
        first = last;
    }
    return rc == HT_OK ? ht_st_set_commit(out, k, step) : rc;
}

static int run(const char *cmd, const char *in, const char *out, int k) {
    if (ht_st_exists(out))
        return ht_error(HT_EINPUT, "ckpt %s: '%s' already exists (a file or a sharded set); "
                                   "expected a new path", cmd, out);
    ht_st_file *f = NULL;
    int rc = ht_st_open(&f, in);
    if (rc != HT_OK) return rc;
    int nt = ht_st_count(f), nm = ht_st_meta_count(f), nmeta = 0;
    if (k > nt) {
        ht_st_close(f);
        return ht_error(HT_EINPUT, "ckpt split: --shards %d, but '%s' holds %d tensors; "
                                   "expected at most one shard per tensor", k, in, nt);
    }
    ht_st_tensor *t = ht_xcalloc((size_t)(nt ? nt : 1), sizeof *t);
    const char **mk = ht_xmalloc((size_t)(nm + 1) * sizeof *mk);
    const char **mv = ht_xmalloc((size_t)(nm + 1) * sizeof *mv);
    rc = collect(f, t, mk, mv, &nmeta);
    const char *sv = ht_st_meta(f, "step");
    int64_t step = sv ? strtoll(sv, NULL, 10) : 0;
    if (rc == HT_OK)
        rc = k ? split(out, k, t, nt, mk, mv, nmeta, step) : ht_st_write(out, t, nt, mk, mv, nmeta);
    if (rc == HT_OK)
        printf("wrote %s: %d tensors%s%s (step %" PRId64 ")\n", out, nt, k ? " in " : "",
               k ? "shards" : "", step);
    free(t);
    free(mk);
    free(mv);
    ht_st_close(f);
    return rc;
}

int ht_ckpt_cli(int argc, char **argv) {
    const char *pos[3] = {0};
    int np = 0, k = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--shards")) {
            char *end = NULL;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || *end || v < 1 || v > 99999)
                ht_die(HT_EINPUT, "ckpt: --shards '%s': expected an integer from 1 to 99999",
                       i + 1 < argc ? argv[i + 1] : "");
            k = (int)v;
            i++;
        } else if (np < 3)
            pos[np++] = argv[i];
        else
            ht_die(HT_EINPUT, "ckpt: unexpected argument '%s' (hettrain ckpt --help)", argv[i]);
    }
    int merge = np == 3 && !strcmp(pos[0], "merge"), splt = np == 3 && !strcmp(pos[0], "split");
    if (!merge && !splt) {
        usage(stderr);
        ht_die(HT_EINPUT, "ckpt: expected 'merge IN OUT' or 'split IN OUT --shards K'");
    }
    if (merge && k >= 0) ht_die(HT_EINPUT, "ckpt merge: --shards is for split");
    if (splt && k < 0) ht_die(HT_EINPUT, "ckpt split: --shards K is required");
    int rc = run(pos[0], pos[1], pos[2], merge ? 0 : k);
    ht_exit_on_error(rc);
    return 0;
}
