#!/usr/bin/env bash
# hettrain beside PyTorch 2 (tools/bench/torch_peer.py, from its venv) on the same model, batch
# and optimizer, in interleaved rounds (ours, then the peer's, ROUNDS times) so that both see
# the same load on a shared machine; prints each round, the medians and their ratio, the load
# average (uptime) before and after, and hettrain's per-kernel profile of its last round.
#   tools/bench/bench_peer.sh mlp|cnn|gpt|gpt85m|gpt1k [ROUNDS (3)] [hettrain args]
# Steps per round: STEPS (hettrain) and PSTEPS (the peer), defaults per model below; both
# threads: 2 (PoCL's device has the machine's 2 cores; the peer torch.set_num_threads(2)).
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:?usage: bench_peer.sh mlp|cnn|gpt|gpt85m|gpt1k [ROUNDS] [args]}; shift
rounds=${1:-3}; shift || true
build=${HT_BUILD:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
gpt=conf/shakespeare-gpt.cfg
case $model in
    mlp) cfg=conf/mnist-mlp.cfg; per=1; unit=samples/s; st=100; pst=60; set=() ;;
    cnn) cfg=conf/mnist-cnn.cfg; per=1; unit=images/s; st=60; pst=40; set=() ;;
    gpt) cfg=$gpt; per=64; unit=tokens/s; st=100; pst=60; set=() ;;
    gpt85m) cfg=$gpt; per=256; unit=tokens/s; st=6; pst=5
        set=(--set model.n_layer=12 --set model.d_model=768 --set model.n_head=12
             --set model.context=256 --set train.batch=8) ;;
    gpt1k) cfg=$gpt; per=1024; unit=tokens/s; st=30; pst=20
        set=(--set model.context=1024 --set train.batch=2) ;;
    *) echo "unknown model $model" >&2; exit 2 ;;
esac
st=${STEPS:-$st}; pst=${PSTEPS:-$pst}
echo "== $model: $cfg ${set[*]}; hettrain $st steps, peer $pst steps a round, $rounds rounds"
echo "load before: $(uptime)"
ours=() peer=()
for r in $(seq "$rounds"); do
    "$build/hettrain" -c "$cfg" --profile "${set[@]}" "$@" --set train.steps="$st" \
        --set train.eval_every=0 --set log.every=1000000 --set log.progress=none \
        --set checkpoint.path= --set log.metrics= >"$tmp/out" 2>"$tmp/err" ||
        { cat "$tmp/err"; exit 1; }
    o=$(sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' "$tmp/out" | tail -1 | awk -v p=$per '{ print $1 * p }')
    /usr/bin/python3 tools/bench/torch_peer.py "$model" --threads 2 --steps "$pst" >"$tmp/torch"
    q=$(sed -nE 's/^peer_per_s //p' "$tmp/torch")
    printf 'round %d: hettrain %10.1f  peer %10.1f %s  (load %s)\n' "$r" "$o" "$q" "$unit" \
        "$(cut -d' ' -f1-3 /proc/loadavg)"
    ours+=("$o") peer+=("$q")
done
echo "load after: $(uptime)"
echo "hettrain device: $(sed -nE 's/^device [0-9]+: (.*), kernels.*/\1/p' "$tmp/err" | head -1)"
echo "peer: $(head -1 "$tmp/torch")"
echo "per-kernel device time and roofline, hettrain's last round (--profile, top 12):"
cat "$tmp/out" "$tmp/err" | grep '^profile: device'
cat "$tmp/out" "$tmp/err" | sed -n '/^kernel /,$p' | head -13
cat "$tmp/out" "$tmp/err" | grep '^roofline:'
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mo=$(med "${ours[@]}"); mp=$(med "${peer[@]}")
printf 'median %-10s hettrain %.1f, PyTorch 2 %.1f, ratio %.2fx\n' "$unit" "$mo" "$mp" \
    "$(awk -v a="$mo" -v b="$mp" 'BEGIN { print a / b }')"
