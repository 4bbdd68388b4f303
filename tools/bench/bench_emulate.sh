#!/usr/bin/env bash
# The sync policies' time to accuracy on an emulated cluster (issue 26): hettrain emulate runs
# the MNIST MLP (conf/mnist-mlp.cfg; MODEL=gpt: the byte-level GPT, conf/shakespeare-gpt.cfg)
# on W workers of a cluster description written here, in SimGrid's virtual time: GPU-class
# devices (2 TFLOP/s at 50%, 300 GB/s, 10 us launches) at speeds 1, 1, 1/2, 1/4 repeated
# (MIX=std: the seeds' 1,1,2,4 mix as devices, not emulated idling) or 1, 1/2, ..., 1/8
# repeated (MIX=tail: the long tail 1...8), 4 devices per host on a 10 GB/s link, hosts on
# 1.25 GB/s (10 GbE). Policies other than bsp get one extra rank (a full-speed device) for
# their server / coordinator. For every policy: virtual seconds until the validation accuracy
# first reached TARGET (MODEL=gpt: the validation loss first fell to TARGET; time_s of the
# eval records), the final accuracy (loss), the virtual training time, bytes sent by all
# ranks, and OUT/curve-*.csv (policy, virtual s, step, accuracy or loss) with a text plot of
# it. Every figure is deterministic: the same command gives the same table on any machine.
#   tools/bench/bench_emulate.sh [POLICIES...]        (from the repository root)
#   env: W (8), MIX (std | tail), MODEL (mlp | gpt), TARGET (0.90; gpt: 2.5), EPOCHS (3;
#        mlp), STEPS (200; gpt), EVAL (5; gpt 10), OUT (bench-emulate), HT_BUILD (build),
#        HT_SMPI_BIN (default $HT_BUILD-smpi/hettrain-smpi), SET (one more --set for every
#        policy, e.g. SET=sync.period=4), PLOT (1: print the text plot), GFLOPS (2000: the
#        full-speed device's peak; 20: compute-bound, as CPU nodes), HIDDEN (the MLP's hidden
#        layers, e.g. 128: a 0.1M-parameter MLP, 18x less real work per run), HOST (1: the host
#        side costs too: PCIe copies at 12 GB/s each way, host passes at 10 GB/s, as hetsim
#        charges them; 0: free, as before 2026-11-28 10:00)
. "$(dirname "$0")/common.sh"
W=${W:-8}; MIX=${MIX:-std}; MODEL=${MODEL:-mlp}; OUT=${OUT:-bench-emulate}; PLOT=${PLOT:-1}
HOST=${HOST:-0}; GFLOPS=${GFLOPS:-2000}
EPOCHS=${EPOCHS:-3}
if [ "$MODEL" = gpt ]; then
    # a tiny GPT (2 blocks of width 64, 4 heads, context 32: 0.12M parameters), so that a
    # policy's run takes minutes of wall time even at 16 emulated ranks; batch 64 sequences
    # (8 a worker at 8 workers, 1 at 64), warm-up 20 steps, cosine decay over STEPS
    TARGET=${TARGET:-2.5}; EVAL=${EVAL:-10}; STEPS=${STEPS:-200}; job=conf/shakespeare-gpt.cfg
    len=(--set train.steps="$STEPS" --set train.eval_every="$EVAL" --set train.eval_batches=4
         --set model.n_layer=2 --set model.d_model=64 --set model.context=32
         --set train.batch=64 --set optim.warmup=20)
else
    TARGET=${TARGET:-0.90}; EVAL=${EVAL:-5}; job=conf/mnist-mlp.cfg
    len=(--set train.epochs="$EPOCHS" --set train.eval_every="$EVAL")
    [ -z "${HIDDEN:-}" ] || len+=(--set "model.hidden=[$HIDDEN]")
fi
case $MIX in
std) kinds=(g1 g1 g2 g4) ;;
tail) kinds=(g1 g2 g3 g4 g5 g6 g7 g8) ;;
*) echo "bench_emulate: MIX is std or tail, not '$MIX'" >&2; exit 2 ;;
esac
smpi=${HT_SMPI_BIN:-$build-smpi/hettrain-smpi}
policies=("$@")
[ ${#policies[@]} -gt 0 ] ||
    policies=(bsp asp ssp dasp preduce sap-reduce gossip gossip-fixed gossip-adaptive)
mkdir -p "$OUT"
# cluster RANKS: hosts of 4 devices cycling through kinds[] (the last host cut short)
cluster() {
    local n=$1 devs=() h="" i k
    for ((i = 0; i < n; i++)); do devs+=("${kinds[i % ${#kinds[@]}]}"); done
    for ((i = 0; i < n; i += 4)); do
        local list="" j
        for ((j = i; j < n && j < i + 4; j++)); do list="$list${list:+, }\"${devs[j]}\""; done
        h="$h${h:+, }{ devices = [$list]; }"
    done
    echo 'devices = ('
    local pcie=""
    [ "$HOST" = 1 ] && pcie=" h2d_gbs = 12.0; d2h_gbs = 12.0;"
    echo "  { name = \"g1\"; gflops = $GFLOPS; efficiency = 0.5; mem_bw_gbs = 300.0; launch_us = 10.0;$pcie }"
    for k in 2 3 4 5 6 7 8; do
        echo "  , { name = \"g$k\"; like = \"g1\"; scale = $(/usr/bin/python3 -c "print(1/$k)"); }"
    done
    echo ');'
    [ "$HOST" = 1 ] && echo 'host_add_gbs = 10.0;'
    cat <<CFG
hosts = ( $h );
links = { intra = { latency_us = 5.0; bandwidth_gbs = 10.0; };
          inter = { latency_us = 30.0; bandwidth_gbs = 1.25; }; };
CFG
}
tag=$MODEL-$W-$MIX
[ "$GFLOPS" = 2000 ] || tag=$tag$GFLOPS
for p in "${policies[@]}"; do
    np=$W
    [ "$p" = bsp ] || np=$((W + 1))
    # the server's device: full speed (the mix is over the workers)
    if [ "$p" = bsp ]; then cluster "$W"; else cluster "$W" | sed -E "s/^hosts = \( (.*) \);/hosts = ( \1, { devices = [\"g1\"]; } );/"; fi >"$OUT/cluster-$W-$MIX-$p.cfg"
    echo "bench_emulate: $MODEL $MIX $p ($np ranks)..." >&2
    rm -f "$OUT/$tag-$p.jsonl" "$OUT/$tag-$p.failed"
    "$build/hettrain" emulate --cluster "$OUT/cluster-$W-$MIX-$p.cfg" -c "$job" \
        --smpi "$smpi" --out "$OUT/platform-$tag-$p" --set sync.mode="$p" "${len[@]}" \
        --set checkpoint.path='""' \
        --set log.metrics="$OUT/$tag-$p.jsonl" --set sync.log="$OUT/$tag-$p.log" \
        ${SET:+--set "$SET"} -- -q \
        >"$OUT/$tag-$p.out" 2>"$OUT/$tag-$p.err" ||
        { echo $? >"$OUT/$tag-$p.failed"; tail -5 "$OUT/$tag-$p.err" >&2; }
done

/usr/bin/python3 "$(dirname "$0")/emulate_table.py" "$OUT" "$tag" "$TARGET" "$PLOT" "${policies[@]}"
