#!/usr/bin/env bash
# Installs everything Kiln needs on a fresh Debian 12 machine: system packages with apt-get
# and a project-local Python virtual environment (.venv) with Halide, CMake and ninja.
# Idempotent: a second run only checks that everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential git python3-venv python3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libdnnl-dev
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  pocl-opencl-icd ocl-icd-libopencl1
  nlohmann-json3-dev  # the schedule database and the JSON kiln writes
  clang-14 libclang-rt-14-dev  # the fuzz preset: clang++-14 with libFuzzer and the sanitizers
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PY --version)"
  $PY -m venv .venv
fi
if ! .venv/bin/python -c "import halide" 2>/dev/null || \
   ! cmp -s scripts/requirements.txt .venv/.requirements.installed; then
  echo "[setup] installing Python packages from scripts/requirements.txt"
  .venv/bin/python -m pip install -q --upgrade pip==24.3.1
  .venv/bin/python -m pip install -q -r scripts/requirements.txt
  cp scripts/requirements.txt .venv/.requirements.installed
fi
echo "[setup] ok: $(.venv/bin/cmake --version | head -1), halide $(.venv/bin/python -c 'import halide; print(halide.install_dir())')"
