#!/usr/bin/env bash
# Token files end to end (data.kind = "tokens"): a uint16 copy of a text trains to the very
# loss sequence of the byte-level run on that text (same windows, same ids); a vocabulary
# past 256 starts at ln(V); llm.c shards by glob with a separate validation set; a bad token
# is refused naming the key, the config line, the file and the byte offset; generate reads
# and prints token ids. The text is this repository's README (every clone has it).
. "$(dirname "$0")/../lib/lib.sh"
TEXT="$(cd "$(dirname "$0")/../.." && pwd)/README.md"
/usr/bin/python3 - "$TEXT" "$TMP" <<'PY'
import struct, sys
import numpy as np
text, tmp = open(sys.argv[1], 'rb').read(), sys.argv[2]
np.frombuffer(text, np.uint8).astype('<u2').tofile(tmp + '/bytes.bin')
rng = np.random.default_rng(1)
# ids over V = 300: a byte-level stream with every 7th id moved above 255
ids = np.frombuffer(text, np.uint8).astype(np.int64)
ids[::7] += 44
ids = ids.astype('<u2')
def shard(path, a):
    with open(path, 'wb') as f:
        f.write(struct.pack('<256i', 20240520, 1, len(a), *([0] * 253)))
        f.write(a.tobytes())
half = len(ids) // 2
shard(tmp + '/tr_000.bin', ids[:half // 2])
shard(tmp + '/tr_001.bin', ids[half // 2:half])
shard(tmp + '/val_000.bin', ids[half:])
bad = ids[:4000].copy(); bad[1234] = 300
bad.tofile(tmp + '/bad.bin')
PY
cat >"$TMP/base.cfg" <<EOF
model = { type = "gpt"; n_layer = 1; d_model = 32; n_head = 2; context = 32; };
data = { kind = "text"; path = "$TEXT"; val_fraction = 0.1; };
train = { batch = 8; steps = 30; seed = 3; eval_every = 0; eval_batches = 2; };
optim = { type = "adamw"; lr = 0.003; };
log = { every = 1; progress = "none"; };
EOF

run_ht -c "$TMP/base.cfg" --set log.metrics="$TMP/text.jsonl"
[ $RC -eq 0 ]; ok $? "byte-level GPT on the README: 30 steps"
run_ht -c "$TMP/base.cfg" --set data.kind=tokens --set data.path="$TMP/bytes.bin" \
    --set log.metrics="$TMP/tok.jsonl"
[ $RC -eq 0 ]; ok $? "the same GPT on the README as uint16 token ids (vocabulary 256)"
losses "$TMP/text.jsonl" >"$TMP/a"
losses "$TMP/tok.jsonl" >"$TMP/b"
[ "$(wc -l <"$TMP/a")" -eq 30 ] && cmp -s "$TMP/a" "$TMP/b"
same=$?
ok $same "token files give the byte-level run's 30 losses exactly (same windows, same ids)"
[ $same -eq 0 ] || diag "$(paste "$TMP/a" "$TMP/b" | head -3)"

run_ht -c "$TMP/base.cfg" --set data.kind=tokens --set "data.path=$TMP/tr_*.bin" \
    --set data.val_path="$TMP/val_000.bin" --set model.vocab=300 --set train.steps=60 \
    --set log.metrics="$TMP/v300.jsonl"
[ $RC -eq 0 ] && printf '%s' "$ERR$OUT" | grep -q "from 2 files"
ok $? "vocabulary 300 over a glob of 2 llm.c shards, validation from data.val_path"
[ $RC -eq 0 ] || diag "$ERR"
first=$(losses "$TMP/v300.jsonl" | head -1 | cut -d' ' -f2)
last=$(losses "$TMP/v300.jsonl" | tail -1 | cut -d' ' -f2)
vl=$(grep '"type":"eval"' "$TMP/v300.jsonl" | tail -1 | sed -nE 's/.*"val_loss":([^,]+),.*/\1/p')
awk -v f="$first" -v l="$last" -v v="$vl" 'BEGIN { lnv = log(300); d = f - lnv; if (d < 0) d = -d;
    exit !(d < 0.15 && l < f - 1.0 && v > 0 && v < f) }'
ok $? "first loss $first is ln 300 = 5.70 within 0.15 (a fresh model is uniform); 60 steps bring it to $last; validation loss $vl"

expect_fail 2 "base.cfg.*data.path.*bad.bin.*byte offset 2468 \\(token 1234\\): token id 300.*model.vocab = 300" \
    "a token id past the vocabulary names key, config, file and byte offset" -- \
    -c "$TMP/base.cfg" --set data.kind=tokens --set data.path="$TMP/bad.bin" --set model.vocab=300
expect_fail 2 "data.val_path.*only for \"tokens\"" "data.val_path with a text file is refused" -- \
    -c "$TMP/base.cfg" --set data.val_path="$TMP/val_000.bin"
expect_fail 2 "model.vocab.*at least 256" "a byte-level text with a vocabulary under 256 is refused" -- \
    -c "$TMP/base.cfg" --set model.vocab=100
expect_fail 2 "expected \"gpt\" for data.kind \"tokens\"" "token files for an MLP are refused" -- \
    -c "$TMP/base.cfg" --set data.kind=tokens --set data.path="$TMP/bytes.bin" --set model.type=mlp

# GPT-2's tied head: one process, 2 ranks with small gradient buckets (the head's bucket
# all-reduced before wte's, which holds both uses' gradients), and a resume
. "$(dirname "$0")/../lib/mpi.sh"
TIED=(-c "$TMP/base.cfg" --set data.kind=tokens --set "data.path=$TMP/tr_*.bin" --set model.vocab=300
    --set model.tie_embeddings=true --set train.steps=20)
run_ht "${TIED[@]}" --set log.metrics="$TMP/t1.jsonl" --set checkpoint.path="$TMP/t1.ckpt"
[ $RC -eq 0 ] && printf '%s' "$ERR$OUT" | grep -q "V300 tied"
ok $? "a tied GPT trains (model 'gpt ... V300 tied')"
/usr/bin/python3 - "$TMP/t1.ckpt" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
h = json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])
sys.exit(0 if 'embed.wte' in h and 'head.weight' not in h and 'head.bias' not in h else 1)
PY
ok $? "its checkpoint holds embed.wte, no head.weight or head.bias (GPT-2's head)"
mpirun_ht 2 "$HETTRAIN" "${TIED[@]}" --set log.metrics="$TMP/t2.jsonl" --set cluster.bucket_first_mb=0.01 \
    --set cluster.bucket_cap_mb=0.01 >"$TMP/t2.out" 2>&1
rc=$?
losses "$TMP/t1.jsonl" >"$TMP/a"
losses "$TMP/t2.jsonl" >"$TMP/b"
[ $rc -eq 0 ] && same_losses "$TMP/a" "$TMP/b" 20 1e-5
ok $? "2 ranks with 10 KB gradient buckets give the one-process losses of the tied GPT within 1e-5 (exit $rc)"
[ $rc -eq 0 ] || diag "$(tail -5 "$TMP/t2.out")"
run_ht "${TIED[@]}" --set log.metrics="$TMP/t3.jsonl" --set checkpoint.path="$TMP/t3.ckpt" --stop-after 10
run_ht "${TIED[@]}" --set log.metrics="$TMP/t3.jsonl" --set checkpoint.path="$TMP/t3.ckpt" --resume
losses "$TMP/t3.jsonl" | tail -10 >"$TMP/c"
tail -10 "$TMP/a" | cmp -s - "$TMP/c"
ok $? "stopped at step 10 and resumed, the tied GPT's steps 11-20 are the uninterrupted run's exactly"
# under a pipeline the head's stage holds a copy of wte, kept equal by summing the copies'
# gradients (tests/integration/pipe_tied.t tests every schedule)
mpirun_ht 2 "$HETTRAIN" "${TIED[@]}" --set log.metrics="$TMP/t4.jsonl" --set pipe.schedule=1f1b \
    --set pipe.stages=2 --set pipe.micro_batches=2 >"$TMP/t4.out" 2>&1
rc=$?
losses "$TMP/t4.jsonl" >"$TMP/d"
[ $rc -eq 0 ] && same_losses "$TMP/a" "$TMP/d" 20 1e-5
ok $? "the tied GPT on token files as a 2-stage 1f1b pipeline: the one-process losses within 1e-5 (exit $rc)"
[ $rc -eq 0 ] || diag "$(tail -5 "$TMP/t4.out")"

"$HETTRAIN" plan --cluster conf/cluster-lab.cfg "${TIED[@]}" --set train.batch=12 --top 30 >"$TMP/plan" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -Eq "^ +[0-9]+ (gpipe|1f1b|interleaved|chimera|hepipe|2bw) D=[0-9].* [0-9.]+ +[0-9.]+ +[0-9.]+$" "$TMP/plan" &&
    ! grep -q "tie_embeddings under a pipeline" "$TMP/plan"
ok $? "hettrain plan on a tied GPT simulates pipelines too (exit $rc)"

# generate: a token model takes and prints ids
run_ht -c "$TMP/base.cfg" --set data.kind=tokens --set "data.path=$TMP/tr_*.bin" \
    --set model.vocab=300 --set checkpoint.path="$TMP/v.ckpt" --set train.steps=5
gen=$("$HETTRAIN" generate -c "$TMP/base.cfg" --set data.kind=tokens --set "data.path=$TMP/tr_*.bin" \
    --set model.vocab=300 --checkpoint "$TMP/v.ckpt" --prompt "1, 2 299" --tokens 12 --seed 4 2>"$TMP/gerr")
printf '%s\n' "$gen" | awk '{ if (NF != 15 || $1 != 1 || $2 != 2 || $3 != 299) exit 1;
    for (i = 1; i <= NF; i++) if ($i !~ /^[0-9]+$/ || $i >= 300) exit 1 }'
ok $? "generate prints the 3 prompt ids and 12 sampled ids, each below 300: $gen"
[ -n "$gen" ] || diag "$(cat "$TMP/gerr")"
"$HETTRAIN" generate -c "$TMP/base.cfg" --set data.kind=tokens --set "data.path=$TMP/tr_*.bin" \
    --set model.vocab=300 --checkpoint "$TMP/v.ckpt" --prompt "1 300" --tokens 2 >/dev/null 2>"$TMP/gerr"
rc=$?
[ $rc -eq 2 ] && grep -q "'300' at character 2.*\[0, 300)" "$TMP/gerr"
ok $? "a prompt id past the vocabulary exits 2 naming it (exit $rc)"
done_testing
