#!/usr/bin/env python3
"""Plot a longctx --log-json file: loss (and held-out loss/accuracy when present) and
throughput against the step, into one PNG.

    python3 tools/plot_metrics.py run.jsonl -o run.png

Needs matplotlib (pip install matplotlib). The program itself never needs Python.
"""
import argparse
import json
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", help="file written by longctx train --log-json")
    ap.add_argument("-o", "--out", default=None, help="PNG to write (default: LOG with .png)")
    a = ap.parse_args()
    steps, rows, evals = [], [], []
    with open(a.log) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"plot_metrics: {a.log}:{n}: not JSON ({e})", file=sys.stderr)
                return 2
            if "eval_loss" in r:
                evals.append(r)
            elif "loss" in r:
                rows.append(r)
    if not rows:
        print(f"plot_metrics: {a.log} holds no step records", file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_metrics: needs matplotlib: pip install matplotlib", file=sys.stderr)
        return 2
    steps = [r["step"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    ax1.plot(steps, [r["loss"] for r in rows], label="train loss", lw=1)
    if evals:
        ax1.plot([e["step"] for e in evals], [e["eval_loss"] for e in evals], "o-", label="held-out loss")
        acc = ax1.twinx()
        acc.plot([e["step"] for e in evals], [100 * e["eval_accuracy"] for e in evals], "s--", color="green",
                 label="held-out accuracy %")
        acc.set_ylabel("accuracy %")
        acc.set_ylim(0, 100)
        acc.legend(loc="center right")
    ax1.set_ylabel("loss")
    ax1.legend(loc="upper right")
    ax1.grid(alpha=0.3)
    ax2.plot(steps, [r["tokens_per_s"] for r in rows], lw=1, color="tab:orange")
    ax2.set_ylabel("tokens/s")
    ax2.set_xlabel("step")
    ax2.grid(alpha=0.3)
    peak = max(r["peak_bytes"] for r in rows) / 2**20
    fig.suptitle(f"{a.log}: {len(rows)} steps, peak arena {peak:.1f} MiB")
    fig.tight_layout()
    out = a.out or (a.log.rsplit(".", 1)[0] + ".png")
    fig.savefig(out, dpi=100)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
