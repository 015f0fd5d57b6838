#!/usr/bin/env bash
# README command (b): installs what is missing, builds everything (benchmarks included) and runs
# every test with ctest, then builds the asan preset (AddressSanitizer + UndefinedBehaviorSanitizer)
# and runs every test again under it, then builds the fuzz preset (clang, libFuzzer) and runs each
# fuzz target for 60 s (scripts/fuzz.sh). PRESET=release, PRESET=debug, PRESET=asan or
# PRESET=fuzz runs that one stage only; PRESET=tsan (not part of the default run) builds the
# concurrency test under ThreadSanitizer and runs it.
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

fuzz_smoke() {
  echo "[test] fuzzing each target for 60 s"
  scripts/fuzz.sh 60
}

# Only the concurrency test: the rest of the suite is not meant for TSan, and a full TSan
# stage would take CI past its time budget (docs/robustness.md, "Threads").
tsan_concurrency() {
  cmake --preset tsan >/dev/null
  echo "[test] building the concurrency test under ThreadSanitizer"
  cmake --build --preset tsan --target kiln_concurrency_tests
  ctest --preset tsan -R '^Nets/Concurrency\.|^ThreadPool\.'
}

if [[ "${PRESET:-}" == fuzz ]]; then
  fuzz_smoke
elif [[ "${PRESET:-}" == tsan ]]; then
  tsan_concurrency
elif [[ -n "${PRESET:-}" ]]; then
  run_preset "$PRESET"
else
  run_preset release
  run_preset asan
  fuzz_smoke
fi
