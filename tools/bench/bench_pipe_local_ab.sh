#!/usr/bin/env bash
# Stage-local pipeline memory against the whole-model allocation (issue 24): the same 1f1b
# pipeline job run by two or more hettrain builds, in interleaved rounds (the builds' order
# turns each round), each run's samples/s from the end of its first step (hettrain's
# "final:" line: start-up, kernel compilation and the first step left out) and the CPU
# seconds of all its ranks (user + sys, start-up included: less sensitive to the machine's
# load than samples/s), the medians of the rounds per build and their ratios to the first
# build's; each run's largest measured peak of device buffers beside it
# (pipe_memory_measured, where the build writes it).
#   tools/bench/bench_pipe_local_ab.sh BUILD_DIR... [-- ROUNDS (3)]      (repository root)
# e.g. a build of a commit from before stage-local memory and this one:
#   tools/bench/bench_pipe_local_ab.sh /tmp/old/build build -- 5
# Env: NP (4), LAYERS (12), DMODEL (256), HEADS (4), CONTEXT (128), BATCH (8), MB (micro-batches, 8),
# STEPS (6), KEEP
. "$(dirname "$0")/common.sh"
builds=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do builds+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
rounds=${1:-3}
[ ${#builds[@]} -ge 2 ] || { echo "usage: $0 BUILD_DIR BUILD_DIR... [-- ROUNDS]" >&2; exit 2; }
np=${NP:-4}; layers=${LAYERS:-12}; dmodel=${DMODEL:-256}; steps=${STEPS:-6}
bench_tmp
mpi_shm cma
args=(-c conf/gpt-85m-pipe.cfg --set model.n_layer="$layers" --set model.d_model="$dmodel"
      --set model.n_head="${HEADS:-4}" --set model.context="${CONTEXT:-128}"
      --set train.batch="${BATCH:-8}" --set pipe.micro_batches="${MB:-8}"
      --set device.memory_mb=0 --set train.steps="$steps" --set log.every=1
      --set pipe.schedule=1f1b --set pipe.stages="$np" --set log.progress=none)
echo "== GPT L$layers C$dmodel T${CONTEXT:-128}, batch ${BATCH:-8} in ${MB:-8} micro-batches, 1f1b over $np ranks, $steps steps, $rounds rounds"
echo "   $(nproc) cores, ranks share them; load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
    for ((i = 0; i < ${#builds[@]}; i++)); do
        k=$(((i + r) % ${#builds[@]})) # each round starts with the next build
        b=${builds[$k]}
        /usr/bin/time -f "%U %S" -o "$tmp/b$k-r$r.time" \
            mpirun -np "$np" --oversubscribe --bind-to none "$b/hettrain" "${args[@]}" \
            --set log.metrics="$tmp/b$k-r$r.jsonl" >"$tmp/b$k-r$r.out" 2>"$tmp/b$k-r$r.err" ||
            { tail -5 "$tmp/b$k-r$r.err" >&2; exit 1; }
        s=$(sps "$tmp/b$k-r$r.out")
        cpu=$(awk '{ printf "%.1f", $1 + $2 }' "$tmp/b$k-r$r.time")
        echo "$s" >>"$tmp/b$k.sps"
        echo "$cpu" >>"$tmp/b$k.cpu"
        peak=$(grep -h '"type":"pipe_memory_measured"' "$tmp/b$k-r$r.jsonl" 2>/dev/null |
               sed -E 's/.*"allocated_peak_bytes":([^,]+),.*/\1/' | sort -g | tail -1)
        echo "   round $r: $b: $s samples/s, $cpu CPU s (all ranks, start-up included), largest rank peak ${peak:+$(awk -v p="$peak" 'BEGIN { printf "%.1f MB", p / 1e6 }')}; load $(cut -d' ' -f1 /proc/loadavg)"
    done
done
base=$(median <"$tmp/b0.sps")
cbase=$(median <"$tmp/b0.cpu")
printf '%-36s %11s %8s %11s %8s  %s\n' build "median s/s" "vs first" "median CPU" "vs first" "samples/s by round"
for ((k = 0; k < ${#builds[@]}; k++)); do
    m=$(median <"$tmp/b$k.sps")
    c=$(median <"$tmp/b$k.cpu")
    printf '%-36s %11s %8s %11s %8s  %s\n' "${builds[$k]}" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN { printf "%.3f", a / b }')" \
        "$c" "$(awk -v a="$c" -v b="$cbase" 'BEGIN { printf "%.3f", a / b }')" "$(tr '\n' ' ' <"$tmp/b$k.sps")"
done
echo "   load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
