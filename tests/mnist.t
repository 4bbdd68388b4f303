#!/usr/bin/env bash
# End to end on real data: the MNIST MLP (conf/mnist-mlp.cfg) reaches >= 95% validation
# accuracy on the 8,000 / 2,000 split of the MNIST test set in ../shared/data/mnist.
. "$(dirname "$0")/lib.sh"
if [ ! -f ../shared/data/mnist/t10k-images-idx3-ubyte.gz ]; then
    echo "1..0 # SKIP ../shared/data/mnist not present"
    exit 0
fi
run_ht -c conf/mnist-mlp.cfg -q --set log.metrics="$TMP/m.jsonl" --set checkpoint.path=""
acc=$(printf '%s' "$OUT" | sed -nE 's/.*val_acc ([0-9.]+)%.*/\1/p')
diag "$OUT"
[ $RC -eq 0 ] && awk -v a="$acc" 'BEGIN { exit !(a >= 95.0) }'
ok $? "MNIST MLP 784-1024-1024-10: validation accuracy $acc% >= 95% on 2,000 held-out images"
grep -q '"type":"eval"' "$TMP/m.jsonl"; ok $? "metrics file has evaluation records"
done_testing
