#!/usr/bin/env bash
# Replicated stages (issue 11): a stage may run on a run of adjacent ranks, each computing its
# share of every micro-batch (HePipe). pipe.replicate lets the hetero partition choose them and
# split by speed; pipe.stage_ranks places them explicitly with equal shares. A boundary
# activation goes in pieces to the ranks of the next stage whose samples overlap, the stage's
# gradients are summed over its ranks, and every sample's dropout mask is the one-process
# run's: so the losses are the one-process run's within 2e-5 (the gradient sums in another
# order) and so is the final checkpoint (gathered from each stage's first rank), whatever the
# placement. The hetero partition's choice follows layer times measured at start-up on shared
# cores, so the explicit placements cover what must be certain: pieces from two ranks to two,
# unaligned pieces and a last stage over three ranks, hepipe, and 2 data-parallel replicas.
# tests/run: alone (the stages' ranks come from the measured speed split)
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
. "$(dirname "$0")/../lib/pipe_gpt.sh"
need_text
command -v mpirun >/dev/null || { echo "1..0 # SKIP mpirun not found"; exit 0; }

gpt_job 20 10

one_process || diag "one process: $(tail -3 "$TMP/one.err")"

# rp NAME NP STAGES SCHEDULE SLOWDOWNS ARGS: the hetero partition with replicas (SLOWDOWNS
# "": none)
rp() {
    local name=$1 np=$2 D=$3 sched=$4 slow=$5
    shift 5
    mpirun_ht "$np" "$HETTRAIN" -c "$TMP/gpt.cfg" --set pipe.schedule="$sched" \
        --set pipe.stages="$D" --set pipe.micro_batches=2 --set pipe.partition=hetero \
        --set pipe.replicate=true ${slow:+--set "cluster.slowdown=$slow"} \
        --set log.metrics="$TMP/$name.jsonl" --set checkpoint.path="$TMP/$name.ckpt" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
    RC=$?
    [ $RC -eq 0 ] || diag "$(grep -v '^ \|^--\|^$' "$TMP/$name.err" | tail -5)"
    losses "$TMP/$name.jsonl" >"$TMP/$name.loss" 2>/dev/null
    # the stage table: "stage 0: rank 0 (5)+1 (7), layers 0-6" -> "0+1:0-6"
    STAGES=$(sed -nE 's/.*  stage [0-9]+: rank ([^,]*), layers ([0-9]+-[0-9]+).*/\1:\2/p' \
        "$TMP/$name.err" | sed -E 's/ \([0-9]+\)//g' | tr '\n' ' ')
}

same() {
    [ $RC -eq 0 ] && same_losses "$TMP/one.loss" "$TMP/$1.loss" 20 2e-5 &&
        same_params "$TMP/one.ckpt" "$TMP/$1.ckpt" 1e-4
}

# the hetero partition's own choice, replicated or not: it follows layer times measured at
# start-up with 3-4 ranks on 2 cores, so which stages it replicates varies from run to run
# (t_partition and hetsim.t check the choice itself on fixed times)
rp a 4 4 1f1b "[1.0,1.0,4.0,1.0]"
grep -q "pipeline partition: [0-9] stages over 4 ranks" "$TMP/a.err" && same a
ok $? "pipe.replicate, 1f1b, 4 ranks, rank 2 4x slower: stages $STAGES; the partition table; the one-process losses and parameters"
rp b 3 3 hepipe "[1.0,1.0,8.0]"
same b
ok $? "pipe.replicate, hepipe, 3 ranks, rank 2 8x slower: stages $STAGES; the one-process losses and parameters"

# the hosts (HePipe's first level), emulated on one machine by cluster.hosts = [0, 0, 1, 1]:
# no stage may hold ranks of both hosts. An MLP heavy enough per sample that, on one host
# with one micro-batch, the partition puts ranks 1-3 (or 1+2) in one stage in most runs
# (three runs: 1+2+3 twice, 1+2 once); with the hosts, 0+1 | 2+3 (three of three)
cat >"$TMP/syn.cfg" <<'CFG'
model = { type = "mlp"; hidden = [256, 256]; };
data = { kind = "synthetic"; samples = 2048; features = 256; classes = 16; };
train = { batch = 64; steps = 10; seed = 3; eval_every = 0; eval_batches = 1; };
optim = { lr = 0.05; };
log = { every = 1; progress = "none"; };
CFG
"$HETTRAIN" -c "$TMP/syn.cfg" -q --set log.metrics="$TMP/syn1.jsonl" >/dev/null 2>&1
losses "$TMP/syn1.jsonl" >"$TMP/syn1.loss"
mpirun_ht 4 "$HETTRAIN" -c "$TMP/syn.cfg" --set pipe.schedule=1f1b --set pipe.stages=4 \
    --set pipe.micro_batches=1 --set pipe.partition=hetero --set pipe.replicate=true \
    --set "cluster.hosts=[0,0,1,1]" --set log.metrics="$TMP/syn4.jsonl" >/dev/null 2>"$TMP/syn4.err"
RC=$?
losses "$TMP/syn4.jsonl" >"$TMP/syn4.loss" 2>/dev/null
st=$(sed -nE 's/.*  stage [0-9]+: rank ([^,]*), layers ([0-9]+-[0-9]+).*/\1/p' "$TMP/syn4.err" |
    sed -E 's/ \([0-9]+\)//g' | tr '\n' ' ')
