#!/usr/bin/env bash
# Pipeline parallelism under mpirun: every schedule, with D = 2 and 4 stages, N = 1, D and 3D
# micro-batches and 2 data-parallel replicas, trains the MLP and the GPT (dropout on, global
# norm clipping on) to the loss sequence of one process with the same global batch and seed,
# within a relative 2e-5 per step, and to the same final parameters (every tensor within
# 1e-4 of its largest value): micro-batches sum the batch's gradient in another order, so not
# bit for bit. A 4-stage checkpoint resumes in one process and continues the one-process
# losses, and the reverse. Bad pipeline settings exit 2 naming the keys.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
. "$(dirname "$0")/../lib/pipe_gpt.sh"

mlp_cnn_jobs
gpt_job 4 0

# one MODEL NAME ARGS: the one-process reference
one() {
    local model=$1 name=$2
    shift 2
    "$HETTRAIN" -c "$TMP/$model.cfg" -q --set log.metrics="$TMP/$name.jsonl" \
        --set checkpoint.path="$TMP/$name.ckpt" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    RC=$?
    [ $RC -eq 0 ] || [ -n "${EXPECT_FAIL:-}" ] || diag "$(tail -5 "$TMP/$name.err")"
    losses "$TMP/$name.jsonl" >"$TMP/$name.loss" 2>/dev/null
}
# pp NP MODEL NAME ARGS: mpirun NP ranks
pp() {
    local np=$1 model=$2 name=$3
    shift 3
    mpirun_ht "$np" "$HETTRAIN" -c "$TMP/$model.cfg" -q --set log.metrics="$TMP/$name.jsonl" \
        --set checkpoint.path="$TMP/$name.ckpt" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    RC=$?
    [ $RC -eq 0 ] || [ -n "${EXPECT_FAIL:-}" ] || diag "$(tail -5 "$TMP/$name.err")"
    losses "$TMP/$name.jsonl" >"$TMP/$name.loss" 2>/dev/null
}

need_text

one mlp mlp1
ok $RC "MLP, one process: reference run"
one gpt gpt1
ok $RC "GPT, one process: reference run"
one cnn cnn1
ok $RC "CNN, one process: reference run"

# check NP MODEL STEPS SCHEDULE D N [ARGS]: a pipeline run against the reference
check() {
    local np=$1 model=$2 steps=$3 sched=$4 D=$5 N=$6
    shift 6
    local name="$model-$sched-$np-$D-$N"
    rm -f "$TMP/$name".ckpt* # a name seen before (other ARGS): a fresh run, not --overwrite's
    pp "$np" "$model" "$name" --set pipe.schedule="$sched" --set pipe.stages="$D" \
        --set pipe.micro_batches="$N" "$@"
    [ $RC -eq 0 ] && same_losses "$TMP/${model}1.loss" "$TMP/$name.loss" "$steps" 2e-5 &&
        same_params "$TMP/${model}1.ckpt" "$TMP/$name.ckpt" 1e-4
    ok $? "$model, $sched, $np ranks, D=$D, N=$N $*: the one-process losses and parameters"
}

for s in gpipe 1f1b; do
    check 2 gpt 4 $s 2 1
    check 2 gpt 4 $s 2 2
    check 2 gpt 4 $s 2 6
    check 4 gpt 4 $s 4 12
    check 2 mlp 6 $s 2 2
done
check 4 gpt 4 1f1b 4 4 --set pipe.partition=balanced
check 3 cnn 5 1f1b 3 3       # stages cut at the pooling and flatten layers
check 2 cnn 5 gpipe 2 4 --set 'pipe.boundaries=[6]'   # the cut right at flatten
check 4 mlp 6 1f1b 2 3   # 2 replicas of a 2-stage pipeline
check 2 gpt 4 interleaved 2 2 --set pipe.chunks=2
check 2 gpt 4 interleaved 2 6 --set pipe.chunks=2
check 4 gpt 4 interleaved 4 4 --set pipe.chunks=2
check 2 gpt 4 chimera 2 2
check 2 gpt 4 chimera 2 6
check 4 gpt 4 chimera 4 4
check 4 mlp 6 chimera 2 2    # 2 replicas of Chimera: 4 holders of every stage
# HePipe (issue 11): multi-forward 1F1B and the hetero partition under emulated slowdowns
check 2 gpt 4 hepipe 2 6 --set pipe.partition=hetero --set 'cluster.slowdown=[1.0,3.0]'
check 4 gpt 4 hepipe 4 8 --set 'cluster.slowdown=[1.0,1.0,2.0,4.0]'
check 2 gpt 4 gpipe 2 2 --set pipe.partition=hetero
# the hetero cut itself (the fast rank gets more layers): pipe_hetero.t, which runs alone

