#!/usr/bin/env bash
# SIGINT / SIGTERM during a run: the run stops after the current step, saves its checkpoint,
# says so and exits 75 (HT_ESTOPPED: stopped early, resume to continue), also while it idles
# for a huge emulated slowdown (the sleep wakes on the signal: a 1e6x slowdown idles
# 1e6 x a step's compute, over 100 s, so a run that exits 75 within stop_bg's 60 s woke
# early; no speed is asserted); --resume then continues from
# that checkpoint to the end. Under mpirun, signals to the ranks give mpirun's status 75, also
# under the asynchronous policies (asp, gossip), and when only one worker is signalled.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"

cat >"$TMP/job.cfg" <<'CFG'
model = { hidden = [16]; };
data = { kind = "synthetic"; samples = 600; features = 8; classes = 3; seed = 3; };
train = { batch = 32; steps = 40; seed = 7; };
optim = { type = "sgd"; lr = 0.05; };
log = { every = 1; progress = "none"; };
CFG
# compiles (or loads) the kernels, so that the runs below start at once
run_ht -c "$TMP/job.cfg" -q --set train.steps=1
ok $RC "warm-up run exits 0"

# start_bg ARGS...: hettrain in the background ($PID), its metrics file $TMP/m.jsonl marks
# that training is about to start; returns once it exists (or after 60 s)
start_bg() {
    rm -f "$TMP/m.jsonl" "$TMP/c.ckpt"
    "$@" >"$TMP/out" 2>"$TMP/err" &
    PID=$!
    for _ in $(seq 600); do [ -e "$TMP/m.jsonl" ] && break; sleep 0.1; done
    sleep 1 # into the first step's emulated idling
}
# stop_bg SIG: sends SIG to $PID (or to the pids in $TARGETS), waits (at most 60 s, then
# kill -9: exit 137); sets RC, SECS
stop_bg() {
    local t0 t1
    t0=$(date +%s.%N)
    kill -"$1" ${TARGETS:-$PID}
    for _ in $(seq 600); do kill -0 $PID 2>/dev/null || break; sleep 0.1; done
    if kill -0 $PID 2>/dev/null; then kill -9 $PID; fi
    wait $PID
    RC=$?
    t1=$(date +%s.%N)
    SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
}

args=(-c "$TMP/job.cfg" --set checkpoint.path="$TMP/c.ckpt" --set log.metrics="$TMP/m.jsonl")
for sig in INT TERM; do
    start_bg "$HETTRAIN" "${args[@]}" --set 'cluster.slowdown=[1e6]'
    stop_bg $sig
    ok $([ $RC -eq 75 ]; echo $?) \
        "SIG$sig during a 1e6x emulated slowdown: exit 75 after ${SECS} s (its idle was not over)"
    grep -Eq "interrupted at step [0-9]+; checkpoint saved to .*c.ckpt; continue with --resume" "$TMP/err"
    ok $? "SIG$sig: the message says where the checkpoint is and how to continue"
    [ $? -eq 0 ] || diag "$(cat "$TMP/err")"
done
[ -s "$TMP/c.ckpt" ]; ok $? "the checkpoint was written"
run_ht "${args[@]}" -q --resume
ok $RC "--resume from it exits 0"
printf '%s' "$OUT" | grep -q '^final: step 40,'; ok $? "and ends at step 40"
# the stopped run's losses, then the resumed run's (appended): an uninterrupted run's, bit for bit
run_ht -c "$TMP/job.cfg" -q --set log.metrics="$TMP/u.jsonl"
losses "$TMP/m.jsonl" >"$TMP/m.loss"; losses "$TMP/u.jsonl" >"$TMP/u.loss"
[ "$(wc -l <"$TMP/u.loss")" -eq 40 ] && cmp -s "$TMP/m.loss" "$TMP/u.loss"
r=$?
ok $r "stopped by SIGTERM and resumed: the losses of the 40 steps are an uninterrupted run's, bit for bit"
[ $r -eq 0 ] || diag "$(diff "$TMP/u.loss" "$TMP/m.loss" | head -5)"

# under mpirun: the ranks signalled (as a scheduler does), mpirun exits 75. CI has mpirun
# (tools/setup installs openmpi-bin): without it these checks fail, naming it
command -v mpirun >/dev/null
ok $? "mpirun found (the checks under mpirun below need it)"
if command -v mpirun >/dev/null; then
    start_bg mpirun --oversubscribe -np 2 "$HETTRAIN" "${args[@]}" \
        --set 'cluster.slowdown=[1e6, 1e6]'
    TARGETS=$(pgrep -P $PID -x hettrain | tr '\n' ' ')
    stop_bg INT
    TARGETS=
    ok $([ $RC -eq 75 ] && [ -s "$TMP/c.ckpt" ]; echo $?) \
        "mpirun -np 2, SIGINT to both ranks while they idle: mpirun exits 75 after ${SECS} s, checkpoint saved"
    [ $RC -eq 75 ] || diag "$(cat "$TMP/err")"

    # the asynchronous policies stop at a quiesce point: every worker's messages drained, the
    # checkpoint saved, the server or coordinator ends too; --resume continues to the end
    for mode in asp gossip; do
        start_bg mpirun --oversubscribe -np 3 "$HETTRAIN" "${args[@]}" --set sync.mode=$mode \
            --set 'cluster.slowdown=[1e6, 1e6, 1.0]'
        TARGETS=$(pgrep -P $PID -x hettrain | tr '\n' ' ')
        stop_bg TERM
        TARGETS=
        ok $([ $RC -eq 75 ] && [ -s "$TMP/c.ckpt" ]; echo $?) \
            "sync.mode $mode, SIGTERM to all 3 ranks while the workers idle: mpirun exits 75 after ${SECS} s, checkpoint saved"
        [ $RC -eq 75 ] || diag "$(tail -5 "$TMP/err")"
        mpirun --oversubscribe -np 3 "$HETTRAIN" "${args[@]}" -q --resume --set sync.mode=$mode >"$TMP/out" 2>"$TMP/err"
        ok $([ $? -eq 0 ] && grep -q '^final: step 40,' "$TMP/out"; echo $?) "sync.mode $mode: --resume from it ends at step 40"
    done
    # a signal that reaches one worker only: it tells the server, which ends the segment for all
    start_bg mpirun --oversubscribe -np 3 "$HETTRAIN" "${args[@]}" --set sync.mode=asp \
        --set train.steps=100000000 --set log.every=100
    TARGETS=$(for p in $(pgrep -P $PID -x hettrain); do
        tr '\0' '\n' <"/proc/$p/environ" | grep -qx OMPI_COMM_WORLD_RANK=1 && echo $p; done)
    stop_bg INT
    TARGETS=
    ok $([ $RC -eq 75 ] && [ -s "$TMP/c.ckpt" ]; echo $?) \
        "asp, SIGINT to worker 1 only: the whole job stops, mpirun exits 75 after ${SECS} s, checkpoint saved"
    [ $RC -eq 75 ] || diag "$(tail -5 "$TMP/err")"
fi
done_testing
