#!/usr/bin/env bash
# The sync policies under mpirun (src/sync), 4 workers plus their server/coordinator rank(s),
# worker 3 slowed down 10x (emulated): every policy finishes cleanly with no lost or doubly
# applied update (the samples the workers trained on are exactly the samples the server or
# coordinator counted; each asp/ssp push is one update; push-sum weight is conserved); SSP
# never lets a worker run more than s clocks ahead (from the workers' own records); preduce
# with P = all workers gives bsp's parameters; SAP weights are the closed form of the timestamps; bad
# combinations exit 2. Gossip never waits for a peer: with one worker frozen, the others train on.
# tests/run: alone (ssp's waits, asp's spread and dasp's states come from the workers' timing)
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"

cat >"$TMP/job.cfg" <<'CFG'
model = { hidden = [32, 24]; activation = "relu"; };
data = { kind = "synthetic"; samples = 1200; features = 16; classes = 4; seed = 3; };
train = { batch = 32; steps = 40; seed = 7; };
optim = { type = "sgd"; lr = 0.05; momentum = 0.9; };
log = { every = 5; progress = "none"; };
CFG
# field RECORD_FILE RANK KEY: KEY of rank RANK's "sync" record
field() { grep '"type":"sync"' "$1" | grep "\"rank\":$2," | sed -nE "s/.*\"$3\":([0-9.e+-]+).*/\1/p"; }
# sum over the workers 0..3
wsum() { local t=0; for r in 0 1 2 3; do t=$((t + $(field "$1" $r "$2"))); done; echo $t; }

# sy NAME NP MODE ARGS...: the job under mpirun, metrics NAME.jsonl, decision log NAME.log
sy() {
    local name=$1 np=$2 mode=$3
    shift 3
    MPI_TIMEOUT=300 mpirun_ht "$np" "$HETTRAIN" -c "$TMP/job.cfg" --set sync.mode="$mode" \
        --set log.metrics="$TMP/$name.jsonl" --set sync.log="$TMP/$name.log" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
    RC=$?
    [ $RC -eq 0 ] || [ -n "${EXPECT_FAIL:-}" ] || diag "$(tail -5 "$TMP/$name.err")"
}

for mode in asp ssp dasp preduce sap-reduce gossip gossip-fixed gossip-adaptive; do
    sy "$mode" 5 "$mode" --set 'cluster.slowdown=[1, 1, 1, 10, 1]' --set sync.staleness=2
    [ $RC -eq 0 ] && grep -q '^final:' "$TMP/$mode.out" &&
        [ "$(grep -c '"type":"sync"' "$TMP/$mode.jsonl")" -eq 5 ]
    ok $? "$mode: 4 workers with one 10x slower finish cleanly; a sync record per rank"
    ws=$(wsum "$TMP/$mode.jsonl" samples)
    xs=$(field "$TMP/$mode.jsonl" 4 samples)
    [ -n "$ws" ] && [ "$ws" = "$xs" ] && [ "$ws" -ge 1280 ]
    ok $? "$mode: the workers trained on $ws samples, the rank that counts saw $xs (budget 1280)"
    grep '"type":"sync"' "$TMP/$mode.jsonl" | grep '"rank":3,' | grep -q '"bytes_sent":[1-9]'
    ok $? "$mode: bytes and wait time per rank in the metrics"
done
for mode in asp ssp; do
    [ -n "$(field "$TMP/$mode.jsonl" 4 steps)" ] &&
        [ "$(wsum "$TMP/$mode.jsonl" steps)" = "$(field "$TMP/$mode.jsonl" 4 steps)" ]
    ok $? "$mode: every push is applied exactly once ($(field "$TMP/$mode.jsonl" 4 steps) updates)"
