#!/usr/bin/env bash
# Stage-local pipeline memory (issue 24): a pipeline rank whose stream runs one stage, rank 0
# included, allocates only that stage's parameters, gradients and optimizer state, from
# start-up on (the peak is measured from there); validation
# runs as a forward-only pass over the stages and each stage's owner writes its own shard of
# the checkpoint set. A 4-stage 1f1b GPT: every rank's measured peak (pipe_memory_measured) is
# below the whole model's parameter + AdamW state bytes (the parameter count worked out here
# from the architecture, not read from hettrain), the executor's prediction is within 10% of
# it, and the losses, evaluation and checkpoint equal the one-process run's; the set the 4
# ranks wrote resumes in 2 pipeline ranks and in one process with the one-process run's next
# losses; pipelines killed with SIGKILL mid-save leave a set the next run resumes from. 2bw
# (a second weight version and gradient buffer, also stage-local) on 2 ranks: the same memory
# checks.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
. "$(dirname "$0")/../lib/pipe_gpt.sh"
need_text

local_gpt_job 4

# pp NAME NP ARGS: NP ranks, NP stages
pp() {
    local name=$1 np=$2
    shift 2
    mpirun_ht "$np" "$HETTRAIN" -c "$TMP/gpt.cfg" --set log.metrics="$TMP/$name.jsonl" \
        --set checkpoint.path="$TMP/$name.ckpt" --set pipe.stages="$np" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
    RC=$?
    [ $RC -eq 0 ] || diag "$(tail -3 "$TMP/$name.err")"
    losses "$TMP/$name.jsonl" >"$TMP/$name.loss" 2>/dev/null
}

one_process
ok $? "GPT ($NPARAMS parameters), one process: reference run"

pp f4 4 --set pipe.schedule=1f1b --set pipe.micro_batches=4
grep -q 'every pipeline rank keeps only its stage.*from start-up' "$TMP/f4.err"
ok $? "1f1b, 4 stages: every rank keeps only its stage, from start-up (logged)"
local_ok f4 4
ok $? "1f1b: ranks 0-3 peak (start-up included) below the whole model's $STATE B of parameters and AdamW state, predictions within 10%"
diag "$(measured f4)"
same_losses "$TMP/one.loss" "$TMP/f4.loss" 3 2e-5
ok $? "1f1b: the one-process losses"
[ -n "$(eval_of one)" ] && paste -d' ' <(eval_of one) <(eval_of f4) |
    awk '{ d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-5 * $2) bad = 1; n++ }
         END { exit bad || n != 2 }'
ok $? "1f1b: the one-process validation losses (a forward-only pass over the stages)"
# 1e-3 of each tensor's largest value: AdamW turns the micro-batches' other summation order into
# differences of a few 1e-6 at this width; a shard written from the wrong window differs by
# the values themselves
ls "$TMP"/f4.ckpt-0000[1-4]-of-00004.safetensors >/dev/null 2>&1 && [ ! -e "$TMP/f4.ckpt" ] &&
    "$HETTRAIN" ckpt merge "$TMP/f4.ckpt" "$TMP/f4m.ckpt" 2>"$TMP/merge.err" &&
    same_params "$TMP/one.ckpt" "$TMP/f4m.ckpt" 1e-3
ok $? "1f1b: one shard per stage, by its owner; the set holds the one-process parameters"

# the 4 ranks' set resumed for steps 4-5 in 2 pipeline ranks and in one process, against one
# process run for 5 steps
"$HETTRAIN" -c "$TMP/gpt.cfg" -q --set train.steps=5 --set log.metrics="$TMP/one5.jsonl" \
    >/dev/null 2>&1
losses "$TMP/one5.jsonl" | tail -2 >"$TMP/one5.loss"
# (hepipe: the plan times every layer first, so its ranks start with no stage, time each layer
# in buffers of its own, then allocate the stage and load their part of the set)
for n in 2 2h 1; do
    mkdir "$TMP/r$n" && cp "$TMP"/f4.ckpt* "$TMP/r$n/"
    common=(-c "$TMP/gpt.cfg" --resume --set train.steps=5 --set checkpoint.path="$TMP/r$n/f4.ckpt"
            --set log.metrics="$TMP/r$n.jsonl")
    case $n in
    1) "$HETTRAIN" "${common[@]}" >/dev/null 2>"$TMP/r$n.err" ;;
    *) mpirun_ht 2 "$HETTRAIN" "${common[@]}" -v --set pipe.stages=2 --set pipe.micro_batches=4 \
           --set pipe.schedule="$([ $n = 2h ] && echo hepipe || echo 1f1b)" \
           >/dev/null 2>"$TMP/r$n.err" ;;
    esac
    RC=$?
    how="$n process(es)"
    [ $n = 2h ] && how="2 hepipe ranks"
    losses "$TMP/r$n.jsonl" >"$TMP/r$n.loss" 2>/dev/null
    [ $RC -eq 0 ] && grep -q 'resumed from .* at step 3' "$TMP/r$n.err" &&
        same_losses "$TMP/one5.loss" "$TMP/r$n.loss" 2 2e-5
    ok $? "the set 4 stage ranks wrote at step 3 resumes in $how: steps 4-5 lose as one process's"
    [ $RC -eq 0 ] || diag "$(tail -3 "$TMP/r$n.err")"
