#!/usr/bin/env python3
"""Eight more small ONNX models of CNN families outside the zoo and outside more_families.py
(VoVNet with eSE, ResNeSt split attention, EfficientNetV2's Fused-MBConv, CenterNet's
ConvTranspose decoder and three heads, an EfficientDet BiFPN with its shared heads, VGG-11,
MobileViT, SKNet): opset 13, float32, batch 1, random seeded weights, BatchNorms unfolded, in
the form torch.onnx (timm / torchvision / the reference repositories) exports them, built with
make_models.GraphBuilder and the helpers of family_common.py.
Not part of the tests: like more_families.py they are for checking Kiln on families it was not
tuned on, and for benchmarking it against the peers:

    python scripts/families_b.py OUTDIR [--models a,b,...] [--seed N]
    python scripts/compare_engines.py --kiln build/release/tools/kiln --models OUTDIR \
        --names vovnet_mini,resnest_mini,effnetv2_mini,centernet_mini,bifpn_mini,vgg_mini,\
mobilevit_mini,sknet_mini

Each model is written to OUTDIR/<name>.onnx, checked with onnx.checker (full_check) and run
with onnxruntime on a seeded uniform [-1, 1) input; the input and onnxruntime's (first) output
are saved as OUTDIR/<name>.input.npy and OUTDIR/<name>.ort.npy. centernet_mini and bifpn_mini
have several graph outputs: each is also saved as OUTDIR/<name>.ort.<output name>.npy (the
output name with characters outside [A-Za-z0-9._-] replaced by '_', as `kiln run` names its
files).
"""

import math
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_models import RELU_GAIN, GraphBuilder  # noqa: E402
from make_models import _basic_block as basic_block  # noqa: E402
from family_common import (SILU_GAIN, classifier, f32, finish_multi, gelu,  # noqa: E402
                           hard_sigmoid, i64, layer_norm, linear_nd, shape_dims, silu,
                           traced_shape, upsample_nearest, write_models)


