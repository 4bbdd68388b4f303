#!/usr/bin/env bash
# GPT-2 in the Hugging Face layout, both ways, against a numpy GPT-2 written here from the
# published architecture (GPT2LMHeadModel: wte + wpe, pre-LN blocks with Conv1D weights
# (in, out), c_attn = [q | k | v], GELU's tanh form, LayerNorm eps 1e-5, the head tied to wte
# without bias). A small random GPT-2 (V 300, 40 positions, C 32, 2 blocks, 4 heads) is
# written with numpy as model.safetensors ("transformer." names) and as a sharded set with
# an index json (bare names); hettrain loads either (model.init_from) at context 32 and its
# first evaluation loss on a single 33-token window equals numpy's; greedy generation picks
# numpy's tokens; after training, `hettrain export` writes a folder whose weights numpy reads
# back to hettrain's final loss. No network, no PyTorch; the official safetensors package and
# transformers are used where installed (a SKIP line says when they are not).
. "$(dirname "$0")/../lib/lib.sh"
PY=${HT_PYTHON:-/usr/bin/python3}
cat >"$TMP/gpt2ref.py" <<'PY'
import json, struct, sys
import numpy as np

def st_write(path, tensors, meta=None):
    header, off, blobs = {}, 0, []
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, '<f4').tobytes()
        header[name] = {'dtype': 'F32', 'shape': list(a.shape), 'data_offsets': [off, off + len(b)]}
        off += len(b); blobs.append(b)
    if meta: header['__metadata__'] = meta
    h = json.dumps(header).encode(); h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h))); f.write(h); [f.write(b) for b in blobs]

def st_read(path):
    b = open(path, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n]); base = 8 + n
    return {k: np.frombuffer(b[base + v['data_offsets'][0]:base + v['data_offsets'][1]], '<f4')
            .reshape(v['shape']).astype(np.float64) for k, v in h.items() if k != '__metadata__'}

def ln(x, w, b):
    m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * w + b

def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

def logits(W, tok, L, H):
    p = 'transformer.' if 'transformer.wte.weight' in W else ''
    g = lambda n: W[p + n]
    T = len(tok); x = g('wte.weight')[tok] + g('wpe.weight')[:T]
    C = x.shape[1]; hs = C // H
    for i in range(L):
        b = lambda n: g('h.%d.%s' % (i, n))
        a = ln(x, b('ln_1.weight'), b('ln_1.bias')) @ b('attn.c_attn.weight') + b('attn.c_attn.bias')
        q, k, v = (a[:, j * C:(j + 1) * C].reshape(T, H, hs).transpose(1, 0, 2) for j in range(3))
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hs)
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
        y = (s @ v).transpose(1, 0, 2).reshape(T, C)
        x = x + y @ b('attn.c_proj.weight') + b('attn.c_proj.bias')
        m = gelu(ln(x, b('ln_2.weight'), b('ln_2.bias')) @ b('mlp.c_fc.weight') + b('mlp.c_fc.bias'))
        x = x + m @ b('mlp.c_proj.weight') + b('mlp.c_proj.bias')
    return ln(x, g('ln_f.weight'), g('ln_f.bias')) @ g('wte.weight').T

def loss(W, win, L, H):
    z = logits(W, win[:-1], L, H); z = z - z.max(-1, keepdims=True)
    lp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -lp[np.arange(len(win) - 1), win[1:]].mean()

