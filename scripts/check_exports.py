#!/usr/bin/env python3
"""Kiln's outputs on a folder of ONNX exports against onnxruntime's.

    .venv/bin/python scripts/check_exports.py DIR --kiln build/release/tools/kiln [--models a,b]

For the files that scripts/keras_exports.py and scripts/torchvision_exports.py write (or any
float32 model): each model is cut before a Softmax that gives its output, if it has one (the
logits, where a difference shows; a Softmax inside the network, as in attention, stays), run
by onnxruntime and by `kiln run` on the same seeded inputs in [-1, 1) (every input of the
model), and compared with the project's tolerance (|kiln - ort| <= 1e-4 + 1e-3 |ort|).
Deep networks with random weights amplify rounding (the BatchNorms calibrated on random data
keep every layer's perturbation alive): onnxruntime's own output with and without its graph
optimizations can differ by more than that tolerance. So a model also passes when Kiln's
largest difference is at most 4x onnxruntime's own (optimized against unoptimized), and the
line says which test it passed. Every output of a model is compared (`kiln run` writes each to
a file named after it); the line gives the one furthest from passing. Prints a line per model;
exits 1 if any model fails or is missing.
"""

import argparse
import os
import re
import subprocess
import sys


def check(args):
    import numpy as np
    import onnx
    import onnx.utils
    import onnxruntime as ort

    failed = 0
    for name in args.models:
        path = os.path.join(args.dir, name + ".onnx")
        if not os.path.exists(path):
            print(f"{name:22s} missing ({path})")
            failed += 1
            continue
        model = onnx.load(path)
        # A Softmax that gives an output (a classifier's probabilities), not one inside the
        # network (attention): the logits before it are where a difference shows.
        outputs = {o.name for o in model.graph.output}
        softmax = [n for n in model.graph.node if n.op_type == "Softmax" and n.output[0] in outputs]
        if softmax:
            constants = {t.name for t in model.graph.initializer}
            inputs = [i.name for i in model.graph.input if i.name not in constants]
            cut = os.path.join(args.dir, name + ".logits.onnx")
            onnx.utils.extract_model(path, cut, inputs, [softmax[-1].input[0]])
            path = cut
        refs = []
        for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                      ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
            options = ort.SessionOptions()
            options.graph_optimization_level = level
            session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            # Every input, each its own seeded values (a symbolic dimension, such as a batch: 1).
            rng = np.random.default_rng(args.seed)
            feed = {}
            for port in session.get_inputs():
                shape = [d if isinstance(d, int) else 1 for d in port.shape]
                feed[port.name] = rng.random(shape, dtype=np.float32) * 2 - 1
            refs.append(session.run(None, feed))
        names = [o.name for o in session.get_outputs()]
        input_args = []
        for i, (port, x) in enumerate(feed.items()):
            x_file = os.path.join(args.dir, name + (".input.npy" if i == 0 else f".input{i}.npy"))
            np.save(x_file, x)
            input_args += ["--input", f"{port}={x_file}"]
        out_dir = os.path.join(args.dir, name + ".kiln")
        if os.path.isdir(out_dir):  # no output of an earlier run is read as this one's
            for f in os.listdir(out_dir):
                if f.endswith(".npy"):
                    os.remove(os.path.join(out_dir, f))
        run = subprocess.run([args.kiln, "run", path, *input_args, "--output-dir", out_dir],
                             capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{name:22s} kiln run failed: {run.stderr.strip().splitlines()[-1]}")
            failed += 1
            continue
        # Every output, each from the file `kiln run` names after it; the line shows the one
        # furthest from its tolerance.
        worst = None
        for i, output in enumerate(names):
            ref = refs[0][i]
            ort_own = float(np.abs(refs[0][i] - refs[1][i]).max())
            got = np.load(os.path.join(out_dir, re.sub(r"[^A-Za-z0-9._-]", "_", output) + ".npy"))
            diff = np.abs(got.reshape(ref.shape) - ref)
            within_tolerance = bool(np.all(diff <= 1e-4 + 1e-3 * np.abs(ref)))
            within_ort_own = diff.max() <= 4 * ort_own
            verdict = ("ok" if within_tolerance else
                       "ok (4x ort's own)" if within_ort_own else "MISMATCH")
            rank = (("ok", "ok (4x ort's own)", "MISMATCH").index(verdict),
                    float((diff / (1e-4 + 1e-3 * np.abs(ref))).max()))
            if worst is None or rank > worst[0]:
                worst = (rank, verdict, output, diff.max(), ort_own, np.abs(ref).max())
        _, verdict, output, diff_max, ort_own, ref_max = worst
        failed += verdict == "MISMATCH"
        which = f" ({output}, the worst of {len(names)} outputs)" if len(names) > 1 else ""
        print(f"{name:22s} {verdict:18s} max |kiln - ort| {diff_max:.2e}, ort optimized vs "
              f"unoptimized {ort_own:.2e}, max |ort| {ref_max:.2e}{which}")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir")
    p.add_argument("--kiln", required=True, help="the kiln binary")
    p.add_argument("--models", help="comma-separated names (default: every DIR/*.onnx)")
    p.add_argument("--seed", type=int, default=3)
    args = p.parse_args()
    if args.models:
        args.models = args.models.split(",")
    else:
        args.models = sorted(f[:-5] for f in os.listdir(args.dir)
                             if f.endswith(".onnx") and not f.endswith(".logits.onnx"))
    sys.exit(check(args))


if __name__ == "__main__":
    main()
