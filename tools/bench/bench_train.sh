#!/usr/bin/env bash
# Training throughput of hettrain on one OpenCL device beside PyTorch on the CPU (2 threads)
# for the same model, batch and optimizer, from one run, with hettrain's per-kernel times.
#   tools/bench/bench_train.sh mlp|cnn|gpt [STEPS] [hettrain args, e.g. --device gpu]
# mlp: conf/mnist-mlp.cfg (samples/s); cnn: conf/mnist-cnn.cfg (images/s);
# gpt: conf/shakespeare-gpt.cfg (tokens/s = samples/s x 64). Run from the repository root.
. "$(dirname "$0")/common.sh"
model=${1:?usage: bench_train.sh mlp|cnn|gpt [STEPS] [args]}; shift
steps=${1:-100}; shift || true
bench_tmp
case $model in
    mlp) cfg=conf/mnist-mlp.cfg; per=1; unit=samples/s ;;
    cnn) cfg=conf/mnist-cnn.cfg; per=1; unit=images/s ;;
    gpt) cfg=conf/shakespeare-gpt.cfg; per=64; unit=tokens/s ;;
    *) echo "unknown model $model" >&2; exit 2 ;;
esac
"$build/hettrain" -c "$cfg" --profile "$@" --set train.steps="$steps" --set train.eval_every=0 \
    --set log.every=25 --set log.progress=none --set checkpoint.path= --set log.metrics= \
    >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
ours=$(sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' "$tmp/out" | awk -v p=$per '{ print $1 * p }')
dev=$(sed -nE 's/^device [0-9]+: (.*), kernels.*/\1/p' "$tmp/err" | head -1)
/usr/bin/python3 tools/bench/torch_peer.py "$model" --threads 2 >"$tmp/torch"  # PyTorch 2 (its venv)
peer=$(sed -nE 's/^peer_per_s //p' "$tmp/torch")
echo "== $model ($cfg), $steps steps; $(head -1 "$tmp/torch")"
echo "hettrain device: $dev"
echo "per-kernel device time and roofline (hettrain --profile, top 12):"
grep '^profile: device' "$tmp/err"
sed -n '/^kernel/,$p' "$tmp/err" | head -13
grep '^roofline:' "$tmp/err"
printf '%-28s %12s\n' "" "$unit"
printf '%-28s %12.0f\n' "hettrain (OpenCL)" "$ours"
printf '%-28s %12.0f\n' "PyTorch CPU, 2 threads" "$peer"
awk -v a="$ours" -v b="$peer" 'BEGIN { printf "ratio hettrain / PyTorch: %.2fx\n", a / b }'
