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
from family_common import (SILU_GAIN, avg_pool, classifier, f32, i64,  # noqa: E402
                           interpolate_like, silu, upsample_nearest, write_models)

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


# ---- 4. YOLOv5/v8-like at 320x320 ---------------------------------------------------------
def build_yolo_mini(g):
    def cbs(x, p, cin, cout, k=1, stride=1, gamma=(0.6, 1.2)):
        s = "/" + p.replace(".", "/")
        x = g.conv(x, f"{s}/conv", f"{p}.conv", cin, cout, k, stride, k // 2, gain=SILU_GAIN)
        x = g.batch_norm(x, f"{s}/bn", f"{p}.bn", cout, eps=1e-3, gamma_range=gamma)
        return silu(g, x, f"{s}/act")

    def c2f(x, p, cin, cout, n, shortcut):
        s, c = "/" + p.replace(".", "/"), cout // 2
        y = cbs(x, f"{p}.cv1", cin, 2 * c)
        ys = list(g.node("Split", [y, i64(g, s, [c, c])], s, n_out=2, axis=1))
        for i in range(n):
            bp = f"{p}.m.{i}"
            h = cbs(ys[-1], f"{bp}.cv1", c, c, 3)
            h = cbs(h, f"{bp}.cv2", c, c, 3, gamma=(0.2, 0.5) if shortcut else (0.6, 1.2))
            ys.append(g.node("Add", [ys[-1], h], "/" + bp.replace(".", "/")) if shortcut else h)
        return cbs(g.node("Concat", ys, s, axis=1), f"{p}.cv2", (2 + n) * c, cout)

    def sppf(x, p, cin, cout):
        s, c = "/" + p.replace(".", "/"), cin // 2
        x = cbs(x, f"{p}.cv1", cin, c)
        ys = [x]
        for i in range(3):
            ys.append(g.node("MaxPool", [ys[-1]], f"{s}/m", ceil_mode=0, dilations=[1, 1],
                             kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1]))
        return cbs(g.node("Concat", ys, s, axis=1), f"{p}.cv2", 4 * c, cout)

    def upsample(x, p):
        s = "/" + p.replace(".", "/")
        roi = f32(g, s, np.zeros((0,), np.float32))
        scales = f32(g, s, [1.0, 1.0, 2.0, 2.0])
        return g.node("Resize", [x, roi, scales], s, coordinate_transformation_mode="asymmetric",
                      cubic_coeff_a=-0.75, mode="nearest", nearest_mode="floor")

    x = cbs("input", "model.0", 3, 16, 3, 2)          # 160
    x = cbs(x, "model.1", 16, 32, 3, 2)               # 80
    x = c2f(x, "model.2", 32, 32, 1, True)
    x = cbs(x, "model.3", 32, 64, 3, 2)               # 40
    p3 = c2f(x, "model.4", 64, 64, 2, True)
    x = cbs(p3, "model.5", 64, 128, 3, 2)             # 20
    p4 = c2f(x, "model.6", 128, 128, 2, True)
    x = cbs(p4, "model.7", 128, 256, 3, 2)            # 10
    x = c2f(x, "model.8", 256, 256, 1, True)
    x = sppf(x, "model.9", 256, 256)
    x = upsample(x, "model.10")                        # 20
    x = g.node("Concat", [x, p4], "/model.11", axis=1)
    x = c2f(x, "model.12", 384, 128, 1, False)
    x = upsample(x, "model.13")                        # 40
    x = g.node("Concat", [x, p3], "/model.14", axis=1)
    x = c2f(x, "model.15", 192, 64, 1, False)
    x = g.conv(x, "/model.16/conv", "model.16.conv", 64, 85, 1, bias=True, gain=1.0)
    x = g.node("Sigmoid", [x], "/model.16")
    return x, dict(output_name="output", input_shape=(1, 3, 320, 320),
                   output_shape=(1, 85, 40, 40))


