#!/usr/bin/env python3
"""Real torch.onnx exports of torchvision's CNNs, for checking Kiln on them.

Not part of the tests: PyTorch is a large download, and each model adds minutes of kernel
compiles. The zoo's models are written by hand in the form torch.onnx gives; these files come
from the exporter itself (docs/benchmarks.md). Export in an environment of its own, then check
and time with the project's tools:

    python3 -m venv PTENV && PTENV/bin/pip install torch==2.5.1 torchvision==0.20.1 onnx==1.17.0
    PTENV/bin/python scripts/torchvision_exports.py OUTDIR [--models a,b,...]
    .venv/bin/python scripts/check_exports.py OUTDIR --kiln build/release/tools/kiln \
        --models tv_resnet50,...
    .venv/bin/python scripts/compare_engines.py --kiln build/release/tools/kiln --models OUTDIR \
        --names tv_resnet50,...

Each model gets random weights (torchvision's initialization, seeded), and every BatchNorm the
statistics of its input on a random batch with a random scale and shift, so that the
activations keep their size to the logits; then it is exported in eval mode, batch 1, 3x224x224
(NCHW), opset 17, by the TorchScript-based exporter (`torch.onnx.export`, dynamo=False).

With --dynamo, the dynamo-based exporter instead (the default of current PyTorch), at its
default opset, with the weights in OUTDIR/NAME.onnx.data beside each model. Checked with:

    python3 -m venv PT29 && PT29/bin/pip install torch==2.9.1 torchvision==0.24.1 \
        onnxscript==0.7.2 onnx==1.19.1 timm==1.0.12
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import export_torch_models, parse_export_args  # noqa: E402

MODELS = {
    "tv_resnet50": "resnet50",
    "tv_resnext50": "resnext50_32x4d",
    "tv_wide_resnet50": "wide_resnet50_2",
    "tv_regnet_y_800mf": "regnet_y_800mf",
    "tv_regnet_x_1_6gf": "regnet_x_1_6gf",
    "tv_mobilenet_v3_large": "mobilenet_v3_large",
    "tv_mobilenet_v3_small": "mobilenet_v3_small",
    "tv_mnasnet1_0": "mnasnet1_0",
    "tv_efficientnet_b0": "efficientnet_b0",
    "tv_efficientnet_v2_s": "efficientnet_v2_s",
    "tv_convnext_tiny": "convnext_tiny",
    "tv_shufflenet_v2": "shufflenet_v2_x1_0",
    "tv_squeezenet1_1": "squeezenet1_1",
    "tv_densenet121": "densenet121",
    "tv_googlenet": "googlenet",
    "tv_inception_v3": "inception_v3",
    "tv_vgg11_bn": "vgg11_bn",
}


def main():
    args = parse_export_args(__doc__, MODELS, torch_exporter=True)
    import torchvision

    def build(name):
        extra = {"aux_logits": False, "init_weights": True} if name in (
            "tv_googlenet", "tv_inception_v3") else {}
        return getattr(torchvision.models, MODELS[name])(weights=None, **extra), 224

    export_torch_models(args, build)


if __name__ == "__main__":
    main()
