#!/usr/bin/env python3
"""Draws the JSON of `kiln tune --json` or `kiln bench --targets ... --json` as a PNG.

tune: per kernel, the default schedule's time, the tuned one's and each autoscheduler's
(from their ratio to the tuned time), in microseconds on a log scale.
bench --targets: per kernel, each target's median time, and the whole model's latency.

usage: scripts/plot_results.py RESULTS.json OUT.png
"""
import json
import sys


def bars(ax, labels, series, unit):
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series):
        xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
        ax.bar(xs, [v if v is not None else 0 for v in values], width, label=name)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(unit)
    ax.set_yscale("log")
    ax.legend(fontsize=8)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        data = json.load(f)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if "kernels" in data:  # kiln tune
        rows = data["kernels"]
        labels = [r["kernel"] for r in rows]
        series = [("default", [r["default_us"] for r in rows]),
                  ("tuned", [r["tuned_us"] for r in rows])]
        if any(r.get("onednn_us") is not None for r in rows):
            series.append(("oneDNN", [r.get("onednn_us") for r in rows]))
        names = sorted({n for r in rows for n in r["autoschedulers_over_tuned"]})
        for n in names:
            series.append((n, [r["tuned_us"] * r["autoschedulers_over_tuned"][n]
                               if r["autoschedulers_over_tuned"].get(n) is not None else None
                               for r in rows]))
        title = f"kiln tune {data['model']} on {data['target']}, {data['threads']} threads"
        unit = "median us per call (same run)"
    elif "targets" in data:  # kiln bench --targets
        targets = data["targets"]
        labels = [r["kernel"] for r in targets[0]["layers"]] + ["(model)"]
        series = [(t["cpu_target"] or t["target"],
                   [r["median_ms"] for r in t["layers"]] + [t["latency_ms"]["median"]])
                  for t in targets]
        title = f"kiln bench {data['model']}: targets side by side (baseline {data['baseline']})"
        unit = "median ms"
    else:
        print(f"{argv[1]}: neither kiln tune's nor kiln bench --targets' JSON", file=sys.stderr)
        return 1
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(labels) + 2), 4.5))
    bars(ax, labels, series, unit)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    print(f"wrote {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
