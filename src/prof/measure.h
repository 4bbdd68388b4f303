/* Measuring one OpenCL device for a profile: SGEMM at a model's GEMM shapes, device memory
 * and host-link bandwidth, launch latency, per-layer forward/backward times and whole-step
 * throughput at several batch sizes. The model comes from a training config (or a default
 * MLP); every measurement is wall-clock around a finished queue, the median of several runs. */
#ifndef HT_PROF_MEASURE_H
#define HT_PROF_MEASURE_H

#include <stdint.h>
#include <stdio.h>

#include "config/config.h"
#include "nn/model.h"
#include "prof/profile.h"

typedef struct ht_prof_opts {
    int quick;          /* a few-second probe: small buffers, few repetitions */
    const int *batches; /* batch sizes for layer times and throughput */
    int nbatches;
    const ht_config *cfg; /* the model to profile; NULL: an MLP 784-1024-1024-10 */
    uint64_t seed;        /* parameter init and input data */
    const char *tuning;   /* CLBlast tuning file to open the device with ("" = defaults) */
    FILE *log;            /* progress lines; NULL = quiet */
} ht_prof_opts;

/* Builds the profiled model on d (NULL: description only) for batches up to max_batch:
 * the config's model with the data's input size and classes (synthetic: from the config;
 * idx: read from the files; text: a byte-level GPT), or the default MLP. HT_EINPUT on bad
 * input. m->desc is the profile's `model` string. */
int ht_prof_model(ht_model *m, ht_dev *d, const ht_config *cfg, int max_batch);

/* Opens device `index` (global list of ht_ocl_devices), measures it and fills *out (name,
 * platform, every figure; clblast and tuning are left to the caller). Returns HT_OK or
 * HT_EINPUT / HT_ERUNTIME with the message set; OpenCL failures exit 1 as everywhere. */
int ht_prof_measure(int index, const ht_prof_opts *o, ht_prof_dev *out);

/* The GEMM shapes (deduplicated, in call order) of one training step of the model at batch
 * B, as run through ht_sgemm: at most max; returns how many. */
int ht_prof_gemm_shapes(ht_model *m, int B, ht_prof_gemm *out, int max);

/* Under mpirun (more than one rank; every rank calls it): measures the MPI link of every
 * rank pair a < b (src/prof/links.c) and fills p->links on every rank, device index =
 * rank. quick: fewer repetitions. HT_EINPUT with more ranks than a profile holds. */
int ht_prof_links(int quick, ht_profile *p, FILE *log);

#endif
