#!/usr/bin/env bash
# The pipeline memory model against the device memory hettrain allocates (issue 11), from one
# run: per schedule and pipe.recompute ("none" / "all"), each rank's peak allocation (ht_dev_mem:
# every hettrain buffer; the tiled GEMM's packing workspace shown apart, predicted apart), the
# executor's predicted allocation (ht_mem_executor) and its error, the stage plan that the
# recompute decision uses (ht_mem_rank), and the step time (samples/s, interleaved rounds,
# median) with recomputation on against off.
#   tools/bench/bench_pipe_mem.sh [STEPS (12)] [ROUNDS (3)]      (repository root)
# Env: NP (2), LAYERS (8), DMODEL (64), BATCH (32), MB (micro-batches, 8), PIN=1 (one core and
# one PoCL thread per rank: only meaningful with NP <= cores)
. "$(dirname "$0")/common.sh"
steps=${1:-12}; rounds=${2:-3}
np=${NP:-2}; layers=${LAYERS:-8}; dmodel=${DMODEL:-64}; batch=${BATCH:-32}; nmb=${MB:-8}
bench_tmp
mpi_shm cma
pin_ranks
pipe_gpt_job 5
run() { # run NAME ARGS: mpirun NP ranks, metrics in $tmp/NAME.jsonl, samples/s appended
    local name=$1; shift
    mpirun -np "$np" --oversubscribe "${bind[@]}" "$build/hettrain" -c "$tmp/job.cfg" -q \
        --set log.metrics="$tmp/$name.jsonl" --set pipe.stages="$np" \
        --set pipe.micro_batches="$nmb" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" ||
        { cat "$tmp/$name.err" >&2; exit 1; }
    sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' "$tmp/$name.out" >>"$tmp/$name.sps"
}
echo "== GPT L$layers C$dmodel T64, batch $batch in $nmb micro-batches, $np stages, $steps steps, $rounds rounds"
echo "   $(nproc) cores$([ "${PIN:-0}" = 1 ] && echo ', ranks pinned, 1 PoCL thread each' || echo ', ranks share the cores'); load $(cut -d' ' -f1-3 /proc/loadavg)"
scheds="gpipe 1f1b hepipe 2bw"
for ((r = 0; r < rounds; r++)); do
    for s in $scheds; do
        for rc in none all; do run "$s-$rc" --set pipe.schedule="$s" --set pipe.recompute="$rc"; done
    done
done
printf '%-7s %-5s %4s %10s %9s %10s %8s %10s %10s %10s\n' schedule recomp rank "alloc MB" "GEMM MB" \
    "pred MB" error "plan MB" samples/s "all/none"
for s in $scheds; do
    for rc in none all; do
        /usr/bin/python3 - "$tmp" "$s" "$rc" <<'PY'
import json, statistics, sys
d, s, rc = sys.argv[1:]
med = lambda n: statistics.median(float(x) for x in open("%s/%s-%s.sps" % (d, s, n)))
recs = [json.loads(l) for l in open("%s/%s-%s.jsonl" % (d, s, rc))]
for r in sorted((r for r in recs if r["type"] == "pipe_memory_measured"), key=lambda r: r["rank"]):
    first = r["rank"] == 0
    print("%-7s %-5s %4d %10.3f %9.3f %10.3f %+7.3f%% %10.3f %10s %10s" % (
        s if first else "", rc if first else "", r["rank"], r["allocated_peak_bytes"] / 1e6,
        r["gemm_workspace_bytes"] / 1e6, r["predicted_bytes"] / 1e6, 100 * r["error"],
        r["plan_bytes"] / 1e6, "%.1f" % med(rc) if first else "",
        "%.3f" % (med("all") / med("none")) if first and rc == "all" else ""))
PY
    done
done
echo "alloc: the peak of hettrain's device buffers; pred: ht_mem_executor's prediction for alloc"
echo "less the GEMM packing workspace; error = (pred - (alloc - GEMM)) / (alloc - GEMM); plan: the"
echo "stage plan (ht_mem_rank) that pipe.recompute \"auto\" holds against the device's limit;"
echo "samples/s: median of $rounds; all/none: recomputation's throughput relative to none"
