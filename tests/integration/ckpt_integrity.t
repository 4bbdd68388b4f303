#!/usr/bin/env bash
# Checkpoints that prove they are intact: a flipped bit in each region of a real checkpoint
# (the length field, the JSON header, a tensor's name, the metadata, each tensor's data), a
# truncation and a tensor spliced from another step's checkpoint are each refused by --resume
# with exit 2 naming the file (and the tensor); model.init_from, `hettrain generate` and an
# asynchronous job's resume verify too; a file without checksums (another tool's) still
# loads, with a warning. Then the writer killed (kill -9) in the middle of its saves, again
# and again: each time the checkpoint left is a complete earlier save that the next run
# resumes from.
. "$(dirname "$0")/../lib/lib.sh"

PY=/usr/bin/python3
if ! $PY -c 'import json' 2>/dev/null; then
    echo "1..0 # SKIP /usr/bin/python3 is needed to edit checkpoint files"
    exit 0
fi
# st CMD ARGS: regions FILE ("name begin end" per tensor, absolute offsets; also "@header N",
# "@step OFF" of the step value, "@key OFF" of the first tensor's name); flip SRC DST OFF BIT;
# splice A B DST NAME (NAME's data bytes from B into A); strip SRC DST (without checksums)
st() {
    $PY - "$@" <<'PY'
import json, struct, sys
cmd, a = sys.argv[1], sys.argv[2:]
def parse(p):
    b = open(p, 'rb').read()
    (n,) = struct.unpack('<Q', b[:8])
    return b, n, json.loads(b[8:8 + n])
if cmd == 'regions':
    b, n, h = parse(a[0])
    print('@header', n)
    print('@step', b.index(b'"step":"') + 8)
    first = [k for k in h if k != '__metadata__'][0]
    print('@key', b.index(b'"' + first.encode() + b'":{') + 1)
    for k, v in h.items():
        if k != '__metadata__':
            print(k, 8 + n + v['data_offsets'][0], 8 + n + v['data_offsets'][1])
elif cmd == 'flip':
    b = bytearray(open(a[0], 'rb').read())
    b[int(a[2])] ^= 1 << int(a[3])
    open(a[1], 'wb').write(b)
elif cmd == 'splice':
    x, n, h = parse(a[0])
    y, m, g = parse(a[1])
    s, e = h[a[3]]['data_offsets']
    assert g[a[3]]['data_offsets'] == [s, e] and n == m
    z = x[:8 + n + s] + y[8 + m + s:8 + m + e] + x[8 + n + e:]
    assert z != x
    open(a[2], 'wb').write(z)
elif cmd == 'strip':
    b, n, h = parse(a[0])
    h['__metadata__'] = {k: v for k, v in h['__metadata__'].items() if not k.startswith('crc32c')}
    t = json.dumps(h, separators=(',', ':')).encode()
    t += b' ' * (-len(t) % 8)
    open(a[1], 'wb').write(struct.pack('<Q', len(t)) + t + b[8 + n:])
PY
}

cat >"$TMP/job.cfg" <<'CFG'
model = { hidden = [16, 12]; };
data = { kind = "synthetic"; samples = 600; features = 8; classes = 3; seed = 3; };
train = { batch = 32; steps = 20; seed = 7; };
optim = { type = "adamw"; lr = 0.01; };
log = { every = 1; progress = "none"; };
CFG
args=(-c "$TMP/job.cfg" -q)
run_ht "${args[@]}" --stop-after 10 --set checkpoint.path="$TMP/s10.ckpt"
ok $([ $RC -eq 0 ] && [ -s "$TMP/s10.ckpt" ]; echo $?) "a run stopped at step 10 saves a checkpoint"
run_ht "${args[@]}" --set checkpoint.path="$TMP/s20.ckpt" --set log.metrics="$TMP/u.jsonl"
ok $RC "an uninterrupted run to step 20 saves one"
cp "$TMP/s10.ckpt" "$TMP/r.ckpt"
run_ht "${args[@]}" --resume --set checkpoint.path="$TMP/r.ckpt"
ok $([ $RC -eq 0 ] && [ -z "$ERR" ]; echo $?) \
    "a copy of the step-10 checkpoint verifies and resumes to the end, without a note"

