#!/usr/bin/env bash
# Stage-local memory for schedules that run several stages a rank (issue 24): interleaved
# (two chunks a rank), Chimera (a down and an up stage a rank; each stage's two replicas sum
# their gradients) and zb-v (two chunks in a V) allocate only the parameters, gradients,
# optimizer state and activation buffers of the stages each rank runs, one window per stage,
# from start-up on. A 4-rank GPT (6 blocks, 8 or 4 stages) for each: every rank's measured
# peak (pipe_memory_measured) is below the whole model's parameter + AdamW state bytes (the
# parameter count worked out here from the architecture, not read from hettrain) and within
# 10% of the memory model's prediction; the training and validation losses equal the
# one-process run's; each writes a sharded set, one shard per stage by its owner, that holds
# the one-process parameters; the sets resume in one process, in 2 stages of 1f1b and in the
# schedules themselves with the one-process run's next losses.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
. "$(dirname "$0")/../lib/pipe_gpt.sh"
need_text

local_gpt_job 6

# pp NAME NP ARGS: NP ranks, NP pipeline ranks
pp() {
    local name=$1 np=$2
    shift 2
    mpirun_ht "$np" "$HETTRAIN" -c "$TMP/gpt.cfg" --set log.metrics="$TMP/$name.jsonl" \
        --set checkpoint.path="$TMP/$name.ckpt" --set pipe.stages="$np" \
        --set pipe.micro_batches=4 "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    RC=$?
    [ $RC -eq 0 ] || diag "$(tail -3 "$TMP/$name.err")"
    losses "$TMP/$name.jsonl" >"$TMP/$name.loss" 2>/dev/null
}
same_eval() {
    [ -n "$(eval_of one)" ] && paste -d' ' <(eval_of one) <(eval_of "$1") |
        awk '{ d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-5 * $2) bad = 1; n++ }
             END { exit bad || n != 2 }'
}

one_process
ok $? "GPT ($NPARAMS parameters), one process: reference run"

# interleaved: stages s and s + 4 on rank s; zb-v: s and 7 - s; Chimera: stage s down on rank
# s and up on rank 3 - s, cut so that each rank's two stages hold about half the parameters
# (the uniform cut gives ranks 1 and 2 the four middle blocks: more than the whole model's
# parameters and AdamW state once their gradients and activations are added)
for run in "il 8 --set pipe.schedule=interleaved --set pipe.chunks=2" \
    "ch 4 --set pipe.schedule=chimera --set pipe.boundaries=[3,5,6]" \
    "zv 8 --set pipe.schedule=zb-v"; do
    set -- $run
    name=$1 S=$2
    shift 2
    pp "$name" 4 "$@"
    what="$(sed -E 's/.*schedule=([a-z-]+).*/\1/' <<<"$*"), 4 ranks, $S stages"
    [ $RC -eq 0 ] && grep -q 'keeps only its stage.*one window per stage it runs.*from start-up' "$TMP/$name.err"
    ok $? "$what: every rank keeps only its stages, one window each, from start-up (logged)"
    local_ok "$name" 4
    ok $? "$what: ranks 0-3 peak (start-up included) below the whole model's $STATE B of parameters and AdamW state, predictions within 10%"
    diag "$(measured "$name")"
    same_losses "$TMP/one.loss" "$TMP/$name.loss" 3 2e-5
    ok $? "$what: the one-process losses"
    same_eval "$name"
    ok $? "$what: the one-process validation losses (a forward-only pass over the stages)"
    # 1e-3 of each tensor's largest value, as pipe_local.t: AdamW turns the micro-batches'
    # other summation order into differences of a few 1e-6; a shard written from the wrong
    # window differs by the values themselves
    [ "$(ls "$TMP/$name".ckpt-*-of-0000$S.safetensors 2>/dev/null | wc -l)" -eq "$S" ] &&
        [ ! -e "$TMP/$name.ckpt" ] &&
        "$HETTRAIN" ckpt merge "$TMP/$name.ckpt" "$TMP/${name}m.ckpt" 2>"$TMP/merge.err" &&
        same_params "$TMP/one.ckpt" "$TMP/${name}m.ckpt" 1e-3
    ok $? "$what: one shard per stage, by its owner; the set holds the one-process parameters"
done

