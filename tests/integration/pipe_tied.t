#!/usr/bin/env bash
# GPT-2's tied head under a pipeline (issue 33; src/pipe/tied.h): the embedding's stage and the
# head's stage each hold wte, and after every step's backwards the two copies' gradients are
# summed over the ranks of the first and last stages (with the data-parallel replicas, both
# Chimera directions, the ranks of a replicated stage), so that the copies take the same
# update. The tied GPT of tests/lib/pipe_gpt.sh (dropout on, AdamW, global-norm clipping on)
# under every schedule trains to the one-process tied run's losses (relative 2e-5 per step,
# as tests/integration/pipe.t asks of the untied model) and final parameters (5e-4 of each
# tensor's largest value, pipe.t's 1e-4 being too tight here: one element of
# h1.attn.proj.weight gets a near-zero gradient, and AdamW's normalised step turns the
# summation order's rounding into 1.04e-4 of the tensor's largest value even for 2 plain
# data-parallel replicas of one stage, where no exchange runs; 1.7e-4 at most below). The run
# itself compares the copies' CRC32C at the final checkpoint and exits 1 when they differ.
# Without the exchange (tried by hand) the 2-stage losses differ from step 2 on by 1.7e-3
# relative, and the CRC check stops the run: the checks can fail. A 2-stage checkpoint holds the one-process run's tensors
# (wte once, no head.weight) and resumes in one process to the same losses.
# tests/run: alone (the hetero cut and the re-partition come from measured step times)
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
. "$(dirname "$0")/../lib/pipe_gpt.sh"
need_text
command -v mpirun >/dev/null || { echo "1..0 # SKIP mpirun not found"; exit 0; }

gpt_job 4 0
sed -i 's/dropout = 0.1; };/dropout = 0.1; tie_embeddings = true; };/' "$TMP/gpt.cfg"
grep -q "tie_embeddings = true" "$TMP/gpt.cfg"
ok $? "the job is the pipeline tests' GPT with model.tie_embeddings = true"

one_process
ok $? "tied GPT, one process: the reference"
/usr/bin/python3 - "$TMP/one.ckpt" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
h = json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])
sys.exit(0 if 'embed.wte' in h and 'head.weight' not in h else 1)
PY
ok $? "its checkpoint holds embed.wte and no head.weight"

# check NP SCHEDULE D N [ARGS]: the tied pipeline against the one-process run
check() {
    local np=$1 sched=$2 D=$3 N=$4
    shift 4
    local name="$sched-$np-$D-$N-$T_N"
    mpirun_ht "$np" "$HETTRAIN" -c "$TMP/gpt.cfg" -q --set pipe.schedule="$sched" \
        --set pipe.stages="$D" --set pipe.micro_batches="$N" --set log.metrics="$TMP/$name.jsonl" \
        --set checkpoint.path="$TMP/$name.ckpt" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    local rc=$?
    [ $rc -eq 0 ] || diag "$(grep -v '^ \|^--\|^$' "$TMP/$name.err" | tail -5)"
    losses "$TMP/$name.jsonl" >"$TMP/$name.loss" 2>/dev/null
    [ $rc -eq 0 ] && same_losses "$TMP/one.loss" "$TMP/$name.loss" 4 2e-5 &&
        same_params "$TMP/one.ckpt" "$TMP/$name.ckpt" 5e-4
    ok $? "tied, $sched, $np ranks, D=$D, N=$N $*: the one-process losses and parameters (exit $rc)"
}

check 2 gpipe 2 2
check 2 1f1b 2 6
check 4 1f1b 4 4
check 4 1f1b 2 3                        # 2 replicas: wte summed over 4 ranks
check 2 gpipe 1 2                       # 2 replicas of one stage: no exchange
check 2 interleaved 2 2 --set pipe.chunks=2   # stage 0 on rank 0, stage 3 on rank 1
check 4 chimera 4 4                     # ranks 0 and 3 each hold both ends
check 2 chimera 2 2 --set pipe.recompute=all
check 2 hepipe 2 6 --set pipe.partition=hetero --set 'cluster.slowdown=[1.0,3.0]'
check 3 1f1b 3 2 --set "pipe.stage_ranks=[1,2]" --set "pipe.boundaries=[4]" # head on 2 ranks

# a batch of one sample as a 2-stage pipeline (N = 1): no longer refused for having fewer
# samples than ranks (a pipeline's ranks share each sample)
one1() { "$HETTRAIN" -c "$TMP/gpt.cfg" -q --set train.batch=1 --set log.metrics="$TMP/b1.jsonl" >/dev/null 2>&1; }
one1
mpirun_ht 2 "$HETTRAIN" -c "$TMP/gpt.cfg" -q --set train.batch=1 --set pipe.schedule=1f1b \
    --set pipe.stages=2 --set pipe.micro_batches=1 --set log.metrics="$TMP/b2.jsonl" >"$TMP/b2.out" 2>&1
rc=$?
losses "$TMP/b1.jsonl" >"$TMP/b1.loss"
losses "$TMP/b2.jsonl" >"$TMP/b2.loss"
[ $rc -eq 0 ] && same_losses "$TMP/b1.loss" "$TMP/b2.loss" 4 2e-5
ok $? "batch 1 on a 2-rank pipeline: the one-process losses at batch 1 (exit $rc)"
[ $rc -eq 0 ] || diag "$(grep error "$TMP/b2.out" | head -2)"

