/* The tiled SGEMM's packing workspace from the description (plan/gemm_ws.h). */
#include "plan/gemm_ws.h"

#include "core/gemm_tiles.h"

/* The largest of a linear map's products at N rows, in -> out (src/nn/ops.c: forward
 * x W^T (NT), dW = dy^T x (TN), dx = dy W (NN) where dx is wanted). */
static size_t linear(size_t N, size_t in, size_t out, int with_dx) {
    size_t f = ht_gemm_ws_floats(0, 1, N, out, in), w = ht_gemm_ws_floats(1, 0, out, in, N);
    size_t x = with_dx ? ht_gemm_ws_floats(0, 0, N, in, out) : 0;
    size_t a = f > w ? f : w;
    return a > x ? a : x;
}

static size_t max2(size_t a, size_t b) { return a > b ? a : b; }

static size_t layer_ws(const ht_layer *l, int index, int B) {
    if (l->kind == HT_LAYER_LINEAR) { /* per row of the last dimension (per position) */
        size_t fin = (size_t)l->in_shape.d[l->in_shape.ndim - 1];
        size_t fout = (size_t)l->out_shape.d[l->out_shape.ndim - 1];
        return linear((size_t)B * (l->in / fin), fin, fout, index > 0);
    }
    if (l->kind == HT_LAYER_BLOCK) { /* src/nn/layer_tf_run.c: qkv, proj, fc, fc's proj */
        size_t T = (size_t)l->out_shape.d[0], C = (size_t)l->out_shape.d[1], N = (size_t)B * T;
        size_t w = max2(linear(N, C, 3 * C, 1), linear(N, C, C, 1));
        return max2(w, max2(linear(N, C, 4 * C, 1), linear(N, 4 * C, C, 1)));
    }
    return 0;
}

size_t ht_plan_gemm_ws(const ht_model *m, int lo, int hi, int B) {
    size_t ws = 0;
    for (int l = lo; l < hi && l < m->nlayers; l++)
        ws = max2(ws, layer_ws(&m->layers[l], l, B));
    return ws;
}
