/* Evaluation and checkpoints of a pipeline whose ranks hold only their stages (issue 24):
 * no rank gathers the model.
 * - Evaluation is a forward-only pass over the stages: the owner of each stage (replica 0,
 *   the first rank of a replicated group) runs its layers on every validation batch, the
 *   boundary activation going to the next stage's owner as a host copy; the last stage's
 *   owner computes the loss and accuracy, which every rank then gets. The batches are
 *   ht_source_evaluate's, so the numbers are the one-process run's (summation order aside).
 * - A checkpoint is one sharded set (io/safetensors.h: Hugging Face's layout) with one shard
 *   per stage, written by the stage's owner from its own window, committed by rank 0 once
 *   every shard is on disk (ht_job_save_cuts). */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "train/engine_pipe.h"

typedef struct eval_ctx {
    ht_model *m;
    int lo, hi;      /* this rank's stage's layers */
    int prev, next;  /* the owners of the stages before and after (-1: none) */
    float *h;        /* host staging of one boundary activation */
} eval_ctx;

/* One validation batch through this rank's stage (uploaded already: inputs, labels). */
static void stage_batch(void *ctx, int b, double *lsum, long *correct) {
    eval_ctx *e = ctx;
    ht_model *m = e->m;
    if (e->lo > 0) {
        const size_t bytes = (size_t)b * (size_t)m->width[e->lo] * sizeof(float);
        ht_comm_recv(e->h, bytes, e->prev, TAG_EVAL);
        ht_buf_write(m->dev, m->acts, m->act_off[e->lo] * sizeof(float), bytes, e->h);
    }
    ht_model_forward_range(m, e->lo, e->hi, b);
    if (e->hi < m->nlayers) {
        const size_t bytes = (size_t)b * (size_t)m->width[e->hi] * sizeof(float);
        ht_buf_read(m->dev, m->acts, m->act_off[e->hi] * sizeof(float), bytes, e->h);
        ht_comm_send(e->h, bytes, e->next, TAG_EVAL);
        return;
    }
    ht_model_loss_forward(m, b, 0);
    double l = 0;
    int c = 0;
    ht_model_loss(m, b, &l, &c);
    *lsum += l;
    *correct += c;
}

/* The model's offsets laid out for layers [lo, hi) as pipe_local.c sized its own buffers:
 * the stage input at 0, its layers' outputs, then (lo > 0) the inputs a batch upload writes;
 * saved state from 0. act_off: [nlayers + 1], save_off: [nlayers]. */
static void stage_layout(const ht_model *m, int lo, int hi, size_t *act_off, size_t *save_off) {
    const size_t B = (size_t)m->max_batch;
    size_t act = B * (size_t)m->width[lo], save = 0;
    memcpy(act_off, m->act_off, (size_t)(m->nlayers + 1) * sizeof *act_off);
    for (int i = 0; i < m->nlayers; i++)
        save_off[i] = m->layers[i].save_off;
    act_off[lo] = 0;
    for (int i = lo; i < hi; i++) {
        const ht_layer *l = &m->layers[i];
        act_off[i + 1] = ht_layer_aliases(l) ? act_off[i] : act;
        if (!ht_layer_aliases(l)) act += B * (size_t)l->out;
        save_off[i] = save;
        save += B * l->save;
    }
    if (lo > 0) act_off[0] = act;
}

static int my_stage(const pipe_state *p) {
    for (int s = 0; s < p->sched.S; s++)
        if (ht_pipe_exec_owns(p->x, s)) return s;
    return -1;
}

void ht_pipe_eval(ht_job *j, pipe_state *p, double *loss, double *acc) {
    ht_model *m = &j->model;
    const int S = p->sched.S, s = my_stage(p);
    double v[2] = {0, 0};
    if (s >= 0) {
        eval_ctx e = {.m = m, .lo = p->bounds[s], .hi = p->bounds[s + 1]};
        e.prev = s > 0 ? ht_pipe_exec_owner(p->x, s - 1) : -1;
        e.next = s + 1 < S ? ht_pipe_exec_owner(p->x, s + 1) : -1;
        const int wmax = m->width[e.lo] > m->width[e.hi] ? m->width[e.lo] : m->width[e.hi];
        e.h = ht_xmalloc((size_t)m->max_batch * (size_t)wmax * sizeof(float));
        size_t *act_off = ht_xmalloc((size_t)(m->nlayers + 1) * sizeof *act_off);
        size_t *save_off = ht_xmalloc((size_t)m->nlayers * sizeof *save_off);
        size_t *orig_save = ht_xmalloc((size_t)m->nlayers * sizeof *orig_save);
        for (int i = 0; i < m->nlayers; i++)
            orig_save[i] = m->layers[i].save_off;
        size_t *orig_act = m->act_off;
        stage_layout(m, e.lo, e.hi, act_off, save_off);
        m->act_off = act_off;
        for (int i = 0; i < m->nlayers; i++)
            m->layers[i].save_off = save_off[i];
        ht_source_evaluate_by(m, &j->src, stage_batch, &e, &v[0], &v[1]);
        m->act_off = orig_act;
        for (int i = 0; i < m->nlayers; i++)
            m->layers[i].save_off = orig_save[i];
        if (e.hi < m->nlayers) v[0] = v[1] = 0; /* the last stage's owner has the numbers */
        free(e.h), free(act_off), free(save_off), free(orig_save);
    }
    ht_comm_allreduce_sum_f64(v, 2);
    *loss = v[0], *acc = v[1];
}

int ht_pipe_save_stages(ht_job *j, pipe_state *p, int64_t step) {
    const int S = p->sched.S;
    size_t *cut = ht_xmalloc((size_t)(S + 1) * sizeof *cut);
    int *writer = ht_xmalloc((size_t)S * sizeof *writer);
    cut[S] = j->model.nparams;
    for (int s = S - 1; s >= 0; s--) { /* a stage without parameters: an empty shard */
        size_t off, n;
        ht_pipe_exec_stage_params(p->x, s, &off, &n);
        cut[s] = n ? off : cut[s + 1];
        writer[s] = ht_pipe_exec_owner(p->x, s);
    }
    cut[0] = 0;
    int rc = ht_job_save_cuts(j, step, S, cut, writer);
    free(cut), free(writer);
    return rc;
}