done
[ "$(field "$TMP/dasp.jsonl" 4 steps)" -le "$(wsum "$TMP/dasp.jsonl" steps)" ]
ok $? "dasp: no more updates than pushes (SYNC groups average theirs into one)"
# the total weight W as the run logged it (%.9g of a float sum: 4 can read 3.99999976), within
# the 1e-4 W the trainer itself enforces
weights_sum() {
    local w
    w=$(sed -nE "s/.*push-sum weights sum to ([0-9.e+-]+) over $2 workers.*/\1/p" "$1" | head -1)
    [ -n "$w" ] && awk -v w="$w" -v n="$2" 'BEGIN { d = w - n; if (d < 0) d = -d; exit !(d <= 1e-4 * n) }'
}
for mode in gossip gossip-fixed gossip-adaptive; do
    weights_sum "$TMP/$mode.err" 4
    ok $? "$mode: the push-sum weights still sum to 4 (no model message lost or merged twice)"
    # the same target for every gossip (chance is 25%; measured 73-77% on 2026-11-28)
    acc=$(sed -nE 's/^final:.*val_acc ([0-9.]+)%.*/\1/p' "$TMP/$mode.out")
    awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 60) }'
    ok $? "$mode: validation accuracy ${acc:-?}% >= 60% with the 10x slower worker"
done
# gossip-fixed exchanges every sync.period steps, blocking (the seed's baseline): each
# worker started exactly floor(steps / period) exchanges, from its own sync record, with
# period 3 and the 10x slower worker (the withdrawn first version deadlocked on this job)
sy gfix3 5 gossip-fixed --set 'cluster.slowdown=[1, 1, 1, 10, 1]' --set sync.period=3
bad=
for r in 0 1 2 3; do
    st=$(field "$TMP/gfix3.jsonl" $r steps) ex=$(field "$TMP/gfix3.jsonl" $r exchanges)
    [ -n "$st" ] && [ -n "$ex" ] && [ "$ex" -eq $((st / 3)) ] && [ "$st" -ge 3 ] || bad="$bad w$r:$st/$ex"
done
[ $RC -eq 0 ] && [ -z "$bad" ] && weights_sum "$TMP/gfix3.err" 4
ok $? "gossip-fixed, period 3: every worker's exchanges = steps / 3, weights conserved (exit $RC${bad:+;$bad})"
# No byte comparison of gossip-adaptive against gossip here: on this job both are limited by
# the model send still in flight (a rendezvous-size message completes when its peer takes it),
# not by their rules, so which sends fewer is decided by scheduling. Measured on an idle
# machine, 167 steps each, with the posted receive gossip uses since 2026-11-28: adaptive
# 82,800-187,488 bytes (thresholds 0.01-0.1), gossip 88,616; this check failed 2 runs in 3.
# The adaptive rule itself is tested exactly (t_sync: ht_gossip_due); the traffic against a
# fixed-period gossip baseline is issue 26's measurement.
# push-sum never waits for a peer, checked by events, not speeds: worker 3 frozen (SIGSTOP)
# from the first logged step, the other workers train on, 100 global steps past the freeze
# (over 130 local steps of 8 samples each), while their models sent to it stay in flight
# (this model's 5.7 KB send is rendezvous-size: it completes only when worker 3 takes it).
# With the wait for the last send before the next exchange (as before 2026-11-26) every
# worker was stuck within a matching cycle: 15 and 20 global steps past the freeze, tried
# here. The speed ratio this replaces (fast workers at least 2x the 10x slower one's steps)
# failed on a loaded CI machine. The freeze waits for logged step 40 (past the start).
# It also caught a wait that is now gone: a worker found worker 3's model message by probe and
# then received it with a blocking receive, which a stopped sender never completed (the others
# stood still, 3 of 10 runs of gossip-adaptive); a worker now tests a posted receive.
tree_of() { local c; for c in $(pgrep -P "$1"); do echo "$c"; tree_of "$c"; done; }
last_step() { grep '"type":"train"' "$1" 2>/dev/null | tail -1 | sed -nE 's/.*"step":([0-9]+),.*/\1/p'; }
for mode in gossip gossip-adaptive; do
    rm -f "$TMP/fz.jsonl"
    MPI_TIMEOUT=300 mpirun_ht 5 "$HETTRAIN" -c "$TMP/job.cfg" --set sync.mode=$mode \
        --set train.steps=100000 --set log.every=1 --set log.metrics="$TMP/fz.jsonl" \
        >"$TMP/fz.out" 2>"$TMP/fz.err" &
    job=$! w3= at= reached=
    for _ in $(seq 1000); do # worker 3's pid (this job's), then its first logged step
        for p in $(tree_of $job); do
            [ "$(cat /proc/"$p"/comm 2>/dev/null)" = hettrain ] &&
                tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=3 && w3=$p
        done
        [ -n "$w3" ] || ! kill -0 $job 2>/dev/null && break
        sleep 0.02
    done
    for _ in $(seq 1000); do [ "$(last_step "$TMP/fz.jsonl")" -ge 40 ] 2>/dev/null || ! kill -0 $job 2>/dev/null && break; sleep 0.01; done
    if [ -n "$w3" ] && kill -STOP "$w3"; then
        at=$(last_step "$TMP/fz.jsonl")
        # no speed asserted: 1200 polls (at least 2 minutes) only bound a wait that never ends
        for _ in $(seq 1200); do
            s=$(last_step "$TMP/fz.jsonl")
            [ -n "$s" ] && [ "$s" -ge $((at + 100)) ] && { reached=$s; break; }
            sleep 0.1
        done
        kill -CONT "$w3"
    fi
    kill -TERM $(tree_of $job) 2>/dev/null # ends the job (exit 75 when the ranks stop)
    wait $job
    [ -n "$reached" ]
    ok $? "$mode: worker 3 frozen from step ${at:-?}, the others trained on to step ${reached:-$(last_step "$TMP/fz.jsonl")} (at least $((${at:-0} + 100)))"
    [ -n "$reached" ] || diag "worker 3: pid ${w3:-not found}" "$(tail -3 "$TMP/fz.err")"
