/* Evaluation and checkpoints of a pipeline whose ranks hold only their stages (issue 24):
 * no rank gathers the model.
 * - Evaluation is a forward-only pass over the stages: the owner of each stage (replica 0,
 *   the first rank of a replicated group; a rank may own several: interleaved, zb-v) runs its
 *   layers on every validation batch, the boundary activation going to the next stage's
 *   owner as a host copy (kept when that is this rank); the last stage's
 *   owner computes the loss and accuracy, which every rank then gets. The batches are
 *   ht_source_evaluate's, so the numbers are the one-process run's (summation order aside).
 * - A checkpoint is one sharded set (io/safetensors.h: Hugging Face's layout) with one shard
 *   per stage, written by the stage's owner from its window, committed by rank 0 once
 *   every shard is on disk (ht_job_save_cuts). */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/err.h"
#include "train/engine_pipe.h"

/* The stages this rank owns (ascending; several on an interleaved, zb-v rank), each laid
 * out in the model's own buffers as pipe_local.c sized them. */
typedef struct eval_ctx {
    ht_model *m;
    int n, me;
    int lo[HT_MODEL_MAX_CHUNKS], hi[HT_MODEL_MAX_CHUNKS];
    int prev[HT_MODEL_MAX_CHUNKS], next[HT_MODEL_MAX_CHUNKS]; /* owners around (-1: none) */
    size_t *act_off[HT_MODEL_MAX_CHUNKS], *save_off[HT_MODEL_MAX_CHUNKS];
    float *h; /* host staging of one boundary activation */
} eval_ctx;

/* The model's offsets as stage k's layout. */
static void use_layout(eval_ctx *e, int k) {
    e->m->act_off = e->act_off[k];
    for (int i = 0; i < e->m->nlayers; i++)
        e->m->layers[i].save_off = e->save_off[k][i];
}

/* One validation batch through this rank's stages in order (uploaded already, in the first
 * stage's layout: inputs, labels). A boundary between two stages of this rank stays in the
 * host staging (the next stage's owner is this rank). */
static void stage_batch(void *ctx, int b, double *lsum, long *correct) {
    eval_ctx *e = ctx;
    ht_model *m = e->m;
    for (int k = 0; k < e->n; k++) {
        use_layout(e, k);
        if (e->lo[k] > 0) {
            const size_t bytes = (size_t)b * (size_t)m->width[e->lo[k]] * sizeof(float);
            if (e->prev[k] != e->me) ht_comm_recv(e->h, bytes, e->prev[k], TAG_EVAL);
            ht_buf_write(m->dev, m->acts, m->act_off[e->lo[k]] * sizeof(float), bytes, e->h);
        }
        ht_model_forward_range(m, e->lo[k], e->hi[k], b);
        if (e->hi[k] < m->nlayers) {
            const size_t bytes = (size_t)b * (size_t)m->width[e->hi[k]] * sizeof(float);
            ht_buf_read(m->dev, m->acts, m->act_off[e->hi[k]] * sizeof(float), bytes, e->h);
            if (e->next[k] != e->me) ht_comm_send(e->h, bytes, e->next[k], TAG_EVAL);
            continue;
        }
        ht_model_loss_forward(m, b, 0);
        double l = 0;
        int c = 0;
        ht_model_loss(m, b, &l, &c);
        *lsum += l;
        *correct += c;
    }
    use_layout(e, 0); /* the next batch's upload */
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

/* The stages this rank owns, their neighbours' owners and layouts into e; the widest
 * boundary's floats per sample in *wmax. */
static void eval_init(eval_ctx *e, const pipe_state *p, int me, int *wmax) {
    const ht_model *m = e->m;
    const int S = p->sched.S;
    e->n = 0, e->me = me, *wmax = 1;
    for (int s = 0; s < S && e->n < HT_MODEL_MAX_CHUNKS; s++) {
        if (!ht_pipe_exec_owns(p->x, s)) continue;
        const int k = e->n++;
        e->lo[k] = p->bounds[s], e->hi[k] = p->bounds[s + 1];
        e->prev[k] = s > 0 ? ht_pipe_exec_owner(p->x, s - 1) : -1;
        e->next[k] = s + 1 < S ? ht_pipe_exec_owner(p->x, s + 1) : -1;
        if (m->width[e->lo[k]] > *wmax) *wmax = m->width[e->lo[k]];
        if (m->width[e->hi[k]] > *wmax) *wmax = m->width[e->hi[k]];
        e->act_off[k] = ht_xmalloc((size_t)(m->nlayers + 1) * sizeof(size_t));
        e->save_off[k] = ht_xmalloc((size_t)m->nlayers * sizeof(size_t));
        stage_layout(m, e->lo[k], e->hi[k], e->act_off[k], e->save_off[k]);
    }
}

void ht_pipe_eval(ht_job *j, pipe_state *p, double *loss, double *acc) {
    ht_model *m = &j->model;
    double v[2] = {0, 0};
    eval_ctx e = {.m = m};
    int wmax;
    eval_init(&e, p, j->rank, &wmax); /* owners are world ranks (replica 0) */
    if (e.n > 0) {
        e.h = ht_xmalloc((size_t)m->max_batch * (size_t)wmax * sizeof(float));
        size_t *orig_save = ht_xmalloc((size_t)m->nlayers * sizeof *orig_save);
        for (int i = 0; i < m->nlayers; i++)
            orig_save[i] = m->layers[i].save_off;
        size_t *orig_act = m->act_off;
        use_layout(&e, 0);
        ht_source_evaluate_by(m, &j->src, stage_batch, &e, &v[0], &v[1]);
        m->act_off = orig_act;
        for (int i = 0; i < m->nlayers; i++)
            m->layers[i].save_off = orig_save[i];
        if (e.hi[e.n - 1] < m->nlayers) v[0] = v[1] = 0; /* the last stage's owner has them */
        free(e.h), free(orig_save);
        for (int k = 0; k < e.n; k++)
            free(e.act_off[k]), free(e.save_off[k]);
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
