#!/usr/bin/env bash
# Issue 14: a mixed-implementation job with and without its slow device, beside PoCL alone.
# The quickstart MLP (conf/quickstart.cfg) for STEPS steps of batch 128, no evaluation:
#   pocl      1 process on PoCL's CPU device ("pthread")
#   kept      2 ranks, PoCL + rusticl's llvmpipe (RUSTICL_ENABLE=llvmpipe), shares 127,1 (the
#             split the speed rule gave before it could leave a rank out)
#   share0    2 ranks, cluster.split "speed" + cluster.exclude_slow = false: rusticl left out
#             with share 0, synchronising
#   excluded  2 ranks, cluster.split "speed" (cluster.exclude_slow, the default since issue 31):
#             rusticl leaves the job
# Each configuration REPS times, interleaved; prints the median samples/s of each (the
# "final:" line, from the end of the first step) and its ratio to pocl, with the load average.
#   tools/bench/bench_exclude.sh [STEPS (200)] [REPS (3)]      (from the repository root)
# PIN=1 (default) runs everything at nice -10 on cores 0-1 (taskset), as BENCHMARKS.md asks.
. "$(dirname "$0")/common.sh"
steps=${1:-200}
reps=${2:-3}
bench_tmp
export RUSTICL_ENABLE=llvmpipe
pin=()
[ "${PIN:-1}" = 1 ] && pin=(nice -n -10 taskset -c 0,1)
common=(-c conf/quickstart.cfg -q --set train.steps="$steps" --set train.eval_every=0
    --set log.metrics= --set log.progress=none --set checkpoint.path=)
mixed=(--set 'cluster.devices=["pthread", "rusticl"]')

run() { # run NAME: one run of configuration NAME, its samples/s appended to $tmp/NAME
    local name=$1 out="$tmp/out"
    case $name in
    pocl) "${pin[@]}" "$build/hettrain" "${common[@]}" --device pthread >"$out" 2>"$tmp/err" ;;
    kept) "${pin[@]}" mpirun -np 2 --oversubscribe --bind-to none "$build/hettrain" "${common[@]}" \
        "${mixed[@]}" --set 'cluster.shares=[127, 1]' >"$out" 2>"$tmp/err" ;;
    share0) "${pin[@]}" mpirun -np 2 --oversubscribe --bind-to none "$build/hettrain" \
        "${common[@]}" "${mixed[@]}" --set cluster.split=speed --set cluster.exclude_slow=false \
        >"$out" 2>"$tmp/err" ;;
    excluded) "${pin[@]}" mpirun -np 2 --oversubscribe --bind-to none "$build/hettrain" \
        "${common[@]}" "${mixed[@]}" --set cluster.split=speed --set cluster.exclude_slow=true \
        >"$out" 2>"$tmp/err" ;;
    esac || { tail -5 "$tmp/err"; exit 1; }
    sps "$out" >>"$tmp/$name"
}

names=(pocl kept share0 excluded)
for n in "${names[@]}"; do run "$n"; done # warm-up: kernel caches of both implementations
for n in "${names[@]}"; do : >"$tmp/$n"; done
load0=$(cut -d' ' -f1 /proc/loadavg)
for ((r = 0; r < reps; r++)); do for n in "${names[@]}"; do run "$n"; done; done
load1=$(cut -d' ' -f1 /proc/loadavg)
echo "quickstart MLP, batch 128, $steps steps, median of $reps interleaved runs; load average $load0 -> $load1"
base=$(median <"$tmp/pocl")
printf '%-10s %14s %10s   %s\n' config samples/s vs_pocl runs
for n in "${names[@]}"; do
    m=$(median <"$tmp/$n")
    printf '%-10s %14.0f %10.3f   %s\n' "$n" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN { print a / b }')" \
        "$(tr '\n' ' ' <"$tmp/$n")"
done
