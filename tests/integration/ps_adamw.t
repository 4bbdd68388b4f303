#!/usr/bin/env bash
# A parameter server applies a push as its share of a bsp step (b / train.batch) also under
# AdamW, whose step does not change when its gradients are scaled: it takes the share of the
# learning rate (before, every push was a whole step). Closed form: SSP with staleness 0, 2
# workers of half the batch and 1 server, train.steps = 1, AdamW with beta1 = beta2 = 0 and
# no decay, so that a step moves each parameter by lr x sign(g): both pushes are gradients
# at the initial parameters, each applied at lr / 2, so no parameter moves by more than lr
# (at +-lr where the two halves agree in sign); scaling the gradient instead would move
# them by up to 2 lr.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"

cat >"$TMP/job.cfg" <<'CFG'
model = { hidden = [16]; activation = "relu"; };
data = { kind = "synthetic"; samples = 256; features = 8; classes = 3; seed = 3; };
train = { batch = 32; steps = 1; seed = 7; };
optim = { type = "adamw"; lr = 0.01; beta1 = 0.0; beta2 = 0.0; weight_decay = 0.0; };
log = { every = 1; progress = "none"; };
CFG
# the initial parameters: one step at a rate too small to move any (1e-30 x sign(g))
timeout 300 "$HETTRAIN" -c "$TMP/job.cfg" --set optim.lr=1e-30 \
    --set checkpoint.path="$TMP/init.safetensors" -q >"$TMP/init.out" 2>&1
ok $? "the initial parameters, one step at lr 1e-30"
MPI_TIMEOUT=300 mpirun_ht 3 "$HETTRAIN" -c "$TMP/job.cfg" --set sync.mode=ssp \
    --set sync.staleness=0 --set checkpoint.path="$TMP/ssp.safetensors" -q \
    >"$TMP/ssp.out" 2>"$TMP/ssp.err"
ok $? "ssp, 2 workers and 1 server, AdamW, one global step" || diag "$(tail -5 "$TMP/ssp.err")"
/usr/bin/python3 - "$TMP/init.safetensors" "$TMP/ssp.safetensors" 0.01 >"$TMP/moves" <<'PY'
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n]); base = 8 + n
    return {k: np.frombuffer(b[base + v['data_offsets'][0]:base + v['data_offsets'][1]], '<f4')
            for k, v in h.items() if k != '__metadata__' and not k.startswith('optim')}
a, b, lr = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
assert set(a) == set(b) and a, (sorted(a), sorted(b))
d = max(float(np.max(np.abs(a[k].astype(np.float64) - b[k]))) for k in a)
print(f"{d / lr:.6f}")
PY
m=$(cat "$TMP/moves")
awk -v m="$m" 'BEGIN { exit !(m > 0.99 && m < 1.01) }'
ok $? "the largest move is lr (2 pushes at lr/2 each): $m x lr, expected 1 (2 if a push were a whole step)"
done_testing
