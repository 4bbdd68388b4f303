#!/usr/bin/env bash
# A new user's first day (issue 32): Ctrl-C without checkpoint.path exits 130 (not 75, the
# requeue code) and says nothing was saved; an existing checkpoint is never replaced by a run
# without --resume unless --overwrite says so (refused with exit 2 naming the file, the key
# and the way out, the file left byte for byte); the end of a run names the checkpoint and
# metrics files; a job without a data group says it trains on generated data; a missing data
# file names the key, the config line and the folder it was looked for in; the first choice
# of SGEMM kernels says what it is doing; the Slurm script parses and requeues on exit 75.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"

cat >"$TMP/job.cfg" <<'CFG'
model = { hidden = [16]; };
data = { kind = "synthetic"; samples = 600; features = 8; classes = 3; seed = 3; };
train = { batch = 32; steps = 6; seed = 7; };
optim = { type = "sgd"; lr = 0.05; };
log = { every = 1; progress = "none"; };
CFG
# compiles (or loads) the kernels, so that the runs below start at once
run_ht -c "$TMP/job.cfg" -q --set train.steps=1
ok $RC "warm-up run exits 0"

# step N of a checkpoint, read with a plain safetensors parser (not hettrain's)
ckpt_step() {
    python3 -c 'import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
print(json.loads(b[8:8 + n])["__metadata__"]["step"])' "$1"
}

# ---- Ctrl-C / SIGTERM without checkpoint.path: exit 130, "nothing was saved", no --resume advice
# start_bg ARGS...: in the background ($PID); returns once training started (metrics file)
start_bg() {
    rm -f "$TMP/m.jsonl"
    "$@" >"$TMP/out" 2>"$TMP/err" &
    PID=$!
    for _ in $(seq 600); do [ -e "$TMP/m.jsonl" ] && break; sleep 0.1; done
    sleep 1
}
# stop_bg SIG: SIG to $PID (or the pids in $TARGETS), then its exit status in RC
stop_bg() {
    kill -"$1" ${TARGETS:-$PID}
    for _ in $(seq 300); do kill -0 $PID 2>/dev/null || break; sleep 0.1; done
    kill -0 $PID 2>/dev/null && kill -9 $PID
    wait $PID
    RC=$?
}
idle=(-c "$TMP/job.cfg" --set log.metrics="$TMP/m.jsonl" --set train.steps=40)
for sig in INT TERM; do
    start_bg "$HETTRAIN" "${idle[@]}" --set 'cluster.slowdown=[1e6]'
    stop_bg $sig
    ok $([ $RC -eq 130 ]; echo $?) "SIG$sig without checkpoint.path: exit 130, not 75 (exit $RC)"
    grep -Eq "interrupted at step [0-9]+.*nothing was saved, a rerun starts from step 0" "$TMP/err" &&
        ! grep -q -- "continue with --resume" "$TMP/err"
    ok $? "SIG$sig: says nothing was saved and does not advise --resume"
    [ $? -eq 0 ] || diag "$(tail -3 "$TMP/err")"
done
# the same stop with checkpoint.path still exits 75 (the requeue code)
start_bg "$HETTRAIN" "${idle[@]}" --set 'cluster.slowdown=[1e6]' --set checkpoint.path="$TMP/s.ckpt"
stop_bg INT
ok $([ $RC -eq 75 ] && [ -s "$TMP/s.ckpt" ] && grep -q "continue with --resume" "$TMP/err"; echo $?) \
    "SIGINT with checkpoint.path: exit 75, checkpoint saved, --resume advised (exit $RC)"
# CI has mpirun (tools/setup installs openmpi-bin): without it the checks under mpirun below
# and further down fail here, naming it, instead of dropping out silently
command -v mpirun >/dev/null
ok $? "mpirun found (the checks under mpirun in this file need it)"
if command -v mpirun >/dev/null; then
    start_bg mpirun --oversubscribe -np 2 "$HETTRAIN" "${idle[@]}" --set 'cluster.slowdown=[1e6, 1e6]'
    TARGETS=$(pgrep -P $PID -x hettrain | tr '\n' ' ')
    stop_bg TERM
    TARGETS=
    ok $([ $RC -eq 130 ] && [ "$(grep -c "nothing was saved" "$TMP/err")" -eq 1 ]; echo $?) \
        "mpirun -np 2, SIGTERM to both ranks without checkpoint.path: mpirun exits 130, said once (exit $RC)"
    [ $RC -eq 130 ] || diag "$(tail -3 "$TMP/err")"
