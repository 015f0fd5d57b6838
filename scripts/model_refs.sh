#!/usr/bin/env bash
# Writes the model zoo and onnxruntime's reference outputs into DIR (the model tests' fixture):
#   scripts/model_refs.sh DIR [PYTHON]
# Skips the work when DIR already holds files newer than the scripts.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="$1"
py="${2:-$here/../.venv/bin/python}"
models=(resnet18 resnet50 mobilenetv2 squeezenet1_1 preact_se convnext_tiny2 resnext_tiny
        inception_tiny seg_tiny preact_se_b4)
mkdir -p "$dir"
stamp="$dir/.complete"
if [ -f "$stamp" ] && [ "$stamp" -nt "$here/make_models.py" ] && [ "$stamp" -nt "$here/zoo_families.py" ] \
   && [ "$stamp" -nt "$here/ort_reference.py" ]; then
  echo "[models] up to date in $dir"
  exit 0
fi
rm -f "$stamp"
echo "[models] writing ${models[*]} to $dir"
"$py" "$here/make_models.py" "$dir" --models "$(IFS=,; echo "${models[*]}")"
for m in "${models[@]}"; do
  "$py" "$here/ort_reference.py" "$dir/$m.onnx" "$dir/$m" --threads 1 >/dev/null
done
# A dynamic-batch export, referenced at batch 1 and 4 (Kiln binds the batch with --input-shape).
"$py" "$here/make_models.py" "$dir" --models preact_se --dynamic-batch --no-verify
for b in 1 4; do
  "$py" "$here/ort_reference.py" "$dir/preact_se_dynamic.onnx" "$dir/preact_se_dynamic_b$b" \
    --batch "$b" --threads 1 >/dev/null
done
touch "$stamp"
