/* From a config to what a process runs: the model it describes and the device selector of a
 * rank. Shared by the trainer (src/train), the profiler (src/prof, tools/hetprof.c) and
 * generation, so it sits below all of them: it includes config, nn and ocl only. */
#ifndef HT_BUILD_BUILD_H
#define HT_BUILD_BUILD_H

#include "config/config.h"
#include "nn/model.h"
#include "ocl/ocl.h"

/* Builds the model cfg describes for data of `features` per sample (a GPT ignores it: it
 * reads model.context bytes) and `classes`; d == NULL describes it only. HT_EINPUT naming
 * the config for sizes that do not fit the data. It is ht_build_desc (build.c, pure: what
 * the planner and simulator link) and ht_model_attach (build/attach.c). */
int ht_build_model(ht_model *m, ht_dev *d, const ht_config *cfg, int features, int classes,
                   int max_batch);
int ht_build_desc(ht_model *m, const ht_config *cfg, int features, int classes, int max_batch);

/* The device selector of rank `rank`: cli_device (--device) when set, else
 * cluster.devices[rank] (or [0] for all ranks when it has one entry), else device.select. */
const char *ht_build_selector(const ht_config *cfg, const char *cli_device, int rank);

#endif
