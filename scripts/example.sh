#!/usr/bin/env bash
# README command (a): installs what is missing, builds Kiln, then compiles and runs the built-in
# reference model and prints what the compiler did. Extra arguments go to `kiln example`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
cmake --preset release >/dev/null
echo "[example] building (the first build compiles the Halide kernels; a few minutes on 2 cores)"
cmake --build --preset release --target kiln
exec build/release/tools/kiln example "$@"
