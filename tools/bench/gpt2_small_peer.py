"""The peer of gpt2_small.sh: GPT-2 small as PyTorch 2 users train it (nanoGPT's model, the
official GPT2 architecture): 12 pre-LN blocks, d_model 768, 12 heads, context 1024, vocabulary
50,257, the head tied to wte, GELU tanh, causal scaled_dot_product_attention, AdamW (0.9, 0.95,
weight decay 0.1), clip 1.0, fp32 on the CPU. Trains on random token ids (the time per step
does not depend on them); one warm-up step, then --steps timed ones.
Prints 'peer_s_per_step S', 'peer_peak_rss_mb M' (this process's peak resident memory) and the
first loss."""
import argparse
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=2)
p.add_argument("--steps", type=int, default=2)
p.add_argument("--batch", type=int, default=1)
p.add_argument("--context", type=int, default=1024)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
L, C, NH, T, V = 12, 768, 12, a.context, 50257


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fc2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (z.view(B, t, NH, C // NH).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, t, C))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.Sequential(*[Block() for _ in range(L)])
        self.lnf = nn.LayerNorm(C)
        self.head = nn.Linear(C, V, bias=False)
        self.head.weight = self.wte.weight  # tied, as GPT-2
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx, tgt):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        logits = self.head(self.lnf(self.blocks(x)))
        return F.cross_entropy(logits.view(-1, V), tgt.view(-1))


model = GPT()
nparams = sum(q.numel() for q in model.parameters())
opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
x = torch.randint(0, V, (a.batch, T + 1))


def step():
    loss = model(x[:, :-1], x[:, 1:])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


first = step()
t0 = time.perf_counter()
for _ in range(a.steps):
    step()
dt = (time.perf_counter() - t0) / a.steps
print("torch %s, %d threads, %d parameters, batch %d, context %d, first loss %.4f"
      % (torch.__version__, a.threads, nparams, a.batch, T, first))
print("peer_s_per_step %.3f" % dt)
print("peer_peak_rss_mb %.0f" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
