#!/usr/bin/env bash
# README command (b): installs what is missing, builds everything (benchmarks included) and runs
# every test with ctest. PRESET=debug or PRESET=asan picks another build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
preset="${PRESET:-release}"
cmake --preset "$preset" >/dev/null
echo "[test] building preset $preset"
cmake --build --preset "$preset"
ctest --preset "$preset" -j "$(nproc)"
