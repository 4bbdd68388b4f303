#!/usr/bin/env bash
# HePipe (issue 11) side by side, from one run: NP ranks (default 4) with emulated slowdowns
# (default 1, 1, 2, 4) training a GPT of 8 blocks: 1f1b on the uniform partition, 1f1b on
# the hetero partition, hepipe on both, hepipe + hetero with recomputation forced on, and data
# parallelism with the speed split, and 1f1b and hepipe on the hetero partition with replicated
# stages allowed (pipe.replicate: a stage on adjacent ranks, each micro-batch split by speed;
# its "run" column names the stages, "0+1|2|3"). Per run: samples/s (steady steps), the ratio to uniform
# 1f1b, the checker's bubble under the stage costs measured in the run and the measured idle
# fraction (the run's pipe_summary bubble_measured), the largest activation memory of a rank (what the executor allocates).
# PipeDream-2BW (2bw, uniform and hetero) runs too: asynchronous (one-step-stale weights), no
# flush per step; its "pred meas" is the checker's bubble of 3 chained batches then a drain.
#   tools/bench/bench_hepipe.sh [STEPS] [hettrain args...]
# Env: NP (4), SLOW ("1.0,1.0,2.0,4.0"), LAYERS (8), DMODEL (64), BATCH (32), N (8), TTL (a
# target loss: also time to it, see the end), TTL_STEPS (300), PIN=1
# (one core and one PoCL thread per rank: only meaningful with NP <= cores). Run from the
# repository root.
. "$(dirname "$0")/common.sh"
steps=${1:-20}; shift || true
args=("$@") # extra hettrain arguments, for every run
np=${NP:-4}; slow=${SLOW:-1.0,1.0,2.0,4.0}; layers=${LAYERS:-8}; dmodel=${DMODEL:-64}
batch=${BATCH:-32}; nmb=${N:-8}
bench_tmp
mpi_shm cma # as a real cluster copies (common.sh)
pin_ranks
pipe_gpt_job 5
cat >>"$tmp/job.cfg" <<CFG
cluster = { slowdown = [$slow]; };
CFG
run() { # run NAME ARGS: mpirun NP ranks, metrics in $tmp/NAME.jsonl
    local name=$1; shift
    mpirun -np "$np" --oversubscribe "${bind[@]}" "$build/hettrain" -c "$tmp/job.cfg" ${LOUD--q} \
        --set log.metrics="$tmp/$name.jsonl" "$@" ${args[@]+"${args[@]}"} >"$tmp/$name.out" 2>"$tmp/$name.err" ||
        { cat "$tmp/$name.err" >&2; exit 1; }
}
echo "== HePipe on $np ranks, slowdowns $slow: GPT L$layers C$dmodel T64, batch $batch," \
     "N=$nmb, $steps steps"
echo "   $(nproc) cores$([ "${PIN:-0}" = 1 ] && echo ', ranks pinned, 1 PoCL thread each' || echo ', ranks share the cores')"
printf '%-28s %10s %7s %10s %9s %13s\n' run samples/s ratio "pred meas" measured "act MiB/rank"
base=""
for cfg in "1f1b uniform none" "1f1b hetero none" "hepipe uniform none" "hepipe hetero none" \
    "hepipe hetero all" "2bw uniform none" "2bw hetero none" "1f1b hetero none rep" \
    "hepipe hetero none rep"; do
    read -r sched part recomp rep <<<"$cfg"
    name="$sched-$part-$recomp${rep:+-$rep}"
    LOUD=$([ -n "$rep" ] || echo -q) \
        run "$name" --set pipe.schedule="$sched" --set pipe.partition="$part" \
        --set pipe.recompute="$recomp" --set pipe.stages="$np" --set pipe.micro_batches="$nmb" \
        --set pipe.replicate="$([ -n "$rep" ] && echo true || echo false)"
    # replicated: the stages as "0+1|2|3" (from rank 0's stage list)
    [ -n "$rep" ] && name="$sched-rep $(sed -nE 's/.*  stage [0-9]+: rank ([^,]*), layers.*/\1/p' \
        "$tmp/$name.err" | sed -E 's/ \([0-9]+\)//g' | paste -sd'|')"
    line=$(/usr/bin/python3 - "$tmp/$sched-$part-$recomp${rep:+-$rep}.jsonl" "$batch" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"pipe"' in l]
summ = [json.loads(l) for l in open(sys.argv[1]) if '"type":"pipe_summary"' in l][0]
step = max(r['step_s'] for r in recs)
act = max(r['activation_bytes'] for r in recs) / 2**20
print('%.2f %.3f %.3f %.2f' % (int(sys.argv[2]) / step, summ['bubble_measured_costs'],
                               summ['bubble_measured'], act))
PY
)
    set -- $line
    [ -z "$base" ] && base=$1
    printf '%-28s %10s %7.2f %10s %9s %13s\n' "$name" "$1" "$(echo "$1 / $base" | bc -l)" "$2" "$3" "$4"
