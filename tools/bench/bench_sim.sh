#!/usr/bin/env bash
# hetsim against real runs on this machine: data parallel and pipelines on NP (2) ranks, each
# bound to a core of its own with a one-thread PoCL device (the setting the issue's 15% target
# is for). ROUNDS (5) rounds, each:
#   1. hetprof under the same mpirun setting measures each rank's device (per-layer times at
#      several batch sizes) and the MPI link between the ranks -> this round's profile;
#   2. a cluster description from it (one host of $(nproc) cores, NP one-core devices from
#      the profile entries, the measured link, the ring's additions at the CPU device's
#      measured memory bandwidth: with NP > cores the ranks share cores, modelled as
#      proportional sharing, hosts[].cores);
#   3. every case (equal / speed split, slowdowns; 1f1b, gpipe, chimera, 2bw, hepipe on 2 stages; the
#      order rotated from round to round), hettrain trains STEPS steps of the MNIST MLP with
#      --trace; after the last round one more profile, and hetsim predicts each run from the
#      profiles taken before and after its round (the mean of the two).
# Profiles and runs interleave, so the machine's drift (other processes on the 2 cores) hits
# both; every figure is a median over rounds, with its spread. The measured step is the
# median step period of the trace (sim_split.py: the first two steps left out), not the
# run's mean: on a shared machine a few steps stalled by another process move the mean by
# 10-30%, while the simulator predicts a typical step. Runs at nice -10 (root) when it can.
#   tools/bench/bench_sim.sh [STEPS (40)]      (repository root; KEEP=DIR keeps the files)
# NP=4 runs 4 ranks (on 2 cores: oversubscribed, unbound; slowdowns [1, 1, 2, 4]).
# JOB=FILE trains (and profiles) another job; CASES="5 11" runs only those cases (indexes into
# the list below; default: all but 11, interleaved D=2 v=2, which needs a model of 4 stages:
# without JOB, case 11 makes every case train conf/mnist-mlp.cfg with hidden = [512, 512,
# 512]).
# A speed split without the rebalancer is predicted at the shares its run chose (its start-up
# measurement), not at the simulator's own split from the profile.
# TRACED=1: each profile's layer times re-timed inside training runs (20 steps, hettrain
# --trace-layers, tools/bench/trace2prof.py) instead of layers timed alone: the data-parallel
# cases from an equal split, the pipelines from a 1f1b run at their micro-batch (interleaved and
# chimera from a run of their own: their ranks run other layers than 1f1b's).
. "$(dirname "$0")/common.sh"
steps=${1:-40}
rounds=${ROUNDS:-5}
np=${NP:-2}
bench_tmp
mpi_shm cma # as a real cluster copies (common.sh)
export POCL_MAX_PTHREAD_COUNT=1
job=${JOB:-conf/mnist-mlp.cfg}
nice=(); nice -n -10 true 2>/dev/null && nice=(nice -n -10)
mpi=("${nice[@]}" mpirun -np "$np" --bind-to core)
[ "$np" -gt "$(nproc)" ] && mpi=("${nice[@]}" mpirun -np "$np" --oversubscribe --bind-to none)
split=tools/bench/sim_split.py
. tools/bench/sim_links.sh

calibrate() { # calibrate ROUND NAME ROWS ARGS...: prof$1.NAME.cfg, prof$1.alone.cfg re-timed
    # by a 20-step run of ARGS traced per layer (trace2prof.py), ROWS samples per rank and pass
    local k=$1 name=$2 rows=$3
    shift 3
    "${mpi[@]}" "$build/hettrain" -c "$job" "${sets[@]}" --set train.steps=20 "$@" \
        --trace "$tmp/cal$k.$name.json" --trace-layers >"$tmp/cal$k.$name.out" 2>&1 ||
        { tail -20 "$tmp/cal$k.$name.out"; exit 1; }
    /usr/bin/python3 tools/bench/trace2prof.py "$tmp/cal$k.$name.json" "$tmp/prof$k.alone.cfg" \
        "$rows" -o "$tmp/prof$k.$name.cfg" >>"$tmp/cal$k.$name.out"
}

