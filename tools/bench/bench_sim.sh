#!/usr/bin/env bash
# hetsim against real runs on this machine: data parallel on NP (2) ranks, each bound to a
# core of its own with a one-thread PoCL device (the setting the issue's 15% target is for).
#   1. hetprof under the same mpirun setting measures each rank's device (per-layer times at
#      several batch sizes) and the MPI link between the ranks -> a profile;
#   2. a cluster description from it (one host of $(nproc) cores, NP one-core devices from
#      the profile entries, the measured link: with NP > cores the ranks share cores, modelled
#      as proportional sharing, hosts[].cores);
#   3. for each case (equal / speed split, slowdowns; 1f1b, gpipe, chimera on 2 stages),
#      hettrain trains STEPS steps of the MNIST MLP and reports samples/s; hetsim predicts
#      the step from the same job.
#   tools/bench/bench_sim.sh [STEPS (60)]        (from the repository root; KEEP=DIR keeps files)
# NP=4 runs 4 ranks (on 2 cores: oversubscribed, unbound; slowdowns [1, 1, 2, 4]).
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-60}
build=${HT_BUILD:-build}
np=${NP:-2}
tmp=${KEEP:-$(mktemp -d)}
[ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export POCL_MAX_PTHREAD_COUNT=1
job=conf/mnist-mlp.cfg
mpi=(mpirun -np "$np" --bind-to core)
[ "$np" -gt "$(nproc)" ] && mpi=(mpirun -np "$np" --oversubscribe --bind-to none) # ranks share cores

"${mpi[@]}" "$build/hetprof" -c "$job" --batch 32,64,128,256 -o "$tmp/prof.cfg" >"$tmp/prof.out" 2>&1 ||
    { tail -20 "$tmp/prof.out"; exit 1; }
read -r lat bw < <(sed -nE 's/.*latency_us = ([0-9.e+-]+); bandwidth_gbs = ([0-9.e+-]+);.*/\1 \2/p' "$tmp/prof.cfg" | head -1)
{
    echo "profile = \"prof.cfg\";"
    echo "devices = ("
    for ((r = 0; r < np; r++)); do echo "  { name = \"rank$r\"; profile_device = $r; cores = 1.0; }$([ $r -lt $((np - 1)) ] && echo ,)"; done
    echo ");"
    printf 'hosts = ( { cores = %d; devices = [' "$(nproc)"; for ((r = 0; r < np; r++)); do printf '"rank%d"%s' $r "$([ $r -lt $((np - 1)) ] && echo ', ')"; done; echo '] ; } );'
    echo "links = { intra = { latency_us = ${lat:-5}; bandwidth_gbs = ${bw:-5}; };"
    echo "          inter = { latency_us = ${lat:-5}; bandwidth_gbs = ${bw:-5}; }; };"
} >"$tmp/cluster.cfg"

sets=(--set train.steps="$steps" --set train.eval_every=0 --set log.every=10 --set log.progress=none
      --set checkpoint.path=)
echo "== hetsim vs measured: $job, ${mpi[*]}, POCL_MAX_PTHREAD_COUNT=1, $steps steps; $(date -u +%F)"
echo "   host: $(nproc) cores, $(sed -nE 's/^model name\s*: //p' /proc/cpuinfo | head -1); link ${lat:-?} us, ${bw:-?} GB/s (hetprof)"
echo "   sps: samples/s of the whole run (hettrain's final line) and of the simulated step;"
echo "   compute ms: the slowest rank's forward + backward per step (metrics 'rank' records, last"
echo "   3 intervals) against the simulated one: the device model alone"
printf '%-36s %10s %10s %7s %11s %11s %7s\n' "case" "meas sps" "pred sps" "error" "meas comp" \
    "pred comp" "error"
cat >"$tmp/comp.py" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
recs = [json.loads(l) for l in lines if '"type":"rank"' in l]
if recs:  # data parallel: each rank's compute over the last 3 log intervals
    steps = sorted({r["step"] for r in recs})[-3:]
    per = {}
    for r in recs:
        if r["step"] in steps:
            per.setdefault(r["rank"], []).append(r["compute_s"])
    print("%.3f" % (1e3 * max(sum(v) / len(v) for v in per.values())))
else:  # pipeline: the "pipe" records (per-step means of the run)
    recs = [json.loads(l) for l in lines if '"type":"pipe"' in l]
    print("%.3f" % (1e3 * max(r["compute_s"] for r in recs)))
PY
case_run() { # case_run NAME SETS...
    local name=$1; shift
    "${mpi[@]}" "$build/hettrain" -c "$job" "${sets[@]}" --set log.metrics="$tmp/$name.jsonl" "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" ||
        { tail -20 "$tmp/$name.err"; exit 1; }
    local meas pred
    meas=$(sed -nE 's/^final: .*, ([0-9.]+) samples\/s.*/\1/p' "$tmp/$name.out")
    "$build/hetsim" --cluster "$tmp/cluster.cfg" -c "$job" "${sets[@]}" "$@" --steps 20 >"$tmp/$name.sim" 2>&1 ||
        { cat "$tmp/$name.sim"; exit 1; }
    pred=$(sed -nE 's/^throughput +([0-9.e+]+) .*/\1/p' "$tmp/$name.sim")
    local mc pc
    mc=$(/usr/bin/python3 "$tmp/comp.py" "$tmp/$name.jsonl")
    # the largest busy ms of the per-rank table (a pipeline's rows have no share column)
    pc=$(awk '$1 ~ /^[0-9]+$/ && (NF == 9 || NF == 8) { b = NF == 9 ? $4 : $3; if (b > m) m = b }
              END { print m }' "$tmp/$name.sim")
    awk -v n="$name" -v m="$meas" -v p="$pred" -v mc="$mc" -v pc="$pc" 'BEGIN {
        printf "%-36s %10.0f %10.0f %6.1f%% %11.2f %11.2f %6.1f%%\n", n, m, p, 100 * (p - m) / m, mc, pc,
            100 * (pc - mc) / mc }'
}
# a throwaway run first: in three runs of this script the first case alone measured 1.7-3x
# slower than the same shares a moment later (program cache, first-touch allocation)
"${mpi[@]}" "$build/hettrain" -c "$job" "${sets[@]}" --set train.steps=5 --set log.metrics= \
    >/dev/null 2>&1 || true
case_run "equal split" --set cluster.split=equal
case_run "speed split" --set cluster.split=speed --set cluster.rebalance=false
slow="[1, 2]"; [ "$np" -ne 2 ] && slow="[1, 1, 2, 4]"
case_run "equal split, slowdown $slow" --set cluster.split=equal --set "cluster.slowdown=$slow"
case_run "speed split, slowdown $slow" --set cluster.split=speed --set cluster.rebalance=false --set "cluster.slowdown=$slow"
case_run "speed + rebalance, slowdown $slow" --set cluster.split=speed --set cluster.rebalance=true --set "cluster.slowdown=$slow"
case_run "1f1b D=2 N=4" --set 'pipe.schedule="1f1b"' --set pipe.stages=2 --set pipe.micro_batches=4
case_run "gpipe D=2 N=4" --set 'pipe.schedule="gpipe"' --set pipe.stages=2 --set pipe.micro_batches=4
case_run "chimera D=2 N=4" --set 'pipe.schedule="chimera"' --set pipe.stages=2 --set pipe.micro_batches=4
case_run "1f1b D=2 N=4, slowdown $slow" --set 'pipe.schedule="1f1b"' --set pipe.stages=2 \
    --set pipe.micro_batches=4 --set "cluster.slowdown=$slow"
