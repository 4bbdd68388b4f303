#!/usr/bin/env bash
# Two OpenCL implementations side by side (issue 14), from one run:
#  1. training throughput of the MLP (and with MODELS the CNN and GPT) on PoCL's CPU device and on Mesa's rusticl
#     (llvmpipe), each on the GEMM path hettrain chose for it by measurement (HT_GEMM=auto);
#  2. the mixed job, one rank per implementation (cluster.devices = ["pthread", "rusticl"],
#     speed split), as the split decides (rusticl left out with share 0: it only joins the
#     gradient sum), excluded (cluster.exclude_slow: it leaves the job) and with rusticl kept
#     by hand (cluster.shares), beside PoCL alone. (tools/bench/bench_exclude.sh measures the
#     same four jobs interleaved and repeated, for a machine under load.)
# rusticl is 100x slower here, so its runs are short (STEPS_RUSTICL); samples/s count from the
# end of the first step (compilation excluded).
#   tools/bench/bench_mixed.sh [STEPS (60)]          (repository root)
# Env: STEPS_RUSTICL (6), EPOCHS (2: the quickstart's length for the mixed job), MODELS
# ("mlp"; "mlp cnn gpt" for all three: on this 2-core VM 6 CNN steps on rusticl ran for over
# 9 minutes, compilation included, so the default leaves them out)
. "$(dirname "$0")/common.sh"
steps=${1:-60}; rsteps=${STEPS_RUSTICL:-6}; epochs=${EPOCHS:-2}
bench_tmp
export RUSTICL_ENABLE=llvmpipe
mpi_shm cma
quiet=(--set train.eval_every=0 --set log.progress=none --set checkpoint.path= --set log.metrics=)

echo "== training throughput per implementation (samples/s; GEMM path chosen by measurement)"
printf '%-10s %-10s %12s %12s %8s\n' model device samples/s "gemm path" steps
for model in ${MODELS:-mlp}; do
    case $model in
        mlp) cfg=conf/mnist-mlp.cfg ;; cnn) cfg=conf/mnist-cnn.cfg ;; gpt) cfg=conf/shakespeare-gpt.cfg ;;
    esac
    for dev in pthread rusticl; do
        n=$steps; [ "$dev" = rusticl ] && n=$rsteps
        "$build/hettrain" -c "$cfg" --device "$dev" -v --set train.steps="$n" "${quiet[@]}" \
            >"$tmp/$model-$dev.out" 2>"$tmp/$model-$dev.err" || { tail -5 "$tmp/$model-$dev.err"; exit 1; }
        path=$(grep -oE 'SGEMM [a-z-]+, by' "$tmp/$model-$dev.err" | head -1 | awk '{print $2}' | tr -d ,)
        printf '%-10s %-10s %12s %12s %8s\n' "$model" "$dev" "$(sps "$tmp/$model-$dev.out")" "${path:-?}" "$n"
    done
done

echo "== the mixed job: conf/quickstart.cfg, $epochs epochs, batch 128"
q=(-c conf/quickstart.cfg --set train.epochs="$epochs" "${quiet[@]}")
"$build/hettrain" "${q[@]}" --device pthread >"$tmp/alone.out" 2>"$tmp/alone.err"
alone=$(sps "$tmp/alone.out")
mpirun -np 2 --oversubscribe --bind-to none "$build/hettrain" "${q[@]}" \
    --set 'cluster.devices=["pthread", "rusticl"]' --set cluster.split=speed \
    >"$tmp/split.out" 2>"$tmp/split.err" || { tail -5 "$tmp/split.err"; exit 1; }
mpirun -np 2 --oversubscribe --bind-to none "$build/hettrain" "${q[@]}" \
    --set 'cluster.devices=["pthread", "rusticl"]' --set cluster.split=speed \
    --set cluster.exclude_slow=true >"$tmp/excl.out" 2>"$tmp/excl.err" || { tail -5 "$tmp/excl.err"; exit 1; }
mpirun -np 2 --oversubscribe --bind-to none "$build/hettrain" "${q[@]}" \
    --set 'cluster.devices=["pthread", "rusticl"]' --set 'cluster.shares=[127, 1]' \
    >"$tmp/kept.out" 2>"$tmp/kept.err" || { tail -5 "$tmp/kept.err"; exit 1; }
printf '%-44s %12s %8s\n' job samples/s ratio
for j in alone split excl kept; do
    case $j in
        alone) name="PoCL alone (1 process)" ;;
        split) name="PoCL + rusticl, speed split (left out?)" ;;
        excl) name="PoCL + rusticl, speed split, exclude_slow" ;;
        kept) name="PoCL + rusticl, rusticl kept (shares 127, 1)" ;;
    esac
    v=$(sps "$tmp/$j.out")
    printf '%-44s %12s %8.3f\n' "$name" "$v" "$(echo "$v / $alone" | bc -l)"
done
echo "the split's decision:"
grep -E 'left out|shares by measured speed' "$tmp/split.err" | sed 's/^/   /' | head -3