span=0
for g in $st; do [[ "$g" =~ (^|\+)[01](\+|$) && "$g" =~ (^|\+)[23](\+|$) ]] && span=1; done
[ $RC -eq 0 ] && [ -n "$st" ] && [ $span -eq 0 ] && same_losses "$TMP/syn1.loss" "$TMP/syn4.loss" 10 2e-5
ok $? "cluster.hosts [0,0,1,1]: no stage spans the hosts (stages $st), the one-process losses"

# explicit placements (pipe.stage_ranks, equal shares): what the timings cannot make certain
rp c 4 4 1f1b "" --set pipe.replicate=false --set "pipe.stage_ranks=[2,2]" --set "pipe.boundaries=[5]"
[ "$STAGES" = "0+1:0-4 2+3:5-8 " ] && same c &&
    grep -q "a replicated stage's ranks split each by the samples in brackets" "$TMP/c.err" &&
    grep -q "stage 0: rank 0 (6)+1 (6), layers 0-4" "$TMP/c.err"
ok $? "stages on ranks 0+1 and 2+3 (6 + 6 samples each, pieces from two ranks to two, the stage list says so): $STAGES; the one-process losses and parameters"
rp d 5 5 gpipe "" --set pipe.replicate=false --set "pipe.stage_ranks=[2,3]" --set "pipe.boundaries=[4]" \
    --set pipe.micro_batches=3
[ "$STAGES" = "0+1:0-3 2+3+4:4-8 " ] && same d
ok $? "micro-batches of 8 as 4 + 4 then 3 + 3 + 2 (unaligned pieces, the loss rows split three ways): $STAGES; the one-process losses and parameters"
rp e 3 3 hepipe "" --set pipe.replicate=false --set "pipe.stage_ranks=[1,2]" --set "pipe.boundaries=[3]"
[ "$STAGES" = "0:0-2 1+2:3-8 " ] && same e
ok $? "hepipe, one rank then two: $STAGES; the one-process losses and parameters"
# memory: a replicated stage is planned for its ranks' share of a micro-batch (6 of 12
# samples here): stage 0 (layers 0-4) fits 3.6 MB as it is (3.00 MB predicted at 6 samples,
# its slots' activation gradients and the GEMM packing counted), and under 3.1 MB it
# recomputes; the losses stay the one-process run's
rp m3 4 4 1f1b "" --set pipe.replicate=false --set "pipe.stage_ranks=[2,2]" \
    --set "pipe.boundaries=[5]" --set device.memory_mb=3.6
rc3=$RC
rp m2 4 4 1f1b "" --set pipe.replicate=false --set "pipe.stage_ranks=[2,2]" \
    --set "pipe.boundaries=[5]" --set device.memory_mb=3.1
rcm=$(/usr/bin/python3 - "$TMP/m3.jsonl" "$TMP/m2.jsonl" <<'PY'
import json, sys
def rank0(p):
    r = [json.loads(l) for l in open(p) if '"pipe_memory"' in l]
    return [x for x in r if x["rank"] == 0][0]
a, b = rank0(sys.argv[1]), rank0(sys.argv[2])
print(a["recompute"] or "none", "%.2f" % (a["predicted_bytes"] / 1e6), b["recompute"] or "none",
      "%.2f" % (b["predicted_bytes"] / 1e6))
sys.exit(0 if not a["recompute"] and b["recompute"] and b["predicted_bytes"] <= 3.1e6 else 1)
PY
)
okm=$?
[ $rc3 -eq 0 ] && [ $okm -eq 0 ] && same m2
ok $? "a replicated stage's memory at its share: 3.6 MB fits without recomputation, 3.1 MB recomputes (rank 0: recompute, MB: $rcm); the one-process losses and parameters"
rp f 6 3 1f1b "" --set pipe.replicate=false --set "pipe.stage_ranks=[2,1]" --set "pipe.boundaries=[3]"
[ "$STAGES" = "0+1:0-2 2:3-8 " ] && same f
ok $? "2 data-parallel replicas of a pipeline of ranks 0+1 then 2: $STAGES; the one-process losses and parameters"

bad() {
    local pat=$1 desc=$2
    shift 2
    mpirun_ht 2 "$HETTRAIN" -c "$TMP/gpt.cfg" -q --set pipe.stages=2 --set pipe.replicate=true \
        "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"
    local rc=$?
    [ $rc -eq 2 ] && grep -Eq -- "$pat" "$TMP/bad.err"
    ok $? "$desc (exit $rc)"
}
bad "pipe.replicate.*\"hetero\" partition; found partition \"uniform\"" \
    "replicated stages without the hetero partition" --set pipe.schedule=1f1b
bad "pipe.replicate.*gpipe, 1f1b or hepipe; found \"2bw\"" "replicated stages under 2bw" \
    --set pipe.schedule=2bw --set pipe.partition=hetero
bad "pipe.stage_ranks.*sum to 3; expected pipe.stages = 2" "stage ranks not summing to the ranks" \
    --set pipe.schedule=1f1b --set pipe.replicate=false --set "pipe.stage_ranks=[1,2]" \
    --set "pipe.boundaries=[3]"
bad "2 stages need 1 boundaries .*found 0" "stage ranks without boundaries" \
    --set pipe.schedule=1f1b --set pipe.replicate=false --set "pipe.stage_ranks=[1,1]"
bad "cluster.hosts.*found 3 values, expected 2" "cluster.hosts not one per rank" \
    --set pipe.schedule=1f1b --set pipe.replicate=false --set "cluster.hosts=[0,0,1]"
done_testing
