#!/usr/bin/python3
"""The peer for bench_mlp.sh: the same MLP (784-1024-1024-10, ReLU), batch, optimizer
(SGD momentum 0.9, Nesterov, weight decay 5e-4) and data (MNIST 8,000 training images or
random data of that shape) in PyTorch on the CPU. Prints 'torch_samples_per_s N'."""
import argparse
import gzip
import os
import time

import numpy as np
import torch

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=2)
p.add_argument("--batch", type=int, default=256)
p.add_argument("--steps", type=int, default=60)
p.add_argument("--hidden", default="1024,1024")
p.add_argument("--mnist", default="../shared/data/mnist/t10k-images-idx3-ubyte.gz")
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)

if os.path.exists(a.mnist):
    raw = np.frombuffer(gzip.open(a.mnist).read()[16:], dtype=np.uint8)
    x = torch.from_numpy(((raw.reshape(-1, 784)[:8000] / 255.0 - 0.1307) / 0.3081).astype(np.float32))
else:
    x = torch.randn(8000, 784)
y = torch.randint(0, 10, (x.shape[0],))

sizes = [784] + [int(h) for h in a.hidden.split(",")] + [10]
layers = []
for i in range(len(sizes) - 1):
    layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
    if i < len(sizes) - 2:
        layers.append(torch.nn.ReLU())
model = torch.nn.Sequential(*layers)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
lossf = torch.nn.CrossEntropyLoss()


def step(i):
    idx = torch.randint(0, x.shape[0], (a.batch,))
    opt.zero_grad(set_to_none=True)
    loss = lossf(model(x[idx]), y[idx])
    loss.backward()
    opt.step()
    return loss.item()


for i in range(5):
    step(i)
t0 = time.perf_counter()
for i in range(a.steps):
    step(i)
dt = time.perf_counter() - t0
print(f"torch {torch.__version__}, {a.threads} threads")
print(f"torch_samples_per_s {a.steps * a.batch / dt:.1f}")
