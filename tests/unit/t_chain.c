/* Models as chains of layers: the MNIST CNN's, an average-pooling CNN's and a GPT's
 * per-layer parameters, FLOPs and activation bytes checked by hand (descriptions, no
 * device); on the device, for an MLP, CNNs (max and average pooling) and a GPT, every split
 * [0,k) + [k,n) gives the logits and the gradients of the whole chain bit for bit, a range
 * whose top layer cannot fold grad_scale in still scales exactly, finite differences agree
 * with the composed backward (conv, pools, embedding, transformer block), and dropout masks
 * are a pure function of (seed, step). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "nn/layer_spec.h"
#include "nn/model.h"
#include "ref.h"
#include "tap.h"
#include "testdev.h"

static ht_dev *D;

static const char *const MNIST_CNN[] = {
    "conv 5 32 pad=2", "relu",       "maxpool 2", "conv 5 64 pad=2", "relu", "maxpool 2",
    "flatten",         "linear 512", "relu",      "linear 10"};

/* ---------------------------------------------------------------- descriptions */

static void test_cnn_layout(void) {
    ht_model m;
    ht_shape in = {3, {1, 28, 28}};
    int rc = ht_model_cnn(&m, NULL, in, MNIST_CNN, 10, 10, 64);
    if (!tap_ok(rc == HT_OK, "MNIST CNN describes without a device: %s", rc ? ht_errmsg() : ""))
        return;
    /* params: conv (cout, cin, 5, 5) + cout; linear out*in + out */
    size_t p1 = 32 * 1 * 25 + 32, p2 = 64 * 32 * 25 + 64, p3 = 3136 * 512 + 512, p4 = 512 * 10 + 10;
    const size_t want_p[10] = {p1, 0, 0, p2, 0, 0, 0, p3, 0, p4};
    const char *want_out[10] = {"32x28x28", "32x28x28", "32x14x14", "64x14x14", "64x14x14",
                                "64x7x7",   "3136",     "512",      "512",      "10"};
    int ok = m.nlayers == 10;
    char s[32];
    for (int i = 0; ok && i < 10; i++) {
        ht_shape_str(&m.layers[i].out_shape, s, sizeof s);
        ok &= m.layers[i].nparams == want_p[i] && !strcmp(s, want_out[i]);
        if (!ok)
            tap_diag("layer %d %s: %zu params, output %s", i, m.layers[i].name, m.layers[i].nparams,
                     s);
    }
    tap_ok(ok && m.nparams == p1 + p2 + p3 + p4 && m.nparams == 1663370,
           "params conv1 832, conv2 51264, fc1 1606144, fc2 5130 = %zu; shapes 32x28x28 ... 10",
           m.nparams);
    tap_ok(!strcmp(m.desc, "cnn 1x28x28 conv5x32p2-relu-maxpool2-conv5x64p2-relu-maxpool2-"
                           "flatten-linear512-relu-linear10"),
           "signature: %s", m.desc);

    /* FLOPs per sample: conv 2*(cin*k*k)*cout*Ho*Wo + bias; backward adds dW (+ dx) */
    double c1 = 2.0 * 25 * 32 * 784, c2 = 2.0 * 800 * 64 * 196, f1 = 2.0 * 3136 * 512,
           f2 = 2.0 * 512 * 10;
    const double fwd[10] = {c1 + 32 * 784, 32 * 784, 32 * 196 * 4, c2 + 64 * 196, 64 * 196,
                            64 * 49 * 4,   0,        f1 + 512,     512,           f2 + 10};
    const double bwd[10] = {c1 + 32 * 784 /* no dx: first layer */,
                            32 * 784,
                            32 * 196 * 4,
                            2 * c2 + 64 * 196,
                            64 * 196,
                            64 * 49 * 4,
                            0,
                            2 * f1 + 512,
                            512,
                            2 * f2 + 10};
    ok = 1;
    double total = 0;
    for (int i = 0; i < 10; i++) {
        double f = ht_layer_flops_forward(&m.layers[i]),
               b = ht_layer_flops_backward(&m.layers[i], i > 0);
        ok &= f == fwd[i] && b == bwd[i];
        if (f != fwd[i] || b != bwd[i])
            tap_diag("layer %d: fwd %.0f (want %.0f), bwd %.0f (want %.0f)", i, f, fwd[i], b,
                     bwd[i]);
        total += fwd[i] + bwd[i];
    }
    tap_ok(ok && ht_model_flops_per_sample(&m) == total,
           "FLOPs per layer by hand (conv1 fwd %.0f, conv2 fwd %.0f), total %.4g per sample",
           fwd[0], fwd[3], total);
    /* activation bytes: the output (flatten shares its input's), nothing else saved */
    const size_t bytes[10] = {32 * 784 * 4,
                              32 * 784 * 4,
                              32 * 196 * 4,
                              64 * 196 * 4,
                              64 * 196 * 4,
                              64 * 49 * 4,
                              0,
                              512 * 4,
                              512 * 4,
                              40};
    ok = 1;
    for (int i = 0; i < 10; i++)
        ok &= ht_layer_act_bytes(&m.layers[i]) == bytes[i];
    tap_ok(ok, "activation bytes per sample: conv1 100352, pool2 12544, flatten 0, fc2 40");

    ht_param_tensor t[8];
    int n = ht_model_param_tensors(&m, t, 8);
    tap_ok(n == 8 && !strcmp(t[0].name, "conv1.weight") && t[0].ndim == 4 && t[0].shape[0] == 32 &&
               t[0].shape[1] == 1 && t[0].shape[2] == 5 && t[0].shape[3] == 5 &&
               !strcmp(t[3].name, "conv2.bias") && t[4].shape[0] == 512 && t[4].shape[1] == 3136,
           "tensors conv1.weight (32,1,5,5) ... fc1.weight (512,3136): 4-dim shapes");
    ht_model_free(&m);

    /* shape errors name the element */
    const char *bad[] = {"conv 5 8", "maxpool 2", "maxpool 2", "maxpool 2", "flatten", "linear 3"};
    rc = ht_model_cnn(&m, NULL, (ht_shape){3, {1, 10, 10}}, bad, 6, 3, 4); /* 6, 3, 1, - */
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "model.layers[3] \"maxpool 2\"") &&
               strstr(ht_errmsg(), "does not fit"),
           "a window too large for its input names the element: %s", ht_errmsg());
    const char *noflat[] = {"conv 3 4", "linear 3"};
    rc = ht_model_cnn(&m, NULL, (ht_shape){3, {1, 6, 6}}, noflat, 2, 3, 4);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "model.layers[1]") &&
               strstr(ht_errmsg(), "flatten"),
           "linear on (C,H,W) asks for flatten: %s", ht_errmsg());
    const char *classes[] = {"flatten", "linear 7"};
    rc = ht_model_cnn(&m, NULL, (ht_shape){3, {1, 6, 6}}, classes, 2, 3, 4);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "3 classes"),
           "a last layer that does not give the class count: %s", ht_errmsg());
}