done
run dp --set cluster.split=speed
sps=$(sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' "$tmp/dp.out")
printf '%-28s %10s %7.2f   (final summary, first step included)\n' "data parallel, speed split" "$sps" \
    "$(echo "$sps / $base" | bc -l)"

# Time to a target validation loss (TTL=LOSS, e.g. TTL=2.6; TTL_STEPS steps, default 300):
# every TTL_EVERY steps (10) rank 0 evaluates TTL_EVAL_BATCHES (4) batches of fixed validation
# windows, the same for every run; the time to the first evaluation at or below LOSS is the
# sum of the steps' times before it, each from its logged samples/s (the first, compiling,
# step and the evaluations themselves not counted). 2BW trains on one-step-stale weights
# without a flush, the others synchronously, so this is where 2BW's throughput must pay for
# its staleness. The mean training loss of the last 10 steps is printed beside it.
[ -n "${TTL:-}" ] || exit 0
every=${TTL_EVERY:-10}
echo "== time to validation loss $TTL (evaluated every $every steps), at most ${TTL_STEPS:-300} steps"
printf '%-28s %10s %8s %12s %12s\n' run "time (s)" steps "val loss" "train loss"
for cfg in "1f1b uniform" "hepipe hetero" "hepipe hetero rep" "2bw uniform" "2bw hetero"; do
    read -r sched part rep <<<"$cfg"
    name="ttl-$sched-$part${rep:+-$rep}"
    run "$name" --set pipe.schedule="$sched" --set pipe.partition="$part" \
        --set pipe.replicate="$([ -n "$rep" ] && echo true || echo false)" \
        --set pipe.stages="$np" --set pipe.micro_batches="$nmb" --set log.every=1 \
        --set train.steps="${TTL_STEPS:-300}" --set train.eval_every="$every" \
        --set train.eval_batches="${TTL_EVAL_BATCHES:-4}"
    /usr/bin/python3 - "$tmp/$name.jsonl" "$batch" "$TTL" "$name" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
train = {r['step']: r for r in recs if r['type'] == 'train'}
evals = sorted((r['step'], r['val_loss']) for r in recs if r['type'] == 'eval')
B, target = int(sys.argv[2]), float(sys.argv[3])
def time_to(step):  # the steps' own times up to `step`; the first (compiling) one not counted
    return sum(B / train[s]['samples_per_s'] for s in train
               if s <= step and train[s]['samples_per_s'] > 0)
hit = next(((s, v) for s, v in evals if v <= target), None)
last = [train[s]['loss'] for s in sorted(train)[-10:]]
print('%-28s %10s %8s %12.4f %12.4f' % (sys.argv[4], '%.1f' % time_to(hit[0]) if hit else 'not reached',
      hit[0] if hit else '-', hit[1] if hit else evals[-1][1], sum(last) / len(last)))
PY
done
