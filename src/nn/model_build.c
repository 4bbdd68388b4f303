/* Model builders: an MLP from widths, a CNN from layer specs ("conv 5 32 pad=2", ...), a
 * byte-level GPT from its sizes. Each validates its arguments (HT_EINPUT naming the bad
 * one), appends layers through the kinds' constructors, and writes the architecture
 * signature that checkpoints compare (m->desc). */
#include <stdio.h>
#include <string.h>

#include "core/err.h"
#include "nn/layer.h"
#include "nn/layer_spec.h"

int ht_act_parse(const char *name) {
    if (!name || !*name || !strcmp(name, "none")) return HT_ACT_NONE;
    if (!strcmp(name, "relu")) return HT_ACT_RELU;
    if (!strcmp(name, "gelu")) return HT_ACT_GELU;
    return -1;
}

const char *ht_act_name(ht_act act) {
    switch (act) {
    case HT_ACT_RELU:
        return "relu";
    case HT_ACT_GELU:
        return "gelu";
    default:
        return "none";
    }
}

/* Appends text to m->desc (truncation is harmless: it only shortens a signature). */
static void desc_add(ht_model *m, const char *text) {
    size_t len = strlen(m->desc);
    snprintf(m->desc + len, sizeof m->desc - len, "%s", text);
}

/* Frees a half-built model and passes rc on. */
static int fail(ht_model *m, int rc) {
    ht_model_free(m);
    return rc;
}

/* ---------------------------------------------------------------- MLP */

int ht_model_mlp_desc(ht_model *m, int in_features, const int *hidden, int nhidden, int classes,
                      const char *activation, int max_batch) {
    memset(m, 0, sizeof *m);
    int act = ht_act_parse(activation);
    if (act <= HT_ACT_NONE && nhidden > 0)
        return ht_error(HT_EINPUT, "model: activation '%s' is not one of relu, gelu",
                        activation ? activation : "");
    if (in_features <= 0 || classes <= 0 || max_batch <= 0 || nhidden < 0 || (nhidden && !hidden))
        return ht_error(HT_EINPUT,
                        "model: need in_features > 0, classes > 0, batch > 0 (got %d, %d, %d)",
                        in_features, classes, max_batch);
    for (int i = 0; i < nhidden; i++)
        if (hidden[i] <= 0)
            return ht_error(HT_EINPUT, "model: hidden layer %d has width %d (must be > 0)", i + 1,
                            hidden[i]);
    ht_chain_begin(m, ht_shape1(in_features), 0);
    snprintf(m->type, sizeof m->type, "mlp");
    snprintf(m->desc, sizeof m->desc, "mlp %d", in_features);
    char name[32], num[16];
    for (int i = 0; i < nhidden; i++) {
        snprintf(name, sizeof name, "fc%d", i + 1);
        ht_layer_add_linear(m, name, hidden[i], 0, 0.0f, name);
        snprintf(name, sizeof name, "%s%d", ht_act_name((ht_act)act), i + 1);
        ht_layer_add_act(m, name, (ht_act)act, name);
        snprintf(num, sizeof num, "-%d", hidden[i]);
        desc_add(m, num);
    }
    snprintf(name, sizeof name, "fc%d", nhidden + 1);
    ht_layer_add_linear(m, name, classes, 0, 0.0f, name);
    snprintf(num, sizeof num, "-%d", classes);
    desc_add(m, num);
    if (nhidden) {
        desc_add(m, " ");
        desc_add(m, ht_act_name((ht_act)act));
    }
    return ht_chain_finish(m, classes, 1, max_batch);
}

/* ---------------------------------------------------------------- CNN */

