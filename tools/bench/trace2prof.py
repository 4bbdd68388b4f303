#!/usr/bin/env python3
"""A hetprof profile re-timed from a training run (issue 12: a device model measured inside
training steps, not layers timed alone).

    trace2prof.py TRACE.json PROFILE.cfg BATCH -o OUT.cfg

TRACE.json comes from `hettrain --trace FILE --trace-layers` (a span per layer's forward,
"fwd NAME", backward, "bwd NAME", and the loss, "loss"), on the ranks of PROFILE.cfg's devices
(device r = rank r, as `mpirun hetprof` writes them), each rank computing BATCH samples per
step. For each rank and layer, the median span over the training steps (the first two, and
anything inside "evaluate", left out) over what the profile has for that layer at BATCH gives
a factor; a fused pair's span ("fwd fc1+relu1") is over the pair's sum and its factor applies
to both. Layers a rank did not run (a pipeline's other stages) keep their times. Every batch
size's entries of a layer are scaled by its factor. hetsim scales a step's layers by the profile's whole step over the sum of its layers
at that batch (src/sim/cost.c); that ratio becomes 1 at BATCH, where the layers are now as in
training, and keeps the profile's trend relative to BATCH elsewhere: each batch's
samples_per_s becomes batch / (the sum of its scaled entries x its old ratio / the old ratio
at BATCH). A profile without a samples_per_s entry at BATCH gets ratio 1 everywhere.
Prints the factors.
"""
import json
import re
import statistics
import sys
from collections import defaultdict

LAYER = re.compile(r'(\{ name = "([^"]+)"; batch = (\d+); fwd_ms = )([0-9.e+-]+)(; bwd_ms = )([0-9.e+-]+)(; \})')
RATE = re.compile(r'(\{ batch = (\d+); value = )([0-9.e+-]+)(; \})')


def spans(path):
    """{rank: {(kind, layer): [ms, ...]}} over training steps >= 2, outside evaluations."""
    ev = json.load(open(path))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    ev = [e for e in ev if e.get("ph") == "X"]
    evals = [(e["pid"], e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"] == "evaluate"]
    out = defaultdict(lambda: defaultdict(list))
    for e in ev:
        n, step = e["name"], e.get("args", {}).get("step", -1)
        if step < 2 or any(p == e["pid"] and a <= e["ts"] < b for p, a, b in evals):
            continue
        if n == "loss":
            out[e["pid"]][("fwd", "loss")].append(e["dur"] / 1e3)
        elif n.startswith(("fwd ", "bwd ")):
            out[e["pid"]][(n[:3], n[4:])].append(e["dur"] / 1e3)
    return out


def main():
    args = sys.argv[1:]
    if len(args) != 5 or args[3] != "-o":
        sys.exit(__doc__)
    trace, prof, batch, out = args[0], args[1], int(args[2]), args[4]
    measured = spans(trace)
    text = open(prof).read().split("\n")
    starts = [i for i, l in enumerate(text) if l.strip() == "layers = ("]
    rate_starts = [i for i, l in enumerate(text) if l.strip() == "samples_per_s = ("]
    for r, (lo, rlo) in enumerate(zip(starts, rate_starts)):
        if r not in measured:
            continue
        entries = []  # (line index, name, batch, fwd, bwd)
        i = lo + 1
        while i < len(text) and LAYER.search(text[i]):
            m = LAYER.search(text[i])
            entries.append((i, m.group(2), int(m.group(3)), float(m.group(4)), float(m.group(6))))
            if text[i].rstrip().endswith(");"):
                break
            i += 1
        at = {(e[1], e[2]): e for e in entries}
        factor = {}
        for (kind, span), t in measured[r].items():
            if span == "loss":
                continue
            group = span.split("+")  # a fused pair: "fc1+relu1"
            base = sum(at[(g, batch)][3 if kind == "fwd" else 4] for g in group if (g, batch) in at)
            f = statistics.median(t) / base if base > 0 else 1.0
            for g in group:
                factor[(kind, g)] = f
        t = measured[r].get(("fwd", "loss"))
        base = at.get(("loss", batch), (0, 0, 0, 0, 0))[3]
        factor[("fwd", "loss")] = statistics.median(t) / base if t and base > 0 else 1.0
        sums = defaultdict(float)
        for i, name, b, fwd, bwd in entries:
            fwd *= factor.get(("fwd", name), 1.0)
            bwd *= factor.get(("bwd", name), 1.0)
            sums[b] += fwd + bwd
            text[i] = LAYER.sub(lambda m: f"{m.group(1)}{fwd:.7g}{m.group(5)}{bwd:.7g}{m.group(7)}", text[i])
        # the profile's whole step over its layers at each batch (hetsim's in-step ratio),
        # relative to the traced batch's: 1 there, the profile's own trend elsewhere
        old_sums = defaultdict(float)
        for _, _, b, fwd, bwd in entries:
            old_sums[b] += fwd + bwd
        rates, i = {}, rlo + 1
        while i < len(text) and RATE.search(text[i]):
            m = RATE.search(text[i])
            rates[int(m.group(2))] = (i, float(m.group(3)))
            if text[i].rstrip().endswith(");"):
                break
            i += 1
        ratio = {b: 1e3 * b / v / old_sums[b] for b, (_, v) in rates.items() if v > 0 and old_sums[b] > 0}
        for b, (i, v) in rates.items():
            if sums.get(b, 0) > 0:
                rel = ratio[b] / ratio[batch] if b in ratio and ratio.get(batch) else 1.0
                text[i] = RATE.sub(lambda m: f"{m.group(1)}{1e3 * b / (sums[b] * rel):.7g}{m.group(4)}",
                                   text[i])
        print("rank %d: " % r + ", ".join("%s %s x%.3f" % (k[0], k[1], v) for k, v in factor.items()))
    open(out, "w").write("\n".join(text))


if __name__ == "__main__":
    main()
