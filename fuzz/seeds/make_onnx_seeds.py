#!/usr/bin/env python3
"""Writes the small hand-made ONNX seeds of fuzz/seeds/onnx/ (committed; rerun after a change):
    .venv/bin/python fuzz/seeds/make_onnx_seeds.py
Tiny shapes and weights, so the fuzzer mutates structure rather than weight bytes: a CNN with
the ops of the zoo (Conv, BatchNormalization, Relu, MaxPool, Add, Concat, GlobalAveragePool,
Flatten, Gemm), a shape subgraph the importer folds (Shape -> Gather -> Unsqueeze -> Concat
-> Reshape) with Clip, Sigmoid, Mul and Softmax, a model of opset 28 whose nodes call
model-local functions (nested, an attribute reference with a default) that the importer
inlines, the sequence ops and ScatterND as torch's dynamo exporter writes torch.split and
slice assignment, and Einsum equations (attention's products, a linear map, an ellipsis, an
implicit output, a sum) for the importer's equation parser."""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx")
rng = np.random.default_rng(13)


def init(name, *shape):
    return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)


def save(name, nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    with open(os.path.join(HERE, name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString(deterministic=True))


def small_cnn():
    var = numpy_helper.from_array(rng.uniform(0.5, 1.5, 4).astype(np.float32), "var")
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], "conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "beta", "mean", "var"], ["bn"], "bn"),
        helper.make_node("Relu", ["bn"], ["r1"], "relu1"),
        helper.make_node("MaxPool", ["r1"], ["p"], "pool", kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["p", "w2"], ["c2"], "conv2", pads=[1, 1, 1, 1], group=2),
        helper.make_node("Add", ["c2", "p"], ["sum"], "residual"),
        helper.make_node("Concat", ["sum", "p"], ["cat"], "concat", axis=1),
        helper.make_node("GlobalAveragePool", ["cat"], ["gap"], "gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], "flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], "fc", transB=1),
    ]
    inits = [init("w1", 4, 3, 3, 3), init("b1", 4), init("g", 4), init("beta", 4),
             init("mean", 4), var, init("w2", 4, 2, 3, 3), init("fc_w", 5, 8), init("fc_b", 5)]
    save("small_cnn", nodes,
         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 7, 6])],
         [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5])], inits)


def shape_subgraph():
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], "shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], "gather", axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], "unsqueeze"),
        helper.make_node("Concat", ["n1", "minus_one"], ["new_shape"], "concat", axis=0),
        helper.make_node("Reshape", ["x", "new_shape"], ["flat"], "reshape"),
        helper.make_node("Clip", ["flat", "lo", "hi"], ["clipped"], "clip"),
        helper.make_node("Sigmoid", ["clipped"], ["sig"], "sigmoid"),
        helper.make_node("Mul", ["clipped", "sig"], ["silu"], "silu"),
        helper.make_node("Softmax", ["silu"], ["y"], "softmax", axis=-1),
    ]
    inits = [i64("zero", 0), i64("axes", [0]), i64("minus_one", [-1]),
             numpy_helper.from_array(np.array(-2.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(3.0, np.float32), "hi")]
    save("shape_subgraph", nodes,
         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 2, 2])],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])], inits)


def functions():
    act = helper.make_function(
        "custom", "Act", ["x"], ["y"],
        [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["m"]),
         helper.make_node("LeakyRelu", ["m"], ["y"])],
        [helper.make_opsetid("", 18)], attributes=[])
    alpha = onnx.AttributeProto(name="alpha", ref_attr_name="slope", type=onnx.AttributeProto.FLOAT)
    act.node[2].attribute.append(alpha)
    act.attribute_proto.append(helper.make_attribute("slope", 0.1))
    block = helper.make_function(
        "custom", "Block", ["x", "w"], ["y"],
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Act", ["c"], ["y"], domain="custom")],
        [helper.make_opsetid("", 22), helper.make_opsetid("custom", 1)], attributes=[])
    nodes = [
        helper.make_node("Block", ["x", "w1"], ["b1"], "block1", domain="custom"),
        helper.make_node("Act", ["b1"], ["a2"], "act2", domain="custom", slope=0.3),
        helper.make_node("GlobalAveragePool", ["a2"], ["y"], "gap"),
    ]
    graph = helper.make_graph(
        nodes, "functions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])], [init("w1", 4, 3, 3, 3)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28),
                                                    helper.make_opsetid("custom", 1)],
                              functions=[act, block], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    with open(os.path.join(HERE, "functions.onnx"), "wb") as f:
        f.write(model.SerializeToString(deterministic=True))


def sequences():
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)
    nodes = [
        helper.make_node("SplitToSequence", ["x", "chunk"], ["parts"], "split", axis=1),
        helper.make_node("SequenceAt", ["parts", "zero"], ["a"], "first"),
        helper.make_node("SequenceAt", ["parts", "last"], ["b"], "last"),
        helper.make_node("SequenceConstruct", ["b", "a"], ["ba"], "construct"),
        helper.make_node("SequenceInsert", ["ba", "a", "zero"], ["aba"], "insert"),
        helper.make_node("ConcatFromSequence", ["aba"], ["cat"], "concat", axis=1),
        helper.make_node("Transpose", ["cat"], ["t"], "to_rows", perm=[1, 0, 2, 3]),
        helper.make_node("Transpose", ["b"], ["u"], "update_rows", perm=[1, 0, 2, 3]),
        helper.make_node("ScatterND", ["t", "rows", "u"], ["s"], "slice_scatter"),
        helper.make_node("Transpose", ["s"], ["y"], "back", perm=[1, 0, 2, 3]),
    ]
    inits = [i64("chunk", 2), i64("zero", 0), i64("last", -1), i64("rows", [[1], [2]])]
    graph = helper.make_graph(
        nodes, "sequences", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 3, 2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    with open(os.path.join(HERE, "sequences.onnx"), "wb") as f:
        f.write(model.SerializeToString(deterministic=True))


def einsum():
    nodes = [
        helper.make_node("Einsum", ["x", "w"], ["t"], "linear", equation="bchw,cd->bhwd"),
        helper.make_node("Einsum", ["t", "t"], ["s"], "scores", equation="bhid,bhjd->bhij"),
        helper.make_node("Softmax", ["s"], ["a"], "softmax", axis=-1),
        helper.make_node("Einsum", ["a", "t"], ["o"], "mix", equation="...ij,...jd->...id"),
        helper.make_node("Einsum", ["o", "o"], ["g"], "gram", equation="bhid,bhie"),
        helper.make_node("Einsum", ["g"], ["y"], "sum", equation="de -> e"),
    ]
    save("einsum", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 5])],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])], [init("w", 3, 6)])


if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    small_cnn()
    shape_subgraph()
    functions()
    sequences()
    einsum()
