#!/usr/bin/env bash
# Online re-partitioning (issue 11, pipe.rebalance) side by side, from one run: 2 ranks train a
# GPT of 8 blocks on the hetero cut; rank 1 becomes SLOW times slower at step AT
# (cluster.slowdown_from). Three runs of the same schedule:
#   static   pipe.rebalance = false: the start-up cut, made for equal ranks, stays;
#   repart   the default: the cut follows the measured compute;
#   known    the slowdown in force from step 0, so the start-up cut already plans for it (what
#            re-partitioning can at best reach).
# Per run: samples/s over the steps after AT (the step that re-partitions counts, with the
# layers' move and the executor's rebuild), the cuts, and the ratios repart / static and
# repart / known.
#   tools/bench/bench_repart.sh [STEPS] [hettrain args...]
# Env: SCHED (1f1b), SLOW (3.0), AT (10), LAYERS (8), DMODEL (64), BATCH (32), N (8), PIN=1 (one
# core and one PoCL thread per rank). Run from the repository root.
. "$(dirname "$0")/common.sh"
steps=${1:-60}; shift || true
args=("$@")
sched=${SCHED:-1f1b}; slow=${SLOW:-3.0}; at=${AT:-10}; layers=${LAYERS:-8}
dmodel=${DMODEL:-64}; batch=${BATCH:-32}; nmb=${N:-8}
bench_tmp
mpi_shm cma
pin_ranks
pipe_gpt_job 1
cat >>"$tmp/job.cfg" <<CFG
pipe = { schedule = "$sched"; stages = 2; micro_batches = $nmb; partition = "hetero"; };
cluster = { slowdown = [1.0, $slow]; };
CFG
run() { # run NAME ARGS
    local name=$1; shift
    mpirun -np 2 "${bind[@]}" "$build/hettrain" -c "$tmp/job.cfg" \
        --set log.metrics="$tmp/$name.jsonl" "$@" ${args[@]+"${args[@]}"} \
        >"$tmp/$name.out" 2>"$tmp/$name.err" || { cat "$tmp/$name.err" >&2; exit 1; }
}
echo "== re-partitioning: $sched on 2 ranks, rank 1 ${slow}x slower from step $at: GPT" \
     "L$layers C$dmodel T64, batch $batch, N=$nmb, $steps steps"
echo "   $(nproc) cores$([ "${PIN:-0}" = 1 ] && echo ', ranks pinned, 1 PoCL thread each' || echo ', ranks share the cores')"
run static --set pipe.rebalance=false --set "cluster.slowdown_from=[0,$at]"
run repart --set "cluster.slowdown_from=[0,$at]"
run known --set "cluster.slowdown_from=[0,0]"
/usr/bin/python3 - "$tmp" "$at" "$batch" ${VERBOSE:+v} <<'PY'
import json, re, sys
tmp, at, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
verbose = len(sys.argv) > 4
def rate(name):  # samples/s over the steps after `at`: each record is one step
    recs = [json.loads(l) for l in open(f"{tmp}/{name}.jsonl")]
    tr = [r for r in recs if r["type"] == "train" and r["step"] > at + 1]
    t = sum(batch / r["samples_per_s"] for r in tr)
    cut = re.findall(r"stage 1: rank 1, layers (\d+)-(\d+)", open(f"{tmp}/{name}.err").read())
    moves = [f'{r["step"]}: {r["from"]} -> {r["to"]}{" (undone)" if r["reverted"] else ""}{" k " + r["factors"] if verbose else ""}'
             for r in recs if r["type"] == "pipe_repartition"]
    return len(tr) * batch / t, cut, moves
res = {n: rate(n) for n in ("static", "repart", "known")}
print(f'{"run":8} {"samples/s after":>16}  rank 1 layers (start -> end)  re-partitions')
for n, (r, cut, moves) in res.items():
    c = " -> ".join(f"{int(b) - int(a) + 1}" for a, b in cut)
    print(f'{n:8} {r:16.1f}  {c:28}  {"; ".join(moves) or "none"}')
s, p, k = res["static"][0], res["repart"][0], res["known"][0]
print(f"repart / static {p / s:.2f}x, repart / known {p / k:.2f}x")
PY
