/* hettrain export -c FILE [--checkpoint PATH] --format hf-gpt2 -o DIR [--set K=V]... [--device
 * SEL]: the GPT of FILE with the checkpoint's parameters (default checkpoint.path), written as
 * a Hugging Face GPT-2 folder (model.safetensors + config.json). */
#include "cli/export.h"

#include <stdio.h>
#include <string.h>

#include "build/build.h"
#include "config/config.h"
#include "core/err.h"
#include "core/log.h"
#include "ocl/ocl.h"
#include "train/checkpoint.h"
#include "train/hf_gpt2.h"

enum { MAX_SETS = 128 };

static void usage(FILE *f) {
    fprintf(f, "usage: hettrain export -c FILE [--checkpoint PATH] --format hf-gpt2 -o DIR\n"
               "                [--set KEY=VALUE]... [--device SEL]\n"
               "Writes the GPT of FILE (model.tie_embeddings = true: GPT-2's head) with the\n"
               "parameters of the checkpoint (default: checkpoint.path) to the existing folder\n"
               "DIR as DIR/model.safetensors and DIR/config.json, which Hugging Face's\n"
               "GPT2LMHeadModel.from_pretrained(DIR) loads.\n");
}

static const char *arg(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) ht_die(HT_EINPUT, "export: %s needs a value", argv[*i]);
    return argv[++*i];
}

static int run(const ht_config *cfg, const char *ckpt, const char *dir, const char *device) {
    int rc, idx = 0;
    if ((rc = ht_ocl_select(device ? device : cfg->device.select, &idx)) != HT_OK) return rc;
    ht_dev_opts o = ht_dev_opts_default();
    o.cache = cfg->device.cache;
    o.cache_dir = cfg->device.cache_dir;
    ht_dev *dev = NULL;
    if ((rc = ht_dev_open(&dev, idx, &o)) != HT_OK) return rc;
    ht_model m;
    if ((rc = ht_build_model(&m, dev, cfg, 0, cfg->model.vocab, 1)) == HT_OK) {
        int64_t step = 0;
        rc = ht_checkpoint_load_params(ckpt, &m, &step);
        if (rc == HT_OK) rc = ht_hf_gpt2_save(dir, &m);
        if (rc == HT_OK)
            printf("wrote %s/model.safetensors and %s/config.json (%s, step %lld)\n", dir, dir,
                   m.desc, (long long)step);
        ht_model_free(&m);
    }
    ht_dev_close(dev);
    return rc;
}

int ht_export_cli(int argc, char **argv) {
    const char *cfg_path = NULL, *ckpt = NULL, *format = NULL, *dir = NULL, *device = NULL;
    const char *sets[MAX_SETS];
    int nset = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-c") || !strcmp(a, "--config")) cfg_path = arg(argc, argv, &i);
        else if (!strcmp(a, "--checkpoint")) ckpt = arg(argc, argv, &i);
        else if (!strcmp(a, "--format")) format = arg(argc, argv, &i);
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) dir = arg(argc, argv, &i);
        else if (!strcmp(a, "--device")) device = arg(argc, argv, &i);
        else if (!strcmp(a, "--set")) {
            if (nset == MAX_SETS) ht_die(HT_EINPUT, "export: more than %d --set options", MAX_SETS);
            sets[nset++] = arg(argc, argv, &i);
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) ht_log_set_level(HT_LOG_WARN);
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            ht_die(HT_EINPUT, "export: unknown argument '%s'", a);
        }
    }
    if (!cfg_path) ht_die(HT_EINPUT, "export: no config given; expected -c FILE");
    if (!format || strcmp(format, "hf-gpt2"))
        ht_die(HT_EINPUT, "export: --format %s; expected --format hf-gpt2 (the only layout)",
               format ? format : "missing");
    if (!dir) ht_die(HT_EINPUT, "export: no output folder; expected -o DIR");
    ht_config cfg;
    ht_exit_on_error(ht_config_load(&cfg, cfg_path, sets, nset));
    if (strcmp(cfg.model.type, "gpt") || !cfg.model.tie_embeddings)
        ht_die(HT_EINPUT,
               "export: --format hf-gpt2 needs a GPT with model.tie_embeddings = true in %s "
               "(GPT-2's head is wte without a bias; found model.type \"%s\", tie_embeddings %s)",
               cfg_path, cfg.model.type, cfg.model.tie_embeddings ? "true" : "false");
    if (!ckpt || !*ckpt) ckpt = cfg.checkpoint.path;
    if (!*ckpt)
        ht_die(HT_EINPUT, "export: no checkpoint; give --checkpoint PATH (or checkpoint.path in %s)",
               cfg_path);
    ht_exit_on_error(run(&cfg, ckpt, dir, device));
    return 0;
}
