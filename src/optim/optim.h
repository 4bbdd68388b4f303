/* Optimizers over the flat parameter and gradient buffers: SGD (momentum, Nesterov, coupled
 * L2 decay) and AdamW, with PyTorch's semantics, and global-norm gradient clipping whose
 * norm is reduced on the device (deterministically) so a step never waits on the host. */
#ifndef HT_OPTIM_OPTIM_H
#define HT_OPTIM_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "ocl/ocl.h"

enum { HT_OPT_SGD = 0, HT_OPT_ADAMW = 1 };

typedef struct ht_optim_cfg {
    int type;                /* HT_OPT_SGD | HT_OPT_ADAMW */
    float momentum;          /* SGD; 0 = plain SGD (no state) */
    int nesterov;            /* SGD; needs momentum > 0, as torch.optim.SGD */
    float beta1, beta2, eps; /* AdamW */
    float weight_decay;      /* SGD: L2 added to the gradient; AdamW: decoupled, w *= 1 - lr*wd */
    float clip;              /* max global gradient L2 norm; 0 = no clipping */
} ht_optim_cfg;

/* From the optim group of a validated config (type "sgd" | "adamw"). */
ht_optim_cfg ht_optim_cfg_from(const ht_config *cfg);

typedef struct ht_optim {
    ht_optim_cfg cfg;
    ht_dev *dev;
    size_t n;       /* floats in each state buffer: those the update covers */
    size_t n_full;  /* floats in params and grads (n unless sharded) */
    size_t off;     /* the update covers params[off, off + n) (0 unless sharded) */
    size_t gbase;   /* gwin: the gradient buffer starts at float gbase of the layout */
    int gwin;       /* ht_optim_grads_from was called */
    int64_t t;      /* steps taken; a checkpoint restores it with the state buffers */
    ht_buf *m, *v;  /* SGD: momentum buffer in m (NULL when momentum == 0);
                     * AdamW: first and second moments */
    ht_buf *part;   /* per-group partial sums of g^2 (norm pass 1) */
    ht_buf *stat;   /* [0] = ||g||_2 of the last normed step, [1] = clip scale (1 = none) */
    int track_norm; /* compute the norm every step even without clipping */
    int norm_valid; /* stat[0] holds the norm of the last step's gradients */
    int norm_given; /* ht_optim_set_norm wrote stat for the next step */
    size_t norm_groups, norm_local, final_local, upd_local; /* launch shapes, fixed at init */
    size_t norm_chunk; /* floats per work-item in norm pass 1 on CPUs; 0 = interleaved */
} ht_optim;

/* Allocates the state (zeroed) and fixes the launch shapes for n floats (n <= INT_MAX).
 * Invalid settings (unknown type, Nesterov without momentum, betas outside [0,1), eps <= 0,
 * negative clip) exit 2 naming the config key. */
void ht_optim_init(ht_optim *o, ht_dev *d, const ht_optim_cfg *cfg, size_t n);
void ht_optim_free(ht_optim *o);

/* As ht_optim_init over n floats, but the state holds params[lo, hi) only (ZeRO from the
 * start: the whole state is never allocated); steps update that slice, the gradient norm
 * still covers all n. ht_optim_init is the slice [0, n). */
void ht_optim_init_slice(ht_optim *o, ht_dev *d, const ht_optim_cfg *cfg, size_t n, size_t lo,
                         size_t hi);

/* One update with learning rate lr: t += 1, then, if cfg.clip > 0 (or norm tracking is on),
 * two kernels reduce ||grads||_2 into o->stat on the device, and one fused kernel updates
 * params and the state, scaling the gradients by min(1, clip/(||g||+1e-6)) as it reads them
 * (as torch.nn.utils.clip_grad_norm_, except that grads itself is left unchanged). Only
 * enqueues work: nothing is read back. Both buffers must hold at least n floats. */
void ht_optim_step(ht_optim *o, ht_buf *params, ht_buf *grads, float lr);

/* With on != 0, every step also computes the gradient norm when clip == 0 (two small extra
 * kernels per step), so ht_optim_last_grad_norm can be logged. Off by default. */
void ht_optim_track_norm(ht_optim *o, int on);

/* The global gradient L2 norm (before clipping) of the last step; reads back one float and
 * so waits for the queue. NAN when the last step computed no norm (clip == 0 and norm
 * tracking off, or no step taken yet). */
float ht_optim_last_grad_norm(ht_optim *o);

/* From now on the steps' gradient buffer holds floats [gbase, ...) of the layout only, with
 * this rank's slice at off - gbase (ZeRO-2's per-slice gradients, gbase <= off); its norm
 * must then be given (ht_optim_set_norm) for every step that needs one. */
void ht_optim_grads_from(ht_optim *o, size_t gbase);

/* The global gradient norm of the next step, computed by the caller (ZeRO-2: each rank holds
 * the summed gradients of its slice only, so the norm is a sum over ranks): that step skips
 * its norm pass and clips by min(1, clip / (norm + 1e-6)) as the kernel would. */
void ht_optim_set_norm(ht_optim *o, float norm);

/* ZeRO-1 (cluster.shard = "optimizer"): from now on this rank keeps the state of
 * params[lo, hi) only (copied out of the whole state, which is freed) and its steps update
 * that slice; the gradient norm still covers all n_full gradients. */
void ht_optim_shard(ht_optim *o, size_t lo, size_t hi);

/* Checkpoint state: SGD momentum 0 has none; SGD with momentum has "optim.momentum";
 * AdamW has "optim.m" and "optim.v". Each is a buffer of n floats; the caller saves o->t
 * beside them (and restores it before the next step, so SGD's first-step rule and AdamW's
 * bias corrections continue where they stopped). */
int ht_optim_state_count(const ht_optim *o);
void ht_optim_state(const ht_optim *o, int i, const char **name, ht_buf **buf, size_t *n);

#endif