done

# SSP (s = 2), from the workers' own records (<sync.log>.w<rank>: each push's clock c, when it
# left and when its reply came), not the server's: a worker that goes on to clock c + 1 may
# do so only once every other worker has pushed clock c - 2, so that push left before the
# reply came (one machine, one monotonic clock: an order of events, not a timing). And the
# bound did hold some worker back: another worker's push of c - 2 left after its own push of
# c (else this would prove nothing). The asp run, which waits for nobody, must break the same
# rule (the check can fail).
ssp_check() {
    /usr/bin/python3 - "$1" 4 2 <<'PY'
import json, sys
base, W, s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rec = {w: {} for w in range(W)}
for w in range(W):
    for l in open("%s.w%d" % (base, w)):
        r = json.loads(l)
        rec[w][r["clock"]] = r
bad, held, n = [], 0, 0
for w in range(W):
    for c, r in rec[w].items():
        if r["stop"] or c - s < 0:
            continue  # the run's end releases everybody; the first s clocks need nobody
        n += 1
        for v in range(W):
            if v == w:
                continue
            p = rec[v].get(c - s)
            if p is None or p["t_push"] > r["t_reply"]:
                bad.append((w, c, v))
            elif p["t_push"] > r["t_push"]:
                held += 1
print("# %d releases checked, %d breaches of the bound %s, %d waits the bound caused" %
      (n, len(bad), bad[:3], held))
sys.exit(3 if bad else 0 if n and held else 1)  # 3: the bound was broken
PY
}
ssp_check "$TMP/ssp.log"
ok $? "ssp (s = 2), from the workers' records: no worker started a clock more than 2 ahead of another; the bound held workers back"
ssp_check "$TMP/asp.log" >/dev/null
[ $? -eq 3 ]
ok $? "control: the same check finds asp's workers more than 2 clocks apart"

