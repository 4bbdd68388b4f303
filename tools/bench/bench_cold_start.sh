#!/usr/bin/env bash
# A new user's first run (issue 32): the quickstart with empty caches - PoCL's
# (POCL_CACHE_DIR) and hettrain's (HT_CACHE_DIR: programs and the SGEMM choice) in a fresh
# folder, so that nothing another user or run cached is touched - then the same run warm.
# Prints wall and CPU seconds (/usr/bin/time), the phases hettrain reports (kernels built,
# each SGEMM probe variant's first call, which compiles it, the choice) and the first-step
# time. On a loaded machine wall time stretches; the CPU seconds are what an idle one waits.
#   tools/bench/bench_cold_start.sh [CONFIG (conf/quickstart.cfg)] [EXTRA hettrain ARGS...]
# Env: HT_GEMM (e.g. tiled: no probe, for comparison). Run from the repository root.
. "$(dirname "$0")/common.sh"
cfg=${1:-conf/quickstart.cfg}
shift || true
bench_tmp
run() { # run NAME LOAD [ARGS...]: one run with the caches in $tmp
    local name=$1 load=$2
    shift 2
    POCL_CACHE_DIR="$tmp/pocl" HT_CACHE_DIR="$tmp/ht" /usr/bin/time -f "time: %e s wall, %U s user, %S s sys" \
        "$build/hettrain" -c "$cfg" --set log.progress=none --set log.metrics= "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || true
    echo "== $name run (load average before: $load)"
    grep -E "kernels (built|loaded)|SGEMM|^time:|error" "$tmp/$name.err" || true
    sed -nE 's/.*(first step after [0-9.]+ s).*/\1/p' "$tmp/$name.out"
}
echo "$(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); config $cfg; HT_GEMM=${HT_GEMM:-auto}"
run cold "$(cut -d' ' -f1-3 /proc/loadavg)" "$@"
run warm "$(cut -d' ' -f1-3 /proc/loadavg)" "$@"
