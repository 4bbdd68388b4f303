#!/usr/bin/python3
"""The peer of hettrain's benchmarks (bench_train.sh, bench_peer.sh): the same models, batch and
optimizer as hettrain's configs, in PyTorch 2 from PyPI on the CPU, timed over training steps
after warm-up.
  mlp:    784-1024-1024-10 ReLU, batch 256, SGD momentum 0.9 Nesterov, weight decay 5e-4
  cnn:    conv5x5 32 p2, ReLU, maxpool 2, conv5x5 64 p2, ReLU, maxpool 2, 3136-512 ReLU, 512-10;
          batch 64, AdamW
  gpt:    byte-level, 4 pre-LN blocks, d_model 128, 4 heads, context 64, batch 16, AdamW, clip 1.0
  gpt85m: the same blocks, 12 layers, d_model 768, 12 heads, context 256, batch 8 (85M parameters)
  gpt1k:  gpt at context 1024, batch 2
  sgemm:  torch.matmul GFLOP/s, best and median of --steps calls, at bench_sgemm's shapes (1024^3,
          the MLP's and the GPTs' products; --only S: those whose name contains S), operands
          transposed as there ('sgemm NAME BEST MEDIAN' lines, GFLOP/s)
Attention is F.scaled_dot_product_attention(is_causal=True), PyTorch 2's fused kernel, as a
PyTorch 2 user would write it (--attn manual: the explicit softmax(QK^T)V of PyTorch 1).
Prints 'peer_per_s N' (samples/s for mlp and cnn, tokens/s for the GPTs).

PyTorch 2 runs from a virtual environment: $HT_TORCH_VENV (default
/var/cache/hettrain/torch-venv). When this script runs under another Python, it re-runs itself
with the venv's; when the venv is missing it is created (python3 -m venv; pip install torch
numpy: the PyPI wheel with its CUDA libraries, about 5.4 GB installed). Never needed by the
test suite."""
import os
import subprocess
import sys

VENV = os.environ.get("HT_TORCH_VENV", "/var/cache/hettrain/torch-venv")


def ensure_torch2():
    """Re-executes under the venv's Python unless this one has PyTorch 2."""
    try:
        import torch  # noqa: F401
        if int(torch.__version__.split(".")[0]) >= 2:
            return
    except ImportError:
        pass
    py = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        sys.exit(f"torch_peer.py: {py} has no PyTorch 2 (pip install torch numpy there)")
    if not os.path.exists(py):
        print(f"torch_peer.py: creating {VENV} (pip install torch numpy, ~5.4 GB)", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
        subprocess.check_call([py, "-m", "pip", "install", "-q", "torch", "numpy"])
    os.execv(py, [py] + sys.argv)


ensure_torch2()

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("model", choices=["mlp", "cnn", "gpt", "gpt85m", "gpt1k", "sgemm"])
p.add_argument("--threads", type=int, default=2)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--attn", choices=["sdpa", "manual"], default="sdpa")
p.add_argument("--only", default="", help="sgemm: the shapes whose name contains this")
p.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU node (tools/device-check)")
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.set_num_interop_threads(1)
if a.device != "cpu":
    torch.set_default_device(a.device)  # models, batches and masks there; loss.item() waits
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, c, nh):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.fc, self.fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.nh = nh

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        if a.attn == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.nh)
            att = att.masked_fill(torch.ones(T, T).tril() == 0, float("-inf")).softmax(-1)
            y = att @ v
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L=4, C=128, nh=4, T=64, V=256):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.Sequential(*[Block(C, nh) for _ in range(L)])
        self.ln, self.head = nn.LayerNorm(C), nn.Linear(C, V)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        return self.head(self.ln(self.blocks(x)))