# ---- 5. U-Net ------------------------------------------------------------------------------
def build_unet_mini(g):
    def double_conv(x, p, cin, cout):
        s = "/" + p.replace(".", "/")
        for i, (a, b) in enumerate([(cin, cout), (cout, cout)]):
            x = g.conv(x, f"{s}/double_conv/double_conv.{3 * i}", f"{p}.double_conv.{3 * i}",
                       a, b, 3, 1, 1)
            x = g.batch_norm(x, f"{s}/double_conv/double_conv.{3 * i + 1}",
                             f"{p}.double_conv.{3 * i + 1}", b)
            x = g.relu(x, f"{s}/double_conv/double_conv.{3 * i + 2}")
        return x

    def up(x, skip, p, cin, cout):
        s = "/" + p.replace(".", "/")
        # nn.ConvTranspose2d(cin, cin // 2, 2, stride=2): weight [cin, cout, 2, 2], bias
        half = cin // 2
        bound = math.sqrt(3.0 / (cin))  # ~unit gain: each output sees cin inputs once
        w = g.init(f"{p}.up.weight", g.uniform((cin, half, 2, 2), -bound, bound))
        b = g.init(f"{p}.up.bias", g.uniform((half,), -0.1, 0.1))
        x = g.node("ConvTranspose", [x, w, b], f"{s}/up", dilations=[1, 1], group=1,
                   kernel_shape=[2, 2], pads=[0, 0, 0, 0], strides=[2, 2])
        x = g.node("Concat", [skip, x], s, axis=1)
        return double_conv(x, f"{p}.conv", 2 * half, cout)

    e1 = double_conv("input", "inc", 3, 16)                                    # 256
    e2 = double_conv(g.max_pool(e1, "/down1/pool", 2, 2, 0), "down1.conv", 16, 32)  # 128
    e3 = double_conv(g.max_pool(e2, "/down2/pool", 2, 2, 0), "down2.conv", 32, 64)  # 64
    x = up(e3, e2, "up1", 64, 32)                                              # 128
    x = up(x, e1, "up2", 32, 16)                                               # 256
    x = g.conv(x, "/outc/conv", "outc.conv", 16, 2, 1, bias=True, gain=1.0)
    return x, dict(output_name="output", input_shape=(1, 3, 256, 256),
                   output_shape=(1, 2, 256, 256))


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


