#!/usr/bin/env bash
# Heterogeneous data parallelism: 4 ranks under mpirun, emulated slowdowns 1,1,2,4 (DESIGN.md),
# the MNIST MLP (conf/mnist-mlp.cfg) for a fixed number of steps, evaluated at the end, with
#   equal  shares (cluster.split = "equal": the slowest rank sets the pace),
#   speed  shares (cluster.split = "speed": a timed pass per rank, then online rebalancing),
#   ideal: the sum of the four ranks' own throughputs, each rank's samples/compute second
#          (share / compute_s, emulated slowdown included) from the "rank" metrics records of
#          the speed run (the last three log intervals), i.e. perfect balance with free
#          communication, measured under the same contention as the runs themselves.
#   tools/bench/bench_hetero.sh [STEPS (60)] [hettrain args...]     (from the repository root)
# Environment: NP ranks (4) with SLOW slowdowns ('[1, 1, 2, 4]'); PIN=1 binds each rank to
# a core of its own (mpirun --bind-to core) with a one-thread PoCL device, so that ranks do
# not share cores (needs NP <= cores); KEEP=DIR keeps the runs' outputs and metrics in DIR.
. "$(dirname "$0")/common.sh"
steps=${1:-60}; shift || true
extra=("$@") # e.g. --set train.batch=2048
bench_tmp
np=${NP:-4}
pin_ranks
mpi_shm copy
slow=${SLOW:-'[1, 1, 2, 4]'}

run() { # run NAME ARGS...: $np ranks; stdout/stderr/metrics in $tmp/NAME.*
    local name=$1; shift
    mpirun -np "$np" --oversubscribe "${bind[@]}" "$build/hettrain" -c conf/mnist-mlp.cfg \
        --set train.steps="$steps" --set train.eval_every=0 --set log.every=10 \
        --set log.progress=none --set checkpoint.path= --set log.metrics="$tmp/$name.jsonl" \
        --set "cluster.slowdown=$slow" "$@" ${extra[@]+"${extra[@]}"} >"$tmp/$name.out" 2>"$tmp/$name.err" ||
        { tail -20 "$tmp/$name.err"; exit 1; }
}
field() { sed -nE "s/^final: .* $1 ([0-9.]+)%?.*/\\1/p" "$2"; }
acc() { sed -nE 's/^final: .*val_acc ([0-9.]+)%.*/\1/p' "$1"; }

run equal --set cluster.split=equal
run speed --set cluster.split=speed --set cluster.rebalance=true
run static --set cluster.split=speed --set cluster.rebalance=false
eq=$(sps "$tmp/equal.out"); sp=$(sps "$tmp/speed.out"); st=$(sps "$tmp/static.out")
ideal=$(/usr/bin/python3 - "$tmp/speed.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"rank"' in l]
steps = sorted({r["step"] for r in recs})[-3:]
tot = 0.0
for rank in sorted({r["rank"] for r in recs}):
    v = [r["share"] / r["compute_s"] for r in recs if r["rank"] == rank and r["step"] in steps]
    tot += sum(v) / len(v)
print("%.1f" % tot)
PY
)
shares() { grep -E '^\[rank 0\]   rank [0-9]' "$1" | sed -E 's/.*share ([0-9]+).*/\1/' | paste -sd, -; }
final_shares=$(grep '"type":"rank"' "$tmp/speed.jsonl" | tail -"$np" | sed -E 's/.*"share":([0-9]+).*/\1/' |
    paste -sd, -)
nreb=$(grep -cE '"type":"rebalance(_undone)?"' "$tmp/speed.jsonl" || true)

batch=$(sed -nE 's/.*steps of batch ([0-9]+).*/\1/p' "$tmp/equal.err" | head -1)
echo "== heterogeneous data parallelism: MNIST MLP 784-1024-1024-10, batch $batch, $steps steps"
pin=""
[ "${PIN:-0}" = 1 ] && pin=", each bound to a core, POCL_MAX_PTHREAD_COUNT=1"
echo "   $np ranks (mpirun -np $np --oversubscribe$pin), slowdown $slow (emulated); $(date -u +%F)"
echo "   host: $(nproc) cores, $(sed -nE 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
echo "   device: $(sed -nE 's/.*device 0: (.*) \(.*kernels.*/\1/p' "$tmp/equal.err" | head -1)"
printf '%-34s %12s %10s  %s\n' "" "samples/s" "val_acc" "shares"
printf '%-34s %12.0f %9s%%  %s\n' "equal split" "$eq" "$(acc "$tmp/equal.out")" "$(shares "$tmp/equal.err")"
printf '%-34s %12.0f %9s%%  %s -> %s (%s rebalances)\n' "speed split + rebalancing" "$sp" \
    "$(acc "$tmp/speed.out")" "$(shares "$tmp/speed.err")" "$final_shares" "$nreb"
printf '%-34s %12.0f %9s%%  %s\n' "speed split, cluster.rebalance=false" "$st" \
    "$(acc "$tmp/static.out")" "$(shares "$tmp/static.err")"
printf '%-34s %12.0f\n' "ideal (sum of per-rank speeds)" "$ideal"
awk -v e="$eq" -v s="$sp" -v t="$st" -v i="$ideal" 'BEGIN {
    printf "speedup over equal:     speed+rebalance %.2fx, speed static %.2fx\n", s / e, t / e
    printf "ideal speedup / equal:  %.2fx\n", i / e
    printf "fraction of ideal:      speed+rebalance %.0f%%, speed static %.0f%% (target >= 90%%)\n",
        100 * s / i, 100 * t / i }'
grep -hE '"type":"rebalance(_undone)?"' "$tmp/speed.jsonl" | sed 's/^/  /' || true
