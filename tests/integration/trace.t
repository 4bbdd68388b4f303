#!/usr/bin/env bash
# --trace FILE: a Chrome trace-event file (JSON) with one track per rank, named "rank r (host,
# device)", and complete events in microseconds for the batch upload, forward, backward,
# optimizer step and evaluation, plus wait and all-reduce (and the emulated slowdown) under
# mpirun; rank 0 gathers every rank's events and writes one file. One process works too; a
# trace that cannot be written is an error. --trace-layers adds a span per layer, and
# tools/bench/trace2prof.py re-times a hetprof profile from them.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"

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

# --trace-layers: a span per layer's forward ("fwd fc1+relu1": a fused pair) and backward and
# the loss, each inside its step's "forward" or "backward + reduce" span, once per step; the
# losses are bit for bit those without it (it only finishes the queue after each layer)
run_ht -c "$TMP/job.cfg" -q --trace "$TMP/lay.json" --trace-layers --set log.every=1 \
    --set log.metrics="$TMP/lay.jsonl"
run_ht -c "$TMP/job.cfg" -q --set log.every=1 --set log.metrics="$TMP/nolay.jsonl"
/usr/bin/python3 - "$TMP/lay.json" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
evals = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"] == "evaluate"]
train = [e for e in ev if not any(a <= e["ts"] < b for a, b in evals)]
for step in range(6):
    at = [e for e in train if e["args"].get("step") == step]
    outer = {e["name"]: e for e in at if e["name"] in ("forward", "backward + reduce")}
    names = sorted(e["name"] for e in at if e["name"][:4] in ("fwd ", "bwd ", "loss"))
    assert names == ["bwd fc1+relu1", "bwd fc2+relu2", "bwd fc3", "fwd fc1+relu1",
                     "fwd fc2+relu2", "fwd fc3", "loss"], names
    for e in at:
        if e["name"][:4] in ("fwd ", "bwd ", "loss"):
            o = outer["backward + reduce" if e["name"].startswith("bwd") else "forward"]
            assert o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"] + 1, (e, o)
PY
ok $? "--trace-layers: fwd/bwd of fc1+relu1, fc2+relu2 (fused pairs), fc3 and the loss once per step, inside its forward or backward span"
losses "$TMP/lay.jsonl" >"$TMP/lay.loss"
losses "$TMP/nolay.jsonl" >"$TMP/nolay.loss"
[ -s "$TMP/lay.loss" ] && cmp -s "$TMP/lay.loss" "$TMP/nolay.loss"
ok $? "--trace-layers: the losses bit for bit those without it"
# tools/bench/trace2prof.py: a hetprof profile re-timed from that run at its batch (16): each
# layer group's entries (fc1 with relu1) sum to the median of its spans in steps 2..5, and
# the samples/s at 16 is 16 / the sum of the entries; hetprof --check accepts the result
"$HT_BUILD/hetprof" --quick -c "$TMP/job.cfg" --batch 16 -o "$TMP/p.cfg" >/dev/null 2>&1
/usr/bin/python3 "$(dirname "$0")/../../tools/bench/trace2prof.py" "$TMP/lay.json" "$TMP/p.cfg" 16 \
    -o "$TMP/pt.cfg" >/dev/null && "$HT_BUILD/hetprof" --check "$TMP/pt.cfg" >/dev/null &&
/usr/bin/python3 - "$TMP/lay.json" "$TMP/pt.cfg" <<'PY'
import json, re, statistics, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
evals = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"] == "evaluate"]
med = lambda n: statistics.median(e["dur"] / 1e3 for e in ev if e["name"] == n
                                  and e["args"].get("step", -1) >= 2
                                  and not any(a <= e["ts"] < b for a, b in evals))
t = open(sys.argv[2]).read()
ent = {m[0]: (float(m[1]), float(m[2])) for m in
       re.findall(r'name = "(\w+)"; batch = 16; fwd_ms = ([0-9.e+-]+); bwd_ms = ([0-9.e+-]+);', t)}
near = lambda a, b: abs(a - b) <= 1e-5 * b + 1e-9
for k, (p, q) in {"fwd": (0, None), "bwd": (1, None)}.items():
    assert near(ent["fc1"][p] + ent["relu1"][p], med(k + " fc1+relu1")), k
    assert near(ent["fc2"][p] + ent["relu2"][p], med(k + " fc2+relu2")), k
    assert near(ent["fc3"][p], med(k + " fc3")), k
assert near(ent["loss"][0], med("loss"))
rate = float(re.search(r'\{ batch = 16; value = ([0-9.e+-]+); \}', t).group(1))
assert near(rate, 16e3 / sum(a + b for a, b in ent.values())), rate
PY
ok $? "trace2prof.py: the profile's layers at batch 16 are the run's median spans, its samples/s their sum"
expect_fail 2 "--trace-layers: needs --trace" "--trace-layers without --trace: exit 2" -- \
    -c "$TMP/job.cfg" -q --trace-layers

expect_fail 2 "--trace .*/nodir/t.json.: folder .*nodir. does not exist" "a trace path in a missing folder fails at start, naming it" -- \
    -c "$TMP/job.cfg" -q --trace "$TMP/nodir/t.json"
expect_fail 2 "--trace: expected a file name" "--trace with an empty name: exit 2" -- \
    -c "$TMP/job.cfg" -q --trace ""
done_testing
