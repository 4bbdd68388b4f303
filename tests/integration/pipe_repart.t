#!/usr/bin/env bash
# Online re-partitioning of a pipeline (issue 11, pipe.rebalance; the rule: src/plan/repart.h,
# tested by t_repart): the GPT on 2 ranks with the "hetero" cut, rank 0 2x slower throughout
# and rank 1 6x slower from step 10 (cluster.slowdown_from), so that the start-up cut gives
# rank 1 most layers and they should move to rank 0 after step 10. The cut must move layers
# off rank 1 (a "pipe_repartition" record, the new cut logged), having measured rank 1 slower
# than rank 0 against their start-up times (3x is emulated; the first move comes 2-4 steps
# into the slowdown, when the measured factor is 1.3-4x). The layers move with their optimizer state,
# and a layer's arithmetic does not depend on the rank that runs it: the losses and the final
# checkpoint are bit for bit those of the same run with pipe.rebalance = false, whose cut
# stays, and whose losses are the one-process run's within 2e-5 (micro-batches sum the
# gradient in another order). With a memory limit the recomputation is decided again for the
# new cut, within the limit, and the result is still bit for bit the same. So it is with 2
# data-parallel replicas of the pipeline (4 ranks). Every rank holds only its stage (issue
# 24): a move allocates the new window, receives what arrives and frees what left, and the
# measured peak after it is the plan's for the new stage (stage_mem).
# tests/run: alone (the re-partition comes from measured step times)
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
. "$(dirname "$0")/../lib/pipe_gpt.sh"
need_text
command -v mpirun >/dev/null || { echo "1..0 # SKIP mpirun not found"; exit 0; }

gpt_job 30 0

one_process || diag "one process: $(tail -3 "$TMP/one.err")"

# pp NAME SCHEDULE ARGS: 2 ranks, hetero cut, rank 0 2x slower, rank 1 6x from step 10
# (NP=4: 2 data-parallel replicas of the pipeline, their ranks slowed alike)
pp() {
    local name=$1 sched=$2 np=${NP:-2} slow="2.0,6.0" from="0,10"
    shift 2
    [ "$np" = 4 ] && slow="$slow,$slow" from="$from,$from"
    mpirun_ht "$np" "$HETTRAIN" -c "$TMP/gpt.cfg" --set pipe.schedule="$sched" --set pipe.stages=2 \
        --set pipe.micro_batches=2 --set pipe.partition=hetero \
        --set "cluster.slowdown=[$slow]" --set "cluster.slowdown_from=[$from]" \
        --set log.metrics="$TMP/$name.jsonl" --set checkpoint.path="$TMP/$name.ckpt" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
    RC=$?
    [ $RC -eq 0 ] || diag "$(grep -v '^ \|^--\|^$' "$TMP/$name.err" | tail -5)"
    losses "$TMP/$name.jsonl" >"$TMP/$name.loss" 2>/dev/null
}

# moved NAME: "N A B R": the records after step 10; rank 1's layers before and after the
# first of them; rank 1's measured factor over rank 0's then. Exit 0 when that change moved
# layers off rank 1 having measured it slower (a later change may move again, or be undone
# by its trial when the step got no faster: shared cores make that happen now and then)
moved() {
    /usr/bin/python3 - "$TMP/$1.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"pipe_repartition"' in l]
def rank1(cut):  # "0-4 | 5-8" -> 4
    a, b = cut.split(" | ")[1].split("-")
    return int(b) - int(a) + 1
late = [r for r in recs if r["step"] > 10]
if not late:
    print(0, "?", "?", "?"); sys.exit(1)
r = late[0]
k = [float(x) for x in r["factors"].split(",")]
print(len(late), rank1(r["from"]), rank1(r["to"]), "%.2f" % (k[1] / k[0]))
sys.exit(0 if not r["reverted"] and rank1(r["to"]) < rank1(r["from"]) and k[1] > k[0] else 1)
PY
}

# stage_mem NAME: every rank holds only its stage, and after the last re-partition its
# window follows the new cut: the plan's weight + gradient + AdamW bytes for each pipeline
# rank's new stage are 16 B times its layers' parameters counted here from the architecture
# (embedding V C + T C, blocks 12 C^2 + 13 C, final LayerNorm 2 C, head C V + V), and every
# rank's measured peak (the GEMM packing included, which the plan counts too; from the rebuild
# after the move on) is within 10% of the plan for its new stage (a rank that kept the whole
# model would exceed it by the other stage's 16 B per parameter). Prints "rank:held/plan ...".
stage_mem() {
    grep -q "every pipeline rank keeps only its stage" "$TMP/$1.err" || return 1
    /usr/bin/python3 - "$TMP/$1.jsonl" <<'PY'
import json, sys
V, T, C, L = 256, 16, 32, 6
def params(l):
    return V * C + T * C if l == 0 else 12 * C * C + 13 * C if l <= L else 2 * C if l == L + 1 \
        else C * V + V
recs = [json.loads(l) for l in open(sys.argv[1])]
last = max(i for i, r in enumerate(recs) if r["type"] == "pipe_repartition")
cut = [tuple(map(int, s.split("-"))) for s in recs[last]["to"].split(" | ")]
plan = {r["rank"]: r for r in recs[last:] if r["type"] == "pipe_memory"}
ok = len(plan) == len(cut) and all(
    plan[q]["state_bytes"] == 16 * sum(params(l) for l in range(a, b + 1))
    for q, (a, b) in enumerate(cut))
meas = [r for r in recs if r["type"] == "pipe_memory_measured"]
out = []
for m in meas:
    held = m["allocated_peak_bytes"]  # the plan counts the GEMM packing too
    want = plan[m["prank"]]["predicted_bytes"] if m["prank"] in plan else 0
    ok = ok and abs(want - held) <= 0.10 * held
    out.append("%d:%.3f/%.3f" % (m["rank"], held / 1e6, want / 1e6))
print(" ".join(out))
sys.exit(0 if ok and meas else 1)
PY
}

