#!/usr/bin/env bash
# CPU devices run ht_sgemm on our tiled kernels by default; GPUs run CLBlast. So that the
# CLBlast path stays tested where CI has only a CPU, run the GEMM checks of t_ocl (all four
# transposes, odd shapes, offsets, beta, the MLP's shapes) and the whole-MLP checks of
# t_mlp again with HT_GEMM=clblast.
. "$(dirname "$0")/lib.sh"
for t in t_ocl t_mlp; do
    HT_GEMM=clblast "$HT_BUILD/tests/$t.t" >"$TMP/$t.out" 2>&1
    rc=$?
    n_ok=$(grep -c '^ok ' "$TMP/$t.out"); n_bad=$(grep -c '^not ok ' "$TMP/$t.out")
    [ $rc -eq 0 ] && [ "$n_bad" -eq 0 ] && [ "$n_ok" -gt 10 ]
    ok $? "$t with HT_GEMM=clblast: $n_ok ok, $n_bad not ok"
    [ $rc -eq 0 ] || diag "$(grep '^not ok' "$TMP/$t.out" | head -5)"
done
done_testing
