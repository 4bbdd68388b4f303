/* The tiled SGEMM's packing workspace (src/ocl/gemm.c: one buffer per device, grown to the
 * largest product it ran), predicted from the model's description alone. Pure. */
#ifndef HT_PLAN_GEMM_WS_H
#define HT_PLAN_GEMM_WS_H

#include <stddef.h>

#include "nn/model.h"

/* Floats of the workspace that the largest product of layers [lo, hi) of m at B samples
 * needs (forward, the weight gradient, and the input gradient of every layer but the
 * model's first), with the tile numbers gemm.c packs with (core/gemm_tiles.h). Linear layers
 * and transformer blocks; a convolution's im2col products are not counted (0). */
size_t ht_plan_gemm_ws(const ht_model *m, int lo, int hi, int B);

#endif
