#!/usr/bin/env bash
# SGEMM GFLOP/s at bench_sgemm's shapes (1024^3, the MLP's and the GPTs' products): hettrain's ht_sgemm
# (the device's measured choice, or HT_GEMM=...) and OpenBLAS from build/bench/bench_sgemm,
# beside torch.matmul of PyTorch 2 (tools/bench/torch_peer.py sgemm: MKL, 2 threads), in
# interleaved rounds; medians per shape and the ratios to PyTorch 2, with the load average.
#   tools/bench/bench_sgemm_peer.sh [ROUNDS (3)] [REPS (10)]      (repository root)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}; reps=${2:-10}
build=${HT_BUILD:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "load before: $(uptime)"
for r in $(seq "$rounds"); do
    "$build/bench/bench_sgemm" --device pthread --reps "$reps" --offset 3 >"$tmp/ours.$r"
    /usr/bin/python3 tools/bench/torch_peer.py sgemm --threads 2 --steps "$reps" >"$tmp/torch.$r"
    echo "round $r done (load $(cut -d' ' -f1-3 /proc/loadavg))"
done
echo "load after: $(uptime)"
head -1 "$tmp/torch.1"
/usr/bin/python3 - "$tmp" "$rounds" <<'PY'
import statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
ours, blas, torch = {}, {}, {}
for r in range(1, n + 1):
    rows = [l for l in open(f"{d}/ours.{r}") if len(l) > 18 and l[18:].split()[:1] and l[18:].split()[0] in ("NN", "NT", "TN", "TT")]
    tl = [l.split() for l in open(f"{d}/torch.{r}") if l.startswith("sgemm ")]
    for row, t in zip(rows, tl):
        f = row[18:].split()
        key = "%-16s %s %5s %5s %5s" % (row[:18].strip(), f[0], f[1], f[2], f[3])
        ours.setdefault(key, []).append(float(f[5]))
        blas.setdefault(key, []).append(float(f[6]))
        torch.setdefault(key, []).append(float(t[2]))
med = statistics.median
print("%-36s %10s %10s %10s %8s" % ("shape (GFLOP/s, medians)", "hettrain", "OpenBLAS", "PyTorch2", "ours/pt"))
for k in ours:
    print("%-36s %10.1f %10.1f %10.1f %8.2f" % (k, med(ours[k]), med(blas[k]), med(torch[k]), med(ours[k]) / max(med(torch[k]), 1e-9)))
PY
