/* Where a model's layers are cut into pipeline stages (pure: a model description in, layer
 * boundaries out). A stage may start at any layer except an activation that runs fused
 * inside the layer before it (linear or conv + relu/gelu), so a stage computes the same bits
 * as the unsplit model. */
#ifndef HT_PLAN_BOUNDS_H
#define HT_PLAN_BOUNDS_H

#include "nn/model.h"

/* 1 when a stage may start at layer i (0 < i < nlayers). */
int ht_pipe_can_cut(const ht_model *m, int i);
/* Layers a stage may start at, plus layer 0: the most stages the model can be cut into. */
int ht_pipe_max_stages(const ht_model *m);

enum { HT_PIPE_UNIFORM, HT_PIPE_BALANCED };

/* Fills bounds[0..S] (bounds[0] = 0, bounds[S] = nlayers, increasing, every inner one a
 * legal cut). HT_PIPE_UNIFORM: as equal numbers of cut units (a layer with its fused
 * activation is one unit) as S allows, the earlier stages taking the extra ones;
 * HT_PIPE_BALANCED: the cut minimising the largest stage's forward + backward FLOPs per
 * sample (exact dynamic program). HT_EINPUT (message naming pipe.stages and the most stages
 * this model allows) when S exceeds ht_pipe_max_stages. */
int ht_pipe_bounds(const ht_model *m, int S, int how, int *bounds);

/* Checks explicit boundaries (the first layer of stages 1 .. S-1, n = S-1 of them) and fills
 * bounds[0..S]. HT_EINPUT naming `where` (the key's file:line) and the bad element. */
int ht_pipe_bounds_explicit(const ht_model *m, const int *first, int n, const char *where,
                            int *bounds);

#endif