# a stage without parameters among a rank's stages (the CNN's max-pooling alone, stage 1 of
# interleaved's 4 on rank 1): its clipping norm and evaluation, the one-process losses
cat >"$TMP/cnn.cfg" <<'CFG'
model = { type = "cnn"; layers = ["conv 3 4 pad=1", "relu", "maxpool 2", "conv 3 6 pad=1", "relu",
          "avgpool 2", "flatten", "linear 12", "relu", "linear 4"]; };
data = { kind = "synthetic"; samples = 400; features = 64; classes = 4; seed = 5; };
train = { batch = 12; steps = 5; seed = 3; eval_every = 5; };
optim = { type = "sgd"; lr = 0.05; momentum = 0.9; clip = 1.0; };
log = { every = 1; progress = "none"; };
CFG
"$HETTRAIN" -c "$TMP/cnn.cfg" -q --set log.metrics="$TMP/cnn1.jsonl" >/dev/null 2>&1
mpirun_ht 2 "$HETTRAIN" -c "$TMP/cnn.cfg" --set log.metrics="$TMP/cnn2.jsonl" \
    --set checkpoint.path="$TMP/cnn2.ckpt" --set pipe.stages=2 --set pipe.schedule=interleaved \
    --set pipe.chunks=2 --set 'pipe.boundaries=[2,3,5]' --set pipe.micro_batches=2 \
    >/dev/null 2>"$TMP/cnn2.err"
RC=$?
losses "$TMP/cnn1.jsonl" >"$TMP/cnn1.loss" 2>/dev/null
losses "$TMP/cnn2.jsonl" >"$TMP/cnn2.loss" 2>/dev/null
[ $RC -eq 0 ] && grep -q 'stage 1: rank 1, layers 2-2 (maxpool1 .. maxpool1), 0 parameters' "$TMP/cnn2.err" &&
    same_losses "$TMP/cnn1.loss" "$TMP/cnn2.loss" 5 2e-5 &&
    paste -d' ' <(eval_of cnn1) <(eval_of cnn2) |
    awk '{ d = $2 - $4; if (d < 0) d = -d; if ($1 != 5 || $3 != 5 || d > 1e-5 * $2) bad = 1; n++ }
         END { exit bad || n != 1 }'
ok $? "CNN, interleaved, a rank's stage without parameters (max-pooling alone), clipped: the one-process losses and validation loss"
[ $RC -eq 0 ] || diag "$(tail -3 "$TMP/cnn2.err")"

# each set resumed for steps 4-5 against one process run for 5 steps: interleaved's in one
# process and in 2 stages of 1f1b, Chimera's in Chimera, zb-v's in 2 interleaved ranks
"$HETTRAIN" -c "$TMP/gpt.cfg" -q --set train.steps=5 --set log.metrics="$TMP/one5.jsonl" \
    >/dev/null 2>&1
losses "$TMP/one5.jsonl" | tail -2 >"$TMP/one5.loss"
for r in "il 1" "il 2 --set pipe.schedule=1f1b" "ch 4 --set pipe.schedule=chimera" \
    "zv 2 --set pipe.schedule=interleaved --set pipe.chunks=2"; do
    set -- $r
    from=$1 np=$2
    shift 2
    d="$TMP/r-$from-$np" && mkdir "$d" && cp "$TMP/$from".ckpt-* "$TMP/$from".ckpt.* "$d/"
    common=(-c "$TMP/gpt.cfg" --resume --set train.steps=5 --set checkpoint.path="$d/$from.ckpt"
            --set log.metrics="$d.jsonl")
    if [ "$np" = 1 ]; then
        "$HETTRAIN" "${common[@]}" >/dev/null 2>"$d.err"
    else
        mpirun_ht "$np" "$HETTRAIN" "${common[@]}" --set pipe.stages="$np" \
            --set pipe.micro_batches=4 "$@" >/dev/null 2>"$d.err"
    fi
    RC=$?
    losses "$d.jsonl" >"$d.loss" 2>/dev/null
    how="$np ranks, $(sed -E 's/--set pipe\.//g' <<<"$*")"
    [ "$np" = 1 ] && how="one process"
    [ $RC -eq 0 ] && grep -q 'resumed from .* at step 3' "$d.err" &&
        same_losses "$TMP/one5.loss" "$d.loss" 2 2e-5
    ok $? "the $from set (step 3) resumes in $how: steps 4-5 lose as one process's"
    [ $RC -eq 0 ] || diag "$(tail -3 "$d.err")"
done
done_testing
