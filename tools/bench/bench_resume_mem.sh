#!/usr/bin/env bash
# Host memory of pipeline ranks resuming a sharded checkpoint (issue 24): a 4-stage 1f1b GPT
# (conf/gpt-85m-pipe.cfg narrowed by LAYERS / DMODEL / HEADS, no device limit) trains STEPS
# steps and saves its set (one shard per stage); then the same 4 ranks run one step fresh and
# one step resumed from the set. Each rank's host peak is its VmHWM at exit (the kernel's
# high-water RSS, which /usr/bin/time reports as ru_maxrss), in MB; the PoCL CPU device's
# buffers are host memory too, so the fresh run's peak is the baseline and the difference is
# what resuming costs. Run it with HT_BUILD pointing at two builds to compare them.
#   tools/bench/bench_resume_mem.sh [STEPS (1)]      (repository root)
# Env: LAYERS (4), DMODEL (384), HEADS (6), HT_BUILD, KEEP
. "$(dirname "$0")/common.sh"
steps=${1:-1}
layers=${LAYERS:-4}; dmodel=${DMODEL:-384}
bench_tmp
mpi_shm cma
args=(-c conf/gpt-85m-pipe.cfg --set model.n_layer="$layers" --set model.d_model="$dmodel"
      --set model.n_head="${HEADS:-6}" --set device.memory_mb=0 --set log.every=1
      --set pipe.schedule=1f1b --set pipe.stages=4 --set checkpoint.path="$tmp/c.safetensors")
# run NAME ARGS: the 4 ranks, each under /usr/bin/time (its peak in $tmp/NAME.hwm.RANK, kB)
run() {
    local name=$1
    shift
    mpirun -np 4 --oversubscribe --bind-to none sh -c \
        'exec /usr/bin/time -f %M -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' "$tmp/$name.hwm" \
        "$build/hettrain" "${args[@]}" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" ||
        { tail -20 "$tmp/$name.err" >&2; exit 1; }
}
echo "== $build: GPT L$layers C$dmodel T256, 1f1b over 4 ranks, batch 4 (4 micro-batches of 1)"
echo "   $(nproc) cores, ranks share them; load $(cut -d' ' -f1-3 /proc/loadavg)"
run save --set train.steps="$steps"
set_mb=$(du -cb "$tmp"/c-0000*-of-00004.safetensors | awk 'END { printf "%.1f", $1 / 1e6 }')
params=$(sed -nE 's/.* ([0-9]+) parameters.*/\1/p' "$tmp/save.err" | head -1)
echo "   the set: 4 shards, $set_mb MB (${params:-?} parameters, AdamW m and v)"
run fresh --set train.steps=1 --set checkpoint.path="$tmp/f.safetensors"
run resume --set train.steps=$((steps + 1)) --resume
grep -q "resumed from" "$tmp/resume.err" || { echo "the resume did not resume" >&2; exit 1; }
printf '%4s %12s %12s %12s\n' rank "fresh MB" "resumed MB" "resume cost"
for r in 0 1 2 3; do
    awk -v r=$r -v f="$(tail -1 "$tmp/fresh.hwm.$r")" -v s="$(tail -1 "$tmp/resume.hwm.$r")" \
        'BEGIN { printf "%4d %12.1f %12.1f %+12.1f\n", r, f / 1024, s / 1024, (s - f) / 1024 }'
done
