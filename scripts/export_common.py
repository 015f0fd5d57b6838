"""The command line that scripts/keras_exports.py and scripts/torchvision_exports.py share (plain
Python: each runs in its exporter's own environment)."""

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
