#!/usr/bin/env bash
# The 85M GPT (12 x 768, 12 heads, T 256, batch 8, AdamW) with two hettrain binaries in
# alternating rounds: tokens/s of every step after the first (from the metrics log) and the
# run's CPU seconds (user, sys), with the load. HT_GEMM=tiled on both, so that neither run
# measures and caches another product kernel (the choice is keyed by the kernel sources).
#   tools/bench/bench_85m_ab.sh OLD_HETTRAIN NEW_HETTRAIN [ROUNDS (2)]   STEPS (default 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
old=${1:?usage: bench_85m_ab.sh OLD NEW [ROUNDS]}; new=${2:?usage: bench_85m_ab.sh OLD NEW [ROUNDS]}
rounds=${3:-2}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "load before: $(uptime)"
for r in $(seq "$rounds"); do
    for v in old new; do
        bin=$old; [ $v = new ] && bin=$new
        HT_GEMM=tiled /usr/bin/time -f "cpu %U %S wall %e" "$bin" -c conf/shakespeare-gpt.cfg \
            --set model.n_layer=12 --set model.d_model=768 --set model.n_head=12 \
            --set model.context=256 --set train.batch=8 --set train.steps="${STEPS:-3}" \
            --set train.eval_every=0 --set train.eval_batches=1 --set log.every=1 \
            --set log.progress=none --set checkpoint.path= --set log.metrics="$tmp/m.jsonl" \
            >"$tmp/out" 2>&1 || { tail -5 "$tmp/out"; exit 1; }
        tok=$(sed -nE 's/.*"type":"train","step":([0-9]+),.*"samples_per_s":([0-9.e+-]+).*/\1 \2/p' \
            "$tmp/m.jsonl" | awk '$1 > 1 { printf "%.1f ", $2 * 256 }')
        echo "round $r $v: tokens/s of steps 2..: $tok| $(grep '^cpu' "$tmp/out") | load $(cut -d' ' -f1-3 /proc/loadavg)"
        rm -f "$tmp/m.jsonl"
    done
done
echo "load after: $(uptime)"
