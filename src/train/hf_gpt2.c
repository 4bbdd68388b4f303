/* GPT-2 weights in the Hugging Face layout, both ways. GPT2LMHeadModel's safetensors name the
 * tensors "wte.weight", "h.N.attn.c_attn.weight", ... (with or without the "transformer."
 * prefix) and store every linear weight as Conv1D does, (in, out): the transpose of ours
 * (out, in). The head is tied to wte and has no bias (model.tie_embeddings). q, k and v sit in
 * c_attn's output as in ours ([q | k | v], head h at h * C/H), so a transpose is all a weight
 * needs. wpe may have more positions than model.context: the first context rows are used. */
#include "train/hf_gpt2.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/err.h"
#include "config/config.h" /* HT_PATH_MAX */
#include "core/path.h"
#include "io/json.h"
#include "io/safetensors.h"

/* One tensor of ours and its name in a block ("h.N." + hf) or at the top level. */
typedef struct {
    const char *ours, *hf;
    int transpose; /* Conv1D (in, out) against our (out, in) */
} name_map;

static const name_map k_block[] = {
    {"ln1.weight", "ln_1.weight", 0},           {"ln1.bias", "ln_1.bias", 0},
    {"attn.qkv.weight", "attn.c_attn.weight", 1}, {"attn.qkv.bias", "attn.c_attn.bias", 0},
    {"attn.proj.weight", "attn.c_proj.weight", 1}, {"attn.proj.bias", "attn.c_proj.bias", 0},
    {"ln2.weight", "ln_2.weight", 0},           {"ln2.bias", "ln_2.bias", 0},
    {"mlp.fc.weight", "mlp.c_fc.weight", 1},    {"mlp.fc.bias", "mlp.c_fc.bias", 0},
    {"mlp.proj.weight", "mlp.c_proj.weight", 1}, {"mlp.proj.bias", "mlp.c_proj.bias", 0},
};
static const name_map k_top[] = {
    {"embed.wte", "wte.weight", 0},
    {"embed.wpe", "wpe.weight", 0},
    {"lnf.weight", "ln_f.weight", 0},
    {"lnf.bias", "ln_f.bias", 0},
};
enum { NBLOCK = sizeof k_block / sizeof k_block[0], NTOP = sizeof k_top / sizeof k_top[0] };

/* The Hugging Face name of our tensor `ours` ("h3.attn.qkv.weight"), without prefix; 0 if
 * it has none (an untied head). */
static int hf_name(const char *ours, char *out, size_t n, int *transpose) {
    for (int i = 0; i < NTOP; i++)
        if (!strcmp(ours, k_top[i].ours)) {
            *transpose = 0;
            snprintf(out, n, "%s", k_top[i].hf);
            return 1;
        }
    int blk, used = 0;
    if (sscanf(ours, "h%d.%n", &blk, &used) != 1 || used == 0) return 0;
    for (int i = 0; i < NBLOCK; i++)
        if (!strcmp(ours + used, k_block[i].ours)) {
            *transpose = k_block[i].transpose;
            snprintf(out, n, "h.%d.%s", blk, k_block[i].hf);
            return 1;
        }
    return 0;
}

static size_t numel(const ht_param_tensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= (size_t)t->shape[i];
    return n;
}

/* ---------------------------------------------------------------- the files of a set */

/* A single file, or the shards an index json names (weight_map's distinct file names, in
 * the folder of the index). */
typedef struct {
    int n;
    ht_st_file *f[64];
    char path[64][HT_PATH_MAX];
} hf_set;

static void set_close(hf_set *s) {
    for (int i = 0; i < s->n; i++)
        ht_st_close(s->f[i]);
    s->n = 0;
}

static int set_add(hf_set *s, const char *path) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->path[i], path)) return HT_OK;
    if (s->n == 64) return ht_error(HT_EINPUT, "'%s': more than 64 shards", path);
    snprintf(s->path[s->n], HT_PATH_MAX, "%s", path);
    int rc = ht_st_open_header(&s->f[s->n], path); /* tensors read as needed: ht_st_read_f32 */
    if (rc == HT_OK) s->n++;
    return rc;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = ht_open_input(path, "index");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *b = ht_xmalloc(cap);
    size_t got;
    while ((got = fread(b + len, 1, cap - len, f)) > 0)
        if ((len += got) == cap) b = ht_xrealloc(b, cap *= 2);
    fclose(f);
    *n = len;
    return b;
}

