#!/usr/bin/env bash
# Pipeline schedules side by side on NP ranks (default 4) training a GPT of 8 blocks, from one
# run: per schedule and micro-batch count, the measured bubble as the schedule checker defines
# it, 1 - busy / (ranks x makespan) with the makespan the slowest rank's stream (the
# "pipe_summary" record's bubble_measured: a rank that finishes early waits out the rest in
# the step-end collectives, outside its own stream), beside the checker's predictions (unit
# times with backward = 2 forwards, and the stage forward /
# backward times measured in the same run), then the per-rank split from the "pipe" records
# (time blocked waiting for a peer's activation or gradient, host copies and sends of the
# messages and replica reductions as "comm", 1 - compute / the rank's own stream), throughput,
# activation memory per rank (what the executor allocates for its slots) and point-to-point
# bytes per step; then data parallelism on the same ranks and its all-reduce bytes per step.
#   tools/bench/bench_pipe.sh [STEPS] [hettrain args...]
# Env: NP (4), LAYERS (8), DMODEL (64), BATCH (32), PIN=1 (one core and one PoCL thread per
# rank: only meaningful with NP <= cores), TRACE=DIR (each pipeline run's Chrome trace as
# DIR/SCHEDULE-N.json, and their timelines drawn by tools/plot/timeline.py as
# DIR/timelines-N.png when matplotlib is there). Run from the repository root.
. "$(dirname "$0")/common.sh"
steps=${1:-20}; shift || true
np=${NP:-4}; layers=${LAYERS:-8}; dmodel=${DMODEL:-64}; batch=${BATCH:-32}
bench_tmp
mpi_shm cma # as a real cluster copies (common.sh)
pin_ranks
[ -z "${TRACE:-}" ] || { mkdir -p "$TRACE"; TRACE=$(cd "$TRACE" && pwd); }
pipe_gpt_job 5
run() { # run NAME ARGS: mpirun NP ranks, metrics in $tmp/NAME.jsonl
    local name=$1; shift
    local trace=()
    [ -n "${TRACE:-}" ] && [ "$name" != dp ] && trace=(--trace "$TRACE/$name.json")
    mpirun -np "$np" --oversubscribe "${bind[@]}" "$build/hettrain" -c "$tmp/job.cfg" -q \
        --set log.metrics="$tmp/$name.jsonl" ${trace[@]+"${trace[@]}"} "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" ||
        { cat "$tmp/$name.err" >&2; exit 1; }
}
echo "== pipelines on $np ranks: GPT L$layers C$dmodel T64, batch $batch, $steps steps (first not counted)"
echo "   $(nproc) cores$([ "${PIN:-0}" = 1 ] && echo ', ranks pinned, 1 PoCL thread each' || echo ', ranks share the cores')"
printf '%-12s %3s %8s %8s %8s %7s %8s %8s %8s %10s %10s %10s\n' schedule N "pred F=1" "pred" \
    "bubble" diff waiting comm "idle/own" samples/s "act MiB" "p2p KiB"
for n in "$np" $((2 * np)); do  # N = D (Chimera's basic unit) and 2D
for s in gpipe 1f1b interleaved chimera; do
    extra=(--set pipe.schedule="$s" --set pipe.stages="$np" --set pipe.micro_batches="$n")
    [ "$s" = interleaved ] && extra+=(--set pipe.chunks=2)
    run "$s-$n" "${extra[@]}"
    /usr/bin/python3 - "$tmp/$s-$n.jsonl" "$s" "$n" "$batch" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"pipe"' in l]
summ = [json.loads(l) for l in open(sys.argv[1]) if '"type":"pipe_summary"' in l][0]
idle = sum(r['idle_fraction'] for r in recs) / len(recs)
wait = sum(r['wait_s'] / r['step_s'] for r in recs) / len(recs)
comm = sum(r['comm_s'] / r['step_s'] for r in recs) / len(recs)
step = max(r['step_s'] for r in recs)
act = max(r['activation_bytes'] for r in recs) / 2**20
p2p = sum(r['p2p_bytes_per_step'] for r in recs) / 1024
unit, pred = summ['bubble_unit_times'], summ['bubble_measured_costs']
bub = summ['bubble_measured']
print('%-12s %3s %8.3f %8.3f %8.3f %+7.3f %8.3f %8.3f %8.3f %10.1f %10.2f %10.1f' % (sys.argv[2],
      sys.argv[3], unit, pred, bub, bub - pred, wait, comm, idle, int(sys.argv[4]) / step, act, p2p))
PY
done
if [ -n "${TRACE:-}" ] && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    /usr/bin/python3 tools/plot/timeline.py "$TRACE/timelines-$n.png" \
        "$TRACE"/{gpipe,1f1b,interleaved,chimera}-"$n".json >&2
fi
done
run dp
sps=$(sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' "$tmp/dp.out")
/usr/bin/python3 - "$tmp/dp.jsonl" "$sps" "$steps" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"sync"' in l]
sent = sum(r['bytes_sent'] for r in recs) / int(sys.argv[3]) / 1024
print('%-12s %3s %8s %8s %8s %7s %8s %8s %8s %10s %10s %10.1f  (all-reduce, all ranks)' %
      ('data-par.', '-', '-', '-', '-', '', '-', '-', '-', sys.argv[2], '-', sent))
PY
