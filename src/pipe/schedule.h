/* Pipeline schedules as data (pure: no MPI, no OpenCL, and no I/O but the showing functions
 * at the end, show.c): for one global batch of N
 * micro-batches over D pipeline ranks, each rank gets an array of instructions (DeepSpeed's
 * idea, in C: an enum, a small struct, an array per rank, a switch in the executor). The
 * executor (src/train/pipe_exec.c) runs them on devices, the simulator (src/sim) on a cost model,
 * the checker below on unit times; all three read the very same arrays.
 *
 * Terms. The model's layers are cut into S = D * v contiguous *stages* (v model chunks per
 * rank: v = 1 except interleaved). A *pipeline* is the path of a micro-batch through the
 * stages 0 .. S-1; Chimera has two (dir 0 "down": stage s on rank s; dir 1 "up": stage s on
 * rank D-1-s), each rank holding a replica of one stage of each. A *slot* is one activation
 * buffer set on a rank: everything one micro-batch's forward through one stage keeps for
 * its backward (input, intermediate activations, saved state, their gradients).
 *
 * Communication semantics (the executor's, which the checker enforces): SEND_* is
 * nonblocking and never waits (the message is buffered until its RECV takes it); RECV_*
 * blocks until the matching SEND (same kind, micro-batch, stage, direction, from `peer`) has
 * been issued on the peer. Messages between two ranks are matched by (kind, mb, stage, dir),
 * not by order. REDUCE_GRADS of a Chimera stage is a rendezvous of its two replicas (as a
 * blocking all-reduce would be): each waits until the other reached its REDUCE_GRADS; with
 * one pipeline it waits for nothing (data-parallel replicas run the same stream). A schedule
 * deadlocks when every unfinished rank waits in a RECV or such a REDUCE_GRADS.
 *
 * Seeds: GPipe (Huang et al. 2019); PipeDream-Flush / 1F1B (Narayanan et al. 2021);
 * interleaved 1F1B (Narayanan et al., SC'21, Megatron-LM); Chimera (Li and Hoefler, SC'21). */
#ifndef HT_PIPE_SCHEDULE_H
#define HT_PIPE_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config/modes.h"

typedef enum {
    HT_PI_LOAD,      /* first stage: load micro-batch mb's inputs into slot buf; last stage:
                        its labels (a rank holding both stages loads both) */
    HT_PI_FWD,       /* stage forward of mb: slot buf's input -> its output (the last stage
                        also computes the loss and its gradient) */
    HT_PI_BWD,       /* stage backward of mb: gradient of the output -> gradient of the input
                        (none on stage 0), parameter gradients accumulated; frees slot buf
                        once a SEND_GRAD that follows has been issued (or at once on stage 0) */
    HT_PI_SEND_ACT,  /* output of stage `stage` for mb to peer (which runs stage + 1) */
    HT_PI_RECV_ACT,  /* input of stage `stage` for mb from peer (which ran stage - 1) into buf */
    HT_PI_SEND_GRAD, /* gradient of the input of stage `stage` for mb to peer (stage - 1) */
    HT_PI_RECV_GRAD, /* gradient of the output of stage `stage` for mb from peer (stage + 1) */
    HT_PI_RECOMPUTE, /* forward of mb through the stage again, from the kept stage input, to
                        restore what a recomputed stage dropped after FWD (before its BWD) */
    HT_PI_REDUCE_GRADS, /* sum the stage's parameter gradients with its other replicas
                           (data-parallel replicas; Chimera: the other direction's copy) */
    HT_PI_OPT_STEP,     /* one optimizer step of the rank's parameters (once per batch) */
    HT_PI_BWD_W, /* zero-bubble schedules (ht_pipe_kind_split): the weight-gradient half of
                    mb's backward, from the slot's saved input and output gradient; there BWD
                    is the input-gradient half only, and the slot is freed by BWD_W, not by
                    SEND_GRAD (so the slot counts in peak memory until the W runs) */
    HT_PI_NOPS
} ht_pipe_op;

/* Text names ("LOAD", "FWD", ..., "OPT_STEP"), indexed by ht_pipe_op. */
extern const char *const ht_pipe_op_names[HT_PI_NOPS];

