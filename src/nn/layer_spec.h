/* The text form of a CNN layer, as model.layers lists it: "conv 5 32 pad=2", "relu",
 * "maxpool 2", "avgpool 2", "flatten", "linear 10". Pure parsing, no device: the config loader
 * checks each element with it (file:line errors) and the CNN builder turns specs into layers. */
#ifndef HT_NN_LAYER_SPEC_H
#define HT_NN_LAYER_SPEC_H

#include <stddef.h>

typedef enum {
    HT_SPEC_CONV,    /* conv K N [stride=S] [pad=P]: K x K kernel, N output channels */
    HT_SPEC_MAXPOOL, /* maxpool K [stride=S]: K x K window, stride K by default */
    HT_SPEC_AVGPOOL, /* avgpool K [stride=S]: the same window, mean over K*K (no padding) */
    HT_SPEC_RELU,
    HT_SPEC_GELU,
    HT_SPEC_FLATTEN, /* (C,H,W) -> (C*H*W) */
    HT_SPEC_LINEAR,  /* linear N: N outputs */
} ht_spec_kind;

typedef struct ht_layer_spec {
    ht_spec_kind kind;
    int n;      /* conv: output channels; linear: outputs */
    int k;      /* conv kernel, pool window */
    int stride; /* default 1 for conv, k for maxpool and avgpool */
    int pad;    /* conv zero padding, default 0 */
} ht_layer_spec;

/* The layer words, NULL-terminated, for suggestions ("maxpol" -> "maxpool"). */
extern const char *const ht_layer_spec_kinds[];

/* Parses text into *out. On error returns HT_EINPUT and writes into err what the element
 * should look like, e.g. "conv K N [stride=S] [pad=P] (K: kernel size >= 1, N: output
 * channels >= 1)"; ht_errmsg is not touched (the caller knows file and line). */
int ht_layer_spec_parse(const char *text, ht_layer_spec *out, char *err, size_t errn);

/* The canonical short form for signatures: "conv5x32p2", "maxpool2", "avgpool2",
 * "linear512", "relu"; stride shown only when not the default ("conv3x16s2p1",
 * "maxpool3s2", "avgpool3s2"). */
void ht_layer_spec_str(const ht_layer_spec *s, char *buf, size_t n);

#endif