/* avgpool: the layer-spec grammar, shapes, FLOPs (k*k per output forward, k*k + 1
 * backward: a divide per window, an add per window element), signature, errors. */
static void test_avgpool_layout(void) {
    ht_layer_spec sp;
    char err[256], str[48];
    int ok = ht_layer_spec_parse("avgpool 3 stride=2", &sp, err, sizeof err) == HT_OK &&
             sp.kind == HT_SPEC_AVGPOOL && sp.k == 3 && sp.stride == 2;
    ht_layer_spec_str(&sp, str, sizeof str);
    ok &= !strcmp(str, "avgpool3s2");
    ok &= ht_layer_spec_parse("avgpool 2", &sp, err, sizeof err) == HT_OK && sp.stride == 2;
    ht_layer_spec_str(&sp, str, sizeof str);
    tap_ok(ok && !strcmp(str, "avgpool2"),
           "\"avgpool 3 stride=2\" parses (k 3, stride 2; signature avgpool3s2), stride "
           "defaults to K (avgpool2)");
    int bad_pad = ht_layer_spec_parse("avgpool 2 pad=1", &sp, err, sizeof err) == HT_EINPUT &&
                  strstr(err, "\"avgpool K [stride=S]\"");
    int bad_k = ht_layer_spec_parse("avgpool", &sp, err, sizeof err) == HT_EINPUT &&
                strstr(err, "\"avgpool K [stride=S]\"");
    int unknown = ht_layer_spec_parse("meanpool 2", &sp, err, sizeof err) == HT_EINPUT &&
                  strstr(err, "maxpool, avgpool,");
    tap_ok(bad_pad && bad_k && unknown,
           "avgpool with pad= or without K shows its form; an unknown word lists avgpool: %s", err);

    /* 2x9x9 -> conv 4x9x9 -> avgpool3 4x3x3 -> relu -> avgpool2s1 4x2x2 -> 16 -> 3 */
    const char *specs[] = {"conv 3 4 pad=1",     "avgpool 3", "relu",
                           "avgpool 2 stride=1", "flatten",   "linear 3"};
    ht_model m;
    int rc = ht_model_cnn(&m, NULL, (ht_shape){3, {2, 9, 9}}, specs, 6, 3, 5);
    if (!tap_ok(rc == HT_OK, "CNN with avgpool describes: %s", rc ? ht_errmsg() : "")) return;
    const char *want_out[6] = {"4x9x9", "4x3x3", "4x3x3", "4x2x2", "16", "3"};
    const char *want_name[6] = {"conv1", "avgpool1", "relu1", "avgpool2", "flatten1", "fc1"};
    ok = m.nlayers == 6 && m.layers[1].kind == HT_LAYER_AVGPOOL &&
         m.layers[3].kind == HT_LAYER_AVGPOOL;
    char s[32];
    for (int i = 0; ok && i < 6; i++) {
        ht_shape_str(&m.layers[i].out_shape, s, sizeof s);
        ok &= !strcmp(s, want_out[i]) && !strcmp(m.layers[i].name, want_name[i]);
        if (!ok) tap_diag("layer %d %s: output %s", i, m.layers[i].name, s);
    }
    ok &= m.layers[1].nparams == 0 && m.layers[3].nparams == 0 &&
          m.nparams == 4 * 2 * 9 + 4 + 16 * 3 + 3;
    tap_ok(ok, "avgpool shapes 4x9x9 -> 4x3x3 (k 3) -> 4x2x2 (k 2, stride 1), no parameters");
    tap_ok(!strcmp(m.desc, "cnn 2x9x9 conv3x4p1-avgpool3-relu-avgpool2s1-flatten-linear3"),
           "signature: %s", m.desc);
    double f1 = ht_layer_flops_forward(&m.layers[1]), b1 = ht_layer_flops_backward(&m.layers[1], 1),
           f3 = ht_layer_flops_forward(&m.layers[3]), b3 = ht_layer_flops_backward(&m.layers[3], 1),
           b0 = ht_layer_flops_backward(&m.layers[3], 0);
    tap_ok(f1 == 36 * 9 && b1 == 36 * 10 && f3 == 16 * 4 && b3 == 16 * 5 && b0 == 0 &&
               ht_layer_act_bytes(&m.layers[1]) == 36 * 4 &&
               ht_layer_act_bytes(&m.layers[3]) == 16 * 4,
           "avgpool FLOPs by hand: 3x3 fwd %.0f bwd %.0f (36 x 9, 36 x 10), 2x2 fwd %.0f bwd "
           "%.0f (16 x 4, 16 x 5), none without dx; activation bytes 144, 64",
           f1, b1, f3, b3);
    ht_model_free(&m);

    const char *big[] = {"conv 3 4", "avgpool 2", "avgpool 4", "flatten", "linear 3"};
    rc = ht_model_cnn(&m, NULL, (ht_shape){3, {1, 8, 8}}, big, 5, 3, 4); /* 6, 3, - */
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "model.layers[2] \"avgpool 4\"") &&
               strstr(ht_errmsg(), "does not fit"),
           "an avgpool window too large for its input names the element: %s", ht_errmsg());
    const char *flat[] = {"flatten", "avgpool 2", "linear 3"};
    rc = ht_model_cnn(&m, NULL, (ht_shape){3, {1, 8, 8}}, flat, 3, 3, 4);
    tap_ok(rc == HT_EINPUT && strstr(ht_errmsg(), "model.layers[1]") &&
               strstr(ht_errmsg(), "avgpool needs a (C,H,W) input"),
           "avgpool after flatten: %s", ht_errmsg());
}

