#!/usr/bin/env bash
# Memory-driven recomputation (issue 11): with device.memory_mb below what a pipeline rank's
# stage needs with its micro-batches in flight, pipe.recompute = "auto" recomputes some of
# its layers (never on a rank that fits), and the run keeps the one-process losses and final
# parameters (pipe.t's tolerances) - bit for bit those of the same pipeline without the limit;
# hepipe may hold other depths within the limit; the hetero partition cuts within the limits;
# 2bw recomputes too, bit for bit its losses without; a limit that no plan meets exits 2
# naming the device and the shortfall.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
. "$(dirname "$0")/../lib/pipe_gpt.sh"
need_text
gpt_job 4 0

# pp NAME ARGS: 2 ranks, 2 stages, 6 micro-batches of 4
pp() {
    local name=$1
    shift
    mpirun_ht 2 "$HETTRAIN" -c "$TMP/gpt.cfg" --set log.metrics="$TMP/$name.jsonl" \
        --set checkpoint.path="$TMP/$name.ckpt" --set pipe.stages=2 \
        --set pipe.micro_batches=6 "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    RC=$?
    [ $RC -eq 0 ] || diag "$(tail -3 "$TMP/$name.err")"
    losses "$TMP/$name.jsonl" >"$TMP/$name.loss" 2>/dev/null
}
# field NAME RANK KEY: a pipe_memory record's value
field() {
    grep '"type":"pipe_memory"' "$TMP/$1.jsonl" | grep "\"rank\":$2," |
        sed -E "s/.*\"$3\":(\"[^\"]*\"|[^,}]*).*/\1/"
}

one_process
ok $? "GPT, one process: reference run"

# 1f1b without a limit (the device's memory): nothing recomputed; rank 0's stage (layers 0-4,
# 2 micro-batches in flight) is predicted at about 2.2 MB
pp free --set pipe.schedule=1f1b
[ $RC -eq 0 ] && [ "$(field free 0 recompute)" = '""' ] && [ "$(field free 1 recompute)" = '""' ]
ok $? "1f1b, no limit: no rank recomputes"
need=$(field free 0 predicted_bytes)
awk -v n="$need" 'BEGIN { exit !(n > 2.0e6) }'
ok $? "rank 0 predicted above 2 MB without recomputation ($need B)"

# the same with 2 MB per device: rank 0 recomputes some (not all) of its layers, rank 1 fits
pp tight --set pipe.schedule=1f1b --set device.memory_mb=2
r0=$(field tight 0 recompute) r1=$(field tight 1 recompute)
p0=$(field tight 0 predicted_bytes) p1=$(field tight 1 predicted_bytes)
[ $RC -eq 0 ] && [ "$r0" != '""' ] && [ "$r0" != '"0,1,2,3,4"' ] && [ "$r1" = '""' ] &&
    awk -v a="$p0" -v b="$p1" 'BEGIN { exit !(a <= 2e6 && b <= 2e6) }'
ok $? "1f1b, 2 MB: rank 0 recomputes layers $r0 and is predicted within the limit ($p0 B), rank 1 recomputes nothing"
grep -q 'memory: pipeline rank 0 .*of its 2.00 MB limit (device.memory_mb).*recomputes layers' "$TMP/tight.err"
ok $? "the decision is logged (predicted against the limit, the layers)"
same_losses "$TMP/one.loss" "$TMP/tight.loss" 4 2e-5 && same_params "$TMP/one.ckpt" "$TMP/tight.ckpt" 1e-4
ok $? "and trains to the one-process losses and parameters"
[ -s "$TMP/tight.loss" ] && cmp -s "$TMP/free.loss" "$TMP/tight.loss"
ok $? "bit for bit the losses without the limit"

# hepipe under 1.9 MB: rank 0 cannot hold 2 micro-batches without recomputing (2.3 MB)
pp hep --set pipe.schedule=hepipe --set device.memory_mb=1.9
r0=$(field hep 0 recompute) p0=$(field hep 0 predicted_bytes)
[ $RC -eq 0 ] && [ "$r0" != '""' ] && awk -v a="$p0" 'BEGIN { exit !(a <= 1.9e6) }' &&
    same_losses "$TMP/one.loss" "$TMP/hep.loss" 4 2e-5 && same_params "$TMP/one.ckpt" "$TMP/hep.ckpt" 1e-4
ok $? "hepipe, 1.9 MB: rank 0 recomputes $r0 within the limit ($p0 B, $(field hep 0 slots) in flight), the one-process losses"

# the hetero partition plans against the limits too (rank 1 slowed 3x: without a limit the fast
# rank 0 takes layers 0-5 or more, 3 MB and up): every rank within 2 MB, the one-process losses
pp het --set pipe.schedule=1f1b --set pipe.partition=hetero --set 'cluster.slowdown=[1.0,3.0]' \
    --set device.memory_mb=2
p0=$(field het 0 predicted_bytes) p1=$(field het 1 predicted_bytes)
[ $RC -eq 0 ] && awk -v a="$p0" -v b="$p1" 'BEGIN { exit !(a > 0 && a <= 2e6 && b > 0 && b <= 2e6) }' &&
    grep -q 'pipeline partition: 2 stages over 2 ranks' "$TMP/het.err" &&
    same_losses "$TMP/one.loss" "$TMP/het.loss" 4 2e-5
ok $? "hetero partition, 1f1b, 2 MB: ranks predicted at $p0 and $p1 B, layers $(field het 0 recompute) recomputed on rank 0, the one-process losses"

