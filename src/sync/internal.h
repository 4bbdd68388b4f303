/* Internal to src/sync: the worker state every policy shares, the message header and tags,
 * and each policy's entry points (bsp.c, ps.c, preduce.c, gossip.c). */
#ifndef HT_SYNC_INTERNAL_H
#define HT_SYNC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h" /* HT_PRINTF */
#include "sync/sync.h"

/* Tags of the sync protocols (below src/comm's all-reduce tags); group all-reduces use
 * tags from HT_COMM_GROUP_TAG on. */
enum {
    TAG_INIT = 100, /* worker 0 -> each extra rank: budget and sizes (+ a server's shard) */
    TAG_PUSH,       /* worker -> server: gradients (or BYE) */
    TAG_PULL,       /* server -> worker: parameters */
    TAG_FINAL,      /* server -> worker 0: final parameters */
    TAG_READY,      /* worker -> group generator / coordinator */
    TAG_GROUP,      /* group generator / coordinator -> worker */
    TAG_MODEL,      /* worker -> worker: gossip model (or FIN) */
    TAG_SNAP,       /* worker -> worker 0: its state for a checkpoint */
    TAG_AGREE,      /* worker <-> worker 0: the samples and stop flag of a segment */
    TAG_PAIR,       /* worker <-> worker: gossip-fixed's blocking pairwise exchange */
};

enum { MSG_INIT, MSG_PUSH, MSG_BYE, MSG_PARAMS, MSG_READY, MSG_GROUP, MSG_STOP, MSG_FIN };

/* An extra rank's stop decision within a segment: go on, the segment's samples are done, or
 * a worker (or this rank) was asked to stop (core/stop.h). Replies carry it. */
enum { STOP_NO, STOP_BUDGET, STOP_INTERRUPT };

/* Every message starts with this header (payload floats follow where there are any). */
typedef struct msg_hdr {
    int64_t kind;
    int64_t clock;   /* PUSH/READY: the sender's clock or timestamp; GROUP: max timestamp */
    int64_t samples; /* PUSH/READY: samples since the last message; replies: global total */
    int64_t version; /* PUSH: server version the gradient was computed at; PARAMS: now */
    int64_t n;       /* INIT: parameters (a server: its shard); GROUP: members */
    int64_t id;      /* GROUP: group number; INIT: total steps */
    double held_s;   /* PARAMS/GROUP: how long the reply was held (the sender's wait);
                        PUSH: the seconds the step computed (emulated slowdown included) */
    double weight;   /* MODEL: push-sum weight; GROUP: this member's SAP weight */
    int64_t aux;     /* PUSH/READY: 1 when the sender was asked to stop (core/stop.h);
                        INIT: a server's optimizer steps; FIN on TAG_INIT: 1 = interrupted;
                        FINAL: the server's optimizer steps */
} msg_hdr;

/* Floats after the header in a buffer (the header is a multiple of 8 bytes). */
#define PAYLOAD(buf) ((float *)((char *)(buf) + sizeof(msg_hdr)))

typedef struct ht_sync_policy ht_sync_policy; /* below */

struct ht_sync {
    const ht_config *cfg;
    ht_sync_layout L;
    int rank;
    ht_model *m;
    ht_optim *opt;
    size_t n;            /* parameters */
    int64_t total_steps; /* budget in global steps of train.batch */
    int64_t global;      /* latest known samples over all workers */
    int stop;
    int told_interrupt;  /* an extra rank's reply said STOP_INTERRUPT this segment */
    int64_t local;       /* local steps since step 0 (the data stream's batch number) */
    int64_t seg_start, seg_samples; /* the job's samples at the segment's start; this
                                       worker's samples in it */
    int64_t *version, *opt_t; /* parameter servers: each one's updates and optimizer steps */
    double last_compute; /* seconds of the last step's compute (ht_sync_add_compute) */
    double slowdown;     /* emulated slowdown in effect (ht_sync_set_slowdown), 1 = none */
    ht_sync_stats st;
    const ht_sync_policy *policy;
    void *impl; /* the policy's worker state */
};

/* An extra rank's start of a segment: worker 0's INIT header (blocking, politely): kind
 * MSG_INIT (clock: samples so far, samples: the segment's end, id: total steps; a payload,
 * if any, follows as a second TAG_INIT message) or MSG_FIN (no more segments; aux 1: the job
 * was interrupted). Returns h->kind. */
int64_t ht_sync_recv_init(msg_hdr *h);
/* Worker 0: INIT of a segment ending at `until` samples to extra rank `to` (n: the header's
 * size field), with an optional payload of npay floats (h: version and aux, may be NULL). */
void ht_sync_send_init(const ht_sync *s, int to, int64_t until, const msg_hdr *h, int64_t n,
                       const float *payload, size_t npay);
/* An extra rank's answer to a stop flag in a worker's message (or its own signal). */
int ht_sync_stop_update(int stop, int64_t samples, int64_t until, int64_t aux);
/* The end of an extra rank's run: HT_ESTOPPED when the FIN said interrupted. */
int ht_sync_fin_rc(const msg_hdr *h);
/* Appends printf-style text to the NUL-terminated list buf (size bytes), after a comma unless
 * buf is empty; text that does not fit is cut off. For the decision log's lists. */
void ht_sync_cat(char *buf, size_t size, const char *fmt, ...) HT_PRINTF(3, 4);
/* A failed write of the decision log (sync.log) ends the job: exit 1 with the reason. */
void ht_sync_logged(int rc);
/* Worker side: parameters device <-> host (s->m->params). */
void ht_sync_params_read(ht_sync *s, float *x);
void ht_sync_params_write(ht_sync *s, const float *x);
/* Collective over the workers: x <- sum over workers of x (our ring, final tag). */
void ht_sync_workers_sum(const ht_sync *s, float *x, size_t n);

/* A family of policies: its worker side (open after ht_sync's fields are set, backward of
 * each local batch, step after it, finish after the last step, close) and its extra ranks
 * (serve). NULL backward: ht_model_backward; NULL finish: nothing to gather; NULL serve: the
 * policy has no extra ranks. The asynchronous ones also run in segments (sync.h): begin
 * (worker 0 starts the extra ranks' segment), quiesce (drain every message in flight; worker
 * 0 then holds the servers' state), average (collective over the workers: the job's model
 * into out, on every worker), and get/set of a worker's scalars (HT_SYNC_NV - 2 of them). */
struct ht_sync_policy {
    void (*open)(ht_sync *s);
    void (*step)(ht_sync *s, int b, float lr);
    void (*finish)(ht_sync *s);
    void (*close)(ht_sync *s);
    int (*serve)(const ht_config *cfg, const ht_sync_layout *L, int rank, const char *sel,
                 ht_sync_stats *st);
    /* as ht_sync_backward; sets s->stop */
    void (*backward)(ht_sync *s, int b, float grad_scale, double t_start);
    void (*begin)(ht_sync *s, int64_t until);
    void (*quiesce)(ht_sync *s);
    void (*average)(ht_sync *s, float *out); /* NULL: worker 0's parameters are the job's */
    void (*get)(const ht_sync *s, double *v);
    void (*set)(ht_sync *s, const double *v);
};

extern const ht_sync_policy ht_bsp_policy;     /* bsp: sync/bsp.c */
extern const ht_sync_policy ht_ps_policy;      /* asp, ssp, dasp: sync/ps.c */
extern const ht_sync_policy ht_preduce_policy; /* preduce, sap-reduce: sync/preduce.c */
extern const ht_sync_policy ht_gossip_policy;  /* gossip, gossip-adaptive: sync/gossip.c */

#endif
