/* libFuzzer harness: device profiles (src/prof/profile.c). A profile it accepts is also
 * printed, queried for speeds, written and read back (the writer's output must load). */
#include "fuzz.h"
#include "prof/profile.h"

static ht_profile p, q; /* large: not on the stack */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_quiet();
    const char *path = fuzz_file("cfg", data, size);
    int rc = ht_profile_load(path, &p);
    if (rc != HT_OK && (rc != HT_EINPUT || !ht_errmsg()[0])) abort();
    if (rc != HT_OK) return ht_error_clear(), 0;
    FILE *null = fopen("/dev/null", "w");
    if (null) ht_profile_print(null, &p), fclose(null);
    for (int d = 0; d < p.ndev; d++)
        for (int b = 1; b < 1 << 12; b *= 7)
            (void)ht_profile_speed(&p, d, b);
    const char *out = fuzz_path("out.cfg");
    if (ht_profile_save(out, &p) != HT_OK || ht_profile_load(out, &q) != HT_OK) {
        fprintf(stderr, "fuzz_profile: a profile that loaded does not round-trip: %s\n",
                ht_errmsg());
        abort();
    }
    ht_error_clear();
    return 0;
}
