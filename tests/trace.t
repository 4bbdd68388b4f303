#!/usr/bin/env bash
# --trace FILE: a Chrome trace-event file (JSON) with one track per rank, named "rank r (host,
# device)", and complete events in microseconds for the batch upload, forward, backward,
# optimizer step and evaluation, plus wait and all-reduce (and the emulated slowdown) under
# mpirun; rank 0 gathers every rank's events and writes one file. One process works too; a
# trace that cannot be written is an error.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/mpi.sh"

cat >"$TMP/job.cfg" <<'CFG'
model = { hidden = [32, 24]; activation = "relu"; };
data = { kind = "synthetic"; samples = 600; features = 16; classes = 4; seed = 3; };
train = { batch = 16; steps = 6; seed = 7; eval_every = 3; };
optim = { type = "sgd"; lr = 0.05; };
log = { every = 2; progress = "none"; };
CFG

# check FILE RANKS[/TRACKS] NAMES...: valid JSON; a process_name "rank r (...)" for each of the
# TRACKS (default RANKS) ranks; for each rank 0..RANKS-1
# and at least one "X" event named NAME or NAME... (e.g. "backward + reduce", "all-reduce bucket
# 2") of each NAME (rank 0 only for "evaluate"); ts/dur numbers >= 0
check() {
    /usr/bin/python3 - "$@" <<'PY'
import json, sys
path, names = sys.argv[1], sys.argv[3:]
ranks, tracks = (int(x) for x in (sys.argv[2] + "/" + sys.argv[2]).split("/")[:2])
ev = json.load(open(path))["traceEvents"]
meta = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
assert sorted(meta) == list(range(tracks)), meta
for r, label in meta.items():
    assert label.startswith("rank %d (" % r), label
x = [e for e in ev if e["ph"] == "X"]
assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in x)
for r in range(ranks):
    have = {e["name"] for e in x if e["pid"] == r}
    for n in names:
        if n == "evaluate" and r > 0:
            continue
        assert any(h.startswith(n) for h in have), (r, n, sorted(have))
PY
}

run_ht -c "$TMP/job.cfg" -q --trace "$TMP/one.json"
ok $RC "one process --trace: exit 0"
check "$TMP/one.json" 1 batch forward backward "optimizer step" evaluate 2>"$TMP/one.py"
ok $? "one process: valid JSON, one named track, forward/backward/optimizer/evaluate events"
[ -s "$TMP/one.py" ] && diag "$(cat "$TMP/one.py")"
[ -z "$(ls "$TMP" | grep '\.tmp\.')" ]; ok $? "no temporary file left beside the trace"

mpirun_ht 2 "$HETTRAIN" -c "$TMP/job.cfg" -q --trace "$TMP/ovl.json" >"$TMP/ovl.out" 2>"$TMP/ovl.err"
RC=$?
ok $RC "2 ranks --trace (bucketed overlap): exit 0"
[ $RC -eq 0 ] || diag "$(tail -5 "$TMP/ovl.err")"
check "$TMP/ovl.json" 2 forward backward "optimizer step" evaluate 2>"$TMP/ovl.py"
ok $? "2 ranks, overlap: one file, a track per rank, forward/backward/optimizer events"
[ -s "$TMP/ovl.py" ] && diag "$(cat "$TMP/ovl.py")"

mpirun_ht 2 "$HETTRAIN" -c "$TMP/job.cfg" -q --trace "$TMP/two.json" --set cluster.overlap=false \
    --set 'cluster.slowdown=[1, 2]' >"$TMP/two.out" 2>"$TMP/two.err"
RC=$?
ok $RC "2 ranks --trace, reduction after backward: exit 0"
[ $RC -eq 0 ] || diag "$(tail -5 "$TMP/two.err")"
check "$TMP/two.json" 2 forward backward wait all-reduce "optimizer step" evaluate 2>"$TMP/two.py"
ok $? "2 ranks, no overlap: forward/backward/wait/all-reduce/optimizer events on both tracks"
[ -s "$TMP/two.py" ] && diag "$(cat "$TMP/two.py")"
/usr/bin/python3 -c '
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
assert any(e["pid"] == 1 and e["name"] == "slowdown (emulated)" for e in ev)
assert not any(e["pid"] == 0 and e["name"] == "slowdown (emulated)" for e in ev)
steps = {e["args"]["step"] for e in ev if e["ph"] == "X" and e["name"] == "forward" and e["pid"] == 1}
assert steps == set(range(6)), steps
' "$TMP/two.json"
ok $? "the slowed rank's emulated idle is on its own track; forward events carry their step"

# the asynchronous policies: workers' compute, exchanges and waits, the server's or
# coordinator's waits and updates, the quiesce and checkpoint at the end of a segment
mpirun_ht 3 "$HETTRAIN" -c "$TMP/job.cfg" -q --trace "$TMP/asp.json" --set sync.mode=asp \
    --set checkpoint.path="$TMP/asp.ckpt" --set checkpoint.every=3 >"$TMP/asp.out" 2>"$TMP/asp.err"
RC=$?
ok $RC "asp, 2 workers + a server, --trace: exit 0"
check "$TMP/asp.json" 3 wait 2>"$TMP/asp.py" &&
    check "$TMP/asp.json" 2/3 "forward + backward" "update + exchange" quiesce checkpoint evaluate 2>>"$TMP/asp.py"
ok $? "asp: a track per rank; workers: forward + backward, update + exchange, quiesce, checkpoint; all: waits"
[ -s "$TMP/asp.py" ] && diag "$(cat "$TMP/asp.py")"
mpirun_ht 3 "$HETTRAIN" -c "$TMP/job.cfg" -q --trace "$TMP/pre.json" --set sync.mode=preduce \
    >"$TMP/pre.out" 2>"$TMP/pre.err"
ok $? "preduce, 2 workers + a generator, --trace: exit 0"
check "$TMP/pre.json" 2/3 "forward + backward" "wait (group)" 2>"$TMP/pre.py"
ok $? "preduce: the workers' waits for their group are on their tracks"
[ -s "$TMP/pre.py" ] && diag "$(cat "$TMP/pre.py")"

expect_fail 2 "--trace .*/nodir/t.json.: folder .*nodir. does not exist" "a trace path in a missing folder fails at start, naming it" -- \
    -c "$TMP/job.cfg" -q --trace "$TMP/nodir/t.json"
expect_fail 2 "--trace: expected a file name" "--trace with an empty name: exit 2" -- \
    -c "$TMP/job.cfg" -q --trace ""
done_testing
