/* The virtual-time cost sink (core/vcost.h). */
#include "core/vcost.h"

static ht_vcost_fn g_sink;
static int g_paused;

void ht_vcost_set(ht_vcost_fn fn) { g_sink = fn; }

void ht_vcost(int what, int layer, int n, int B, size_t nparams) {
    if (g_sink && !g_paused) g_sink(what, layer, n, B, nparams);
}

void ht_vcost_pause(int on) { g_paused = on; }