st regions "$TMP/s10.ckpt" >"$TMP/regions" || echo "# st regions failed" >&2
hl=$(awk '$1 == "@header" { print $2 }' "$TMP/regions")
# damaged PATTERN DESCRIPTION: --resume from $TMP/bad.ckpt exits 2, stderr naming the file and
# matching PATTERN
damaged() {
    expect_fail 2 "$TMP/bad.ckpt: byte [0-9]+: $1" "$2" -- "${args[@]}" --resume \
        --set checkpoint.path="$TMP/bad.ckpt"
}
st flip "$TMP/s10.ckpt" "$TMP/bad.ckpt" 1 2
damaged "" "a flipped bit in the header's length field"
st flip "$TMP/s10.ckpt" "$TMP/bad.ckpt" "$(awk '$1 == "@key" { print $2 + 2 }' "$TMP/regions")" 0
damaged "the header .* changed after it was written" "a flipped bit in a tensor's name in the JSON header"
st flip "$TMP/s10.ckpt" "$TMP/bad.ckpt" "$(awk '$1 == "@step" { print $2 }' "$TMP/regions")" 0
damaged "the header .* changed after it was written" "a flipped bit in the metadata (step 10 -> 00)"
st flip "$TMP/s10.ckpt" "$TMP/bad.ckpt" $((8 + hl - 1)) 6
damaged "" "a flipped bit in the header's last (padding) byte"
n=0
while read -r name b e; do
    case $name in @*) continue ;; esac
    n=$((n + 1))
    st flip "$TMP/s10.ckpt" "$TMP/bad.ckpt" $(((b + e) / 2)) $((n % 8))
    damaged "tensor '$name' \\(bytes $b to $e\\) has CRC32C" "a flipped bit in the data of $name"
done <"$TMP/regions"
ok $([ "$n" -ge 8 ]; echo $?) "each of the $n tensors (parameters and optimizer state) was damaged once"
size=$(stat -c %s "$TMP/s10.ckpt")
head -c $((size - 100)) "$TMP/s10.ckpt" >"$TMP/bad.ckpt"
damaged "data_offsets .* of tensor 'optim.v' run past the data buffer" "the last 100 bytes cut off"
head -c $((8 + hl + 10)) "$TMP/s10.ckpt" >"$TMP/bad.ckpt"
damaged "" "cut off after the first tensor's first 10 bytes"
st splice "$TMP/s20.ckpt" "$TMP/s10.ckpt" "$TMP/bad.ckpt" fc2.weight
damaged "tensor 'fc2.weight'" "fc2.weight of the step-10 checkpoint spliced into the step-20 one"
st splice "$TMP/s10.ckpt" "$TMP/s20.ckpt" "$TMP/bad.ckpt" optim.m
damaged "tensor 'optim.m'" "optim.m of the step-20 checkpoint spliced into the step-10 one"
fc1=$(awk '$1 == "fc1.weight" { print int(($2 + $3) / 2) }' "$TMP/regions")
st flip "$TMP/s10.ckpt" "$TMP/bad.ckpt" "${fc1:-0}" 4
expect_fail 2 "$TMP/bad.ckpt: byte [0-9]+: tensor 'fc1.weight'" \
    "model.init_from a checkpoint with a flipped bit in fc1.weight" -- "${args[@]}" \
    --set model.init_from="$TMP/bad.ckpt"

# another tool's file: no checksums, loads with a one-line note, trains the same
st strip "$TMP/s10.ckpt" "$TMP/plain.ckpt"
run_ht "${args[@]}" --resume --set checkpoint.path="$TMP/plain.ckpt" --set log.metrics="$TMP/p.jsonl"
notes=$(grep -c "warning: $TMP/plain.ckpt has no checksums" "$TMP/err")
losses "$TMP/u.jsonl" | tail -10 >"$TMP/u.loss"
losses "$TMP/p.jsonl" >"$TMP/p.loss" 2>/dev/null
ok $([ $RC -eq 0 ] && [ "$notes" -eq 1 ] && cmp -s "$TMP/u.loss" "$TMP/p.loss"; echo $?) \
    "a checkpoint without checksums loads with one note and resumes to the uninterrupted run's losses (exit $RC, $notes note(s))"
[ "$notes" -eq 1 ] || diag "$(cat "$TMP/err")"

