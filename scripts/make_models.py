#!/usr/bin/env python3
"""Writes real CNN architectures as ONNX files with seeded random weights.

    python scripts/make_models.py OUTDIR [--models resnet18,resnet50,mobilenetv2,squeezenet1_1,
                                                   preact_se,convnext_tiny2,resnext_tiny,
                                                   inception_tiny,seg_tiny,preact_se_b4]
                                         [--seed N] [--no-verify] [--dynamic-batch]

Each model is written as OUTDIR/<model>.onnx, in the form the TorchScript-based torch.onnx
exporter gives for the torchvision model with opset 13 and BatchNorm *not* folded into the
convs (see docs/models.md): NCHW float32 input "input" [1, 3, 224, 224], output "logits"
[1, 1000], opset 13, IR version 8 (so Debian's libonnx 1.12 / protobuf 3.21 read it).
The small family networks of zoo_families.py differ in shape: inception_tiny's input is
[1, 3, 299, 299], seg_tiny's [1, 3, 240, 320] with per-pixel logits [1, 21, 240, 320], and
preact_se_b4 has batch 4 in both.
torch/torchvision are not needed: the graphs are built with onnx.helper and numpy.
With --dynamic-batch each model is written as OUTDIR/<model>_dynamic.onnx instead, as torch.onnx
exports it with a dynamic batch (see make_batch_dynamic).

Weights are random but seeded: the same --seed gives byte-identical files, and each model's
weights depend only on (seed, model name), not on which other models are requested.
With verification on (the default) every model is also run once with onnxruntime (1 thread)
on a seeded uniform [-1, 1) input and the logits are checked to be finite with a std in
[0.1, 100].
"""

import argparse
import math
import os
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import zoo_families

OPSET = 13
IR_VERSION = 8
BN_EPS = 1e-5
BN_MOMENTUM = 0.9  # torch exports 1 - module.momentum (0.1)
ALL_MODELS = ["resnet18", "resnet50", "mobilenetv2", "squeezenet1_1", "preact_se", "convnext_tiny2",
              "resnext_tiny", "inception_tiny", "seg_tiny", "preact_se_b4"]
RELU_GAIN = math.sqrt(2.0)