int ht_model_cnn_desc(ht_model *m, ht_shape in, const char *const *specs, int nspecs, int classes,
                      int max_batch) {
    memset(m, 0, sizeof *m);
    if (in.ndim != 3 || in.d[0] < 1 || in.d[1] < 1 || in.d[2] < 1)
        return ht_error(HT_EINPUT, "model: a CNN needs a (C,H,W) input shape with every size >= 1");
    if (classes <= 0 || max_batch <= 0 || nspecs < 1)
        return ht_error(HT_EINPUT, "model: need layers, classes > 0, batch > 0 (got %d, %d, %d)",
                        nspecs, classes, max_batch);
    ht_chain_begin(m, in, 0);
    snprintf(m->type, sizeof m->type, "cnn");
    snprintf(m->desc, sizeof m->desc, "cnn %dx%dx%d ", in.d[0], in.d[1], in.d[2]);
    int count[HT_SPEC_LINEAR + 1] = {0}; /* per kind, for the names (conv1, maxpool2, ...) */
    for (int i = 0; i < nspecs; i++) {
        ht_layer_spec s;
        char what[128], err[256], name[32], str[48];
        snprintf(what, sizeof what, "model.layers[%d] \"%.80s\"", i, specs[i]);
        if (ht_layer_spec_parse(specs[i], &s, err, sizeof err) != HT_OK)
            return fail(m, ht_error(HT_EINPUT, "%s: expected %s", what, err));
        int k = ++count[s.kind], rc;
        snprintf(name, sizeof name, "%s%d",
                 s.kind == HT_SPEC_CONV     ? "conv"
                 : s.kind == HT_SPEC_LINEAR ? "fc"
                                            : ht_layer_spec_kinds[s.kind],
                 k);
        switch (s.kind) {
        case HT_SPEC_CONV:
            rc = ht_layer_add_conv(m, name, s.n, s.k, s.stride, s.pad, what);
            break;
        case HT_SPEC_MAXPOOL:
            rc = ht_layer_add_maxpool(m, name, s.k, s.stride, what);
            break;
        case HT_SPEC_AVGPOOL:
            rc = ht_layer_add_avgpool(m, name, s.k, s.stride, what);
            break;
        case HT_SPEC_RELU:
            rc = ht_layer_add_act(m, name, HT_ACT_RELU, what);
            break;
        case HT_SPEC_GELU:
            rc = ht_layer_add_act(m, name, HT_ACT_GELU, what);
            break;
        case HT_SPEC_FLATTEN:
            rc = ht_layer_add_flatten(m, name, what);
            break;
        default:
            rc = ht_layer_add_linear(m, name, s.n, 0, 0.0f, what);
            break;
        }
        if (rc != HT_OK) return fail(m, rc);
        ht_layer_spec_str(&s, str, sizeof str);
        if (i) desc_add(m, "-");
        desc_add(m, str);
    }
    ht_shape out = ht_chain_shape(m);
    if (out.ndim != 1 || out.d[0] != classes) {
        char s[32];
        ht_shape_str(&out, s, sizeof s);
        return fail(m, ht_error(HT_EINPUT,
                                "model.layers: the last layer gives %s outputs per sample, but "
                                "the data has %d classes (end with \"linear %d\")",
                                s, classes, classes));
    }
    return ht_chain_finish(m, classes, 1, max_batch);
}

/* ---------------------------------------------------------------- GPT */

int ht_model_gpt_desc(ht_model *m, int vocab, int T, int n_layer, int d_model, int n_head,
                      float dropout, int max_batch, int tie) {
    memset(m, 0, sizeof *m);
    if (vocab < 1 || T < 1 || n_layer < 0 || d_model < 1 || n_head < 1 || max_batch < 1)
        return ht_error(HT_EINPUT,
                        "model: a GPT needs vocab, context, d_model, n_head, batch >= 1 and "
                        "n_layer >= 0 (got %d, %d, %d, %d, %d, %d)",
                        vocab, T, d_model, n_head, max_batch, n_layer);
    if (d_model % n_head)
        return ht_error(HT_EINPUT, "model: n_head %d does not divide d_model %d", n_head, d_model);
    if (!(dropout >= 0.0f && dropout < 1.0f))
        return ht_error(HT_EINPUT, "model: dropout %g outside [0, 1)", dropout);
    ht_chain_begin(m, ht_shape1(T), 1);
    snprintf(m->type, sizeof m->type, "gpt");
    snprintf(m->desc, sizeof m->desc, "gpt L%d C%d H%d T%d V%d%s", n_layer, d_model, n_head, T,
             vocab, tie ? " tied" : "");
    m->tied = tie != 0;
    int rc = ht_layer_add_embed(m, "embed", vocab, d_model, dropout);
    char name[32];
    for (int i = 0; rc == HT_OK && i < n_layer; i++) {
        snprintf(name, sizeof name, "h%d", i);
        rc = ht_layer_add_block(m, name, n_head, n_layer, dropout);
    }
    if (rc == HT_OK) rc = ht_layer_add_layernorm(m, "lnf");
    if (rc == HT_OK)
        rc = tie ? ht_layer_add_linear_tied(m, "head", &m->layers[0].t[0], "head")
                 : ht_layer_add_linear(m, "head", vocab, 1, 0.02f, "head");
    if (rc != HT_OK) return fail(m, rc);
    return ht_chain_finish(m, vocab, T, max_batch);
}
