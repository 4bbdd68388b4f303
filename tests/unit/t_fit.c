/* ht_fit_check: a model's device bytes, computed before allocating, against a device's memory
 * (a made-up ht_devinfo: no OpenCL needed). Sizes are compared with hand-computed closed
 * forms of the MLP; too-big models name the keys and the bytes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "core/err.h"
#include "tap.h"
#include "build/fit.h"

static int load(ht_config *c, const char *a, const char *b, const char *d) {
    const char *sets[8] = {"train.batch=128", "train.steps=1", "optim.lr=0.1",
                           "optim.type=adamw", a, b, d};
    int n = 4;
    while (n < 7 && sets[n])
        n++;
    return ht_config_load(c, NULL, sets, n);
}

int main(void) {
    ht_devinfo di;
    memset(&di, 0, sizeof di);
    snprintf(di.name, sizeof di.name, "test device");
    di.global_mem = 1ull << 30; /* 1 GiB */
    di.max_alloc = 1ull << 28;  /* 256 MiB */
    ht_config c;
    ht_fit f;

    /* MLP 32-H-8: nparams = 32H + H + 8H + 8; activations (B x (32 + H + H + 8)) twice */
    tap_ok(load(&c, "model.hidden=[1000]", NULL, NULL) == HT_OK, "config loads");
    tap_ok(ht_fit_measure(&c, 32, 8, 128, &f) == HT_OK, "measure");
    double np = 32.0 * 1000 + 1000 + 8.0 * 1000 + 8;
    tap_ok(f.nparams == (size_t)np && f.params == 4 * np && f.grads == 4 * np &&
               f.optim == 8 * np,
           "params, grads, AdamW state: %zu parameters (expected %.0f)", f.nparams, np);
    tap_ok(f.acts >= 2.0 * 4 * 128 * (32 + 1000 + 8), "activations at batch 128: %.0f bytes",
           f.acts);
    tap_ok(ht_fit_check(&c, &di, 32, 8, 128) == HT_OK, "a small MLP fits 1 GiB");

    /* device.memory_mb bounds a whole-model rank: 32-1000-8 with AdamW at batch 128 holds
     * 4 x 4 x 41008 = 656128 bytes of parameters, gradients and state plus at least
     * 2 x 4 x 128 x (32 + 1000 + 1000 + 8) = 2088960 bytes of activations: over 2 MB by at
     * least 0.745 MB; 100 MB holds it; a pipeline plans its stages instead (pipe_mem.c) */
    load(&c, "model.hidden=[1000]", "device.memory_mb=2", NULL);
    int rc = ht_fit_check(&c, &di, 32, 8, 128);
    double need = 0, short_by = 0;
    const char *e = strstr(ht_errmsg(), "needs "), *sb = strstr(ht_errmsg(), "short by ");
    if (e) sscanf(e, "needs %lf MB", &need);
    if (sb) sscanf(sb, "short by %lf MB", &short_by);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "device.memory_mb (2)") &&
               strstr(ht_errmsg(), "device 'test device'") && strstr(ht_errmsg(), "41008 param") &&
               need >= 2.745 && short_by >= 0.745 && fabs(need - 2 - short_by) < 0.011,
           "the whole model over device.memory_mb, before allocating: %s", ht_errmsg());
    load(&c, "model.hidden=[1000]", "device.memory_mb=100", NULL);
    tap_ok(ht_fit_check(&c, &di, 32, 8, 128) == HT_OK, "100 MB holds it");
    load(&c, "model.hidden=[1000]", "device.memory_mb=2", "pipe.schedule=1f1b");
    tap_ok(ht_fit_check(&c, &di, 32, 8, 128) == HT_OK,
           "a pipeline's limit is its stages' (not checked here)");

    /* 32-4e6-8: 164e6 parameters, 656 MB each buffer > 256 MiB max allocation */
    load(&c, "model.hidden=[4000000]", NULL, NULL);
    rc = ht_fit_check(&c, &di, 32, 8, 128);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "model.hidden") &&
               strstr(ht_errmsg(), "train.batch (128)") && strstr(ht_errmsg(), "268435456 bytes"),
           "one buffer over the max allocation: %s", ht_errmsg());

    /* 32-700000-8 at batch 128 on a device allocating up to 1 GiB at once: 28.7e6 parameters
     * (115 MB x 4 buffers) plus activations of at least 2 x 128 x 700040 x 4 bytes (717 MB):
     * over 1 GiB in total */
    load(&c, "model.hidden=[700000]", NULL, NULL);
    di.max_alloc = 1ull << 30;
    rc = ht_fit_check(&c, &di, 32, 8, 128);
    di.max_alloc = 1ull << 28;
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "1073741824 bytes of global memory") &&
               strstr(ht_errmsg(), "needs"),
           "the total over global memory: %s", ht_errmsg());

    /* hidden = [1e9]: 41e9 parameters, over 2^31 elements in one buffer */
    load(&c, "model.hidden=[1000000000]", NULL, NULL);
    rc = ht_fit_check(&c, &di, 32, 8, 128);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "model.hidden") &&
               strstr(ht_errmsg(), "2^31 - 1"),
           "hidden = [1e9]: over 2^31 elements: %s", ht_errmsg());

    /* CNN: a 7x7 conv of a 3x512x512 image at batch 256: the workspace alone is over 2^31
     * elements */
    load(&c, "model.type=cnn", "model.layers=[\"conv 7 64 pad=3\", \"flatten\", \"linear 10\"]",
         "model.input_shape=[3, 512, 512]");
    rc = ht_fit_check(&c, &di, 3 * 512 * 512, 10, 256);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "model.layers") &&
               strstr(ht_errmsg(), "layer conv1 at batch 256") && strstr(ht_errmsg(), "2^31"),
           "conv tensors past 2^31 elements at the batch: %s", ht_errmsg());
    /* at batch 4 the tensors fit the index range, but "linear 10" over 64 x 512 x 512
     * features holds 10 x 16777216 + 10 weights, plus the conv's 64 x 3 x 7 x 7 + 64:
     * 167781642 parameters, 671126568 bytes in one buffer, over 256 MiB */
    rc = ht_fit_check(&c, &di, 3 * 512 * 512, 10, 4);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "parameters buffer needs 671126568 bytes"),
           "batch 4: %s", ht_errmsg());
    /* one sample's column matrix of a 7x7 conv over 64 x 1024 x 1024 (3136 x 1048576
     * floats) is past 2^31 elements: the workspace, at batch 1 already */
    load(&c, "model.type=cnn", "model.layers=[\"conv 7 8 pad=3\", \"flatten\", \"linear 2\"]",
         "model.input_shape=[64, 1024, 1024]");
    rc = ht_fit_check(&c, &di, 64 * 1024 * 1024, 2, 1);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "model.layers") &&
               strstr(ht_errmsg(), "workspace buffer needs"),
           "conv workspace past 2^31 elements: %s", ht_errmsg());

    /* GPT context 1e6 */
    load(&c, "model.type=gpt", "data.kind=text", "model.context=1000000");
    rc = ht_fit_check(&c, &di, 0, 256, 128);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "model.context"), "context = 1e6: %s",
           ht_errmsg());
    return tap_done();
}