# ---- 9. DeepLabV3 style (dilated backbone, ASPP head) ---------------------------------------
def build_deeplab_mini(g):
    def cbr(x, s, p, cin, cout, k, stride=1, dilation=1):
        # Sequential(Conv2d(padding=dilation * (k // 2), dilation), BatchNorm2d, ReLU)
        x = g.conv(x, f"{s}/{s.rsplit('/', 1)[-1]}.0", f"{p}.0", cin, cout, k, stride,
                   dilation * (k // 2), dilation=dilation)
        x = g.batch_norm(x, f"{s}/{s.rsplit('/', 1)[-1]}.1", f"{p}.1", cout)
        return g.relu(x, f"{s}/{s.rsplit('/', 1)[-1]}.2")

    x = cbr("input", "/backbone/stem/stem.0", "backbone.stem.0", 3, 16, 3, 2)      # 64
    x = cbr(x, "/backbone/stem/stem.1", "backbone.stem.1", 16, 32, 3, 2)            # 32
    x = cbr(x, "/backbone/stem/stem.2", "backbone.stem.2", 32, 64, 3, 2)            # 16
    c = 64
    # dilated basic blocks (resnet's replace_stride_with_dilation): stride 1, dilation 2 then 4
    for li, (cout, d) in enumerate([(96, 2), (96, 4)]):
        p = f"backbone.layer{li + 3}.0"
        s = "/" + "/".join(["backbone", f"backbone.layer{li + 3}", p])
        h = g.conv(x, f"{s}/conv1", f"{p}.conv1", c, cout, 3, 1, d, dilation=d)
        h = g.batch_norm(h, f"{s}/bn1", f"{p}.bn1", cout)
        h = g.relu(h, f"{s}/relu")
        h = g.conv(h, f"{s}/conv2", f"{p}.conv2", cout, cout, 3, 1, d, dilation=d)
        h = g.batch_norm(h, f"{s}/bn2", f"{p}.bn2", cout, gamma_range=(0.2, 0.5))
        sc = x
        if c != cout:
            sc = g.conv(x, f"{s}/downsample/downsample.0", f"{p}.downsample.0", c, cout, 1,
                        gain=1.0)
            sc = g.batch_norm(sc, f"{s}/downsample/downsample.1", f"{p}.downsample.1", cout)
        x = g.relu(g.node("Add", [h, sc], s), f"{s}/relu_1")
        c = cout
    feat = x
    # torchvision ASPP(c, [2, 4, 6], out_channels=64)
    a, ap, ac = "/classifier/classifier.0", "classifier.0", 64
    branches = [cbr(feat, f"{a}/convs/convs.0", f"{ap}.convs.0", c, ac, 1)]
    for i, rate in enumerate([2, 4, 6]):
        branches.append(cbr(feat, f"{a}/convs/convs.{i + 1}", f"{ap}.convs.{i + 1}", c, ac, 3,
                            dilation=rate))
    # ASPPPooling: AdaptiveAvgPool2d(1), 1x1 conv, BN, ReLU, F.interpolate(size=x.shape[-2:])
    ps, pp = f"{a}/convs/convs.4", f"{ap}.convs.4"
    pooled = g.node("GlobalAveragePool", [feat], f"{ps}/convs.4.0")
    pooled = g.conv(pooled, f"{ps}/convs.4.1", f"{pp}.1", c, ac, 1)
    pooled = g.batch_norm(pooled, f"{ps}/convs.4.2", f"{pp}.2", ac)
    pooled = g.relu(pooled, f"{ps}/convs.4.3")
    branches.append(interpolate_like(g, pooled, feat, ps))
    x = g.node("Concat", branches, a, axis=1)
    x = cbr(x, f"{a}/project/project.0", f"{ap}.project.0", 5 * ac, ac, 1)  # Dropout: eval
    # DeepLabHead's 3x3 conv + BN + ReLU, then the 1x1 classifier conv (bias)
    x = g.conv(x, "/classifier/classifier.1", "classifier.1", ac, ac, 3, 1, 1)
    x = g.batch_norm(x, "/classifier/classifier.2", "classifier.2", ac)
    x = g.relu(x, "/classifier/classifier.3")
    x = g.conv(x, "/classifier/classifier.4", "classifier.4", ac, 21, 1, bias=True, gain=1.0)
    # _SimpleSegmentationModel: F.interpolate(x, size=input.shape[-2:], bilinear), 16 -> 128
    x = interpolate_like(g, x, "input", "")
    return x, dict(output_name="out", input_shape=(1, 3, 128, 128),
                   output_shape=(1, 21, 128, 128))


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


# ---- 13. HRNet style, two branches ----------------------------------------------------------
def build_hrnet_mini(g):
    def conv_bn_relu(x, s, p, cin, cout, stride):  # Sequential(Conv2d 3x3, BatchNorm2d, ReLU)
        last = s.rsplit("/", 1)[-1]
        x = g.conv(x, f"{s}/{last}.0", f"{p}.0", cin, cout, 3, stride, 1)
        x = g.batch_norm(x, f"{s}/{last}.1", f"{p}.1", cout)
        return g.relu(x, f"{s}/{last}.2")

    def basic_block(x, s, p, c):
        h = g.conv(x, f"{s}/conv1", f"{p}.conv1", c, c, 3, 1, 1)
        h = g.batch_norm(h, f"{s}/bn1", f"{p}.bn1", c)
        h = g.relu(h, f"{s}/relu")
        h = g.conv(h, f"{s}/conv2", f"{p}.conv2", c, c, 3, 1, 1, gain=1.0)
        h = g.batch_norm(h, f"{s}/bn2", f"{p}.bn2", c, gamma_range=(0.2, 0.5))
        return g.relu(g.node("Add", [h, x], s), f"{s}/relu_1")

    x = g.conv("input", "/conv1", "conv1", 3, 32, 3, 2, 1)                         # 64
    x = g.batch_norm(x, "/bn1", "bn1", 32)
    x = g.relu(x, "/relu")
    x = g.conv(x, "/conv2", "conv2", 32, 32, 3, 2, 1)                              # 32
    x = g.batch_norm(x, "/bn2", "bn2", 32)
    x = g.relu(x, "/relu_1")
    ch = (16, 32)
    # transition1: branch 0 3x3 at full resolution, branch 1 3x3 stride 2
    xs = [conv_bn_relu(x, "/transition1/transition1.0", "transition1.0", 32, ch[0], 1),  # 32
          conv_bn_relu(x, "/transition1/transition1.1/transition1.1.0", "transition1.1.0", 32,
                       ch[1], 2)]                                                   # 16
    for mi in range(2):  # two HighResolutionModules, one BasicBlock per branch, then the fuse
        m = f"stage2.{mi}"
        ms = f"/stage2/{m}"
        xs = [basic_block(xs[b], f"{ms}/branches/branches.{b}/branches.{b}.0",
                          f"{m}.branches.{b}.0", ch[b]) for b in range(2)]
        # fuse_layers[0][1]: 1x1 conv + BN + nn.Upsample(scale_factor=2, mode="nearest")
        fs, fp = f"{ms}/fuse_layers.0/fuse_layers.0.1", f"{m}.fuse_layers.0.1"
        up = g.conv(xs[1], f"{fs}/fuse_layers.0.1.0", f"{fp}.0", ch[1], ch[0], 1, gain=1.0)
        up = g.batch_norm(up, f"{fs}/fuse_layers.0.1.1", f"{fp}.1", ch[0], gamma_range=(0.4, 0.8))
        up = upsample_nearest(g, up, f"{fs}/fuse_layers.0.1.2")
        y0 = g.relu(g.node("Add", [xs[0], up], ms), f"{ms}/relu")
        # fuse_layers[1][0]: 3x3 stride-2 conv + BN
        fs, fp = f"{ms}/fuse_layers.1/fuse_layers.1.0/fuse_layers.1.0.0", f"{m}.fuse_layers.1.0.0"
        dn = g.conv(xs[0], f"{fs}/fuse_layers.1.0.0.0", f"{fp}.0", ch[0], ch[1], 3, 2, 1,
                    gain=1.0)
        dn = g.batch_norm(dn, f"{fs}/fuse_layers.1.0.0.1", f"{fp}.1", ch[1],
                          gamma_range=(0.4, 0.8))
        y1 = g.relu(g.node("Add", [dn, xs[1]], ms), f"{ms}/relu_1")
        xs = [y0, y1]
    # HRNetV2 head: the low branch F.interpolate'd (bilinear) to the high one's size, torch.cat,
    # last_layer 1x1 conv (bias) + BN + ReLU, 1x1 conv to the classes (bias)
    low = interpolate_like(g, xs[1], xs[0], "")
    x = g.node("Concat", [xs[0], low], "", axis=1)
    c = ch[0] + ch[1]
    x = g.conv(x, "/last_layer/last_layer.0", "last_layer.0", c, c, 1, bias=True)
    x = g.batch_norm(x, "/last_layer/last_layer.1", "last_layer.1", c)
    x = g.relu(x, "/last_layer/last_layer.2")
    x = g.conv(x, "/last_layer/last_layer.3", "last_layer.3", c, 19, 1, bias=True, gain=1.0)
    return x, dict(output_name="output", input_shape=(1, 3, 128, 128),
                   output_shape=(1, 19, 32, 32))


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
