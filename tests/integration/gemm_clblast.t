#!/usr/bin/env bash
# PoCL's CPU device runs ht_sgemm on our tiled kernels by measurement; other devices may run
# CLBlast, with its own parameters or the built-in set. So that both CLBlast variants stay
# tested where CI has only PoCL, run the GEMM checks of t_ocl (all four transposes, odd
# shapes, offsets, beta, the MLP's shapes) and the whole-MLP checks of t_mlp again with
# HT_GEMM=clblast (CLBlast's own parameters: mostly its direct kernel here) and
# HT_GEMM=clblast-cpu (the built-in set: its indirect Xgemm with the helper kernels).
. "$(dirname "$0")/../lib/lib.sh"
for v in clblast clblast-cpu; do
    for t in t_ocl t_mlp; do
        HT_GEMM=$v "$HT_BUILD/tests/$t.t" >"$TMP/$t.out" 2>&1
        rc=$?
        n_ok=$(grep -c '^ok ' "$TMP/$t.out"); n_bad=$(grep -c '^not ok ' "$TMP/$t.out")
        [ $rc -eq 0 ] && [ "$n_bad" -eq 0 ] && [ "$n_ok" -gt 10 ]
        ok $? "$t with HT_GEMM=$v: $n_ok ok, $n_bad not ok"
        [ $rc -eq 0 ] || diag "$(grep '^not ok' "$TMP/$t.out" | head -5)"
    done
done
done_testing
