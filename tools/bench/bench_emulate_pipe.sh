#!/usr/bin/env bash
# Pipelines on an emulated cluster (issue 26: 1F1B, Chimera and HePipe at 4 and 8 stages with
# slowdowns): the GPT of the pipeline benches (common.sh pipe_gpt_job: LAYERS blocks of width
# DMODEL, context 64, batch BATCH, N micro-batches, STEPS steps) on D devices of speeds
# 1, 1, 1/2, 1/4 repeated (GPU-class, as bench_emulate.sh; 4 per host on 10 GB/s, hosts on
# 10 GbE), run by hettrain emulate in SimGrid's virtual time: 1f1b on the uniform partition
# (the baseline), 1f1b and hepipe on the hetero partition (stage cuts by measured speed),
# chimera (uniform: its two pipelines need equal stages). Per run: the virtual step (the
# longest rank's "pipe" step_s: the mean over the steps after the first), samples/s and the
# ratio to uniform 1f1b. Deterministic: the same command gives the same table on any machine.
#   tools/bench/bench_emulate_pipe.sh [D...]        (default: 4 8)
#   env: LAYERS (16), DMODEL (128), BATCH (64), N (8), STEPS (6), OUT (bench-emulate-pipe),
#        MIX ("1 1 2 4": the devices' slowness, repeated; "1": equal devices), RUNS (the
#        "schedule:partition" list, default "1f1b:uniform 1f1b:hetero hepipe:hetero
#        chimera:uniform"; e.g. zb-h1:uniform zb-v:uniform zb-het:hetero)
# Also per run: the measured bubble (pipe_summary's bubble_measured: idle share of the ranks'
# virtual time) and the checker's at unit times.
. "$(dirname "$0")/common.sh"
layers=${LAYERS:-16}; dmodel=${DMODEL:-128}; batch=${BATCH:-64}; nmb=${N:-8}; steps=${STEPS:-6}
OUT=${OUT:-bench-emulate-pipe}
smpi=${HT_SMPI_BIN:-$build-smpi/hettrain-smpi}
Ds=("$@")
[ ${#Ds[@]} -gt 0 ] || Ds=(4 8)
mkdir -p "$OUT"
tmp=$OUT
pipe_gpt_job "$steps"
read -ra mix <<<"${MIX:-1 1 2 4}"
read -ra runs <<<"${RUNS:-1f1b:uniform 1f1b:hetero hepipe:hetero chimera:uniform}"
cluster() { # cluster D: the MIX's speeds repeated, 4 devices per host
    local n=$1 kinds=("${mix[@]/#/g}") h="" i j
    for ((i = 0; i < n; i += 4)); do
        local list=""
        for ((j = i; j < n && j < i + 4; j++)); do list="$list${list:+, }\"${kinds[j % ${#kinds[@]}]}\""; done
        h="$h${h:+, }{ devices = [$list]; }"
    done
    cat <<CFG
devices = (
  { name = "g1"; gflops = 2000.0; efficiency = 0.5; mem_bw_gbs = 300.0; launch_us = 10.0; },
  { name = "g2"; like = "g1"; scale = 0.5; },
  { name = "g4"; like = "g1"; scale = 0.25; }
);
hosts = ( $h );
links = { intra = { latency_us = 5.0; bandwidth_gbs = 10.0; };
          inter = { latency_us = 30.0; bandwidth_gbs = 1.25; }; };
CFG
}
echo "GPT L$layers C$dmodel T64, batch $batch, N=$nmb, $steps steps; emulated devices slowed ${mix[*]} repeated (virtual time)"
printf '%-4s %-16s %12s %12s %7s %8s %8s\n' D run "step (ms)" samples/s ratio bubble "pred F=1"
for D in "${Ds[@]}"; do
    cluster "$D" >"$OUT/cluster-$D.cfg"
    base=""
    for cfg in "${runs[@]}"; do
        IFS=: read -r sched part <<<"$cfg"
        name=$sched-$part-$D
        echo "bench_emulate_pipe: $name..." >&2
        "$build/hettrain" emulate --cluster "$OUT/cluster-$D.cfg" -c "$OUT/job.cfg" --smpi "$smpi" \
            --out "$OUT/platform-$name" --set log.metrics="$OUT/$name.jsonl" \
            --set pipe.schedule="$sched" --set pipe.partition="$part" --set pipe.stages="$D" \
            --set pipe.micro_batches="$nmb" -- -q >"$OUT/$name.out" 2>"$OUT/$name.err" ||
            { tail -5 "$OUT/$name.err"; continue; }
        read -r s bub pred < <(/usr/bin/python3 - "$OUT/$name.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
summ = [r for r in recs if r["type"] == "pipe_summary"][0]
print(max(r["step_s"] for r in recs if r["type"] == "pipe"), summ["bubble_measured"],
      summ["bubble_unit_times"])
PY
)
        [ -z "$base" ] && base=$s
        awk -v n="$name" -v D="$D" -v s="$s" -v b="$base" -v B="$batch" -v u="$bub" -v p="$pred" 'BEGIN {
            printf "%-4s %-16s %12.3f %12.0f %7.2f %8.3f %8.3f\n", D, substr(n, 1, length(n) - length(D) - 1), s * 1e3, B / s, b / s, u, p }'
    done
done
