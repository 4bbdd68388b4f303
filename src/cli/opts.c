/* The option tables of every command line (opts.h). Bounds: counts within what the code
 * behind them holds in an int; times and ratios finite and far below where a product of
 * them could overflow. */
#include "cli/opts.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define F(type, f) offsetof(type, f)
#define FLAG(n, a, type, f) {n, a, HT_OPT_FLAG, 0, 0, 0, 0, 0, NULL, F(type, f), 0, 0}
#define STR(n, a, type, f, eq) {n, a, HT_OPT_STR, 0, 0, 0, 0, eq, NULL, F(type, f), 0, 0}
#define SETS(type) {"--set", NULL, HT_OPT_STRS, 0, 0, 0, 0, 1, NULL, F(type, sets), F(type, nset), HT_CLI_MAX_SETS}
#define INT(n, type, f, lo, hi) {n, NULL, HT_OPT_INT, lo, hi, 0, 1, 0, NULL, F(type, f), 0, 0}
#define NUM(n, type, f, lo, open, hi, note) {n, NULL, HT_OPT_NUM, lo, hi, open, 0, 0, note, F(type, f), 0, 0}
#define END {NULL, NULL, HT_OPT_FLAG, 0, 0, 0, 0, 0, NULL, 0, 0, 0}

#define T ht_args_train
const ht_opt ht_opts_train[] = {
    STR("--config", "-c", T, config, 1),
    SETS(T),
    STR("--device", NULL, T, device, 1),
    STR("--trace", NULL, T, trace, 1),
    FLAG("--trace-layers", NULL, T, trace_layers),
    FLAG("--resume", NULL, T, resume),
    FLAG("--overwrite", NULL, T, overwrite),
    FLAG("--profile", NULL, T, profile),
    /* bounded like train.steps, so that step + N cannot overflow */
    INT("--stop-after", T, stop_after, 1, INT32_MAX),
    FLAG("--quiet", "-q", T, quiet),
    FLAG("--verbose", "-v", T, verbose),
    FLAG("--list-devices", NULL, T, list_devices),
    FLAG("--help-config", NULL, T, help_config),
    FLAG("--help", "-h", T, help),
    FLAG("--version", NULL, T, version),
    END,
};
#undef T

#define T ht_args_generate
const ht_opt ht_opts_generate[] = {
    STR("--config", "-c", T, config, 0),
    STR("--checkpoint", NULL, T, checkpoint, 0),
    STR("--prompt", NULL, T, prompt, 0),
    INT("--tokens", T, tokens, 1, 1 << 24),
    INT("--seed", T, seed, 0, INT64_MAX),
    NUM("--temperature", T, temperature, 0, 0, 1e6, "(0 = greedy)"),
    {"--set", NULL, HT_OPT_STRS, 0, 0, 0, 0, 0, NULL, F(T, sets), F(T, nset), HT_CLI_MAX_SETS},
    STR("--device", NULL, T, device, 0),
    FLAG("--quiet", "-q", T, quiet),
    FLAG("--verbose", "-v", T, verbose),
    FLAG("--help", "-h", T, help),
    END,
};
#undef T

#define T ht_args_schedule
const ht_opt ht_opts_schedule[] = {
    STR("--config", "-c", T, config, 0),
    {"--set", NULL, HT_OPT_STRS, 0, 0, 0, 0, 0, NULL, F(T, sets), F(T, nset), HT_CLI_MAX_SETS},
    STR("--schedule", NULL, T, schedule, 0),
    INT("--stages", T, stages, 1, 4096),
    INT("--micro-batches", T, micro_batches, 1, 1 << 20),
    INT("--chunks", T, chunks, 1, 64),
    NUM("--bf", T, bf, 0, 1, 1e6, "(backward time / forward time)"),
    STR("--trace", NULL, T, trace, 0),
    FLAG("--streams", NULL, T, streams),
    {"--stage-times", NULL, HT_OPT_NUMS, 0, 1e9, 1, 0, 0, NULL, F(T, times), F(T, ntimes),
     HT_CLI_MAX_LIST},
    {"--max-inflight", NULL, HT_OPT_NUMS, 1, 1 << 20, 0, 1, 0, NULL, F(T, slots), F(T, nslots),
     HT_CLI_MAX_LIST},
    FLAG("--help", "-h", T, help),
    END,
};
#undef T

#define T ht_args_sim
#define SIM_COMMON                                                                                 \
    STR("--cluster", NULL, T, cluster, 0), STR("--profile", NULL, T, profile, 0),                  \
        STR("--config", "-c", T, config, 0),                                                       \
        {"--set", NULL, HT_OPT_STRS, 0, 0, 0, 0, 0, NULL, F(T, sets), F(T, nset), HT_CLI_MAX_SETS}, \
        INT("--ranks", T, ranks, 1, 1 << 20), INT("--top", T, top, 1, 1000),                      \
        STR("-o", NULL, T, out, 0), FLAG("--plan", NULL, T, plan), FLAG("--help", "-h", T, help)
const ht_opt ht_opts_sim[] = {
    SIM_COMMON,
    INT("--steps", T, steps, 1, 100000),
    NUM("--drift", T, drift, 0, 0, 1e6, "(the model's relative change per local step)"),
    STR("--trace", NULL, T, trace, 0),
    FLAG("--scale", NULL, T, scale),
    END,
};
/* hettrain plan: only plans (hetsim's options for one simulated configuration are unknown) */
const ht_opt ht_opts_plan[] = {SIM_COMMON, END};
#undef T

#define T ht_args_prof
const ht_opt ht_opts_prof[] = {
    {"--device", NULL, HT_OPT_STRS, 0, 0, 0, 0, 0, NULL, F(T, sels), F(T, nsel), HT_CLI_MAX_SEL},
    STR("-c", NULL, T, config, 0),
    STR("-o", NULL, T, out, 0),
    STR("--check", NULL, T, check, 0),
    {"--batch", NULL, HT_OPT_NUMS, 1, 1 << 20, 0, 1, 0, NULL, F(T, batches), F(T, nbatches),
     HT_CLI_MAX_BATCHES},
    NUM("--tune-seconds", T, tune_s, 0, 0, 1e6, NULL),
    INT("--seed", T, seed, 0, INT64_MAX),
    FLAG("--quick", NULL, T, quick),
    FLAG("--concurrent", NULL, T, concurrent),
    FLAG("--help", "-h", T, help),
    END,
};
#undef T

void ht_args_train_init(ht_args_train *a) { memset(a, 0, sizeof *a); }
void ht_args_generate_init(ht_args_generate *a) {
    memset(a, 0, sizeof *a);
    a->seed = 1, a->temperature = 1.0;
}
void ht_args_schedule_init(ht_args_schedule *a) { memset(a, 0, sizeof *a); }
void ht_args_sim_init(ht_args_sim *a) {
    memset(a, 0, sizeof *a);
    a->drift = -1;
}
void ht_args_prof_init(ht_args_prof *a) {
    memset(a, 0, sizeof *a);
    a->seed = 1;
}
