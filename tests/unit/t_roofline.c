/* The roofline arithmetic of --profile (src/core/roofline.h) on hand-computed cases: the
 * least time is the larger of the compute and the memory term, the bound is the ceiling that
 * sets it (launch when even that is shorter than an empty kernel's round trip), and a GEMM's
 * work is 2mnk operations over its operands read and its result written once. */
#include <math.h>
#include <string.h>

#include "core/roofline.h"
#include "tap.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b) + 1e-18; }

int main(void) {
    /* 100 GFLOP/s, 10 GB/s, 20 us a launch */
    const ht_roof r = {100e9, 10e9, 20e-6};

    /* 256 x 1024 x 1024: 536,870,912 operations (5.36870912 ms at 100 GFLOP/s);
     * 4 (256*1024 + 1024*1024 + 256*1024) = 6,291,456 bytes (0.6291456 ms at 10 GB/s) */
    double f = ht_roof_gemm_flops(256, 1024, 1024), b = ht_roof_gemm_bytes(256, 1024, 1024, 0);
    tap_ok(f == 536870912.0, "GEMM 256x1024x1024: 2mnk = 536870912 operations (%.0f)", f);
    tap_ok(b == 6291456.0, "its operands and result once: 6291456 bytes (%.0f)", b);
    tap_ok(ht_roof_gemm_bytes(256, 1024, 1024, 1) == 6291456.0 + 4.0 * 256 * 1024,
           "beta != 0 reads C as well: 1 MiB more");
    tap_ok(near(ht_roof_seconds(&r, f, b), 5.36870912e-3), "its least time is the compute term, "
           "5.36870912 ms (%.9g s)", ht_roof_seconds(&r, f, b));
    tap_ok(ht_roof_bound_of(&r, f, b) == HT_ROOF_COMPUTE, "compute-bound");

    /* 256 x 1024 x 10 (the MLP's last layer): 5,242,880 operations (52.4288 us) over
     * 4 (262144 + 10240 + 2560) = 1,099,776 bytes (109.9776 us): memory sets it */
    f = ht_roof_gemm_flops(256, 10, 1024), b = ht_roof_gemm_bytes(256, 10, 1024, 0);
    tap_ok(f == 5242880.0 && b == 4.0 * (262144 + 10240 + 2560), "GEMM 256x10x1024: %.0f "
           "operations, %.0f bytes", f, b);
    tap_ok(near(ht_roof_seconds(&r, f, b), 109.9776e-6) &&
               ht_roof_bound_of(&r, f, b) == HT_ROOF_MEMORY,
           "memory-bound at 109.9776 us (%.7g s)", ht_roof_seconds(&r, f, b));

    /* an AdamW step over 1000 parameters: 12,000 operations, 28,000 bytes: 2.8 us < 20 us */
    tap_ok(near(ht_roof_seconds(&r, 12e3, 28e3), 2.8e-6) &&
               ht_roof_bound_of(&r, 12e3, 28e3) == HT_ROOF_LAUNCH,
           "work shorter than an empty kernel's round trip is launch-bound");
    /* exactly at the launch time: no longer launch-bound */
    tap_ok(ht_roof_bound_of(&r, 0, 200e3) == HT_ROOF_MEMORY, "200 kB = 20 us: memory, not launch");
    /* equal terms: compute */
    tap_ok(ht_roof_bound_of(&r, 1e9, 1e8) == HT_ROOF_COMPUTE, "equal terms count as compute");
    tap_ok(ht_roof_seconds(&r, 0, 0) == 0 && ht_roof_bound_of(&(ht_roof){1e9, 1e9, 0}, 0, 0) ==
                                                  HT_ROOF_COMPUTE,
           "no work: no time");
    tap_ok(!strcmp(ht_roof_bound_name(HT_ROOF_COMPUTE), "compute") &&
               !strcmp(ht_roof_bound_name(HT_ROOF_MEMORY), "memory") &&
               !strcmp(ht_roof_bound_name(HT_ROOF_LAUNCH), "launch"),
           "the bounds' names, as the profile prints them");
    return tap_done();
}