def make(tmp):
    V, P, C, L = 300, 40, 32, 2
    r = np.random.default_rng(7); n = lambda *s, sd=0.1: r.normal(0, sd, s)
    W = {'wte.weight': n(V, C, sd=0.3), 'wpe.weight': n(P, C), 'ln_f.weight': 1 + n(C), 'ln_f.bias': n(C)}
    for i in range(L):
        for k, s in [('ln_1.weight', (C,)), ('ln_1.bias', (C,)), ('attn.c_attn.weight', (C, 3 * C)),
                     ('attn.c_attn.bias', (3 * C,)), ('attn.c_proj.weight', (C, C)), ('attn.c_proj.bias', (C,)),
                     ('ln_2.weight', (C,)), ('ln_2.bias', (C,)), ('mlp.c_fc.weight', (C, 4 * C)),
                     ('mlp.c_fc.bias', (4 * C,)), ('mlp.c_proj.weight', (4 * C, C)), ('mlp.c_proj.bias', (C,))]:
            W['h.%d.%s' % (i, k)] = (1 + n(*s)) if k.endswith('_1.weight') or k.endswith('_2.weight') else n(*s, sd=0.2)
    st_write(tmp + '/model.safetensors', {'transformer.' + k: v for k, v in W.items()}, {'format': 'pt'})
    names = sorted(W); half = len(names) // 2
    st_write(tmp + '/sh-00001-of-00002.safetensors', {k: W[k] for k in names[:half]})
    st_write(tmp + '/sh-00002-of-00002.safetensors', {k: W[k] for k in names[half:]})
    json.dump({'metadata': {}, 'weight_map': {k: 'sh-0000%d-of-00002.safetensors' % (1 + (i >= half))
                                              for i, k in enumerate(names)}},
              open(tmp + '/sh.safetensors.index.json', 'w'))
    r.integers(0, V, 5000).astype('<u2').tofile(tmp + '/train.bin')
    val = r.integers(0, V, 33); val.astype('<u2').tofile(tmp + '/val.bin')
    W32 = {k: v.astype(np.float32).astype(np.float64) for k, v in W.items()}
    print('%.6f' % loss(W32, val, L, 4))
    tok = list(val[:5])
    for _ in range(8):
        tok.append(int(np.argmax(logits(W32, np.array(tok[-32:]), L, 4)[-1])))
    print(' '.join(map(str, tok)))

if __name__ == '__main__':
    if sys.argv[1] == 'make': make(sys.argv[2])
    else:
        W = st_read(sys.argv[2]); val = np.fromfile(sys.argv[3], '<u2').astype(np.int64)
        print('%.6f' % loss(W, val, 2, 4))
PY
out=$($PY "$TMP/gpt2ref.py" make "$TMP")
ref_loss=$(printf '%s\n' "$out" | sed -n 1p)
ref_gen=$(printf '%s\n' "$out" | sed -n 2p)
cat >"$TMP/g.cfg" <<EOF
model = { type = "gpt"; n_layer = 2; d_model = 32; n_head = 4; context = 32; vocab = 300;
          tie_embeddings = true; init_from = "$TMP/model.safetensors"; };
data = { kind = "tokens"; path = "$TMP/train.bin"; val_path = "$TMP/val.bin"; };
train = { batch = 4; steps = 1; seed = 1; eval_batches = 1; };
optim = { type = "adamw"; lr = 1e-30; weight_decay = 0.0; };  # 1 step that changes nothing
log = { every = 1; progress = "none"; };
EOF
evl() { grep '"type":"eval"' "$1" | tail -1 | sed -nE 's/.*"val_loss":([^,]+),.*/\1/p'; }
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= t) }'; }

run_ht -c "$TMP/g.cfg" --set log.metrics="$TMP/a.jsonl" --set checkpoint.path="$TMP/a.ckpt"
got=$(evl "$TMP/a.jsonl")
[ $RC -eq 0 ] && printf '%s' "$ERR$OUT" | grep -q "initial weights from .*Hugging Face GPT-2" &&
    close "$got" "$ref_loss" 1e-4
ok $? "a GPT-2 model.safetensors ('transformer.' names, Conv1D weights, wpe of 40 rows at context 32): first evaluation loss $got = numpy's $ref_loss within 1e-4"
[ $RC -eq 0 ] || diag "$ERR"
run_ht -c "$TMP/g.cfg" --set log.metrics="$TMP/b.jsonl" --set model.init_from="$TMP/sh.safetensors.index.json"
got=$(evl "$TMP/b.jsonl")
[ $RC -eq 0 ] && close "$got" "$ref_loss" 1e-4
ok $? "the same weights as 2 shards and an index json (bare names): loss $got"
gen=$("$HETTRAIN" generate -c "$TMP/g.cfg" --checkpoint "$TMP/a.ckpt" --temperature 0 --tokens 8 \
    --prompt "$(printf '%s\n' "$ref_gen" | cut -d' ' -f1-5)" 2>/dev/null)
[ "$gen" = "$ref_gen" ]
ok $? "greedy generation picks numpy's 8 tokens: '$gen' (numpy '$ref_gen')"

