"""Small networks of the CNN families Kiln's zoo covers beyond the torchvision four, built with
make_models.GraphBuilder in the form torch.onnx (TorchScript exporter, opset 13) writes them.

Each builder takes a fresh GraphBuilder and a name and returns the finished ModelProto;
make_models.py registers them (see docs/models.md). They are kept small (few channels, few
blocks) because every model test compiles its kernels for three CPU targets and OpenCL.
"""

import numpy as np
from onnx import TensorProto

INCEPTION_BN_EPS = 1e-3  # torchvision's BasicConv2d uses BatchNorm2d(eps=0.001)


# ---- ResNeXt: grouped 3x3 bottlenecks ----------------------------------------------------
def build_resnext_tiny(g, name, bottleneck, groups=16, base_width=8):
    """torchvision's ResNet with ResNeXt bottlenecks (groups=16, width_per_group=8: the 3x3 has
    4 channels per group in layer1 and 8 in layer2), shrunk: a 32-channel stem, layer1 of one
    block at 56x56 and layer2 of two blocks with the stride-2 grouped 3x3 in its first block."""
    x = g.conv("input", "/conv1", "conv1", 3, 32, 7, 2, 3)
    x = g.batch_norm(x, "/bn1", "bn1", 32)
    x = g.relu(x, "/relu")
    x = g.max_pool(x, "/maxpool", 3, 2, 1)
    inplanes = 32
    for li, (planes, n) in enumerate([(32, 1), (64, 2)]):
        for bi in range(n):
            stride = 2 if (li > 0 and bi == 0) else 1
            x, inplanes = bottleneck(g, x, f"layer{li + 1}.{bi}", inplanes, planes, stride,
                                     groups=groups, base_width=base_width)
    x = g.node("GlobalAveragePool", [x], "/avgpool")
    x = g.node("Flatten", [x], "", axis=1)
    x = g.linear(x, "/fc", "fc", inplanes, 1000)
    return g.finish(name, x)


# ---- Inception v3: factorized convolutions in parallel branches ---------------------------
def build_inception_tiny(g, name):
    """torchvision's Inception3 at 299x299 with few channels and one block of the kinds that
    factorize: the stem (3x3 s2, 3x3, max pool, 1x1, max pool), Mixed_6a (InceptionB: stride-2
    3x3s and a max pool branch, 36 -> 17), Mixed_6b (InceptionC: 1x7/7x1 chains) and Mixed_7b
    (InceptionE: 1x3 and 3x1 side by side, nested Concats), both with an avg pool branch; then
    GlobalAveragePool, Dropout, Flatten, Gemm. F.avg_pool2d(x, 3, stride=1, padding=1) exports
    as AveragePool with count_include_pad=1 (torch's default). No InceptionA (5x5 and double
    3x3): every kernel costs test time on four targets."""

    def basic(x, scope, cin, cout, k, stride=1, pad=0):
        # BasicConv2d: conv (no bias) -> BatchNorm(eps 1e-3) -> F.relu
        s, p = "/" + scope.replace(".", "/"), scope
        x = g.conv(x, f"{s}/conv", f"{p}.conv", cin, cout, k, stride, pad)
        x = g.batch_norm(x, f"{s}/bn", f"{p}.bn", cout, eps=INCEPTION_BN_EPS)
        return g.relu(x, s)

    def avg_pool_3x3(x, scope):
        return g.node("AveragePool", [x], scope, ceil_mode=0, count_include_pad=1,
                      kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])

    def cat(xs, scope):
        return g.node("Concat", xs, scope, axis=1)

    x = basic("input", "Conv2d_1a_3x3", 3, 16, 3, 2)          # 149
    x = basic(x, "Conv2d_2a_3x3", 16, 16, 3)                   # 147
    x = g.max_pool(x, "/maxpool1", 3, 2, 0)                    # 73
    x = basic(x, "Conv2d_3b_1x1", 16, 64, 1)
    x = g.max_pool(x, "/maxpool2", 3, 2, 0)                    # 36

    m = "Mixed_6a"  # InceptionB(64) -> 48 + 24 + 64 = 136 channels at 17x17
    b3 = basic(x, f"{m}.branch3x3", 64, 48, 3, stride=2)
    bd = basic(x, f"{m}.branch3x3dbl_1", 64, 16, 1)
    bd = basic(bd, f"{m}.branch3x3dbl_2", 16, 24, 3, pad=1)
    bd = basic(bd, f"{m}.branch3x3dbl_3", 24, 24, 3, stride=2)
    bp = g.max_pool(x, f"/{m}", 3, 2, 0)
    x = cat([b3, bd, bp], f"/{m}")

    m = "Mixed_6b"  # InceptionC(136, channels_7x7=16) -> 128 channels
    b1 = basic(x, f"{m}.branch1x1", 136, 32, 1)
    b7 = basic(x, f"{m}.branch7x7_1", 136, 16, 1)
    b7 = basic(b7, f"{m}.branch7x7_2", 16, 16, (1, 7), pad=(0, 3))
    b7 = basic(b7, f"{m}.branch7x7_3", 16, 32, (7, 1), pad=(3, 0))
    bd = basic(x, f"{m}.branch7x7dbl_1", 136, 16, 1)
    bd = basic(bd, f"{m}.branch7x7dbl_2", 16, 16, (7, 1), pad=(3, 0))
    bd = basic(bd, f"{m}.branch7x7dbl_3", 16, 16, (1, 7), pad=(0, 3))
    bd = basic(bd, f"{m}.branch7x7dbl_4", 16, 16, (7, 1), pad=(3, 0))
    bd = basic(bd, f"{m}.branch7x7dbl_5", 16, 32, (1, 7), pad=(0, 3))
    bp = basic(avg_pool_3x3(x, f"/{m}"), f"{m}.branch_pool", 136, 32, 1)
    x = cat([b1, b7, bd, bp], f"/{m}")

    m = "Mixed_7b"  # InceptionE(128) -> 32 + 48 + 48 + 16 = 144 channels
    b1 = basic(x, f"{m}.branch1x1", 128, 32, 1)
    b3 = basic(x, f"{m}.branch3x3_1", 128, 24, 1)
    b3 = cat([basic(b3, f"{m}.branch3x3_2a", 24, 24, (1, 3), pad=(0, 1)),
              basic(b3, f"{m}.branch3x3_2b", 24, 24, (3, 1), pad=(1, 0))], f"/{m}")
    bd = basic(x, f"{m}.branch3x3dbl_1", 128, 24, 1)
    bd = basic(bd, f"{m}.branch3x3dbl_2", 24, 24, 3, pad=1)
    bd = cat([basic(bd, f"{m}.branch3x3dbl_3a", 24, 24, (1, 3), pad=(0, 1)),
              basic(bd, f"{m}.branch3x3dbl_3b", 24, 24, (3, 1), pad=(1, 0))], f"/{m}")
    bp = basic(avg_pool_3x3(x, f"/{m}"), f"{m}.branch_pool", 128, 16, 1)
    x = cat([b1, b3, bd, bp], f"/{m}")

    x = g.node("GlobalAveragePool", [x], "/avgpool")
    x = g.dropout(x, "/dropout", 0.5)
    x = g.node("Flatten", [x], "", axis=1)
    x = g.linear(x, "/fc", "fc", 144, 1000)
    return g.finish(name, x, input_shape=(1, 3, 299, 299))


