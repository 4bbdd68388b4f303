#!/usr/bin/env bash
# GPT-2 small (conf/gpt2-small.cfg: 12 x 768, 12 heads, context 1024, vocabulary 50,257, tied,
# AdamW, clip 1.0) for one process on this machine's OpenCL CPU device beside PyTorch 2 on the
# CPU with 2 threads, at the same shapes and batch: seconds per training step (the median of
# the rounds; hettrain's from its logged steps after the first, which compiles and allocates;
# the peer's after one warm-up step) and peak resident memory (hettrain's device buffers are host
# memory under PoCL, so its RSS is the device's memory too). Rounds interleave the two.
#   tools/bench/gpt2_small.sh [ROUNDS] [STEPS]   (defaults 2 rounds, 2 steps; batch: BATCH=1)
# The peer runs in $TORCH_VENV (default /var/cache/hettrain/torch-venv: PyTorch 2 from PyPI);
# hettrain trains on tiny shakespeare's bytes as uint16 token ids (valid GPT-2 ids; the time
# per step does not depend on them). KEEP=DIR keeps hettrain's metrics (its losses).
. "$(dirname "$0")/common.sh"
rounds=${1:-2}
steps=${2:-2}
batch=${BATCH:-1}
venv=${TORCH_VENV:-/var/cache/hettrain/torch-venv}
bench_tmp
/usr/bin/python3 -c 'import sys, numpy as np
np.fromfile(sys.argv[1], np.uint8)[:400000].astype("<u2").tofile(sys.argv[2])' "$SHAKESPEARE" "$tmp/tok.bin"
"$venv/bin/python" -c 'import torch' || { echo "no PyTorch in $venv" >&2; exit 1; }
ours=() peer=() ours_mb=() peer_mb=()
for r in $(seq "$rounds"); do
    /usr/bin/time -f "maxrss_kb %M" "$build/hettrain" -c conf/gpt2-small.cfg \
        --set data.path="$tmp/tok.bin" --set data.val_path= --set train.batch="$batch" \
        --set train.steps=$((steps + 1)) --set train.eval_every=0 --set train.eval_batches=1 \
        --set log.every=1 --set log.progress=none --set checkpoint.path= \
        --set log.metrics="$tmp/ours-$r.jsonl" >"$tmp/out" 2>"$tmp/err" || { tail -5 "$tmp/err"; exit 1; }
    # seconds per step from each logged step after the first (samples/s of its interval)
    ours+=("$(sed -nE 's/.*"type":"train","step":([0-9]+),.*"samples_per_s":([0-9.e+-]+).*/\1 \2/p' \
        "$tmp/ours-$r.jsonl" | awk -v b="$batch" '$1 > 1 && $2 > 0 { print b / $2 }' | median)")
    ours_mb+=("$(sed -nE 's/^maxrss_kb ([0-9]+)/\1/p' "$tmp/err" | awk '{ print $1 / 1024 }')")
    "$venv/bin/python" tools/bench/gpt2_small_peer.py --threads 2 --steps "$steps" \
        --batch "$batch" >"$tmp/peer" || exit 1
    peer+=("$(sed -nE 's/^peer_s_per_step //p' "$tmp/peer")")
    peer_mb+=("$(sed -nE 's/^peer_peak_rss_mb //p' "$tmp/peer")")
    echo "round $r: hettrain ${ours[-1]} s/step ${ours_mb[-1]} MB; PyTorch ${peer[-1]} s/step ${peer_mb[-1]} MB"
done
dev=$(sed -nE 's/^device [0-9]+: (.*), kernels.*/\1/p' "$tmp/err" | head -1)
a=$(printf '%s\n' "${ours[@]}" | median) b=$(printf '%s\n' "${peer[@]}" | median)
am=$(printf '%s\n' "${ours_mb[@]}" | median) bm=$(printf '%s\n' "${peer_mb[@]}" | median)
echo "== GPT-2 small, batch $batch x 1024 tokens, $steps timed steps, $rounds rounds (medians)"
echo "hettrain: $(grep -m1 'model: gpt' "$tmp/err" | sed 's/^.*model: //'); device $dev"
echo "peer: $(head -1 "$tmp/peer")"
printf '%-28s %12s %14s\n' "" "s/step" "peak RSS MB"
printf '%-28s %12.2f %14.0f\n' "hettrain (OpenCL, PoCL)" "$a" "$am"
printf '%-28s %12.2f %14.0f\n' "PyTorch 2 CPU, 2 threads" "$b" "$bm"
awk -v a="$a" -v b="$b" -v c="$am" -v d="$bm" \
    'BEGIN { printf "ratio hettrain / PyTorch: time %.2fx, memory %.2fx\n", a / b, c / d }'