# 2bw (two weight versions: 2.47 MB on rank 0) under 2.2 MB: recomputes, bit for bit its losses
pp tbw0 --set pipe.schedule=2bw --set pipe.recompute=none
pp tbw --set pipe.schedule=2bw --set device.memory_mb=2.2
r0=$(field tbw 0 recompute)
[ $RC -eq 0 ] && [ "$r0" != '""' ] && [ -s "$TMP/tbw.loss" ] && cmp -s "$TMP/tbw0.loss" "$TMP/tbw.loss"
ok $? "2bw, 2.2 MB: rank 0 recomputes $r0, the losses of 2bw without recomputation bit for bit"

# The memory model against what the executor allocated (ht_dev_mem): every run above, each
# rank's "pipe_memory_measured" record: the executor's predicted allocation within 0.5% of the
# peak less the tiled GEMM's packing workspace, the packing predicted as measured, and the
# stage plan that decides recomputation (the same model: every rank holds only its stage)
# within 0.5% of the whole peak
/usr/bin/python3 - "$TMP" free tight hep het tbw0 tbw <<'PY'
import json, sys
d, names = sys.argv[1], sys.argv[2:]
for n in names:
    recs = [json.loads(l) for l in open("%s/%s.jsonl" % (d, n))]
    m = [r for r in recs if r["type"] == "pipe_memory_measured"]
    assert sorted(r["rank"] for r in m) == [0, 1], (n, m)
    for r in m:
        held = r["allocated_peak_bytes"] - r["gemm_workspace_bytes"]
        assert abs(r["predicted_bytes"] - held) <= 0.005 * held, (n, r)
        assert abs(r["error"]) <= 0.005, (n, r)
        assert abs(r["predicted_gemm_bytes"] - r["gemm_workspace_bytes"]) <= 0.005 * held, (n, r)
        assert abs(r["plan_bytes"] - r["allocated_peak_bytes"]) <= 0.005 * r["allocated_peak_bytes"], (n, r)
        # the limit beside them: device.memory_mb where set (2 MB in "tight")
        assert "limit_bytes" in r and (n != "tight" or r["limit_bytes"] == 2e6), (n, r)
        print("# %-5s rank %d: allocated %.3f MB (GEMM packing %.3f), predicted %.3f, error %+.3f%%, plan %.3f" % (
            n, r["rank"], r["allocated_peak_bytes"] / 1e6, r["gemm_workspace_bytes"] / 1e6,
            r["predicted_bytes"] / 1e6, 100 * r["error"], r["plan_bytes"] / 1e6))
PY
ok $? "every run, every rank: the executor's predicted allocation within 0.5% of the measured peak (less the GEMM packing), the packing as predicted, the stage plan within 0.5% of the peak"
grep -q 'memory: rank 1 (pipeline rank 1): allocated [0-9.]* MB at peak.*error [-+][0-9.]*%' "$TMP/free.err"
ok $? "rank 0 logs the measured allocation and the error per rank"
grep '"type":"pipe_memory_measured"' "$TMP/tight.jsonl" |
    sed -E 's/.*"allocated_peak_bytes":([0-9.e+]+),.*/\1/' | awk '{ n++; if ($1 > 2e6) bad = 1 } END { exit bad || n != 2 }' &&
    ! grep -q 'more than its limit' "$TMP/tight.err" "$TMP/free.err"
ok $? "device.memory_mb 2: every rank's allocation within it (the stage plan is the allocation), no over-limit warning"

# recomputation forced on and off, GPipe (6 micro-batches in flight): the allocation falls on
# both ranks, the losses stay bit for bit
pp gp0 --set pipe.schedule=gpipe --set pipe.recompute=none
pp gp1 --set pipe.schedule=gpipe --set pipe.recompute=all
a=$(grep -h '"type":"pipe_memory_measured"' "$TMP/gp0.jsonl" "$TMP/gp1.jsonl" |
    sed -E 's/.*"rank":([0-9]),.*"allocated_peak_bytes":([0-9.e+]+),.*/\1 \2/' | tr '\n' ' ')
[ -s "$TMP/gp1.loss" ] && cmp -s "$TMP/gp0.loss" "$TMP/gp1.loss" &&
    printf '%s\n' "$a" | awk '{ exit !(NF == 8 && $6 < $2 && $8 < $4) }'
ok $? "gpipe, recompute all vs none: less allocated on both ranks, the same losses bit for bit (rank bytes none, all: $a)"

# 0.5 MB: the weights and optimizer alone take 0.95 MB on rank 0
dev=$(sed -nE 's/.*device [0-9]+: (.*) \(.*/\1/p' "$TMP/free.err" | head -1)
pp none --set pipe.schedule=1f1b --set device.memory_mb=0.5
msg=$(grep -m1 'no plan fits' "$TMP/none.err")
short=$(printf '%s' "$msg" | sed -nE 's/.*need at least ([0-9.]+) MB.*short by ([0-9.]+) MB.*/\1 \2/p')
[ $RC -eq 2 ] && [ -n "$dev" ] && printf '%s' "$msg" | grep -qF "rank 0's device \"$dev\" (limit 0.50 MB" &&
    awk -v s="$short" 'BEGIN { split(s, a, " "); exit !(a[1] > 0.5 && a[2] > 0 && (a[1] - 0.5 - a[2])^2 < 1e-4) }'
ok $? "0.5 MB: exit 2 naming the device ($dev) and the shortfall ($short MB)"
[ -z "$(ls "$TMP"/none.ckpt 2>/dev/null)" ]
ok $? "and no training ran"

done_testing