static void test_gpt_layout(void) {
    enum { L = 4, C = 128, H = 4, T = 64, V = 256 };
    ht_model m;
    int rc = ht_model_gpt(&m, NULL, V, T, L, C, H, 0.0f, 8, 0);
    if (!tap_ok(rc == HT_OK, "GPT L4 C128 H4 T64 describes: %s", rc ? ht_errmsg() : "")) return;
    size_t block =
        12 * C * C + 13 * C; /* qkv 3C^2+3C, proj C^2+C, fc 4C^2+4C, fcproj 4C^2+C, 2 LN 4C */
    size_t want = (size_t)V * C + (size_t)T * C + L * block + 2 * C + (size_t)V * C + V;
    int ok = m.nlayers == L + 3 && m.layers[0].nparams == (size_t)(V + T) * C &&
             m.layers[L + 1].nparams == 2 * C && m.layers[L + 2].nparams == (size_t)V * C + V;
    for (int i = 1; i <= L; i++)
        ok &= m.layers[i].nparams == block;
    tap_ok(ok && block == 198272 && m.nparams == want && want == 867328,
           "params: embed %d, block 12C^2+13C = %zu (x4), lnf %d, head %d: total %zu", (V + T) * C,
           block, 2 * C, V * C + V, m.nparams);
    tap_ok(!strcmp(m.desc, "gpt L4 C128 H4 T64 V256") && m.rows == T && m.input_tokens &&
               m.classes == V,
           "signature '%s', loss over T rows per sample, token input", m.desc);

    double Td = T, Cd = C;
    /* block forward: GEMMs 24 T C^2, attention 4 T^2 C + softmax 3 H T^2, and 31 per (t, c):
     * 2 LayerNorms 8+8, biases 3+1+4+1, GELU 4, two residual adds */
    double bf = 24 * Td * Cd * Cd + 4 * Td * Td * Cd + 3 * H * Td * Td + 31 * Td * Cd;
    /* backward: every GEMM twice (dW, dx) 48 T C^2, biases 9, GELU' 4, LN 13+13,
     * attention 8 T^2 C + 5 H T^2 */
    double bb = 48 * Td * Cd * Cd + 8 * Td * Td * Cd + 5 * H * Td * Td + (9 + 4 + 26) * Td * Cd;
    const ht_layer *b0 = &m.layers[1];
    tap_ok(ht_layer_flops_forward(b0) == bf && ht_layer_flops_backward(b0, 1) == bb,
           "block FLOPs by hand: fwd %.6g (got %.6g), bwd %.6g (got %.6g)", bf,
           ht_layer_flops_forward(b0), bb, ht_layer_flops_backward(b0, 1));
    double head = 2.0 * T * C * V + (double)T * V;
    tap_ok(ht_layer_flops_forward(&m.layers[L + 2]) == head &&
               ht_layer_flops_backward(&m.layers[L + 2], 1) == head + 2.0 * T * C * V,
           "head FLOPs: fwd T (2 C V + V) = %.0f, bwd adds dx 2 T C V", head);
    /* saved: ln1, qkv (3), atty, res2, ln2 (1 each), fch + gelu (4 + 4) = 15 T C; 4 T for
     * LayerNorm statistics; H T^2 attention probabilities */
    size_t save = 15 * (size_t)T * C + 4 * T + (size_t)H * T * T;
    tap_ok(b0->save == save && ht_layer_act_bytes(b0) == ((size_t)T * C + save) * 4 &&
               ht_layer_act_bytes(&m.layers[L + 1]) == ((size_t)T * C + 2 * T) * 4,
           "activation bytes per sample: block %zu (output + %zu saved floats), lnf %zu",
           ht_layer_act_bytes(b0), save, ht_layer_act_bytes(&m.layers[L + 1]));

    int n = ht_model_param_tensors(&m, NULL, 0);
    ht_param_tensor *t = malloc((size_t)n * sizeof *t);
    ht_model_param_tensors(&m, t, n);
    size_t end = 0;
    ok = n == 2 + 12 * L + 2 + 2;
    for (int i = 0; ok && i < n; i++) {
        size_t c = 1;
        for (int j = 0; j < t[i].ndim; j++)
            c *= (size_t)t[i].shape[j];
        ok &= t[i].off == end;
        end += c;
    }
    ok &= !strcmp(t[0].name, "embed.wte") && !strcmp(t[4].name, "h0.attn.qkv.weight") &&
          t[4].shape[0] == 3 * C && t[4].shape[1] == C && !strcmp(t[n - 1].name, "head.bias");
    tap_ok(ok && end == m.nparams,
           "%d tensors embed.wte ... h0.attn.qkv.weight (384,128) ... "
           "head.bias tile the buffer in order",
           n);
    /* init rules: LayerNorm 1/0, residual projections scaled by 1/sqrt(2 L) */
    const ht_param_tensor *ln1 = &t[2], *proj = &t[6], *qkv = &t[4];
    tap_ok(ln1->init == HT_INIT_CONST && ln1->init_a == 1.0f && qkv->init == HT_INIT_NORMAL &&
               qkv->init_a == 0.02f && proj->init == HT_INIT_NORMAL &&
               fabsf(proj->init_a - 0.02f / sqrtf(8.0f)) < 1e-9f,
           "init: ln weight 1, qkv N(0, 0.02), attn.proj N(0, 0.02/sqrt(2L))");
    free(t);
    ht_model_free(&m);

    tap_ok(ht_model_gpt(&m, NULL, V, T, L, 130, 4, 0.0f, 8, 0) == HT_EINPUT &&
               strstr(ht_errmsg(), "n_head 4 does not divide d_model 130"),
           "heads must divide d_model: %s", ht_errmsg());
}