# the copies compared at the end: rank 0 says so once
mpirun_ht 2 "$HETTRAIN" -c "$TMP/gpt.cfg" --set pipe.schedule=1f1b --set pipe.stages=2 \
    --set pipe.micro_batches=2 --set checkpoint.path="$TMP/v.ckpt" >"$TMP/v.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -Eq "tied head: wte on the 2 ranks of the first and last stages is bit-equal \(CRC32C [0-9a-f]{8}\)" "$TMP/v.out"
ok $? "a 2-stage run logs its two copies of wte bit-equal at the final checkpoint (exit $rc)"

# a 2-stage checkpoint after 2 steps resumes in one process: the one-process steps 3-4
mpirun_ht 2 "$HETTRAIN" -c "$TMP/gpt.cfg" -q --set pipe.schedule=1f1b --set pipe.stages=2 \
    --set pipe.micro_batches=2 --set log.metrics="$TMP/r.jsonl" --set checkpoint.path="$TMP/r.ckpt" \
    --stop-after 2 >"$TMP/r.out" 2>&1
rc=$?
"$HETTRAIN" -c "$TMP/gpt.cfg" -q --set log.metrics="$TMP/h.jsonl" --set checkpoint.path="$TMP/h.ckpt" \
    --stop-after 2 >/dev/null 2>&1
[ $rc -eq 0 ] && same_params "$TMP/h.ckpt" "$TMP/r.ckpt" 5e-4
ok $? "the 2-stage checkpoint at step 2 holds the one-process checkpoint's tensors (exit $rc)"
"$HETTRAIN" -c "$TMP/gpt.cfg" -q --resume --set log.metrics="$TMP/r.jsonl" \
    --set checkpoint.path="$TMP/r.ckpt" >"$TMP/r1.out" 2>&1
rc=$?
losses "$TMP/r.jsonl" >"$TMP/r.loss"
[ $rc -eq 0 ] && same_losses "$TMP/one.loss" "$TMP/r.loss" 4 2e-5 && same_params "$TMP/one.ckpt" "$TMP/r.ckpt" 5e-4
ok $? "resumed in one process: steps 3-4 and the final parameters of the one-process run (exit $rc)"
# and the reverse: the one-process checkpoint resumed by a 2-stage Chimera run
cp "$TMP/h.jsonl" "$TMP/c.jsonl"
mpirun_ht 2 "$HETTRAIN" -c "$TMP/gpt.cfg" -q --resume --set pipe.schedule=chimera --set pipe.stages=2 \
    --set pipe.micro_batches=2 --set log.metrics="$TMP/c.jsonl" --set checkpoint.path="$TMP/h.ckpt" \
    >"$TMP/c.out" 2>&1
rc=$?
losses "$TMP/c.jsonl" >"$TMP/c.loss"
[ $rc -eq 0 ] && same_losses "$TMP/one.loss" "$TMP/c.loss" 4 2e-5 && same_params "$TMP/one.ckpt" "$TMP/h.ckpt" 5e-4
ok $? "a one-process checkpoint resumed by 2-stage Chimera: both copies loaded, the same steps 3-4 (exit $rc)"

# re-partitioning (pipe.rebalance) with a tied head: layer 0 and the head never change stage,
# so the copies stay where they are; the moved layers' arithmetic does not depend on their
# rank, so the run that moves layers (rank 1 made 6x slower from step 6, as pipe_repart.t)
# equals the run whose cut stays, bit for bit, and its copies end bit-equal
rp() {
    mpirun_ht 2 "$HETTRAIN" -c "$TMP/gpt.cfg" --set train.steps=24 --set pipe.schedule=1f1b \
        --set pipe.stages=2 --set pipe.micro_batches=2 --set pipe.partition=hetero \
        --set 'cluster.slowdown=[2.0, 6.0]' --set 'cluster.slowdown_from=[0, 6]' \
        --set log.metrics="$TMP/$1.jsonl" --set checkpoint.path="$TMP/$1.ckpt" "${@:2}" \
        >"$TMP/$1.out" 2>&1
}
rp rb-on; rc1=$?
rp rb-off --set pipe.rebalance=false; rc2=$?
losses "$TMP/rb-on.jsonl" >"$TMP/rb-on.loss" 2>/dev/null
losses "$TMP/rb-off.jsonl" >"$TMP/rb-off.loss" 2>/dev/null
moves=$(grep -c '"type":"pipe_repartition".*"reverted":0' "$TMP/rb-on.jsonl")
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$moves" -ge 1 ] && cmp -s "$TMP/rb-on.loss" "$TMP/rb-off.loss" &&
    same_tensors "$TMP/rb-on.ckpt" "$TMP/rb-off.ckpt" && grep -q "is bit-equal" "$TMP/rb-on.out"
ok $? "tied, 1f1b re-partitioned ($moves move(s) kept): the losses and checkpoint of the run whose cut stays, bit for bit; the copies bit-equal (exit $rc1, $rc2)"
done_testing
