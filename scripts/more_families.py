#!/usr/bin/env python3
"""Thirteen small ONNX models of CNN families outside the zoo (DenseNet, EfficientNet, ShuffleNetV2,
a YOLO-style detector, U-Net, RegNetX, MobileNetV3, Res2Net, DeepLabV3, GhostNet, RepVGG, Xception,
HRNet): opset 13, float32, batch 1, random seeded weights, BatchNorms unfolded, in the form
torch.onnx exports them, built with make_models.GraphBuilder.
Not part of the tests (each would add minutes of kernel compiles to CI): they are for checking
Kiln on families it was not tuned on, and for benchmarking it against the peers
(docs/benchmarks.md):

    python scripts/more_families.py OUTDIR [--models a,b,...] [--seed N]
    python scripts/compare_engines.py --kiln build/release/tools/kiln --models OUTDIR \
        --names densenet_mini,effnet_mini,shufflenet_mini,yolo_mini,unet_mini,regnet_mini,\
mobilenetv3_mini,res2net_mini,deeplab_mini,ghostnet_mini,repvgg_mini,xception_mini,hrnet_mini

Each model is written to OUTDIR/<name>.onnx, checked with onnx.checker (full_check) and run
with onnxruntime on a seeded uniform [-1, 1) input; the input and onnxruntime's output are
saved as OUTDIR/<name>.input.npy and OUTDIR/<name>.ort.npy (`kiln run --input` takes the
former).
"""

import math
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_models import GraphBuilder, RELU_GAIN  # noqa: E402
from family_common import (SILU_GAIN, avg_pool, classifier, i64, silu,  # noqa: E402
                           write_models)
from dense_prediction_families import (build_deeplab_mini, build_hrnet_mini,  # noqa: E402
                                       build_unet_mini, build_yolo_mini)

