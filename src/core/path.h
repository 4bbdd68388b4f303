/* Files the user names: every input is opened through ht_open_input (or checked with
 * ht_check_input) and every output location through ht_check_output, so that a FIFO, a
 * device, a socket or a directory is refused with one message (exit 2 naming the key or
 * file) instead of blocking for ever on open or being replaced by an atomic rename. */
#ifndef HT_CORE_PATH_H
#define HT_CORE_PATH_H

#include <stdio.h>

/* "a directory", "a FIFO", "a character device", "a block device", "a socket", "a symbolic
 * link", "a regular file", or "a special file" for a stat mode. */
const char *ht_file_kind(unsigned mode);

/* Opens path for reading without ever blocking on open (O_NONBLOCK, then fstat): a file that
 * is missing, unreadable or not regular gives HT_EINPUT "<what> '<path>': <why>" (what is the
 * key or role, e.g. "key 'data.images'", "config"). On success *fd is a blocking descriptor
 * (O_CLOEXEC) the caller closes; *size (may be NULL) is the file's size. */
int ht_open_input_fd(const char *path, const char *what, int *fd, long long *size);
/* The same as a stdio stream ("rb"); NULL after ht_error(HT_EINPUT, ...). */
FILE *ht_open_input(const char *path, const char *what);
/* Only the check (opens and closes), for readers that open the file themselves. */
int ht_check_input(const char *path, const char *what);

/* An output location, before the run writes it: path must be absent or a regular file (a
 * symbolic link is followed), its directory must exist and be writable. HT_EINPUT "<what>
 * '<path>': <why>" otherwise. "" is accepted (no output). */
int ht_check_output(const char *path, const char *what);

/* Only the first part, for atomic writers (defence in depth: they rename over path): HT_EINPUT
 * when path exists and is not a regular file. */
int ht_check_replaceable(const char *path, const char *what);

/* Removes "<path>.tmp.<pid>" files beside path whose writer process no longer exists
 * (a killed atomic writer's leftovers); files of live processes are kept. Returns how many
 * were removed. */
int ht_remove_stale_tmp(const char *path);

#endif
