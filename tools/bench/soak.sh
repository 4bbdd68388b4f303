#!/usr/bin/env bash
# Soak test: does a long run hold on to memory or file descriptors? Two runs of an MNIST MLP
# (784-32-10, batch 16) with evaluation, a checkpoint and a metrics record every 100 steps:
# one process for MLP_STEPS steps, then 2 ranks under mpirun (bsp) for BSP_STEPS steps.
# Every second it reads each hettrain process's resident memory (VmRSS) and open file
# descriptors from /proc, and -v's "device memory" line (bytes in device buffers, every
# rank) at every evaluation. "start" is the first reading once the run has passed step WARM
# (allocations, kernel builds, the first checkpoints and evaluations done), "end" the last
# one before it exits. Tolerance: RSS may grow by at most RSS_TOL_KB (default 2048 KiB: a
# leak of 100 bytes per step over 5,000 steps shows; glibc's arenas and the OpenCL runtime
# do not hand back every page); file descriptors and device bytes must not grow at all.
#   tools/bench/soak.sh [MLP_STEPS (30000)] [BSP_STEPS (5000)]
# Exit 1 when a figure grows beyond its tolerance or a run fails. Run from the repository root.
. "$(dirname "$0")/common.sh"
mlp_steps=${1:-30000}
bsp_steps=${2:-5000}
warm=${WARM:-500}
rss_tol=${RSS_TOL_KB:-2048}
hettrain=$(realpath "$build/hettrain")
data=$MNIST_DIR
tmp=$(mktemp -d "${TMPDIR:-/tmp}/soak.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mpi_shm copy

cat >"$tmp/soak.cfg" <<CFG
model = { type = "mlp"; hidden = [32]; activation = "relu"; };
data = { kind = "idx"; images = "$data/t10k-images-idx3-ubyte.gz";
         labels = "$data/t10k-labels-idx1-ubyte.gz"; val_fraction = 0.05; };
train = { batch = 16; seed = 1; eval_every = 100; };
optim = { type = "sgd"; lr = 0.02; momentum = 0.9; };
log = { every = 100; progress = "none"; };
checkpoint = { every = 100; };
CFG

# the hettrain processes of run $1 (their command line names its checkpoint)
pids_of() {
    local p
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/exe" 2>/dev/null)" = "$hettrain" ] &&
            tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q "$tmp/$1.ckpt" && echo "${p#/proc/}"
    done
    return 0
}

# soak NAME STEPS LAUNCHER...: runs the job, samples "step pid rss_kb fds" into NAME.samples
soak() {
    local name=$1 steps=$2 step pid rss fds t0
    shift 2
    t0=$(date +%s)
    "$@" "$hettrain" -c "$tmp/soak.cfg" -v --set train.steps="$steps" \
        --set checkpoint.path="$tmp/$name.ckpt" --set log.metrics="$tmp/$name.jsonl" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" &
    local job=$!
    : >"$tmp/$name.samples"
    while kill -0 "$job" 2>/dev/null; do
        step=$(sed -nE 's/^(\[rank 0\] )?debug: step ([0-9]+): device memory.*/\2/p' "$tmp/$name.err" | tail -1)
        for pid in $(pids_of "$name"); do
            rss=$(sed -nE 's/^VmRSS:[[:space:]]+([0-9]+) kB/\1/p' "/proc/$pid/status" 2>/dev/null) || true
            fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l) || true
            [ -n "$rss" ] && [ "$fds" -gt 0 ] && echo "${step:-0} $pid $rss $fds" >>"$tmp/$name.samples"
        done
        sleep 1
    done
    wait "$job" || { echo "soak: $name failed:" >&2; tail -5 "$tmp/$name.err" >&2; exit 1; }
    echo "$(($(date +%s) - t0))" >"$tmp/$name.secs"
}

# report NAME: start and end per process, device memory; 1 when something grew too much
report() {
    local name=$1
    /usr/bin/python3 - "$tmp/$name" "$warm" "$rss_tol" "$(cat "$tmp/$name.secs")" <<'PY'
import re, sys
base, warm, tol, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rows = [tuple(map(int, l.split())) for l in open(base + ".samples")]
dev = [(int(r or 0), int(s), int(b)) for r, s, b in re.findall(
    r"^(?:\[rank (\d+)\] )?debug: step (\d+): device memory (\d+) bytes", open(base + ".err").read(), re.M)]
final = re.search(r"^final: step (\d+),.*?([0-9.]+) samples/s", open(base + ".out").read(), re.M)
bad = []
print("%s: %s steps in %s s (%s samples/s)" % (base.rsplit("/", 1)[1], final.group(1), secs,
                                               final.group(2)))
for pid in sorted({r[1] for r in rows}):
    mine = [r for r in rows if r[1] == pid and r[0] >= warm]
    if len(mine) < 2:
        bad.append("pid %d: fewer than 2 readings after step %d" % (pid, warm))
        continue
    a, b = mine[0], mine[-1]
    print("  pid %d: RSS %d -> %d KiB (%+d; steps %d -> %d), open fds %d -> %d" %
          (pid, a[2], b[2], b[2] - a[2], a[0], b[0], a[3], b[3]))
    if b[2] - a[2] > tol: bad.append("pid %d: RSS grew %d KiB > %d" % (pid, b[2] - a[2], tol))
    if b[3] > a[3]: bad.append("pid %d: open fds grew %d -> %d" % (pid, a[3], b[3]))
for rank in sorted({x[0] for x in dev}) or [0]:
    d = [x[1:] for x in dev if x[0] == rank and x[1] >= warm]
    if len(d) < 2:
        bad.append("rank %d: fewer than 2 device memory lines after step %d" % (rank, warm))
        continue
    print("  rank %d device buffers: %d -> %d bytes (steps %d -> %d, %d readings, max %d)" %
          (rank, d[0][1], d[-1][1], d[0][0], d[-1][0], len(d), max(x[1] for x in d)))
    if max(x[1] for x in d) > d[0][1]: bad.append("rank %d: device memory grew" % rank)
for b in bad: print("  GREW/FAILED: " + b)
sys.exit(1 if bad else 0)
PY
}

echo "soak: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
soak mlp "$mlp_steps"
soak bsp "$bsp_steps" timeout 1800 mpirun -np 2 --oversubscribe --bind-to none
rc=0
report mlp || rc=1
report bsp || rc=1
echo "soak: tolerance RSS +$rss_tol KiB, open fds +0, device bytes +0 (from step $warm to the end)"
exit $rc