# same A B: the same losses and checkpoint, bit for bit
same() { cmp -s "$TMP/$1.loss" "$TMP/$2.loss" && same_tensors "$TMP/$1.ckpt" "$TMP/$2.ckpt"; }

for s in 1f1b hepipe; do
    pp "$s-off" $s --set pipe.rebalance=false
    [ $RC -eq 0 ] && ! grep -q pipe_repartition "$TMP/$s-off.jsonl" &&
        same_losses "$TMP/one.loss" "$TMP/$s-off.loss" 30 2e-5
    ok $? "$s, pipe.rebalance = false: the start-up cut stays, the one-process losses (exit $RC)"
    pp "$s" $s
    read -r n a b r <<<"$(moved "$s")"
    moved "$s" >/dev/null && same "$s" "$s-off"
    ok $? "$s: $n re-partition(s) after step 10 (rank 1 measured ${r}x rank 0 against its start-up times, > 1), rank 1 from $a to $b layers at the first; the losses and checkpoint of the run without, bit for bit (exit $RC)"
    mem=$(stage_mem "$s")
    ok $? "$s: every rank holds only its stage; after the last move its measured peak is within 10% of the plan for its new stage (MB held/plan: $mem)"
done
grep -q "pipeline re-partitioned, layers .* -> .*: slowest stage predicted" "$TMP/1f1b.err"
ok $? "the new cut is logged with its predicted gain"

# a 5.5 MB limit: rank 0's stage plan is 2.65, 3.72, 4.79, 5.86, 6.93 and 7.00 MB with 3 .. 8
# layers and nothing recomputed (the memory model, validated against allocation by
# pipe_mem.t), so the start-up cut (3-5 layers on rank 0) fits as it is. The move is planned
# within the limit and the recomputation decided again for it: a new cut with 6 or more layers
# on rank 0 must recompute, or the partitioner keeps rank 0 at 5 and nothing is recomputed.
pp m 1f1b --set device.memory_mb=5.5
rcs=$(/usr/bin/python3 - "$TMP/m.jsonl" <<'PY'
import json, sys
seq = [json.loads(l) for l in open(sys.argv[1])]
seq = [r for r in seq if r["type"] in ("pipe_memory", "pipe_repartition")]
first = next((i for i, r in enumerate(seq) if r["type"] == "pipe_repartition"), None)
mem0 = lambda rs: [r for r in rs if r["type"] == "pipe_memory" and r["rank"] == 0]
before, after = (mem0(seq[:first]), mem0(seq[first:])) if first else ([], [])
k = int(seq[first]["to"].split(" | ")[0].split("-")[1]) + 1 if first else 0
ok = before and after and all(r["predicted_bytes"] <= r["limit_bytes"] for r in before + after) \
    and (after[0]["recompute"] != "") == (k >= 6)
print(before[-1]["recompute"] or "none" if before else "?", k,
      after[0]["recompute"] or "none" if after else "?")
sys.exit(0 if ok else 1)
PY
)
rcm=$?
read -r rb k ra <<<"$rcs"
moved m >/dev/null && [ $rcm -eq 0 ] && same m 1f1b-off
ok $? "5.5 MB limit: rank 0 recomputes layers $rb at start-up; after the move it holds $k layers and recomputes $ra, within the limit; bit for bit the run without re-partitioning (exit $RC)"
# 2 data-parallel replicas of the 2-stage pipeline (4 ranks): each replica moves its own layers
NP=4 pp r-off 1f1b --set pipe.rebalance=false
NP=4 pp r 1f1b
read -r n a b r <<<"$(moved r)"
moved r >/dev/null && same r r-off
ok $? "2 replicas x 2 stages: $n re-partition(s) after step 10, rank 1 from $a to $b layers at the first; bit for bit the run without (exit $RC)"
mem=$(stage_mem r)
ok $? "2 replicas x 2 stages: every rank holds only its stage, after the last move within 10% of the plan for its new stage ($mem)"
done_testing
