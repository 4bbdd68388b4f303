#!/usr/bin/env bash
# Fused attention (cl/flash.cl: online softmax, probabilities recomputed in the backward, O(T)
# memory) against the T^2 kernels (cl/attn.cl: probabilities saved, O(T^2) memory):
# 1. the attention core alone: build/bench/bench_attn (forward + backward, median ms, the
#    memory each needs beyond its inputs and outputs), at the GPT shapes;
# 2. training at context 1024: the byte-level GPT (conf/shakespeare-gpt.cfg at context 1024,
#    batch 2: bench_peer.sh's gpt1k) and the 85M GPT's blocks (12 x 768, 12 heads) at context
#    1024, batch 1; HT_ATTN=full then HT_ATTN=fused in interleaved rounds: tokens/s (the median
#    over the logged steps after the first, which compiles and allocates) and peak RSS (PoCL's
#    buffers are host memory, so it is the device's memory too).
# The load (uptime) is printed before and after. PyTorch 2 beside them: bench_peer.sh gpt1k.
#   tools/bench/bench_attn.sh [ROUNDS (2)]   STEPS1K (default 8), STEPS85 (default 3) steps a run
. "$(dirname "$0")/common.sh"
rounds=${1:-2}
bench_tmp
echo "load before: $(uptime)"
"$build/bench/bench_attn" --reps 5
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# run NAME ATTN STEPS T args...: prints "tokens/s peakMB" of one training run
run() {
    local name=$1 attn=$2 steps=$3 T=$4; shift 4
    HT_ATTN=$attn /usr/bin/time -f "maxrss_kb %M" "$build/hettrain" -c conf/shakespeare-gpt.cfg \
        --set model.context="$T" "$@" --set train.steps="$steps" --set train.eval_every=0 \
        --set log.every=1 --set log.progress=none --set checkpoint.path= \
        --set log.metrics="$tmp/$name-$attn.jsonl" >"$tmp/out" 2>"$tmp/err" ||
        { tail -5 "$tmp/err" >&2; exit 1; }
    local b
    b=$(sed -nE 's/.*"type":"train","step":([0-9]+),.*"samples_per_s":([0-9.e+-]+).*/\1 \2/p' \
        "$tmp/$name-$attn.jsonl" | awk -v T="$T" '$1 > 1 { print $2 * T }' | median)
    echo "$b $(sed -nE 's/^maxrss_kb ([0-9]+)/\1/p' "$tmp/err" | awk '{ printf "%.0f", $1 / 1024 }')"
}
for model in gpt1k gpt85m-1k; do
    if [ $model = gpt1k ]; then steps=${STEPS1K:-8}; args=(--set train.batch=2)
    else steps=${STEPS85:-3}
        args=(--set model.n_layer=12 --set model.d_model=768 --set model.n_head=12 --set train.batch=1)
    fi
    declare -A tok=() mem=()
    for r in $(seq "$rounds"); do
        for attn in full fused; do
            read -r t m < <(run $model $attn "$steps" 1024 "${args[@]}")
            tok[$attn]+="$t " mem[$attn]+="$m "
            printf '%s round %d HT_ATTN=%-5s %9.1f tokens/s  peak RSS %6d MB  (load %s)\n' \
                $model "$r" $attn "$t" "$m" "$(cut -d' ' -f1-3 /proc/loadavg)"
        done
    done
    for attn in full fused; do
        printf '%s median HT_ATTN=%-5s %9.1f tokens/s  peak RSS %6.0f MB\n' $model $attn \
            "$(tr ' ' '\n' <<<"${tok[$attn]}" | grep . | median)" \
            "$(tr ' ' '\n' <<<"${mem[$attn]}" | grep . | median)"
    done
    unset tok mem
done
echo "load after: $(uptime)"
