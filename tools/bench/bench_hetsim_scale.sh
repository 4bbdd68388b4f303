#!/usr/bin/env bash
# hetsim at scale: a GPT-2-1.3B-shaped job (conf/gpt2-1.3b-sim.cfg: 48 blocks, d 1600, 25
# heads, context 632) on a Piz-Daint-like cluster (conf/cluster-daint.cfg: one P100-class GPU
# per node, Aries-class links), micro-batches of 1 sample as in the Chimera paper's GPT-2 runs.
#   1. 2,048 ranks, each schedule at D = 8, 16, 32 stages (W = 2048 / D replicas, N = D
#      micro-batches per replica: global batch 2048): throughput, peak memory (fits 16 GB?);
#   2. simulation cost: 1f1b and chimera at D = 32 from 64 to 2,048 ranks (batch 32 W), and at
#      2,048 ranks with N = 32, 64, 128 micro-batches.
#   tools/bench/bench_hetsim_scale.sh            (from the repository root)
# STAGES="8 16 32" picks the stage counts of part 1 (STAGES=" " skips it).
. "$(dirname "$0")/common.sh"
sim() { "$build/hetsim" --cluster conf/cluster-daint.cfg -c conf/gpt2-1.3b-sim.cfg "$@"; }
timed() { # timed ARGS...: sim under /usr/bin/time; CPU seconds in $cpu
    /usr/bin/time -f "%U %S" -o "$tmp/time" "$build/hetsim" --cluster conf/cluster-daint.cfg \
        -c conf/gpt2-1.3b-sim.cfg "$@"
    cpu=$(awk '{ print $1 + $2 }' "$tmp/time")
}
bench_tmp
field() { sed -nE "s/^$1 +([0-9.e+]+).*/\\1/p"; }
echo "== hetsim at scale: GPT-2-1.3B-shaped (48 x d1600, T 632), Piz-Daint-like; $(date -u +%F)"
echo "   host: $(nproc) cores, $(sed -nE 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
printf '%-12s %4s %4s %4s %4s %14s %12s %10s %8s\n' schedule D v W N "samples/s" "step ms" "peak GB" "sim s"
for D in ${STAGES:-8 16 32}; do
    W=$((2048 / D))
    for s in gpipe 1f1b interleaved chimera 2bw; do
        v=1; [ "$s" = interleaved ] && v=2
        t0=$(date +%s.%N)
        if out=$(sim --set "pipe.schedule=\"$s\"" --set pipe.stages=$D --set pipe.micro_batches=$D \
                     --set pipe.chunks=$v --set train.batch=2048 2>&1); then
            t1=$(date +%s.%N)
            printf '%-12s %4d %4d %4d %4d %14.1f %12.1f %10.2f %8.2f\n' "$s" $D $v $W $D \
                "$(field throughput <<<"$out")" "$(field 'step time' <<<"$out")" \
                "$(awk '{ print $1 / 1000 }' <<<"$(field 'peak memory' <<<"$out")")" \
                "$(echo "$t1 - $t0" | bc)"
        else
            printf '%-12s %4d %4d %4d %4d  (%s)\n' "$s" $D $v $W $D "$(tail -1 <<<"$out" | sed 's/^hetsim: error: //')"
        fi
    done
done
echo
echo "== simulation cost of one hetsim run: wall seconds and CPU (user + sys) seconds"
printf '%-10s %6s %4s %4s %10s %10s %10s\n' schedule ranks W N events "wall s" "cpu s"
for s in 1f1b chimera; do
    for n in 64 128 256 512 1024 2048; do
        W=$((n / 32))
        t0=$(date +%s.%N)
        timed --ranks $n --set "pipe.schedule=\"$s\"" --set pipe.stages=32 --set pipe.micro_batches=32 \
            --set train.batch=$((32 * W)) >"$tmp/out"
        t1=$(date +%s.%N)
        printf '%-10s %6d %4d %4d %10s %10.3f %10.2f\n' "$s" $n $W 32 \
            "$(sed -nE 's/^simulated +([0-9]+) events.*/\1/p' "$tmp/out")" "$(echo "$t1 - $t0" | bc)" "$cpu"
    done
    for N in 64 128; do
        t0=$(date +%s.%N)
        timed --set "pipe.schedule=\"$s\"" --set pipe.stages=32 --set pipe.micro_batches=$N \
            --set train.batch=$((64 * N)) >"$tmp/out"
        t1=$(date +%s.%N)
        printf '%-10s %6d %4d %4d %10s %10.3f %10.2f\n' "$s" 2048 64 $N \
            "$(sed -nE 's/^simulated +([0-9]+) events.*/\1/p' "$tmp/out")" "$(echo "$t1 - $t0" | bc)" "$cpu"
    done
done
