#!/usr/bin/env python3
"""Real tf2onnx exports of Keras applications, and Kiln's outputs on them against onnxruntime's.

Not part of the tests: TensorFlow is a large download, and each model adds minutes of kernel
compiles. It checks Kiln on files written by an exporter other than the one the zoo imitates
(docs/benchmarks.md). Two steps, in two environments:

    # 1. export, in an environment of its own (TensorFlow does not go into the project's):
    python3 -m venv TFENV && TFENV/bin/pip install tensorflow-cpu==2.15.1 tf2onnx==1.16.1
    TFENV/bin/python scripts/keras_exports.py export OUTDIR [--models a,b,...]
    # 2. compare, in the project's environment (onnxruntime):
    .venv/bin/python scripts/keras_exports.py check OUTDIR --kiln build/release/tools/kiln
    # and time them against the peers:
    .venv/bin/python scripts/compare_engines.py --kiln build/release/tools/kiln --models OUTDIR \
        --names k_mobilenetv2,k_effb0,...

Export: each model is built with random weights (weights=None, seeded), batch 1, 224x224x3
(NHWC, as tf2onnx writes it), opset 17. Random initial weights shrink the activations layer
after layer (MobileNet's logits came out near 1e-20, where flushing denormals alone would make
a difference), so every BatchNormalization gets the statistics of its input on a random batch,
and a random scale and shift: the logits come out of order 1.

Check: each model is cut before its last Softmax (the logits, where a difference shows), run
by onnxruntime and by `kiln run` on the same seeded input in [-1, 1), and compared with the
project's tolerance (|kiln - ort| <= 1e-4 + 1e-3 |ort|). Exits 1 if any model fails.
"""

import argparse
import os
import subprocess
import sys

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


def check(args):
    import numpy as np
    import onnx
    import onnx.utils
    import onnxruntime as ort

    failed = 0
    for name in args.models:
        path = os.path.join(args.dir, name + ".onnx")
        if not os.path.exists(path):
            print(f"{name:16s} missing ({path})")
            failed += 1
            continue
        model = onnx.load(path)
        softmax = [n for n in model.graph.node if n.op_type == "Softmax"]
        if softmax:
            constants = {t.name for t in model.graph.initializer}
            inputs = [i.name for i in model.graph.input if i.name not in constants]
            cut = os.path.join(args.dir, name + ".logits.onnx")
            onnx.utils.extract_model(path, cut, inputs, [softmax[-1].input[0]])
            path = cut
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        port = session.get_inputs()[0]
        x = np.random.default_rng(args.seed).random(port.shape, dtype=np.float32) * 2 - 1
        x_file = os.path.join(args.dir, name + ".input.npy")
        np.save(x_file, x)
        ref = session.run(None, {port.name: x})[0]
        out_dir = os.path.join(args.dir, name + ".kiln")
        run = subprocess.run([args.kiln, "run", path, "--input", x_file, "--output-dir", out_dir],
                             capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{name:16s} kiln run failed: {run.stderr.strip().splitlines()[-1]}")
            failed += 1
            continue
        got = np.load(os.path.join(out_dir, sorted(f for f in os.listdir(out_dir)
                                                   if f.endswith(".npy"))[0]))
        diff = np.abs(got.reshape(ref.shape) - ref)
        ok = bool(np.all(diff <= 1e-4 + 1e-3 * np.abs(ref)))
        failed += not ok
        print(f"{name:16s} {'ok' if ok else 'MISMATCH':8s} max |diff| {diff.max():.2e}, "
              f"max |ort| {np.abs(ref).max():.2e}, std(ort) {ref.std():.2e}")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("step", choices=["export", "check"])
    p.add_argument("dir")
    p.add_argument("--models", default=",".join(MODELS),
                   help="comma-separated, from: " + ", ".join(MODELS))
    p.add_argument("--kiln", help="the kiln binary (check)")
    p.add_argument("--seed", type=int, default=3)
    args = p.parse_args()
    args.models = args.models.split(",")
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        p.error("unknown models: " + ", ".join(unknown))
    if args.step == "check" and not args.kiln:
        p.error("check needs --kiln")
    sys.exit(export(args) if args.step == "export" else check(args))


if __name__ == "__main__":
    main()
