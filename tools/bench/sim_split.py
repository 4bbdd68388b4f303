#!/usr/bin/env python3
"""Per-step split of a Chrome trace (hettrain --trace or hetsim --trace), for bench_sim.sh.

  sim_split.py TRACE [STEP_MS BATCHES]    prints: step_ms compute_ms rest_ms (one line)

With STEP_MS and BATCHES (a hetsim trace of 2BW's chain of BATCHES batches): compute is the
trace's over BATCHES, the step STEP_MS (hetsim's steady-state step time).

step: the median over steps (the first two left out: program cache, first touch) of rank 0's
step period, from the first span of one step to the first of the next; a hetsim trace has one
step, its makespan. compute: the slowest rank's median per-step device compute: forward and
backward spans (FWD / BWD / RECOMPUTE of a pipeline; data parallel: 'forward' and 'backward +
reduce' less 'all-reduce (not hidden)', which holds the buckets' reads to the host, so the
simulated 'read grads' count as compute here too). rest = step - compute: batch upload,
communication not hidden, optimizer, waiting."""
import json
import statistics
import sys
from collections import defaultdict


def load(path):
    t = json.load(open(path))
    ev = t["traceEvents"] if isinstance(t, dict) else t
    return [e for e in ev if e.get("ph") == "X"]


def compute_of(name):
    """+1 / -1 / 0: how a span counts towards compute."""
    if name.split(" ")[0] in ("FWD", "BWD", "RECOMPUTE", "forward", "backward"):
        return 1  # 'backward + reduce' of the trainer too
    if name == "read grads":  # hetsim: the buckets' reads, inside the trainer's backward span
        return 1
    if name == "all-reduce (not hidden)":
        return -1
    return 0


def main():
    ev = load(sys.argv[1])
    steps = sorted({e.get("args", {}).get("step", 0) for e in ev})
    comp = defaultdict(lambda: defaultdict(float))  # rank -> step -> ms
    start = defaultdict(lambda: 1e300)  # step -> first span start on rank 0
    end = 0.0
    for e in ev:
        k = e.get("args", {}).get("step", 0)
        comp[e["pid"]][k] += compute_of(e["name"]) * e["dur"] / 1e3
        if e["pid"] == 0:
            start[k] = min(start[k], e["ts"] / 1e3)
        end = max(end, (e["ts"] + e["dur"]) / 1e3)
    per = 1.0
    if len(sys.argv) > 3:  # a 2BW chain: per batch
        step, per, keep = float(sys.argv[2]), float(sys.argv[3]), steps
    elif len(steps) == 1:  # hetsim: one step
        step = end - min(e["ts"] for e in ev) / 1e3
        keep = steps
    else:
        keep = steps[2:-1] if len(steps) > 4 else steps[:-1]
        step = statistics.median(start[k + 1] - start[k] for k in keep)
    c = max(statistics.median(comp[r][k] for k in keep) for r in comp) / per
    print("%.3f %.3f %.3f" % (step, c, step - c))


main()
