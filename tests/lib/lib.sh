# TAP helpers for the .t shell tests. Sourced; expects $HT_BUILD (tests/run sets it).
# HT_ROOT: the repository (the scripts are tests/integration/*.t)
HT_ROOT=$(cd "$(dirname "$0")/../.." && pwd)
: "${HT_BUILD:=$HT_ROOT/build}"
# the data the tests read, shipped in the repository (data/README.md)
HT_DATA="$HT_ROOT/data"
SHAKESPEARE="$HT_DATA/tinyshakespeare/input.txt"
HETTRAIN="$HT_BUILD/hettrain"
T_N=0
T_FAIL=0
TMP=$(mktemp -d /tmp/ht_test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

ok() { # ok COND_EXIT_STATUS DESCRIPTION
    T_N=$((T_N + 1))
    if [ "$1" -eq 0 ]; then echo "ok $T_N - $2"; else echo "not ok $T_N - $2"; T_FAIL=$((T_FAIL + 1)); fi
}
# diagnostics go to stderr, which prove shows without -v (CI's log keeps them)
diag() { printf '%s\n' "$@" | sed 's/^/# /' >&2; }
done_testing() { echo "1..$T_N"; [ "$T_FAIL" -eq 0 ]; }

# run_cmd PROGRAM ARGS...: runs it, keeping stdout in $OUT, stderr in $ERR, status in $RC.
run_cmd() {
    "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}
# run_ht ARGS...: run_cmd for hettrain
run_ht() { run_cmd "$HETTRAIN" "$@"; }
# DEV: the --device option for the tools when the suite runs on one named device
DEV=()
[ -n "${HT_TEST_DEVICE:-}" ] && DEV=(--device "$HT_TEST_DEVICE")

# synth_cfg FILE HIDDEN SAMPLES FEATURES [LINE...]: a small synthetic job (3 classes, batch 16,
# 3 steps, lr 0.1), then the LINEs
synth_cfg() {
    printf '%s\n' "model = { hidden = [$2]; };" \
        "data = { kind = \"synthetic\"; samples = $3; features = $4; classes = 3; };" \
        "train = { batch = 16; steps = 3; };" "optim = { lr = 0.1; };" "${@:5}" >"$1"
}

# expect_fail CODE PATTERN DESCRIPTION -- ARGS...: hettrain exits CODE and stderr matches PATTERN (grep -E).
expect_fail() {
    local code=$1 pat=$2 desc=$3
    shift 4
    run_ht "$@"
    local good=1
    [ "$RC" -eq "$code" ] && printf '%s' "$ERR" | grep -Eq -- "$pat" && good=0
    ok $good "$desc (exit $RC)"
    [ $good -eq 0 ] || diag "expected exit $code and /$pat/; stderr was:" "$ERR"
}

# Comparing runs (the trainer's metrics and checkpoints), shared by the distributed tests.
# losses METRICS: "step loss" per train record of a metrics file
losses() { grep '"type":"train"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
# same_losses A B N TOL: N "step loss" lines each, the same steps, |a-b| <= TOL |a| at each
same_losses() {
    [ "$(wc -l <"$1")" -eq "$3" ] && [ "$(wc -l <"$2")" -eq "$3" ] && paste -d' ' "$1" "$2" |
        awk -v tol="$4" '{ d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > tol * $2) bad = 1 }
                         END { exit bad }'
}
# same_tensors A B: every tensor of two checkpoints (each a file or a sharded set: pieces
# NAME#OFFSET joined) bit for bit the same, parameters and optimizer state
same_tensors() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import json, os, struct, sys
def load1(p, out):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n]); base = 8 + n
    for k, v in h.items():
        if k != '__metadata__':
            out[k] = b[base + v['data_offsets'][0]:base + v['data_offsets'][1]]
def load(p):
    out = {}
    if os.path.exists(p):
        load1(p, out)
        return out
    stem = p[:-len('.safetensors')] if p.endswith('.safetensors') else p
    for f in sorted(set(json.load(open(stem + '.safetensors.index.json'))['weight_map'].values())):
        load1(os.path.join(os.path.dirname(p), f), out)
    whole = {k: v for k, v in out.items() if '#' not in k}
    for k in sorted((k for k in out if '#' in k), key=lambda k: int(k.split('#')[1])):
        whole[k.split('#')[0]] = whole.get(k.split('#')[0], b'') + out[k]
    return whole
a, b = load(sys.argv[1]), load(sys.argv[2])
bad = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
if bad: print('# differ:', bad[:5])
sys.exit(1 if bad else 0)
PY
}
# same_params A B TOL: the same tensors in two checkpoints (optimizer state aside; each a file
# or a sharded set), each
# within TOL of its largest magnitude (at least 1e-3)
same_params() {
    /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import json, struct, sys
import numpy as np
import os
def load1(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n]); base = 8 + n
    return {k: np.frombuffer(b[base + v['data_offsets'][0]:base + v['data_offsets'][1]], '<f4')
            for k, v in h.items() if k != '__metadata__' and not k.startswith('optim')}
def load(p):  # one file, or a sharded set's parameter tensors (each whole in one shard)
    if os.path.exists(p): return load1(p)
    stem = p[:-len('.safetensors')] if p.endswith('.safetensors') else p
    idx = json.load(open(stem + '.safetensors.index.json'))
    out = {}
    for f in sorted(set(idx['weight_map'].values())):
        out.update(load1(os.path.join(os.path.dirname(p), f)))
    return out
a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
bad = [k for k in a if k not in b or
       np.max(np.abs(a[k] - b[k])) > tol * max(1e-3, float(np.max(np.abs(a[k]))))]
if bad or set(a) != set(b): print('# differ:', bad[:5]); sys.exit(1)
PY
}