/* ---------------------------------------------------------------- on the device */

typedef struct run {
    float *logits, *grads;
    double loss;
} run;

static void read_run(ht_model *m, int B, run *r) {
    size_t nl = (size_t)B * m->width[m->nlayers];
    r->logits = malloc(nl * sizeof(float));
    r->grads = malloc(m->nparams * sizeof(float));
    ht_buf_read(D, m->acts, m->act_off[m->nlayers] * sizeof(float), nl * sizeof(float), r->logits);
    ht_buf_read(D, m->grads, 0, m->nparams * sizeof(float), r->grads);
    ht_model_loss(m, B, &r->loss, NULL);
}

static void free_run(run *r) {
    free(r->logits);
    free(r->grads);
}

/* Whole chain vs every split point k, forward and backward, bit for bit. */
static void check_splits(ht_model *m, int B, const char *what) {
    float scale = 1.0f / (float)(B * m->rows);
    run whole, part;
    ht_model_forward(m, B, 1);
    ht_model_backward(m, B, scale);
    read_run(m, B, &whole);
    size_t nl = (size_t)B * m->width[m->nlayers];
    int bad = -1;
    for (int k = 1; k < m->nlayers; k++) {
        ht_buf_zero(D, m->acts, m->act_off[m->nlayers] * sizeof(float), nl * sizeof(float));
        ht_model_forward_range(m, 0, k, B);
        ht_model_forward_range(m, k, m->nlayers, B);
        ht_model_loss_forward(m, B, 1);
        ht_model_backward_range(m, k, m->nlayers, B, scale, 0);
        ht_model_backward_range(m, 0, k, B, 1.0f, 0);
        read_run(m, B, &part);
        int same = part.loss == whole.loss &&
                   !memcmp(part.logits, whole.logits, nl * sizeof(float)) &&
                   !memcmp(part.grads, whole.grads, m->nparams * sizeof(float));
        if (!same && bad < 0) {
            bad = k;
            tap_diag("%s: split at %d (%s | %s): loss %.9g vs %.9g, grad max rel err %.2e", what, k,
                     m->layers[k - 1].name, m->layers[k].name, part.loss, whole.loss,
                     tap_max_relerr(part.grads, whole.grads, m->nparams, 1e-12));
        }
        free_run(&part);
    }
    tap_ok(bad < 0,
           "%s: [0,k) + [k,%d) equal the whole chain bit for bit for every k (logits, "
           "loss, gradients)",
           what, m->nlayers);
    free_run(&whole);
}

/* Backward [0,k) with grad_scale s equals backward with dact(k) pre-multiplied by s, for
 * k whose top layer folds the scale into a GEMM or not (then the core scales in place with
 * ht_scale, and the gradients match bit for bit). */
