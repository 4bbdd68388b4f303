/* CLBlast SGEMM tuning for one device: a bounded, seeded search over CLBlast's parameter
 * sets measured end to end through ht_sgemm at given GEMM shapes, each candidate in a
 * forked child. The calling process must not have initialised OpenCL (fork after that is
 * unsafe with most runtimes): hetprof tunes before it opens anything itself. */
#ifndef HT_PROF_TUNE_H
#define HT_PROF_TUNE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "prof/profile.h"

typedef struct ht_prof_tune_opts {
    int device;    /* index in the global device list */
    double budget; /* seconds for the search (the first measurement always runs) */
    uint64_t seed;
    const ht_prof_gemm *shapes; /* one training step's GEMMs (gflops ignored) */
    int nshapes;
    const char *start; /* tuning file to start from; NULL: the built-in PoCL CPU set */
    size_t offset;     /* operands at this float offset, like views into arenas */
    double timeout;    /* seconds per candidate before its child is killed */
    FILE *log;         /* one line per candidate; NULL = quiet */
} ht_prof_tune_opts;

typedef struct ht_prof_tune_result {
    ht_prof_kparams k[HT_PROF_MAX_KERNELS]; /* the parameter set, every CLBlast GEMM kernel */
    int nk;
    double start_ms, result_ms; /* one step's GEMMs, start set and result */
    int evals, failed;
    char device[128];
} ht_prof_tune_result;

/* Runs the search. HT_EINPUT for bad options or start file, HT_ERUNTIME when not even
 * the start set runs on the device (message set). */
int ht_prof_tune(const ht_prof_tune_opts *o, ht_prof_tune_result *res);

/* Runs fn(ctx, out) in a forked child and copies its `size` bytes of *out back; 1 on
 * success, 0 with msg set when the child failed, crashed or ran past timeout seconds. */
int ht_prof_forked(void (*fn)(void *ctx, void *out), void *ctx, void *out, size_t size,
                   double timeout, char *msg, size_t nmsg);

#endif
