#!/usr/bin/env bash
# Stage-local pipeline memory (issue 24): each rank's measured peak of hettrain's device
# buffers (ht_dev_mem; the tiled GEMM's packing shown apart) against the executor's prediction,
# and samples/s, for one process (D = 1) and 1f1b pipelines of D = 2 and 4 ranks, on
# conf/gpt-85m-pipe.cfg's GPT (narrowed by LAYERS / DMODEL; no device limit). Run it with
# HT_BUILD pointing at two builds to compare them.
#   tools/bench/bench_pipe_local.sh [STEPS (4)]      (repository root)
# Env: LAYERS (12), DMODEL (768), HEADS (12), HT_BUILD, KEEP
. "$(dirname "$0")/common.sh"
steps=${1:-4}
layers=${LAYERS:-12}; dmodel=${DMODEL:-768}
bench_tmp
mpi_shm cma
args=(-c conf/gpt-85m-pipe.cfg --set model.n_layer="$layers" --set model.d_model="$dmodel"
      --set model.n_head="${HEADS:-12}"
      --set device.memory_mb=0 --set train.steps="$steps" --set log.every=1)
echo "== $build: GPT L$layers C$dmodel T256, batch 4 (4 micro-batches of 1), $steps steps"
echo "   $(nproc) cores, ranks share them; load $(cut -d' ' -f1-3 /proc/loadavg)"
# D = 1: one process; its peak from the debug line of the last step
"$build/hettrain" "${args[@]}" -v --set pipe.schedule=none --set pipe.stages=1 \
    >"$tmp/d1.out" 2>"$tmp/d1.err" || { cat "$tmp/d1.err" >&2; exit 1; }
peak=$(sed -nE 's/.*device memory [0-9]+ bytes in buffers \(peak ([0-9]+)\).*/\1/p' "$tmp/d1.err" | tail -1)
sps=$(sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' "$tmp/d1.out" | tail -1)
printf '%-3s %4s %10s %9s %10s %8s %10s\n' D rank "alloc MB" "GEMM MB" "pred MB" error samples/s
awk -v p="$peak" -v s="$sps" 'BEGIN { printf "%-3s %4s %10.1f %9s %10s %8s %10s\n", 1, 0, p / 1e6, "-", "-", "-", s }'
for d in 2 4; do
    mpirun -np "$d" --oversubscribe --bind-to none "$build/hettrain" "${args[@]}" \
        --set pipe.schedule=1f1b --set pipe.stages="$d" --set log.metrics="$tmp/d$d.jsonl" \
        >"$tmp/d$d.out" 2>"$tmp/d$d.err" || { cat "$tmp/d$d.err" >&2; exit 1; }
    sps=$(sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' "$tmp/d$d.out" | tail -1)
    /usr/bin/python3 - "$tmp/d$d.jsonl" "$d" "$sps" <<'PY'
import json, sys
path, d, sps = sys.argv[1:]
for line in open(path):
    r = json.loads(line)
    if r.get("type") != "pipe_memory_measured":
        continue
    held = r["allocated_peak_bytes"] - r["gemm_workspace_bytes"]
    print("%-3s %4d %10.1f %9.1f %10.1f %+7.2f%% %10s" % (
        d, r["rank"], r["allocated_peak_bytes"] / 1e6, r["gemm_workspace_bytes"] / 1e6,
        r["predicted_bytes"] / 1e6, 100 * (r["predicted_bytes"] - held) / held, sps))
PY
done