static void check_scaled_ranges(ht_model *m, int B, const char *what) {
    int bad = -1, nonfold = 0;
    size_t np = m->nparams;
    float *g1 = malloc(np * sizeof(float)), *g2 = malloc(np * sizeof(float));
    for (int k = 1; k <= m->nlayers; k++) {
        size_t n = (size_t)B * m->width[k];
        float *dy = malloc(n * sizeof(float)), *dy2 = malloc(n * sizeof(float));
        ref_fill_uniform(dy, n, -1, 1, 100 + (uint64_t)k);
        for (size_t i = 0; i < n; i++)
            dy2[i] = 0.5f * dy[i]; /* exact */
        ht_model_forward(m, B, 0);
        ht_buf_write(D, m->dacts, m->act_off[k] * sizeof(float), n * sizeof(float), dy);
        ht_model_backward_range(m, 0, k, B, 0.5f, 0);
        ht_buf_read(D, m->grads, 0, np * sizeof(float), g1);
        ht_buf_write(D, m->dacts, m->act_off[k] * sizeof(float), n * sizeof(float), dy2);
        ht_model_backward_range(m, 0, k, B, 1.0f, 0);
        ht_buf_read(D, m->grads, 0, np * sizeof(float), g2);
        ht_layer_kind top = m->layers[k - 1].kind;
        int folds =
            !(top == HT_LAYER_FLATTEN || top == HT_LAYER_MAXPOOL || top == HT_LAYER_AVGPOOL ||
              top == HT_LAYER_BLOCK || top == HT_LAYER_LAYERNORM || top == HT_LAYER_EMBED);
        /* a folded scale multiplies inside the GEMM (rounding may differ by an ulp); the
         * in-place scale (ht_scale by 0.5) is exact, so everything after it is bit for bit */
        double e = tap_max_relerr(g1, g2, np, 1e-6);
        int same = !memcmp(g1, g2, np * sizeof(float));
        if ((folds ? e > 1e-5 : !same) && bad < 0) bad = k;
        nonfold += !folds;
        if (bad == k)
            tap_diag("%s: scaled range [0,%d): rel err %.2e%s", what, k, e,
                     folds ? "" : " (in-place scale: want bit for bit)");
        free(dy);
        free(dy2);
    }
    tap_ok(bad < 0,
           "%s: backward [0,k) with grad_scale 0.5 = with the incoming gradient halved, "
           "every k (%d with a top layer that cannot fold the scale: bit for bit)",
           what, nonfold);
    free(g1);
    free(g2);
}

/* Central differences of the mean loss against the analytic gradient on `count` parameters
 * spread over every tensor. */
static void check_fd(ht_model *m, int B, const char *what, float h, double tol) {
    size_t np = m->nparams;
    float *p = malloc(np * sizeof(float)), *g = malloc(np * sizeof(float));
    ht_buf_read(D, m->params, 0, np * sizeof(float), p);
    double rows = (double)B * m->rows;
    ht_model_forward(m, B, 1);
    ht_model_backward(m, B, (float)(1.0 / rows));
    ht_buf_read(D, m->grads, 0, np * sizeof(float), g);
    int nt = ht_model_param_tensors(m, NULL, 0), checked = 0;
    ht_param_tensor *t = malloc((size_t)nt * sizeof *t);
    ht_model_param_tensors(m, t, nt);
    double worst = 0, gmax = 0;
    const char *worst_name = "";
    for (int i = 0; i < nt; i++) {
        size_t c = 1;
        for (int j = 0; j < t[i].ndim; j++)
            c *= (size_t)t[i].shape[j];
        for (int s = 0; s < 3; s++) {
            size_t k = t[i].off + (s == 0 ? 0 : s == 1 ? c / 2 : c - 1);
            float v = p[k];
            double lp, lm;
            p[k] = v + h;
            ht_buf_write(D, m->params, 0, np * sizeof(float), p);
            ht_model_forward(m, B, 0);
            ht_model_loss(m, B, &lp, NULL);
            p[k] = v - h;
            ht_buf_write(D, m->params, 0, np * sizeof(float), p);
            ht_model_forward(m, B, 0);
            ht_model_loss(m, B, &lm, NULL);
            p[k] = v;
            double fd = (lp - lm) / rows / ((double)(v + h) - (double)(v - h));
            double e = fabs(fd - g[k]) / fmax(0.05, fabs(g[k]));
            if (tap_worse(worst, e) != worst) worst_name = t[i].name;
            worst = tap_worse(worst, e);
            if (fabs(g[k]) > gmax) gmax = fabs(g[k]);
            checked++;
        }
    }
    ht_buf_write(D, m->params, 0, np * sizeof(float), p);
    tap_ok(worst < tol && gmax > 1e-3,
           "%s: finite differences on %d parameters of all %d tensors (largest |grad| %.3f): worst "
           "err %.2e (%s)",
           what, checked, nt, gmax, worst, worst_name);
    free(t);
    free(p);
    free(g);
}

/* A batch of B inputs of n values uniform in [-2, 2) (seed xs) and labels below cls (seed
 * ys), set on m. */
static void random_batch(ht_model *m, float *x, int32_t *y, int B, int n, int cls, uint64_t xs,
                         uint64_t ys) {
    ref_fill_uniform(x, (size_t)B * n, -2, 2, xs);
    for (int i = 0; i < B; i++)
        y[i] = (int32_t)ht_rng_below(ys, (uint64_t)i, (uint32_t)cls);
    ht_model_set_batch(m, x, y, B);
}