# recomputation: stages keep only their inputs and run the forward again before the backward,
# with the same dropout masks: the very losses of the run without it, and less slot memory
check 2 gpt 4 1f1b 2 6 --set pipe.recompute=all
pp 2 gpt rc0 --set pipe.schedule=1f1b --set pipe.stages=2 --set pipe.micro_batches=6
pp 2 gpt rc1 --set pipe.schedule=1f1b --set pipe.stages=2 --set pipe.micro_batches=6 --set pipe.recompute=all
[ -s "$TMP/rc0.loss" ] && cmp -s "$TMP/rc0.loss" "$TMP/rc1.loss"
ok $? "1f1b with recomputation: bit for bit the losses without it"
mem() { grep '"type":"pipe"' "$1" | sed -E 's/.*"activation_bytes":([0-9.e+]+).*/\1/' | sort -g | tail -1; }
awk -v a="$(mem "$TMP/rc1.jsonl")" -v b="$(mem "$TMP/rc0.jsonl")" 'BEGIN { exit !(a > 0 && a < b) }'
ok $? "and less activation memory per rank ($(mem "$TMP/rc1.jsonl") < $(mem "$TMP/rc0.jsonl") bytes)"
check 4 gpt 4 chimera 4 4 --set pipe.recompute=all

# --trace: one track per rank with its forwards, backwards and waits
pp 2 gpt tr --set pipe.schedule=1f1b --set pipe.stages=2 --set pipe.micro_batches=2 --trace "$TMP/pipe.trace"
[ $RC -eq 0 ] && /usr/bin/python3 - "$TMP/pipe.trace" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))['traceEvents'] if e.get('ph') == 'X']
for pid in (0, 1):
    names = [e['name'] for e in ev if e['pid'] == pid]
    # 4 steps x 2 micro-batches: 8 forwards and 8 backwards of this rank's stage
    assert sum(n.startswith('FWD mb') and n.endswith('s%d' % pid) for n in names) == 8, names
    assert sum(n.startswith('BWD mb') for n in names) == 8
    assert any(n.startswith('wait') for n in names) and any(n.startswith('SEND_') for n in names)
PY
ok $? "--trace: every rank's FWD/BWD per micro-batch, sends and waits"

# a 4-stage checkpoint resumes in one process (and the reverse): the one-process sequence
pp 4 gpt stop --set pipe.schedule=1f1b --set pipe.stages=4 --set pipe.micro_batches=4 --stop-after 2
# (a set: one shard per stage, each by its stage's rank)
[ $RC -eq 0 ] && [ -s "$TMP/stop.ckpt.safetensors.index.json" ]
ok $? "4 stages, --stop-after 2: exit 0, checkpoint written"
cp "$TMP/stop.jsonl" "$TMP/r1.jsonl"
one gpt r1 --resume --set checkpoint.path="$TMP/stop.ckpt"
losses "$TMP/r1.jsonl" >"$TMP/r1.loss"
[ $RC -eq 0 ] && same_losses "$TMP/gpt1.loss" "$TMP/r1.loss" 4 2e-5
ok $? "its checkpoint resumed by one process continues the one-process losses"
one gpt half --stop-after 2
cp "$TMP/half.jsonl" "$TMP/r4.jsonl"
pp 4 gpt r4 --resume --set checkpoint.path="$TMP/half.ckpt" --set pipe.schedule=chimera \
    --set pipe.stages=4 --set pipe.micro_batches=4
[ $RC -eq 0 ] && same_losses "$TMP/gpt1.loss" "$TMP/r4.loss" 4 2e-5 && same_params "$TMP/gpt1.ckpt" "$TMP/half.ckpt" 1e-4
ok $? "a one-process checkpoint resumed by a 4-stage Chimera run: the same losses and parameters"

# bad settings: exit 2 naming the keys
EXPECT_FAIL=1
bad() {
    local np=$1 pat=$2 desc=$3
    shift 3
    mpirun_ht "$np" "$HETTRAIN" -c "$TMP/gpt.cfg" -q "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"
    local rc=$?
    [ $rc -eq 2 ] && grep -Eq -- "$pat" "$TMP/bad.err"
    ok $? "$desc (exit $rc)"
}
bad 2 "\"hetero\" places one stage on each rank" "hetero partition with chimera" \
    --set pipe.schedule=chimera --set pipe.partition=hetero
bad 2 "pipe.stages.*at most 9" "more stages than the model has layers" \
    --set pipe.schedule=1f1b --set pipe.stages=2 --set pipe.chunks=5 --set pipe.schedule=interleaved
bad 2 "train.batch.*pipe.micro_batches" "micro-batches not dividing the batch" \
    --set pipe.schedule=1f1b --set pipe.micro_batches=5
bad 3 "not a multiple of 2 stages" "ranks not a multiple of the stages" \
    --set pipe.schedule=gpipe --set pipe.stages=2
bad 3 "even" "Chimera with an odd number of stages" \
    --set pipe.schedule=chimera --set pipe.stages=3 --set pipe.micro_batches=3
done_testing
