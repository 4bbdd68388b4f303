#!/usr/bin/env bash
# The emulator against real runs (issue 26): every sync policy trains the MNIST MLP
# (conf/mnist-mlp.cfg) for EPOCHS epochs with 2 workers at slowdowns 1 and 3 (plus the serving
# rank of the policies that have one), once for real under mpirun and once under `hettrain
# emulate` on a cluster description made from a hetprof profile of this machine (2 ranks,
# each bound to a core with one PoCL thread; tools/bench/sim_links.sh sync_profile). For each
# policy: time to TARGET validation accuracy (time_s of the eval records: rank 0's evaluations
# left out), the workers' steps (how the work split between the fast and the slow one), the
# bytes they sent, their exchanges and their waiting, real beside emulated, and the emulated
# figure's error. Real runs: bsp's 2 ranks pinned, a core each; 3 ranks cannot be pinned to 2
# cores, so the others run unbound (the serving rank shares the cores: a parameter server
# applies every update, a coordinator sleeps between polls) and the emulated cluster gives the
# parameter server a core of its own on the 2-core host (hosts[].cores: its workers then
# compute 1.5x slower, an upper bound). Emulated figures are virtual time: deterministic.
#   tools/bench/bench_emulate_real.sh [POLICIES...]         (repository root; KEEP=DIR keeps files)
#   env: TARGET (0.95), EPOCHS (5), EVAL (5), TRACED (1: layer times from inside training),
#   FROM=DIR (a KEEP folder of an earlier run: its profile, clusters and real records are
#   used, only the emulated side runs: virtual time, so a loaded machine may run it),
#   SERVER_CORES (1: the parameter server takes a core; 0: none, its workers at full speed)
. "$(dirname "$0")/common.sh"
policies=("$@")
[ ${#policies[@]} -gt 0 ] || policies=(bsp asp ssp dasp preduce sap-reduce gossip gossip-fixed gossip-adaptive)
TARGET=${TARGET:-0.95}; EPOCHS=${EPOCHS:-5}; EVAL=${EVAL:-5}; export TRACED=${TRACED:-1}
smpi=${HT_SMPI_BIN:-$build-smpi/hettrain-smpi}
[ -x "$smpi" ] || { echo "bench_emulate_real: no $smpi (tools/setup builds it)" >&2; exit 2; }
bench_tmp
mpi_shm cma
export POCL_MAX_PTHREAD_COUNT=1
. tools/bench/sim_links.sh
job=conf/mnist-mlp.cfg
sets=(--set train.epochs="$EPOCHS" --set train.eval_every="$EVAL" --set log.progress=none
      --set checkpoint.path=)

echo "== emulated vs real: $job, 2 workers at slowdowns 1 and 3, $EPOCHS epochs, target" \
     "$TARGET; $(date -u '+%F %H:%M') UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${FROM:-}" ]; then
    cp "$FROM"/prof0*.cfg "$FROM"/cluster0.*.cfg "$FROM"/real-*.jsonl "$tmp/"
else
    sync_profile 0 "$job"
fi
for p in "${policies[@]}"; do
    np=3 slow="[1,3,1]" bind=(--bind-to none) c=0
    case $p in bsp) np=2 slow="[1,3]" bind=(--bind-to core) ;; asp | ssp | dasp) c=${SERVER_CORES:-1} ;; esac
    echo "   $p: real ($np ranks, load $(cut -d' ' -f1 /proc/loadavg)), emulated..." >&2
    run=(--set sync.mode="$p" --set "cluster.slowdown=$slow" "${sets[@]}")
    [ -n "${FROM:-}" ] || mpirun -np "$np" --oversubscribe "${bind[@]}" "$build/hettrain" -c "$job" -q "${run[@]}" \
        --set log.metrics="$tmp/real-$p.jsonl" >"$tmp/real-$p.out" 2>"$tmp/real-$p.err" ||
        { tail -20 "$tmp/real-$p.err"; exit 1; }
    "$build/hettrain" emulate --cluster "$tmp/cluster0.$c.cfg" -c "$job" --ranks "$np" \
        --smpi "$smpi" --out "$tmp/platform-$p" "${run[@]}" \
        --set log.metrics="$tmp/emu-$p.jsonl" -- -q >"$tmp/emu-$p.out" 2>"$tmp/emu-$p.err" ||
        { tail -20 "$tmp/emu-$p.err"; exit 1; }
done
echo "   load at end: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/python3 - "$tmp" "$TARGET" "${policies[@]}" <<'PY'
import json, sys
d, target, pols = sys.argv[1], float(sys.argv[2]), sys.argv[3:]

def stats(path):
    recs = [json.loads(l) for l in open(path)]
    ev = [r for r in recs if r["type"] == "eval"]
    w = [r for r in recs if r["type"] == "sync" and r["role"] == "worker"]
    hit = next((r for r in ev if r["val_acc"] is not None and r["val_acc"] >= target), None)
    return dict(tta=hit["time_s"] if hit else None, acc=ev[-1]["val_acc"],
                steps=[r["steps"] for r in w], sent=sum(r["bytes_sent"] for r in w),
                ex=sum(r["exchanges"] for r in w), wait=sum(r["wait_s"] for r in w))

def err(a, b):
    return f"{100 * (b / a - 1):+.0f}%" if a and b is not None else "-"

f = lambda v: f"{v:.2f}" if v is not None else "not reached"
print(f"\n| policy | time to {100 * target:.0f}%, real (s) | emulated (s) | error | worker steps, "
      "real | emulated | MB sent, real | emulated | error | exchanges, real / emulated | "
      "workers' wait, real / emulated (s) | final acc, real / emulated |")
print("|---|---:|---:|---:|---|---|---:|---:|---:|---|---|---|")
for p in pols:
    r, e = stats(f"{d}/real-{p}.jsonl"), stats(f"{d}/emu-{p}.jsonl")
    print(f"| {p} | {f(r['tta'])} | {f(e['tta'])} | {err(r['tta'], e['tta'])} | "
          f"{'/'.join(map(str, r['steps']))} | {'/'.join(map(str, e['steps']))} | "
          f"{r['sent'] / 1e6:.0f} | {e['sent'] / 1e6:.0f} | {err(r['sent'], e['sent'])} | "
          f"{r['ex']} / {e['ex']} | {r['wait']:.2f} / {e['wait']:.2f} | "
          f"{100 * r['acc']:.2f}% / {100 * e['acc']:.2f}% |")
PY
