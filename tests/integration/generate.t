#!/usr/bin/env bash
# hettrain generate: argument and input errors exit 2 with a clear message (no config, no
# prompt, bad counts, a config that is not a GPT, a missing checkpoint or one of another
# model, an empty prompt); end to end, a tiny GPT trained on a repeated sentence continues
# it, the same seed gives the same text, greedy decoding is deterministic.
. "$(dirname "$0")/../lib/lib.sh"

for i in $(seq 40); do printf 'the quick brown fox jumps over the lazy dog. '; done >"$TMP/fox.txt"
cat >"$TMP/gpt.cfg" <<CFG
model = { type = "gpt"; n_layer = 1; d_model = 32; n_head = 2; context = 24; };
data = { kind = "text"; path = "$TMP/fox.txt"; val_fraction = 0.1; };
train = { batch = 16; steps = 150; eval_batches = 2; };
optim = { type = "adamw"; lr = 0.01; schedule = "cosine"; warmup = 10; };
log = { progress = "none"; };
checkpoint = { path = "$TMP/gpt.ckpt"; };
CFG
cat >"$TMP/mlp.cfg" <<'CFG'
model = { hidden = [8]; };
data = { kind = "synthetic"; samples = 100; features = 4; classes = 2; };
train = { batch = 8; steps = 2; };
optim = { lr = 0.1; };
CFG

run_ht --help
printf '%s' "$OUT" | grep -q "hettrain generate -c FILE"; ok $? "--help documents generate"
expect_fail 2 "generate: no config given" "no config" -- generate --prompt x --tokens 3
expect_fail 2 "no --prompt given" "no prompt" -- generate -c "$TMP/gpt.cfg" --tokens 3
expect_fail 2 "no --tokens given" "no token count" -- generate -c "$TMP/gpt.cfg" --prompt x
expect_fail 2 "--tokens 0: expected an integer in \[1," "zero tokens" -- generate -c "$TMP/gpt.cfg" --prompt x --tokens 0
expect_fail 2 "--tokens abc: expected an integer" "a count that is not a number" -- generate -c "$TMP/gpt.cfg" --prompt x --tokens abc
expect_fail 2 "--temperature -1: expected a number >= 0" "negative temperature" -- generate -c "$TMP/gpt.cfg" --prompt x --tokens 3 --temperature -1
expect_fail 2 "--seed x: expected an integer" "bad seed" -- generate -c "$TMP/gpt.cfg" --prompt x --tokens 3 --seed x
expect_fail 2 "unknown argument '--bogus' for generate" "unknown argument" -- generate -c "$TMP/gpt.cfg" --bogus
expect_fail 2 "option --prompt needs a value" "option without its value" -- generate -c "$TMP/gpt.cfg" --prompt
expect_fail 2 "model.type \"mlp\", expected \"gpt\"" "a config that is not a GPT" -- generate -c "$TMP/mlp.cfg" --checkpoint "$TMP/x" --prompt x --tokens 3
expect_fail 2 "checkpoint '$TMP/none.ckpt' does not exist: train first" "a missing checkpoint" -- generate -c "$TMP/gpt.cfg" --checkpoint "$TMP/none.ckpt" --prompt x --tokens 3
expect_fail 2 "generate needs a checkpoint" "no checkpoint at all" -- generate -c "$TMP/gpt.cfg" --set checkpoint.path= --prompt x --tokens 3
expect_fail 2 "keys in 'model'|did you mean" "config errors are reported as for training" -- generate -c "$TMP/gpt.cfg" --set model.n_heads=3 --prompt x --tokens 3

run_ht -c "$TMP/gpt.cfg" -q
ok $RC "a tiny GPT trains on the repeated sentence (exit $RC)"
[ $RC -eq 0 ] || diag "$ERR"
expect_fail 2 "--prompt is empty" "an empty prompt" -- generate -c "$TMP/gpt.cfg" --prompt "" --tokens 3
expect_fail 2 "checkpoint is for model 'gpt L1 C32 H2 T24 V256', but the config describes 'gpt L1 C64 H2 T24 V256'" \
    "a checkpoint of another model" -- generate -c "$TMP/gpt.cfg" --set model.d_model=64 --prompt x --tokens 3

# an all-NaN copy of the checkpoint, without checksums (as another tool writes it, else they
# refuse it first): refused naming a tensor, never NUL bytes printed
python3 - "$TMP/gpt.ckpt" "$TMP/nan.ckpt" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], 'rb').read()
n = 8 + struct.unpack('<Q', raw[:8])[0]
h = json.loads(raw[8:n])
h['__metadata__'] = {k: v for k, v in h['__metadata__'].items() if not k.startswith('crc32c')}
t = json.dumps(h).encode()
t += b' ' * (-len(t) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(t)) + t +
                              struct.pack('<f', float('nan')) * ((len(raw) - n) // 4))
PY
expect_fail 2 "nan.ckpt: tensor '[^']+' element 0 of [0-9]+ is NaN, expected a finite number" \
    "an all-NaN checkpoint is refused" -- generate -c "$TMP/gpt.cfg" --checkpoint "$TMP/nan.ckpt" --prompt x --tokens 3
[ -z "$OUT" ]; ok $? "... and nothing is printed"

run_ht generate -c "$TMP/gpt.cfg" --prompt "the quick brown fox jumps " --tokens 30 --temperature 0 -q
greedy=$OUT
[ $RC -eq 0 ] && [ "${#greedy}" -eq 56 ] && [ "${greedy#the quick brown fox jumps }" != "$greedy" ]
ok $? "greedy: prints the prompt and 30 bytes: '$greedy'"
printf '%s' "$greedy" | grep -q "over the lazy"; ok $? "... continuing the sentence it was trained on"
run_ht generate -c "$TMP/gpt.cfg" --prompt "the quick brown fox jumps " --tokens 30 --temperature 0 -q
[ "$OUT" = "$greedy" ]; ok $? "greedy decoding repeats exactly"
run_ht generate -c "$TMP/gpt.cfg" --prompt "lazy" --tokens 40 --temperature 1.5 --seed 7 -q; a=$OUT
run_ht generate -c "$TMP/gpt.cfg" --prompt "lazy" --tokens 40 --temperature 1.5 --seed 7 -q; b=$OUT
run_ht generate -c "$TMP/gpt.cfg" --prompt "lazy" --tokens 40 --temperature 1.5 --seed 8 -q; c=$OUT
[ "$a" = "$b" ] && [ "$a" != "$c" ]; ok $? "sampling: seed 7 twice gives the same text, seed 8 another"
long=$(printf 'the lazy dog. %.0s' $(seq 10))
run_ht generate -c "$TMP/gpt.cfg" --prompt "$long" --tokens 5 --temperature 0 -q
[ $RC -eq 0 ] && [ "${#OUT}" -eq $(( ${#long} + 5 )) ]; ok $? "a prompt longer than the context is cropped to its last 24 bytes (exit $RC)"
done_testing
