#!/usr/bin/env bash
# SGEMM GFLOP/s at bench_sgemm's shapes (1024^3, the MLP's and the GPTs' products): hettrain's ht_sgemm
# (the device's measured choice, or HT_GEMM=...) and OpenBLAS from build/bench/bench_sgemm,
# beside torch.matmul of PyTorch 2 (tools/bench/torch_peer.py sgemm: MKL, 2 threads), in
# interleaved rounds, with the load average. Each round gives every library's best and median of
# REPS calls a shape; printed: the medians over the rounds of both, and our ratio to PyTorch 2
# by each (a 0.1-1 ms product's best is mostly a lucky wake-up of PoCL's threads: the median
# ratio is the robust one).
#   tools/bench/bench_sgemm_peer.sh [ROUNDS (3)] [REPS (10)]      (repository root)
# ONLY=S: the shapes whose short name contains S (torch_peer.py's names: "gpt", "fc2", "g85").
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}; reps=${2:-10}
build=${HT_BUILD:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "load before: $(uptime)"
for r in $(seq "$rounds"); do
    "$build/bench/bench_sgemm" --device pthread --reps "$reps" --offset 3 ${ONLY:+--only "$ONLY"} \
        >"$tmp/ours.$r"
    /usr/bin/python3 tools/bench/torch_peer.py sgemm --threads 2 --steps "$reps" \
        ${ONLY:+--only "$ONLY"} >"$tmp/torch.$r"
    echo "round $r done (load $(cut -d' ' -f1-3 /proc/loadavg))"
done
echo "load after: $(uptime)"
head -1 "$tmp/torch.1"
/usr/bin/python3 - "$tmp" "$rounds" <<'PY'
import statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
ours, blas, torch, oursm, blasm, torchm = {}, {}, {}, {}, {}, {}
for r in range(1, n + 1):
    rows = [l for l in open(f"{d}/ours.{r}") if len(l) > 18 and l[18:].split()[:1] and l[18:].split()[0] in ("NN", "NT", "TN", "TT")]
    tl = [l.split() for l in open(f"{d}/torch.{r}") if l.startswith("sgemm ")]
    for row, t in zip(rows, tl):
        f = row[18:].split()  # op M N K ms GF/s BLAS ratio err | med-ms med-GF/s BLAS-med ...
        key = "%-16s %s %5s %5s %5s" % (row[:18].strip(), f[0], f[1], f[2], f[3])
        for tab, v in ((ours, f[5]), (blas, f[6]), (torch, t[2]), (oursm, f[10]), (blasm, f[11]), (torchm, t[3])):
            tab.setdefault(key, []).append(float(v))
med = statistics.median
print("GFLOP/s, medians over the rounds of each round's best | of each round's median")
print("%-36s %8s %8s %8s %6s | %8s %8s %8s %6s" % ("shape", "hettrain", "OpenBLAS", "PyTorch2", "ours/pt", "hettrain", "OpenBLAS", "PyTorch2", "ours/pt"))
for k in ours:
    b = (med(ours[k]), med(blas[k]), med(torch[k]))
    m = (med(oursm[k]), med(blasm[k]), med(torchm[k]))
    print("%-36s %8.1f %8.1f %8.1f %6.2f | %8.1f %8.1f %8.1f %6.2f" % (k, *b, b[0] / max(b[2], 1e-9), *m, m[0] / max(m[2], 1e-9)))
PY