/* weight_map's file names, each opened once, from the index's folder. */
static int set_open_index(hf_set *s, const char *index) {
    size_t n;
    char *text = slurp(index, &n);
    if (!text) return HT_EINPUT;
    char dir[HT_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", index);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = 0;
    else dir[0] = 0;
    ht_json j;
    ht_json_init(&j, text, n);
    int count = 0, rc = ht_json_expect(&j, '{', "at the start of the index") ? HT_EINPUT : HT_OK;
    int found = 0;
    while (rc == HT_OK && ht_json_more(&j, '}', &count) == 1) {
        char *key = NULL;
        if (ht_json_string(&j, &key) || ht_json_expect(&j, ':', "after a key")) rc = HT_EINPUT;
        else if (strcmp(key, "weight_map")) rc = ht_json_skip(&j) ? HT_EINPUT : HT_OK;
        else {
            found = 1;
            int c2 = 0;
            if (ht_json_expect(&j, '{', "for weight_map")) rc = HT_EINPUT;
            while (rc == HT_OK && ht_json_more(&j, '}', &c2) == 1) {
                char *name = NULL, *file = NULL;
                if (ht_json_string(&j, &name) || ht_json_expect(&j, ':', "after a tensor name") ||
                    ht_json_string(&j, &file))
                    rc = HT_EINPUT;
                else if (strchr(file, '/') || !strcmp(file, ".."))
                    rc = ht_error(HT_EINPUT, "%s: weight_map names '%s', expected a file beside "
                                             "the index", index, file);
                else {
                    char path[HT_PATH_MAX + 256];
                    snprintf(path, sizeof path, "%s%s", dir, file);
                    rc = set_add(s, path);
                }
                free(name);
                free(file);
            }
        }
        free(key);
    }
    if (rc == HT_EINPUT && j.err[0])
        rc = ht_error(HT_EINPUT, "%s: byte %zu: %s", index, j.err_off, j.err);
    else if (rc == HT_OK && !found)
        rc = ht_error(HT_EINPUT, "%s: no \"weight_map\": expected a safetensors index json", index);
    free(text);
    if (rc != HT_OK) set_close(s);
    return rc;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* A tensor of the set: its file (path, handle) and full name, to read with set_read. */
typedef struct {
    const char *file;
    ht_st_file *f;
    char full[160];
} hf_ref;

/* The tensor `name` (with the set's prefix) in whichever file holds it: 1 with its shape when
 * it is F32; 0 when no file has it (r->file NULL) or it is not F32 (r->file set, the error
 * recorded: bf16, fp16 are not read). Only the header is looked at. */
static int set_get(const hf_set *s, const char *prefix, const char *name, int *ndim,
                   int64_t shape[HT_ST_MAX_DIM], hf_ref *r) {
    snprintf(r->full, sizeof r->full, "%s%s", prefix, name);
    r->file = NULL, r->f = NULL;
    for (int i = 0; i < s->n; i++) {
        const char *dt = ht_st_dtype(s->f[i], r->full);
        if (!dt) continue;
        r->file = s->path[i], r->f = s->f[i];
        if (strcmp(dt, "F32"))
            return ht_error(HT_EINPUT, "%s: tensor '%s' is %s, expected F32", r->file, r->full,
                            dt), 0;
        return ht_st_shape(s->f[i], r->full, ndim, shape);
    }
    return 0;
}

/* The first n floats of r into a new host buffer (*out, to free). */
static int set_read(const hf_ref *r, size_t n, float **out) {
    *out = ht_xmalloc((n ? n : 1) * sizeof(float));
    int rc = ht_st_read_f32(r->f, r->full, 0, n, *out);
    if (rc != HT_OK) free(*out), *out = NULL;
    return rc;
}

/* ---------------------------------------------------------------- loading */

int ht_hf_gpt2_is(const char *path) {
    if (ends_with(path, ".json")) return 1;
    ht_st_file *f;
    if (ht_st_open_header(&f, path) != HT_OK) return 0;
    int hf = ht_st_dtype(f, "wte.weight") || ht_st_dtype(f, "transformer.wte.weight");
    ht_st_close(f);
    return hf;
}

/* Our tensor t from the set: shape checked (transposed where Conv1D), wpe cut to context. */
static int load_one(const hf_set *s, const char *prefix, const char *src, const ht_model *m,
                    const ht_param_tensor *t, float *params) {
    char name[128];
    int tr = 0;
    if (!hf_name(t->name, name, sizeof name, &tr)) return HT_OK; /* head: below */
    int nd = 0;
    int64_t sh[HT_ST_MAX_DIM] = {0};
    hf_ref r;
    const int have = set_get(s, prefix, name, &nd, sh, &r);
    const char *file = r.file;
    if (!have && file) return HT_EINPUT; /* there, but not F32 (bf16, fp16: not read) */
    if (!have)
        return ht_error(HT_EINPUT, "%s: no tensor '%s%s' for %s (expected GPT2LMHeadModel's "
                                   "names)", src, prefix, name, t->name);
    int64_t want0 = tr ? t->shape[1] : t->shape[0];
    int64_t want1 = t->ndim == 2 ? (tr ? t->shape[0] : t->shape[1]) : 0;
    int wpe = !strcmp(name, "wpe.weight");
    int ok = nd == t->ndim && (wpe ? sh[0] >= want0 : sh[0] == want0) && (nd < 2 || sh[1] == want1);
    if (!ok)
        return ht_error(HT_EINPUT,
                        "%s: tensor '%s%s' has shape [%lld%s%lld], expected [%lld%s%lld] for %s "
                        "(model.d_model, n_layer, vocab and context must match the checkpoint's; "
                        "wpe may have more positions than the context)",
                        file, prefix, name, (long long)sh[0], nd == 2 ? ", " : "",
                        nd == 2 ? (long long)sh[1] : 0LL, (long long)want0, t->ndim == 2 ? ", " : "",
                        t->ndim == 2 ? (long long)want1 : 0LL, t->name);
    if (!ht_model_holds(m, t->off, numel(t))) return HT_OK; /* another stage's: checked only */
    float *d; /* wpe: its first context rows */
    int rc = set_read(&r, numel(t), &d);
    if (rc != HT_OK) return rc;
    if (!tr) {
        ht_model_put(m, t->off, numel(t), d, params);
        free(d);
        return HT_OK;
    }
    int64_t rows = t->shape[0], cols = t->shape[1]; /* ours (out, in) = theirs (in, out)^T */
    float *out = ht_xmalloc(numel(t) * sizeof(float));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t c = 0; c < cols; c++)
            out[i * cols + c] = d[c * rows + i];
    ht_model_put(m, t->off, numel(t), out, params);
    free(out), free(d);
    return HT_OK;
}

/* An untied head (its own weight and bias) starts as GPT-2's: lm_head.weight if the file
 * has one, else wte; bias 0. */
static int load_untied_head(const hf_set *s, const char *prefix, const ht_model *m,
                            float *params) {
    const ht_layer *h = &m->layers[m->nlayers - 1];
    if (h->ntensors != 2 || h->t[0].tied) return HT_OK;
    int nd;
    int64_t sh[HT_ST_MAX_DIM];
    hf_ref r;
    int have = set_get(s, "", "lm_head.weight", &nd, sh, &r);
    if (!have && !r.file) have = set_get(s, prefix, "wte.weight", &nd, sh, &r);
    if (!have) return HT_EINPUT;
    const char *file = r.file;
    if (nd != 2 || sh[0] != h->t[0].shape[0] || sh[1] != h->t[0].shape[1])
        return ht_error(HT_EINPUT, "%s: lm_head.weight has shape [%lld, %lld], expected [%lld, "
                                   "%lld]", file, (long long)sh[0], (long long)sh[1],
                        (long long)h->t[0].shape[0], (long long)h->t[0].shape[1]);
    float *w;
    int rc = ht_model_holds(m, h->t[0].off, numel(&h->t[0])) ? set_read(&r, numel(&h->t[0]), &w)
                                                               : (w = NULL, HT_OK);
    if (rc != HT_OK) return rc;
    if (w) ht_model_put(m, h->t[0].off, numel(&h->t[0]), w, params);
    free(w);
    float *zero = ht_xcalloc(numel(&h->t[1]), sizeof(float));
    ht_model_put(m, h->t[1].off, numel(&h->t[1]), zero, params);
    free(zero);
    return HT_OK;
}

int ht_hf_gpt2_load(const char *path, ht_model *m) {
    if (strcmp(m->type, "gpt"))
        return ht_error(HT_EINPUT, "%s: a GPT-2 checkpoint needs model.type \"gpt\"", path);
    hf_set s = {0};
    int rc = ends_with(path, ".json") ? set_open_index(&s, path) : set_add(&s, path);
    if (rc != HT_OK) return rc;
    int nd;
    int64_t sh[HT_ST_MAX_DIM];
    hf_ref r;
    const char *prefix = set_get(&s, "transformer.", "wte.weight", &nd, sh, &r) ? "transformer."
                                                                                 : "";
    char extra[160];
    snprintf(extra, sizeof extra, "h.%d.ln_1.weight", m->nlayers - 3); /* blocks: nlayers - 3 */
    if (set_get(&s, prefix, extra, &nd, sh, &r)) {
        set_close(&s);
        return ht_error(HT_EINPUT, "%s: holds a block %s%s, more than model.n_layer = %d", path,
                        prefix, extra, m->nlayers - 3);
    }
    int nt = ht_model_param_tensors(m, NULL, 0);
    ht_param_tensor *t = ht_xmalloc((size_t)nt * sizeof *t);
    ht_model_param_tensors(m, t, nt);
    /* a pipeline rank holds its windows only (a tied copy of wte among them): every tensor
     * is checked, only those floats are copied */
    const size_t held = m->pres;
    float *params = ht_xmalloc((held ? held : 1) * sizeof(float));
    if (held) ht_buf_read(m->dev, m->params, 0, held * sizeof(float), params);
    for (int i = 0; rc == HT_OK && i < nt; i++)
        rc = load_one(&s, prefix, path, m, &t[i], params);
    if (rc == HT_OK) rc = load_untied_head(&s, prefix, m, params);
    if (rc == HT_OK && held) ht_buf_write(m->dev, m->params, 0, held * sizeof(float), params);
    free(params);
    free(t);
    set_close(&s);
    return rc;
}

/* ---------------------------------------------------------------- saving */

static int write_text(const char *path, const char *text) {
    char tmp[HT_PATH_MAX + 64];
    snprintf(tmp, sizeof tmp, "%.*s.tmp", HT_PATH_MAX + 32, path);
    FILE *f = fopen(tmp, "w");
    int ok = f && fputs(text, f) >= 0;
    if (f) ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path)) {
        int e = errno;
        remove(tmp);
        return ht_error(HT_ERUNTIME, "cannot write %s: %s", path, strerror(e));
    }
    return HT_OK;
}

