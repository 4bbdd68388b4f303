#!/usr/bin/env bash
# Checkpoint save and load times of two versions of the safetensors code, to show what the
# checksums cost: the writer (ht_st_write: CRC32C of every tensor, write, fsync, rename) and
# the reader (ht_st_open: read and verify) of REV_A and REV_B (git revisions, default main and
# HEAD), built alone from src/core and src/io, on a checkpoint of MIB MiB (default 256, four
# tensors) in DIR (default /tmp: use the disk checkpoints go to), REPS times each (default 7),
# the two versions alternating; prints each version's median wall seconds, MiB/s and CPU
# seconds (user + system: unlike wall time, not inflated when other processes share the
# cores), and for a version with core/crc32c.h the CPU time of the CRC32C of the same data
# alone (instruction and tables).
#   tools/bench/bench_ckpt_save.sh [REV_A] [REV_B] [MIB] [REPS] [DIR]
. "$(dirname "$0")/common.sh"
a=${1:-main} b=${2:-HEAD} mib=${3:-256} reps=${4:-7} dir=${5:-/tmp}
tmp=$(mktemp -d); trap 'rm -rf "$tmp" "$dir"/bench_ckpt.*' EXIT
cat >"$tmp/main.c" <<'C'
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/err.h"
#include "io/safetensors.h"
#ifdef HAVE_CRC
#include "core/crc32c.h"
#endif
static double clk(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double now(void) { return clk(CLOCK_MONOTONIC); }
static double cpu(void) { return clk(CLOCK_PROCESS_CPUTIME_ID); }
int main(int argc, char **argv) { /* PATH MIB: one save then one load, seconds on stdout */
    size_t n = (size_t)atol(argv[2]) << 18; /* floats in a quarter of MIB MiB */
    static const char *names[4] = {"a.weight", "a.bias", "optim.m", "optim.v"};
    ht_st_tensor t[4];
    for (int i = 0; i < 4; i++) {
        float *d = malloc(n * sizeof *d);
        for (size_t k = 0; k < n; k++) d[k] = (float)(k % 1000) * 1e-3f + (float)i;
        t[i] = (ht_st_tensor){names[i], 1, {(int64_t)n}, d};
    }
    const char *keys[] = {"step"}, *vals[] = {"1000"};
    double t0 = now(), c0 = cpu();
    if (ht_st_write(argv[1], t, 4, keys, vals, 1) != HT_OK) { fprintf(stderr, "%s\n", ht_errmsg()); return 1; }
    double t1 = now(), c1 = cpu();
    ht_st_file *f;
    if (ht_st_open(&f, argv[1]) != HT_OK) { fprintf(stderr, "%s\n", ht_errmsg()); return 1; }
    double t2 = now(), c2 = cpu();
    ht_st_close(f);
    double hw = 0, sw = 0;
#ifdef HAVE_CRC
    unsigned x = 0;
    double t3 = cpu();
    for (int i = 0; i < 4; i++) x ^= ht_crc32c(0, t[i].data, n * sizeof(float));
    double t4 = cpu();
    for (int i = 0; i < 4; i++) x ^= ht_crc32c_sw(0, t[i].data, n * sizeof(float));
    hw = t4 - t3, sw = cpu() - t4;
    if (x == 1) puts("");
#endif
    printf("%.4f %.4f %.4f %.4f %.4f %.4f\n", t1 - t0, t2 - t1, hw, sw, c1 - c0, c2 - c1);
    return 0;
}
C
for v in a b; do
    rev=${!v}
    mkdir -p "$tmp/$v"
    git archive "$rev" src/core src/io | tar -x -C "$tmp/$v"
    srcs=("$tmp/$v/src/io/safetensors_write.c" "$tmp/$v/src/io/safetensors_read.c"
          "$tmp/$v/src/io/json.c" "$tmp/$v/src/core/err.c" "$tmp/$v/src/core/path.c")
    def=()
    [ -f "$tmp/$v/src/core/crc32c.c" ] && srcs+=("$tmp/$v/src/core/crc32c.c") && def=(-DHAVE_CRC)
    gcc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L "${def[@]}" -I"$tmp/$v/src" "$tmp/main.c" "${srcs[@]}" \
        -lm -lpthread -o "$tmp/bench_$v"
done
for i in $(seq "$reps"); do
    for v in a b; do
        sync
        "$tmp/bench_$v" "$dir/bench_ckpt.$$" "$mib" >>"$tmp/times_$v"
        rm -f "$dir/bench_ckpt.$$"
    done
done
echo "checkpoint of $mib MiB (4 F32 tensors) in $dir, $reps runs each, medians:"
printf '%-24s %7s %9s %9s %7s %9s %9s %9s %9s\n' version "save s" "MiB/s" "save cpu" \
    "load s" "MiB/s" "load cpu" "CRC cpu" "tables"
for v in a b; do
    rev=${!v}
    for col in 1 2 3 4 5 6; do
        sort -n -k$col,$col "$tmp/times_$v" | awk -v c=$col '{ x[NR] = $c } END { print x[int((NR + 1) / 2)] }'
    done | paste -sd' ' | awk -v r="$rev ($(git rev-parse --short "$rev"))" -v m="$mib" \
        '{ printf "%-24s %7.3f %9.0f %9.3f %7.3f %9.0f %9.3f %9.3f %9.3f\n", r, $1, m / $1, $5, $2, m / $2, $6, $3, $4 }'
done
