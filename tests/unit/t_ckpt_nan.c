/* Checkpoints and NaN: a save from non-finite parameters or optimizer state is refused (the
 * previous file kept byte for byte), naming the tensor and element; ht_checkpoint_finite
 * says the same without saving; a file with a NaN or a lying step is refused on load; extra
 * tensors and metadata (the asynchronous policies' state) round-trip and are checked alike. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "nn/model.h"
#include "optim/optim.h"
#include "tap.h"
#include "testdev.h"
#include "train/checkpoint.h"

static long file_bytes(const char *p, unsigned char *buf, long cap) {
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    long n = (long)fread(buf, 1, (size_t)cap, f);
    fclose(f);
    return n;
}

int main(void) {
    ht_dev *d = test_dev_open();
    ht_model m;
    int hidden[1] = {3};
    ht_exit_on_error(ht_model_mlp(&m, d, 2, hidden, 1, 2, "relu", 4)); /* 2-3-2: 17 params */
    ht_model_init_params(&m, 1);
    ht_optim_cfg oc = {.type = HT_OPT_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    ht_optim o;
    ht_optim_init(&o, d, &oc, m.nparams);
    char path[256];
    snprintf(path, sizeof path, "/tmp/t_ckpt_nan.%d.safetensors", (int)getpid());

    tap_ok(m.nparams == 2 * 3 + 3 + 3 * 2 + 2, "a 2-3-2 MLP has 17 parameters");
    tap_ok(ht_checkpoint_finite(&m, &o) == HT_OK, "fresh parameters and state are finite");
    tap_ok(ht_checkpoint_save(path, &m, &o, 3, "adamw") == HT_OK, "a finite checkpoint is saved");
    static unsigned char before[1 << 16], after[1 << 16];
    long nb = file_bytes(path, before, sizeof before);

    /* fc1.weight (3 x 2) is first in the layout: element 4 becomes NaN */
    float *p = malloc(m.nparams * sizeof *p);
    ht_buf_read(d, m.params, 0, m.nparams * sizeof *p, p);
    float keep = p[4];
    p[4] = NAN;
    ht_buf_write(d, m.params, 0, m.nparams * sizeof *p, p);
    int rc = ht_checkpoint_finite(&m, &o);
    tap_ok(rc == HT_ERUNTIME && strstr(ht_errmsg(), "tensor 'fc1.weight' element 4 of 6 is NaN"),
           "ht_checkpoint_finite names the tensor: %s", ht_errmsg());
    rc = ht_checkpoint_save(path, &m, &o, 6, "adamw");
    long na = file_bytes(path, after, sizeof after);
    tap_ok(rc == HT_ERUNTIME && strstr(ht_errmsg(), "step 6: checkpoint not written") &&
               na == nb && memcmp(before, after, (size_t)nb) == 0,
           "a NaN parameter: not written, the previous file kept: %s", ht_errmsg());

    /* the parameters finite again, the AdamW second moment infinite */
    p[4] = keep;
    ht_buf_write(d, m.params, 0, m.nparams * sizeof *p, p);
    float *v = calloc(m.nparams, sizeof *v);
    v[16] = INFINITY;
    ht_buf_write(d, o.v, 0, m.nparams * sizeof *v, v);
    rc = ht_checkpoint_save(path, &m, &o, 6, "adamw");
    tap_ok(rc == HT_ERUNTIME && strstr(ht_errmsg(), "'optim.v' element 16 of 17 is infinite"),
           "an infinite optimizer state: not written: %s", ht_errmsg());

    /* loading: the saved (finite) file loads; step beyond the run's total is refused */
    int64_t step = -1;
    tap_ok(ht_checkpoint_load(path, &m, &o, &step, "adamw") == HT_OK && step == 3,
           "the kept checkpoint loads at step 3");
    rc = ht_checkpoint_check_step(path, step, 2);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "metadata 'step' is 3, beyond the 2 steps"),
           "step past train.steps refused: %s", ht_errmsg());
    tap_ok(ht_checkpoint_check_step(path, step, 3) == HT_OK, "step == total is fine");

    /* extras (an asynchronous policy's state): written beside the tensors, read back equal;
     * a NaN in one refuses the save like any tensor; a wrong size or a NaN refuses the read */
    ht_buf_write(d, o.v, 0, m.nparams * sizeof *v, (float[17]){0});
    float xa[5] = {1.5f, -2, 0.25f, 1e-30f, 3e30f};
    ht_st_tensor xt = {.name = "sync.worker.1.params", .ndim = 1, .shape = {5}, .data = xa};
    const char *xk[] = {"sync.format", "sync.samples"}, *xv[] = {"1", "96"};
    ht_ckpt_extra x = {.t = &xt, .nt = 1, .keys = xk, .vals = xv, .nk = 2};
    tap_ok(ht_checkpoint_save_ex(path, &m, &o, 3, "adamw", &x) == HT_OK, "a save with extras");
    ht_st_file *f = NULL;
    int64_t samples = 0;
    rc = ht_st_open(&f, path);
    const float *got = rc == HT_OK ? ht_checkpoint_tensor(f, path, "sync.worker.1.params", 5, &rc) : NULL;
    tap_ok(got && memcmp(got, xa, sizeof xa) == 0 &&
               ht_checkpoint_meta_int(f, path, "sync.samples", &samples) == HT_OK && samples == 96,
           "the extra tensor reads back bit for bit, the extra metadata as 96");
    tap_ok(!ht_checkpoint_tensor(f, path, "sync.worker.1.params", 6, &rc) && rc == HT_EINPUT &&
               strstr(ht_errmsg(), "has shape [5], expected [6]"),
           "read with the wrong size: %s", ht_errmsg());
    tap_ok(!ht_checkpoint_tensor(f, path, "sync.worker.2.params", 5, &rc) && rc == HT_EINPUT &&
               strstr(ht_errmsg(), "'sync.worker.2.params' is missing"),
           "a missing one: %s", ht_errmsg());
    if (f) ht_st_close(f);
    nb = file_bytes(path, before, sizeof before);
    xa[2] = NAN;
    rc = ht_checkpoint_save_ex(path, &m, &o, 4, "adamw", &x);
    na = file_bytes(path, after, sizeof after);
    tap_ok(rc == HT_ERUNTIME && strstr(ht_errmsg(), "'sync.worker.1.params' element 2 of 5 is NaN") &&
               na == nb && memcmp(before, after, (size_t)nb) == 0,
           "a NaN in an extra tensor: not written, the previous file kept: %s", ht_errmsg());
    unlink(path);
    free(p);
    free(v);
    ht_optim_free(&o);
    ht_model_free(&m);
    ht_dev_close(d);
    return tap_done();
}