# generate reads through the same verification
for i in $(seq 30); do printf 'the quick brown fox jumps over the lazy dog. '; done >"$TMP/fox.txt"
cat >"$TMP/gpt.cfg" <<CFG
model = { type = "gpt"; n_layer = 1; d_model = 16; n_head = 2; context = 16; };
data = { kind = "text"; path = "$TMP/fox.txt"; val_fraction = 0.1; };
train = { batch = 8; steps = 3; eval_batches = 1; };
optim = { type = "adamw"; lr = 0.01; };
log = { progress = "none"; };
checkpoint = { path = "$TMP/gpt.ckpt"; };
CFG
run_ht -c "$TMP/gpt.cfg" -q
ok $RC "a 3-step GPT run saves a checkpoint"
st regions "$TMP/gpt.ckpt" | awk '$1 !~ /^@/ { print $1, $2; exit }' >"$TMP/g1"
read -r gname gat <"$TMP/g1"
st flip "$TMP/gpt.ckpt" "$TMP/gbad.ckpt" "$((gat + 5))" 3
expect_fail 2 "$TMP/gbad.ckpt: byte [0-9]+: tensor '$gname'" \
    "generate from a checkpoint with a flipped bit in $gname" -- generate -c "$TMP/gpt.cfg" \
    --checkpoint "$TMP/gbad.ckpt" --prompt "the " --tokens 4

# an asynchronous policy's checkpoint (each worker's model in sync.worker.<w>.params)
. "$(dirname "$0")/../lib/mpi.sh"
if command -v mpirun >/dev/null; then
    mpirun_ht 3 "$HETTRAIN" "${args[@]}" --set sync.mode=gossip \
        --set checkpoint.path="$TMP/g.ckpt" --stop-after 6 >"$TMP/out" 2>"$TMP/err"
    RC=$?
    off=$(st regions "$TMP/g.ckpt" | awk '$1 == "sync.worker.1.params" { print $2 + 9 }')
    ok $([ $RC -eq 0 ] && [ -n "$off" ]; echo $?) "a gossip job (3 ranks) saves per-worker models (exit $RC)"
    st flip "$TMP/g.ckpt" "$TMP/abad.ckpt" "${off:-0}" 1
    mpirun_ht 3 "$HETTRAIN" "${args[@]}" --set sync.mode=gossip \
        --set checkpoint.path="$TMP/abad.ckpt" --resume >"$TMP/out" 2>"$TMP/err"
    RC=$?
    ok $([ $RC -eq 2 ] && grep -Eq "$TMP/abad.ckpt: byte [0-9]+: tensor 'sync.worker.1.params'" "$TMP/err"; echo $?) \
        "gossip --resume from it with a flipped bit in worker 1's model: exit $RC naming the tensor"
    [ $RC -eq 2 ] || diag "$(tail -5 "$TMP/err")"
else
    echo "ok $((T_N += 1)) # SKIP mpirun not installed: no asynchronous checkpoint"
    echo "ok $((T_N += 1)) # SKIP mpirun not installed: no asynchronous checkpoint"
fi

# --- the writer killed in the middle of a save. A 3.6 MB checkpoint saved after every step:
# each round resumes from what the last one left and waits until the writer has created its
# temp file (it is then between open and rename); odd rounds kill it (SIGKILL) at once (their
# saves pause before the rename: HT_FAILPOINT, so this always hits a save), even ones let
# that save finish, wait for the next one and kill after a random 0-40 ms. Whether the temp
# file stayed says that the kill hit the save itself.
. "$(dirname "$0")/../lib/killed_saves.sh"
big_cfg "path = \"$TMP/big.ckpt\";"
for r in $(seq $ROUNDS); do
    start_writer $([ $((r % 2)) -eq 1 ] && echo $FAILPOINT)
    tmpf="$TMP/big.ckpt.tmp.$pid"
    t0=$SECONDS
    # till: busy-waits while the condition holds, the writer lives, at most 120 s
    till() { while eval "$1" && kill -0 $pid 2>/dev/null && [ $((SECONDS - t0)) -lt 120 ]; do :; done; }
    till '[ ! -e "$tmpf" ]'
    if [ $((r % 2)) -eq 0 ]; then
        till '[ -e "$tmpf" ]'
        till '[ ! -e "$tmpf" ]'
        sleep "0.0$((RANDOM % 5))"
    fi
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    [ -e "$tmpf" ] && hits=$((hits + 1))
    # the checkpoint it resumed from: none in round 1, else the last round's
    round_tally $r
done
last_resume "$TMP/big.cfg" \
    "$ROUNDS writers killed with SIGKILL: each next run resumed from a verified checkpoint, steps never going back"
ok $([ $hits -ge 1 ]; echo $?) "$hits of the $ROUNDS kills hit a save between creating the temp file and the rename"
left=$(ls "$TMP" | grep -c '^big\.ckpt\.tmp\.')
ok $([ "$left" -eq 0 ]; echo $?) "the next save removed the killed writers' temp files ($left left)"
done_testing
