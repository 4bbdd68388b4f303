#!/usr/bin/env bash
# Zero-bubble schedules against 1F1B and HePipe on NP ranks (default 2), measured (issue 27):
# per schedule and micro-batch count, the measured bubble 1 - busy / (ranks x makespan) (the
# "pipe_summary" record's bubble_measured, as tools/bench/bench_pipe.sh) beside the schedule
# checker's predictions (unit times: F = 1, backward 2 (B = W = 1 in the split kinds); and
# the stage forward / backward times measured in the same run, the split kinds' backward
# taken as B = W = half), throughput and activation memory per rank. The job is an MLP of
# LAYERS linear+ReLU layers of width WIDTH: every layer has a real B/W split there. MODEL=gpt:
# a GPT of LAYERS blocks of width WIDTH (4 heads, context 64, tiny shakespeare) instead, its
# blocks split too (their internal gradients kept from B to W).
#   tools/bench/bench_zb.sh [STEPS]
# Env: NP (2), LAYERS (8), WIDTH (512), BATCH (64), NS ("4 8": micro-batch counts),
# SCHEDS ("1f1b hepipe zb-h1 zb-v"; zb-het too), PIN=1 (one core and one PoCL thread per rank),
# SLOW (emulated slowdowns, e.g. "1,3": cluster.slowdown, every schedule on the hetero
# partition that the trainer cuts from its start-up times), MODEL (mlp | gpt).
. "$(dirname "$0")/common.sh"
steps=${1:-20}
np=${NP:-2}; layers=${LAYERS:-8}; width=${WIDTH:-512}; batch=${BATCH:-64}
bench_tmp
mpi_shm cma
pin_ranks
hidden=$(printf "$width, %.0s" $(seq "$layers")); hidden=${hidden%, }
cat >"$tmp/job.cfg" <<CFG
model = { hidden = [$hidden]; activation = "relu"; };
data = { kind = "synthetic"; samples = 4096; features = $width; classes = 10; seed = 1; };
train = { batch = $batch; steps = $steps; seed = 1; eval_every = 0; };
optim = { type = "sgd"; lr = 0.01; momentum = 0.9; };
log = { every = 5; progress = "none"; };
CFG
if [ "${MODEL:-mlp}" = gpt ]; then
    cat >"$tmp/job.cfg" <<CFG
model = { type = "gpt"; n_layer = $layers; d_model = $width; n_head = 4; context = 64; dropout = 0.0; };
data = { kind = "text"; path = "$SHAKESPEARE"; val_fraction = 0.1; };
train = { batch = $batch; steps = $steps; seed = 1; eval_every = 0; };
optim = { type = "adamw"; lr = 0.001; };
log = { every = 5; progress = "none"; };
CFG
fi
[ -z "${SLOW:-}" ] || cat >>"$tmp/job.cfg" <<CFG
cluster = { slowdown = [$SLOW]; };
pipe = { partition = "hetero"; };
CFG
echo "== zero-bubble on $np ranks: ${MODEL:-mlp} $layers x $width, batch $batch, $steps steps (first not counted)${SLOW:+, slowdowns $SLOW, hetero partition}"
echo "   $(nproc) cores$([ "${PIN:-0}" = 1 ] && echo ', ranks pinned, 1 PoCL thread each' || echo ', ranks share the cores'); load: $(uptime | sed 's/.*load average: //')"
printf '%-8s %3s %8s %8s %8s %7s %10s %10s\n' schedule N "pred F=1" "pred" bubble diff samples/s "act MiB"
for n in ${NS:-4 8}; do
for s in ${SCHEDS:-1f1b hepipe zb-h1 zb-v}; do
    name=$s-$n
    mpirun -np "$np" --oversubscribe "${bind[@]}" "$build/hettrain" -c "$tmp/job.cfg" -q \
        --set log.metrics="$tmp/$name.jsonl" --set pipe.schedule="$s" --set pipe.stages="$np" \
        --set pipe.micro_batches="$n" >"$tmp/$name.out" 2>"$tmp/$name.err" ||
        { cat "$tmp/$name.err" >&2; exit 1; }
    /usr/bin/python3 - "$tmp/$name.jsonl" "$s" "$n" "$batch" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"pipe"' in l]
summ = [json.loads(l) for l in open(sys.argv[1]) if '"type":"pipe_summary"' in l][0]
step = max(r['step_s'] for r in recs)
act = max(r['activation_bytes'] for r in recs) / 2**20
unit, pred, bub = summ['bubble_unit_times'], summ['bubble_measured_costs'], summ['bubble_measured']
print('%-8s %3s %8.3f %8.3f %8.3f %+7.3f %10.1f %10.2f' % (sys.argv[2], sys.argv[3], unit, pred,
      bub, bub - pred, int(sys.argv[4]) / step, act))
PY
done
done
