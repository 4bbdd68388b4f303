/* model.init_from: the weights a fresh run starts from. */
#ifndef HT_TRAIN_INIT_FROM_H
#define HT_TRAIN_INIT_FROM_H

#include "train/engine.h"

/* The weights of model.init_from (a Hugging Face GPT-2 file or set, or a hettrain checkpoint,
 * one file or a sharded set) into j's model: only the floats it holds (a pipeline rank's
 * windows, a tied head's copy of wte among them; all for the whole model), every tensor of the file checked alike on
 * every rank. Nothing without the key, or on --resume when the checkpoint exists (it is
 * loaded instead). */
int ht_job_init_from(ht_job *j);

#endif
