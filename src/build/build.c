/* The model a config describes: model.type picks the builder (MLP, CNN, GPT); the data gives
 * the input size and class count (a CNN's image shape unless model.input_shape says). And
 * the device selector of a rank. */
#include "build/build.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"

/* (C,H,W) of a CNN's input: model.input_shape, or 1 x S x S for S*S features. */
static int cnn_input(const ht_config *cfg, int features, ht_shape *in) {
    if (cfg->model.ninput_shape == 3) {
        const int *s = cfg->model.input_shape;
        *in = (ht_shape){3, {s[0], s[1], s[2]}};
        if ((long long)s[0] * s[1] * s[2] != features)
            return ht_error(HT_EINPUT,
                            "%s: model.input_shape [%d, %d, %d] holds %lld values per sample, but "
                            "the data has %d features",
                            cfg->source, s[0], s[1], s[2], (long long)s[0] * s[1] * s[2], features);
        return HT_OK;
    }
    int side = (int)llround(sqrt((double)features));
    if (side * side != features)
        return ht_error(HT_EINPUT,
                        "%s: the data has %d features per sample, not a square image; set "
                        "model.input_shape = [C, H, W] for the CNN",
                        cfg->source, features);
    *in = (ht_shape){3, {1, side, side}};
    return HT_OK;
}

int ht_build_desc(ht_model *m, const ht_config *cfg, int features, int classes, int max_batch) {
    const char *type = cfg->model.type;
    if (!strcmp(type, "gpt"))
        return ht_model_gpt_desc(m, cfg->model.vocab, cfg->model.context, cfg->model.n_layer,
                            cfg->model.d_model, cfg->model.n_head, (float)cfg->model.dropout,
                            max_batch, cfg->model.tie_embeddings);
    if (!strcmp(type, "cnn")) {
        ht_shape in;
        int rc = cnn_input(cfg, features, &in);
        if (rc != HT_OK) return rc;
        const char *specs[HT_MAX_LAYERS];
        for (int i = 0; i < cfg->model.nlayers; i++)
            specs[i] = cfg->model.layers[i];
        rc = ht_model_cnn_desc(m, in, specs, cfg->model.nlayers, classes, max_batch);
        if (rc != HT_OK && cfg->source[0]) { /* say which file the layer list came from */
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", ht_errmsg());
            rc = ht_error(rc, "%s: %s", cfg->source, msg);
        }
        return rc;
    }
    return ht_model_mlp_desc(m, features, cfg->model.hidden, cfg->model.nhidden, classes,
                        cfg->model.activation, max_batch);
}

const char *ht_build_selector(const ht_config *cfg, const char *cli_device, int rank) {
    if (cli_device) return cli_device;
    if (cfg->cluster.ndevices == 1) return cfg->cluster.devices[0];
    if (cfg->cluster.ndevices > rank) return cfg->cluster.devices[rank];
    return cfg->device.select;
}
