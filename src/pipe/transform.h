/* Post-passes on generated schedules (pure): changes a generator's streams without changing
 * its order of forwards and backwards. */
#ifndef HT_PIPE_TRANSFORM_H
#define HT_PIPE_TRANSFORM_H

#include <stdint.h>

#include "pipe/schedule.h"

/* Recomputation: on every rank r with recompute[r] != 0, inserts before each BWD a RECOMPUTE
 * of the same micro-batch, stage, direction and slot, placed ahead of the RECV_GRAD that
 * the BWD waits for (so the recompute overlaps the gradient's arrival). Such a rank keeps
 * only its stage inputs in the slots between FWD and BWD (the executor's part). The checker
 * counts a RECOMPUTE as one more forward. recompute has s->p.D entries. */
void ht_pipe_add_recompute(ht_pipe_sched *s, const uint8_t *recompute);

#endif
