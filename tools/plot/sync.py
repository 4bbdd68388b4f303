#!/usr/bin/env python3
"""Validation accuracy against training wall time, one line per sync policy, from hettrain
metrics files (JSON Lines, "eval" records with time_s): the plot beside bench_sync.sh's table.
    tools/plot_sync.py OUT.png TARGET METRICS.jsonl...
A file named like mlp-4-ssp.jsonl is labelled "ssp"."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out, target, files = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for f in files:
        label = os.path.basename(f).rsplit(".", 1)[0].split("-", 2)[-1]
        ev = [json.loads(l) for l in open(f) if '"type":"eval"' in l]
        ev = [e for e in ev if e["val_acc"] is not None]
        if ev:
            ax.plot([e["time_s"] for e in ev], [100 * e["val_acc"] for e in ev], marker=".",
                    label=label, linestyle="-" if label.startswith(("bsp", "asp", "ssp", "dasp")) else "--")
    ax.axhline(100 * target, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("training wall time (s; rank 0's evaluations left out)")
    ax.set_ylabel("validation accuracy (%)")
    ax.set_ylim(80, 100)
    ax.grid(alpha=0.3)
    ax.legend(ncol=2)
    name = os.path.basename(files[0]).split("-")
    ax.set_title(f"MNIST {name[0].upper()}, {name[1]} workers, slowdowns 1,1,2,4: accuracy vs time")
    fig.tight_layout()
    fig.savefig(out)
    print(f"plot_sync: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
