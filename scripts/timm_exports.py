#!/usr/bin/env python3
"""Real torch.onnx exports of CNN families from timm (PyTorch Image Models), for checking Kiln.

Not part of the tests, for the reasons scripts/torchvision_exports.py gives. Mostly families
that neither torchvision nor Keras has: DLA, HRNet, CSP and cross-stage Darknets, dual-path
networks, GhostNets, MixNet's mixed kernels, normalizer-free ResNets (weights standardized in
the graph), RepVGG and MobileOne before re-parameterization, VoVNet, Res2Net, ResNeSt's split
attention, selective kernels, ECA's 1-D convolution over channels, global-context blocks,
ReXNet's partial residuals, LCNet, HGNetV2, PoolFormer's GroupNorm, MobileNetV4, FastViT,
InceptionNeXt's banded depthwise kernels, EfficientViT's ReLU linear attention, RepGhost; and
ResNet-D's average-pooled shortcuts, EfficientNet-Lite, TinyNet at 106x106; GroupNorm ResNets
(ResNet-GN, BiT's pre-activation ResNetV2) and token-major transformers and hybrids (LeViT, ViT,
MobileViT, EfficientFormer, Visformer), whose linear layers run as convolutions; window and
pyramid transformers (Swin, TinyViT and Twins, which pad to whole windows with Mod; PVT-v2,
CoaT, XCiT's cross-covariance attention, GCViT, NextViT, CrossViT's two branches), DeiT, BEiT-v2,
ConViT, CaiT's class attention, and the MLP models MLP-Mixer and ResMLP.

    python3 -m venv PTENV && PTENV/bin/pip install torch==2.5.1 torchvision==0.20.1 \\
        onnx==1.17.0 timm==1.0.12
    PTENV/bin/python scripts/timm_exports.py OUTDIR [--models a,b,...]
    .venv/bin/python scripts/check_exports.py OUTDIR --kiln build/release/tools/kiln

Each model gets timm's random initialization (seeded) and every BatchNorm the statistics of its
input on a random batch (scripts/export_common.py), and is exported in eval mode, batch 1, at
its default input size (NCHW), opset 17, by the TorchScript-based exporter; with --dynamo, by
the dynamo-based one (scripts/torchvision_exports.py says which versions were checked).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import export_torch_models, parse_export_args  # noqa: E402

MODELS = {
    "timm_dla34": "dla34",
    "timm_hrnet_w18_small": "hrnet_w18_small",
    "timm_cs3darknet_s": "cs3darknet_s",
    "timm_cspresnet50": "cspresnet50",
    "timm_dpn68": "dpn68",
    "timm_ghostnet_100": "ghostnet_100",
    "timm_ghostnetv2_100": "ghostnetv2_100",
    "timm_mixnet_s": "mixnet_s",
    "timm_nf_resnet26": "nf_resnet26",
    "timm_repvgg_a0": "repvgg_a0",
    "timm_mobileone_s0": "mobileone_s0",
    "timm_ese_vovnet19b_dw": "ese_vovnet19b_dw",
    "timm_res2net50_26w_4s": "res2net50_26w_4s",
    "timm_resnest14d": "resnest14d",
    "timm_skresnet18": "skresnet18",
    "timm_ecaresnet26t": "ecaresnet26t",
    "timm_gcresnext26ts": "gcresnext26ts",
    "timm_rexnet_100": "rexnet_100",
    "timm_lcnet_050": "lcnet_050",
    "timm_hgnetv2_b0": "hgnetv2_b0",
    "timm_poolformer_s12": "poolformer_s12",
    "timm_mobilenetv4_conv_small": "mobilenetv4_conv_small",
    "timm_fastvit_t8": "fastvit_t8",
    "timm_efficientnet_lite0": "efficientnet_lite0",
    "timm_resnet50d": "resnet50d",
    "timm_selecsls42b": "selecsls42b",
    "timm_inception_next_tiny": "inception_next_tiny",
    "timm_efficientvit_b0": "efficientvit_b0",
    "timm_repghostnet_050": "repghostnet_050",
    "timm_tinynet_e": "tinynet_e",
    "timm_resnet50_gn": "resnet50_gn",
    "timm_resnetv2_50x1_bit": "resnetv2_50x1_bit",
    "timm_levit_128s": "levit_128s",
    "timm_vit_tiny_patch16_224": "vit_tiny_patch16_224",
    "timm_mobilevit_xxs": "mobilevit_xxs",
    "timm_efficientformer_l1": "efficientformer_l1",
    "timm_visformer_tiny": "visformer_tiny",
    "timm_swin_tiny": "swin_tiny_patch4_window7_224",
    "timm_tiny_vit_5m": "tiny_vit_5m_224",
    "timm_twins_svt_small": "twins_svt_small",
    "timm_pvt_v2_b0": "pvt_v2_b0",
    "timm_efficientvit_m0": "efficientvit_m0",
    "timm_coat_lite_tiny": "coat_lite_tiny",
    "timm_xcit_nano": "xcit_nano_12_p16_224",
    "timm_deit_tiny_distilled": "deit_tiny_distilled_patch16_224",
    "timm_beitv2_base": "beitv2_base_patch16_224",
    "timm_mixer_b16": "mixer_b16_224",
    "timm_resmlp_12": "resmlp_12_224",
    "timm_convit_tiny": "convit_tiny",
    "timm_cait_xxs24": "cait_xxs24_224",
    "timm_gcvit_xxtiny": "gcvit_xxtiny",
    "timm_crossvit_tiny": "crossvit_tiny_240",
    "timm_nextvit_small": "nextvit_small",
}


def main():
    args = parse_export_args(__doc__, MODELS, torch_exporter=True)
    import timm

    def build(name):
        model = timm.create_model(MODELS[name], pretrained=False)
        return model, model.pretrained_cfg.get("input_size", (3, 224, 224))[-1]

    export_torch_models(args, build)


if __name__ == "__main__":
    main()