class GraphBuilder:
    """Collects nodes and initializers with torch.onnx-style names.

    Node names are "<scope>/<OpType>" (a suffix _1, _2, ... on repeats, as torch does) and
    each output is "<node name>_output_<i>". Initializers carry the PyTorch parameter names
    ("layer1.0.conv1.weight", "bn1.running_var", ...).
    """

    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.initializers = []
        self.used_names = set()
        self.init_names = set()

    # ---- naming -------------------------------------------------------------------------
    def _node_name(self, scope, op):
        base = f"{scope}/{op}"
        name, i = base, 0
        while name in self.used_names:
            i += 1
            name = f"{base}_{i}"
        self.used_names.add(name)
        return name

    # ---- primitives ---------------------------------------------------------------------
    def node(self, op, inputs, scope, n_out=1, **attrs):
        name = self._node_name(scope, op)
        outputs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, **attrs))
        return outputs[0] if n_out == 1 else outputs

    def constant(self, scope, array):
        tensor = numpy_helper.from_array(np.asarray(array), name="")
        return self.node("Constant", [], scope, value=tensor)

    def init(self, name, array):
        assert name not in self.init_names, name
        self.init_names.add(name)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name=name))
        return name

    def uniform(self, shape, low, high):
        return self.rng.uniform(low, high, size=shape).astype(np.float32)

    # ---- layers -------------------------------------------------------------------------
    def conv(self, x, scope, param, cin, cout, k, stride=1, pad=0, groups=1, bias=False,
             gain=RELU_GAIN, dilation=1):
        """Conv with Kaiming-uniform weights: U(-b, b), b = gain * sqrt(3 / fan_in), so the
        second moment of the output is gain^2 times that of the input. k and pad are an int or
        an (h, w) pair (Inception's 1x7 / 7x1 convs)."""
        kh, kw = (k, k) if isinstance(k, int) else k
        ph, pw = (pad, pad) if isinstance(pad, int) else pad
        fan_in = (cin // groups) * kh * kw
        bound = gain * math.sqrt(3.0 / fan_in)
        inputs = [x, self.init(f"{param}.weight",
                               self.uniform((cout, cin // groups, kh, kw), -bound, bound))]
        if bias:
            inputs.append(self.init(f"{param}.bias", self.uniform((cout,), -0.1, 0.1)))
        return self.node("Conv", inputs, scope, dilations=[dilation, dilation], group=groups,
                         kernel_shape=[kh, kw], pads=[ph, pw, ph, pw], strides=[stride, stride])

    def batch_norm(self, x, scope, param, c, gamma_range=(0.6, 1.2), eps=BN_EPS):
        """BatchNormalization with random, non-trivial inference statistics:
        running_var log-uniform in [0.5, 2], running_mean and beta uniform in [-0.2, 0.2]
        (never exactly 0), gamma uniform in gamma_range. gamma's default range keeps
        E[gamma^2 / var] close to 1, so the scale stays stable through 50 layers."""
        gamma = self.uniform((c,), *gamma_range)
        beta = self.uniform((c,), -0.2, 0.2)
        mean = self.uniform((c,), -0.2, 0.2)
        var = np.exp(self.uniform((c,), math.log(0.5), math.log(2.0))).astype(np.float32)
        inputs = [x,
                  self.init(f"{param}.weight", gamma),
                  self.init(f"{param}.bias", beta),
                  self.init(f"{param}.running_mean", mean),
                  self.init(f"{param}.running_var", var)]
        return self.node("BatchNormalization", inputs, scope, epsilon=eps, momentum=BN_MOMENTUM)

    def relu(self, x, scope):
        return self.node("Relu", [x], scope)

    def relu6(self, x, scope):
        # torch exports nn.ReLU6 / hardtanh(0, 6) in opset >= 11 as Clip with Constant inputs.
        lo = self.constant(scope, np.array(0.0, dtype=np.float32))
        hi = self.constant(scope, np.array(6.0, dtype=np.float32))
        return self.node("Clip", [x, lo, hi], scope)

    def max_pool(self, x, scope, k, stride, pad, ceil_mode=0):
        return self.node("MaxPool", [x], scope, ceil_mode=ceil_mode, kernel_shape=[k, k],
                         pads=[pad, pad, pad, pad], strides=[stride, stride])

    def dropout(self, x, scope, ratio):
        # Inference Dropout (training_mode omitted = false): the identity.
        r = self.constant(scope, np.array(ratio, dtype=np.float32))
        return self.node("Dropout", [x, r], scope)

    def linear(self, x, scope, param, cin, cout):
        # torch.nn.Linear's default init: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
        bound = 1.0 / math.sqrt(cin)
        w = self.init(f"{param}.weight", self.uniform((cout, cin), -bound, bound))
        b = self.init(f"{param}.bias", self.uniform((cout,), -bound, bound))
        return self.node("Gemm", [x, w, b], scope, alpha=1.0, beta=1.0, transB=1)

    def finish(self, name, x, output_name="logits", num_classes=1000,
               input_shape=(1, 3, 224, 224), output_shape=None):
        # Rename the last node's output to the graph output name.
        last = self.nodes[-1]
        assert last.output[0] == x
        last.output[0] = output_name
        output_shape = output_shape or (input_shape[0], num_classes)
        graph = helper.make_graph(
            self.nodes, "main_graph",
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(input_shape))],
            [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, list(output_shape))],
            initializer=self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="kiln/scripts/make_models.py",
                                  producer_version="1", doc_string=f"{name}, random weights")
        model.ir_version = IR_VERSION
        return model


# ---- ResNet (torchvision resnet.py, v1.5: stride in the bottleneck's 3x3) ------------------
def _basic_block(g, x, prefix, inplanes, planes, stride):
    s = "/" + "/".join(_scopes(prefix))
    out = g.conv(x, f"{s}/conv1", f"{prefix}.conv1", inplanes, planes, 3, stride, 1)
    out = g.batch_norm(out, f"{s}/bn1", f"{prefix}.bn1", planes)
    out = g.relu(out, f"{s}/relu")
    out = g.conv(out, f"{s}/conv2", f"{prefix}.conv2", planes, planes, 3, 1, 1)
    # Last BN of a residual branch: small gamma so the residual sum grows slowly with depth.
    out = g.batch_norm(out, f"{s}/bn2", f"{prefix}.bn2", planes, gamma_range=(0.2, 0.5))
    identity = x
    if stride != 1 or inplanes != planes:
        identity = g.conv(x, f"{s}/downsample/downsample.0", f"{prefix}.downsample.0",
                          inplanes, planes, 1, stride, 0, gain=1.0)
        identity = g.batch_norm(identity, f"{s}/downsample/downsample.1",
                                f"{prefix}.downsample.1", planes)
    out = g.node("Add", [out, identity], s)
    return g.relu(out, f"{s}/relu_1"), planes


def _bottleneck(g, x, prefix, inplanes, planes, stride, groups=1, base_width=64):
    # torchvision's width rule: ResNeXt (groups > 1) widens the grouped 3x3.
    s = "/" + "/".join(_scopes(prefix))
    width, outp = int(planes * (base_width / 64.0)) * groups, planes * 4
    out = g.conv(x, f"{s}/conv1", f"{prefix}.conv1", inplanes, width, 1, 1, 0)
    out = g.batch_norm(out, f"{s}/bn1", f"{prefix}.bn1", width)
    out = g.relu(out, f"{s}/relu")
    out = g.conv(out, f"{s}/conv2", f"{prefix}.conv2", width, width, 3, stride, 1, groups=groups)
    out = g.batch_norm(out, f"{s}/bn2", f"{prefix}.bn2", width)
    out = g.relu(out, f"{s}/relu_1")
    out = g.conv(out, f"{s}/conv3", f"{prefix}.conv3", width, outp, 1, 1, 0)
    out = g.batch_norm(out, f"{s}/bn3", f"{prefix}.bn3", outp, gamma_range=(0.2, 0.5))
    identity = x
    if stride != 1 or inplanes != outp:
        identity = g.conv(x, f"{s}/downsample/downsample.0", f"{prefix}.downsample.0",
                          inplanes, outp, 1, stride, 0, gain=1.0)
        identity = g.batch_norm(identity, f"{s}/downsample/downsample.1",
                                f"{prefix}.downsample.1", outp)
    out = g.node("Add", [out, identity], s)
    return g.relu(out, f"{s}/relu_2"), outp


def _scopes(prefix):
    """"layer1.0" -> ["layer1", "layer1.0"] (torch's module-path scope names)."""
    parts = prefix.split(".")
    return [".".join(parts[:i + 1]) for i in range(len(parts))]


def build_resnet(name, rng, block, layers):
    g = GraphBuilder(rng)
    x = g.conv("input", "/conv1", "conv1", 3, 64, 7, 2, 3)
    x = g.batch_norm(x, "/bn1", "bn1", 64)
    x = g.relu(x, "/relu")
    x = g.max_pool(x, "/maxpool", 3, 2, 1)
    inplanes = 64
    for li, (planes, n) in enumerate(zip([64, 128, 256, 512], layers)):
        for bi in range(n):
            stride = 2 if (li > 0 and bi == 0) else 1
            x, inplanes = block(g, x, f"layer{li + 1}.{bi}", inplanes, planes, stride)
    x = g.node("GlobalAveragePool", [x], "/avgpool")
    x = g.node("Flatten", [x], "", axis=1)
    x = g.linear(x, "/fc", "fc", inplanes, 1000)
    return g.finish(name, x)


# ---- MobileNetV2 (torchvision mobilenetv2.py, width 1.0) -----------------------------------
def build_mobilenetv2(name, rng):
    g = GraphBuilder(rng)

    def conv_bn_relu6(x, idx_scope, idx_param, cin, cout, k, stride, groups=1):
        # torchvision Conv2dNormActivation = Sequential(Conv2d, BatchNorm2d, ReLU6)
        x = g.conv(x, f"{idx_scope}/{_last(idx_scope)}.0", f"{idx_param}.0", cin, cout, k,
                   stride, (k - 1) // 2, groups)
        x = g.batch_norm(x, f"{idx_scope}/{_last(idx_scope)}.1", f"{idx_param}.1", cout)
        return g.relu6(x, f"{idx_scope}/{_last(idx_scope)}.2")

    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    x = conv_bn_relu6("input", "/features/features.0", "features.0", 3, 32, 3, 2)
    cin, fi = 32, 1
    for t, c, n, s in settings:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = int(round(cin * t))
            fs, fp = f"/features/features.{fi}", f"features.{fi}"
            h, li = x, 0
            if t != 1:  # expand 1x1
                h = conv_bn_relu6(h, f"{fs}/conv/conv.{li}", f"{fp}.conv.{li}", cin, hidden, 1, 1)
                li += 1
            # depthwise 3x3
            h = conv_bn_relu6(h, f"{fs}/conv/conv.{li}", f"{fp}.conv.{li}", hidden, hidden, 3,
                              stride, groups=hidden)
            li += 1
            # linear projection 1x1 + BN, no activation
            h = g.conv(h, f"{fs}/conv/conv.{li}", f"{fp}.conv.{li}", hidden, c, 1, 1, 0,
                       gain=1.0)
            use_res = stride == 1 and cin == c
            h = g.batch_norm(h, f"{fs}/conv/conv.{li + 1}", f"{fp}.conv.{li + 1}", c,
                             gamma_range=(0.2, 0.5) if use_res else (0.6, 1.2))
            x = g.node("Add", [x, h], fs) if use_res else h
            cin, fi = c, fi + 1
    x = conv_bn_relu6(x, f"/features/features.{fi}", f"features.{fi}", cin, 1280, 1, 1)
    feat = x
    # nn.functional.adaptive_avg_pool2d(x, 1).reshape(x.shape[0], -1), as exported by
    # torch.onnx: the batch size is taken from the features' shape at run time.
    pooled = g.node("GlobalAveragePool", [feat], "")
    shape = g.node("Shape", [feat], "")
    dim0 = g.node("Gather", [shape, g.constant("", np.array(0, dtype=np.int64))], "", axis=0)
    dim0 = g.node("Unsqueeze", [dim0, g.constant("", np.array([0], dtype=np.int64))], "")
    new_shape = g.node("Concat", [dim0, g.constant("", np.array([-1], dtype=np.int64))], "",
                       axis=0)
    x = g.node("Reshape", [pooled, new_shape], "")
    x = g.dropout(x, "/classifier/classifier.0", 0.2)
    x = g.linear(x, "/classifier/classifier.1", "classifier.1", 1280, 1000)
    return g.finish(name, x)


def _last(scope):
    return scope.rsplit("/", 1)[-1]


# ---- SqueezeNet 1.1 (torchvision squeezenet.py) --------------------------------------------
def build_squeezenet1_1(name, rng):
    g = GraphBuilder(rng)

    def fire(x, idx, cin, squeeze, e1, e3):
        s, p = f"/features/features.{idx}", f"features.{idx}"
        x = g.conv(x, f"{s}/squeeze", f"{p}.squeeze", cin, squeeze, 1, bias=True)
        x = g.relu(x, f"{s}/squeeze_activation")
        a = g.conv(x, f"{s}/expand1x1", f"{p}.expand1x1", squeeze, e1, 1, bias=True)
        a = g.relu(a, f"{s}/expand1x1_activation")
        b = g.conv(x, f"{s}/expand3x3", f"{p}.expand3x3", squeeze, e3, 3, pad=1, bias=True)
        b = g.relu(b, f"{s}/expand3x3_activation")
        return g.node("Concat", [a, b], s, axis=1)

    x = g.conv("input", "/features/features.0", "features.0", 3, 64, 3, 2, 0, bias=True)
    x = g.relu(x, "/features/features.1")
    x = g.max_pool(x, "/features/features.2", 3, 2, 0, ceil_mode=1)
    x = fire(x, 3, 64, 16, 64, 64)
    x = fire(x, 4, 128, 16, 64, 64)
    x = g.max_pool(x, "/features/features.5", 3, 2, 0, ceil_mode=1)
    x = fire(x, 6, 128, 32, 128, 128)
    x = fire(x, 7, 256, 32, 128, 128)
    x = g.max_pool(x, "/features/features.8", 3, 2, 0, ceil_mode=1)
    x = fire(x, 9, 256, 48, 192, 192)
    x = fire(x, 10, 384, 48, 192, 192)
    x = fire(x, 11, 384, 64, 256, 256)
    x = fire(x, 12, 512, 64, 256, 256)
    x = g.dropout(x, "/classifier/classifier.0", 0.5)
    x = g.conv(x, "/classifier/classifier.1", "classifier.1", 512, 1000, 1, bias=True)
    x = g.relu(x, "/classifier/classifier.2")
    x = g.node("GlobalAveragePool", [x], "/classifier/classifier.3")
    x = g.node("Flatten", [x], "", axis=1)
    return g.finish(name, x)


# ---- A small pre-activation network with SE blocks -----------------------------------------
def build_preact_se(name, rng, batch=1):
    """Not a torchvision model: the patterns of DenseNet, EfficientNet and MobileNetV3 whose
    elementwise work Kiln generates per model, in one small network. BatchNorm -> ReLU before
    each conv of a dense block (pre-activation: the BN cannot fold) with growing Concats, SiLU as
    torch exports it (x * Sigmoid(x)), a depthwise stage with HardSwish as opset 13 exports it
    (x * HardSigmoid(x)), and a squeeze-and-excitation gate (GlobalAveragePool -> 1x1 convs ->
    HardSigmoid -> Mul)."""
    g = GraphBuilder(rng)

    def silu(x, scope):
        return g.node("Mul", [x, g.node("Sigmoid", [x], scope)], scope)

    def hardswish(x, scope):
        return g.node("Mul", [x, g.node("HardSigmoid", [x], scope, alpha=1.0 / 6, beta=0.5)],
                      scope)

    x = g.conv("input", "/stem/conv", "stem.conv", 3, 32, 3, 2, 1)
    x = g.batch_norm(x, "/stem/bn", "stem.bn", 32)
    x = silu(x, "/stem/act")
    c = 32
    for i in range(3):  # dense block, growth rate 16
        s, p = f"/dense/layer{i}", f"dense.layer{i}"
        h = g.batch_norm(x, f"{s}/norm1", f"{p}.norm1", c)
        h = g.relu(h, f"{s}/relu1")
        h = g.conv(h, f"{s}/conv1", f"{p}.conv1", c, 32, 1)
        h = g.batch_norm(h, f"{s}/norm2", f"{p}.norm2", 32)
        h = g.relu(h, f"{s}/relu2")
        h = g.conv(h, f"{s}/conv2", f"{p}.conv2", 32, 16, 3, 1, 1)
        x = g.node("Concat", [x, h], s, axis=1)
        c += 16
    x = g.batch_norm(x, "/transition/norm", "transition.norm", c)
    x = g.relu(x, "/transition/relu")
    x = g.conv(x, "/transition/conv", "transition.conv", c, 64, 1)
    x = g.node("AveragePool", [x], "/transition/pool", kernel_shape=[2, 2], strides=[2, 2])
    x = g.conv(x, "/se/dw", "se.dw", 64, 64, 3, 1, 1, groups=64)
    x = g.batch_norm(x, "/se/bn", "se.bn", 64)
    x = hardswish(x, "/se/act")
    gate = g.node("GlobalAveragePool", [x], "/se/pool")
    gate = g.conv(gate, "/se/fc1", "se.fc1", 64, 16, 1, bias=True)
    gate = g.relu(gate, "/se/relu")
    gate = g.conv(gate, "/se/fc2", "se.fc2", 16, 64, 1, bias=True, gain=1.0)
    gate = g.node("HardSigmoid", [gate], "/se/gate", alpha=1.0 / 6, beta=0.5)
    x = g.node("Mul", [x, gate], "/se")
    x = g.conv(x, "/head/conv", "head.conv", 64, 128, 1)
    x = g.batch_norm(x, "/head/bn", "head.bn", 128)
    x = silu(x, "/head/act")
    x = g.node("GlobalAveragePool", [x], "/avgpool")
    x = g.node("Flatten", [x], "", axis=1)
    x = g.linear(x, "/fc", "fc", 128, 1000)
    return g.finish(name, x, input_shape=(batch, 3, 224, 224))


# ---- A two-block ConvNeXt-style network --------------------------------------------------
def build_convnext_tiny2(name, rng, channels=48, blocks=2):
    """Not a torchvision model: ConvNeXt's block as torch.onnx (opset 13) exports it, twice,
    at 56x56 after a 4x4 patchify stem. Depthwise 7x7 conv; LayerNorm over channels after a
    permute to NHWC, decomposed into ReduceMean, Sub, Pow(2), ReduceMean, Add(eps), Sqrt, Div,
    Mul, Add; the MLP as MatMul + Add on the last axis with exact GELU written through Erf,
    x * 0.5 * (1 + Erf(x / sqrt(2))); the permute back and the residual Add."""
    g = GraphBuilder(rng)

    def scalar(scope, value):
        return g.constant(scope, np.array(value, dtype=np.float32))

    def layer_norm(x, scope, param, c):
        mean = g.node("ReduceMean", [x], scope, axes=[-1], keepdims=1)
        d = g.node("Sub", [x, mean], scope)
        var = g.node("ReduceMean", [g.node("Pow", [d, scalar(scope, 2.0)], scope)], scope,
                     axes=[-1], keepdims=1)
        std = g.node("Sqrt", [g.node("Add", [var, scalar(scope, 1e-6)], scope)], scope)
        y = g.node("Div", [d, std], scope)
        y = g.node("Mul", [y, g.init(f"{param}.weight", g.uniform((c,), 0.6, 1.2))], scope)
        return g.node("Add", [y, g.init(f"{param}.bias", g.uniform((c,), -0.1, 0.1))], scope)

    def linear_last_axis(x, scope, param, cin, cout, gain):
        bound = gain * math.sqrt(3.0 / cin)
        y = g.node("MatMul", [x, g.init(f"{param}.weight", g.uniform((cin, cout), -bound, bound))],
                   scope)
        return g.node("Add", [y, g.init(f"{param}.bias", g.uniform((cout,), -0.1, 0.1))], scope)

    c = channels
    x = g.conv("input", "/stem/stem.0", "stem.0", 3, c, 4, 4, 0, bias=True, gain=1.0)
    for i in range(blocks):
        s, p = f"/stages/block{i}", f"stages.block{i}"
        h = g.conv(x, f"{s}/dwconv", f"{p}.dwconv", c, c, 7, 1, 3, groups=c, bias=True, gain=1.0)
        h = g.node("Transpose", [h], s, perm=[0, 2, 3, 1])
        h = layer_norm(h, f"{s}/norm", f"{p}.norm", c)
        h = linear_last_axis(h, f"{s}/pwconv1", f"{p}.pwconv1", c, 4 * c, RELU_GAIN)
        gate = g.node("Erf", [g.node("Div", [h, scalar(f"{s}/act", math.sqrt(2.0))], f"{s}/act")],
                      f"{s}/act")
        h = g.node("Mul", [h, g.node("Add", [gate, scalar(f"{s}/act", 1.0)], f"{s}/act")], f"{s}/act")
        h = g.node("Mul", [h, scalar(f"{s}/act", 0.5)], f"{s}/act")
        h = linear_last_axis(h, f"{s}/pwconv2", f"{p}.pwconv2", 4 * c, c, 0.5)
        h = g.node("Transpose", [h], s, perm=[0, 3, 1, 2])
        x = g.node("Add", [x, h], s)
    x = g.node("GlobalAveragePool", [x], "/avgpool")
    x = g.node("Flatten", [x], "", axis=1)
    x = g.linear(x, "/head", "head", c, 1000)
    return g.finish(name, x)


BUILDERS = {
    "resnet18": lambda rng: build_resnet("resnet18", rng, _basic_block, [2, 2, 2, 2]),
    "resnet50": lambda rng: build_resnet("resnet50", rng, _bottleneck, [3, 4, 6, 3]),
    "mobilenetv2": lambda rng: build_mobilenetv2("mobilenetv2", rng),
    "squeezenet1_1": lambda rng: build_squeezenet1_1("squeezenet1_1", rng),
    "preact_se": lambda rng: build_preact_se("preact_se", rng),
    "convnext_tiny2": lambda rng: build_convnext_tiny2("convnext_tiny2", rng),
    "resnext_tiny": lambda rng: zoo_families.build_resnext_tiny(GraphBuilder(rng), "resnext_tiny",
                                                                _bottleneck),
    "inception_tiny": lambda rng: zoo_families.build_inception_tiny(GraphBuilder(rng),
                                                                    "inception_tiny"),
    "seg_tiny": lambda rng: zoo_families.build_seg_tiny(GraphBuilder(rng), "seg_tiny"),
    # torch.onnx with a static batch-4 example input: the same graph, batch 4 in both shapes.
    "preact_se_b4": lambda rng: build_preact_se("preact_se_b4", rng, batch=4),
}

# Initializers that are buffers, not trainable parameters, in PyTorch.
_BUFFER_SUFFIXES = (".running_mean", ".running_var")


def make_batch_dynamic(model):
    """The model as torch.onnx writes it with dynamic_axes {0: "batch_size"} on the input and the
    output: their batch dimension symbolic, and each Flatten as `x.view(x.size(0), -1)` exports,
    Shape -> Gather -> Unsqueeze -> Concat -> Reshape, a target shape that depends on the batch."""
    for v in list(model.graph.input) + list(model.graph.output):
        v.type.tensor_type.shape.dim[0].dim_param = "batch_size"  # clears dim_value (a oneof)
    nodes = []
    for n in model.graph.node:
        if n.op_type != "Flatten":
            nodes.append(n)
            continue
        s = n.name.rsplit("/", 1)[0]
        out = lambda op: f"{s}/{op}_output_0"
        const = lambda op, v: helper.make_node(
            "Constant", [], [out(op)], name=f"{s}/{op}",
            value=numpy_helper.from_array(np.array(v, dtype=np.int64), name=""))
        nodes += [
            helper.make_node("Shape", [n.input[0]], [out("Shape")], name=f"{s}/Shape"),
            const("Constant", 0),
            helper.make_node("Gather", [out("Shape"), out("Constant")], [out("Gather")],
                             name=f"{s}/Gather", axis=0),
            const("Constant_1", [0]),
            helper.make_node("Unsqueeze", [out("Gather"), out("Constant_1")], [out("Unsqueeze")],
                             name=f"{s}/Unsqueeze"),
            const("Constant_2", [-1]),
            helper.make_node("Concat", [out("Unsqueeze"), out("Constant_2")], [out("Concat")],
                             name=f"{s}/Concat", axis=0),
            helper.make_node("Reshape", [n.input[0], out("Concat")], list(n.output),
                             name=f"{s}/Reshape"),
        ]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


# A batch variant draws the weights of the model it exports at another batch size.
_WEIGHTS_OF = {"preact_se_b4": "preact_se"}


def build(name, seed):
    rng = np.random.default_rng([seed, zlib.crc32(_WEIGHTS_OF.get(name, name).encode())])
    return BUILDERS[name](rng)


def parameter_count(model):
    """(trainable parameters as torchvision counts them, all initializer elements)."""
    trainable = total = 0
    for t in model.graph.initializer:
        n = int(np.prod(t.dims)) if len(t.dims) else 1
        total += n
        if not t.name.endswith(_BUFFER_SUFFIXES):
            trainable += n
    return trainable, total


def op_counts(model):
    counts = {}
    for n in model.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def verify_with_ort(path, seed):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    (inp,), (out,) = sess.get_inputs(), sess.get_outputs()
    x = np.random.default_rng(seed).random(inp.shape, dtype=np.float32) * 2 - 1
    (y,) = sess.run(["logits"], {"input": x})
    if y.shape != tuple(out.shape) or not np.isfinite(y).all():
        raise RuntimeError(f"{path}: bad logits, shape {y.shape}, finite {np.isfinite(y).all()}")
    std = float(y.std())
    if not 0.1 <= std <= 100:
        raise RuntimeError(f"{path}: logits std {std:.4g} outside [0.1, 100]")
    return y


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--models", default=",".join(ALL_MODELS),
                    help="comma-separated subset of " + ",".join(ALL_MODELS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-verify", action="store_true",
                    help="skip the onnxruntime run that checks the logits")
    ap.add_argument("--dynamic-batch", action="store_true",
                    help="write <model>_dynamic.onnx, with a symbolic batch dimension")
    args = ap.parse_args(argv)

    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in BUILDERS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; choose from {ALL_MODELS}")
    os.makedirs(args.outdir, exist_ok=True)
    for name in names:
        model = build(name, args.seed)
        if args.dynamic_batch:
            model = make_batch_dynamic(model)
            name += "_dynamic"
        onnx.checker.check_model(model, full_check=True)  # also runs strict shape inference
        path = os.path.join(args.outdir, f"{name}.onnx")
        data = model.SerializeToString(deterministic=True)
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
        trainable, total = parameter_count(model)
        counts = op_counts(model)
        line = (f"{name}: {path} ({len(data) / 1e6:.1f} MB), {len(model.graph.node)} nodes, "
                f"{trainable:,} parameters ({total:,} initializer values): "
                + ", ".join(f"{k} {v}" for k, v in counts.items()))
        if not args.no_verify:
            y = verify_with_ort(path, args.seed)
            line += (f"\n  onnxruntime logits: mean {y.mean():.4g}, std {y.std():.4g}, "
                     f"min {y.min():.4g}, max {y.max():.4g}, argmax {int(y.argmax())}")
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