static void test_mlp_chain(void) {
    enum { B = 5 };
    const int hidden[] = {9, 7, 6};
    ht_model m;
    ht_exit_on_error(ht_model_mlp(&m, D, 6, hidden, 3, 4, "gelu", B));
    ht_model_init_params(&m, 3);
    float x[B * 6];
    int32_t y[B];
    random_batch(&m, x, y, B, 6, 4, 5, 6);
    check_splits(&m, B, "mlp 6-9-7-6-4 gelu");
    check_scaled_ranges(&m, B, "mlp");
    ht_model_free(&m);
}

static void test_cnn_chain(void) {
    enum { B = 3, CLS = 4 };
    const char *specs[] = {"conv 3 4 pad=1", "relu",     "maxpool 2", "conv 3 5", "gelu",
                           "flatten",        "linear 6", "relu",      "linear 4"};
    ht_model m;
    int rc = ht_model_cnn(&m, D, (ht_shape){3, {2, 8, 8}}, specs, 9, CLS, B);
    if (!tap_ok(rc == HT_OK, "small CNN 2x8x8 builds on the device: %s", rc ? ht_errmsg() : ""))
        return;
    ht_model_init_params(&m, 11);
    float x[B * 128];
    int32_t y[B];
    random_batch(&m, x, y, B, 128, CLS, 7, 8);
    check_splits(&m, B, "cnn conv-relu-pool-conv-gelu-flatten-linear-relu-linear");
    check_scaled_ranges(&m, B, "cnn");
    ht_model_free(&m);

    /* finite differences on the GELU variant with a small step: a step across a ReLU kink
     * or a max-pool argmax switch is not a derivative (at 1e-2 the pools switch often) */
    specs[1] = "gelu";
    specs[7] = "gelu";
    ht_exit_on_error(ht_model_cnn(&m, D, (ht_shape){3, {2, 8, 8}}, specs, 9, CLS, B));
    ht_model_init_params(&m, 11);
    ht_model_set_batch(&m, x, y, B);
    check_fd(&m, B, "cnn (gelu)", 2e-3f, 5e-3);
    ht_model_free(&m);
}

/* A CNN with two average pools (k 2 stride 2, k 2 stride 1): the pool's output against
 * the host's window means, splits bit for bit, scaled ranges (avgpool cannot fold the
 * scale), finite differences through both pools into conv1. */
static void test_avgpool_chain(void) {
    enum { B = 3, CLS = 4 };
    /* 2x8x8 -> conv 4x8x8 -> avgpool 4x4x4 -> conv 5x2x2 -> avgpool s1 5x1x1 -> 5 -> 6 -> 4 */
    const char *specs[] = {"conv 3 4 pad=1",     "gelu",    "avgpool 2", "conv 3 5", "relu",
                           "avgpool 2 stride=1", "flatten", "linear 6",  "relu",     "linear 4"};
    ht_model m;
    int rc = ht_model_cnn(&m, D, (ht_shape){3, {2, 8, 8}}, specs, 10, CLS, B);
    if (!tap_ok(rc == HT_OK, "CNN 2x8x8 with avgpool builds on the device: %s",
                rc ? ht_errmsg() : ""))
        return;
    ht_model_init_params(&m, 13);
    float x[B * 128];
    int32_t y[B];
    random_batch(&m, x, y, B, 128, CLS, 9, 10);

    /* layer 2: (B,4,8,8) -> (B,4,4,4), each output the mean of its 2x2 window */
    ht_model_forward(&m, B, 0);
    float in[B * 256], out[B * 64], want[B * 64];
    ht_buf_read(D, m.acts, m.act_off[2] * sizeof(float), sizeof in, in);
    ht_buf_read(D, m.acts, m.act_off[3] * sizeof(float), sizeof out, out);
    for (int p = 0; p < B * 4; p++)
        for (int oh = 0; oh < 4; oh++)
            for (int ow = 0; ow < 4; ow++) {
                const float *w = in + p * 64 + 2 * oh * 8 + 2 * ow;
                float sum = 0.0f; /* the kernel's order: row-major over the window */
                sum += w[0], sum += w[1], sum += w[8], sum += w[9];
                want[p * 16 + oh * 4 + ow] = sum / 4.0f;
            }
    double e = tap_max_relerr(out, want, B * 64, 1e-6);
    tap_ok(e < 1e-6, "avgpool 2 output = the host's 2x2 window sums / 4 (rel err %.2e)", e);

    check_splits(&m, B, "cnn conv-gelu-avgpool-conv-relu-avgpool-flatten-linear-relu-linear");
    check_scaled_ranges(&m, B, "cnn with avgpool");
    ht_model_free(&m);

    /* finite differences with GELU everywhere (no kinks; the pools are linear) */
    specs[4] = "gelu";
    specs[8] = "gelu";
    ht_exit_on_error(ht_model_cnn(&m, D, (ht_shape){3, {2, 8, 8}}, specs, 10, CLS, B));
    ht_model_init_params(&m, 13);
    ht_model_set_batch(&m, x, y, B);
    check_fd(&m, B, "cnn with avgpool (gelu)", 2e-3f, 5e-3);
    ht_model_free(&m);
}

