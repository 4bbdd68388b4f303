/* libFuzzer harness: the job-file parser and --set overrides (src/config). The input up to
 * the first NUL byte is the config file; after it, each line is one --set KEY=VALUE. Every
 * input must end in HT_OK or HT_EINPUT with a message: anything else is a bug. */
#include "config/config.h"
#include "fuzz.h"

#define MAX_SETS 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_quiet();
    const uint8_t *nul = memchr(data, 0, size);
    size_t nfile = nul ? (size_t)(nul - data) : size;
    const char *path = fuzz_file("cfg", data, nfile);
    char *rest = NULL;
    const char *sets[MAX_SETS];
    int nset = 0;
    if (nul) {
        size_t n = size - nfile - 1;
        rest = malloc(n + 1);
        memcpy(rest, nul + 1, n);
        rest[n] = 0; /* a NUL inside ends that line early, as argv would */
        for (char *s = rest, *e; s && nset < MAX_SETS; s = e) {
            e = strchr(s, '\n');
            if (e) *e++ = 0;
            sets[nset++] = s;
        }
    }
    ht_config cfg;
    int rc = ht_config_load(&cfg, path, sets, nset);
    if (rc != HT_OK && (rc != HT_EINPUT || !ht_errmsg()[0])) abort();
    if (rc == HT_OK) { /* the per-rank lists, checked at start under mpirun */
        rc = ht_config_check_world(&cfg, 1 + (size ? data[0] % 4 : 0));
        if (rc != HT_OK && (rc != HT_EINPUT || !ht_errmsg()[0])) abort();
        FILE *null = fopen("/dev/null", "w"); /* the effective config, as -v prints it */
        if (null) ht_config_write(null, &cfg), fclose(null);
    }
    ht_error_clear();
    free(rest);
    return 0;
}
