/* One layer's own buffers for the start-up calibration on a rank that holds no whole model
 * (pipe_start.c: its stage is allocated only after the plan, which needs the times): the
 * layer's parameters (zeros: the kernels' time does not depend on the values), gradients and
 * its activations, saved state and workspace at the model's batch, laid out as a one-layer
 * stage, swapped into the model while the layer is timed and freed after. */
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "train/pipe_calib.h"

static ht_buf *zeroed(ht_dev *d, size_t floats, const char *what) {
    const size_t bytes = (floats ? floats : 1) * sizeof(float);
    ht_buf *b = ht_buf_new(d, bytes, what);
    ht_buf_zero(d, b, 0, bytes);
    return b;
}

void ht_calib_win_begin(ht_model *m, int l, ht_calib_win *w) {
    const ht_layer *ly = &m->layers[l];
    const size_t B = (size_t)m->max_batch;
    w->params = m->params, w->grads = m->grads, w->acts = m->acts, w->dacts = m->dacts;
    w->saved = m->saved, w->work = m->work;
    w->pbase = m->pbase, w->pres = m->pres, w->act_off = m->act_off;
    w->nwin = m->nwin;
    memcpy(w->win, m->win, sizeof w->win);
    w->save_off = ly->save_off;
    size_t act, save, work;
    ht_model_stage_floats(m, l, l + 1, m->max_batch, &act, &save, &work);
    /* a tied head reads the tensor it shares from a window of its own */
    size_t floats;
    m->nwin = ht_model_stage_windows(m, ly->nparams ? ly->woff : 0, ly->nparams, l, l + 1, m->win,
                                     &floats);
    m->params = zeroed(m->dev, floats, "calibration parameters");
    m->grads = zeroed(m->dev, floats, "calibration gradients");
    m->acts = zeroed(m->dev, act, "calibration activations");
    m->dacts = zeroed(m->dev, act, "calibration activation gradients");
    m->saved = zeroed(m->dev, save, "calibration saved state");
    m->work = ht_buf_new(m->dev, (work ? work : 1) * sizeof(float), "calibration workspace");
    if (!m->nwin) m->nwin = 1, m->win[0] = (ht_pwin){0, 0, 0};
    m->pbase = m->win[0].base, m->pres = floats;
    /* the layer's input at 0, its output after it, then (l > 0) the inputs an upload writes */
    m->act_off = ht_xmalloc((size_t)(m->nlayers + 1) * sizeof *m->act_off);
    memcpy(m->act_off, w->act_off, (size_t)(m->nlayers + 1) * sizeof *m->act_off);
    m->act_off[l] = 0;
    m->act_off[l + 1] = ht_layer_aliases(ly) ? 0 : B * (size_t)m->width[l];
    if (l > 0) m->act_off[0] = act - B * (size_t)m->width[0];
    m->layers[l].save_off = 0;
}

void ht_calib_win_end(ht_model *m, int l, ht_calib_win *w) {
    ht_dev_finish(m->dev);
    ht_buf *b[] = {m->params, m->grads, m->acts, m->dacts, m->saved, m->work};
    for (size_t i = 0; i < sizeof b / sizeof *b; i++)
        ht_buf_free(b[i]);
    free(m->act_off);
    m->params = w->params, m->grads = w->grads, m->acts = w->acts, m->dacts = w->dacts;
    m->saved = w->saved, m->work = w->work;
    m->pbase = w->pbase, m->pres = w->pres, m->act_off = w->act_off;
    m->nwin = w->nwin;
    memcpy(m->win, w->win, sizeof w->win);
    m->layers[l].save_off = w->save_off;
}
