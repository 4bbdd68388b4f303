/* Text generation from a GPT checkpoint: the model the config describes, loaded with the
 * checkpoint's parameters, runs forward on the last model.context tokens and samples the
 * next token (softmax at a temperature, or greedy), draws being a pure function of the seed
 * and the position, so a seed always gives the same text. A byte-level model (data.kind
 * "text") reads the prompt as bytes and prints bytes; a model of token files reads and
 * prints token ids (hettrain has no BPE tokenizer: tools/tokenize.py turns text into ids). */
#include "train/generate.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "build/build.h"
#include "core/err.h"
#include "core/log.h"
#include "core/rng.h"
#include "train/checkpoint.h"

/* The next byte from a logits row: argmax (lowest index on ties) at temperature 0, else
 * inverse-CDF sampling of softmax(z / temperature) with u from counter `pos`. */
static int sample(const float *z, int V, double temperature, uint64_t stream, uint64_t pos) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (z[v] > z[best]) best = v;
    if (temperature == 0) return best;
    double *p = ht_xmalloc((size_t)V * sizeof *p), sum = 0;
    for (int v = 0; v < V; v++)
        sum += p[v] = exp(((double)z[v] - z[best]) / temperature);
    double u = (double)(ht_rng_u64(stream, pos) >> 11) * (1.0 / 9007199254740992.0) * sum;
    int pick = best; /* if rounding leaves u just past the end */
    for (int v = 0; v < V; v++) {
        if (u < p[v]) {
            pick = v;
            break;
        }
        u -= p[v];
    }
    free(p);
    return pick;
}

/* The prompt of a token model: ids separated by spaces or commas, each in [0, V). */
static int parse_ids(const char *prompt, int V, int32_t *ids, size_t *n) {
    const char *p = prompt;
    *n = 0;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v >= V || (*end && !strchr(" ,\t\n", *end)))
            return ht_error(HT_EINPUT,
                            "--prompt: '%.*s' at character %zu: expected token ids in [0, %d) "
                            "separated by spaces or commas (model.vocab %d; data.kind "
                            "\"tokens\" prompts are ids, not text)",
                            (int)strcspn(p, " ,\t\n"), p, (size_t)(p - prompt), V, V);
        ids[(*n)++] = (int32_t)v;
        p = end;
    }
    if (!*n) return ht_error(HT_EINPUT, "--prompt holds no token id");
    return HT_OK;
}

static void emit(FILE *out, int bytes, int32_t t, int first) {
    if (bytes) fputc(t, out);
    else fprintf(out, first ? "%d" : " %d", t);
}

int ht_generate(const ht_config *cfg, const ht_generate_opts *o, FILE *out) {
    const char *ckpt = o->checkpoint && *o->checkpoint ? o->checkpoint : cfg->checkpoint.path;
    struct stat st;
    int found = 0;
    if (strcmp(cfg->model.type, "gpt") != 0)
        return ht_error(HT_EINPUT,
                        "generate needs a language model: %s has model.type \"%s\", expected "
                        "\"gpt\"",
                        cfg->source, cfg->model.type);
    if (!*ckpt)
        return ht_error(HT_EINPUT, "generate needs a checkpoint: give --checkpoint PATH (or "
                                   "checkpoint.path in the config)");
    found = stat(ckpt, &st) == 0;
    if (!found && ht_st_exists(ckpt)) found = 2; /* a sharded set */
    if (!found || (found == 1 && S_ISDIR(st.st_mode)))
        return ht_error(HT_EINPUT,
                        "checkpoint '%s' %s: train first (hettrain -c %s) or give the "
                        "path of a saved checkpoint",
                        ckpt, found ? "is a directory" : "does not exist", cfg->source);
    if (!o->prompt || !*o->prompt)
        return ht_error(HT_EINPUT, "--prompt is empty: expected at least one byte of text");
    if (o->tokens < 1) return ht_error(HT_EINPUT, "--tokens %d: expected >= 1", o->tokens);
    if (!(o->temperature >= 0 && isfinite(o->temperature)))
        return ht_error(HT_EINPUT, "--temperature %g: expected a finite number >= 0",
                        o->temperature);

    int rc, dev_index = 0;
    if ((rc = ht_ocl_select(o->device ? o->device : cfg->device.select, &dev_index)) != HT_OK)
        return rc;
    ht_dev_opts dopts = ht_dev_opts_default();
    dopts.cache = cfg->device.cache;
    dopts.cache_dir = cfg->device.cache_dir;
    dopts.tuning = cfg->device.tuning;
    ht_dev *dev = NULL;
    if ((rc = ht_dev_open(&dev, dev_index, &dopts)) != HT_OK) return rc;
    ht_model m;
    if ((rc = ht_build_model(&m, dev, cfg, 0, cfg->model.vocab, 1)) != HT_OK) goto out_dev;
    int64_t step = 0;
    if ((rc = ht_checkpoint_load_params(ckpt, &m, &step)) != HT_OK) goto out_model;
    ht_log_info("generating %d tokens from %s (%s, step %lld), temperature %g, seed %llu", o->tokens,
                ckpt, m.desc, (long long)step, o->temperature, (unsigned long long)o->seed);

    const int T = m.in_features, V = m.classes, bytes = strcmp(cfg->data.kind, "tokens") != 0;
    size_t plen = strlen(o->prompt), n = plen;
    int32_t *seq = ht_xmalloc((plen + (size_t)o->tokens) * sizeof *seq);
    if (bytes)
        for (size_t j = 0; j < plen; j++)
            seq[j] = (unsigned char)o->prompt[j];
    else if ((rc = parse_ids(o->prompt, V, seq, &n)) != HT_OK) {
        free(seq);
        goto out_model;
    }
    int32_t *tok = ht_xcalloc((size_t)T, sizeof *tok);
    float *z = ht_xmalloc((size_t)V * sizeof *z);
    uint64_t stream = ht_rng_stream(o->seed, 0x5a3b1e /* "sample" */);
    for (size_t j = 0; j < n; j++)
        emit(out, bytes, seq[j], j == 0);
    for (int i = 0; i < o->tokens; i++) {
        /* the last T tokens at positions 0..len-1; later positions are masked causally and
         * hold zeros */
        size_t len = n < (size_t)T ? n : (size_t)T;
        for (size_t j = 0; j < (size_t)T; j++)
            tok[j] = j < len ? seq[n - len + j] : 0;
        ht_model_set_batch_tokens(&m, tok, NULL, 1);
        ht_model_forward_range(&m, 0, m.nlayers, 1);
        ht_buf_read(dev, m.acts, (m.act_off[m.nlayers] + (len - 1) * (size_t)V) * sizeof(float),
                    (size_t)V * sizeof(float), z);
        seq[n] = sample(z, V, o->temperature, stream, (uint64_t)i);
        emit(out, bytes, seq[n++], 0);
        fflush(out);
    }
    fputc('\n', out);
    free(seq);
    free(tok);
    free(z);
out_model:
    ht_model_free(&m);
out_dev:
    ht_dev_close(dev);
    return rc;
}
