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
};

enum { MSG_INIT, MSG_PUSH, MSG_BYE, MSG_PARAMS, MSG_READY, MSG_GROUP, MSG_STOP, MSG_FIN };

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
    double last_compute; /* seconds of the last step's compute (ht_sync_add_compute) */
    ht_sync_stats st;
    const ht_sync_policy *policy;
    void *impl; /* the policy's worker state */
};

/* An extra rank's start: worker 0's INIT header (blocking, politely); a payload, if any,
 * follows as a second TAG_INIT message. */
void ht_sync_recv_init(msg_hdr *h);
/* Worker 0: INIT to extra rank `to` with an optional payload. */
void ht_sync_send_init(const ht_sync *s, int to, int64_t n, const float *payload);
/* Appends printf-style text to the NUL-terminated list buf (size bytes), after a comma unless
 * buf is empty; text that does not fit is cut off. For the decision log's lists. */
void ht_sync_cat(char *buf, size_t size, const char *fmt, ...) HT_PRINTF(3, 4);
/* A failed write of the decision log (sync.log) ends the job: exit 1 with the reason. */
void ht_sync_logged(int rc);
/* The budget of samples: total steps x train.batch. */
int64_t ht_sync_budget(const ht_config *cfg, int64_t total_steps);
/* Worker side: parameters device <-> host (s->m->params). */
void ht_sync_params_read(ht_sync *s, float *x);
void ht_sync_params_write(ht_sync *s, const float *x);
/* Collective over the workers: x <- sum over workers of x (our ring, final tag). */
void ht_sync_workers_sum(const ht_sync *s, float *x, size_t n);

/* A family of policies: its worker side (open after ht_sync's fields are set, backward of
 * each local batch, step after it, finish after the last step, close) and its extra ranks
 * (serve). NULL backward: ht_model_backward; NULL finish: nothing to gather; NULL serve: the
 * policy has no extra ranks. */
struct ht_sync_policy {
    void (*open)(ht_sync *s);
    void (*step)(ht_sync *s, int b, float lr);
    void (*finish)(ht_sync *s);
    void (*close)(ht_sync *s);
    int (*serve)(const ht_config *cfg, const ht_sync_layout *L, int rank, const char *sel,
                 ht_sync_stats *st);
    /* as ht_sync_backward; sets s->stop */
    void (*backward)(ht_sync *s, int b, float grad_scale, double t_start);
};

extern const ht_sync_policy ht_bsp_policy;     /* bsp: sync/bsp.c */
extern const ht_sync_policy ht_ps_policy;      /* asp, ssp, dasp: sync/ps.c */
extern const ht_sync_policy ht_preduce_policy; /* preduce, sap-reduce: sync/preduce.c */
extern const ht_sync_policy ht_gossip_policy;  /* gossip, gossip-adaptive: sync/gossip.c */

#endif