typedef struct ht_pipe_instr {
    uint8_t op;    /* ht_pipe_op */
    uint8_t dir;   /* pipeline: 0, or 1 for Chimera's up pipeline */
    int16_t chunk; /* model chunk on this rank: 0 .. v-1 (interleaved), Chimera: = dir */
    int32_t stage; /* stage 0 .. S-1 within the pipeline; -1 for OPT_STEP and for a
                      REDUCE_GRADS over every chunk of the rank (the generators here emit
                      one REDUCE_GRADS per chunk, with that chunk's stage, dir and chunk) */
    int32_t mb;    /* micro-batch 0 .. N-1 of the global batch; -1 where none */
    int32_t peer;  /* pipeline rank for SEND / RECV (0 .. D-1), -1 otherwise; the rank
                      itself when both stages are on it (interleaved with D = 1): a local
                      copy, same semantics */
    int32_t buf;   /* slot on this rank (0 .. nbuf-1) for LOAD, FWD, BWD, RECV_*, SEND_*,
                      RECOMPUTE; -1 otherwise */
} ht_pipe_instr;

/* The kinds (ht_pipe_kind, HT_PIPE_GPIPE ..) and their names and flags are rows of
 * config/modes.h; each row names its generator. */

/* What a generator is asked for. */
typedef struct ht_pipe_params {
    int kind;  /* ht_pipe_kind */
    int D;     /* pipeline ranks, >= 1 */
    int N;     /* micro-batches per global batch, >= 1 */
    int v;     /* model chunks per rank (interleaved), >= 1; 1 for the others */
    /* hepipe only: per stage relative forward times (NULL: equal) and the most slots each
     * rank may hold (NULL: no limit beyond N) */
    const double *stage_time;
    const int *max_inflight;
    /* backward / forward time the order is planned for (Chimera's list scheduler); 0 = 1,
     * the paper's unit. Real backwards take about 2x: planning for it matters for N > D. */
    double bf_ratio;
    /* zb-het only: per stage input-gradient (B) and weight-gradient (W) times, in the units
     * of stage_time (NULL: bf_ratio / 2 x the forward each); max_inflight is each rank's
     * slot limit (NULL: zb-h1's, D on every rank) */
    const double *stage_b, *stage_w;
} ht_pipe_params;

/* A generated schedule: D streams. */
typedef struct ht_pipe_sched {
    ht_pipe_params p;     /* as generated (pointers not kept: NULL) */
    int S;                /* stages per pipeline: D * v */
    int ndir;             /* pipelines: 2 for Chimera, else 1 */
    int *len;             /* [D] instructions per rank */
    ht_pipe_instr **ins;  /* [D][len[r]] */
    int *nbuf;            /* [D] slots each rank needs */
    int *mb_dir;          /* [N] the pipeline micro-batch mb goes through (0 but Chimera) */
} ht_pipe_sched;

/* Rank of `stage` in pipeline `dir` of a schedule of kind/D/v: stage % D for dir 0; for
 * Chimera's dir 1, D - 1 - stage. */
int ht_pipe_stage_rank(int kind, int D, int v, int dir, int stage);

/* 1 when the kind splits each backward into BWD (input gradient) and BWD_W (weights). */
int ht_pipe_kind_split(int kind);

/* Generates the schedule. HT_OK, or HT_EINPUT with ht_errmsg() saying which parameter does
 * not fit and why (e.g. Chimera with odd D: its two pipelines place stage s and D-1-s on one
 * rank, which needs D even so no rank holds the same stage twice; interleaved needs N a
 * multiple of D). *s is untouched on error. */
int ht_pipe_generate(const ht_pipe_params *p, ht_pipe_sched *s);
void ht_pipe_sched_free(ht_pipe_sched *s);

/* ---------------------------------------------------------------- checker */

/* What the checker found, in unit time: a forward of one micro-batch through one stage
 * takes 1 (stage_fwd[stage] when given), a backward bf_ratio times that (RECOMPUTE as a
 * forward; split kinds: B and W half of it each), communication and LOAD / REDUCE /
 * OPT_STEP take 0. */
typedef struct ht_pipe_report {
    double makespan;   /* until the last rank's last instruction ends */
    double busy;       /* summed over ranks: FWD + BWD + BWD_W + RECOMPUTE time */
    double bubble;     /* 1 - busy / (D * makespan): idle fraction of the makespan */
    int peak_inflight[64]; /* per rank (first 64): most slots in use at once */
    int peak_max;          /* max over ranks */
} ht_pipe_report;