static int write_config(const char *dir, const ht_model *m, int n_head) {
    const ht_layer *e = &m->layers[0];
    int V = (int)e->t[0].shape[0], C = (int)e->t[0].shape[1], T = (int)e->t[1].shape[0];
    ht_jbuf b = {0};
    ht_jbuf_printf(&b,
                   "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
                   "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_ctx\": %d,\n"
                   "  \"n_embd\": %d,\n  \"n_layer\": %d,\n  \"n_head\": %d,\n"
                   "  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": 1e-05,\n"
                   "  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0,\n"
                   "  \"scale_attn_weights\": true,\n  \"tie_word_embeddings\": true,\n"
                   "  \"torch_dtype\": \"float32\"\n}\n",
                   V, T, T, C, m->nlayers - 3, n_head);
    char path[HT_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = write_text(path, b.s);
    ht_jbuf_free(&b);
    return rc;
}

int ht_hf_gpt2_save(const char *dir, const ht_model *m) {
    if (strcmp(m->type, "gpt") || !m->tied)
        return ht_error(HT_EINPUT,
                        "export as GPT-2 needs a GPT with model.tie_embeddings = true (GPT-2's head "
                        "is wte without a bias; this model's head has its own weight and bias)");
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode))
        return ht_error(HT_EINPUT, "-o %s: not a folder (create it first)", dir);
    int nt = ht_model_param_tensors((ht_model *)m, NULL, 0);
    ht_param_tensor *t = ht_xmalloc((size_t)nt * sizeof *t);
    ht_model_param_tensors((ht_model *)m, t, nt);
    float *params = ht_xmalloc(m->nparams * sizeof(float)), *conv = ht_xmalloc(m->nparams * sizeof(float));
    ht_buf_read(m->dev, m->params, 0, m->nparams * sizeof(float), params);
    ht_st_tensor *out = ht_xcalloc((size_t)nt, sizeof *out);
    char (*names)[160] = ht_xcalloc((size_t)nt, sizeof *names);
    int rc = HT_OK;
    for (int i = 0; rc == HT_OK && i < nt; i++) {
        char name[128];
        int tr;
        if (!hf_name(t[i].name, name, sizeof name, &tr)) {
            rc = ht_error(HT_ERUNTIME, "export: no GPT-2 name for tensor %s", t[i].name);
            break;
        }
        snprintf(names[i], sizeof names[i], "transformer.%s", name);
        out[i] = (ht_st_tensor){names[i], t[i].ndim, {t[i].shape[0], t[i].shape[1]}, params + t[i].off};
        if (tr) { /* ours (out, in) -> Conv1D (in, out) */
            int64_t rows = t[i].shape[0], cols = t[i].shape[1];
            float *c = conv + t[i].off;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t k = 0; k < cols; k++)
                    c[k * rows + r] = params[t[i].off + r * cols + k];
            out[i].shape[0] = cols, out[i].shape[1] = rows, out[i].data = c;
        }
    }
    char path[HT_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    const char *k[] = {"format"}, *v[] = {"pt"};
    if (rc == HT_OK) rc = ht_st_write(path, out, nt, k, v, 1);
    if (rc == HT_OK) rc = write_config(dir, m, m->nlayers > 3 ? m->layers[1].heads : 1);
    free(names);
    free(out);
    free(conv);
    free(params);
    free(t);
    return rc;
}