# train, export, and read the export back with numpy
run_ht -c "$TMP/g.cfg" --set optim.lr=0.01 --set train.steps=5 --set log.metrics="$TMP/c.jsonl" \
    --set checkpoint.path="$TMP/c.ckpt"
trained=$(evl "$TMP/c.jsonl")
mkdir -p "$TMP/export"
run_ht export -c "$TMP/g.cfg" --checkpoint "$TMP/c.ckpt" --format hf-gpt2 -o "$TMP/export"
[ $RC -eq 0 ] && [ -f "$TMP/export/config.json" ]
ok $? "hettrain export --format hf-gpt2 writes model.safetensors and config.json"
back=$($PY "$TMP/gpt2ref.py" eval "$TMP/export/model.safetensors" "$TMP/val.bin")
close "$back" "$trained" 1e-4 && ! close "$trained" "$ref_loss" 1e-3
ok $? "numpy's GPT-2 on the export gives hettrain's loss after 5 steps: $back = $trained (it moved from $ref_loss)"
$PY - "$TMP/export/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
want = dict(model_type='gpt2', vocab_size=300, n_positions=32, n_embd=32, n_layer=2, n_head=4,
            activation_function='gelu_new', tie_word_embeddings=True)
sys.exit(0 if all(c.get(k) == v for k, v in want.items()) and c['layer_norm_epsilon'] == 1e-5 else 1)
PY
ok $? "config.json says GPT-2 with the model's sizes, gelu_new, tied, eps 1e-5"
if $PY -c "import safetensors.numpy" 2>/dev/null; then
    $PY -c "
import sys, numpy as np, safetensors.numpy as s
t = s.load_file('$TMP/export/model.safetensors')
sys.exit(0 if t['transformer.h.1.mlp.c_fc.weight'].shape == (32, 128) and len(t) == 28 else 1)"
    ok $? "the official safetensors package reads the export (28 tensors, Conv1D shapes)"
else
    echo "ok $((T_N += 1)) # SKIP the safetensors package is not installed (pip install safetensors)"
fi
if $PY -c "import transformers, torch" 2>/dev/null; then
    $PY - "$TMP/export" "$TMP/val.bin" "$back" <<'PY'
import sys, numpy as np, torch, transformers
m = transformers.GPT2LMHeadModel.from_pretrained(sys.argv[1]).eval()
v = torch.tensor(np.fromfile(sys.argv[2], '<u2').astype(np.int64))[None]
# the window's first 32 tokens in (n_positions 32), each next token the target, as hettrain
# and the numpy reference score it (labels=v would feed all 33 and predict 32 of them)
with torch.no_grad(): z = m(v[:, :-1]).logits
l = torch.nn.functional.cross_entropy(z.reshape(-1, z.shape[-1]), v[:, 1:].reshape(-1)).item()
print('# transformers: loss %.6f, hettrain export by numpy %s' % (l, sys.argv[3]), file=sys.stderr)
sys.exit(0 if abs(l - float(sys.argv[3])) < 1e-4 else 1)
PY
    ok $? "transformers' GPT2LMHeadModel loads the export: the same loss"
else
    echo "ok $((T_N += 1)) # SKIP transformers and torch are not installed"
fi

# errors
expect_fail 2 "model.safetensors.*transformer.wte.weight.*shape \\[300, 32\\], expected \\[300, 16\\]" \
    "a checkpoint of another width names file, tensor and both shapes" -- \
    -c "$TMP/g.cfg" --set model.d_model=16 --set model.n_head=4
expect_fail 2 "holds a block transformer.h.1.ln_1.weight, more than model.n_layer = 1" \
    "a checkpoint with more blocks than the model is refused" -- -c "$TMP/g.cfg" --set model.n_layer=1
expect_fail 2 "model.init_from.*none.safetensors" "a missing init_from names the key" -- \
    -c "$TMP/g.cfg" --set model.init_from="$TMP/none.safetensors"
expect_fail 2 "needs a GPT with model.tie_embeddings = true.*tie_embeddings false" "exporting an untied GPT is refused" -- \
    export -c "$TMP/g.cfg" --set model.tie_embeddings=false --checkpoint "$TMP/c.ckpt" --format hf-gpt2 -o "$TMP/export"
done_testing
