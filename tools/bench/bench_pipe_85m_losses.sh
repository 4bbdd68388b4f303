#!/usr/bin/env bash
# The 85M GPT's demonstration of issue 24 ("Show it"), conf/gpt-85m-pipe.cfg as written
# (batch 4 in 4 micro-batches of 1, the smallest micro-batch; AdamW; device.memory_mb 800):
#   1. 4 1f1b pipeline ranks with the 800 MB limit train STEPS steps and write their checkpoint
#      (one shard per stage); each rank's measured peak beside the prediction and the limit;
#   2. one process without a limit trains STEPS + MORE steps: the reference;
#   3. the 4 ranks' first STEPS losses against the reference's (|a - b| <= 1e-4);
#   4. the 4 ranks' set resumed for MORE steps in 2 1f1b pipeline ranks and in one process
#      (both without a limit: 6 blocks and their AdamW state do not fit 800 MB), their losses
#      against the reference's next MORE (|a - b| <= 1e-4);
#   5. one process with the limit exits 2 before training.
# Hours on a loaded 2-core machine (a step of 4 ranks is about a minute there); every phase's
# output stays in KEEP (default: a temp folder, removed) and is printed as it ends.
#   tools/bench/bench_pipe_85m_losses.sh [STEPS (20)] [MORE (3)]      (repository root)
# Env: HT_BUILD, KEEP, EXTRA (more --set options, split at spaces: e.g. a narrower model to
# try the script in seconds)
. "$(dirname "$0")/common.sh"
steps=${1:-20}
more=${2:-3}
total=$((steps + more))
bench_tmp
mpi_shm cma
# shellcheck disable=SC2206 # EXTRA is split at spaces on purpose
cfg=(-c conf/gpt-85m-pipe.cfg --set log.progress=none ${EXTRA:-})
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "== $build: conf/gpt-85m-pipe.cfg; $(nproc) cores, ranks share them; load $(load)"
# run NAME CMD...: CMD with its stdout/stderr in $tmp/NAME.{out,err}, timed
run() {
    local name=$1 t0=$SECONDS
    shift
    "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || { echo "$name failed:" >&2; tail -5 "$tmp/$name.err" >&2; exit 1; }
    echo "   $name: $((SECONDS - t0)) s, load after $(load)"
}
# losses NAME: "step loss" of each train record
losses() { grep '"type":"train"' "$tmp/$1.jsonl" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
# compare A B FIRST LAST: steps FIRST..LAST of A's and B's losses side by side; exit 1 unless
# both have every step and |a - b| <= 1e-4 at each
compare() {
    awk -v lo="$3" -v hi="$4" -v a="$1" -v b="$2" '
        NR == FNR { ref[$1] = $2; next }
        $1 >= lo && $1 <= hi && ($1 in ref) { d = $2 - ref[$1]; if (d < 0) d = -d; n++; if (d > m) m = d
            r = d / ref[$1]; if (r > mr) mr = r
            printf "   step %2d  %-4s %.6f  %-4s %.6f  |d| %.2e\n", $1, a, $2, b, ref[$1], d }
        END { printf "   steps %d-%d: %d of %d compared, largest |d| %.2e (relative %.2e): %s\n",
                     lo, hi, n, hi - lo + 1, m, mr, (n == hi - lo + 1 && m <= 1e-4) ? "within 1e-4" : "NOT within 1e-4"
              exit !(n == hi - lo + 1 && m <= 1e-4) }' <(losses "$2") <(losses "$1")
}
# peaks NAME: each rank's measured peak beside the prediction and the limit
peaks() {
    /usr/bin/python3 - "$tmp/$1.jsonl" <<'PY'
import json, sys
print("   %4s %10s %9s %10s %8s %9s" % ("rank", "alloc MB", "GEMM MB", "pred MB", "error", "limit MB"))
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") != "pipe_memory_measured":
        continue
    held = r["allocated_peak_bytes"] - r["gemm_workspace_bytes"]
    print("   %4d %10.1f %9.1f %10.1f %+7.2f%% %9.1f" % (
        r["rank"], r["allocated_peak_bytes"] / 1e6, r["gemm_workspace_bytes"] / 1e6,
        r["predicted_bytes"] / 1e6, 100 * (r["predicted_bytes"] - held) / held,
        r["limit_bytes"] / 1e6))
PY
}
status=0

echo "-- 4 ranks (1f1b, 4 stages), the config's limit (device.memory_mb), $steps steps, checkpoint at the end"
mkdir -p "$tmp/p4"
rm -f "$tmp"/p4/g.ckpt*
run p4 mpirun -np 4 --oversubscribe --bind-to none "$build/hettrain" "${cfg[@]}" \
    --set train.steps="$steps" --set log.metrics="$tmp/p4.jsonl" --set checkpoint.path="$tmp/p4/g.ckpt"
peaks p4
echo "   $(grep -c 'over its limit\|more than its limit' "$tmp/p4.err") over-limit warnings;" \
     "checkpoint: $(cd "$tmp/p4" && ls | tr '\n' ' ')"

echo "-- one process, no limit, $total steps (the reference)"
run one "$build/hettrain" "${cfg[@]}" --set device.memory_mb=0 --set pipe.schedule=none \
    --set pipe.stages=1 --set train.steps="$total" --set log.metrics="$tmp/one.jsonl"
echo "-- the 4 ranks' losses against one process's"
compare p4 one 1 "$steps" || status=1

for n in 2 1; do
    echo "-- the 4 ranks' set resumed in $n $([ $n = 1 ] && echo process || echo '1f1b pipeline ranks'), no limit, to step $total"
    rm -rf "$tmp/r$n" && mkdir "$tmp/r$n" && cp "$tmp"/p4/g.ckpt* "$tmp/r$n/"
    common=("${cfg[@]}" --resume --set device.memory_mb=0 --set train.steps="$total"
            --set checkpoint.path="$tmp/r$n/g.ckpt" --set log.metrics="$tmp/r$n.jsonl")
    if [ $n = 1 ]; then
        run r1 "$build/hettrain" "${common[@]}" --set pipe.schedule=none --set pipe.stages=1
    else
        run r2 mpirun -np 2 --oversubscribe --bind-to none "$build/hettrain" "${common[@]}" \
            --set pipe.stages=2
        peaks r2
    fi
    grep -m1 -o 'resumed from .* at step [0-9]*' "$tmp/r$n.err" | sed 's/^/   /'
    compare "r$n" one $((steps + 1)) "$total" || status=1
done

rc=0
"$build/hettrain" "${cfg[@]}" --set pipe.schedule=none --set pipe.stages=1 \
    >/dev/null 2>"$tmp/one_limit.err" || rc=$?
echo "-- one process, same limit: exit $rc ($(grep -m1 'memory_mb' "$tmp/one_limit.err" | cut -c1-300) ...)"
[ $rc -eq 2 ] || status=1
echo "== load at the end $(load)"
exit $status
