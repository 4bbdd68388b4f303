#!/usr/bin/env bash
# HT_CONV picks the convolutions' algorithms (src/nn/conv_choice.c): a small CNN (two convs
# with padding, pools, synthetic data) trained 4 steps with implicit GEMM, im2col + the tiled
# conv GEMM, im2col + ht_sgemm and the measured choice reaches the same losses (float sums in
# another order: to 1e-4 relative), each forced run's --profile naming its own kernels and
# not the others'; auto logs its choice for each conv shape; a bad value exits 2 naming it.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/pipe_gpt.sh"
mlp_cnn_jobs
set_=(-c "$TMP/cnn.cfg" --set train.steps=4 --set log.every=1 --set checkpoint.path=)
for a in implicit tiled gemm auto; do
    HT_CONV=$a run_ht "${set_[@]}" --profile --set log.metrics="$TMP/$a.jsonl"
    case $a in
        implicit) want='^conv_igemm_relu_fwd' other='^conv_gemm_out|^conv_im2col' ;;
        tiled) want='^conv_gemm_out_relu' other='^conv_igemm|^conv_out_' ;;
        gemm) want='^conv_out_relu_fwd' other='^conv_igemm|^conv_gemm_out' ;;
        auto) want='^conv 4x4x4->6 k3 s1 p1 on .*: forward [a-z]+, input gradient [a-z]+, weight gradient [a-z]+ \((measured|cached)' other='^$' ;;
    esac
    [ $RC -eq 0 ] && grep -Eq "$want" <<<"$ERR" && ! grep -Eq "$other" <<<"$ERR"
    ok $? "HT_CONV=$a trains 4 steps, the profile/log shows /$want/ (exit $RC)"
    [ $RC -eq 0 ] || diag "$ERR"
    losses "$TMP/$a.jsonl" >"$TMP/$a.loss"
done
for a in tiled gemm auto; do
    same_losses "$TMP/implicit.loss" "$TMP/$a.loss" 4 1e-4
    ok $? "HT_CONV=$a: the implicit run's 4 losses to 1e-4: $(cut -d' ' -f2 "$TMP/$a.loss" | tr '\n' ' ')"
done
HT_CONV=direct run_ht "${set_[@]}" --set log.metrics=
[ $RC -eq 2 ] && grep -q "HT_CONV='direct': expected auto, implicit, tiled or gemm" <<<"$ERR"
ok $? "HT_CONV=direct exits 2 naming the value (exit $RC)"
done_testing
