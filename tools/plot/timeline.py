#!/usr/bin/env python3
"""Measured pipeline timelines: one step of each hettrain Chrome trace (hettrain --trace), one
panel per trace, one row per rank; forward and backward spans labelled with their micro-batch,
waits in grey, messages and reductions in orange, the optimizer in purple.
    tools/plot/timeline.py OUT.png [--step K] TRACE.json...
K: the step drawn (default: the last but one in each trace, clear of the first step's start-up
and the last one's end). A panel's title is the trace's file name (e.g. "1f1b-4" from
1f1b-4.json, as `TRACE=DIR tools/bench/bench_pipe.sh` names them) and the step's span.
Needs matplotlib (Debian: python3-matplotlib; HT_PLOTS=1 tools/setup installs it). In a folder
of its own: tools/ holds tokenize.py, which would shadow the standard module matplotlib uses."""
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = [("FWD", "tab:blue"), ("BWD", "tab:green"), ("wait", "lightgrey"),
           ("optimizer", "tab:purple")]


def colour(name):
    for prefix, c in COLOURS:
        if name.startswith(prefix):
            return c
    return "tab:orange"  # SEND/RECV, REDUCE_GRADS, all-reduce: communication


def spans(path, step):
    d = json.load(open(path))
    ev = [e for e in (d["traceEvents"] if isinstance(d, dict) else d)
          if e.get("ph") == "X" and "step" in e.get("args", {})]
    steps = sorted({e["args"]["step"] for e in ev})
    if not steps:
        sys.exit("plot/timeline.py: %s has no step spans" % path)
    k = step if step is not None else steps[max(0, len(steps) - 2)]
    ev = [e for e in ev if e["args"]["step"] == k and e["name"] != "evaluate"]
    if not ev:
        sys.exit("plot/timeline.py: %s has no step %d" % (path, k))
    t0 = min(e["ts"] for e in ev)
    return k, [(e["pid"], (e["ts"] - t0) / 1e3, e["dur"] / 1e3, e["name"]) for e in ev]


def panel(ax, path, step):
    k, sp = spans(path, step)
    ranks = sorted({s[0] for s in sp})
    end = max(s[1] + s[2] for s in sp)
    for pid, start, dur, name in sp:
        y = ranks.index(pid)
        ax.barh(y, dur, left=start, height=0.7, color=colour(name), edgecolor="white",
                linewidth=0.3)
        mb = re.match(r"(FWD|BWD) mb(\d+)", name)
        if mb and dur > end / 60:
            ax.text(start + dur / 2, y, mb.group(2), ha="center", va="center", fontsize=6,
                    color="white")
    ax.set_yticks(range(len(ranks)))
    ax.set_yticklabels(["rank %d" % r for r in ranks])
    ax.invert_yaxis()
    ax.set_xlim(0, end)
    name = os.path.basename(path).rsplit(".", 1)[0]
    ax.set_title("%s: step %d, %.1f ms" % (name, k, end), fontsize=9, loc="left")


def main():
    args = sys.argv[1:]
    step = None
    if "--step" in args:
        i = args.index("--step")
        step = int(args[i + 1])
        del args[i:i + 2]
    if len(args) < 2:
        sys.exit(__doc__)
    out, traces = args[0], args[1:]
    fig, axes = plt.subplots(len(traces), 1, figsize=(10, 1.1 + 0.9 * len(traces) * 1.6),
                             dpi=110, squeeze=False)
    for ax, t in zip(axes[:, 0], traces):
        panel(ax, t, step)
    axes[-1, 0].set_xlabel("ms from the step's first span")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for _, c in COLOURS + [("", "tab:orange")]]
    fig.legend(handles, ["forward (micro-batch)", "backward", "wait", "optimizer",
                         "send / reduce"], loc="lower center", ncol=5, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(out)
    print("plot/timeline.py: wrote", out)


if __name__ == "__main__":
    main()
