#!/usr/bin/env bash
# SGEMM A/B of two builds (e.g. main's and a branch's): build/bench/bench_sgemm of each, in
# interleaved rounds (old, new, old, new, ...) so that both see the same load; per shape the
# medians over the rounds of each round's best and of its median call (ms), and new/old.
#   tools/bench/bench_sgemm_ab.sh OLD_BUILD NEW_BUILD [ROUNDS (3)] [REPS (50)] [--only S ...]
# (repository root; the extra arguments go to bench_sgemm; HT_GEMM as set, e.g. tiled).
set -euo pipefail
cd "$(dirname "$0")/../.."
old=${1:?usage: bench_sgemm_ab.sh OLD_BUILD NEW_BUILD [ROUNDS] [REPS] [bench_sgemm args]}
new=${2:?usage}; rounds=${3:-3}; reps=${4:-50}; shift 2; shift $(($# < 2 ? $# : 2))
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "load before: $(uptime)"
for r in $(seq "$rounds"); do
    for v in old new; do
        b=$old; [ $v = new ] && b=$new
        "$b/bench/bench_sgemm" --device pthread --reps "$reps" --offset 3 "$@" >"$tmp/$v.$r"
    done
    echo "round $r done (load $(cut -d' ' -f1-3 /proc/loadavg))"
done
echo "load after: $(uptime)"
/usr/bin/python3 - "$tmp" "$rounds" <<'PY'
import statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
t = {}
for v in ("old", "new"):
    for r in range(1, n + 1):
        for l in open(f"{d}/{v}.{r}"):
            f = l[18:].split()
            if len(f) < 5 or f[0] not in ("NN", "NT", "TN", "TT"):
                continue
            key = "%-16s %s %5s %5s %5s" % (l[:18].strip(), f[0], f[1], f[2], f[3])
            med = float(f[9]) if len(f) > 9 else float("nan")  # an old bench_sgemm: best only
            t.setdefault(key, {}).setdefault(v, []).append((float(f[4]), med))
m = statistics.median
print("ms a call: medians over the rounds of each round's best | of its median call")
print("%-36s %8s %8s %6s | %8s %8s %6s" % ("shape", "old", "new", "new/old", "old", "new", "new/old"))
for k, v in t.items():
    ob, nb = m(x[0] for x in v["old"]), m(x[0] for x in v["new"])
    om, nm = m(x[1] for x in v["old"]), m(x[1] for x in v["new"])
    print("%-36s %8.3f %8.3f %6.2f | %8.3f %8.3f %6.2f" % (k, ob, nb, nb / ob, om, nm, nm / om))
PY
