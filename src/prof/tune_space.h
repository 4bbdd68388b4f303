/* The CLBlast SGEMM tuner's parameter spaces (internal to src/prof: tune.c and
 * tune_space.c): the seven kernels' parameters in CLBlast's order, the start set, and which
 * points a device can compile and run. */
#ifndef HT_PROF_TUNE_SPACE_H
#define HT_PROF_TUNE_SPACE_H

#include <stddef.h>

enum { K_XGEMM, K_DIRECT, K_COPY, K_PAD, K_TRA, K_PADTRA, K_ROUTE, NKERN };
#define MAXP 16
#define MAXV 8

typedef struct {
    const char *name;
    int nv;
    size_t v[MAXV];
} pspace;

typedef struct {
    const char *kernel;
    int np;
    pspace p[MAXP];
} kspace;

typedef struct {
    size_t v[NKERN][MAXP];
} config;

#define P(c, k, i) ((c)->v[(k)][(i)])

/* Parameter names and values, per kernel. Xgemm's GEMMK=0 and GEMMK=1 kernels have
 * different ranges; the lists are the union, and ht_tune_valid pins what GEMMK=1 requires. */
extern const kspace ht_tune_space[NKERN];
/* Start point: the built-in PoCL CPU set of src/ocl/blas.c and conf/tuning/pocl-cpu.cfg
 * (keep the three in step). */
extern const size_t ht_tune_start[NKERN][MAXP];
/* Device limits the constraints need (from the probe child). */
extern size_t ht_tune_local_mem, ht_tune_max_wg;

/* 1 when kernel k's parameters in c satisfy CLBlast's constraints on this device. */
int ht_tune_valid(const config *c, int k);

#endif
