#!/usr/bin/env bash
# log.tensorboard (src/io/tfevents.c): a 2-rank run writes TensorBoard event files beside its
# JSON Lines metrics. A decoder written here in Python (TFRecord framing with CRC32C, the
# Event protobuf by hand) finds every number of every JSONL record as a scalar "type/key"
# (per-rank records "type/key/rankR") at its step, equal as float32 (to the JSONL's 9
# digits); where tensorboard is installed its own reader (EventFileLoader) reads the file to
# the same values.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/mpi.sh"
CONF="$(cd "$(dirname "$0")/../../conf" && pwd)"

args=(-c "$CONF/quickstart.cfg" --set train.steps=20 --set log.every=5 --set log.metrics="$TMP/m.jsonl"
      --set log.tensorboard="$TMP/tb")
if command -v mpirun >/dev/null; then
    np=2; mpirun_ht 2 "$HETTRAIN" "${args[@]}" >"$TMP/out" 2>"$TMP/err"
else
    np=1; "$HETTRAIN" "${args[@]}" >"$TMP/out" 2>"$TMP/err"
fi
rc=$?
files=$(ls "$TMP/tb" 2>/dev/null | grep -c '^events\.out\.tfevents\.')
[ $rc -eq 0 ] && [ "$files" -eq 1 ]
ok $? "$np rank(s), log.tensorboard: one event file beside the metrics (exit $rc, $files files)"
[ $rc -eq 0 ] || diag "$(tail -5 "$TMP/err")"
EV=$(ls "$TMP/tb"/events.out.tfevents.* 2>/dev/null | head -1)

# the independent decoder: every JSONL number is a scalar at its step, as float32
python3 - "$EV" "$TMP/m.jsonl" "$np" <<'PY'
import json, struct, sys
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
    return c ^ 0xFFFFFFFF
mask = lambda c: (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF
def varint(b, i):
    v = s = 0
    while True:
        v |= (b[i] & 0x7F) << s; s += 7; i += 1
        if not b[i - 1] & 0x80: return v, i
def fields(b):
    i = 0
    while i < len(b):
        k, i = varint(b, i); n, w = k >> 3, k & 7
        if w == 0: v, i = varint(b, i)
        elif w == 1: v = b[i:i + 8]; i += 8
        elif w == 5: v = b[i:i + 4]; i += 4
        elif w == 2: l, i = varint(b, i); v = b[i:i + l]; i += l
        else: raise ValueError('wire type %d' % w)
        yield n, w, v
raw = open(sys.argv[1], 'rb').read()
i, events = 0, []
while i < len(raw):
    n = struct.unpack('<Q', raw[i:i + 8])[0]
    assert struct.unpack('<I', raw[i + 8:i + 12])[0] == mask(crc32c(raw[i:i + 8])), 'length CRC'
    d = raw[i + 12:i + 12 + n]
    assert struct.unpack('<I', raw[i + 12 + n:i + 16 + n])[0] == mask(crc32c(d)), 'data CRC'
    i += 16 + n
    ev = {'step': 0, 'values': {}}
    for f, w, v in fields(d):
        if (f, w) == (1, 1): ev['wall'] = struct.unpack('<d', v)[0]
        elif (f, w) == (2, 0): ev['step'] = v
        elif (f, w) == (3, 2): ev['version'] = v.decode()
        elif (f, w) == (5, 2):
            for g, _, val in fields(v):
                tv = dict((h, x) for h, _, x in fields(val))
                ev['values'][tv[1].decode()] = struct.unpack('<f', tv[2])[0]
    events.append(ev)
assert events[0].get('version') == 'brain.Event:2', 'first record: file_version'
have = {}
for e in events[1:]:
    for t, v in e['values'].items(): have[(t, e['step'])] = v
f32 = lambda x: struct.unpack('<f', struct.pack('<f', x))[0]
last, want = 0, {}
for line in open(sys.argv[2]):
    r = json.loads(line); last = r.get('step', last)
    for k, v in r.items():
        if k in ('type', 'step', 'rank') or not isinstance(v, (int, float)) or isinstance(v, bool): continue
        tag = r['type'] + '/' + k + ('/rank%d' % r['rank'] if 'rank' in r else '')
        want[(tag, last)] = f32(v)
# the JSONL holds 9 significant digits, the event the float32 of the double itself: one
# float32 ulp apart at most (a double rounding), so within 2.5e-7 relative
close = lambda a, b: abs(a - b) <= 2.5e-7 * abs(b) + 1e-30
missing = [k for k in want if k not in have or not close(have[k], want[k])]
tags = {t for t, _ in want}
need = {'train/loss', 'train/samples_per_s', 'eval/val_acc', 'eval/val_loss'}
if int(sys.argv[3]) > 1: need |= {'rank/compute_s/rank0', 'rank/compute_s/rank1'}
print('# %d events, %d scalars, tags e.g. %s' % (len(events), len(have), sorted(tags)[:6]))
if missing or not need <= tags or len(have) != len(want): print('# missing or different:', missing[:5], 'not there:', sorted(need - tags), len(have), len(want)); print('# tb only:', sorted(set(have) - set(want))[:5])
sys.exit(1 if missing or not need <= tags or len(have) != len(want) else 0)
PY
ok $? "every number of the JSONL is a scalar at its step (decoded here: framing, CRC32C, protobuf)"

# the official reader, where installed
if python3 -c "from tensorboard.backend.event_processing.event_file_loader import EventFileLoader" 2>"$TMP/tberr"; then
    python3 - "$EV" "$TMP/m.jsonl" <<'PY'
import json, struct, sys
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.util import tensor_util
f32 = lambda x: struct.unpack('<f', struct.pack('<f', x))[0]
got = {}
for e in EventFileLoader(sys.argv[1]).Load():
    for v in e.summary.value:
        x = float(tensor_util.make_ndarray(v.tensor)) if v.HasField('tensor') else v.simple_value
        assert v.metadata.plugin_data.plugin_name in ('', 'scalars'), v.metadata
        got[(v.tag, e.step)] = x
train = [json.loads(l) for l in open(sys.argv[2]) if '"type":"train"' in l]
close = lambda a, b: a is not None and abs(a - b) <= 2.5e-7 * abs(b)
bad = [r['step'] for r in train if not close(got.get(('train/loss', r['step'])), f32(r['loss']))]
sys.exit(1 if bad or not train else 0)
PY
    ok $? "tensorboard's EventFileLoader reads it: train/loss at every logged step"
else
    echo "ok $((T_N += 1)) # SKIP tensorboard not installed: $(tail -1 "$TMP/tberr")"
fi
# a file where the folder should be: exit 2 before training, naming the key
: >"$TMP/afile"
expect_fail 2 "key 'log.tensorboard': '.*afile' is a file, expected a folder" \
    "log.tensorboard naming a file: exit 2" -- -c "$CONF/quickstart.cfg" --set log.tensorboard="$TMP/afile"
done_testing
