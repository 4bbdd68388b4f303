"""The table, the CSV and the text plot of tools/bench/bench_emulate.sh's runs.
   emulate_table.py OUT TAG TARGET[,TARGET...] PLOT POLICIES...   (TAG: MODEL-W-MIX, e.g. mlp-8-std)
A gpt TAG judges the validation loss (target: at most TARGET), an mlp TAG the accuracy; a table
per target."""
import json
import sys

out, tag, plot, pols = sys.argv[1], sys.argv[2], sys.argv[4], sys.argv[5:]
targets = [float(t) for t in sys.argv[3].split(",")]
model, W, mix = tag.split("-")
flops = mix.lstrip("stdail")
mix = mix[: len(mix) - len(flops)]
loss = model == "gpt"
key = "val_loss" if loss else "val_acc"
rows, curves = {}, {}
failed = {}
for p in pols:
    try:  # bench_emulate.sh writes the exit status of a run that failed (a divergence: 1)
        failed[p] = open(f"{out}/{tag}-{p}.failed").read().strip()
        continue
    except OSError:
        pass
    recs = [json.loads(l) for l in open(f"{out}/{tag}-{p}.jsonl")]
    ev = [r for r in recs if r["type"] == "eval" and r[key] is not None]
    sy = [r for r in recs if r["type"] == "sync"]
    rows[p] = dict(ev=ev, fin=ev[-1][key], total=ev[-1]["time_s"],
                   sent=sum(r["bytes_sent"] for r in sy))
    curves[p] = [(r["time_s"], r["step"], r[key]) for r in ev]
with open(f"{out}/curve-{tag}.csv", "w") as f:
    f.write(f"policy,time_s,step,{key}\n")
    for p, c in curves.items():
        for t, s, v in c:
            f.write(f"{p},{t:.6f},{s},{v:.6f}\n")
mixname = "1,1,1/2,1/4" if mix == "std" else "1,1/2,...,1/8"
dev = f"{flops} GFLOP/s" if flops else "2 TFLOP/s"
fin = "final loss" if loss else "final acc"


def table(target):
    reached = (lambda v: v <= target) if loss else (lambda v: v >= target)
    for r in rows.values():
        hit = next((e for e in r["ev"] if reached(e[key])), None)
        r["tta"], r["step"] = (hit["time_s"], hit["step"]) if hit else (None, None)
    what = f"validation loss {target}" if loss else f"{100 * target:.0f}% validation accuracy"
    print(f"\n{'byte-level GPT' if loss else 'MNIST MLP'}, {W} workers at speeds {mixname} "
          f"of {dev} (emulated devices, virtual time); target {what}\n")
    base = rows.get("bsp", {}).get("tta")
    print(f"| policy | time to target (virtual s) | at step | speed-up vs bsp | {fin} | train time (virtual s) | bytes sent (MB) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for p, r in rows.items():
        tta = f"{r['tta']:.3f}" if r["tta"] is not None else "not reached"
        sp = f"{base / r['tta']:.2f}x" if base and r["tta"] else "-"
        st = r["step"] if r["step"] is not None else "-"
        f_ = f"{r['fin']:.3f}" if loss else f"{100 * r['fin']:.2f}%"
        print(f"| {p} | {tta} | {st} | {sp} | {f_} | {r['total']:.3f} | {r['sent'] / 1e6:,.0f} |")
    for p, rc in failed.items():
        print(f"| {p} | failed (exit {rc}: {out}/{tag}-{p}.err) | - | - | - | - | - |")


for t in targets:
    table(t)
if plot != "1":
    sys.exit(0)
# text plot: one letter per policy, virtual time on a log axis (the policies differ by 100x)
import math
pts = [(t, v, p) for p, c in curves.items() for t, s, v in c if t > 0]
if not pts:
    sys.exit(0)
lo, hi = math.log10(min(t for t, _, _ in pts)), math.log10(max(t for t, _, _ in pts))
vlo, vhi = min(v for _, v, _ in pts), max(v for _, v, _ in pts)
Wd, Hd = 72, 16
grid = [[" "] * Wd for _ in range(Hd)]
letters = {p: "abcdefghijklmnopqrstuvwxyz"[i] for i, p in enumerate(curves)}
for t, v, p in pts:
    x = int((math.log10(t) - lo) / max(hi - lo, 1e-9) * (Wd - 1))
    y = int((v - vlo) / max(vhi - vlo, 1e-9) * (Hd - 1))
    grid[Hd - 1 - y][x] = letters[p]
print(f"\n{key} (from {vlo:.3f} at the bottom to {vhi:.3f} at the top) against virtual time, "
      f"log axis {10 ** lo:.3g} s ... {10 ** hi:.3g} s:")
print("```")
for row in grid:
    print("|" + "".join(row))
print("+" + "-" * Wd)
print("  " + ", ".join(f"{l} = {p}" for p, l in letters.items()))
print("```")
