/* TensorBoard event files: scalars that `tensorboard --logdir` plots, written in C without
 * TensorFlow. A file is a sequence of TFRecords (uint64 length, masked CRC32C of the length,
 * the data, masked CRC32C of the data; little-endian), each holding an Event protobuf:
 * wall_time (double, field 1), step (int64, field 2), and either file_version (string, field
 * 3; "brain.Event:2" in the first record) or summary (field 5: Summary { repeated Value value
 * = 1 }, Value { string tag = 1; float simple_value = 2 }). Records are flushed as written. */
#ifndef HT_IO_TFEVENTS_H
#define HT_IO_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct ht_tfevents ht_tfevents;

/* Creates dir (and its parents) when absent and opens a new event file in it named as
 * TensorFlow names them, "events.out.tfevents.<seconds>.<host>.<pid>" (so that a resumed run
 * adds a file beside the earlier one), writing the file_version record. HT_ERUNTIME naming
 * the path and strerror when it cannot. */
int ht_tfevents_open(ht_tfevents **out, const char *dir);
/* Writes one event at `step` holding n scalars (tags[i], values[i]) at wall time `wall`
 * (seconds since the epoch; < 0: now). HT_ERUNTIME on a write failure. */
int ht_tfevents_scalars(ht_tfevents *t, int64_t step, double wall, int n, const char *const *tags,
                        const double *values);
/* The event file's path. */
const char *ht_tfevents_path(const ht_tfevents *t);
/* Closes; HT_ERUNTIME when closing failed; NULL is a no-op. */
int ht_tfevents_close(ht_tfevents *t);

#endif
