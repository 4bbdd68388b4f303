#!/usr/bin/env bash
# Every sync policy trains the MNIST MLP (conf/mnist-mlp.cfg as shipped: 784-1024-1024-10,
# 10 epochs of batch 256) with 4 workers, emulated slowdowns 1, 1, 2, 4, to >= 95% validation
# accuracy on the 2,000 held-out images. asp/ssp/dasp add a parameter server rank, the others
# a coordinator rank. Plain gossip trains 15 epochs (conf/README.md#sync): its models drift
# apart between exchanges, and at 10 epochs it ends at 94.9-95.2%. So does gossip-adaptive
# (95.15% at 10 epochs, below 95% in one CI run of 2026-11-28; 95.65% at 15).
# tests/run: alone (the asynchronous policies' accuracy depends on the workers' relative pace)
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
if [ ! -f "$HT_DATA/mnist/t10k-images-idx3-ubyte.gz" ]; then
    echo "1..0 # SKIP $HT_DATA/mnist not present (data/README.md)"
    exit 0
fi
for mode in bsp asp ssp dasp preduce sap-reduce gossip gossip-adaptive; do
    np=5 slow='[1, 1, 2, 4, 1]'
    [ $mode = bsp ] && np=4 slow='[1, 1, 2, 4]'
    epochs=10
    case $mode in gossip | gossip-adaptive) epochs=15 ;; esac
    t0=$(date +%s)
    mpirun_ht $np "$HETTRAIN" -c conf/mnist-mlp.cfg -q --set sync.mode=$mode --set train.epochs=$epochs \
        --set "cluster.slowdown=$slow" --set checkpoint.path='""' \
        --set log.metrics="$TMP/$mode.jsonl" >"$TMP/$mode.out" 2>"$TMP/$mode.err"
    rc=$?
    acc=$(sed -nE 's/.*val_acc ([0-9.]+)%.*/\1/p' "$TMP/$mode.out")
    [ $rc -eq 0 ] && [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 95.0) }'
    ok $? "$mode: MNIST MLP with 4 workers (slowdowns 1,1,2,4), $epochs epochs, reaches $acc% >= 95% ($(($(date +%s) - t0)) s)"
    [ $rc -eq 0 ] || diag "$(tail -5 "$TMP/$mode.err")"
done
done_testing
