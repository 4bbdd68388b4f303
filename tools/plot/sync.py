#!/usr/bin/env python3
"""Validation loss and accuracy against training wall time, one line per sync policy, from
hettrain metrics files (JSON Lines, "eval" records with time_s): the plot beside
bench_sync.sh's table.
    tools/plot/sync.py OUT.png TARGET METRICS.jsonl...
A file named like mlp-4-ssp.jsonl is labelled "ssp". Needs matplotlib (Debian:
python3-matplotlib; HT_PLOTS=1 tools/setup installs it)."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out, target, files = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    fig, (axl, axa) = plt.subplots(1, 2, figsize=(13, 5), dpi=110)
    for f in files:
        label = os.path.basename(f).rsplit(".", 1)[0].split("-", 2)[-1]
        ev = [json.loads(l) for l in open(f) if '"type":"eval"' in l]
        ev = [e for e in ev if e["val_acc"] is not None]
        if ev:
            style = dict(marker=".", label=label, linestyle="-" if label.startswith(
                ("bsp", "asp", "ssp", "dasp")) else "--")
            t = [e["time_s"] for e in ev]
            axl.plot(t, [e["val_loss"] for e in ev], **style)
            axa.plot(t, [100 * e["val_acc"] for e in ev], **style)
    axa.axhline(100 * target, color="grey", linewidth=0.8, linestyle=":")
    for ax in (axl, axa):
        ax.set_xlabel("training wall time (s; rank 0's evaluations left out)")
        ax.grid(alpha=0.3)
    axl.set_ylabel("validation loss")
    axl.set_yscale("log")
    axa.set_ylabel("validation accuracy (%)")
    axa.set_ylim(80, 100)
    axa.legend(ncol=2)
    name = os.path.basename(files[0]).split("-")
    fig.suptitle(f"MNIST {name[0].upper()}, {name[1]} workers, slowdowns 1,1,2,4: "
                 "validation loss and accuracy against time")
    fig.tight_layout()
    fig.savefig(out)
    print(f"plot/sync.py: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