fi

# ---- an existing checkpoint is not replaced without --resume or --overwrite
c="$TMP/c.ckpt"
run_ht -c "$TMP/job.cfg" --set checkpoint.path="$c" --set train.steps=4
ok $([ $RC -eq 0 ] && [ "$(ckpt_step "$c")" = 4 ]; echo $?) "a run writes its checkpoint (step 4)"
printf '%s' "$ERR" | grep -q "checkpoint: '$c', written at the end; a later run replaces it only with --overwrite"
ok $? "... and says at the start where, and that a later run will not replace it silently"
printf '%s' "$ERR" | grep -q "checkpoint (step 4): $c"
ok $? "the end of the run names the checkpoint file and its step"
cp "$c" "$TMP/c4.ckpt"
rm -f "$TMP/m2.jsonl"
expect_fail 2 "--set checkpoint.path: key 'checkpoint.path': '$c' already holds a checkpoint of step 4, which this run \(no --resume\) would replace; expected --resume to continue it, --overwrite to replace it" \
    "a second run without --resume: exit 2 naming the key, the file, its step and the ways out" \
    -- -c "$TMP/job.cfg" --set checkpoint.path="$c" --set train.steps=2 --set log.metrics="$TMP/m2.jsonl"
cmp -s "$c" "$TMP/c4.ckpt" && [ ! -e "$TMP/m2.jsonl" ]
ok $? "... refused before any work: the checkpoint is byte for byte the step-4 one, no metrics written"
# the key in the file: its line is named
printf 'checkpoint = {\n  path = "%s";\n};\n' "$c" >"$TMP/ck.cfg"
cat "$TMP/job.cfg" >>"$TMP/ck.cfg"
expect_fail 2 "ck.cfg:2: key 'checkpoint.path': '$c' already holds" \
    "the checkpoint.path set in the file: its file:line is named" -- -c "$TMP/ck.cfg"
(cd "$TMP" && "$HETTRAIN" -c job.cfg --set checkpoint.path=c.ckpt >/dev/null 2>"$TMP/rel.err")
ok $([ $? -eq 2 ] && grep -q "'c.ckpt' (in $TMP) already holds" "$TMP/rel.err"; echo $?) \
    "a relative checkpoint.path: the folder it was resolved in is named"
run_ht -c "$TMP/job.cfg" --set checkpoint.path="$c" --set train.steps=2 --overwrite
ok $([ $RC -eq 0 ] && [ "$(ckpt_step "$c")" = 2 ]; echo $?) "--overwrite: exit 0, the checkpoint is replaced (step 2)"
printf '%s' "$ERR" | grep -q "replacing the checkpoint of step 4 at '$c'.*--overwrite"
ok $? "... and says so at the start"
run_ht -c "$TMP/job.cfg" --set checkpoint.path="$c" --set train.steps=5 --resume -q
ok $([ $RC -eq 0 ] && [ "$(ckpt_step "$c")" = 5 ]; echo $?) "--resume continues it (step 2 -> 5) as before"
# under mpirun the refusal is printed once and every rank exits 2
if command -v mpirun >/dev/null; then
    mpirun_ht 2 "$HETTRAIN" -c "$TMP/job.cfg" --set checkpoint.path="$c" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    ok $([ $RC -eq 2 ] && [ "$(grep -c "already holds a checkpoint" "$TMP/err")" -eq 1 ] &&
        [ "$(ckpt_step "$c")" = 5 ]; echo $?) "mpirun -np 2: exit 2, said once, the checkpoint kept (exit $RC)"
fi

# ---- the end of a run names the metrics file; a run without checkpoint.path says none was written
run_ht -c "$TMP/job.cfg" --set log.metrics="$TMP/e.jsonl" --set train.steps=2
printf '%s' "$ERR" | grep -q "metrics: $TMP/e.jsonl" &&
    printf '%s' "$ERR" | grep -q "no checkpoint written (checkpoint.path not set)"
ok $? "the end of a run names the metrics file and says no checkpoint was written"