/usr/bin/python3 - "$TMP/dasp.log" <<'PY'
import json, sys
asg = [json.loads(l) for l in open(sys.argv[1]) if '"assign"' in l]
for a in asg[:3] + asg[-2:]:
    print("# v%d states %s groups %s tau_ms %s" % (a["version"], a["states"], a["groups"], a["tau_ms"]))
sys.exit(0 if asg and all(a["states"].split(",")[3] == "async" for a in asg[1:]) else 1)
PY
ok $? "dasp: states re-evaluated as training goes; the 10x slower worker is always ASYNC"

/usr/bin/python3 - "$TMP/preduce.log" <<'PY'
import json, sys
gs = [json.loads(l) for l in open(sys.argv[1]) if '"group"' in l and '"members"' in l]
sizes = [len(g["members"].split(",")) for g in gs]
print("# %d groups: %d of 2, %d of 4 (global), %d alone (deadline)" % (len(gs), sizes.count(2), sizes.count(4), sizes.count(1)))
sys.exit(0 if sizes.count(2) and sizes.count(4) else 1)
PY
ok $? "preduce (P = 2, every 10th group global): pairs and global groups of all 4 formed"

# sap-reduce, against the policy's contract (src/sync/rules.h, preduce.c), not its own
# numbers: each group's weights are the closed form of its timestamps (staleness
# s_i = max t - t_i + 1, level k of mass a^(k-1) (1 - a), a = sync.alpha = 0.9, empty levels'
# mass to level 1, split equally within a level, over 1 - a^T), recomputed here; they sum to
# 1, equal timestamps give 1/P, and in a group with unequal timestamps (the 10x slower
# worker) the stalest members together weigh strictly less than the freshest together (a
# single stale member may outweigh each of two fresh ones: level 1's mass is split). A worker's timestamp is
# raised to its group's largest: the next one it reports is that plus 1 (one local step).
/usr/bin/python3 - "$TMP/sap-reduce.log" <<'PY'
import json, sys
a = 0.9
def sap(t):
    st = [max(t) - x + 1 for x in t]
    T = max(st)
    mass = {k: a ** (k - 1) * (1 - a) for k in range(1, T + 1)}
    for k in range(2, T + 1):
        if k not in st:
            mass[1] += mass.pop(k)
    return [mass[x] / st.count(x) / (1 - a ** T) if T > 1 else 1.0 / len(t) for x in st]
gs = [json.loads(l) for l in open(sys.argv[1]) if '"group"' in l and '"members"' in l]
bad, skew, last = [], 0, {}
for g in gs:
    m = [int(x) for x in str(g["members"]).split(",")]
    t = [int(x) for x in str(g["timestamps"]).split(",")]
    w = [float(x) for x in str(g["weights"]).split(",")]
    want = sap(t)
    if abs(sum(w) - 1) > 1e-5 or any(abs(x - y) > 1e-5 * max(y, 1e-3) for x, y in zip(w, want)):
        bad.append(("weights", g["group"], t, w, want))
    if len(set(t)) > 1:
        skew += 1
        level = lambda x: sum(wi for ti, wi in zip(t, w) if ti == x)
        if not level(min(t)) < level(max(t)):
            bad.append(("stalest level not lighter", g["group"], t, w))
    for k, x in zip(m, t):
        if k in last and x != last[k] + 1:
            bad.append(("timestamp not raised", k, last[k], x))
    if len(m) > 1:
        for k in m:
            last[k] = max(t)
    else:
        last[m[0]] = t[0]
print("# %d groups, %d with unequal timestamps; %d breaches %s" % (len(gs), skew, len(bad), bad[:2]))
sys.exit(0 if gs and skew and not bad else 1)
PY
ok $? "sap-reduce: every group's weights are the closed form of its timestamps (sum 1, the stalest level lighter in the skewed groups); timestamps raised to the group's largest"

