#!/usr/bin/env python3
"""Computes an onnxruntime reference output for an ONNX model on a seeded random input.

    python scripts/ort_reference.py MODEL.onnx OUT_PREFIX [--seed N] [--threads N] [--bench N]
                                    [--batch N]

Writes, with no header and nothing but the numbers (raw little-endian float32, row-major,
i.e. C order of the ONNX shape, NCHW for images):
    OUT_PREFIX.input.bin    the input  (uniform in [-1, 1), seeded)
    OUT_PREFIX.output.bin   the output (onnxruntime, CPUExecutionProvider, ORT_ENABLE_ALL)
    OUT_PREFIX.json         names, shapes, file names, byte sizes and provenance
With several graph inputs or outputs the files are OUT_PREFIX.input.<i>.bin /
OUT_PREFIX.output.<i>.bin in graph order instead.

The input is `numpy.random.default_rng(seed).random(shape, dtype=float32) * 2 - 1` (exact in
float32, so always in [-1, 1 - 2^-23]); one array per input, drawn in graph order from the
same generator. Symbolic dimensions are set to --batch (default 1): a dynamic batch.

The JSON also records `max_abs_diff_vs_unoptimized`: the largest difference between this
output and onnxruntime's with all graph optimizations off (a hint for the tolerance a
comparison needs; ORT's fused / NCHWc kernels round differently from the plain graph).
--bench N additionally times N runs (after 2 warm-up runs) and records their median.
"""

import argparse
import hashlib
import json
import os
import re
import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

_FLOAT = onnx.TensorProto.FLOAT


def _session(model_bytes, threads, level):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = level
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def _shape(value_info, symbolic):
    dims = []
    for d in value_info.type.tensor_type.shape.dim:
        dims.append(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else symbolic)
    return dims


def _file_names(prefix, kind, n):
    if n == 1:
        return [f"{prefix}.{kind}.bin"]
    return [f"{prefix}.{kind}.{i}.bin" for i in range(n)]


def _write(path, array):
    data = np.ascontiguousarray(array, dtype="<f4").tobytes()
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("out_prefix")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    ap.add_argument("--bench", type=int, default=0, metavar="N",
                    help="also time N runs and report the median")
    ap.add_argument("--batch", type=int, default=1,
                    help="the size of every symbolic input dimension")
    args = ap.parse_args(argv)

    with open(args.model, "rb") as f:
        model_bytes = f.read()
    model = onnx.load_from_string(model_bytes)
    init_names = {t.name for t in model.graph.initializer}
    graph_inputs = [v for v in model.graph.input if v.name not in init_names]
    for v in list(graph_inputs) + list(model.graph.output):
        if v.type.tensor_type.elem_type != _FLOAT:
            sys.exit(f"{args.model}: {v.name} is not float32; only float32 models are supported")

    rng = np.random.default_rng(args.seed)
    feeds = {}
    for v in graph_inputs:
        feeds[v.name] = rng.random(_shape(v, args.batch), dtype=np.float32) * 2 - 1

    sess = _session(model_bytes, args.threads, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    out_names = [o.name for o in sess.get_outputs()]
    outputs = sess.run(out_names, feeds)
    plain = _session(model_bytes, args.threads, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    plain_outputs = plain.run(out_names, feeds)
    for name, y in zip(out_names, outputs):
        if not np.isfinite(y).all():
            sys.exit(f"{args.model}: output {name} has non-finite values")

    out_dir = os.path.dirname(os.path.abspath(args.out_prefix))
    os.makedirs(out_dir, exist_ok=True)
    rel = lambda p: os.path.relpath(os.path.abspath(p), out_dir)

    record = {
        "format": "raw little-endian float32, row-major (C order of 'shape'), no header",
        "model": os.path.basename(args.model),
        "model_sha256": hashlib.sha256(model_bytes).hexdigest(),
        "seed": args.seed,
        "input_distribution": "numpy default_rng(seed).random(shape, float32) * 2 - 1",
        "onnxruntime_version": ort.__version__,
        "provider": "CPUExecutionProvider",
        "graph_optimization_level": "ORT_ENABLE_ALL",
        "intra_op_num_threads": args.threads,
        "inputs": [],
        "outputs": [],
    }
    for v, path in zip(graph_inputs, _file_names(args.out_prefix, "input", len(graph_inputs))):
        x = feeds[v.name]
        n = _write(path, x)
        record["inputs"].append({"name": v.name, "shape": list(x.shape), "dtype": "float32",
                                 "file": rel(path), "bytes": n})
    for name, y, y0, path in zip(out_names, outputs, plain_outputs,
                                 _file_names(args.out_prefix, "output", len(out_names))):
        n = _write(path, y)
        record["outputs"].append({
            "name": name, "shape": list(y.shape), "dtype": "float32", "file": rel(path),
            "bytes": n,
            "stats": {"mean": float(y.mean()), "std": float(y.std()), "min": float(y.min()),
                      "max": float(y.max()), "argmax_flat": int(y.argmax())},
            "max_abs_diff_vs_unoptimized": float(np.abs(y.astype(np.float64) - y0).max()),
        })

    summary = ", ".join(
        f"{o['name']} {o['shape']}: mean {o['stats']['mean']:.4g} std {o['stats']['std']:.4g} "
        f"min {o['stats']['min']:.4g} max {o['stats']['max']:.4g} "
        f"argmax {o['stats']['argmax_flat']}, |opt - unopt| <= "
        f"{o['max_abs_diff_vs_unoptimized']:.3g}" for o in record["outputs"])

    if args.bench > 0:
        for _ in range(2):
            sess.run(out_names, feeds)
        times = []
        for _ in range(args.bench):
            t0 = time.perf_counter()
            sess.run(out_names, feeds)
            times.append(time.perf_counter() - t0)
        record["bench"] = {"runs": args.bench, "median_ms": statistics.median(times) * 1e3,
                           "min_ms": min(times) * 1e3, "max_ms": max(times) * 1e3}
        summary += (f"; {args.threads} thread(s): median {record['bench']['median_ms']:.2f} ms "
                    f"(min {record['bench']['min_ms']:.2f}, max {record['bench']['max_ms']:.2f},"
                    f" {args.bench} runs)")

    with open(args.out_prefix + ".json", "w") as f:
        text = json.dumps(record, indent=2)
        # Keep each shape on one line: "shape": [1, 3, 224, 224].
        text = re.sub(r"\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]",
                      lambda m: "[" + ", ".join(re.split(r",\s*", m.group(1))) + "]", text)
        f.write(text + "\n")
    print(f"{args.model}: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
