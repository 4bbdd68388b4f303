/* Metrics as JSON Lines: one object per line, flushed as written, so a crashed or running job
 * can be plotted with any JSON reader. Non-finite numbers are written as null.
 *
 * Record shapes (fields may be added later, never renamed):
 *   {"type":"train","step":<int>,"loss":<num|null>,"lr":<num>,"samples_per_s":<num>}
 *   {"type":"eval","step":<int>,"val_loss":<num|null>,"val_acc":<num|null>,"time_s":<num>}
 * Other record types use ht_metrics_write with their own "type". */
#ifndef HT_IO_METRICS_H
#define HT_IO_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"

typedef struct ht_metrics ht_metrics;

/* Opens path for writing: truncates it, or appends when append != 0 (resuming a run).
 * HT_ERUNTIME with strerror when the file cannot be opened. path NULL or "": no JSON Lines
 * file (for TensorBoard events alone). */
int ht_metrics_open(ht_metrics **out, const char *path, int append);
/* Also writes every record's numbers as TensorBoard scalars (io/tfevents.h) into a new event
 * file in dir (created when absent): tag "type/key" ("train/loss", "eval/val_acc"), with
 * "/rankR" appended for a record with a rank field ("rank/compute_s/rank1"), at the record's
 * step, or the last step seen for a record without one. HT_ERUNTIME when it cannot. */
int ht_metrics_tensorboard(ht_metrics *m, const char *dir);
/* Closes; HT_ERUNTIME when the final write or any earlier record failed (the message counts
 * the lost records and quotes the first error); NULL is a no-op. */
int ht_metrics_close(ht_metrics *m);
/* HT_ERUNTIME (message as above) once any record could not be written, else HT_OK. The
 * first failure is also logged as a warning, once; later ones only counted. */
int ht_metrics_status(const ht_metrics *m);

/* Writes one record from "key=%conv key=%conv ..." pairs separated by spaces, e.g.
 *   ht_metrics_write(m, "type=%s step=%lld loss=%f", "train", (long long)step, loss);
 * emits {"type":"train","step":12,"loss":2.5}. Keys are [A-Za-z0-9_.-]+. Conversions:
 * %s (escaped string, NULL -> null), %d %ld %lld %u %lu %llu %zu (integers), %f %g %e (doubles:
 * round-trip precision, NaN/Inf -> null). The format is type-checked like printf.
 * Returns HT_ERUNTIME on a write failure or a malformed format (message says which). */
int ht_metrics_write(ht_metrics *m, const char *fmt, ...) HT_PRINTF(2, 3);

/* The two documented record shapes. */
int ht_metrics_train(ht_metrics *m, int64_t step, double loss, double lr, double samples_per_s);
/* time_s: training seconds so far (wall time since the loop started, evaluations excluded). */
int ht_metrics_eval(ht_metrics *m, int64_t step, double val_loss, double val_acc, double time_s);

#endif
