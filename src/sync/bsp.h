/* bsp, the synchronous policy: every step, the gradients of all ranks are summed (our ring or
 * MPI_Allreduce) before one identical optimizer step on every rank. The sum is bucketed and
 * overlapped with backward (PyTorch DDP style): the flat gradient buffer is cut into buckets
 * of whole layers in reverse layer order (a small first bucket, then buckets up to a cap);
 * backward runs bucket by bucket, and each bucket is read to the host and its nonblocking
 * all-reduce started as soon as its layers are done, so the sums of the last layers travel
 * while the first layers still compute. The trainer drives it through sync.h like the other
 * policies (ht_sync_backward, ht_sync_step); the bucket plan is pure (plan/buckets.h). */
#ifndef HT_SYNC_BSP_H
#define HT_SYNC_BSP_H

#include <stddef.h>

#include "plan/buckets.h"

#endif