# preduce with P = all workers, no deadline: every step is a global model average, which for
# SGD with momentum is exactly bsp's update (the same batches: each worker takes its bsp slice)
mpirun_ht 4 "$HETTRAIN" -c "$TMP/job.cfg" -q --set train.steps=6 \
    --set checkpoint.path="$TMP/bsp.ckpt" >/dev/null 2>"$TMP/bsp.err"
rc1=$?
sy pall 5 preduce -q --set train.steps=6 --set sync.group=4 --set sync.deadline_ms=0 \
    --set checkpoint.path="$TMP/pall.ckpt"
if [ $rc1 -eq 0 ] && [ $RC -eq 0 ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    /usr/bin/python3 - "$TMP/bsp.ckpt" "$TMP/pall.ckpt" <<'PY'
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32)
            for k, v in h.items() if k != "__metadata__" and not k.startswith(("optim", "sync."))}
a, b = load(sys.argv[1]), load(sys.argv[2])
worst = max(float(np.max(np.abs(a[k] - b[k]))) for k in a)
print("# max |bsp - preduce(P=4)| after 6 steps: %.3g over %d tensors" % (worst, len(a)))
sys.exit(0 if set(a) == set(b) and worst < 1e-5 else 1)
PY
    ok $? "preduce with P = 4 of 4 workers: bsp's parameters after 6 steps (within 1e-5)"
else
    [ $rc1 -eq 0 ] && [ $RC -eq 0 ]
    ok $? "preduce with P = all and bsp both ran"
    echo "ok $((T_N += 1)) # SKIP numpy not installed for /usr/bin/python3"
fi

# two parameter servers, each with its own contiguous shard
sy ps2 6 asp -q --set sync.servers=2
[ $RC -eq 0 ] && [ -n "$(field "$TMP/ps2.jsonl" 4 samples)" ] &&
    [ "$(field "$TMP/ps2.jsonl" 4 samples)" = "$(wsum "$TMP/ps2.jsonl" samples)" ] &&
    [ "$(field "$TMP/ps2.jsonl" 5 samples)" = "$(wsum "$TMP/ps2.jsonl" samples)" ]
ok $? "asp with 2 parameter servers: both shards saw every push"

# other worker counts: 3 gossip workers (odd: one sits out each round), a lone worker
sy g3 4 gossip-adaptive --set 'cluster.slowdown=[1, 1, 3, 1]'
[ $RC -eq 0 ] && weights_sum "$TMP/g3.err" 3
ok $? "gossip-adaptive with 3 workers: finishes, weights conserved"
for mode in ssp sap-reduce; do
    sy "one-$mode" 2 "$mode" -q
    [ $RC -eq 0 ] && grep -q '^final:' "$TMP/one-$mode.out"
    ok $? "$mode with a single worker (2 ranks) finishes"
done

# bad combinations: exit 2 naming the config
expect_fail 2 "sync.mode.*asp.*at least 2 ranks" "asp without mpirun: exit 2, needs a server rank" \
    -- -c "$TMP/job.cfg" --set sync.mode=asp
EXPECT_FAIL=1 sy shares 3 ssp -q --set 'cluster.shares=[10, 11, 11]'
[ $RC -ne 0 ] && grep -q "cluster.shares.*bsp" "$TMP/shares.err"
ok $? "ssp with cluster.shares: refused, naming the key"
sy stop 2 ssp --stop-after 3
[ $RC -eq 0 ] && grep -q "stopped at step 3 of 40" "$TMP/stop.err"
ok $? "ssp with --stop-after 3: stops at step 3 (tests/integration/sync_resume.t: checkpoints and resume)"
expect_fail 2 "sync.mode.*expected one of" "an unknown sync.mode: exit 2 with the choices" \
    -- -c "$TMP/job.cfg" --set sync.mode=ring
# the shipped examples parse and validate (without mpirun they stop at the world-size check)
for f in conf/sync-*.cfg; do
    expect_fail 2 "cfg:6: key 'cluster.slowdown': found 5 values, expected 1 \(one per rank\)" \
        "$f is a valid job for 5 ranks" -- -c "$f"
done
done_testing
