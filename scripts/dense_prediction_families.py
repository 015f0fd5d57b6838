"""The dense-prediction and multi-resolution families of more_families.py (a YOLO-style detector,
U-Net, DeepLabV3, HRNet), in the same form: opset 13 as torch.onnx writes them, built with
make_models.GraphBuilder. more_families.py lists them with the others and writes them.
"""

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from family_common import (SILU_GAIN, classifier, f32, i64,  # noqa: E402
                           interpolate_like, silu, upsample_nearest)

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
