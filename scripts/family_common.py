"""What the family scripts (more_families.py, dense_prediction_families.py, families_b.py)
share: the pieces torch.onnx writes for common layers (SiLU, hard sigmoid, exact GELU, pooling,
Resize as F.interpolate and nn.Upsample export it, LayerNorm, nn.Linear on a rank > 2 input,
traced shapes, the classifier head) on make_models.GraphBuilder, a finish for graphs with
several outputs, and the writer of their command line (each model checked, run with
onnxruntime, its input and outputs saved)."""

import argparse
import math
import os
import re

import numpy as np
import onnx
from onnx import TensorProto, helper

from make_models import IR_VERSION, OPSET

SILU_GAIN = 1.7  # ~ 1 / sqrt(E[silu(x)^2]) for x ~ N(0, 1)


def i64(g, scope, values):
    return g.constant(scope, np.array(values, dtype=np.int64))


def f32(g, scope, values):
    return g.constant(scope, np.array(values, dtype=np.float32))


def silu(g, x, scope):
    # nn.SiLU at opset 13: Sigmoid + Mul
    return g.node("Mul", [x, g.node("Sigmoid", [x], scope)], scope)


def avg_pool(g, x, scope, k, s):
    return g.node("AveragePool", [x], scope, ceil_mode=0, count_include_pad=1,
                  kernel_shape=[k, k], pads=[0, 0, 0, 0], strides=[s, s])


def interpolate_like(g, x, like, scope, mode="linear"):
    """F.interpolate(x, size=like.shape[-2:], mode="bilinear" (or "nearest"), align_corners=False)
    as torch.onnx (opset 13) exports it: the size traced from like's Shape (Gather, Unsqueeze,
    Concat, Cast to INT64), batch and channels from x's Shape (Slice), then Resize with the roi
    and scales inputs left empty and the sizes input; bilinear maps coordinates as
    pytorch_half_pixel."""
    shape = g.node("Shape", [like], scope)
    dims = [g.node("Unsqueeze", [g.node("Gather", [shape, i64(g, scope, d)], scope, axis=0),
                                 i64(g, scope, [0])], scope) for d in (2, 3)]
    size = g.node("Cast", [g.node("Concat", dims, scope, axis=0)], scope, to=TensorProto.INT64)
    nc = g.node("Slice", [g.node("Shape", [x], scope), i64(g, scope, [0]), i64(g, scope, [2]),
                          i64(g, scope, [0])], scope)
    sizes = g.node("Concat", [nc, size], scope, axis=0)
    return g.node("Resize", [x, "", "", sizes], scope,
                  coordinate_transformation_mode="pytorch_half_pixel" if mode == "linear"
                  else "asymmetric", cubic_coeff_a=-0.75, mode=mode, nearest_mode="floor")


def upsample_nearest(g, x, scope, factor=2):
    """nn.Upsample(scale_factor=factor) (mode nearest) at opset 13: Resize with an empty roi input
    and constant scales."""
    scales = f32(g, scope, [1.0, 1.0, float(factor), float(factor)])
    return g.node("Resize", [x, "", scales], scope, coordinate_transformation_mode="asymmetric",
                  cubic_coeff_a=-0.75, mode="nearest", nearest_mode="floor")


def classifier(g, x, cin, param="fc", scope="/fc"):
    x = g.node("GlobalAveragePool", [x], "/avgpool")
    x = g.node("Flatten", [x], "", axis=1)
    return g.linear(x, scope, param, cin, 1000)


def hard_sigmoid(g, x, scope):
    # nn.Hardsigmoid at opset 13
    return g.node("HardSigmoid", [x], scope, alpha=1.0 / 6, beta=0.5)


def gelu(g, x, scope):
    # nn.GELU() (exact) at opset 13: x * 0.5 * (1 + Erf(x / sqrt(2))), torch's grouping
    e = g.node("Erf", [g.node("Div", [x, f32(g, scope, math.sqrt(2.0))], scope)], scope)
    h = g.node("Mul", [x, g.node("Add", [e, f32(g, scope, 1.0)], scope)], scope)
    return g.node("Mul", [h, f32(g, scope, 0.5)], scope)


def layer_norm(g, x, scope, param, c, eps=1e-5):
    """nn.LayerNorm(c) over the last axis, decomposed as torch.onnx (opset 13) writes it."""
    mean = g.node("ReduceMean", [x], scope, axes=[-1], keepdims=1)
    d = g.node("Sub", [x, mean], scope)
    var = g.node("ReduceMean", [g.node("Pow", [d, f32(g, scope, 2.0)], scope)], scope,
                 axes=[-1], keepdims=1)
    std = g.node("Sqrt", [g.node("Add", [var, f32(g, scope, eps)], scope)], scope)
    y = g.node("Div", [d, std], scope)
    y = g.node("Mul", [y, g.init(f"{param}.weight", g.uniform((c,), 0.8, 1.2))], scope)
    return g.node("Add", [y, g.init(f"{param}.bias", g.uniform((c,), -0.1, 0.1))], scope)


def linear_nd(g, x, scope, param, cin, cout, gain=1.0):
    """nn.Linear on a rank > 2 input: MatMul by the transposed weight (an initializer of its
    own, as torch.onnx stores it), then Add of the bias."""
    bound = gain * math.sqrt(3.0 / cin)
    w = g.init(f"onnx::MatMul_{param}", g.uniform((cin, cout), -bound, bound))
    y = g.node("MatMul", [x, w], scope)
    return g.node("Add", [g.init(f"{param}.bias", g.uniform((cout,), -0.1, 0.1)), y], scope)


