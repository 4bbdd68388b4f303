#!/usr/bin/env bash
# Sharded checkpoints (checkpoint.shards, Hugging Face's layout): the set read back by numpy
# alone (index json, every shard's header, the pieces joined) equals the single file an
# unsharded run saves, bit for bit; --resume from a set (written by one process, or by 2
# data-parallel ranks) continues with the uninterrupted run's losses; ckpt merge / split round
# trips; a torn set (one shard of another save) is refused naming that shard; every state a
# crash can leave behind loads the last committed save; writers killed with SIGKILL in the
# middle of their saves always leave a set the next run resumes from.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"

PY=/usr/bin/python3
if ! $PY -c 'import numpy' 2>/dev/null; then
    echo "1..0 # SKIP /usr/bin/python3 with numpy is needed to read the sets independently"
    exit 0
fi
# st check INDEX: the set's step after checking it as a reader of the format would (every
# weight_map entry in its file, every shard of the index's step); st same INDEX FILE: the
# set's tensors (pieces NAME#OFF joined) and metadata equal FILE's, byte for byte
st() {
    $PY - "$@" <<'PY'
import json, os, struct, sys
import numpy as np
def parse(p):
    b = open(p, 'rb').read()
    (n,) = struct.unpack('<Q', b[:8])
    h = json.loads(b[8:8 + n])
    meta = h.pop('__metadata__', {})
    t = {k: np.frombuffer(b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]], '<f4')
         .reshape(v['shape']) for k, v in h.items()}
    return t, meta
def load_set(ix):
    idx = json.load(open(ix))
    d = os.path.dirname(ix)
    files = sorted(set(idx['weight_map'].values()))
    tens, metas = {}, []
    for f in files:
        t, m = parse(os.path.join(d, f))
        assert m['set.step'] == idx['metadata']['set.step'], (f, m['set.step'])
        assert sorted(t) == sorted(k for k, v in idx['weight_map'].items() if v == f), f
        metas.append({k: v for k, v in m.items() if not k.startswith(('crc32c', 'set.'))})
        tens.update(t)
    assert all(m == metas[0] for m in metas)
    joined = {}
    for k in sorted(tens, key=lambda k: int(k.split('#')[1]) if '#' in k else 0):
        if '#' in k:
            base, off = k.split('#')
            cur = joined.setdefault(base, np.zeros(0, '<f4'))
            assert int(off) == cur.size, k
            joined[base] = np.concatenate([cur, tens[k]])
        else:
            joined[k] = tens[k]
    return joined, metas[0], idx['metadata']['set.step']
cmd, a = sys.argv[1], sys.argv[2:]
if cmd == 'check':
    print(load_set(a[0])[2])
elif cmd == 'same':
    t, m, _ = load_set(a[0])
    u, n = parse(a[1])
    n = {k: v for k, v in n.items() if not k.startswith('crc32c')}
    ok = sorted(t) == sorted(u) and m == n and all(
        t[k].shape == u[k].shape and t[k].tobytes() == u[k].tobytes() for k in u)
    if not ok:
        print('# differ:', sorted(t), sorted(u), m, n)
    sys.exit(0 if ok else 1)
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
mkdir "$TMP/a" "$TMP/b"
run_ht "${args[@]}" --stop-after 10 --set checkpoint.path="$TMP/u10.ckpt"
run_ht "${args[@]}" --set checkpoint.path="$TMP/u20.ckpt" --set log.metrics="$TMP/u.jsonl"
ok $RC "unsharded runs save single files at steps 10 and 20"
run_ht "${args[@]}" --stop-after 10 --set checkpoint.path="$TMP/a/s.safetensors" \
    --set checkpoint.shards=3
ls "$TMP/a" >"$TMP/a.ls"
ok $([ $RC -eq 0 ] && [ "$(cat "$TMP/a.ls" | tr '\n' ' ')" = "s-00001-of-00003.safetensors s-00002-of-00003.safetensors s-00003-of-00003.safetensors s.safetensors.index.json " ]; echo $?) \
    "checkpoint.shards = 3 writes s-0000i-of-00003.safetensors and s.safetensors.index.json, nothing else (exit $RC: $(cat "$TMP/a.ls" | tr '\n' ' '))"
ok $([ "$(st check "$TMP/a/s.safetensors.index.json")" = 10 ]; echo $?) \
    "numpy reads the set: every weight_map entry in its shard, every shard of step 10"
st same "$TMP/a/s.safetensors.index.json" "$TMP/u10.ckpt"
ok $? "the set's tensors (optimizer state pieces joined) and metadata equal the unsharded step-10 file, bit for bit"