/* Checks s: every micro-batch runs FWD then BWD exactly once per stage of its pipeline
 * (split kinds: then BWD_W, on the same rank and chunk, before the chunk's REDUCE_GRADS and
 * the OPT_STEP, its slot held until the BWD_W ends),
 * on the rank that holds that stage, after its input arrived (LOAD or RECV_ACT) and, for
 * BWD, after its output's gradient arrived (or on the last stage after its FWD); every SEND
 * has exactly one matching RECV on the peer and vice versa; the streams run to completion
 * under the semantics above (no circular wait); no slot is reused while a micro-batch still
 * holds it (a slot is taken by LOAD on stage 0 / RECV_ACT and given back by SEND_GRAD, or
 * by BWD on stage 0); each chunk's REDUCE_GRADS after its last BWD; one OPT_STEP per rank
 * after all of them, and nothing after it. stage_fwd may be NULL (all 1).
 * HT_OK with *r filled (r may be NULL), or HT_EINPUT with ht_errmsg() naming the rank,
 * the instruction index and what is wrong. */
int ht_pipe_check(const ht_pipe_sched *s, double bf_ratio, const double *stage_fwd,
                  ht_pipe_report *r);

/* As ht_pipe_check with each stage's own forward and backward time (both [S], > 0): e.g.
 * the times a run measured. A split schedule's B and W each take half the backward. */
int ht_pipe_check_costs(const ht_pipe_sched *s, const double *stage_fwd, const double *stage_bwd,
                        ht_pipe_report *r);

/* As ht_pipe_check_costs with the backward in its two halves: B (stage_b) and W (stage_w),
 * all [S] and > 0; for a schedule that does not split, its BWD takes B + W. */
int ht_pipe_check_fbw(const ht_pipe_sched *s, const double *stage_fwd, const double *stage_b,
                      const double *stage_w, ht_pipe_report *r);

/* Writes rank r's stream as one line per instruction ("FWD mb=3 stage=1 buf=0"). */
void ht_pipe_instr_str(const ht_pipe_instr *in, char *buf, size_t n);

/* As ht_pipe_check, and also each instruction's start and end time: start[r][i], end[r][i]
 * for i < len[r] (caller's arrays; a RECV starts when it may proceed, communication and
 * LOAD / REDUCE / OPT_STEP end when they start). Undefined where it returns an error. */
int ht_pipe_timeline(const ht_pipe_sched *s, double bf_ratio, const double *stage_fwd,
                     double *const *start, double *const *end, ht_pipe_report *r);

/* ---------------------------------------------------------------- helpers for consumers */

/* ht_pipe_kind_parse (the kind named name, or -1): config/modes.h. */
/* Chunk that holds `stage` of pipeline `dir` on its rank: stage / D, Chimera: dir. */
int ht_pipe_stage_chunk(int kind, int D, int dir, int stage);
/* Model chunks per rank: v, Chimera 2 (one replica per direction). */
int ht_pipe_nchunks(const ht_pipe_sched *s);
/* The stage that chunk `chunk` of `rank` holds, its pipeline in *dir (may be NULL). The two
 * replicas of a Chimera stage s are (rank s, chunk 0) and (rank D-1-s, chunk 1). */
int ht_pipe_chunk_stage(const ht_pipe_sched *s, int rank, int chunk, int *dir);
/* A number naming the message a SEND_* / RECV_* moves, the same on both sides and distinct
 * for every message of the batch: ((mb * ndir + dir) * S + receiving stage) * 2 + (GRAD),
 * below 2 * N * ndir * S (an MPI tag when that fits the tag bound); -1 for other ops. */
int ht_pipe_msg_tag(const ht_pipe_sched *s, const ht_pipe_instr *in);

/* ---------------------------------------------------------------- showing (the only I/O here) */

/* Text timeline: one row per rank, one cell per unit of time (F = 1, B = bf), "F3" forward of
 * micro-batch 3 (lower case: Chimera's up pipeline; ":c" chunk c when v > 1), "B3" its
 * backward, '.' idle; then makespan, bubble and peak slots per rank. Prints the checker's
 * error instead when s does not pass. */
void ht_pipe_print_timeline(const ht_pipe_sched *s, double bf, FILE *f);
/* Every rank's stream, one instruction a line. */
void ht_pipe_print_streams(const ht_pipe_sched *s, FILE *f);
/* Chrome trace (chrome://tracing, Perfetto) of the checker's timeline: one track per rank,
 * 1 time unit shown as 1 ms. HT_OK, or the checker's HT_EINPUT, or HT_ERUNTIME on I/O. */
int ht_pipe_write_trace(const ht_pipe_sched *s, double bf, const char *path);

#endif