cluster() { # cluster PROFILE: the cluster description on it, to stdout
    echo "profile = \"$1\";"
    echo "devices = ("
    for ((r = 0; r < np; r++)); do echo "  { name = \"rank$r\"; profile_device = $r; cores = 1.0; }$([ $r -lt $((np - 1)) ] && echo ,)"; done
    echo ");"
    printf 'hosts = ( { cores = %d; devices = [' "$(nproc)"; for ((r = 0; r < np; r++)); do printf '"rank%d"%s' $r "$([ $r -lt $((np - 1)) ] && echo ', ')"; done; echo '] ; } );'
    cluster_links "$tmp/$1"
}

profile() { # profile ROUND: prof$1.cfg and cluster$1.cfg (TRACED=1: cluster$1.pipe.cfg too)
    local k=$1
    "${mpi[@]}" "$build/hetprof" -c "$job" --batch 32,64,128,256 -o "$tmp/prof$k.alone.cfg" >"$tmp/prof$k.out" 2>&1 ||
        { tail -20 "$tmp/prof$k.out"; exit 1; }
    cp "$tmp/prof$k.alone.cfg" "$tmp/prof$k.cfg"
    if [ "${TRACED:-0}" = 1 ]; then # the layers re-timed inside training runs (trace2prof.py):
        # data parallel from an equal split, pipelines from 1f1b at their micro-batch
        local B
        B=$(grep -m1 -o 'batch = [0-9]*' "$job" | grep -o '[0-9]*')
        calibrate "$k" dp $((B / np)) --set cluster.split=equal
        mv "$tmp/prof$k.dp.cfg" "$tmp/prof$k.cfg"
        calibrate "$k" pipe $((B / (np / 2) / 4)) --set pipe.schedule=1f1b "${p2[@]}"
        cluster "prof$k.pipe.cfg" >"$tmp/cluster$k.pipe.cfg"
        # interleaved and chimera: each rank runs other layers than under 1f1b
        if [[ " ${cases[*]} " == *" 11 "* ]]; then
            calibrate "$k" il $((B / (np / 2) / 4)) --set pipe.schedule=interleaved \
                --set pipe.chunks=2 "${p2[@]}"
            cluster "prof$k.il.cfg" >"$tmp/cluster$k.il.cfg"
        fi
        if [[ " ${cases[*]} " == *" 7 "* ]]; then
            calibrate "$k" ch $((B / (np / 2) / 4)) --set pipe.schedule=chimera "${p2[@]}"
            cluster "prof$k.ch.cfg" >"$tmp/cluster$k.ch.cfg"
        fi
    fi
    cluster "prof$k.cfg" >"$tmp/cluster$k.cfg"
}

sets=(--set train.steps="$steps" --set train.eval_every=0 --set log.every=10 --set log.progress=none
      --set checkpoint.path=)
slow="[1, 2]"; [ "$np" -ne 2 ] && slow="[1, 1, 2, 4]"
p2=(--set pipe.stages=2 --set pipe.micro_batches=4)
names=("equal split" "speed split" "equal split, slowdown $slow" "speed split, slowdown $slow"
       "speed + rebalance, slowdown $slow" "1f1b D=2 N=4" "gpipe D=2 N=4" "chimera D=2 N=4"
       "1f1b D=2 N=4, slowdown $slow" "2bw D=2 N=4" "hepipe D=2 N=4, slowdown $slow"
       "interleaved D=2 v=2 N=4")
args=("--set cluster.split=equal"
      "--set cluster.split=speed --set cluster.rebalance=false"
      "--set cluster.split=equal --set cluster.slowdown=$slow"
      "--set cluster.split=speed --set cluster.rebalance=false --set cluster.slowdown=$slow"
      "--set cluster.split=speed --set cluster.rebalance=true --set cluster.slowdown=$slow"
      "--set pipe.schedule=\"1f1b\" ${p2[*]}" "--set pipe.schedule=\"gpipe\" ${p2[*]}"
      "--set pipe.schedule=\"chimera\" ${p2[*]}"
      "--set pipe.schedule=\"1f1b\" ${p2[*]} --set cluster.slowdown=$slow"
      "--set pipe.schedule=\"2bw\" ${p2[*]}"
      "--set pipe.schedule=\"hepipe\" ${p2[*]} --set cluster.slowdown=$slow"
      "--set pipe.schedule=\"interleaved\" --set pipe.chunks=2 ${p2[*]}")
