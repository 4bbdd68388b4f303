/* Parsing the text form of CNN layers ("conv 5 32 pad=2"): words separated by blanks,
 * positional integers first, then key=value options; everything checked, nothing guessed. */
#include "nn/layer_spec.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

const char *const ht_layer_spec_kinds[] = {"conv", "maxpool", "avgpool", "relu",
                                           "gelu", "flatten", "linear",  NULL};

/* The expected form of each kind, indexed by ht_spec_kind. */
static const char *const FORMS[] = {
    "\"conv K N [stride=S] [pad=P]\" (K: kernel size, N: output channels, integers >= 1; "
    "pad >= 0)",
    "\"maxpool K [stride=S]\" (K: window size >= 1; stride defaults to K)",
    "\"avgpool K [stride=S]\" (K: window size >= 1; stride defaults to K)",
    "\"relu\" (no arguments)",
    "\"gelu\" (no arguments)",
    "\"flatten\" (no arguments)",
    "\"linear N\" (N: outputs, an integer >= 1)",
};
/* positional integers each kind takes; options: stride (conv, pools), pad (conv) */
static const int NPOS[] = {2, 1, 1, 0, 0, 0, 1};
_Static_assert(sizeof FORMS / sizeof *FORMS == HT_SPEC_LINEAR + 1 &&
                   sizeof NPOS / sizeof *NPOS == HT_SPEC_LINEAR + 1 &&
                   sizeof ht_layer_spec_kinds / sizeof *ht_layer_spec_kinds == HT_SPEC_LINEAR + 2,
               "a form, a positional count and a word per ht_spec_kind");

#define MAX_WORDS 8

/* A whole word as an int in [lo, INT_MAX]; 0 when it is not one. */
static int parse_int(const char *w, int lo, int *out) {
    char *end;
    errno = 0;
    long v = strtol(w, &end, 10);
    if (!*w || *end || errno == ERANGE || v < lo || v > INT_MAX) return 0;
    *out = (int)v;
    return 1;
}

int ht_layer_spec_parse(const char *text, ht_layer_spec *out, char *err, size_t errn) {
    char buf[256], *words[MAX_WORDS];
    int nw = 0;
    if (strlen(text) >= sizeof buf) {
        snprintf(err, errn, "a layer of at most %zu characters", sizeof buf - 1);
        return HT_EINPUT;
    }
    strcpy(buf, text);
    for (char *save = NULL, *w = strtok_r(buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        if (nw == MAX_WORDS) break;
        words[nw++] = w;
    }
    int kind = -1;
    for (int i = 0; nw && ht_layer_spec_kinds[i]; i++)
        if (!strcmp(words[0], ht_layer_spec_kinds[i])) kind = i;
    if (kind < 0) {
        snprintf(err, errn,
                 "a layer: conv, maxpool, avgpool, relu, gelu, flatten or linear, with "
                 "arguments (e.g. \"conv 5 32 pad=2\", \"linear 10\")");
        return HT_EINPUT;
    }
    memset(out, 0, sizeof *out);
    out->kind = (ht_spec_kind)kind;
    int vals[2] = {0, 0}, npos = 0, bad = 0;
    out->stride = -1;
    for (int i = 1; i < nw && !bad; i++) {
        char *eq = strchr(words[i], '=');
        if (!eq) {
            bad = npos >= NPOS[kind] || i != npos + 1 || !parse_int(words[i], 1, &vals[npos]);
            npos++;
            continue;
        }
        *eq = 0;
        const char *key = words[i], *val = eq + 1;
        int is_stride = !strcmp(key, "stride") && kind <= HT_SPEC_AVGPOOL;
        int is_pad = !strcmp(key, "pad") && kind == HT_SPEC_CONV, v = 0;
        if (!(is_stride || is_pad) || !parse_int(val, is_pad ? 0 : 1, &v))
            bad = 1;
        else if (!strcmp(key, "stride"))
            out->stride = v;
        else
            out->pad = v;
    }
    if (bad || npos != NPOS[kind] || nw == MAX_WORDS) {
        snprintf(err, errn, "%s", FORMS[kind]);
        return HT_EINPUT;
    }
    switch (out->kind) {
    case HT_SPEC_CONV:
        out->k = vals[0];
        out->n = vals[1];
        if (out->stride < 0) out->stride = 1;
        break;
    case HT_SPEC_MAXPOOL:
    case HT_SPEC_AVGPOOL:
        out->k = vals[0];
        if (out->stride < 0) out->stride = out->k;
        break;
    case HT_SPEC_LINEAR:
        out->n = vals[0];
        out->stride = 0;
        break;
    default:
        out->stride = 0;
        break;
    }
    return HT_OK;
}

void ht_layer_spec_str(const ht_layer_spec *s, char *buf, size_t n) {
    const char *name = ht_layer_spec_kinds[s->kind];
    switch (s->kind) {
    case HT_SPEC_CONV: {
        size_t len = (size_t)snprintf(buf, n, "conv%dx%d", s->k, s->n);
        if (s->stride != 1 && len < n)
            len += (size_t)snprintf(buf + len, n - len, "s%d", s->stride);
        if (s->pad && len < n) snprintf(buf + len, n - len, "p%d", s->pad);
        break;
    }
    case HT_SPEC_MAXPOOL:
    case HT_SPEC_AVGPOOL:
        if (s->stride != s->k)
            snprintf(buf, n, "%s%ds%d", name, s->k, s->stride);
        else
            snprintf(buf, n, "%s%d", name, s->k);
        break;
    case HT_SPEC_LINEAR:
        snprintf(buf, n, "linear%d", s->n);
        break;
    default:
        snprintf(buf, n, "%s", name);
        break;
    }
}
