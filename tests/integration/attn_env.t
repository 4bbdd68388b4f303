#!/usr/bin/env bash
# HT_ATTN picks the GPT blocks' attention kernels (src/nn/attn_choice.c): a byte-level GPT
# trained 5 steps with the fused kernels (cl/flash.cl) and with the T^2 kernels (cl/attn.cl)
# reaches the same losses (float sums in another order: to 1e-4), each run's --profile naming
# only its own attention kernels; a bad value exits 2 naming it.
. "$(dirname "$0")/../lib/lib.sh"
if [ ! -f "$SHAKESPEARE" ]; then
    echo "1..0 # SKIP $SHAKESPEARE not present (data/README.md)"
    exit 0
fi
set_=(--set model.n_layer=2 --set model.d_model=32 --set model.n_head=2 --set model.context=40
      --set train.batch=4 --set train.steps=5 --set train.eval_every=0 --set log.every=1
      --set log.progress=none --set checkpoint.path=)
for a in fused full; do
    HT_ATTN=$a run_ht -c conf/shakespeare-gpt.cfg -q --profile "${set_[@]}" \
        --set log.metrics="$TMP/$a.jsonl"
    if [ $a = fused ]; then want=tf_flash_ other=tf_attn_; else want=tf_attn_ other=tf_flash_; fi
    [ $RC -eq 0 ] && grep -q "^$want" <<<"$ERR" && ! grep -q "^$other" <<<"$ERR"
    ok $? "HT_ATTN=$a trains 5 steps with the ${want}* kernels only (exit $RC)"
    [ $RC -eq 0 ] || diag "$ERR"
done
sed -nE 's/.*"type":"train","step":([0-9]+),"loss":([0-9.e+-]+).*/\1 \2/p' "$TMP/fused.jsonl" >"$TMP/f"
sed -nE 's/.*"type":"train","step":([0-9]+),"loss":([0-9.e+-]+).*/\1 \2/p' "$TMP/full.jsonl" >"$TMP/u"
paste "$TMP/f" "$TMP/u" | awk 'NF == 4 && $1 == $3 { n++; d = $2 - $4; if (d < 0) d = -d
    if (d > 1e-4 * $4) bad = 1 } END { exit !(n == 5 && !bad) }'
ok $? "the same 5 losses to 1e-4 relative: fused $(cut -d' ' -f2 "$TMP/f" | tr '\n' ' ')/ full $(cut -d' ' -f2 "$TMP/u" | tr '\n' ' ')"
HT_ATTN=flash run_ht -c conf/shakespeare-gpt.cfg -q "${set_[@]}" --set log.metrics=
[ $RC -eq 2 ] && grep -q "HT_ATTN='flash': expected fused or full" <<<"$ERR"
ok $? "HT_ATTN=flash exits 2 naming the value (exit $RC)"
done_testing
