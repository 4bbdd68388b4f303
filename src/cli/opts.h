/* The options of every command line, as tables for ht_opts_parse (core/args.h): hettrain,
 * hettrain generate / schedule / plan, hetsim, hetprof. Pure data, so that the fuzzing
 * harness (tests/fuzz/fuzz_cli.c) reads each tool's command line exactly as the tool does. */
#ifndef HT_CLI_OPTS_H
#define HT_CLI_OPTS_H

#include "core/args.h"

#define HT_CLI_MAX_SETS 128
#define HT_CLI_MAX_SEL 16  /* hetprof --device */
#define HT_CLI_MAX_LIST 64 /* schedule --stage-times, --max-inflight: one per stage */
#define HT_CLI_MAX_BATCHES 16 /* hetprof --batch (HT_PROF_MAX_BATCHES) */

typedef struct {
    const char *config, *device, *trace, *sets[HT_CLI_MAX_SETS];
    int nset, resume, overwrite, profile, trace_layers, quiet, verbose, list_devices, help_config,
        help, version;
    long long stop_after; /* 0: not given */
} ht_args_train;

typedef struct {
    const char *config, *checkpoint, *prompt, *device, *sets[HT_CLI_MAX_SETS];
    int nset, quiet, verbose, help;
    long long tokens, seed; /* tokens 0: not given */
    double temperature;
} ht_args_generate;

typedef struct {
    const char *config, *schedule, *trace, *sets[HT_CLI_MAX_SETS];
    int nset, streams, help, ntimes, nslots;
    long long stages, micro_batches, chunks; /* 0: not given */
    double bf;                               /* 0: not given */
    double times[HT_CLI_MAX_LIST], slots[HT_CLI_MAX_LIST];
} ht_args_schedule;

typedef struct {
    const char *cluster, *profile, *config, *trace, *out, *sets[HT_CLI_MAX_SETS];
    int nset, scale, plan, help;
    long long ranks, steps, top; /* 0: not given */
    double drift;                /* -1: not given */
} ht_args_sim;

typedef struct {
    const char *sels[HT_CLI_MAX_SEL], *config, *out, *check;
    int nsel, quick, help, concurrent, nbatches;
    double batches[HT_CLI_MAX_BATCHES], tune_s;
    long long seed;
} ht_args_prof;

extern const ht_opt ht_opts_train[], ht_opts_generate[], ht_opts_schedule[], ht_opts_sim[],
    ht_opts_plan[], ht_opts_prof[];

/* Each struct with its defaults (the "not given" values above, seeds 1, temperature 1). */
void ht_args_train_init(ht_args_train *a);
void ht_args_generate_init(ht_args_generate *a);
void ht_args_schedule_init(ht_args_schedule *a);
void ht_args_sim_init(ht_args_sim *a);
void ht_args_prof_init(ht_args_prof *a);

#endif
