/* Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.c): every parser under test reads a
 * path, so each input is written to a scratch file first (one per process and role, in
 * /dev/shm when it exists: no disk I/O per execution), removed at exit. */
#ifndef HT_FUZZ_H
#define HT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { FUZZ_ROLES = 8 };
static char fuzz_paths[FUZZ_ROLES][256];
static const char *fuzz_roles[FUZZ_ROLES];

static inline void fuzz_unlink_all(void) {
    for (int i = 0; i < FUZZ_ROLES && fuzz_roles[i]; i++)
        unlink(fuzz_paths[i]);
}

/* The path of scratch file `role` (e.g. "cfg", "img") of this process; the role becomes the
 * file's extension, so name it as the parser expects. */
static inline const char *fuzz_path(const char *role) {
    int i = 0;
    while (i < FUZZ_ROLES && fuzz_roles[i] && strcmp(fuzz_roles[i], role) != 0)
        i++;
    if (i == FUZZ_ROLES) abort(); /* more roles than a harness needs */
    if (!fuzz_roles[i]) {
        if (i == 0) atexit(fuzz_unlink_all);
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_paths[i], sizeof fuzz_paths[i], "%s/htfuzz.%ld.%s", dir, (long)getpid(),
                 role);
        fuzz_roles[i] = role;
    }
    return fuzz_paths[i];
}

/* Writes data[0..n) to scratch file `role` and returns its path. */
static inline const char *fuzz_file(const char *role, const void *data, size_t n) {
    const char *path = fuzz_path(role);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) abort();
    return path;
}

/* Quiet logging: the parsers' warnings would flood the fuzzer's output. */
static inline void fuzz_quiet(void) { ht_log_set_level(HT_LOG_QUIET); }

#endif
