#!/usr/bin/env bash
# The 85M GPT under its device limit (issue 24): conf/gpt-85m-pipe.cfg (memory_mb 800) as 4
# 1f1b pipeline ranks, each rank's measured peak of hettrain's device buffers from start-up
# on (pipe_memory_measured) beside the memory model's prediction and the limit, and the
# losses; then one process with the same limit, which must exit 2 before training.
#   tools/bench/bench_pipe_85m.sh [STEPS (2)]      (repository root)
# Env: HT_BUILD, KEEP
. "$(dirname "$0")/common.sh"
steps=${1:-2}
bench_tmp
mpi_shm cma
echo "== $build: conf/gpt-85m-pipe.cfg, 4 ranks (1f1b), $steps steps"
echo "   $(nproc) cores, ranks share them; load $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s)
mpirun -np 4 --oversubscribe --bind-to none "$build/hettrain" -c conf/gpt-85m-pipe.cfg \
    --set train.steps="$steps" --set log.metrics="$tmp/m.jsonl" --set log.progress=none \
    >"$tmp/p.out" 2>"$tmp/p.err" || { tail -5 "$tmp/p.err" >&2; exit 1; }
echo "   $(( $(date +%s) - t0 )) s in all; $(grep -c 'over its limit\|more than its limit' "$tmp/p.err") over-limit warnings"
/usr/bin/python3 - "$tmp/m.jsonl" <<'PY'
import json, sys
print("%4s %10s %9s %10s %8s %9s" % ("rank", "alloc MB", "GEMM MB", "pred MB", "error", "limit MB"))
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "train":
        print("   step %d loss %.4f" % (r["step"], r["loss"]))
    if r.get("type") != "pipe_memory_measured":
        continue
    held = r["allocated_peak_bytes"] - r["gemm_workspace_bytes"]
    print("%4d %10.1f %9.1f %10.1f %+7.2f%% %9.1f" % (
        r["rank"], r["allocated_peak_bytes"] / 1e6, r["gemm_workspace_bytes"] / 1e6,
        r["predicted_bytes"] / 1e6, 100 * (r["predicted_bytes"] - held) / held,
        r["limit_bytes"] / 1e6))
PY
rc=0
"$build/hettrain" -c conf/gpt-85m-pipe.cfg --set pipe.schedule=none --set pipe.stages=1 \
    >/dev/null 2>"$tmp/one.err" || rc=$?
echo "one process, same limit: exit $rc ($(grep -m1 'memory_mb' "$tmp/one.err" | cut -c1-300) ...)"