read -r -a cases <<<"${CASES:-0 1 2 3 4 5 6 7 8 9 10}"
if [[ -z "${JOB:-}" && " ${cases[*]} " == *" 11 "* ]]; then
    sed 's/hidden = \[1024, 1024\];/hidden = [512, 512, 512];/' conf/mnist-mlp.cfg >"$tmp/mlp4.cfg"
    job=$tmp/mlp4.cfg
fi

words() { # words INDEX: case INDEX's settings as words (cluster.slowdown's value holds spaces)
    IFS=$'\n' read -r -d '' -a a < <(printf '%s\n' ${args[$1]/"$slow"/SLOW} | sed "s/SLOW/$slow/"; printf '\0')
}

case_run() { # case_run ROUND INDEX: the real run, measured from its trace
    local k=$1 i=$2 a
    local f="$tmp/c$i.r$k"
    words "$i"
    "${mpi[@]}" "$build/hettrain" -c "$job" "${sets[@]}" --set log.metrics="$f.jsonl" --trace "$f.json" \
        "${a[@]}" >"$f.out" 2>"$f.err" || { tail -20 "$f.err"; exit 1; }
    local mean
    mean=$(sed -nE 's/^final: .*, ([0-9.]+) samples\/s.*/\1/p' "$f.out")
    printf '%d\t%d\t%s\t%s\t%s\n' "$i" "$k" "$mean" "$(/usr/bin/python3 $split "$f.json")" \
        "$(uptime | sed -E 's/.*load average: ([0-9.]+).*/\1/')" >>"$tmp/meas.tsv"
}

predict() { # predict ROUND INDEX: hetsim on the profiles before (ROUND) and after (ROUND + 1)
    local k=$1 i=$2 a q sh
    local f="$tmp/c$i.r$k"
    words "$i"
    # a speed split without the rebalancer: the run's own shares (the trainer measures the
    # speeds at start-up, a few steps, and its split moved by 7-14 samples a rank from run to
    # run); the simulator predicts the step of the split that ran
    sh=$(sed -nE 's/.*shares by measured speed: (.*) \(samples\/s beyond.*/\1/p' "$f.err" | head -1 |
         sed -E 's/ \([^)]*\)//g')
    # (a rank the split left out, share 0, is not something cluster.shares can say: then
    # hetsim's own split)
    [[ -n "$sh" && ! " $sh," =~ \ 0, && "${a[*]}" == *"cluster.rebalance=false"* ]] &&
        a+=(--set "cluster.shares=[$sh]")
    for q in "$k" $((k + 1)); do
        local cl="$tmp/cluster$q.cfg"
        [[ "${a[*]}" == *pipe.schedule* && -f "$tmp/cluster$q.pipe.cfg" ]] && cl="$tmp/cluster$q.pipe.cfg"
        [[ "${a[*]}" == *interleaved* && -f "$tmp/cluster$q.il.cfg" ]] && cl="$tmp/cluster$q.il.cfg"
        [[ "${a[*]}" == *chimera* && -f "$tmp/cluster$q.ch.cfg" ]] && cl="$tmp/cluster$q.ch.cfg"
        "$build/hetsim" --cluster "$cl" -c "$job" "${sets[@]}" "${a[@]}" --steps 20 \
            --trace "$f.sim$q.json" >"$f.sim$q" 2>&1 || { cat "$f.sim$q"; exit 1; }
        # 2bw: the steady-state step hetsim prints, the trace's compute over its 8 batches
        if grep -q "8 batches chained" "$f.sim$q"; then
            /usr/bin/python3 $split "$f.sim$q.json" "$(sed -nE 's/^step time +([0-9.e+-]+) ms/\1/p' "$f.sim$q")" 8
        else
            /usr/bin/python3 $split "$f.sim$q.json"
        fi
    done | awk '{ s += $1; c += $2; r += $3 } END { printf "%.3f %.3f %.3f\n", s / NR, c / NR, r / NR }'
}

echo "== hetsim vs measured: $job, ${mpi[*]}, POCL_MAX_PTHREAD_COUNT=1, $steps steps x $rounds rounds; $(date -u '+%F %H:%M') UTC"
echo "   host: $(nproc) cores, $(sed -nE 's/^model name\s*: //p' /proc/cpuinfo | head -1); load at start: $(uptime | sed 's/.*average: //')"
: >"$tmp/meas.tsv"; : >"$tmp/rows.tsv"
# a throwaway run first: the first run after a build measured 1.7-3x slower (program cache,
# first-touch allocation)
"${mpi[@]}" "$build/hettrain" -c "$job" "${sets[@]}" --set train.steps=5 --set log.metrics= \
    >/dev/null 2>&1 || true