# ---- a. VoVNet (timm ese_vovnet19b_slim-like, eSE attention) ------------------------------
def build_vovnet_mini(g):
    def cbr(x, s, p, cin, cout, k, stride=1):  # timm ConvNormAct: conv, bn, ReLU
        x = g.conv(x, f"{s}/conv", f"{p}.conv", cin, cout, k, stride, (k - 1) // 2)
        x = g.batch_norm(x, f"{s}/bn", f"{p}.bn", cout)
        return g.relu(x, f"{s}/bn/act")

    def osa_block(x, s, p, cin, mid, cout, layers, residual):
        # OsaBlock: [x] + each 3x3 conv's output, torch.cat, 1x1 conv_concat, eSE, (+ x)
        outs, h, c = [x], x, cin
        for i in range(layers):
            h = cbr(h, f"{s}/conv_mid/conv_mid.{i}", f"{p}.conv_mid.{i}", c, mid, 3)
            outs.append(h)
            c = mid
        h = g.node("Concat", outs, s, axis=1)
        h = cbr(h, f"{s}/conv_concat", f"{p}.conv_concat", cin + layers * mid, cout, 1)
        # EffectiveSEModule: x * hard_sigmoid(fc(avgpool(x))), fc a 1x1 conv with bias
        gate = g.node("GlobalAveragePool", [h], f"{s}/attn")
        gate = g.conv(gate, f"{s}/attn/fc", f"{p}.attn.fc", cout, cout, 1, bias=True, gain=1.0)
        gate = hard_sigmoid(g, gate, f"{s}/attn/gate")
        h = g.node("Mul", [h, gate], f"{s}/attn")
        return g.node("Add", [h, x], s) if residual else h

    x = cbr("input", "/stem/stem.0", "stem.0", 3, 32, 3, 2)                         # 56
    x = cbr(x, "/stem/stem.1", "stem.1", 32, 32, 3, 1)
    x = cbr(x, "/stem/stem.2", "stem.2", 32, 64, 3, 2)                              # 28
    c = 64
    # (mid, out, blocks); stages 2 and 3 start with MaxPool2d(3, 2, ceil_mode=True)
    for si, (mid, cout, n) in enumerate([(32, 64, 1), (48, 112, 2), (64, 160, 1)]):
        ss, sp = f"/stages/stages.{si}", f"stages.{si}"
        if si > 0:                                                                  # 14, 7
            x = g.max_pool(x, f"{ss}/pool", 3, 2, 0, ceil_mode=1)
        for bi in range(n):
            x = osa_block(x, f"{ss}/blocks/blocks.{bi}", f"{sp}.blocks.{bi}", c, mid, cout, 3,
                          residual=bi > 0)
            c = cout
    x = classifier(g, x, c, "head.fc", "/head/fc")
    return x, dict(input_shape=(1, 3, 112, 112))


# ---- b. ResNeSt (timm resnest14d-like: radix 2, deep stem, avd, avg_down) -------------------
def build_resnest_mini(g):
    def split_attn(x, s, p, cin, cout, groups, radix=2):
        # timm SplitAttn: grouped 3x3 to cout * radix (groups * radix groups), bn0, ReLU;
        # x.reshape(B, radix, RC // radix, H, W), sum over the radix, mean((2, 3), keepdim),
        # fc1 (bias, groups) + bn1 + ReLU, fc2 (bias, groups), RadixSoftmax, weighted sum
        mid = cout * radix
        attn = max(32, int(cin * radix * 0.25 + 4) // 8 * 8)
        x = g.conv(x, f"{s}/conv", f"{p}.conv", cin, mid, 3, 1, 1, groups=groups * radix)
        x = g.batch_norm(x, f"{s}/bn0", f"{p}.bn0", mid)
        x = g.relu(x, f"{s}/act0")
        B, RC, H, W = shape_dims(g, x, s, [0, 1, 2, 3])
        rc = g.node("Div", [RC, i64(g, s, radix)], s)
        x5 = g.node("Reshape", [x, traced_shape(g, s, [B, radix, rc, H, W])], s)
        gap = g.node("ReduceSum", [x5, i64(g, s, [1])], s, keepdims=0)
        gap = g.node("ReduceMean", [gap], s, axes=[2, 3], keepdims=1)
        gap = g.conv(gap, f"{s}/fc1", f"{p}.fc1", cout, attn, 1, groups=groups, bias=True)
        gap = g.batch_norm(gap, f"{s}/bn1", f"{p}.bn1", attn)
        gap = g.relu(gap, f"{s}/act1")
        a = g.conv(gap, f"{s}/fc2", f"{p}.fc2", attn, mid, 1, groups=groups, bias=True, gain=1.0)
        # RadixSoftmax: x.view(batch, cardinality, radix, -1).transpose(1, 2), softmax(dim=1),
        # reshape(batch, -1); then .view(B, -1, 1, 1)
        rs = f"{s}/rsoftmax"
        (batch,) = shape_dims(g, a, rs, [0])
        a = g.node("Reshape", [a, traced_shape(g, rs, [batch, groups, radix, -1])], rs)
        a = g.node("Transpose", [a], rs, perm=[0, 2, 1, 3])
        a = g.node("Softmax", [a], rs, axis=1)
        a = g.node("Reshape", [a, traced_shape(g, rs, [batch, -1])], rs)
        a = g.node("Reshape", [a, traced_shape(g, s, [B, -1, 1, 1])], s)
        a = g.node("Reshape", [a, traced_shape(g, s, [B, radix, rc, 1, 1])], s)
        out = g.node("Mul", [x5, a], s)
        return g.node("ReduceSum", [out, i64(g, s, [1])], s, keepdims=0)

    def bottleneck(x, p, cin, planes, stride, groups):
        s = "/" + "/".join(p.split(".")[:1] + [p])
        gw, cout = planes * groups, planes * 4
        h = g.conv(x, f"{s}/conv1", f"{p}.conv1", cin, gw, 1)
        h = g.batch_norm(h, f"{s}/bn1", f"{p}.bn1", gw)
        h = g.relu(h, f"{s}/act1")
        h = split_attn(h, f"{s}/conv2", f"{p}.conv2", gw, gw, groups)
        if stride > 1:  # avd_last: AvgPool2d(3, stride, padding=1)
            h = g.node("AveragePool", [h], f"{s}/avd_last", ceil_mode=0, count_include_pad=1,
                       kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride])
        h = g.conv(h, f"{s}/conv3", f"{p}.conv3", gw, cout, 1, gain=1.0)
        h = g.batch_norm(h, f"{s}/bn3", f"{p}.bn3", cout, gamma_range=(0.2, 0.5))
        sc = x
        if stride > 1 or cin != cout:  # avg_down: AvgPool2d(2, 2, ceil_mode, no pad count)
            if stride > 1:
                sc = g.node("AveragePool", [sc], f"{s}/downsample/downsample.0", ceil_mode=1,
                            count_include_pad=0, kernel_shape=[2, 2], pads=[0, 0, 0, 0],
                            strides=[2, 2])
            sc = g.conv(sc, f"{s}/downsample/downsample.1", f"{p}.downsample.1", cin, cout, 1,
                        gain=1.0)
            sc = g.batch_norm(sc, f"{s}/downsample/downsample.2", f"{p}.downsample.2", cout)
        return g.relu(g.node("Add", [h, sc], s), f"{s}/act3")

    x = "input"
    for i, (a, b) in enumerate([(3, 16), (16, 16), (16, 32)]):                     # deep stem
        x = g.conv(x, f"/conv1/conv1.{3 * i}", f"conv1.{3 * i}", a, b, 3, 2 if i == 0 else 1, 1)
        x = g.batch_norm(x, f"/conv1/conv1.{3 * i + 1}" if i < 2 else "/bn1",
                         f"conv1.{3 * i + 1}" if i < 2 else "bn1", b)
        x = g.relu(x, f"/conv1/conv1.{3 * i + 2}" if i < 2 else "/act1")            # 56
    x = g.max_pool(x, "/maxpool", 3, 2, 1)                                          # 28
    c = 32
    # (planes, stride, cardinality)
    for li, (planes, stride, groups) in enumerate([(16, 1, 1), (32, 2, 2), (64, 2, 1)]):
        x = bottleneck(x, f"layer{li + 1}.0", c, planes, stride, groups)
        c = planes * 4
    x = classifier(g, x, c)
    return x, dict(input_shape=(1, 3, 112, 112))


# ---- c. EfficientNetV2 (torchvision efficientnet_v2_s-like, shortened) ---------------------
def build_effnetv2_mini(g):
    def cbs(x, s, p, cin, cout, k, stride=1, groups=1, act=True, gamma=(0.6, 1.2)):
        last = s.rsplit("/", 1)[-1]
        x = g.conv(x, f"{s}/{last}.0", f"{p}.0", cin, cout, k, stride, (k - 1) // 2, groups,
                   gain=SILU_GAIN if act else 1.0)
        x = g.batch_norm(x, f"{s}/{last}.1", f"{p}.1", cout, eps=1e-3, gamma_range=gamma)
        return silu(g, x, f"{s}/{last}.2") if act else x

    x = cbs("input", "/features/features.0", "features.0", 3, 24, 3, 2)             # 64
    c = 24
    # (kind, expand, stride, out, layers); kind F = FusedMBConv, M = MBConv with SE
    cfg = [("F", 1, 1, 24, 1), ("F", 4, 2, 32, 2), ("F", 4, 2, 48, 1), ("M", 4, 2, 64, 2),
           ("M", 6, 1, 96, 1)]
    for si, (kind, t, stride, cout, n) in enumerate(cfg):
        for bi in range(n):
            st = stride if bi == 0 else 1
            fs = f"/features/features.{si + 1}/features.{si + 1}.{bi}/block"
            fp = f"features.{si + 1}.{bi}.block"
            use_res = st == 1 and c == cout
            gres = (0.2, 0.5) if use_res else (0.6, 1.2)
            hid = c * t
            if kind == "F":
                if t == 1:  # a single 3x3 conv + BN + SiLU
                    h = cbs(x, f"{fs}/block.0", f"{fp}.0", c, cout, 3, st, gamma=gres)
                else:      # 3x3 expand conv + BN + SiLU, 1x1 project conv + BN
                    h = cbs(x, f"{fs}/block.0", f"{fp}.0", c, hid, 3, st)
                    h = cbs(h, f"{fs}/block.1", f"{fp}.1", hid, cout, 1, act=False, gamma=gres)
            else:
                h = cbs(x, f"{fs}/block.0", f"{fp}.0", c, hid, 1)
                h = cbs(h, f"{fs}/block.1", f"{fp}.1", hid, hid, 3, st, groups=hid)
                ss, sp = f"{fs}/block.2", f"{fp}.2"  # SqueezeExcitation(hid, c // 4, SiLU)
                sq = max(1, c // 4)
                gate = g.node("GlobalAveragePool", [h], f"{ss}/avgpool")
                gate = g.conv(gate, f"{ss}/fc1", f"{sp}.fc1", hid, sq, 1, bias=True,
                              gain=SILU_GAIN)
                gate = silu(g, gate, f"{ss}/activation")
                gate = g.conv(gate, f"{ss}/fc2", f"{sp}.fc2", sq, hid, 1, bias=True, gain=1.0)
                gate = g.node("Sigmoid", [gate], f"{ss}/scale_activation")
                h = g.node("Mul", [gate, h], ss)
                h = cbs(h, f"{fs}/block.3", f"{fp}.3", hid, cout, 1, act=False, gamma=gres)
            # StochasticDepth is the identity at inference
            x = g.node("Add", [h, x], fs.rsplit("/", 1)[0]) if use_res else h
            c = cout
    x = cbs(x, "/features/features.6", "features.6", c, 320, 1)
    x = g.node("GlobalAveragePool", [x], "/avgpool")
    x = g.node("Flatten", [x], "", axis=1)
    x = g.linear(x, "/classifier/classifier.1", "classifier.1", 320, 1000)
    return x, dict(input_shape=(1, 3, 128, 128))


# ---- d. CenterNet (msra_resnet-like: ResNet backbone, 3 deconvs, three heads) ---------------
def build_centernet_mini(g):
    x = g.conv("input", "/conv1", "conv1", 3, 32, 7, 2, 3)                          # 64
    x = g.batch_norm(x, "/bn1", "bn1", 32)
    x = g.relu(x, "/relu")
    x = g.max_pool(x, "/maxpool", 3, 2, 1)                                          # 32
    c = 32
    for li, (cout, stride) in enumerate([(32, 1), (64, 2), (96, 2), (128, 2)]):     # 32..4
        x, _ = basic_block(g, x, f"layer{li + 1}.0", c, cout, stride)  # torchvision's
        c = cout
    # deconv_layers: 3 x (ConvTranspose2d(c, 64, 4, stride 2, padding 1, bias=False), BN, ReLU)
    for i in range(3):                                                              # 8, 16, 32
        s, p = "/deconv_layers", f"deconv_layers.{3 * i}"
        bound = RELU_GAIN * math.sqrt(3.0 / (c * 4))  # each output sees c * 4 taps
        w = g.init(f"{p}.weight", g.uniform((c, 64, 4, 4), -bound, bound))
        x = g.node("ConvTranspose", [x, w], f"{s}/deconv_layers.{3 * i}", dilations=[1, 1],
                   group=1, kernel_shape=[4, 4], output_padding=[0, 0], pads=[1, 1, 1, 1],
                   strides=[2, 2])
        x = g.batch_norm(x, f"{s}/deconv_layers.{3 * i + 1}", f"deconv_layers.{3 * i + 1}", 64)
        x = g.relu(x, f"{s}/deconv_layers.{3 * i + 2}")
        c = 64
    outs = []
    for head, classes in [("hm", 20), ("wh", 2), ("reg", 2)]:
        h = g.conv(x, f"/{head}/{head}.0", f"{head}.0", c, 32, 3, 1, 1, bias=True)
        h = g.relu(h, f"/{head}/{head}.1")
        h = g.conv(h, f"/{head}/{head}.2", f"{head}.2", 32, classes, 1, bias=True, gain=1.0)
        if head == "hm":
            h = g.node("Sigmoid", [h], "")
        outs.append((h, head))
    return outs, dict(input_shape=(1, 3, 128, 128))


# ---- e. EfficientDet BiFPN (Yet-Another-EfficientDet-Pytorch-like, 3 levels) -----------------
def build_bifpn_mini(g):
    W, ANCHORS, CLASSES = 48, 3, 8

    def same_pad(x, s, k, stride, h):
        # Conv2dStaticSamePadding / MaxPool2dStaticSamePadding: F.pad(x, [l, r, t, b])
        extra = max((math.ceil(h / stride) - 1) * stride - h + k, 0)
        lo, hi = extra // 2, extra - extra // 2
        if extra == 0:
            return x
        return g.node("Pad", [x, i64(g, s, [0, 0, lo, lo, 0, 0, hi, hi]), f32(g, s, 0.0)], s,
                      mode="constant")

    def sep_weights(p, cin, cout, bias):
        b = math.sqrt(3.0 / 9)
        dw = g.init(f"{p}.depthwise_conv.conv.weight", g.uniform((cin, 1, 3, 3), -b, b))
        b = math.sqrt(3.0 / cin)
        pw = [g.init(f"{p}.pointwise_conv.conv.weight", g.uniform((cout, cin, 1, 1), -b, b))]
        if bias:
            pw.append(g.init(f"{p}.pointwise_conv.conv.bias", g.uniform((cout,), -0.1, 0.1)))
        return dw, pw

    def sep_conv(x, s, weights, cin, h):
        # SeparableConvBlock's convs: depthwise 3x3 (same padding, no bias), pointwise 1x1
        dw, pw = weights
        x = same_pad(x, f"{s}/depthwise_conv", 3, 1, h)
        x = g.node("Conv", [x, dw], f"{s}/depthwise_conv/conv", dilations=[1, 1], group=cin,
                   kernel_shape=[3, 3], pads=[0, 0, 0, 0], strides=[1, 1])
        return g.node("Conv", [x] + pw, f"{s}/pointwise_conv/conv", dilations=[1, 1], group=1,
                      kernel_shape=[1, 1], pads=[0, 0, 0, 0], strides=[1, 1])

    def bn(x, s, p, c, gamma=(0.6, 1.2)):  # nn.BatchNorm2d(momentum=0.01, eps=1e-3)
        return g.batch_norm(x, s, p, c, gamma_range=gamma, eps=1e-3)

    def fuse(s, p, feats):
        # fast normalized fusion: w = relu(param); w = w / (sum(w, 0) + 1e-4); sum w[i] * f_i
        wr = g.node("Relu", [g.init(p, g.uniform((len(feats),), 0.5, 1.5))], f"{s}_relu")
        tot = g.node("Add", [g.node("ReduceSum", [wr, i64(g, s, [0])], s, keepdims=0),
                             f32(g, s, 1e-4)], s)
        wn = g.node("Div", [wr, tot], s)
        acc = None
        for i, f in enumerate(feats):
            term = g.node("Mul", [g.node("Gather", [wn, i64(g, s, i)], s, axis=0), f], s)
            acc = term if acc is None else g.node("Add", [acc, term], s)
        return silu(g, acc, f"{s}/swish")

    def down(x, s, h):  # MaxPool2dStaticSamePadding(3, 2)
        x = same_pad(x, s, 3, 2, h)
        return g.node("MaxPool", [x], f"{s}/pool", ceil_mode=0, kernel_shape=[3, 3],
                      pads=[0, 0, 0, 0], strides=[2, 2])

    # backbone: stride-2 3x3 conv + BN + SiLU stages; P3, P4, P5 at 16, 8, 4
    x, c, feats = "input", 3, []
    for i, cout in enumerate([16, 24, 40, 80, 112]):
        x = g.conv(x, f"/backbone_net/stage{i}/conv", f"backbone_net.stage{i}.conv", c, cout, 3,
                   2, 1, gain=SILU_GAIN)
        x = bn(x, f"/backbone_net/stage{i}/bn", f"backbone_net.stage{i}.bn", cout)
        x = silu(g, x, f"/backbone_net/stage{i}/act")
        c = cout
        if i >= 2:
            feats.append((x, cout))
    sizes = [16, 8, 4]
    for li in range(2):
        s, p = f"/bifpn/bifpn.{li}", f"bifpn.{li}"
        if li == 0:  # first_time: 1x1 conv + BN to W channels (P4 twice, as the repo does)
            ins = []
            for lvl, (f, cf) in zip((3, 4, 5), feats):
                h = g.conv(f, f"{s}/p{lvl}_down_channel/p{lvl}_down_channel.0",
                           f"{p}.p{lvl}_down_channel.0", cf, W, 1, bias=True, gain=1.0)
                ins.append(bn(h, f"{s}/p{lvl}_down_channel/p{lvl}_down_channel.1",
                              f"{p}.p{lvl}_down_channel.1", W))
            p3_in, p4_in, p5_in = ins
            h = g.conv(feats[1][0], f"{s}/p4_down_channel_2/p4_down_channel_2.0",
                       f"{p}.p4_down_channel_2.0", feats[1][1], W, 1, bias=True, gain=1.0)
            p4_in2 = bn(h, f"{s}/p4_down_channel_2/p4_down_channel_2.1",
                        f"{p}.p4_down_channel_2.1", W)
        else:
            p3_in, p4_in, p5_in = outs
            p4_in2 = p4_in

        def block(x, name, h):
            x = sep_conv(x, f"{s}/{name}", sep_weights(f"{p}.{name}", W, W, True), W, h)
            return bn(x, f"{s}/{name}/bn", f"{p}.{name}.bn", W, gamma=(0.4, 0.8))

        up5 = upsample_nearest(g, p5_in, f"{s}/p4_upsample")
        p4_td = block(fuse(f"{s}/p4_w1", f"{p}.p4_w1", [p4_in, up5]), "conv4_up", 8)
        up4 = upsample_nearest(g, p4_td, f"{s}/p3_upsample")
        p3_out = block(fuse(f"{s}/p3_w1", f"{p}.p3_w1", [p3_in, up4]), "conv3_up", 16)
        d3 = down(p3_out, f"{s}/p4_downsample", 16)
        p4_out = block(fuse(f"{s}/p4_w2", f"{p}.p4_w2", [p4_in2, p4_td, d3]), "conv4_down", 8)
        d4 = down(p4_out, f"{s}/p5_downsample", 8)
        p5_out = block(fuse(f"{s}/p5_w2", f"{p}.p5_w2", [p5_in, d4]), "conv5_down", 4)
        outs = [p3_out, p4_out, p5_out]

    def head(name, per_anchor, final):
        # Regressor / Classifier: the separable convs shared across levels, BN per level
        s, p = f"/{name}", name
        convs = [sep_weights(f"{p}.conv_list.{i}", W, W, False) for i in range(2)]
        header = sep_weights(f"{p}.header", W, ANCHORS * per_anchor, True)
        res = []
        for lvl, (f, h) in enumerate(zip(outs, sizes)):
            for i in range(2):
                f = sep_conv(f, f"{s}/conv_list.{i}", convs[i], W, h)
                f = bn(f, f"{s}/bn_list.{lvl}/bn_list.{lvl}.{i}", f"{p}.bn_list.{lvl}.{i}", W)
                f = silu(g, f, f"{s}/swish")
            f = sep_conv(f, f"{s}/header", header, W, h)
            f = g.node("Transpose", [f], s, perm=[0, 2, 3, 1])
            (batch,) = shape_dims(g, f, s, [0])
            res.append(g.node("Reshape", [f, traced_shape(g, s, [batch, -1, per_anchor])], s))
        y = g.node("Concat", res, s, axis=1)
        return g.node("Sigmoid", [y], s) if final else y

    reg = head("regressor", 4, False)
    cls = head("classifier", CLASSES, True)
    named = [(reg, "regression"), (cls, "classification"),
             (outs[0], "features.0"), (outs[1], "features.1"), (outs[2], "features.2")]
    return named, dict(input_shape=(1, 3, 128, 128))


# ---- f. VGG-11 (torchvision vgg11, half width, 96x96) -----------------------------------------
def build_vgg_mini(g):
    cfg = [32, "M", 64, "M", 128, 128, "M", 256, 256, "M", 256, 256, "M"]
    x, c, i = "input", 3, 0
    for v in cfg:
        if v == "M":
            x = g.max_pool(x, f"/features/features.{i}", 2, 2, 0)
        else:
            x = g.conv(x, f"/features/features.{i}", f"features.{i}", c, v, 3, 1, 1, bias=True)
            i += 1
            x = g.relu(x, f"/features/features.{i}")
            c = v
        i += 1
    x = g.node("Flatten", [x], "", axis=1)                                         # 256 * 3 * 3
    x = g.linear(x, "/classifier/classifier.0", "classifier.0", c * 9, 2048)
    x = g.relu(x, "/classifier/classifier.1")
    x = g.dropout(x, "/classifier/classifier.2", 0.5)
    x = g.linear(x, "/classifier/classifier.3", "classifier.3", 2048, 2048)
    x = g.relu(x, "/classifier/classifier.4")
    x = g.dropout(x, "/classifier/classifier.5", 0.5)
    x = g.linear(x, "/classifier/classifier.6", "classifier.6", 2048, 1000)
    return x, dict(input_shape=(1, 3, 96, 96))


# ---- g. MobileViT (timm mobilevit_xxs-like, shortened) --------------------------------------
def build_mobilevit_mini(g):
    def cbs(x, s, p, cin, cout, k, stride=1, groups=1, act=True, gamma=(0.6, 1.2)):
        x = g.conv(x, f"{s}/conv", f"{p}.conv", cin, cout, k, stride, (k - 1) // 2, groups,
                   gain=SILU_GAIN if act else 1.0)
        x = g.batch_norm(x, f"{s}/bn", f"{p}.bn", cout, gamma_range=gamma)
        return silu(g, x, f"{s}/bn/act") if act else x

    def mv2(x, s, p, cin, cout, stride, t=4):  # timm InvertedResidual with SiLU
        use_res = stride == 1 and cin == cout
        h = cbs(x, f"{s}/conv_pw", f"{p}.conv_pw", cin, cin * t, 1)
        h = cbs(h, f"{s}/conv_dw", f"{p}.conv_dw", cin * t, cin * t, 3, stride, groups=cin * t)
        h = cbs(h, f"{s}/conv_pwl", f"{p}.conv_pwl", cin * t, cout, 1, act=False,
                gamma=(0.2, 0.5) if use_res else (0.6, 1.2))
        return g.node("Add", [h, x], s) if use_res else h

    def attention(x, s, p, d, heads, n):
        hd = d // heads
        qkv = linear_nd(g, x, f"{s}/qkv", f"{p}.qkv", d, 3 * d)
        qkv = g.node("Reshape", [qkv, i64(g, s, [-1, n, 3, heads, hd])], s)
        qkv = g.node("Transpose", [qkv], s, perm=[2, 0, 3, 1, 4])
        q, k, v = [g.node("Squeeze", [t, i64(g, s, [0])], s)
                   for t in g.node("Split", [qkv, i64(g, s, [1, 1, 1])], s, n_out=3, axis=0)]
        q = g.node("Mul", [q, f32(g, s, hd ** -0.5)], s)
        a = g.node("MatMul", [q, g.node("Transpose", [k], s, perm=[0, 1, 3, 2])], s)
        a = g.node("Softmax", [a], s, axis=-1)
        y = g.node("MatMul", [a, v], s)
        y = g.node("Transpose", [y], s, perm=[0, 2, 1, 3])
        y = g.node("Reshape", [y, i64(g, s, [-1, n, d])], s)
        return linear_nd(g, y, f"{s}/proj", f"{p}.proj", d, d, gain=0.5)

    def mobilevit_block(x, s, p, c, d, layers, heads, hw, patch=2):
        shortcut = x
        h = cbs(x, f"{s}/conv_kxk", f"{p}.conv_kxk", c, c, 3)
        h = g.conv(h, f"{s}/conv_1x1", f"{p}.conv_1x1", c, d, 1, gain=1.0)
        nh = hw // patch
        n, pa = nh * nh, patch * patch
        # unfold: [B, d, H, W] -> [B*d*nh, ph, nw, pw] -> transpose(1, 2) -> [B, d, N, P]
        #   -> transpose(1, 3) -> [B*P, N, d]
        h = g.node("Reshape", [h, i64(g, s, [d * nh, patch, nh, patch])], s)
        h = g.node("Transpose", [h], s, perm=[0, 2, 1, 3])
        h = g.node("Reshape", [h, i64(g, s, [1, d, n, pa])], s)
        h = g.node("Transpose", [h], s, perm=[0, 3, 2, 1])
        h = g.node("Reshape", [h, i64(g, s, [pa, n, -1])], s)
        for li in range(layers):  # timm Block: x + attn(norm1(x)); x + mlp(norm2(x))
            ts, tp = f"{s}/transformer/transformer.{li}", f"{p}.transformer.{li}"
            a = layer_norm(g, h, f"{ts}/norm1", f"{tp}.norm1", d)
            h = g.node("Add", [h, attention(a, f"{ts}/attn", f"{tp}.attn", d, heads, n)], ts)
            m = layer_norm(g, h, f"{ts}/norm2", f"{tp}.norm2", d)
            m = linear_nd(g, m, f"{ts}/mlp/fc1", f"{tp}.mlp.fc1", d, 2 * d, gain=RELU_GAIN)
            m = gelu(g, m, f"{ts}/mlp/act")
            m = linear_nd(g, m, f"{ts}/mlp/fc2", f"{tp}.mlp.fc2", 2 * d, d, gain=0.5)
            h = g.node("Add", [h, m], ts)
        h = layer_norm(g, h, f"{s}/norm", f"{p}.norm", d)
        # fold: view(B, P, N, -1) -> transpose(1, 3) -> [B*d*nh, nw, ph, pw] -> transpose(1, 2)
        #   -> [B, d, H, W]
        h = g.node("Reshape", [h, i64(g, s, [1, pa, n, -1])], s)
        h = g.node("Transpose", [h], s, perm=[0, 3, 2, 1])
        h = g.node("Reshape", [h, i64(g, s, [d * nh, nh, patch, patch])], s)
        h = g.node("Transpose", [h], s, perm=[0, 2, 1, 3])
        h = g.node("Reshape", [h, i64(g, s, [1, d, hw, hw])], s)
        h = cbs(h, f"{s}/conv_proj", f"{p}.conv_proj", d, c, 1)
        h = g.node("Concat", [shortcut, h], s, axis=1)
        return cbs(h, f"{s}/conv_fusion", f"{p}.conv_fusion", 2 * c, c, 3)

    x = cbs("input", "/stem", "stem", 3, 16, 3, 2)                                  # 64
    x = mv2(x, "/stages/stages.0/stages.0.0", "stages.0.0", 16, 16, 1)
    x = mv2(x, "/stages/stages.1/stages.1.0", "stages.1.0", 16, 24, 2)              # 32
    x = mv2(x, "/stages/stages.1/stages.1.1", "stages.1.1", 24, 24, 1)
    x = mv2(x, "/stages/stages.2/stages.2.0", "stages.2.0", 24, 48, 2)              # 16
    x = mobilevit_block(x, "/stages/stages.2/stages.2.1", "stages.2.1", 48, 64, 2, 4, 16)
    x = mv2(x, "/stages/stages.3/stages.3.0", "stages.3.0", 48, 64, 2)              # 8
    x = cbs(x, "/final_conv", "final_conv", 64, 256, 1)
    x = classifier(g, x, 256, "head.fc", "/head/fc")
    return x, dict(input_shape=(1, 3, 128, 128))


# ---- h. SKNet (SK-ResNeXt-like: selective-kernel units) --------------------------------------
def build_sknet_mini(g):
    def branch(x, s, p, cin, cout, stride, dil, groups):
        h = g.conv(x, f"{s}/conv", f"{p}.conv", cin, cout, 3, stride, dil, groups=groups,
                   dilation=dil)
        h = g.batch_norm(h, f"{s}/bn", f"{p}.bn", cout)
        return g.relu(h, f"{s}/bn/act")

    def sk_conv_paper(x, s, p, c, stride, groups, r=2, M=2):
        # SKConv of the SKNet reference code: torch.cat of the M branches, view(B, M, C, H, W),
        # sum(dim=1), GAP, fc (1x1 conv + BN + ReLU), one 1x1 conv per branch (fcs), cat,
        # view(B, M, C, 1, 1), softmax(dim=1), sum(feats * attn, dim=1)
        d = max(c // r, 32)
        paths = [branch(x, f"{s}/convs/convs.{i}", f"{p}.convs.{i}", c, c, stride, 1 + i, groups)
                 for i in range(M)]
        feats = g.node("Concat", paths, s, axis=1)
        B, H, W = shape_dims(g, feats, s, [0, 2, 3])
        feats = g.node("Reshape", [feats, traced_shape(g, s, [B, M, c, H, W])], s)
        u = g.node("ReduceSum", [feats, i64(g, s, [1])], s, keepdims=0)
        z = g.node("GlobalAveragePool", [u], f"{s}/gap")
        z = g.conv(z, f"{s}/fc/fc.0", f"{p}.fc.0", c, d, 1)
        z = g.batch_norm(z, f"{s}/fc/fc.1", f"{p}.fc.1", d)
        z = g.relu(z, f"{s}/fc/fc.2")
        att = [g.conv(z, f"{s}/fcs.{i}", f"{p}.fcs.{i}", d, c, 1, bias=True, gain=1.0)
               for i in range(M)]
        att = g.node("Concat", att, s, axis=1)
        att = g.node("Reshape", [att, traced_shape(g, s, [B, M, c, 1, 1])], s)
        att = g.node("Softmax", [att], f"{s}/softmax", axis=1)
        return g.node("ReduceSum", [g.node("Mul", [feats, att], s), i64(g, s, [1])], s,
                      keepdims=0)

    def sk_conv_timm(x, s, p, c, stride, groups, M=2):
        # timm SelectiveKernel: torch.stack of the branches, SelectiveKernelAttn (x.sum(1),
        # mean((2, 3), keepdim), fc_reduce + BN + ReLU, fc_select to C * M, view(B, M, C, 1,
        # 1), softmax(dim=1)), x * attn, sum(dim=1)
        d = max(c // 2, 32)
        paths = [branch(x, f"{s}/paths/paths.{i}", f"{p}.paths.{i}", c, c, stride, 1 + i, groups)
                 for i in range(M)]
        x5 = g.node("Concat", [g.node("Unsqueeze", [t, i64(g, s, [1])], s) for t in paths], s,
                    axis=1)
        a = g.node("ReduceSum", [x5, i64(g, s, [1])], f"{s}/attn", keepdims=0)
        a = g.node("ReduceMean", [a], f"{s}/attn", axes=[2, 3], keepdims=1)
        a = g.conv(a, f"{s}/attn/fc_reduce", f"{p}.attn.fc_reduce", c, d, 1)
        a = g.batch_norm(a, f"{s}/attn/bn", f"{p}.attn.bn", d)
        a = g.relu(a, f"{s}/attn/act")
        a = g.conv(a, f"{s}/attn/fc_select", f"{p}.attn.fc_select", d, c * M, 1, gain=1.0)
        B, C, H, W = shape_dims(g, a, f"{s}/attn", [0, 1, 2, 3])
        cm = g.node("Div", [C, i64(g, f"{s}/attn", M)], f"{s}/attn")
        a = g.node("Reshape", [a, traced_shape(g, f"{s}/attn", [B, M, cm, H, W])], f"{s}/attn")
        a = g.node("Softmax", [a], f"{s}/attn", axis=1)
        return g.node("ReduceSum", [g.node("Mul", [x5, a], s), i64(g, s, [1])], s, keepdims=0)

    def unit(x, p, cin, mid, cout, stride, form, groups=8):
        s = "/" + "/".join(p.split(".")[:1] + [p])
        h = g.conv(x, f"{s}/conv1", f"{p}.conv1", cin, mid, 1)
        h = g.batch_norm(h, f"{s}/bn1", f"{p}.bn1", mid)
        h = g.relu(h, f"{s}/act1")
        h = form(h, f"{s}/conv2", f"{p}.conv2", mid, stride, groups)
        h = g.conv(h, f"{s}/conv3", f"{p}.conv3", mid, cout, 1, gain=1.0)
        h = g.batch_norm(h, f"{s}/bn3", f"{p}.bn3", cout, gamma_range=(0.2, 0.5))
        sc = x
        if stride != 1 or cin != cout:
            sc = g.conv(x, f"{s}/downsample/downsample.0", f"{p}.downsample.0", cin, cout, 1,
                        stride, gain=1.0)
            sc = g.batch_norm(sc, f"{s}/downsample/downsample.1", f"{p}.downsample.1", cout)
        return g.relu(g.node("Add", [h, sc], s), f"{s}/act3")

    x = g.conv("input", "/conv1", "conv1", 3, 32, 3, 2, 1)                          # 64
    x = g.batch_norm(x, "/bn1", "bn1", 32)
    x = g.relu(x, "/act1")
    x = g.max_pool(x, "/maxpool", 3, 2, 1)                                          # 32
    c = 32
    for li, (mid, cout, stride, form) in enumerate([(32, 64, 1, sk_conv_paper),
                                                    (64, 128, 2, sk_conv_timm),
                                                    (128, 256, 2, sk_conv_paper)]):
        x = unit(x, f"layer{li + 1}.0", c, mid, cout, stride, form)
        c = cout
    x = classifier(g, x, c)
    return x, dict(input_shape=(1, 3, 128, 128))


BUILDERS = {
    "vovnet_mini": build_vovnet_mini,
    "resnest_mini": build_resnest_mini,
    "effnetv2_mini": build_effnetv2_mini,
    "centernet_mini": build_centernet_mini,
    "bifpn_mini": build_bifpn_mini,
    "vgg_mini": build_vgg_mini,
    "mobilevit_mini": build_mobilevit_mini,
    "sknet_mini": build_sknet_mini,
}


def build(name, seed):
    g = GraphBuilder(np.random.default_rng([seed, zlib.crc32(name.encode())]))
    x, kw = BUILDERS[name](g)
    if isinstance(x, list):  # several graph outputs
        return finish_multi(g, name, x, kw["input_shape"], "kiln/scripts/families_b.py")
    return g.finish(name, x, **kw)


def main(argv=None):
    return write_models(BUILDERS, build, argv, __doc__.split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
