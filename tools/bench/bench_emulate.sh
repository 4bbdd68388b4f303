#!/usr/bin/env bash
# The sync policies' time to accuracy on an emulated cluster (issue 26): hettrain emulate runs
# the MNIST MLP (conf/mnist-mlp.cfg) on W workers of a cluster description written here, in
# SimGrid's virtual time: GPU-class devices (2 TFLOP/s at 50%, 300 GB/s, 10 us launches) at
# speeds 1, 1, 1/2, 1/4 repeated (the seeds' 1,1,2,4 mix as devices, not emulated idling),
# 4 devices per host on a 10 GB/s link, hosts on 1.25 GB/s (10 GbE). Policies other than bsp
# get one extra rank (a full-speed device) for their server / coordinator. For every policy:
# virtual seconds until the validation accuracy first reached TARGET (time_s of the eval
# records), the final accuracy, the virtual training time, bytes sent by all ranks. Every
# figure is deterministic: the same command gives the same table on any machine.
#   tools/bench/bench_emulate.sh [POLICIES...]        (from the repository root)
#   env: W (8), TARGET (0.90), EPOCHS (3), EVAL (5), OUT (bench-emulate), HT_BUILD (build),
#        HT_SMPI_BIN (default $HT_BUILD-smpi/hettrain-smpi), SET (one more --set for every
#        policy, e.g. SET=sync.period=4)
. "$(dirname "$0")/common.sh"
W=${W:-8}; TARGET=${TARGET:-0.90}; EPOCHS=${EPOCHS:-3}; EVAL=${EVAL:-5}; OUT=${OUT:-bench-emulate}
smpi=${HT_SMPI_BIN:-$build-smpi/hettrain-smpi}
policies=("$@")
[ ${#policies[@]} -gt 0 ] || policies=(bsp asp ssp dasp preduce sap-reduce gossip gossip-adaptive)
mkdir -p "$OUT"
# cluster RANKS: hosts of 4 devices g1 g1 g2 g4 (the last host cut short), then one g1
cluster() {
    local n=$1 devs=() kinds=(g1 g1 g2 g4) h="" i
    for ((i = 0; i < n; i++)); do devs+=("${kinds[i % 4]}"); done
    for ((i = 0; i < n; i += 4)); do
        local list="" j
        for ((j = i; j < n && j < i + 4; j++)); do list="$list${list:+, }\"${devs[j]}\""; done
        h="$h${h:+, }{ devices = [$list]; }"
    done
    cat <<CFG
devices = (
  { name = "g1"; gflops = 2000.0; efficiency = 0.5; mem_bw_gbs = 300.0; launch_us = 10.0; },
  { name = "g2"; like = "g1"; scale = 0.5; },
  { name = "g4"; like = "g1"; scale = 0.25; }
);
hosts = ( $h );
links = { intra = { latency_us = 5.0; bandwidth_gbs = 10.0; };
          inter = { latency_us = 30.0; bandwidth_gbs = 1.25; }; };
CFG
}
for p in "${policies[@]}"; do
    np=$W
    [ "$p" = bsp ] || np=$((W + 1))
    # the server's device: full speed (the mix is over the workers)
    if [ "$p" = bsp ]; then cluster "$W"; else cluster "$W" | sed -E "s/^hosts = \( (.*) \);/hosts = ( \1, { devices = [\"g1\"]; } );/"; fi >"$OUT/cluster-$W-$p.cfg"
    echo "bench_emulate: $p ($np ranks)..." >&2
    "$build/hettrain" emulate --cluster "$OUT/cluster-$W-$p.cfg" -c conf/mnist-mlp.cfg \
        --smpi "$smpi" --out "$OUT/platform-$W-$p" --set sync.mode="$p" \
        --set train.epochs="$EPOCHS" --set train.eval_every="$EVAL" --set checkpoint.path='""' \
        --set log.metrics="$OUT/mlp-$W-$p.jsonl" --set sync.log="$OUT/mlp-$W-$p.log" \
        ${SET:+--set "$SET"} -- -q \
        >"$OUT/mlp-$W-$p.out" 2>"$OUT/mlp-$W-$p.err" || { tail -20 "$OUT/mlp-$W-$p.err"; exit 1; }
done

/usr/bin/python3 - "$OUT" "$W" "$TARGET" "${policies[@]}" <<'PY'
import json, sys
out, W, target, pols = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
rows = {}
for p in pols:
    recs = [json.loads(l) for l in open(f"{out}/mlp-{W}-{p}.jsonl")]
    ev = [r for r in recs if r["type"] == "eval"]
    sy = [r for r in recs if r["type"] == "sync"]
    hit = next((r for r in ev if r["val_acc"] is not None and r["val_acc"] >= target), None)
    rows[p] = dict(tta=hit["time_s"] if hit else None, step=hit["step"] if hit else None,
                   acc=ev[-1]["val_acc"], total=ev[-1]["time_s"],
                   sent=sum(r["bytes_sent"] for r in sy))
base = rows.get("bsp", {}).get("tta")
print(f"\nMNIST MLP, {W} workers at speeds 1,1,1/2,1/4 (emulated devices, virtual time); "
      f"target {100*target:.0f}% validation accuracy\n")
print("| policy | time to target (virtual s) | at step | speed-up vs bsp | final acc | train time (virtual s) | bytes sent (MB) |")
print("|---|---:|---:|---:|---:|---:|---:|")
for p, r in rows.items():
    tta = f"{r['tta']:.2f}" if r["tta"] is not None else "not reached"
    sp = f"{base / r['tta']:.2f}x" if base and r["tta"] else "-"
    st = r["step"] if r["step"] is not None else "-"
    print(f"| {p} | {tta} | {st} | {sp} | {100 * r['acc']:.2f}% | {r['total']:.2f} | {r['sent'] / 1e6:.0f} |")
PY