SHAPES = [("square 1024^3", 0, 0, 1024, 1024, 1024), ("fc1 fwd", 0, 1, 256, 1024, 784),
          ("fc2 fwd", 0, 1, 256, 1024, 1024), ("fc3 fwd", 0, 1, 256, 10, 1024),
          ("fc3 dX", 0, 0, 256, 1024, 10), ("fc2 dX", 0, 0, 256, 1024, 1024),
          ("fc1 dW", 1, 0, 1024, 784, 256), ("fc2 dW", 1, 0, 1024, 1024, 256),
          ("fc3 dW", 1, 0, 10, 1024, 256),
          # the GPTs' (tools/bench/bench_sgemm.c's list, in its order)
          ("gpt qkv fwd", 0, 1, 1024, 384, 128), ("gpt qkv dX", 0, 0, 1024, 128, 384),
          ("gpt qkv dW", 1, 0, 384, 128, 1024), ("gpt proj fwd", 0, 1, 1024, 128, 128),
          ("gpt fc fwd", 0, 1, 1024, 512, 128), ("gpt fc2 fwd", 0, 1, 1024, 128, 512),
          ("gpt fc2 dX", 0, 0, 1024, 512, 128), ("gpt fc2 dW", 1, 0, 128, 512, 1024),
          ("gpt head fwd", 0, 1, 1024, 256, 128),
          ("g85 qkv fwd", 0, 1, 2048, 2304, 768), ("g85 proj fwd", 0, 1, 2048, 768, 768),
          ("g85 fc fwd", 0, 1, 2048, 3072, 768), ("g85 fc2 fwd", 0, 1, 2048, 768, 3072),
          ("g85 fc2 dX", 0, 0, 2048, 3072, 768), ("g85 fc dW", 1, 0, 3072, 768, 2048),
          ("g85 head fwd", 0, 1, 2048, 256, 768), ("g85 head dW", 1, 0, 256, 768, 2048)]
if a.model == "sgemm":
    print(f"torch {torch.__version__}, {a.device}, {a.threads} threads, best and median of {a.steps}")
    for name, ta, tb, m, n, k in SHAPES:
        if a.only not in name:
            continue
        # stored as the model stores them: op(A) = A^T when ta, op(B) = B^T when tb
        A = torch.randn(k, m).t() if ta else torch.randn(m, k)
        B = torch.randn(n, k).t() if tb else torch.randn(k, n)
        C = torch.empty(m, n)
        for _ in range(3):
            torch.matmul(A, B, out=C)
        ts = []
        for _ in range(a.steps):
            t0 = time.perf_counter()
            torch.matmul(A, B, out=C)
            ts.append(time.perf_counter() - t0)
        ts.sort()
        med = ts[len(ts) // 2] if len(ts) % 2 else 0.5 * (ts[len(ts) // 2 - 1] + ts[len(ts) // 2])
        flop = 2 * m * n * k
        print(f"sgemm {name.replace(' ', '_')} {flop / ts[0] / 1e9:.1f} {flop / med / 1e9:.1f}")
    sys.exit(0)

if a.model == "mlp":
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    B, per = 256, 256
    batch = lambda: (torch.randn(B, 784), torch.randint(0, 10, (B,)))
    loss_of = lambda x, y: F.cross_entropy(model(x), y)
elif a.model == "cnn":
    model = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    B, per = 64, 64
    batch = lambda: (torch.randn(B, 1, 28, 28), torch.randint(0, 10, (B,)))
    loss_of = lambda x, y: F.cross_entropy(model(x), y)
else:
    L, C, nh, T, B = {"gpt": (4, 128, 4, 64, 16), "gpt85m": (12, 768, 12, 256, 8),
                      "gpt1k": (4, 128, 4, 1024, 2)}[a.model]
    model = GPT(L, C, nh, T)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.99), weight_decay=0.1)
    per = B * T
    batch = lambda: (torch.randint(0, 256, (B, T)), torch.randint(0, 256, (B, T)))
    loss_of = lambda x, y: F.cross_entropy(model(x).view(-1, 256), y.view(-1))


def step():
    x, y = batch()
    opt.zero_grad(set_to_none=True)
    loss = loss_of(x, y)
    loss.backward()
    if a.model.startswith("gpt"):
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


for _ in range(a.warmup):
    step()
t0 = time.perf_counter()
for _ in range(a.steps):
    step()
dt = time.perf_counter() - t0
print(f"torch {torch.__version__}, {a.device}, {a.threads} threads, {a.steps} steps, attention {a.attn}")
print(f"peer_per_s {a.steps * per / dt:.1f}")
