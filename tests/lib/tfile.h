/* Scratch files for the unit tests: one temporary folder a test (under $TMPDIR when it is
 * set, else /tmp), paths in it, and whole-file writes and reads. */
#ifndef HT_TESTS_TFILE_H
#define HT_TESTS_TFILE_H

#include <stddef.h>

/* Makes the folder <TMPDIR>/<prefix>_XXXXXX; exits 1 if it cannot. */
void tfile_init(const char *prefix);
/* Removes the folder and everything in it, unless HT_KEEP_TMP is set. */
void tfile_done(void);
/* The folder. */
const char *tfile_dir(void);
/* dir/name; the result stays valid for the next seven calls. Exits 1, naming the path, if
 * it is longer than 4095 bytes. */
const char *tpath(const char *name);
/* Writes text to dir/name (put_file); returns tpath(name). */
const char *put_text(const char *name, const char *text);
/* Writes a new file (any old one unlinked first: ext4 flushes a file truncated and
 * rewritten when it is closed); exits 1 on failure. */
void put_file(const char *path, const void *data, size_t n);
/* The whole file, NUL-terminated (*n bytes before the NUL); NULL if it cannot be opened. */
unsigned char *get_file(const char *path, size_t *n);

#endif