# ---- Segmentation: an encoder and a head upsampled with Resize ----------------------------
def build_seg_tiny(g, name, height=240, width=320, num_classes=21):
    """torchvision's FCN/DeepLab layout, shrunk: `input_shape = x.shape[-2:]`, a backbone of
    three stride-2 conv + BN + ReLU stages and one dilated 3x3 (dilation 2, DeepLab's output
    stride 8), an FCNHead (3x3 conv + BN + ReLU, Dropout(0.1), 1x1 conv with bias to the class
    logits), and F.interpolate(x, size=input_shape, mode="bilinear", align_corners=False) as
    torch.onnx exports it at opset 13: the size from Shape -> Gather of the input, Unsqueeze,
    Concat, Cast, appended to Slice(Shape(x), 0, 2), and Resize(x, "", "", sizes) with mode
    linear and coordinate_transformation_mode pytorch_half_pixel. Output [1, classes, H, W]."""

    def i64(scope, values):
        return g.constant(scope, np.array(values, dtype=np.int64))

    # input_shape = x.shape[-2:], traced as two aten::size calls.
    hw = [g.node("Gather", [g.node("Shape", ["input"], ""), i64("", d)], "", axis=0)
          for d in (2, 3)]

    def conv_bn_relu(x, scope, cin, cout, stride, dilation=1):
        s, p = "/" + scope.replace(".", "/"), scope
        x = g.conv(x, f"{s}/conv", f"{p}.conv", cin, cout, 3, stride, dilation,
                   dilation=dilation)
        x = g.batch_norm(x, f"{s}/bn", f"{p}.bn", cout)
        return g.relu(x, f"{s}/relu")

    x = conv_bn_relu("input", "backbone.stem", 3, 16, 2)         # H/2
    x = conv_bn_relu(x, "backbone.layer1", 16, 32, 2)            # H/4
    x = conv_bn_relu(x, "backbone.layer2", 32, 64, 2)            # H/8
    x = conv_bn_relu(x, "backbone.layer3", 64, 64, 1, dilation=2)
    x = g.conv(x, "/classifier/classifier.0", "classifier.0", 64, 32, 3, 1, 1)
    x = g.batch_norm(x, "/classifier/classifier.1", "classifier.1", 32)
    x = g.relu(x, "/classifier/classifier.2")
    x = g.dropout(x, "/classifier/classifier.3", 0.1)
    x = g.conv(x, "/classifier/classifier.4", "classifier.4", 32, num_classes, 1, bias=True,
               gain=1.0)

    size = g.node("Concat", [g.node("Unsqueeze", [d, i64("", [0])], "") for d in hw], "",
                  axis=0)
    lead = g.node("Slice", [g.node("Shape", [x], ""), i64("", [0]), i64("", [2]),
                            i64("", [0])], "")
    sizes = g.node("Concat", [lead, g.node("Cast", [size], "", to=TensorProto.INT64)], "",
                   axis=0)
    x = g.node("Resize", [x, "", "", sizes], "", coordinate_transformation_mode="pytorch_half_pixel",
               cubic_coeff_a=-0.75, mode="linear", nearest_mode="floor")
    return g.finish(name, x, input_shape=(1, 3, height, width),
                    output_shape=(1, num_classes, height, width))
