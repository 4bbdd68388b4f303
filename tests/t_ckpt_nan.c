/* Checkpoints and NaN: a save from non-finite parameters or optimizer state is refused (the
 * previous file kept byte for byte), naming the tensor and element; ht_checkpoint_finite
 * says the same without saving; a file with a NaN or a lying step is refused on load. */
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
    unlink(path);
    free(p);
    free(v);
    ht_optim_free(&o);
    ht_model_free(&m);
    ht_dev_close(d);
    return tap_done();
}
