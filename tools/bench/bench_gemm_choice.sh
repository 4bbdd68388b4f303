#!/usr/bin/env bash
# The per-device GEMM choice against every path it chooses from (issue 14), from one run:
# for each OpenCL implementation here (PoCL's CPU device "pthread", Mesa rusticl's "llvmpipe")
# and each model family (MLP, CNN, GPT), training throughput with HT_GEMM=auto (the variant
# hettrain measured and chose, src/ocl/choose.c) beside each variant forced: our tiled
# kernels, CLBlast with its own parameters, CLBlast with the built-in CPU set. Rounds run the
# variants interleaved (auto, tiled, clblast, clblast-cpu, then again), so that a load that
# comes and goes on a shared machine hits them alike; the medians are printed with auto's
# choice and auto / best (the issue's target: >= 0.95).
# rusticl is ~100x slower here: its jobs are small (batch RBATCH, RSTEPS steps), and its tiled
# path, 10x slower again, runs only with RTILED=1.
#   tools/bench/bench_gemm_choice.sh [ROUNDS (3)]       (repository root)
# Env: STEPS (30), RSTEPS (4), RBATCH (16), MODELS ("mlp cnn gpt"), DEVICES ("pthread rusticl"),
#      RTILED (0)
. "$(dirname "$0")/common.sh"
rounds=${1:-3}; steps=${STEPS:-30}; rsteps=${RSTEPS:-4}; rbatch=${RBATCH:-16}
bench_tmp
export RUSTICL_ENABLE=llvmpipe
quiet=(--set train.eval_every=0 --set log.progress=none --set checkpoint.path= --set log.metrics=)

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $rounds rounds"
printf '%-5s %-8s %-12s %12s %12s %12s %12s %8s\n' model device auto-chose auto tiled clblast \
    clblast-cpu auto/best
for model in ${MODELS:-mlp cnn gpt}; do
    case $model in
        mlp) cfg=conf/mnist-mlp.cfg ;; cnn) cfg=conf/mnist-cnn.cfg ;; gpt) cfg=conf/shakespeare-gpt.cfg ;;
    esac
    # the final evaluation is not timed, but on rusticl a full validation set takes minutes
    small=(--set data.val_fraction=0.01)
    [ "$model" = gpt ] && small=(--set train.eval_batches=1)
    for dev in ${DEVICES:-pthread rusticl}; do
        args=(-c "$cfg" --device "$dev" "${quiet[@]}" "${small[@]}" --set train.steps="$steps")
        variants="auto tiled clblast clblast-cpu"
        if [ "$dev" = rusticl ]; then
            args=(-c "$cfg" --device "$dev" "${quiet[@]}" "${small[@]}" --set train.steps="$rsteps"
                  --set train.batch="$rbatch")
            [ "${RTILED:-0}" = 1 ] || variants="auto clblast clblast-cpu"
        fi
        # a first auto run: the probe (cached with the programs), compilation of every path
        "$build/hettrain" "${args[@]}" -v >"$tmp/first.out" 2>"$tmp/first.err" ||
            { tail -5 "$tmp/first.err"; exit 1; }
        chose=$(grep -oE 'SGEMM [a-z-]+, by' "$tmp/first.err" | head -1 | awk '{print $2}' | tr -d ,)
        for v in $variants; do
            [ "$v" = auto ] || HT_GEMM=$v "$build/hettrain" "${args[@]}" >/dev/null 2>&1 || true
        done
        for ((r = 0; r < rounds; r++)); do
            for v in $variants; do
                HT_GEMM=$v "$build/hettrain" "${args[@]}" >"$tmp/o" 2>"$tmp/e" ||
                    { tail -3 "$tmp/e"; exit 1; }
                sps "$tmp/o" >>"$tmp/$model-$dev-$v"
            done
        done
        declare -A med=()
        best=0
        for v in $variants; do
            med[$v]=$(median <"$tmp/$model-$dev-$v")
            [ "$v" = auto ] || best=$(awk -v a="$best" -v b="${med[$v]}" 'BEGIN { print (b > a ? b : a) }')
        done
        printf '%-5s %-8s %-12s %12s %12s %12s %12s %8.2f\n' "$model" "$dev" "${chose:-?}" \
            "${med[auto]}" "${med[tiled]:--}" "${med[clblast]}" "${med[clblast-cpu]}" \
            "$(awk -v a="${med[auto]}" -v b="$best" 'BEGIN { print a / b }')"
        unset med
    done
done
echo "samples/s, median of $rounds (from the end of the first step: compilation excluded);"
echo "PoCL: $steps steps of each config's batch; rusticl: $rsteps steps of batch $rbatch"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
