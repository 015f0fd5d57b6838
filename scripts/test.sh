#!/usr/bin/env bash
# README command (b): installs what is missing, builds everything (benchmarks included) and runs
# every test with ctest, then builds the asan preset (AddressSanitizer + UndefinedBehaviorSanitizer)
# and runs every test again under it. PRESET=release, PRESET=debug or PRESET=asan runs that one
# build only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

run_preset() {
  cmake --preset "$1" >/dev/null
  echo "[test] building preset $1"
  cmake --build --preset "$1"
  echo "[test] running the tests of preset $1"
  ctest --preset "$1" -j "$(nproc)"
}

if [[ -n "${PRESET:-}" ]]; then
  run_preset "$PRESET"
else
  run_preset release
  run_preset asan
fi
