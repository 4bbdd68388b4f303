#!/usr/bin/env bash
# Training throughput of the MLP 784-1024-1024-10, batch 256, SGD momentum (Nesterov), on
# one OpenCL device, beside the same model in PyTorch on the CPU (2 threads), from one run.
# usage: tools/bench/bench_mlp.sh [STEPS] [--device SEL]   (run from the repository root)
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-200}; shift || true
build=${HT_BUILD:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$build/hettrain" -c conf/mnist-mlp.cfg --profile "$@" --set train.steps="$steps" \
    --set train.eval_every=0 --set log.every=50 --set checkpoint.path='""' \
    --set log.metrics="$tmp/m.jsonl" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
ours=$(sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' "$tmp/out")
torch=$(/usr/bin/python3 tools/bench/mlp_torch.py --threads 2 --steps 60 | tee "$tmp/torch" | sed -nE 's/^torch_samples_per_s //p')
echo "MLP 784-1024-1024-10, batch 256, SGD momentum, $steps steps"
echo "per-kernel device time (hettrain --profile):"
sed -n '/^kernel/,$p' "$tmp/err" | head -20
head -1 "$tmp/torch"
printf '%-32s %12s\n' "" "samples/s"
printf '%-32s %12.0f\n' "hettrain (OpenCL, $(sed -nE 's/.*device [0-9]+: ([^(]*) \(.*/\1/p' "$tmp/err" | head -1))" "$ours"
printf '%-32s %12.0f\n' "PyTorch CPU, 2 threads" "$torch"
awk -v a="$ours" -v b="$torch" 'BEGIN { printf "ratio hettrain / PyTorch: %.2fx\n", a / b }'
