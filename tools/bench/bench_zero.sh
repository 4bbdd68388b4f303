#!/usr/bin/env bash
# cluster.shard = "optimizer" (ZeRO-1) and "gradients" (ZeRO-2: reduce-scatter) against plain
# all-reduce, data parallel on NP ranks: an MLP with AdamW, rounds alternating the modes; per mode the median samples/s of the rounds and
# each rank's device memory in hettrain's buffers at the end of the run (ht_dev_mem, "now") and
# its peak. A sharded rank allocates only its slice of the optimizer state from setup on, so
# its peak is lower by about half of AdamW's m and v (8 bytes per parameter) on 2 ranks.
#   tools/bench/bench_zero.sh [STEPS (40)] [ROUNDS (3)]      (repository root)
# "gradients" reduces bucket by bucket during backward (cluster.overlap) and keeps only the
# buckets that meet its slice plus one staging bucket ("grads"); "grads1" reduces in one piece
# after backward (cluster.overlap = false) and keeps the whole gradient buffer.
# Env: NP (2), HIDDEN (1024), DEPTH (2: hidden layers of width HIDDEN on 784 inputs), BATCH
# (64), BUCKET_MB (cluster.bucket_first_mb and bucket_cap_mb for every mode; unset: defaults),
# PIN=1 (a core and one PoCL thread per rank), BUILDS="DIR..." (builds compared, every mode
# of every build in each round: old against new; default HT_BUILD), MODES (a subset of
# "plain zero grads grads1").
# "host MB": each rank's VmHWM at exit (/usr/bin/time %M), which holds the PoCL CPU device's
# buffers too; the host copies of the gradients are the difference between modes.
. "$(dirname "$0")/common.sh"
steps=${1:-40}; rounds=${2:-3}
np=${NP:-2}; hidden=${HIDDEN:-1024}; batch=${BATCH:-64}; depth=${DEPTH:-2}
layers=$(printf "$hidden, %.0s" $(seq "$depth")); layers=${layers%, }
bench_tmp
buckets=""
[ -n "${BUCKET_MB:-}" ] && buckets="bucket_first_mb = $BUCKET_MB; bucket_cap_mb = $BUCKET_MB;"
cat >"$tmp/job.cfg" <<CFG
model = { hidden = [$layers]; };
cluster = { $buckets };
data = { kind = "synthetic"; samples = 4096; features = 784; classes = 10; seed = 1; };
train = { batch = $batch; steps = $steps; seed = 7; };
optim = { type = "adamw"; lr = 0.001; };
log = { every = 1000; progress = "none"; };
CFG
pin_ranks
builds=(${BUILDS:-$build})
run() { # run NAME BUILD ARGS
    local name=$1 b=$2; shift 2
    mpirun -np "$np" --oversubscribe "${bind[@]}" sh -c \
        'exec /usr/bin/time -f %M -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' "$tmp/$name.hwm" \
        "$b/hettrain" -c "$tmp/job.cfg" -v "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" || { cat "$tmp/$name.err" >&2; exit 1; }
    sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' "$tmp/$name.out" >>"$tmp/$name.sps"
    for ((q = 0; q < np; q++)); do tail -1 "$tmp/$name.hwm.$q" >>"$tmp/$name.host.$q"; done
}
echo "== MLP 784-[$layers]-10 AdamW, batch $batch, $np ranks, $steps steps, $rounds rounds${BUCKET_MB:+, buckets $BUCKET_MB MiB}"
echo "   $(nproc) cores, ranks share them${PIN:+ (pinned, one PoCL thread each)}; load $(cut -d' ' -f1-3 /proc/loadavg)"
modes=(${MODES:-plain zero grads grads1})
declare -A opts=([plain]="--set cluster.shard=none" [zero]="--set cluster.shard=optimizer"
    [grads]="--set cluster.shard=gradients"
    [grads1]="--set cluster.shard=gradients --set cluster.overlap=false")
for ((r = 0; r < rounds; r++)); do
    for ((i = 0; i < ${#builds[@]}; i++)); do
        for m in "${modes[@]}"; do
            run "$m-$i" "${builds[i]}" ${opts[$m]}
        done
    done
done
for ((i = 0; i < ${#builds[@]}; i++)); do
    [ ${#builds[@]} -gt 1 ] && echo "-- build ${builds[i]}"
    printf '%-10s %4s %12s %12s %10s %10s\n' mode rank "now MB" "peak MB" "host MB" samples/s
    for m in "${modes[@]}"; do
        sps=$(median <"$tmp/$m-$i.sps")
        for ((q = 0; q < np; q++)); do
            host=$(median <"$tmp/$m-$i.host.$q")
            sed -nE "s/^\[rank $q\] debug: step $steps: device memory ([0-9]+) bytes in buffers \(peak ([0-9]+)\)/\1 \2/p" \
                "$tmp/$m-$i.err" | tail -1 | awk -v m=$m -v q=$q -v s="$sps" -v h="$host" \
                '{ printf "%-10s %4d %12.2f %12.2f %10.2f %10s\n", m, q, $1 / 1e6, $2 / 1e6, h / 1024, s }'
        done
    done
done