def shape_dims(g, x, scope, dims):
    """`B, C, H, W = x.shape` as torch.onnx traces it: Shape, then one Gather (axis 0, a
    scalar index) per dimension read; returns the 0-d int64 values."""
    shape = g.node("Shape", [x], scope)
    return [g.node("Gather", [shape, i64(g, scope, d)], scope, axis=0) for d in dims]


def traced_shape(g, scope, parts):
    """A Reshape's shape from traced scalars and Python ints: Unsqueeze each 0-d value (a
    Constant of shape [1] for the ints), Concat."""
    items = [i64(g, scope, [p]) if isinstance(p, int)
             else g.node("Unsqueeze", [p, i64(g, scope, [0])], scope) for p in parts]
    return g.node("Concat", items, scope, axis=0)


def finish_multi(g, name, outputs, input_shape, producer):
    """Like GraphBuilder.finish, for several graph outputs: outputs is a list of (value,
    output name); each value is renamed (where it is produced and wherever it is read) and its
    declared shape comes from onnx shape inference."""
    rename = {v: n for v, n in outputs}
    for node in g.nodes:
        for seq in (node.output, node.input):
            for i, v in enumerate(seq):
                if v in rename:
                    seq[i] = rename[v]
    graph = helper.make_graph(
        g.nodes, "main_graph",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for _, n in outputs],
        initializer=g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name=producer, producer_version="1",
                              doc_string=f"{name}, random weights")
    model.ir_version = IR_VERSION
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.graph.value_info) + list(inferred.graph.output)
              if v.type.tensor_type.HasField("shape")}
    if any(not shapes.get(n) or 0 in shapes[n] for _, n in outputs):
        # onnx's data propagation stops at a traced Reshape shape (Shape -> Gather of a 0-d
        # index -> Unsqueeze -> Concat): take those outputs' shapes from a run on zeros
        import onnxruntime as ort
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        ys = sess.run([n for _, n in outputs], {"input": np.zeros(input_shape, np.float32)})
        shapes.update({n: list(y.shape) for (_, n), y in zip(outputs, ys)})
    del model.graph.output[:]
    model.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[n])
                              for _, n in outputs)
    return model


def flops(model):
    """Multiply-adds x 2 of the Conv/ConvTranspose/Gemm nodes, from inferred shapes."""
    m = onnx.shape_inference.infer_shapes(model, data_prop=True)  # Resize sizes via Shape
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(m.graph.value_info) + list(m.graph.output) + list(m.graph.input)}
    inits = {t.name: list(t.dims) for t in m.graph.initializer}
    total = 0
    for n in m.graph.node:
        if n.op_type == "Conv":
            w = inits[n.input[1]]
            total += 2 * int(np.prod(shapes[n.output[0]])) * int(np.prod(w[1:]))
        elif n.op_type == "ConvTranspose":
            w = inits[n.input[1]]
            total += 2 * int(np.prod(shapes[n.input[0]])) * int(np.prod(w[1:]))
        elif n.op_type == "Gemm":
            total += 2 * int(np.prod(inits[n.input[1]]))
    return total


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def write_models(builders, build, argv, description):
    """Writes each model of `builders` (name -> builder) that --models names, with its input and
    onnxruntime's outputs, as the module docstrings describe; the command line of both scripts."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("outdir", help="directory for the .onnx, input and reference files")
    ap.add_argument("--models", default=",".join(builders))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import onnxruntime as ort
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in builders]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; choose from {','.join(builders)}")
    os.makedirs(args.outdir, exist_ok=True)
    for name in names:
        model = build(name, args.seed)
        onnx.checker.check_model(model, full_check=True)
        path = os.path.join(args.outdir, f"{name}.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString(deterministic=True))
        so = ort.SessionOptions()
        so.intra_op_num_threads = 2
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        inp, outs = sess.get_inputs()[0], sess.get_outputs()
        x = (np.random.default_rng(args.seed).random(inp.shape, dtype=np.float32) * 2 - 1)
        ys = sess.run([o.name for o in outs], {inp.name: x})
        np.save(os.path.join(args.outdir, f"{name}.input.npy"), x)
        np.save(os.path.join(args.outdir, f"{name}.ort.npy"), ys[0])
        if len(outs) > 1:
            for o, y in zip(outs, ys):
                np.save(os.path.join(args.outdir, f"{name}.ort.{sanitize(o.name)}.npy"), y)
        counts = {}
        for n in model.graph.node:
            counts[n.op_type] = counts.get(n.op_type, 0) + 1
        ok = all(np.isfinite(y).all() for y in ys)
        stats = "; ".join(f"{o.name} {list(y.shape)} mean {y.mean():.4g} std {y.std():.4g} "
                          f"min {y.min():.4g} max {y.max():.4g}" for o, y in zip(outs, ys))
        print(f"{name}: {path}, {len(model.graph.node)} nodes, {flops(model) / 1e9:.2f} GFLOP "
              f"(Conv/ConvTranspose/Gemm), finite={ok}\n  ORT: {stats}\n  ops: "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])),
              flush=True)
        if not ok:
            raise RuntimeError(f"{name}: non-finite ORT output")
    return 0
