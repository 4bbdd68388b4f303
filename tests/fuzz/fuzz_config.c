/* libFuzzer harness: the job-file parser and --set overrides (src/config). The input up to
 * the first NUL byte is the config file; after it, each line is one --set KEY=VALUE. Every
 * input must end in HT_OK or HT_EINPUT with a message: anything else is a bug. */
#include "config/config.h"
#include "fuzz.h"

#define MAX_SETS 16

static ht_config g_back; /* large: not on the stack */

/* ht_config_write's text as a malloc'd string. */
static char *written(const ht_config *cfg) {
    char *text = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&text, &n);
    if (!m) abort();
    ht_config_write(m, cfg);
    fclose(m);
    return text;
}

/* What ht_config_write prints (the effective config, as -v shows it) loads back to a config
 * that prints the same (but for line 1, the file's name): the writer and the reader agree
 * on every accepted value. */
static void round_trip(const ht_config *cfg) {
    char *a = written(cfg);
    const char *path = fuzz_file("rt.cfg", a, strlen(a));
    if (ht_config_load(&g_back, path, NULL, 0) != HT_OK) {
        fprintf(stderr, "fuzz_config: the written config does not load: %s\n%s", ht_errmsg(), a);
        abort();
    }
    char *b = written(&g_back);
    const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n'); /* line 1 names the file */
    if (!ea || !eb || strcmp(ea, eb) != 0) {
        fprintf(stderr, "fuzz_config: written, loaded and written again differs:\n%s\n----\n%s", a,
                b);
        abort();
    }
    free(a), free(b);
}

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
        round_trip(&cfg);
    }
    ht_error_clear();
    free(rest);
    return 0;
}
