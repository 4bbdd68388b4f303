#!/usr/bin/env bash
# A rank the speed split left out (share 0) is brought back by the rebalancer when that pays
# (issue 14), where cluster.exclude_slow = false keeps it in the job (by default it leaves). cluster.slowdown_from makes the cluster change during the run: rank 1 is 50x
# slower from the start (left out), rank 0 becomes 200x slower from step 10; the rebalancer
# must then hand rank 1 samples again, the losses staying those of one process. Without
# rank 0's slowdown in the run, rank 1 stays out (the control). The emulated slowdown starts
# exactly at its step on bsp, 1F1B pipelines and gossip (read from --trace), and bad
# cluster.slowdown_from settings exit 2 naming the key.
# tests/run: alone (the rebalancer's moves come from measured step times)
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"

cat >"$TMP/job.cfg" <<'CFG'
model = { hidden = [32, 24]; activation = "relu"; };
data = { kind = "synthetic"; samples = 1200; features = 16; classes = 4; seed = 3; };
train = { batch = 9; steps = 22; seed = 7; };
optim = { type = "sgd"; lr = 0.05; momentum = 0.9; };
log = { every = 1; progress = "none"; };
CFG

run_ht -c "$TMP/job.cfg" -q --set log.metrics="$TMP/one.jsonl"
ok $RC "one process: reference run"
losses "$TMP/one.jsonl" >"$TMP/one.loss"

# bb NAME FROM: 2 ranks, split by speed with rebalancing, slowdowns 200 and 50 from steps FROM
bb() {
    mpirun_ht 2 "$HETTRAIN" -c "$TMP/job.cfg" --set log.metrics="$TMP/$1.jsonl" \
        --set cluster.split=speed --set 'cluster.slowdown=[200, 50]' --set cluster.exclude_slow=false \
        --set "cluster.slowdown_from=$2" >"$TMP/$1.out" 2>"$TMP/$1.err"
    RC=$?
    [ $RC -eq 0 ] || diag "$(tail -5 "$TMP/$1.err")"
    losses "$TMP/$1.jsonl" >"$TMP/$1.loss" 2>/dev/null
}

bb back '[10, 0]'
[ $RC -eq 0 ] && same_losses "$TMP/one.loss" "$TMP/back.loss" 22 1e-5
ok $? "rank 1 left out, rank 0 slowed from step 10: exit 0, the 1-process losses within 1e-5"
grep -Eq 'rank 1 \([0-9]+ samples/s \+ [0-9.]+ ms per step\) left out: share 0' "$TMP/back.err" &&
    grep -Eq 'rank 0 .* share 9 .*slowdown x200 \(emulated\) from step 10' "$TMP/back.err"
ok $? "start-up: rank 1 left out; the rank table says rank 0's slowdown starts at step 10"
# the records of step s carry the factor of step s - 1 (the last one run)
/usr/bin/python3 - "$TMP/back.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
rank = {(r["step"], r["rank"]): r for r in recs if r["type"] == "rank"}
for s in range(1, 23):
    assert rank[(s, 0)]["slowdown"] == (200 if s > 10 else 1), rank[(s, 0)]
    assert rank[(s, 1)]["slowdown"] == 50, rank[(s, 1)]
    if s <= 10:
        assert rank[(s, 1)]["share"] == 0, rank[(s, 1)]
back = [r for r in recs if r["type"] == "rebalance" and r["from"].split(",")[1] == "0"
        and int(r["to"].split(",")[1]) > 0]
assert back, "rank 1 never brought back"
assert back[0]["step"] > 10, back[0]
# judged by the emulated cluster, not the rebalancer's prediction: from step 10 a step takes
# max(200 (a + b s0), 50 (a + b s1)) (same device, a >= 0 fixed, b > 0 per sample); from
# (9, 0), any split (x, 9 - x) with x < 9 is strictly faster whatever a and b are:
# 200 (a + b x) < 200 (a + 9 b) and 50 (a + b (9 - x)) < 200 (a + 9 b)
to = [int(x) for x in back[0]["to"].split(",")]
assert back[0]["from"] == "9,0" and sum(to) == 9 and 0 < to[1] and to[0] < 9, back[0]
s = back[0]["step"] + 1
assert rank[(s, 1)]["share"] > 0 and rank[(s, 1)]["state"] == "trains", rank[(s, 1)]
print("# rank 1 brought back after step %d: shares %s" % (back[0]["step"], back[0]["to"]))
PY
ok $? "rank 1 back in after rank 0 slowed (not before): a rebalance record moving samples from rank 0 to it (faster for the emulated slowdowns whatever the costs), its next rank record trains"
grep -Eq 'step [0-9]+: rank 1 \([0-9]+ samples/s \+ [0-9.]+ ms per step\) brought back' "$TMP/back.err"
ok $? "one log line says rank 1 was brought back, with its model's numbers"
grep 'step [0-9]*: ' "$TMP/back.err" | sed 's/^/# /'

