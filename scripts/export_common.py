"""What scripts/keras_exports.py, scripts/torchvision_exports.py and scripts/timm_exports.py
share (plain Python: each runs in its exporter's own environment, and PyTorch is passed in)."""

import argparse
import os
import sys


def parse_export_args(doc, models, torch_exporter=False):
    """DIR [--models a,b,...] [--seed N] [--dynamo]; args.models is the list, each one of
    `models`. --dynamo (PyTorch's scripts only) picks the dynamo-based exporter."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("dir")
    p.add_argument("--models", default=",".join(models),
                   help="comma-separated, from: " + ", ".join(models))
    p.add_argument("--seed", type=int, default=3)
    if torch_exporter:
        p.add_argument("--dynamo", action="store_true",
                       help="export with torch.onnx's dynamo-based exporter (its default opset; "
                            "the weights in NAME.onnx.data beside the model) instead of the "
                            "TorchScript-based one at opset 17")
    args = p.parse_args()
    args.models = args.models.split(",")
    unknown = [m for m in args.models if m not in models]
    if unknown:
        p.error("unknown models: " + ", ".join(unknown))
    return args


def calibrate_batch_norms(torch, model, seed, size=224):
    """Sets each BatchNorm's running statistics to its input's on a random batch of
    3 x size x size images, in the order the forward pass reaches them, with a random affine
    scale and shift."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(4, 3, size, size, generator=g) * 2 - 1
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]

    def hook(module, inputs):
        a = inputs[0].detach()
        dims = [d for d in range(a.dim()) if d != 1]
        module.running_mean.copy_(a.mean(dim=dims))
        module.running_var.copy_(a.var(dim=dims, unbiased=False) + 1e-3)
        if module.affine:
            module.weight.data.uniform_(0.5, 1.5, generator=g)
            module.bias.data.uniform_(-0.2, 0.2, generator=g)

    handles = [m.register_forward_pre_hook(hook) for m in norms]
    model.eval()
    with torch.no_grad():
        model(x)
    for h in handles:
        h.remove()


def randomize_zero_weights(torch, model, seed):
    """Draws every all-zero weight matrix or kernel (ndim >= 2) from N(0, 0.02), and every
    layer scale (a parameter named gamma*) below 1e-3 from U(0.1, 1): timm zero-initializes some
    heads (MLP-Mixer, ResMLP) and starts CaiT's layer scales at 1e-5, which makes the output
    (nearly) independent of the input and a comparison against onnxruntime vacuous."""
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2 and not p.any():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            elif name.split(".")[-1].startswith("gamma") and float(p.abs().max()) < 1e-3:
                p.copy_(torch.rand(p.shape, generator=g) * 0.9 + 0.1)


def export_torch_models(args, build):
    """Exports each of args.models to DIR/NAME.onnx: build(name) gives the model and its input
    size; its all-zero weights are drawn at random and its BatchNorms calibrated, and
    torch.onnx.export writes it in eval mode, batch 1,
    NCHW, input "input", output "logits". A failure is reported and the others go on; exits 1
    if any failed."""
    import torch

    os.makedirs(args.dir, exist_ok=True)
    options = {"dynamo": True} if args.dynamo else {"dynamo": False, "opset_version": 17}
    failed = 0
    for name in args.models:
        torch.manual_seed(args.seed)
        try:
            model, size = build(name)
            randomize_zero_weights(torch, model, args.seed)
            calibrate_batch_norms(torch, model, args.seed, size)
            x = torch.rand(1, 3, size, size) * 2 - 1
            torch.onnx.export(model, (x,), os.path.join(args.dir, name + ".onnx"),
                              input_names=["input"], output_names=["logits"], **options)
            print(f"[export] {name} ({size}x{size})", flush=True)
        except Exception as e:  # a model or exporter failure: report it and go on
            print(f"[export] {name} FAILED: {type(e).__name__}: {e}", flush=True)
            failed += 1
    sys.exit(1 if failed else 0)