# resume from the set: the uninterrupted run's last 10 losses, bit for bit
run_ht "${args[@]}" --resume --set checkpoint.path="$TMP/a/s.safetensors" \
    --set checkpoint.shards=3 --set log.metrics="$TMP/r.jsonl"
losses "$TMP/u.jsonl" | tail -10 >"$TMP/u.loss"
losses "$TMP/r.jsonl" >"$TMP/r.loss"
ok $([ $RC -eq 0 ] && cmp -s "$TMP/u.loss" "$TMP/r.loss"; echo $?) \
    "--resume from the set gives the uninterrupted run's losses 11..20 bit for bit (exit $RC)"
st same "$TMP/a/s.safetensors.index.json" "$TMP/u20.ckpt"
ok $? "its step-20 set equals the unsharded step-20 file"

# merge and split: sharded -> merged -> sharded -> merged
run_ht ckpt merge "$TMP/a/s.safetensors" "$TMP/m.ckpt"
st same "$TMP/a/s.safetensors.index.json" "$TMP/m.ckpt"
ok $([ $RC -eq 0 ] && st same "$TMP/a/s.safetensors.index.json" "$TMP/m.ckpt"; echo $?) \
    "ckpt merge writes the set as one file with the same tensors and metadata (exit $RC)"
run_ht ckpt split "$TMP/m.ckpt" "$TMP/b/t.safetensors" --shards 2
ok $([ $RC -eq 0 ] && [ "$(st check "$TMP/b/t.safetensors.index.json")" = 20 ] &&
    st same "$TMP/b/t.safetensors.index.json" "$TMP/u20.ckpt"; echo $?) \
    "ckpt split --shards 2 writes a set of step 20 with the same tensors (exit $RC)"
run_ht ckpt merge "$TMP/b/t.safetensors.index.json" "$TMP/m2.ckpt"
ok $([ $RC -eq 0 ] && st same "$TMP/b/t.safetensors.index.json" "$TMP/m2.ckpt" &&
    cmp -s "$TMP/m.ckpt" "$TMP/m2.ckpt"; echo $?) \
    "merging the split set again gives the first merge's file byte for byte (exit $RC)"
expect_fail 2 "ckpt merge: '$TMP/m.ckpt' already exists" "ckpt merge never replaces a file" \
    -- ckpt merge "$TMP/b/t.safetensors" "$TMP/m.ckpt"

# a torn set: shard 2 of the step-20 set put into a copy of a step-10 set
mkdir "$TMP/c" "$TMP/t"
run_ht "${args[@]}" --stop-after 10 --set checkpoint.path="$TMP/c/s.safetensors" \
    --set checkpoint.shards=3
