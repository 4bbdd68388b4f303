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
# (64), BUCKET_MB (cluster.bucket_first_mb and bucket_cap_mb for every mode; unset: defaults)
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
run() { # run NAME ARGS
    local name=$1; shift
    mpirun -np "$np" --oversubscribe "$build/hettrain" -c "$tmp/job.cfg" -v "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" || { cat "$tmp/$name.err" >&2; exit 1; }
    sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' "$tmp/$name.out" >>"$tmp/$name.sps"
}
echo "== MLP 784-[$layers]-10 AdamW, batch $batch, $np ranks, $steps steps, $rounds rounds${BUCKET_MB:+, buckets $BUCKET_MB MiB}"
echo "   $(nproc) cores, ranks share them; load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
    run plain --set cluster.shard=none
    run zero --set cluster.shard=optimizer
    run grads --set cluster.shard=gradients
    run grads1 --set cluster.shard=gradients --set cluster.overlap=false
done
printf '%-10s %4s %12s %12s %10s\n' mode rank "now MB" "peak MB" samples/s
for m in plain zero grads grads1; do
    sps=$(sort -n "$tmp/$m.sps" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
    for ((q = 0; q < np; q++)); do
        sed -nE "s/^\[rank $q\] debug: step $steps: device memory ([0-9]+) bytes in buffers \(peak ([0-9]+)\)/\1 \2/p" \
            "$tmp/$m.err" | tail -1 | awk -v m=$m -v q=$q -v s="$sps" \
            '{ printf "%-10s %4d %12.2f %12.2f %10s\n", m, q, $1 / 1e6, $2 / 1e6, s }'
    done
done
