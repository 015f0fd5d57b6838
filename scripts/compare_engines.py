#!/usr/bin/env python3
"""Kiln against onnxruntime on the same ONNX files, alternating, in one script.

    python scripts/compare_engines.py --kiln build/release/tools/kiln --models DIR \
        [--threads 2] [--rounds 5] [--iterations 20] [--out docs/engines]

For each round and each model it runs `kiln bench MODEL --json` (a subprocess: warm-up, then
--iterations timed runs) and then onnxruntime (all graph optimizations, the same thread count,
warm-up and iteration count), alternating, so a noisy machine slows both engines alike. Each
onnxruntime measurement also runs in a subprocess of this script: an idle onnxruntime thread
pool in this process would otherwise spin on the cores the next Kiln run needs. It prints and writes OUT.md with the median over rounds of each engine's median
latency and the ratio Kiln / onnxruntime, and OUT.png with the per-model latencies and, for
every Kiln kernel of the last round (--per-layer), its fraction of this machine's peak.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

MODELS = ["resnet18", "resnet50", "mobilenetv2", "squeezenet1_1", "preact_se", "convnext_tiny2"]


def ort_median_ms(path, threads, warmup, iterations):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    x = np.random.default_rng(1).random([d if isinstance(d, int) else 1 for d in inp.shape],
                                        dtype=np.float32) * 2 - 1
    for _ in range(warmup):
        sess.run(None, {inp.name: x})
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        sess.run(None, {inp.name: x})
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def ort_bench_subprocess(path, threads, warmup, iterations):
    out = subprocess.run([sys.executable, __file__, "--ort-one", path, "--threads", str(threads),
                          "--warmup", str(warmup), "--iterations", str(iterations)],
                         check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def kiln_bench(kiln, path, threads, warmup, iterations, per_layer, cache):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [kiln, "bench", path, "--threads", str(threads), "--warmup", str(warmup),
           "--iterations", str(iterations), "--json", out]
    if per_layer:
        cmd.append("--per-layer")
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    with open(out) as f:
        result = json.load(f)
    os.unlink(out)
    return result


def write_report(rows, layers, threads, out):
    lines = [f"| model | Kiln median (ms) | onnxruntime median (ms) | Kiln / onnxruntime |",
             "|---|---|---|---|"]
    for name, k, o in rows:
        lines.append(f"| {name} | {k:.2f} | {o:.2f} | {k / o:.2f}x |")
    table = "\n".join(lines)
    with open(out + ".md", "w") as f:
        f.write(f"Threads: {threads}. Medians over rounds of each engine's median latency.\n\n")
        f.write(table + "\n")
    print(table)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.5))
    xs = np.arange(len(rows))
    a.bar(xs - 0.2, [r[1] for r in rows], 0.4, label="Kiln")
    a.bar(xs + 0.2, [r[2] for r in rows], 0.4, label="onnxruntime")
    a.set_xticks(xs, [r[0] for r in rows])
    a.set_ylabel("latency (ms)")
    a.set_title(f"per-model latency, {threads} threads")
    a.legend()
    for name, rows_l in layers.items():
        fr = [r["peak_fraction"] for r in rows_l if r.get("peak_fraction") is not None]
        b.plot(range(len(fr)), fr, marker=".", label=name)
    b.set_xlabel("kernel (model order)")
    b.set_ylabel("fraction of FMA peak or bandwidth")
    b.set_title("Kiln per-kernel efficiency")
    b.legend()
    fig.tight_layout()
    fig.savefig(out + ".png", dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", required="--ort-one" not in sys.argv)
    ap.add_argument("--models", required="--ort-one" not in sys.argv,
                    help="directory with <model>.onnx")
    ap.add_argument("--names", default=",".join(MODELS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--out", default="engines")
    ap.add_argument("--ort-one", help=argparse.SUPPRESS)  # internal: one onnxruntime measurement
    if "--ort-one" in sys.argv:
        a, _ = ap.parse_known_args()
        print(ort_median_ms(a.ort_one, a.threads, a.warmup, a.iterations))
        return
    args = ap.parse_args()
    names = args.names.split(",")
    cache = tempfile.mkdtemp(prefix="kiln_compare_")
    kiln_ms = {n: [] for n in names}
    ort_ms = {n: [] for n in names}
    layers = {}
    for r in range(args.rounds):
        for n in names:
            path = os.path.join(args.models, n + ".onnx")
            last = r == args.rounds - 1
            res = kiln_bench(args.kiln, path, args.threads, args.warmup, args.iterations, last, cache)
            kiln_ms[n].append(res["latency_ms"]["median"])
            if last and res.get("layers"):
                layers[n] = res["layers"]
            ort_ms[n].append(ort_bench_subprocess(path, args.threads, args.warmup, args.iterations))
            print(f"round {r + 1}/{args.rounds} {n}: kiln {kiln_ms[n][-1]:.2f} ms, "
                  f"onnxruntime {ort_ms[n][-1]:.2f} ms", flush=True)
    rows = [(n, statistics.median(kiln_ms[n]), statistics.median(ort_ms[n])) for n in names]
    write_report(rows, layers, args.threads, args.out)


if __name__ == "__main__":
    main()
