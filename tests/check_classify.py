#!/usr/bin/env python3
"""Runs a compiled-model example program (examples/classify.cpp) on a seeded random image and
checks its top-5 against onnxruntime on the same ONNX model: the same classes in the same order
(where ONNX Runtime's logits are not within tolerance of each other) and every printed logit
within rtol 1e-3 / atol 1e-4 of onnxruntime's.

usage: check_classify.py PROGRAM WEIGHTS MODEL.onnx
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

RTOL, ATOL = 1e-3, 1e-4


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    program, weights, model = argv[1:]
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in inp.shape]  # a dynamic batch: compiled at 1
    image = np.random.default_rng(7).uniform(-2.0, 2.0, size=shape).astype(np.float32)
    want = session.run(None, {inp.name: image})[0].reshape(-1)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "image.f32")
        image.tofile(path)
        out = subprocess.run([program, weights, path], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        print(f"{program} exited {out.returncode}:\n{out.stdout}{out.stderr}")
        return 1
    rows = re.findall(r"^\s+(\d+)\. class\s+(\d+)\s+logit\s+(-?[0-9.]+)", out.stdout, re.M)
    if len(rows) != min(5, want.size):
        print(f"expected a top-5 table, got:\n{out.stdout}")
        return 1
    bad = 0
    for rank, (_, cls, logit) in enumerate(rows):
        cls, logit = int(cls), float(logit)
        ref_rank_value = np.sort(want)[::-1][rank]
        # The printed logit has 4 decimals.
        if abs(logit - want[cls]) > ATOL + RTOL * abs(want[cls]) + 5e-5:
            print(f"rank {rank + 1}: class {cls} logit {logit} but onnxruntime gives {want[cls]:.6f}")
            bad += 1
        if abs(want[cls] - ref_rank_value) > ATOL + RTOL * abs(ref_rank_value):
            print(f"rank {rank + 1}: class {cls} (onnxruntime {want[cls]:.6f}) is not onnxruntime's "
                  f"rank-{rank + 1} class {int(np.argsort(want)[::-1][rank])} ({ref_rank_value:.6f})")
            bad += 1
    print(f"{os.path.basename(program)}: top-{len(rows)} {'matches' if not bad else 'DIFFERS FROM'} "
          f"onnxruntime {ort.__version__}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
