#!/usr/bin/env python3
"""Real tf2onnx exports of Keras applications, for checking Kiln on them.

Not part of the tests: TensorFlow is a large download, and each model adds minutes of kernel
compiles. It checks Kiln on files written by an exporter other than the one the zoo imitates
(docs/benchmarks.md). Export in an environment of its own (TensorFlow does not go into the
project's), then check and time with the project's tools:

    python3 -m venv TFENV && TFENV/bin/pip install tensorflow-cpu==2.15.1 tf2onnx==1.16.1
    TFENV/bin/python scripts/keras_exports.py OUTDIR [--models a,b,...]
    .venv/bin/python scripts/check_exports.py OUTDIR --kiln build/release/tools/kiln
    .venv/bin/python scripts/compare_engines.py --kiln build/release/tools/kiln --models OUTDIR \
        --names k_mobilenetv2,k_effb0,...

Export: each model is built with random weights (weights=None, seeded), batch 1, 224x224x3
(NHWC, as tf2onnx writes it), opset 17. Random initial weights shrink the activations layer
after layer (MobileNet's logits came out near 1e-20, where flushing denormals alone would make
a difference), so every BatchNormalization gets the statistics of its input on a random batch,
and a random scale and shift: the logits come out of order 1.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_common import parse_export_args  # noqa: E402

MODELS = {
    "k_mobilenet": ("MobileNet", {}),
    "k_mobilenetv2": ("MobileNetV2", {}),
    "k_mobilenetv3s": ("MobileNetV3Small", {}),
    "k_mobilenetv3l": ("MobileNetV3Large", {}),
    "k_effb0": ("EfficientNetB0", {}),
    "k_effv2b0": ("EfficientNetV2B0", {}),
    "k_resnet50": ("ResNet50", {}),
    "k_resnet50v2": ("ResNet50V2", {}),
    "k_densenet121": ("DenseNet121", {}),
    "k_nasnetmobile": ("NASNetMobile", {}),
    "k_xception": ("Xception", {}),
    "k_inceptionv3": ("InceptionV3", {}),
}


def calibrate_batch_norms(model, tf, rng):
    """Gives every BatchNormalization its input's statistics on a random batch (in model order)."""
    x = rng.uniform(-1, 1, (4, 224, 224, 3)).astype("float32")
    for layer in model.layers:
        if not isinstance(layer, tf.keras.layers.BatchNormalization):
            continue
        probe = tf.keras.Model(model.inputs, layer.input)
        a = probe(x, training=False).numpy()
        axes = tuple(range(a.ndim - 1))
        channels = a.shape[-1]
        gamma = rng.uniform(0.5, 1.5, channels).astype("float32")
        beta = rng.uniform(-0.2, 0.2, channels).astype("float32")
        weights = {"gamma": gamma, "beta": beta, "moving_mean": a.mean(axis=axes),
                   "moving_variance": a.var(axis=axes) + 1e-3}
        layer.set_weights([weights[w.name.split("/")[-1].split(":")[0]] for w in layer.weights])


def export(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf
    import tf2onnx

    os.makedirs(args.dir, exist_ok=True)
    failed = 0
    for name in args.models:
        builder, extra = MODELS[name]
        tf.keras.utils.set_random_seed(args.seed)
        model = getattr(tf.keras.applications, builder)(weights=None, input_shape=(224, 224, 3),
                                                        **extra)
        calibrate_batch_norms(model, tf, np.random.default_rng(args.seed))
        spec = (tf.TensorSpec((1, 224, 224, 3), tf.float32, name="input"),)
        try:
            tf2onnx.convert.from_keras(model, input_signature=spec, opset=17,
                                       output_path=os.path.join(args.dir, name + ".onnx"))
            print(f"[export] {name}", flush=True)
        except Exception as e:  # an exporter failure: report it and go on with the others
            print(f"[export] {name} FAILED: {type(e).__name__}: {e}", flush=True)
            failed += 1
    return 1 if failed else 0


def main():
    sys.exit(export(parse_export_args(__doc__, MODELS)))


if __name__ == "__main__":
    main()
