#!/usr/bin/env bash
# Zero-bubble schedules in hetsim (issue 27): the GPT-2-1.3B-shaped job of
# bench_hetsim_scale.sh (conf/gpt2-1.3b-sim.cfg on conf/cluster-daint.cfg, 2,048 ranks, global
# batch 2048, N = D micro-batches of 1 sample, W = 2048 / D replicas): zb-v and zb-h1 beside
# 1f1b, interleaved (v = 2) and chimera at D = 8, 16, 32 stages; throughput, step time, peak
# memory. B and W split each stage's simulated backward by the layers' FLOPs (W: the
# weight-gradient GEMMs and parameter sums, ht_layer_flops_weights).
#   tools/bench/bench_hetsim_zb.sh            (from the repository root)
# STAGES="8 16 32" picks the stage counts.
. "$(dirname "$0")/common.sh"
field() { sed -nE "s/^$1 +([0-9.e+]+).*/\\1/p"; }
echo "== hetsim, zero-bubble: GPT-2-1.3B-shaped (48 x d1600, T 632), Piz-Daint-like; $(date -u +%F)"
echo "   host: $(nproc) cores, $(sed -nE 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
printf '%-12s %4s %4s %4s %4s %14s %12s %10s\n' schedule D v W N "samples/s" "step ms" "peak GB"
for D in ${STAGES:-8 16 32}; do
    W=$((2048 / D))
    for s in 1f1b interleaved chimera zb-h1 zb-v; do
        v=1; [ "$s" = interleaved ] && v=2
        [ "$s" = zb-v ] && v=2 # its two chunks a rank (hetsim sets them itself)
        if out=$("$build/hetsim" --cluster conf/cluster-daint.cfg -c conf/gpt2-1.3b-sim.cfg \
                     --set "pipe.schedule=\"$s\"" --set pipe.stages=$D --set pipe.micro_batches=$D \
                     --set pipe.chunks=$v --set train.batch=2048 2>&1); then
            printf '%-12s %4d %4d %4d %4d %14.1f %12.1f %10.2f\n' "$s" $D $v $W $D \
                "$(field throughput <<<"$out")" "$(field 'step time' <<<"$out")" \
                "$(awk '{ print $1 / 1000 }' <<<"$(field 'peak memory' <<<"$out")")"
        else
            printf '%-12s %4d %4d %4d %4d  (%s)\n' "$s" $D $v $W $D \
                "$(tail -1 <<<"$out" | sed 's/^hetsim: error: //')"
        fi
    done
done
