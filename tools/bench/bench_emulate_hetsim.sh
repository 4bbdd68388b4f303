#!/usr/bin/env bash
# The emulator against hetsim (issue 26): the same job on the same cluster description, step
# time from hetsim's prediction beside the emulated run's (hettrain emulate --network ideal:
# links as hetsim models them; log.every = the steps, so that no per-step logging collective
# runs), for data parallel and each pipeline schedule. Virtual time: the figures do not depend
# on the machine's load. Two emulated figures per row: the whole step (samples/s of the run)
# and the pipeline's own window (the longest rank's "pipe" record step_s).
#   tools/bench/bench_emulate_hetsim.sh [SMPI binary]
. "$(dirname "$0")/common.sh"
smpi=${1:-$build-smpi/hettrain-smpi}
bench_tmp
cat >"$tmp/job.cfg" <<'CFG'
model = { hidden = [32, 32, 32]; activation = "relu"; };
data = { kind = "synthetic"; samples = 600; features = 16; classes = 4; seed = 3; };
train = { batch = 48; steps = 12; seed = 7; eval_every = 0; };
optim = { type = "sgd"; lr = 0.05; momentum = 0.9; };
log = { every = 12; progress = "none"; };
CFG
# tests/integration/emulate.t's cluster: 8 ranks on 4 hosts at speeds 1,1,1,1,.5,.5,.25,.25
cp conf/cluster-emulate8.cfg "$tmp/c8.cfg"
printf '%-26s %10s %12s %7s %12s %7s\n' job "hetsim ms" "emulated ms" ratio "window ms" ratio
row() { # row SCHEDULE STAGES MICRO-BATCHES [--set ...]
    local s=$1 D=$2 N=$3
    shift 3
    local sets=(--set pipe.schedule="$s" --set pipe.stages="$D" --set pipe.micro_batches="$N" "$@")
    local h e
    h=$("$build/hetsim" --cluster "$tmp/c8.cfg" -c "$tmp/job.cfg" "${sets[@]}" |
        sed -nE 's/^step time +([0-9.e+-]+) ms.*/\1/p')
    rm -rf "$tmp/em" "$tmp/m.jsonl"
    "$build/hettrain" emulate --network ideal --cluster "$tmp/c8.cfg" -c "$tmp/job.cfg" \
        --smpi "$smpi" --out "$tmp/em" --set log.metrics="$tmp/m.jsonl" "${sets[@]}" -- -q \
        >/dev/null 2>"$tmp/err" || { tail -3 "$tmp/err"; return 1; }
    /usr/bin/python3 - "$tmp/m.jsonl" "$h" "$s D=$D N=$N $*" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
h = float(sys.argv[2])
t = [x for x in r if x.get("type") == "train"][-1]
step = 48 / t["samples_per_s"] * 1e3
win = max([x["step_s"] for x in r if x.get("type") == "pipe"], default=0) * 1e3
name = sys.argv[3].replace(" --set ", " ").replace("pipe.", "")[:26]
print("%-26s %10.4f %12.4f %7.3f %12s %7s" % (name, h, step, step / h,
      "%.4f" % win if win else "-", "%.3f" % (win / h) if win else "-"))
PY
}
row none 1 1
for s in gpipe 1f1b hepipe chimera 2bw zb-h1; do row $s 4 4; done
row interleaved 2 4 --set pipe.chunks=2
row zb-v 2 4
