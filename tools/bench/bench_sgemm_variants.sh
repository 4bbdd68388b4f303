#!/usr/bin/env bash
# SGEMM at the MLP's shapes on every GEMM variant of each OpenCL implementation here (issue 14),
# from one run: build/bench/bench_sgemm with HT_GEMM=tiled | clblast | clblast-cpu, best of
# REPS calls each, beside OpenBLAS on the same host (bench_sgemm prints both and the ratio), and
# a summary table of ms per shape per variant. rusticl's tiled path is 10-100x slower than its
# CLBlast there: it runs at the small shapes only (the "fc3" ones) unless RTILED=1.
#   tools/bench/bench_sgemm_variants.sh [REPS (5)]        (repository root)
# Env: RREPS (rusticl's reps, 2), DEVICES ("pthread rusticl")
. "$(dirname "$0")/common.sh"
reps=${1:-5}; rreps=${RREPS:-2}
bench_tmp
export RUSTICL_ENABLE=llvmpipe
for dev in ${DEVICES:-pthread rusticl}; do
    for v in tiled clblast clblast-cpu; do
        n=$reps only=()
        [ "$dev" = rusticl ] && n=$rreps
        [ "$dev" = rusticl ] && [ "$v" = tiled ] && [ "${RTILED:-0}" != 1 ] && only=(--only fc3)
        echo "== $dev, HT_GEMM=$v"
        HT_GEMM=$v "$build/bench/bench_sgemm" --device "$dev" --reps "$n" --offset 3 "${only[@]}" |
            tee "$tmp/$dev-$v"
    done
done
echo "== ms per call (best of the reps), per shape and variant"
/usr/bin/python3 - "$tmp" ${DEVICES:-pthread rusticl} <<'PY'
import os, re, sys
d, devs = sys.argv[1], sys.argv[2:]
vs = ["tiled", "clblast", "clblast-cpu"]
for dev in devs:
    rows = {}
    for v in vs:
        for line in open(os.path.join(d, "%s-%s" % (dev, v))):
            f = line[18:].split()  # bench_sgemm: shape (18 columns), op, M, N, K, ms, ...
            if len(f) >= 5 and re.fullmatch(r"[NT]{2}", f[0]):
                rows.setdefault("%s %s" % (line[:18].strip(), f[0]), {})[v] = float(f[4])
    print("%-8s %-22s %10s %10s %12s  best" % (dev, "shape", *vs))
    for shape, t in rows.items():
        best = min(t, key=t.get)
        print("%-8s %-22s %10s %10s %12s  %s" % ("", shape, *(("%.3f" % t[v]) if v in t else "-" for v in vs), best))
PY
