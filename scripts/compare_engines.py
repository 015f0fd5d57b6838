#!/usr/bin/env python3
"""Kiln against onnxruntime and OpenVINO on the same ONNX files, alternating, in one script.

    python scripts/compare_engines.py --kiln build/release/tools/kiln --models DIR \
        [--threads 2] [--rounds 5] [--iterations 20] [--engines ort,openvino] [--bf16] \
        [--schedules DB] [--out docs/engines]

For each round and each model it runs `kiln bench MODEL --json` (a subprocess: warm-up, then
--iterations timed runs), then onnxruntime (all graph optimizations, the same thread count,
warm-up and iteration count; every engine's warm-up lasts at least 0.2 s, as Kiln's does), then OpenVINO's CPU plugin (INFERENCE_NUM_THREADS = the thread
count, PERFORMANCE_HINT=LATENCY, INFERENCE_PRECISION_HINT=f32), alternating, so a noisy
machine slows every engine alike. Each peer measurement runs in a subprocess of this script:
an idle peer thread pool in this process would otherwise spin on the cores the next Kiln run
needs. It prints and writes OUT.md with the median over rounds of each engine's median latency
and the ratio of Kiln to each peer and to the faster peer, a table of Kiln's kernels in the last
round per model (the share of kernels without a convolution or Gemm, the kernel of >= 1% of the
time furthest from its roofline), and OUT.png with the per-model
latencies and, for every Kiln kernel of the last round (--per-layer), its fraction of this
machine's peak.

With --schedules DB each round also runs `kiln bench --schedules DB` (a schedule database of
`kiln tune`, one file for any number of models) right after the default run, and the table gets
the tuned Kiln's median and its ratio to the faster peer.

With --bf16 each round also runs `kiln bench --precision bf16` and OpenVINO at its default
precision (no precision hint: bfloat16 where the CPU has it), and a second table gives their
medians, the ratio, and the error of each one's output against onnxruntime's float32 output on
the same input (max abs difference / max |reference|, as the bf16 issue measures it).
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

MODELS = ["resnet18", "resnet50", "mobilenetv2", "squeezenet1_1", "preact_se", "convnext_tiny2",
          "resnext_tiny", "inception_tiny", "seg_tiny", "preact_se_b4"]


# Warm-up runs last at least this long, as `kiln bench`'s do: a worker thread can take that
# long to get a CPU of its own after start-up.
MIN_WARMUP_SECONDS = 0.2


def warm_up(run, warmup):
    """Calls run() warmup times, and more until MIN_WARMUP_SECONDS have passed (none for 0)."""
    start = time.perf_counter()
    done = 0
    while done < warmup or (warmup > 0 and time.perf_counter() - start < MIN_WARMUP_SECONDS):
        run()
        done += 1


def ort_median_ms(path, threads, warmup, iterations):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    x = np.random.default_rng(1).random([d if isinstance(d, int) else 1 for d in inp.shape],
                                        dtype=np.float32) * 2 - 1
    warm_up(lambda: sess.run(None, {inp.name: x}), warmup)
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        sess.run(None, {inp.name: x})
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def openvino_compiled(path, threads, default_precision):
    import openvino as ov
    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
    if not default_precision:
        config["INFERENCE_PRECISION_HINT"] = "f32"
    return core.compile_model(core.read_model(path), "CPU", config)


def model_input(shape):
    return np.random.default_rng(1).random(shape, dtype=np.float32) * 2 - 1


def openvino_timed_ms(path, threads, warmup, iterations, default_precision):
    compiled = openvino_compiled(path, threads, default_precision)
    request = compiled.create_infer_request()
    port = compiled.inputs[0]
    x = model_input([d.get_length() if d.is_static else 1 for d in port.get_partial_shape()])
    warm_up(lambda: request.infer({0: x}), warmup)
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        request.infer({0: x})
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def openvino_median_ms(path, threads, warmup, iterations):
    return openvino_timed_ms(path, threads, warmup, iterations, False)


def openvino_default_median_ms(path, threads, warmup, iterations):
    return openvino_timed_ms(path, threads, warmup, iterations, True)


PEERS = {"ort": ("onnxruntime", ort_median_ms), "openvino": ("OpenVINO f32", openvino_median_ms),
         "openvino_default": ("OpenVINO default precision", openvino_default_median_ms)}


def peer_output(engine, path, x_file, out_file, threads):
    """Writes the first output of ENGINE (ort or openvino_default) on the input in x_file."""
    x = np.load(x_file)
    if engine == "ort":
        import onnxruntime as ort
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    else:
        compiled = openvino_compiled(path, threads, True)
        y = compiled.create_infer_request().infer({0: x})[compiled.outputs[0]]
        hint = compiled.get_property("INFERENCE_PRECISION_HINT")
        print(hint.get_type_name() if hasattr(hint, "get_type_name") else hint, file=sys.stderr)
    np.save(out_file, np.asarray(y, dtype=np.float32))


def bf16_errors(kiln, path, threads, cache):
    """(Kiln bf16 error, OpenVINO default error, OpenVINO's inference precision) against
    onnxruntime's float32 output on one seeded input."""
    import onnx
    dims = onnx.load(path, load_external_data=False).graph.input[0].type.tensor_type.shape.dim
    x = model_input([d.dim_value if d.dim_value > 0 else 1 for d in dims])
    with tempfile.TemporaryDirectory(prefix="kiln_bf16_") as work:
        x_file = os.path.join(work, "x.npy")
        np.save(x_file, x)
        outs = {}
        precision = ""
        for engine in ("ort", "openvino_default"):
            out_file = os.path.join(work, engine + ".npy")
            run = subprocess.run([sys.executable, __file__, "--peer-output", engine, path, x_file,
                                  out_file, "--threads", str(threads)],
                                 check=True, capture_output=True, text=True)
            if engine == "openvino_default":
                precision = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""
            outs[engine] = np.load(out_file)
        kiln_dir = os.path.join(work, "kiln")
        subprocess.run([kiln, "run", path, "--precision", "bf16", "--input", x_file, "--output-dir",
                        kiln_dir, "--threads", str(threads)], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=dict(os.environ, XDG_CACHE_HOME=cache))
        files = sorted(f for f in os.listdir(kiln_dir) if f.endswith(".npy"))
        outs["kiln"] = np.load(os.path.join(kiln_dir, files[0]))
    ref = outs["ort"].astype(np.float64)
    scale = np.abs(ref).max()

    def err(y):
        return float(np.abs(y.astype(np.float64).reshape(ref.shape) - ref).max() / scale)
    return err(outs["kiln"]), err(outs["openvino_default"]), precision


def peer_bench_subprocess(engine, path, threads, warmup, iterations):
    out = subprocess.run([sys.executable, __file__, "--peer-one", engine, path,
                          "--threads", str(threads), "--warmup", str(warmup),
                          "--iterations", str(iterations)],
                         check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def kiln_bench(kiln, path, threads, warmup, iterations, per_layer, cache, precision="f32",
               schedules=None):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [kiln, "bench", path, "--threads", str(threads), "--warmup", str(warmup),
           "--iterations", str(iterations), "--json", out, "--precision", precision]
    if per_layer:
        cmd.append("--per-layer")
    if schedules:
        cmd += ["--schedules", schedules]
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    with open(out) as f:
        result = json.load(f)
    os.unlink(out)
    return result


def kernel_summary(layers):
    """Per model: the share of the time in kernels without a convolution, Gemm or MatMul (the
    kernels bench rates by FLOPs), and the kernel of >= 1% of the time furthest from its roofline
    (the FMA peak or the DRAM bandwidth, whichever bounds it)."""
    if not layers:
        return ""
    lines = ["| model | kernels without a conv or Gemm | slowest kernel of >= 1% of the time "
             "(% of its roofline) |", "|---|---|---|"]
    for name, rows in layers.items():
        other = sum(r["share"] for r in rows if not r.get("flops"))
        rated = [r for r in rows if r["share"] >= 0.01 and r.get("peak_fraction") is not None]
        worst = min(rated, key=lambda r: r["peak_fraction"], default=None)
        cell = "-" if worst is None else (
            f"{100 * worst['peak_fraction']:.0f}% {worst['bound']}: {worst['kernel']} "
            f"({worst['op']}, {100 * worst['share']:.1f}% of the time)")
        lines.append(f"| {name} | {100 * other:.1f}% | {cell} |")
    return "\n".join(lines)


def bf16_table(rows):
    """rows: (model, kiln_bf16_ms, openvino_default_ms, kiln_error, openvino_error, precision)."""
    lines = ["| model | Kiln bf16 median (ms) | OpenVINO default median (ms) | Kiln bf16 / OpenVINO "
             "default | Kiln bf16 error | OpenVINO default error (precision) |",
             "|---|---|---|---|---|---|"]
    for name, k, o, ke, oe, prec in rows:
        lines.append(f"| {name} | {k:.2f} | {o:.2f} | {k / o:.2f}x | {ke:.2e} | {oe:.2e} ({prec}) |")
    return "\n".join(lines)


def write_report(rows, peers, layers, threads, out, bf16_rows=None, tuned=None):
    """rows: (model, kiln_ms, {peer: ms}); peers: the peer keys, in column order; bf16_rows:
    bf16_table's rows, or None; tuned: {model: Kiln's median with --schedules}, or None."""
    names = [PEERS[p][0] for p in peers]
    head = ["model", "Kiln median (ms)"] + [f"{n} median (ms)" for n in names]
    head += [f"Kiln / {n}" for n in names]
    if len(peers) > 1:
        head.append("Kiln / faster peer")
    if tuned:
        head += ["Kiln tuned median (ms)", "Kiln tuned / faster peer"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, k, p in rows:
        cells = [name, f"{k:.2f}"] + [f"{p[e]:.2f}" for e in peers]
        cells += [f"{k / p[e]:.2f}x" for e in peers]
        if len(peers) > 1:
            cells.append(f"{k / min(p.values()):.2f}x")
        if tuned:
            cells += [f"{tuned[name]:.2f}", f"{tuned[name] / min(p.values()):.2f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    kernels = kernel_summary(layers)
    with open(out + ".md", "w") as f:
        f.write(f"Threads: {threads}. Medians over rounds of each engine's median latency.\n\n")
        f.write(table + "\n")
        if kernels:
            f.write("\nKiln's kernels in the last round (`kiln bench --per-layer`):\n\n" + kernels + "\n")
        if bf16_rows:
            f.write("\nbf16: Kiln `--precision bf16` and OpenVINO's default precision, errors against "
                    "onnxruntime float32 (max abs difference / max |reference|):\n\n" +
                    bf16_table(bf16_rows) + "\n")
    print(table)
    if bf16_rows:
        print("\n" + bf16_table(bf16_rows))
    if kernels:
        print("\n" + kernels)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.5))
    xs = np.arange(len(rows))
    series = [("Kiln", [r[1] for r in rows])]
    if tuned:
        series.append(("Kiln tuned", [tuned[r[0]] for r in rows]))
    series += [(PEERS[e][0], [r[2][e] for r in rows]) for e in peers]
    if bf16_rows:
        series += [("Kiln bf16", [r[1] for r in bf16_rows]),
                   ("OpenVINO default (bf16)", [r[2] for r in bf16_rows])]
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series):
        a.bar(xs + (i - (len(series) - 1) / 2) * width, values, width, label=label)
    a.set_xticks(xs, [r[0] for r in rows], rotation=30, ha="right")
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
    internal = "--peer-one" in sys.argv or "--peer-output" in sys.argv
    ap.add_argument("--kiln", required=not internal)
    ap.add_argument("--models", required=not internal,
                    help="directory with <model>.onnx")
    ap.add_argument("--names", default=",".join(MODELS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--engines", default="ort,openvino",
                    help="peers to compare with, in order: ort, openvino (default: both)")
    ap.add_argument("--bf16", action="store_true",
                    help="also Kiln --precision bf16 against OpenVINO's default precision, with "
                         "both outputs' errors against onnxruntime float32")
    ap.add_argument("--schedules", metavar="DB",
                    help="also run Kiln with this schedule database (kiln tune --db) in each "
                         "round, reported beside the default")
    ap.add_argument("--out", default="engines")
    # internal: one peer measurement, ENGINE MODEL; one peer output, ENGINE MODEL X_NPY OUT_NPY
    ap.add_argument("--peer-one", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--peer-output", nargs=4, help=argparse.SUPPRESS)
    if "--peer-output" in sys.argv:
        a, _ = ap.parse_known_args()
        peer_output(*a.peer_output, a.threads)
        return
    if "--peer-one" in sys.argv:
        a, _ = ap.parse_known_args()
        engine, path = a.peer_one
        print(PEERS[engine][1](path, a.threads, a.warmup, a.iterations))
        return
    args = ap.parse_args()
    names = args.names.split(",")
    peers = args.engines.split(",")
    unknown = [e for e in peers if e not in PEERS]
    if unknown or not peers:
        ap.error(f"--engines: unknown engine {', '.join(unknown)} (known: {', '.join(PEERS)})")
    cache = tempfile.mkdtemp(prefix="kiln_compare_")
    kiln_ms = {n: [] for n in names}
    peer_ms = {n: {e: [] for e in peers} for n in names}
    layers = {}
    bf16_ms = {n: {"kiln": [], "openvino_default": []} for n in names}
    tuned_ms = {n: [] for n in names}
    if args.schedules and not os.path.isfile(args.schedules):
        ap.error(f"--schedules: no such file: {args.schedules}")
    for r in range(args.rounds):
        for n in names:
            path = os.path.join(args.models, n + ".onnx")
            last = r == args.rounds - 1
            res = kiln_bench(args.kiln, path, args.threads, args.warmup, args.iterations, last, cache)
            kiln_ms[n].append(res["latency_ms"]["median"])
            if last and res.get("layers"):
                layers[n] = res["layers"]
            line = f"round {r + 1}/{args.rounds} {n}: kiln {kiln_ms[n][-1]:.2f} ms"
            if args.schedules:
                tuned_ms[n].append(kiln_bench(args.kiln, path, args.threads, args.warmup,
                                              args.iterations, False, cache,
                                              schedules=args.schedules)["latency_ms"]["median"])
                line += f", kiln tuned {tuned_ms[n][-1]:.2f} ms"
            for e in peers:
                peer_ms[n][e].append(
                    peer_bench_subprocess(e, path, args.threads, args.warmup, args.iterations))
                line += f", {PEERS[e][0]} {peer_ms[n][e][-1]:.2f} ms"
            if args.bf16:
                bf16_ms[n]["kiln"].append(kiln_bench(args.kiln, path, args.threads, args.warmup,
                                                     args.iterations, False, cache,
                                                     "bf16")["latency_ms"]["median"])
                bf16_ms[n]["openvino_default"].append(peer_bench_subprocess(
                    "openvino_default", path, args.threads, args.warmup, args.iterations))
                line += (f"; bf16: kiln {bf16_ms[n]['kiln'][-1]:.2f} ms, OpenVINO default "
                         f"{bf16_ms[n]['openvino_default'][-1]:.2f} ms")
            print(line, flush=True)
    rows = [(n, statistics.median(kiln_ms[n]),
             {e: statistics.median(peer_ms[n][e]) for e in peers}) for n in names]
    bf16_rows = None
    if args.bf16:
        bf16_rows = []
        for n in names:
            ke, oe, prec = bf16_errors(args.kiln, os.path.join(args.models, n + ".onnx"),
                                       args.threads, cache)
            bf16_rows.append((n, statistics.median(bf16_ms[n]["kiln"]),
                              statistics.median(bf16_ms[n]["openvino_default"]), ke, oe, prec))
    tuned = {n: statistics.median(tuned_ms[n]) for n in names} if args.schedules else None
    write_report(rows, peers, layers, args.threads, args.out, bf16_rows, tuned)


if __name__ == "__main__":
    main()
