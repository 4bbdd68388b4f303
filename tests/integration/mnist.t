#!/usr/bin/env bash
# End to end on real data, the 8,000 / 2,000 split of the MNIST test set in
# data/mnist: the MLP (conf/mnist-mlp.cfg) reaches >= 95% validation accuracy,
# the CNN (conf/mnist-cnn.cfg) >= 97%; both configs run as shipped.
. "$(dirname "$0")/../lib/lib.sh"
if [ ! -f "$HT_DATA/mnist/t10k-images-idx3-ubyte.gz" ]; then
    echo "1..0 # SKIP $HT_DATA/mnist not present (data/README.md)"
    exit 0
fi
run_ht -c conf/mnist-mlp.cfg -q --set log.metrics="$TMP/m.jsonl" --set checkpoint.path=""
acc=$(printf '%s' "$OUT" | sed -nE 's/.*val_acc ([0-9.]+)%.*/\1/p')
diag "$OUT"
[ $RC -eq 0 ] && awk -v a="$acc" 'BEGIN { exit !(a >= 95.0) }'
ok $? "MNIST MLP 784-1024-1024-10: validation accuracy $acc% >= 95% on 2,000 held-out images"
grep -q '"type":"eval"' "$TMP/m.jsonl"; ok $? "metrics file has evaluation records"

run_ht -c conf/mnist-cnn.cfg -q --set log.metrics="$TMP/c.jsonl" --set checkpoint.path=""
acc=$(printf '%s' "$OUT" | sed -nE 's/.*val_acc ([0-9.]+)%.*/\1/p')
diag "$OUT"
[ $RC -eq 0 ] && awk -v a="$acc" 'BEGIN { exit !(a >= 97.0) }'
ok $? "MNIST CNN (conv5x32-pool-conv5x64-pool-512-10): validation accuracy $acc% >= 97%"
done_testing