n=${#cases[@]}
# profile, cases, profile, cases, ..., profile: a case is predicted from the profiles taken
# just before and just after its round (the mean of the two predictions)
for ((k = 0; k < rounds; k++)); do
    profile "$k"
    for ((j = 0; j < n; j++)); do case_run "$k" "${cases[$(((j + k) % n))]}"; done
done
profile "$rounds"
while IFS=$'\t' read -r i k mean msplit load; do
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$k" "$mean" "$msplit" "$(predict "$k" "$i")" "$load" >>"$tmp/rows.tsv"
done <"$tmp/meas.tsv"
grep -h 'a = 0; b = 1' "$tmp"/prof*.alone.cfg | sed -E 's/.*bandwidth_gbs = ([0-9.]+);( ring_gbs = ([0-9.]+);)?.*/\1 \3/' |
    awk '{ printf "%s%.2f / %s", (NR > 1 ? ", " : "   link bandwidth / ring step per profile (GB/s): "), $1, ($2 == "" ? "-" : sprintf("%.2f", $2)) } END { print "" }'
echo "   load at end: $(uptime | sed 's/.*average: //')"
printf '%s\n' "${names[@]}" >"$tmp/names.txt"
/usr/bin/python3 - "$tmp/rows.tsv" "$tmp/names.txt" "$(grep -m1 -o 'batch = [0-9]*' "$job" | grep -o '[0-9]*' || echo 256)" <<'PY'
import statistics as st, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
names = open(sys.argv[2]).read().splitlines()
B = float(sys.argv[3])
print("   step: median step period (ms) of each run's trace, then the median over rounds [min-max];")
print("   comp: the slowest rank's forward + backward per step; rest = step - comp; sps = batch / step;")
print("   pred: hetsim, mean of the profiles before and after the round; error = pred / meas - 1 of the medians")
print("%-34s %-22s %-22s %7s %7s %7s %7s %7s %8s %8s %7s" % ("case", "meas step [min-max]", "pred step [min-max]",
      "error", "m comp", "p comp", "error", "m rest", "p rest", "mean sps", "in 15%"))
agg = {}
for i, name in enumerate(names):
    r = [x for x in rows if int(x[0]) == i]
    if not r: continue
    ms = [float(x[3].split()[0]) for x in r]; ps = [float(x[4].split()[0]) for x in r]
    mc = [float(x[3].split()[1]) for x in r]; pc = [float(x[4].split()[1]) for x in r]
    mr = [float(x[3].split()[2]) for x in r]; pr = [float(x[4].split()[2]) for x in r]
    mean = st.median(float(x[2]) for x in r if x[2])
    m, p = st.median(ms), st.median(ps)
    agg[name] = (m, p)
    inr = sum(abs(b / a - 1) <= 0.15 for a, b in zip(ms, ps))
    print("%-34s %6.2f [%6.2f-%6.2f] %6.2f [%6.2f-%6.2f] %+6.1f%% %7.2f %7.2f %+6.1f%% %7.2f %8.2f %8.0f %4d/%d" % (
        name, m, min(ms), max(ms), p, min(ps), max(ps), 100 * (p / m - 1), st.median(mc), st.median(pc),
        100 * (st.median(pc) / st.median(mc) - 1), st.median(mr), st.median(pr), mean, inr, len(r)))
print("   loads (1-min average) during the runs: %s-%s" % (min(x[5] for x in rows), max(x[5] for x in rows)))
ks = list(agg)
pairs = [(a, b) for i, a in enumerate(ks) for b in ks[i + 1:]]
close = lambda a, b: abs(agg[a][0] / agg[b][0] - 1) < 0.05
disc = [(a, b) for a, b in pairs if (agg[a][0] - agg[b][0]) * (agg[a][1] - agg[b][1]) < 0]
print("ranking: %d of %d pairs of cases ordered alike by measured and predicted step; discordant:" % (
    len(pairs) - len(disc), len(pairs)))
for a, b in disc:
    print("   %s (%.2f / %.2f) vs %s (%.2f / %.2f)%s" % (a, agg[a][0], agg[a][1], b, agg[b][0], agg[b][1],
          "  [measured within 5%]" if close(a, b) else ""))
PY
