/* Virtual time's cost reports: compute phases say what they did (a layer range's forward or
 * backward at a batch, an optimizer step over n parameters); the SMPI build
 * (src/train/vtime.c) turns each report into declared simulated seconds from hetsim's cost
 * model. Without a sink (the normal build) a report is one test of a NULL pointer. */
#ifndef HT_CORE_VCOST_H
#define HT_CORE_VCOST_H

#include <stddef.h>

/* HT_VC_BWD_B / HT_VC_BWD_W: a zero-bubble split backward's input-gradient and weight-gradient
 * halves (issue 27) of layers that have the split. HT_VC_D2H / HT_VC_H2D: a sync policy's copy
 * of nparams floats of the model from / to the device; HT_VC_HOST: a pass over nparams floats
 * on the host (a merge, a copy, a norm): what hetsim charges a sync policy's host side. */
enum { HT_VC_FWD, HT_VC_BWD, HT_VC_OPTIM, HT_VC_BWD_B, HT_VC_BWD_W, HT_VC_D2H, HT_VC_H2D, HT_VC_HOST };

/* what: HT_VC_FWD / HT_VC_BWD (/ _B / _W): layers [layer, layer + n) at batch B; HT_VC_OPTIM: a step over
 * nparams parameters; HT_VC_D2H / _H2D / _HOST: nparams floats (layer, n, B unused). */
typedef void (*ht_vcost_fn)(int what, int layer, int n, int B, size_t nparams);

void ht_vcost_set(ht_vcost_fn fn); /* NULL: no sink */
void ht_vcost(int what, int layer, int n, int B, size_t nparams);
/* on != 0: reports are dropped until ht_vcost_pause(0) (an evaluation is an observer: it
 * takes no virtual time, so that rank 0 trains as fast as its device while it also evaluates,
 * as the asynchronous policies' other workers do not wait for it) */
void ht_vcost_pause(int on);

#endif