static void gpt_batch(ht_model *m, int B, int T, int V, uint64_t seed) {
    int32_t *tok = malloc((size_t)B * T * sizeof(int32_t)),
            *tgt = malloc((size_t)B * T * sizeof(int32_t));
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)ht_rng_below(seed, (uint64_t)i, (uint32_t)V);
        tgt[i] = (int32_t)ht_rng_below(seed + 1, (uint64_t)i, (uint32_t)V);
    }
    ht_model_set_batch_tokens(m, tok, tgt, B);
    free(tok);
    free(tgt);
}

static void test_gpt_chain(void) {
    enum { B = 3, T = 5, V = 11, L = 2, C = 8, H = 2 };
    ht_model m;
    int rc = ht_model_gpt(&m, D, V, T, L, C, H, 0.0f, B, 0);
    if (!tap_ok(rc == HT_OK, "small GPT L2 C8 H2 T5 V11 builds on the device: %s",
                rc ? ht_errmsg() : ""))
        return;
    ht_model_init_params(&m, 5);
    /* GPT-2's init makes the logits nearly uniform; larger weights exercise more */
    size_t np = m.nparams;
    float *p = malloc(np * sizeof(float));
    ref_fill_uniform(p, np, -0.5f, 0.5f, 17);
    ht_buf_write(D, m.params, 0, np * sizeof(float), p);
    gpt_batch(&m, B, T, V, 21);
    double l;
    int c;
    ht_model_forward(&m, B, 0);
    ht_model_loss(&m, B, &l, &c);
    tap_ok(isfinite(l) && c >= 0 && c <= B * T, "loss over %d rows %.4f per row, %d correct", B * T,
           l / (B * T), c);
    check_splits(&m, B, "gpt embed-h0-h1-lnf-head");
    check_scaled_ranges(&m, B, "gpt");
    check_fd(&m, B, "gpt", 1e-2f, 5e-3);

    /* dropout: the same (seed, step) twice gives the same loss and gradients; another
     * step other masks; off again gives the dropout-free loss */
    ht_model_free(&m);
    ht_exit_on_error(ht_model_gpt(&m, D, V, T, L, C, H, 0.25f, B, 0));
    ht_buf_write(D, m.params, 0, np * sizeof(float), p);
    gpt_batch(&m, B, T, V, 21);
    run a, b, e;
    ht_model_set_training(&m, 1, 99, 7);
    ht_model_forward(&m, B, 1);
    ht_model_backward(&m, B, 1.0f);
    read_run(&m, B, &a);
    ht_model_forward(&m, B, 1);
    ht_model_backward(&m, B, 1.0f);
    read_run(&m, B, &b);
    int same = a.loss == b.loss && !memcmp(a.grads, b.grads, np * sizeof(float));
    free_run(&b);
    ht_model_set_training(&m, 1, 99, 8);
    ht_model_forward(&m, B, 1);
    read_run(&m, B, &b);
    ht_model_set_training(&m, 0, 0, 0);
    ht_model_forward(&m, B, 1);
    read_run(&m, B, &e);
    tap_ok(same && b.loss != a.loss && e.loss == l && a.loss != l,
           "dropout 0.25: (seed, step) repeats bit for bit (%.5f), step 8 differs (%.5f), off "
           "equals no dropout (%.5f)",
           a.loss, b.loss, e.loss);
    free_run(&a);
    free_run(&b);
    free_run(&e);
    ht_model_set_training(&m, 1, 99, 7);
    check_splits(&m, B, "gpt with dropout (training)");

    /* a row offset: rows [1, B) run alone with offset 1 draw the masks they have in the whole
     * batch (a data-parallel rank's slice), so their logits are the whole batch's rows; with
     * offset 0 the slice draws other masks */
    {
        int32_t *tok = malloc((size_t)B * T * sizeof(int32_t)),
                *tgt = malloc((size_t)B * T * sizeof(int32_t));
        for (int i = 0; i < B * T; i++) {
            tok[i] = (int32_t)ht_rng_below(21, (uint64_t)i, (uint32_t)V);
            tgt[i] = (int32_t)ht_rng_below(22, (uint64_t)i, (uint32_t)V);
        }
        size_t row = (size_t)m.width[m.nlayers], nl = (size_t)(B - 1) * row;
        float *whole = malloc((size_t)B * row * sizeof(float)), *off1 = malloc(nl * sizeof(float)),
              *off0 = malloc(nl * sizeof(float));
        ht_model_set_training(&m, 1, 99, 7);
        ht_model_set_row_offset(&m, 0);
        ht_model_set_batch_tokens(&m, tok, tgt, B);
        ht_model_forward(&m, B, 0);
        ht_buf_read(D, m.acts, m.act_off[m.nlayers] * sizeof(float), (size_t)B * row * sizeof(float),
                    whole);
        ht_model_set_batch_tokens(&m, tok + T, tgt + T, B - 1);
        ht_model_set_row_offset(&m, 1);
        ht_model_forward(&m, B - 1, 0);
        ht_buf_read(D, m.acts, m.act_off[m.nlayers] * sizeof(float), nl * sizeof(float), off1);
        ht_model_set_row_offset(&m, 0);
        ht_model_forward(&m, B - 1, 0);
        ht_buf_read(D, m.acts, m.act_off[m.nlayers] * sizeof(float), nl * sizeof(float), off0);
        double e1 = tap_max_relerr(off1, whole + row, nl, 1e-6),
               e0 = tap_max_relerr(off0, whole + row, nl, 1e-6);
        tap_ok(e1 <= 1e-5 && e0 > 1e-3,
               "dropout row offset 1: rows [1,%d) alone match the whole batch's rows (max rel "
               "err %.2e); offset 0 draws other masks (%.2e)",
               B, e1, e0);
        free(tok);
        free(tgt);
        free(whole);
        free(off1);
        free(off0);
    }
    free(p);
    ht_model_free(&m);
}