# ---- no data group: says it trains on generated data
printf 'model = { hidden = [8]; };\ntrain = { batch = 8; steps = 2; };\noptim = { lr = 0.1; };\n' >"$TMP/nodata.cfg"
run_ht -c "$TMP/nodata.cfg"
[ $RC -eq 0 ] && printf '%s' "$ERR" | grep -q "nodata.cfg has no data group: training on generated data"
ok $? "no data group: exit 0 and says it trains on generated data"
run_ht -c "$TMP/job.cfg" --set train.steps=1
! printf '%s' "$ERR" | grep -q "no data group"
ok $? "a data group with kind \"synthetic\": no such note"

# ---- a missing data file: the key, the config line, the folder
printf 'model = { hidden = [8]; };\ndata = {\n  kind = "idx";\n  images = "no-such-images.gz";\n  labels = "no-such-labels.gz";\n};\ntrain = { batch = 8; steps = 2; };\noptim = { lr = 0.1; };\n' >"$TMP/idx.cfg"
(cd "$TMP" && "$HETTRAIN" -c idx.cfg >/dev/null 2>"$TMP/idx.err")
RC=$?
[ $RC -eq 2 ] && grep -q "idx.cfg:4: key 'data.images': data file 'no-such-images.gz' does not exist (a relative path is taken from the working directory, $TMP)" "$TMP/idx.err"
ok $? "a missing IDX file: exit 2 naming the key, idx.cfg:4 and the folder (exit $RC)"
[ $RC -eq 2 ] || diag "$(cat "$TMP/idx.err")"
expect_fail 2 "job.cfg: key 'data.path': data file '$TMP/none.txt' does not exist; expected" \
    "a missing text file: the key and the config named, an absolute path without a folder" \
    -- -c "$TMP/job.cfg" --set model.type=gpt --set data.kind=text --set data.path="$TMP/none.txt"

# ---- the first choice of SGEMM kernels says what it does (HT_NO_CACHE: measured every run)
HT_NO_CACHE=1 run_ht -c "$TMP/job.cfg" --set train.steps=1
[ $RC -eq 0 ] && printf '%s' "$ERR" | grep -q "choosing the SGEMM kernels for '.*' by measurement (every run: the cache is off)" &&
    printf '%s' "$ERR" | grep -Eq "SGEMM probe: tiled, first call \(compiles\) [0-9.]+ s, then [0-9.]+ ms" &&
    printf '%s' "$ERR" | grep -Eq "SGEMM: (tiled|native|clblast|clblast-cpu), chosen in [0-9.]+ s"
ok $? "the SGEMM probe says what it is doing and what it chose"

# ---- the Slurm script: parses, and requeues the job when the ranks stop with exit 75
S=conf/slurm/hettrain.sbatch
bash -n "$S"; ok $? "$S parses (bash -n)"
if command -v mpirun >/dev/null; then
    mkdir -p "$TMP/bin"
    printf '#!/bin/sh\necho "$@" >"%s/requeued"\n' "$TMP" >"$TMP/bin/scontrol"
    chmod +x "$TMP/bin/scontrol"
    rm -f "$TMP/m.jsonl"
    PATH="$TMP/bin:$PATH" SLURM_JOB_ID=77 SLURM_NTASKS_PER_NODE=1 LAUNCH=mpirun DEVICE=cpu \
        JOB="$TMP/job.cfg" CKPT="$TMP/slurm.ckpt" METRICS="$TMP/m.jsonl" HETTRAIN="$HETTRAIN" \
        HT_ARGS="--set cluster.slowdown=[1e6] --set train.steps=40" \
        bash "$S" >"$TMP/sb.out" 2>"$TMP/sb.err" &
    PID=$!
    for _ in $(seq 600); do [ -e "$TMP/m.jsonl" ] && break; sleep 0.1; done
    sleep 1
    TARGETS=$(pgrep -x hettrain -P "$(pgrep -x mpirun -P $PID)" | tr '\n' ' ')
    stop_bg TERM
    TARGETS=
    ok $([ $RC -eq 0 ] && [ "$(cat "$TMP/requeued" 2>/dev/null)" = "requeue 77" ] && [ -s "$TMP/slurm.ckpt" ]; echo $?) \
        "the script under mpirun, SIGTERM to the rank: checkpoint saved, exit 75, scontrol requeue 77 (script exit $RC)"
    [ -s "$TMP/requeued" ] || diag "$(tail -5 "$TMP/sb.out" "$TMP/sb.err")"
fi
done_testing
