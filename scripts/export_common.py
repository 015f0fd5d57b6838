"""What scripts/keras_exports.py, scripts/torchvision_exports.py and scripts/timm_exports.py
share (plain Python: each runs in its exporter's own environment, and PyTorch is passed in)."""

import argparse


def parse_export_args(doc, models):
    """DIR [--models a,b,...] [--seed N]; args.models is the list, each one of `models`."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("dir")
    p.add_argument("--models", default=",".join(models),
                   help="comma-separated, from: " + ", ".join(models))
    p.add_argument("--seed", type=int, default=3)
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
