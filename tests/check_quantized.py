#!/usr/bin/env python3
"""Quantizes a float model with onnxruntime's own tool, statically in its QDQ and QOperator
formats and dynamically (DynamicQuantizeLinear, ConvInteger, MatMulInteger), and checks `kiln
run` on each against onnxruntime's integer execution of the same file.

    check_quantized.py KILN MODEL.onnx WORKDIR

Kiln runs a quantized model as the float computation of its integers; onnxruntime runs integer
kernels. They may differ where a value lands within rounding error of a half between two
integers: one quantization step there, which can carry to the output. The check: the same
top-1 class, and every output within two steps of the output's scale (that of the
DequantizeLinear writing it) of onnxruntime's; the dynamic form's float output within 1% of its
largest value. A wrong scale, zero point, axis or rounding rule is off by far more.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_dynamic, quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process


class Calibration(CalibrationDataReader):
    def __init__(self, name, shape):
        self.name, self.shape, self.i = name, shape, 0

    def get_next(self):
        if self.i >= 4:
            return None
        self.i += 1
        data = np.random.RandomState(self.i).uniform(-1, 1, self.shape).astype(np.float32)
        return {self.name: data}


def output_step(model, output):
    """The scale of the DequantizeLinear that writes `output`."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if output in node.output and node.op_type == "DequantizeLinear":
            return float(np.max(inits[node.input[1]]))
    sys.exit(f"no DequantizeLinear writes output '{output}'")


def main():
    kiln, source, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    model = onnx.load(source)
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    prepared = os.path.join(work, "prepared.onnx")
    quant_pre_process(source, prepared, skip_symbolic_shape=True)
    x = np.random.RandomState(7).uniform(-1, 1, shape).astype(np.float32)
    np.save(os.path.join(work, "x.npy"), x)
    failed = False
    for fmt, quant_format in (("qdq", QuantFormat.QDQ), ("qoperator", QuantFormat.QOperator),
                              ("dynamic", None)):
        path = os.path.join(work, f"{fmt}.onnx")
        if quant_format is None:
            quantize_dynamic(prepared, path, per_channel=True, weight_type=QuantType.QInt8)
        else:
            quantize_static(prepared, path, Calibration(inp.name, shape),
                            quant_format=quant_format, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        quantized = onnx.load(path)
        out_name = quantized.graph.output[0].name
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
            None, {inp.name: x})[0]
        out_dir = os.path.join(work, fmt)
        run = subprocess.run([kiln, "run", path, "--input", os.path.join(work, "x.npy"),
                              "--output-dir", out_dir], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{fmt}: kiln run failed:\n{run.stderr[-2000:]}")
            failed = True
            continue
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in out_name)
        got = np.load(os.path.join(out_dir, safe + ".npy"))
        worst = float(np.max(np.abs(got - want)))
        same_top1 = int(np.argmax(got)) == int(np.argmax(want))
        if quant_format is None:
            bound, what = 0.01 * float(np.max(np.abs(want))), "1% of the largest output"
        else:
            step = output_step(quantized, out_name)
            bound, what = 2 * step + 1e-6, f"two output steps of {step:.3g}"
        ok = same_top1 and worst <= bound
        print(f"{fmt}: max |kiln - onnxruntime| {worst:.3g} (bound: {what}), top-1 "
              f"{'the same' if same_top1 else 'DIFFERENT'}: {'ok' if ok else 'FAILED'}")
        failed = failed or not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