# ---- 1. DenseNet-121 style ----------------------------------------------------------------
def build_densenet_mini(g):
    x = g.conv("input", "/features/conv0", "features.conv0", 3, 64, 7, 2, 3)
    x = g.batch_norm(x, "/features/norm0", "features.norm0", 64)
    x = g.relu(x, "/features/relu0")
    x = g.max_pool(x, "/features/pool0", 3, 2, 1)
    c, growth, bn_size = 64, 32, 4

    def dense_block(x, c, bi):
        feats = [x]
        for li in range(4):
            s = f"/features/denseblock{bi}/denselayer{li + 1}"
            p = f"features.denseblock{bi}.denselayer{li + 1}"
            # torch: concated_features = torch.cat(inputs, 1) on each layer's input list
            h = feats[0] if len(feats) == 1 else g.node("Concat", feats, s, axis=1)
            h = g.batch_norm(h, f"{s}/norm1", f"{p}.norm1", c)
            h = g.relu(h, f"{s}/relu1")
            h = g.conv(h, f"{s}/conv1", f"{p}.conv1", c, bn_size * growth, 1)
            h = g.batch_norm(h, f"{s}/norm2", f"{p}.norm2", bn_size * growth)
            h = g.relu(h, f"{s}/relu2")
            h = g.conv(h, f"{s}/conv2", f"{p}.conv2", bn_size * growth, growth, 3, 1, 1)
            feats.append(h)
            c += growth
        return g.node("Concat", feats, f"/features/denseblock{bi}", axis=1), c

    x, c = dense_block(x, c, 1)
    s, p = "/features/transition1", "features.transition1"
    x = g.batch_norm(x, f"{s}/norm", f"{p}.norm", c)
    x = g.relu(x, f"{s}/relu")
    x = g.conv(x, f"{s}/conv", f"{p}.conv", c, c // 2, 1)
    c //= 2
    x = avg_pool(g, x, f"{s}/pool", 2, 2)
    x, c = dense_block(x, c, 2)
    x = g.batch_norm(x, "/features/norm5", "features.norm5", c)
    x = g.relu(x, "")
    x = classifier(g, x, c, "classifier", "/classifier")
    return x, {}


# ---- 2. EfficientNet-B0 style -------------------------------------------------------------
def build_effnet_mini(g):
    def cbs(x, s, p, cin, cout, k, stride, groups=1, act=True, gain=SILU_GAIN, gamma=(0.6, 1.2)):
        x = g.conv(x, f"{s}/{s.rsplit('/', 1)[-1]}.0", f"{p}.0", cin, cout, k, stride,
                   (k - 1) // 2, groups, gain=gain)
        x = g.batch_norm(x, f"{s}/{s.rsplit('/', 1)[-1]}.1", f"{p}.1", cout, gamma_range=gamma)
        return silu(g, x, f"{s}/{s.rsplit('/', 1)[-1]}.2") if act else x

    x = cbs("input", "/features/features.0", "features.0", 3, 32, 3, 2)
    # (expand ratio, kernel, stride, cin, cout)
    blocks = [(1, 3, 1, 32, 16), (6, 3, 2, 16, 24), (6, 3, 1, 24, 24), (6, 5, 2, 24, 40),
              (6, 5, 1, 40, 40)]
    for bi, (t, k, stride, cin, cout) in enumerate(blocks):
        fs, fp = f"/features/features.{bi + 1}/features.{bi + 1}.0", f"features.{bi + 1}.0"
        h, li, hid = x, 0, cin * t
        if t != 1:
            h = cbs(h, f"{fs}/block/block.{li}", f"{fp}.block.{li}", cin, hid, 1, 1)
            li += 1
        h = cbs(h, f"{fs}/block/block.{li}", f"{fp}.block.{li}", hid, hid, k, stride, groups=hid)
        li += 1
        # SqueezeExcitation(hid, max(1, cin // 4)): avgpool, fc1 (bias), SiLU, fc2 (bias), Sigmoid
        ss, sp = f"{fs}/block/block.{li}", f"{fp}.block.{li}"
        sq = max(1, cin // 4)
        gate = g.node("GlobalAveragePool", [h], f"{ss}/avgpool")
        gate = g.conv(gate, f"{ss}/fc1", f"{sp}.fc1", hid, sq, 1, bias=True, gain=SILU_GAIN)
        gate = silu(g, gate, f"{ss}/activation")
        gate = g.conv(gate, f"{ss}/fc2", f"{sp}.fc2", sq, hid, 1, bias=True, gain=1.0)
        gate = g.node("Sigmoid", [gate], f"{ss}/scale_activation")
        h = g.node("Mul", [gate, h], ss)
        li += 1
        use_res = stride == 1 and cin == cout
        h = cbs(h, f"{fs}/block/block.{li}", f"{fp}.block.{li}", hid, cout, 1, 1, act=False,
                gain=1.0, gamma=(0.2, 0.5) if use_res else (0.6, 1.2))
        x = g.node("Add", [h, x], fs) if use_res else h
    x = cbs(x, "/features/features.6", "features.6", 40, 320, 1, 1)
    x = g.node("GlobalAveragePool", [x], "/avgpool")
    x = g.node("Flatten", [x], "", axis=1)
    x = g.linear(x, "/classifier/classifier.1", "classifier.1", 320, 1000)
    return x, {}


# ---- 3. ShuffleNetV2 x1.0 style -----------------------------------------------------------
def build_shufflenet_mini(g):
    x = g.conv("input", "/conv1/conv1.0", "conv1.0", 3, 24, 3, 2, 1)
    x = g.batch_norm(x, "/conv1/conv1.1", "conv1.1", 24)
    x = g.relu(x, "/conv1/conv1.2")
    x = g.max_pool(x, "/maxpool", 3, 2, 1)
    c, hw = 24, 56

    def channel_shuffle(x, s, ch, hw):
        x = g.node("Reshape", [x, i64(g, s, [1, 2, ch // 2, hw, hw])], s)
        x = g.node("Transpose", [x], s, perm=[0, 2, 1, 3, 4])
        return g.node("Reshape", [x, i64(g, s, [1, ch, hw, hw])], s)

    def branch2(x, s, p, cin, bf, stride):
        h = g.conv(x, f"{s}/branch2/branch2.0", f"{p}.branch2.0", cin, bf, 1)
        h = g.batch_norm(h, f"{s}/branch2/branch2.1", f"{p}.branch2.1", bf)
        h = g.relu(h, f"{s}/branch2/branch2.2")
        h = g.conv(h, f"{s}/branch2/branch2.3", f"{p}.branch2.3", bf, bf, 3, stride, 1,
                   groups=bf, gain=1.0)
        h = g.batch_norm(h, f"{s}/branch2/branch2.4", f"{p}.branch2.4", bf)
        h = g.conv(h, f"{s}/branch2/branch2.5", f"{p}.branch2.5", bf, bf, 1)
        h = g.batch_norm(h, f"{s}/branch2/branch2.6", f"{p}.branch2.6", bf)
        return g.relu(h, f"{s}/branch2/branch2.7")

    for si, (cout, reps) in enumerate([(116, 4), (232, 8), (464, 4)]):
        for ui in range(reps):
            s, p = f"/stage{si + 2}/stage{si + 2}.{ui}", f"stage{si + 2}.{ui}"
            bf = cout // 2
            if ui == 0:  # stride 2: both branches downsample
                b1 = g.conv(x, f"{s}/branch1/branch1.0", f"{p}.branch1.0", c, c, 3, 2, 1,
                            groups=c, gain=1.0)
                b1 = g.batch_norm(b1, f"{s}/branch1/branch1.1", f"{p}.branch1.1", c)
                b1 = g.conv(b1, f"{s}/branch1/branch1.2", f"{p}.branch1.2", c, bf, 1)
                b1 = g.batch_norm(b1, f"{s}/branch1/branch1.3", f"{p}.branch1.3", bf)
                b1 = g.relu(b1, f"{s}/branch1/branch1.4")
                b2 = branch2(x, s, p, c, bf, 2)
                hw //= 2
            else:  # x1, x2 = x.chunk(2, dim=1)
                b1, x2 = g.node("Split", [x, i64(g, s, [bf, bf])], s, n_out=2, axis=1)
                b2 = branch2(x2, s, p, bf, bf, 1)
            x = g.node("Concat", [b1, b2], s, axis=1)
            x = channel_shuffle(x, s, cout, hw)
            c = cout
    x = g.conv(x, "/conv5/conv5.0", "conv5.0", c, 1024, 1)
    x = g.batch_norm(x, "/conv5/conv5.1", "conv5.1", 1024)
    x = g.relu(x, "/conv5/conv5.2")
    x = classifier(g, x, 1024)
    return x, {}


# ---- 6. RegNetX style ---------------------------------------------------------------------
def build_regnet_mini(g):
    x = g.conv("input", "/stem/stem.0", "stem.0", 3, 32, 3, 2, 1)
    x = g.batch_norm(x, "/stem/stem.1", "stem.1", 32)
    x = g.relu(x, "/stem/stem.2")
    c = 32
    # (width, depth, group width)
    for si, (w, d, gw) in enumerate([(32, 1, 8), (64, 2, 8), (160, 3, 16), (384, 2, 16)]):
        for bi in range(d):
            stride = 2 if bi == 0 else 1
            p = f"trunk_output.block{si + 1}.block{si + 1}-{bi}"
            s = "/" + "/".join(["trunk_output", f"trunk_output.block{si + 1}",
                                f"trunk_output.block{si + 1}.block{si + 1}-{bi}"])
            h = g.conv(x, f"{s}/f/a/a.0", f"{p}.f.a.0", c, w, 1)
            h = g.batch_norm(h, f"{s}/f/a/a.1", f"{p}.f.a.1", w)
            h = g.relu(h, f"{s}/f/a/a.2")
            h = g.conv(h, f"{s}/f/b/b.0", f"{p}.f.b.0", w, w, 3, stride, 1, groups=w // gw)
            h = g.batch_norm(h, f"{s}/f/b/b.1", f"{p}.f.b.1", w)
            h = g.relu(h, f"{s}/f/b/b.2")
            h = g.conv(h, f"{s}/f/c/c.0", f"{p}.f.c.0", w, w, 1, gain=1.0)
            h = g.batch_norm(h, f"{s}/f/c/c.1", f"{p}.f.c.1", w, gamma_range=(0.2, 0.5))
            sc = x
            if stride != 1 or c != w:
                sc = g.conv(x, f"{s}/proj/proj.0", f"{p}.proj.0", c, w, 1, stride, gain=1.0)
                sc = g.batch_norm(sc, f"{s}/proj/proj.1", f"{p}.proj.1", w)
            x = g.relu(g.node("Add", [sc, h], s), f"{s}/activation")
            c = w
    x = classifier(g, x, c)
    return x, {}


# ---- 7. MobileNetV3-Small style -------------------------------------------------------------
def build_mobilenetv3_mini(g):
    def hardswish(x, scope):
        # nn.Hardswish at opset 13: x * HardSigmoid(x, alpha=1/6, beta=0.5)
        return g.node("Mul", [x, g.node("HardSigmoid", [x], scope, alpha=1.0 / 6, beta=0.5)],
                      scope)

    def cba(x, s, p, cin, cout, k, stride, groups=1, act="HS", gain=SILU_GAIN,
            gamma=(0.6, 1.2)):
        x = g.conv(x, f"{s}/0", f"{p}.0", cin, cout, k, stride, (k - 1) // 2, groups, gain=gain)
        x = g.batch_norm(x, f"{s}/1", f"{p}.1", cout, gamma_range=gamma)
        if act == "HS":
            return hardswish(x, f"{s}/2")
        return g.relu(x, f"{s}/2") if act == "RE" else x

    x = cba("input", "/features/features.0", "features.0", 3, 16, 3, 2)
    # (kernel, expanded, out, squeeze-excitation, activation, stride), as torchvision's
    # mobilenet_v3_small, shortened
    blocks = [(3, 16, 16, True, "RE", 2), (3, 72, 24, False, "RE", 2), (3, 88, 24, False, "RE", 1),
              (5, 96, 40, True, "HS", 2), (5, 240, 40, True, "HS", 1)]
    cin = 16
    for bi, (k, hid, cout, se, act, stride) in enumerate(blocks):
        fs, fp = f"/features/features.{bi + 1}/block", f"features.{bi + 1}.block"
        h, li = x, 0
        if hid != cin:
            h = cba(h, f"{fs}/block.{li}", f"{fp}.{li}", cin, hid, 1, 1, act=act)
            li += 1
        h = cba(h, f"{fs}/block.{li}", f"{fp}.{li}", hid, hid, k, stride, groups=hid, act=act)
        li += 1
        if se:  # SqueezeExcitation(hid, make_divisible(hid // 4, 8)): ReLU, Hardsigmoid
            ss, sp = f"{fs}/block.{li}", f"{fp}.{li}"
            sq = max(8, (hid // 4 + 4) // 8 * 8)
            gate = g.node("GlobalAveragePool", [h], f"{ss}/avgpool")
            gate = g.conv(gate, f"{ss}/fc1", f"{sp}.fc1", hid, sq, 1, bias=True)
            gate = g.relu(gate, f"{ss}/activation")
            gate = g.conv(gate, f"{ss}/fc2", f"{sp}.fc2", sq, hid, 1, bias=True, gain=1.0)
            gate = g.node("HardSigmoid", [gate], f"{ss}/scale_activation", alpha=1.0 / 6, beta=0.5)
            h = g.node("Mul", [gate, h], ss)
            li += 1
        use_res = stride == 1 and cin == cout
        h = cba(h, f"{fs}/block.{li}", f"{fp}.{li}", hid, cout, 1, 1, act=None, gain=1.0,
                gamma=(0.2, 0.5) if use_res else (0.6, 1.2))
        x = g.node("Add", [h, x], f"/features/features.{bi + 1}") if use_res else h
        cin = cout
    x = cba(x, "/features/features.6", "features.6", cin, 240, 1, 1)
    x = g.node("GlobalAveragePool", [x], "/avgpool")
    x = g.node("Flatten", [x], "", axis=1)
    x = g.linear(x, "/classifier/classifier.0", "classifier.0", 240, 512)
    x = hardswish(x, "/classifier/classifier.1")
    x = g.linear(x, "/classifier/classifier.3", "classifier.3", 512, 1000)
    return x, {}


# ---- 8. Res2Net-50 (26w x 4s) style -----------------------------------------------------------
def build_res2net_mini(g):
    x = g.conv("input", "/conv1", "conv1", 3, 32, 3, 2, 1)                          # 64
    x = g.batch_norm(x, "/bn1", "bn1", 32)
    x = g.relu(x, "/act1")
    x = g.max_pool(x, "/maxpool", 3, 2, 1)                                          # 32
    c, scale = 32, 4

    def bottle2neck(x, p, cin, width, cout, stride):
        # timm Bottle2neck: 1x1 to width * scale, torch.split into `scale` groups; group i > 0
        # adds the previous group's output (except in a block's first, downsampling form, where
        # each group stands alone and the last one is average pooled), 3x3 + BN + ReLU per group
        s = "/" + "/".join(p.split(".")[:1] + [p])
        first = stride > 1 or cin != cout
        out = g.conv(x, f"{s}/conv1", f"{p}.conv1", cin, width * scale, 1)
        out = g.batch_norm(out, f"{s}/bn1", f"{p}.bn1", width * scale)
        out = g.relu(out, f"{s}/relu")
        spx = g.node("Split", [out, i64(g, s, [width] * scale)], s, n_out=scale, axis=1)
        spo, sp = [], None
        for i in range(scale - 1):
            sp = spx[i] if i == 0 or first else g.node("Add", [sp, spx[i]], s)
            sp = g.conv(sp, f"{s}/convs.{i}", f"{p}.convs.{i}", width, width, 3, stride, 1)
            sp = g.batch_norm(sp, f"{s}/bns.{i}", f"{p}.bns.{i}", width)
            sp = g.relu(sp, f"{s}/relu")
            spo.append(sp)
        last = spx[-1]
        if first:  # nn.AvgPool2d(3, stride, padding=1), count_include_pad=True
            last = g.node("AveragePool", [last], f"{s}/pool", ceil_mode=0, count_include_pad=1,
                          kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride])
        out = g.node("Concat", spo + [last], s, axis=1)
        out = g.conv(out, f"{s}/conv3", f"{p}.conv3", width * scale, cout, 1, gain=1.0)
        out = g.batch_norm(out, f"{s}/bn3", f"{p}.bn3", cout, gamma_range=(0.2, 0.5))
        sc = x
        if first:
            sc = g.conv(x, f"{s}/downsample/downsample.0", f"{p}.downsample.0", cin, cout, 1,
                        stride, gain=1.0)
            sc = g.batch_norm(sc, f"{s}/downsample/downsample.1", f"{p}.downsample.1", cout)
        return g.relu(g.node("Add", [out, sc], s), f"{s}/relu_1")

    # (width per group, out channels, blocks, stride)
    for li, (width, cout, n, stride) in enumerate([(8, 64, 2, 1), (16, 128, 2, 2),
                                                   (32, 256, 2, 2)]):
        for bi in range(n):
            x = bottle2neck(x, f"layer{li + 1}.{bi}", c, width, cout, stride if bi == 0 else 1)
            c = cout
    x = classifier(g, x, c)
    return x, dict(input_shape=(1, 3, 128, 128))


# ---- 10. GhostNet style --------------------------------------------------------------------
def build_ghostnet_mini(g):
    def ghost_module(x, s, p, cin, cout, relu, gamma=(0.6, 1.2)):
        # GhostModule(ratio=2, dw_size=3): primary 1x1 conv to ceil(cout / 2) channels, a cheap
        # depthwise 3x3 on its output, torch.cat, out[:, :cout] (exported even when a no-op)
        init = math.ceil(cout / 2)
        gain = RELU_GAIN if relu else 1.0
        x1 = g.conv(x, f"{s}/primary_conv/primary_conv.0", f"{p}.primary_conv.0", cin, init, 1,
                    gain=gain)
        x1 = g.batch_norm(x1, f"{s}/primary_conv/primary_conv.1", f"{p}.primary_conv.1", init,
                          gamma_range=gamma)
        if relu:
            x1 = g.relu(x1, f"{s}/primary_conv/primary_conv.2")
        x2 = g.conv(x1, f"{s}/cheap_operation/cheap_operation.0", f"{p}.cheap_operation.0", init,
                    init, 3, 1, 1, groups=init, gain=gain)
        x2 = g.batch_norm(x2, f"{s}/cheap_operation/cheap_operation.1",
                          f"{p}.cheap_operation.1", init, gamma_range=gamma)
        if relu:
            x2 = g.relu(x2, f"{s}/cheap_operation/cheap_operation.2")
        out = g.node("Concat", [x1, x2], s, axis=1)
        return g.node("Slice", [out, i64(g, s, [0]), i64(g, s, [cout]), i64(g, s, [1]),
                                i64(g, s, [1])], s)

    x = g.conv("input", "/conv_stem", "conv_stem", 3, 16, 3, 2, 1)                 # 64
    x = g.batch_norm(x, "/bn1", "bn1", 16)
    x = g.relu(x, "/act1")
    c = 16
    # (kernel, mid, out, se ratio, stride), ghostnet's cfgs shortened
    cfgs = [(3, 16, 16, 0, 1), (3, 48, 24, 0, 2), (3, 72, 24, 0, 1), (5, 72, 40, 0.25, 2),
            (5, 120, 40, 0.25, 1), (3, 240, 80, 0, 2), (3, 184, 80, 0.25, 1)]
    for bi, (k, mid, cout, se, stride) in enumerate(cfgs):
        s, p = f"/blocks/blocks.{bi}/blocks.{bi}.0", f"blocks.{bi}.0"
        use_res = c == cout and stride == 1
        h = ghost_module(x, f"{s}/ghost1", f"{p}.ghost1", c, mid, True)
        if stride > 1:
            h = g.conv(h, f"{s}/conv_dw", f"{p}.conv_dw", mid, mid, k, stride, (k - 1) // 2,
                       groups=mid, gain=1.0)
            h = g.batch_norm(h, f"{s}/bn_dw", f"{p}.bn_dw", mid)
        if se:  # SqueezeExcite: avg pool, conv_reduce (bias), ReLU, conv_expand (bias),
            #     hard_sigmoid gate (nn.Hardsigmoid), x * gate
            ss, sp = f"{s}/se", f"{p}.se"
            red = max(4, int(mid * se + 2) // 4 * 4)
            gate = g.node("GlobalAveragePool", [h], ss)
            gate = g.conv(gate, f"{ss}/conv_reduce", f"{sp}.conv_reduce", mid, red, 1, bias=True)
            gate = g.relu(gate, f"{ss}/act1")
            gate = g.conv(gate, f"{ss}/conv_expand", f"{sp}.conv_expand", red, mid, 1, bias=True,
                          gain=1.0)
            gate = g.node("HardSigmoid", [gate], f"{ss}/gate", alpha=1.0 / 6, beta=0.5)
            h = g.node("Mul", [h, gate], ss)
        h = ghost_module(h, f"{s}/ghost2", f"{p}.ghost2", mid, cout, False,
                         gamma=(0.2, 0.5) if use_res else (0.6, 1.2))
        sc = x
        if not use_res:
            sc = g.conv(x, f"{s}/shortcut/shortcut.0", f"{p}.shortcut.0", c, c, k, stride,
                        (k - 1) // 2, groups=c, gain=1.0)
            sc = g.batch_norm(sc, f"{s}/shortcut/shortcut.1", f"{p}.shortcut.1", c)
            sc = g.conv(sc, f"{s}/shortcut/shortcut.2", f"{p}.shortcut.2", c, cout, 1, gain=1.0)
            sc = g.batch_norm(sc, f"{s}/shortcut/shortcut.3", f"{p}.shortcut.3", cout)
        x = g.node("Add", [h, sc], s)
        c = cout
    x = g.conv(x, "/blocks/blocks.7/blocks.7.0/conv", "blocks.7.0.conv", c, 240, 1)
    x = g.batch_norm(x, "/blocks/blocks.7/blocks.7.0/bn1", "blocks.7.0.bn1", 240)
    x = g.relu(x, "/blocks/blocks.7/blocks.7.0/act1")
    x = g.node("GlobalAveragePool", [x], "/global_pool")
    x = g.conv(x, "/conv_head", "conv_head", 240, 640, 1, bias=True)
    x = g.relu(x, "/act2")
    x = g.node("Flatten", [x], "", axis=1)
    x = g.linear(x, "/classifier", "classifier", 640, 1000)
    return x, dict(input_shape=(1, 3, 128, 128))


# ---- 11. RepVGG-A style, training form ------------------------------------------------------
def build_repvgg_mini(g):
    def block(x, s, p, cin, cout, stride):
        # RepVGGBlock before reparameterization: rbr_dense (3x3 conv + BN) + rbr_1x1 (1x1 conv +
        # BN) [+ rbr_identity (BN) when shapes allow], summed, ReLU
        d = g.conv(x, f"{s}/rbr_dense/conv", f"{p}.rbr_dense.conv", cin, cout, 3, stride, 1,
                   gain=1.0)
        d = g.batch_norm(d, f"{s}/rbr_dense/bn", f"{p}.rbr_dense.bn", cout)
        o = g.conv(x, f"{s}/rbr_1x1/conv", f"{p}.rbr_1x1.conv", cin, cout, 1, stride, 0,
                   gain=1.0)
        o = g.batch_norm(o, f"{s}/rbr_1x1/bn", f"{p}.rbr_1x1.bn", cout)
        y = g.node("Add", [d, o], s)
        if cin == cout and stride == 1:
            i = g.batch_norm(x, f"{s}/rbr_identity", f"{p}.rbr_identity", cout,
                             gamma_range=(0.4, 0.8))
            y = g.node("Add", [y, i], s)
        return g.relu(y, f"{s}/nonlinearity")

    x = block("input", "/stage0", "stage0", 3, 32, 2)                               # 64
    c = 32
    for si, (cout, n) in enumerate([(48, 2), (96, 3), (192, 2)]):                   # 32, 16, 8
        for bi in range(n):
            x = block(x, f"/stage{si + 1}/stage{si + 1}.{bi}", f"stage{si + 1}.{bi}", c, cout,
                      2 if bi == 0 else 1)
            c = cout
    x = g.node("GlobalAveragePool", [x], "/gap")
    x = g.node("Flatten", [x], "", axis=1)
    x = g.linear(x, "/linear", "linear", c, 1000)
    return x, dict(input_shape=(1, 3, 128, 128))


# ---- 12. Xception entry flow ----------------------------------------------------------------
def build_xception_mini(g):
    def separable(x, s, p, cin, cout):
        # SeparableConv2d: depthwise 3x3 (pad 1) then pointwise 1x1, both without bias
        x = g.conv(x, f"{s}/conv1", f"{p}.conv1", cin, cin, 3, 1, 1, groups=cin, gain=1.0)
        return g.conv(x, f"{s}/pointwise", f"{p}.pointwise", cin, cout, 1, gain=1.0)

    def block(x, p, cin, cout, reps, stride, start_with_relu):
        # timm legacy Xception Block (grow_first): [ReLU, SeparableConv2d, BN] * reps (the first
        # ReLU dropped when not start_with_relu, not in place otherwise), MaxPool2d(3, stride, 1);
        # skip 1x1 stride conv + BN; x += skip
        s = "/" + p
        h, inc, ri = x, cin, 0
        for r in range(reps):
            if r > 0 or start_with_relu:
                h = g.relu(h, f"{s}/rep/rep.{ri}")
                ri += 1
            h = separable(h, f"{s}/rep/rep.{ri}", f"{p}.rep.{ri}", inc, cout)
            ri += 1
            h = g.batch_norm(h, f"{s}/rep/rep.{ri}", f"{p}.rep.{ri}", cout,
                             gamma_range=(0.4, 0.8))
            ri += 1
            inc = cout
        if stride != 1:
            h = g.max_pool(h, f"{s}/rep/rep.{ri}", 3, stride, 1)
        sc = g.conv(x, f"{s}/skip", f"{p}.skip", cin, cout, 1, stride, gain=1.0)
        sc = g.batch_norm(sc, f"{s}/skipbn", f"{p}.skipbn", cout, gamma_range=(0.4, 0.8))
        return g.node("Add", [h, sc], s)

    x = g.conv("input", "/conv1", "conv1", 3, 32, 3, 2, 0)                         # 63
    x = g.batch_norm(x, "/bn1", "bn1", 32)
    x = g.relu(x, "/act1")
    x = g.conv(x, "/conv2", "conv2", 32, 64, 3, 1, 0)                              # 61
    x = g.batch_norm(x, "/bn2", "bn2", 64)
    x = g.relu(x, "/act2")
    x = block(x, "block1", 64, 96, 2, 2, False)                                     # 31
    x = block(x, "block2", 96, 192, 2, 2, True)                                     # 16
    x = block(x, "block3", 192, 364, 2, 2, True)                                    # 8
    x = separable(x, "/conv3", "conv3", 364, 512)
    x = g.batch_norm(x, "/bn3", "bn3", 512)
    x = g.relu(x, "/act3")
    x = classifier(g, x, 512)
    return x, dict(input_shape=(1, 3, 128, 128))


BUILDERS = {
    "densenet_mini": build_densenet_mini,
    "effnet_mini": build_effnet_mini,
    "shufflenet_mini": build_shufflenet_mini,
    "yolo_mini": build_yolo_mini,
    "unet_mini": build_unet_mini,
    "regnet_mini": build_regnet_mini,
    "mobilenetv3_mini": build_mobilenetv3_mini,
    "res2net_mini": build_res2net_mini,
    "deeplab_mini": build_deeplab_mini,
    "ghostnet_mini": build_ghostnet_mini,
    "repvgg_mini": build_repvgg_mini,
    "xception_mini": build_xception_mini,
    "hrnet_mini": build_hrnet_mini,
}


def build(name, seed):
    g = GraphBuilder(np.random.default_rng([seed, zlib.crc32(name.encode())]))
    x, kw = BUILDERS[name](g)
    return g.finish(name, x, **kw)


def main(argv=None):
    return write_models(BUILDERS, build, argv, __doc__.split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