cp "$TMP"/c/* "$TMP/t/"
cp "$TMP/a/s-00002-of-00003.safetensors" "$TMP/t/"
expect_fail 2 "$TMP/t/s-00002-of-00003.safetensors: shard of save step 20, but its index .* is of step 10: a torn set" \
    "a torn set (shard 2 from the step-20 save) is refused naming that shard" -- \
    "${args[@]}" --resume --set checkpoint.path="$TMP/t/s.safetensors"

# an index that does not match its shards (the index has no checksum: edited by hand)
rm -rf "$TMP/t" && mkdir "$TMP/t" && cp "$TMP"/c/* "$TMP/t/"
$PY - "$TMP/t/s.safetensors.index.json" <<'PY'
import json, sys
ix = json.load(open(sys.argv[1]))
del ix['weight_map']['fc2.weight']
json.dump(ix, open(sys.argv[1], 'w'))
PY
expect_fail 2 "$TMP/t/s-00002-of-00003.safetensors: holds 3 tensors, but the index .* places 2 here" \
    "an index that leaves out a shard's tensor is refused naming the shard" -- \
    ckpt merge "$TMP/t/s.safetensors" "$TMP/bad.ckpt"
rm -rf "$TMP/t" && mkdir "$TMP/t" && cp "$TMP"/c/* "$TMP/t/" && rm "$TMP/t/s-00003-of-00003.safetensors"
expect_fail 2 "$TMP/t/s-00003-of-00003.safetensors" \
    "a set with a shard missing is refused naming it" -- \
    "${args[@]}" --resume --set checkpoint.path="$TMP/t/s.safetensors"

# Every state a crash can leave (safetensors.h: the shards go to .next, the index is renamed
# in, then the shards): built by hand from the step-10 set (c) and the step-20 set (a).
# Killed before the index: old index and shards, the new shards (some) at .next -> step 10.
rm -rf "$TMP/t" && mkdir "$TMP/t" && cp "$TMP"/c/* "$TMP/t/"
cp "$TMP/a/s-00001-of-00003.safetensors" "$TMP/t/s-00001-of-00003.safetensors.next"
cp "$TMP/a/s-00003-of-00003.safetensors" "$TMP/t/s-00003-of-00003.safetensors.next"
run_ht ckpt merge "$TMP/t/s.safetensors" "$TMP/k1.ckpt"
ok $([ $RC -eq 0 ] && st same "$TMP/c/s.safetensors.index.json" "$TMP/k1.ckpt"; echo $?) \
    "killed before the index's rename (new shards at .next): the step-10 set loads (exit $RC)"
# Killed after the index, with shard 1 renamed and shards 2, 3 still at .next -> step 20.
cp "$TMP/a/s.safetensors.index.json" "$TMP/a/s-00001-of-00003.safetensors" "$TMP/t/"
cp "$TMP/a/s-00002-of-00003.safetensors" "$TMP/t/s-00002-of-00003.safetensors.next"
run_ht ckpt merge "$TMP/t/s.safetensors" "$TMP/k2.ckpt"
ok $([ $RC -eq 0 ] && st same "$TMP/a/s.safetensors.index.json" "$TMP/k2.ckpt"; echo $?) \
    "killed after the index's rename (shards 2 and 3 still at .next): the step-20 set loads (exit $RC)"
[ $RC -eq 0 ] || diag "$ERR"

# 2 data-parallel ranks each write their shard; one process resumes
if command -v mpirun >/dev/null; then
    mkdir "$TMP/d"
    mpirun_ht 2 "$HETTRAIN" "${args[@]}" --stop-after 10 --set checkpoint.shards=2 \
        --set checkpoint.path="$TMP/d/s.safetensors" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    ok $([ $RC -eq 0 ] && [ "$(st check "$TMP/d/s.safetensors.index.json")" = 10 ]; echo $?) \
        "2 data-parallel ranks write a 2-shard set of step 10 (exit $RC)"
    mpirun_ht 2 "$HETTRAIN" "${args[@]}" --set log.metrics="$TMP/d.jsonl" >"$TMP/out" 2>"$TMP/err"
    run_ht "${args[@]}" --resume --set checkpoint.path="$TMP/d/s.safetensors" \
        --set log.metrics="$TMP/d1.jsonl"
    losses "$TMP/d.jsonl" | tail -10 >"$TMP/d.loss"
    losses "$TMP/d1.jsonl" >"$TMP/d1.loss"
    ok $([ $RC -eq 0 ] && same_losses "$TMP/d.loss" "$TMP/d1.loss" 10 1e-6; echo $?) \
        "one process resumes the 2 ranks' set: losses 11..20 within 1e-6 of the 2-rank run's (exit $RC)"
else
    echo "ok $((T_N += 1)) # SKIP mpirun not installed"
    echo "ok $((T_N += 1)) # SKIP mpirun not installed"
fi

# --- writers killed (SIGKILL) in the middle of sharded saves, one after every step: odd
# rounds as soon as a shard's temp file or .next exists (their saves pause before each rename:
# HT_FAILPOINT, so these always hit a save), even ones 0-40 ms later
mkdir "$TMP/k"
. "$(dirname "$0")/../lib/killed_saves.sh"
big_cfg "path = \"$TMP/k/big.safetensors\"; shards = 3;"
for r in $(seq $ROUNDS); do
    touch "$TMP/mark"
    start_writer $([ $((r % 2)) -eq 1 ] && echo $FAILPOINT)
    t0=$SECONDS
    # this writer's temp files, or a .next it wrote (an earlier round's may still be there)
    saving() {
        ls "$TMP/k" | grep -Eq "\.tmp\.$pid$" ||
            [ -n "$(find "$TMP/k" -name '*.next' -newer "$TMP/mark" 2>/dev/null)" ]
    }
    while ! saving && kill -0 $pid 2>/dev/null && [ $((SECONDS - t0)) -lt 120 ]; do :; done
    [ $((r % 2)) -eq 0 ] && sleep "0.0$((RANDOM % 5))"
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    saving && hits=$((hits + 1))
    round_tally $r
done
last_resume "$TMP/big.cfg" \
    "$ROUNDS sharded writers killed with SIGKILL: each next run resumed from a complete set, steps never going back"
ok $([ $hits -ge 1 ]; echo $?) "$hits of the $ROUNDS kills left a shard's temp file or .next behind (hit a save)"
done_testing