bb ctl '[1000, 0]'
[ $RC -eq 0 ] && same_losses "$TMP/one.loss" "$TMP/ctl.loss" 22 1e-5 &&
    [ "$(grep -c '"type":"rank","step":[0-9]*,"rank":1,.*"share":0,' "$TMP/ctl.jsonl")" -eq 22 ]
ok $? "control: rank 0 not slowed within the run (from step 1000): rank 1 stays out at every step"

# tr NAME NP EXTRA...: 8 steps, the last rank 3x slower from step 5; prints the steps of the
# "slowdown (emulated)" spans of each rank in the trace as "rank:step ..."
tr() {
    local name=$1 np=$2 sl fr
    shift 2
    sl=$([ "$np" -eq 2 ] && echo '[1, 3]' || echo '[1, 3, 1]')
    fr=$([ "$np" -eq 2 ] && echo '[0, 5]' || echo '[0, 5, 0]')
    mpirun_ht "$np" "$HETTRAIN" -c "$TMP/job.cfg" -q --set train.steps=8 --set "cluster.slowdown=$sl" \
        --set "cluster.slowdown_from=$fr" --trace "$TMP/$name.json" "$@" >/dev/null 2>"$TMP/$name.err" ||
        diag "$(tail -3 "$TMP/$name.err")"
    /usr/bin/python3 -c '
import json, sys
x = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
print(" ".join("%d:%d" % k for k in sorted({(e["pid"], e["args"]["step"]) for e in x
                                           if e["name"] == "slowdown (emulated)"})))' "$TMP/$name.json"
}
got=$(tr bsp 2)
[ "$got" = "1:5 1:6 1:7" ]; ok $? "bsp: rank 1 idles for its slowdown at steps 5-7 only ($got)"
got=$(tr pipe 2 --set pipe.stages=2 --set pipe.schedule=1f1b --set pipe.micro_batches=3)
[ "$got" = "1:5 1:6 1:7" ]; ok $? "1F1B pipeline: stage 1's rank at steps 5-7 only ($got)"
# gossip: ranks 0 and 1 work, rank 2 coordinates; a worker's steps are its own local steps.
# The 8 steps' samples are shared by the workers as they come: in CI a starved worker 1 ran
# fewer than 5 local steps of them, so gossip gets 30 steps' samples (about 30 local steps each)
got=$(tr gossip 3 --set sync.mode=gossip --set train.steps=30)
[ -n "$got" ] && printf '%s\n' $got | awk -F: '$1 != 1 || $2 < 5 { bad = 1 } END { exit bad }' &&
    printf '%s\n' $got | grep -qx '1:5'
ok $? "gossip: worker 1 from its local step 5 on only ($got)"

{ cat "$TMP/job.cfg"; echo 'cluster = { slowdown_from = [0, 3]; };'; } >"$TMP/nos.cfg"
expect_fail 2 "nos.cfg:[0-9]+: key 'cluster.slowdown_from': found 2 values, expected none without cluster.slowdown" \
    "slowdown_from without slowdown: exit 2 with file:line" -- -c "$TMP/nos.cfg" -q
sed -i 's/^log = .*/&\ncluster = { slowdown_from = [0, -1]; slowdown = [1, 2]; };/' "$TMP/job.cfg"
expect_fail 2 "job.cfg:[0-9]+: key 'cluster.slowdown_from\[1\]': found -1, expected an integer >= 0" "a negative step: exit 2 with file:line" -- \
    -c "$TMP/job.cfg" -q
sed -i 's/slowdown_from = \[0, -1\]/slowdown_from = [0, 1, 2]/' "$TMP/job.cfg"
mpirun_ht 2 "$HETTRAIN" -c "$TMP/job.cfg" -q >/dev/null 2>"$TMP/n.err"
rc=$?
[ $rc -eq 2 ] && grep -Eq "job.cfg:[0-9]+: key 'cluster.slowdown_from': found 3 values, expected 2 \(one per rank\)" "$TMP/n.err"
ok $? "3 values for 2 ranks: exit 2 with file:line ($rc)"
[ $rc -eq 2 ] || diag "$(cat "$TMP/n.err")"
done_testing
