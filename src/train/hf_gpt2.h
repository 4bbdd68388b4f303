/* GPT-2 checkpoints in the Hugging Face layout (GPT2LMHeadModel's safetensors): loaded as a
 * GPT's initial weights (model.init_from) and written by `hettrain export`. */
#ifndef HT_TRAIN_HF_GPT2_H
#define HT_TRAIN_HF_GPT2_H

#include "nn/model.h"

/* 1 when path is a safetensors file with GPT-2's names ("wte.weight", with or without the
 * "transformer." prefix) or an index json (a sharded set); 0 otherwise (e.g. our own
 * checkpoints, whose names are "embed.wte", ...). */
int ht_hf_gpt2_is(const char *path);

/* Loads every parameter of GPT m from path (a model.safetensors or a
 * model.safetensors.index.json with its shards beside it): Conv1D weights transposed, wpe's
 * first model.context rows; an untied head gets lm_head.weight (or wte) and a zero bias.
 * HT_EINPUT naming the file and the tensor for a missing tensor, a shape that differs from
 * the model's (and which key sets it), a dtype other than F32, extra blocks. F32 only. */
int ht_hf_gpt2_load(const char *path, ht_model *m);

/* Writes dir/model.safetensors ("transformer.*" names, Conv1D layout, no lm_head: tied) and
 * dir/config.json that GPT2LMHeadModel.from_pretrained reads. Needs a tied GPT (GPT-2's head);
 * dir must exist. */
int ht_hf_gpt2_save(const char *dir, const ht_model *m);

#endif
