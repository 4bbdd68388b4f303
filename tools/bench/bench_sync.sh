#!/usr/bin/env bash
# Time to accuracy of the sync policies (issue: staleness-aware reduce and adaptive
# synchronisation). W workers (default 4) under mpirun with emulated slowdowns 1, 1, 2, 4
# (repeated for 8 workers), the MNIST MLP (conf/mnist-mlp.cfg; MODEL=cnn for the CNN) for its
# shipped budget of samples, evaluated on rank 0 every EVAL global steps. For every policy:
# wall seconds until the validation accuracy first reached TARGET (time_s of the eval records:
# training time, rank 0's evaluations left out), the final accuracy, the total training time,
# bytes sent by all ranks, and the workers' summed wait and communication seconds; and each policy's speed-up in
# time to accuracy over bsp. Writes the metrics to OUT (default bench-sync/) and the plot with
# tools/plot/sync.py when matplotlib is there.
#   tools/bench/bench_sync.sh [POLICIES...]        (from the repository root)
#   env: W (4), MODEL (mlp|cnn), TARGET (0.95), EVAL (5), OUT (bench-sync), HT_BUILD (build)
. "$(dirname "$0")/common.sh"
W=${W:-4}; MODEL=${MODEL:-mlp}; TARGET=${TARGET:-0.95}; EVAL=${EVAL:-5}; OUT=${OUT:-bench-sync}
policies=("$@")
[ ${#policies[@]} -gt 0 ] || policies=(bsp asp ssp dasp preduce sap-reduce gossip gossip-adaptive)
mpi_shm copy
mkdir -p "$OUT"
cfg=conf/mnist-$MODEL.cfg
# slowdowns 1, 1, 2, 4 for every group of 4 workers
slow=""
for ((i = 0; i < W; i++)); do f=(1.0 1.0 2.0 4.0); slow="$slow${slow:+, }${f[i % 4]}"; done

for p in "${policies[@]}"; do
    np=$W s="$slow"
    [ "$p" = bsp ] || { np=$((W + 1)); s="$s, 1.0"; }
    echo "bench_sync: $p ($np ranks)..." >&2
    t0=$(date +%s.%N)
    mpirun -np "$np" --oversubscribe --bind-to none "$build/hettrain" -c "$cfg" -q \
        --set sync.mode="$p" --set "cluster.slowdown=[$s]" --set train.eval_every="$EVAL" \
        --set checkpoint.path='""' --set log.metrics="$OUT/$MODEL-$W-$p.jsonl" \
        --set sync.log="$OUT/$MODEL-$W-$p.log" >"$OUT/$MODEL-$W-$p.out" 2>"$OUT/$MODEL-$W-$p.err" ||
        { tail -20 "$OUT/$MODEL-$W-$p.err"; exit 1; }
    echo "$p $(date +%s.%N) $t0" >>"$OUT/$MODEL-$W-wall.txt"
done

/usr/bin/python3 - "$OUT" "$MODEL" "$W" "$TARGET" "${policies[@]}" <<'PY'
import json, sys
out, model, W, target, pols = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5:]
rows = {}
for p in pols:
    recs = [json.loads(l) for l in open(f"{out}/{model}-{W}-{p}.jsonl")]
    ev = [r for r in recs if r["type"] == "eval"]
    sy = [r for r in recs if r["type"] == "sync"]
    rk = [r for r in recs if r["type"] == "rank"]
    hit = next((r for r in ev if r["val_acc"] is not None and r["val_acc"] >= target), None)
    sent = sum(r["bytes_sent"] for r in sy)
    wait = sum(r["wait_s"] for r in sy if r["role"] == "worker")
    comm = sum(r["comm_s"] for r in sy if r["role"] == "worker")
    rows[p] = dict(tta=hit["time_s"] if hit else None, step=hit["step"] if hit else None,
                   acc=ev[-1]["val_acc"], total=ev[-1]["time_s"], sent=sent, wait=wait, comm=comm)
base = rows.get("bsp", {}).get("tta")
print(f"\n{model.upper()}, {W} workers, slowdowns 1,1,2,4; target {100*target:.0f}% validation accuracy\n")
print("| policy | time to target (s) | at step | speed-up vs bsp | final acc | train time (s) | bytes sent (MB) | workers' wait (s) | workers' comm (s) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for p, r in rows.items():
    tta = f"{r['tta']:.1f}" if r["tta"] is not None else "not reached"
    sp = f"{base / r['tta']:.2f}x" if base and r["tta"] else "-"
    st = r["step"] if r["step"] is not None else "-"
    print(f"| {p} | {tta} | {st} | {sp} | {100 * r['acc']:.2f}% | {r['total']:.1f} | "
          f"{r['sent'] / 1e6:.0f} | {r['wait']:.1f} | {r['comm']:.1f} |")
print("\nbsp's waiting for slower ranks is inside its comm seconds (overlapped bucket reduction);"
      "\nthe others' wait is time blocked on a server reply, a group, or the final exchange.")
PY
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    /usr/bin/python3 tools/plot/sync.py "$OUT/sync-$MODEL-$W.png" "$TARGET" "$OUT"/"$MODEL-$W"-*.jsonl
else
    echo "bench_sync: no matplotlib for /usr/bin/python3 (apt-get install python3-matplotlib): no plot" >&2
fi