/* The tensor named `name` among a model's saved tensors (NULL if none). */
static const ht_param_tensor *tensor_named(const ht_param_tensor *t, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    return NULL;
}

/* GPT-2's tied head: the same model untied, with head.weight set to wte and head.bias 0, is
 * the reference. Tied: two tensors fewer (V*(C+1) parameters), the same logits and loss,
 * every gradient the untied one except wte's, which is the sum of the untied wte's and
 * head.weight's. Then finite differences through both uses of wte. */
static void test_gpt_tied(void) {
    enum { B = 3, T = 5, V = 11, L = 1, C = 8, H = 2 };
    ht_model mt, mu;
    ht_exit_on_error(ht_model_gpt(&mt, D, V, T, L, C, H, 0.0f, B, 1));
    ht_exit_on_error(ht_model_gpt(&mu, D, V, T, L, C, H, 0.0f, B, 0));
    int nt = ht_model_param_tensors(&mt, NULL, 0), nu = ht_model_param_tensors(&mu, NULL, 0);
    ht_param_tensor tt[64], tu[64];
    ht_model_param_tensors(&mt, tt, 64);
    ht_model_param_tensors(&mu, tu, 64);
    tap_ok(nu == nt + 2 && mu.nparams == mt.nparams + (size_t)V * (C + 1) &&
               !tensor_named(tt, nt, "head.weight") && !tensor_named(tt, nt, "head.bias") &&
               strstr(mt.desc, "tied"),
           "tied GPT: no head.weight or head.bias tensor (%d tensors, %zu parameters; untied %d, "
           "%zu), desc '%s'",
           nt, mt.nparams, nu, mu.nparams, mt.desc);
    float *pt = malloc(mt.nparams * sizeof(float)), *pu = malloc(mu.nparams * sizeof(float));
    ref_fill_uniform(pt, mt.nparams, -0.5f, 0.5f, 31);
    const ht_param_tensor *wte = tensor_named(tt, nt, "embed.wte");
    for (int i = 0; i < nu; i++) {
        const ht_param_tensor *src =
            !strcmp(tu[i].name, "head.weight") ? wte : tensor_named(tt, nt, tu[i].name);
        size_t n = (size_t)(tu[i].ndim == 2 ? tu[i].shape[0] * tu[i].shape[1] : tu[i].shape[0]);
        if (src) memcpy(pu + tu[i].off, pt + src->off, n * sizeof(float));
        else memset(pu + tu[i].off, 0, n * sizeof(float)); /* head.bias: GPT-2 has none */
    }
    ht_buf_write(D, mt.params, 0, mt.nparams * sizeof(float), pt);
    ht_buf_write(D, mu.params, 0, mu.nparams * sizeof(float), pu);
    double lt, lu;
    gpt_batch(&mt, B, T, V, 41);
    gpt_batch(&mu, B, T, V, 41);
    ht_model_forward(&mt, B, 1);
    ht_model_loss(&mt, B, &lt, NULL);
    ht_model_backward(&mt, B, 1.0f);
    ht_model_forward(&mu, B, 1);
    ht_model_loss(&mu, B, &lu, NULL);
    ht_model_backward(&mu, B, 1.0f);
    float *gt = malloc(mt.nparams * sizeof(float)), *gu = malloc(mu.nparams * sizeof(float));
    ht_buf_read(D, mt.grads, 0, mt.nparams * sizeof(float), gt);
    ht_buf_read(D, mu.grads, 0, mu.nparams * sizeof(float), gu);
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < nt; i++) {
        size_t n = (size_t)(tt[i].ndim == 2 ? tt[i].shape[0] * tt[i].shape[1] : tt[i].shape[0]);
        const ht_param_tensor *u = tensor_named(tu, nu, tt[i].name),
                              *hw = tensor_named(tu, nu, "head.weight");
        for (size_t k = 0; k < n; k++) {
            double want = gu[u->off + k] + (tt[i].off == wte->off ? gu[hw->off + k] : 0.0);
            double e = fabs(gt[tt[i].off + k] - want) / fmax(1e-3, fabs(want));
            if (tap_worse(worst, e) != worst) worst_name = tt[i].name;
            worst = tap_worse(worst, e);
        }
    }
    tap_ok(lt == lu && worst < 1e-5,
           "tied = untied with head.weight = wte: loss %.6f (bit for bit), gradients within "
           "%.1e (worst %s), wte's the sum of both uses",
           lt, worst, worst_name);
    check_fd(&mt, B, "tied gpt", 1e-2f, 5e-3);
    free(pt), free(pu), free(gt), free(gu);
    ht_model_free(&mt);
    ht_model_free(&mu);
}

int main(void) {
    test_cnn_layout();
    test_avgpool_layout();
    test_gpt_layout();
    D = test_dev_open();
    test_mlp_chain();
    test_cnn_chain();
    test_avgpool_chain();
    test_gpt_chain();
    test_gpt_tied();
    ht_dev_close(D);
    return tap_done();
}
