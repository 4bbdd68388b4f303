/* model.init_from (see init_from.h). Called at setup, and again by a pipeline rank whose stage
 * the plan decided after setup (train/pipe_start.c): each time it fills what the model holds. */
#include "train/init_from.h"

#include <sys/stat.h>

#include "core/err.h"
#include "core/log.h"
#include "core/path.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"
#include "train/hf_gpt2.h"

int ht_job_init_from(ht_job *j) {
    const char *from = j->cfg->model.init_from, *ckpt = j->cfg->checkpoint.path;
    struct stat st;
    if (!*from || (j->opts->resume && (stat(ckpt, &st) == 0 || ht_st_exists(ckpt))))
        return HT_OK;
    char idx[HT_ST_PATH]; /* a sharded set is checked by its index */
    int rc = ht_check_input(ht_st_set_index(from, idx, sizeof idx) ? idx : from,
                            "key 'model.init_from'");
    int hf = rc == HT_OK && ht_hf_gpt2_is(from);
    if (rc == HT_OK)
        rc = hf ? ht_hf_gpt2_load(from, &j->model) : ht_checkpoint_load_params(from, &j->model, NULL);
    if (rc == HT_OK && j->model.pres)
        ht_log_info("model: initial weights from %s (%s)%s", from,
                    hf ? "Hugging Face GPT-2" : "a hettrain checkpoint",
                    j->model.pres < j->model.nparams ? ", this stage's only" : "");
    return rc;
}