done
# hepipe's ranks learn their window after the plan: each read the set's headers once (at
# --resume), its window later from the same opened files (it read them twice before)
for q in 0 1; do grep -c "^\[rank $q\] debug: .*f4.ckpt: checkpoint headers read" "$TMP/r2h.err"; done |
    tr '\n' ' ' | grep -qx '1 1 '
ok $? "hepipe, 2 stages resumed: each rank read the checkpoint's headers once"
# the peak from start-up on within 10% of the stage-only prediction: the whole model's other
# stage would add 2.2 MB (28%) on rank 0 and 5.8 MB on rank 1 (stage 0 is the larger here)
grep -q 'every pipeline rank keeps only its stage.*from start-up' "$TMP/r2h.err" &&
    local_ok r2h 2 $((2 * STATE))
ok $? "hepipe, 2 stages resumed: the peak from start-up on (its calibration included) is the stage-only prediction's, within 10%"
diag "$(measured r2h)"

pp tbw 2 --set pipe.schedule=2bw --set pipe.micro_batches=4
# the whole model's 2bw state: parameters, gradients, AdamW's m and v, one more weight version
# and gradient buffer (a rank holding all of it and any activations is above)
TBW=$((NPARAMS * 4 * 6))
[ $RC -eq 0 ] && local_ok tbw 2 $TBW
ok $? "2bw, 2 stages: ranks 0 and 1 (two weight versions) below the whole model's $TBW B, predictions within 10%"
diag "$(measured tbw)"


# --- 4 stage ranks killed together with SIGKILL in the middle of their sharded saves (one
# after every step): odd rounds as soon as a shard's temp file or .next exists (their saves
# pause before each rename: HT_FAILPOINT, so these always hit a save), even ones 0-40 ms
# later; each next run resumes from a complete set, and so does one process at the end
mkdir "$TMP/k"
. "$(dirname "$0")/../lib/killed_saves.sh"
ROUNDS=4 hits=0 resumed=0 prev=-1 order=0 steps=""
sed -e 's/steps = 3;/steps = 100000;/' -e 's/eval_every = 2;/eval_every = 0;/' "$TMP/gpt.cfg" >"$TMP/kill.cfg"
echo "checkpoint = { path = \"$TMP/k/g.ckpt\"; every = 1; };" >>"$TMP/kill.cfg"
# ranks_of PID: the hettrain processes among PID's descendants
ranks_of() {
    local c
    for c in $(pgrep -P "$1"); do
        [ "$(ps -o comm= -p "$c")" = hettrain ] && echo "$c"
        ranks_of "$c"
    done
}
for r in $(seq $ROUNDS); do
    touch "$TMP/mark"
    HT_FAILPOINT=$([ $((r % 2)) -eq 1 ] && echo $FAILPOINT) \
        mpirun_ht 4 "$HETTRAIN" -c "$TMP/kill.cfg" --resume --set pipe.stages=4 \
        --set pipe.schedule=1f1b --set pipe.micro_batches=4 >"$TMP/k.out" 2>"$TMP/k.err" &
    pid=$!
    t0=$SECONDS
    saving() { [ -n "$(find "$TMP/k" -newer "$TMP/mark" \( -name '*.next' -o -name '*.tmp.*' \) 2>/dev/null)" ]; }
    while ! saving && kill -0 $pid 2>/dev/null && [ $((SECONDS - t0)) -lt 120 ]; do :; done
    [ $((r % 2)) -eq 0 ] && sleep "0.0$((RANDOM % 5))"
    # every rank at once (the hettrain processes below the job); mpirun then ends the job,
    # with what the ranks logged before
    kill -9 $(ranks_of $pid) 2>/dev/null
    wait $pid 2>/dev/null
    saving && hits=$((hits + 1))
    round_tally $r
done
last_resume "$TMP/kill.cfg" \
    "$ROUNDS pipelines of 4 stage ranks killed with SIGKILL: each next run resumed from a complete set, steps never going back"
ok $([ $hits -ge 1 ]; echo $?) "$hits of the $ROUNDS kills left a shard's temp file or .next behind (hit a save)"
done_testing
