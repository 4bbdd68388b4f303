#!/usr/bin/env bash
# The native-kernel SGEMM path (OpenBLAS in clEnqueueNativeKernel, src/ocl/native.c) under
# the op and model tests: t_ocl's GEMM checks (all four transposes, odd shapes, offsets,
# beta, the MLP's shapes), t_mlp's whole-MLP forward and finite-difference gradient checks,
# t_conv's convolutions (im2col + GEMM) and t_tf_ops' transformer ops, each against its
# plain-C reference, with HT_GEMM=native on PoCL's CPU device (which runs native kernels;
# rusticl does not: tests/rusticl.t checks that t_gemm_native is refused there).
. "$(dirname "$0")/../lib/lib.sh"
for t in t_gemm_native t_ocl t_mlp t_conv t_tf_ops; do
    HT_GEMM=native HT_TEST_DEVICE=pthread "$HT_BUILD/tests/$t.t" >"$TMP/$t.out" 2>&1
    rc=$?
    n_ok=$(grep -c '^ok ' "$TMP/$t.out"); n_bad=$(grep -c '^not ok ' "$TMP/$t.out")
    plan=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$TMP/$t.out")
    [ $rc -eq 0 ] && [ "$n_bad" -eq 0 ] && [ "$n_ok" -gt 5 ] && [ "$n_ok" = "$plan" ]
    ok $? "$t with HT_GEMM=native: $n_ok ok of plan ${plan:-none}, $n_bad not ok, exit $rc"
    [ $rc -eq 0 ] || diag "$(grep '^not ok' "$TMP/$t.out" | head -5)" "$(tail -5 "$TMP/$t.out")"
done
done_testing
