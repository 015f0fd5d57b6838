#!/usr/bin/env bash
# Fuzzes Kiln's readers with libFuzzer, under AddressSanitizer + UndefinedBehaviorSanitizer:
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# SECONDS per target (default 3600; the README's test command runs 60), TARGETs among onnx,
# weights and npy (default: all three, side by side). Builds the fuzz preset (clang, nothing but
# fuzz/ and the code it reaches), replays the committed inputs (ctest), writes seed corpora into
# build/fuzz/seeds/ from the zoo models (scripts/make_models.py) and ONNX's node tests
# (libonnx-testdata), then fuzzes; the corpus grows in build/fuzz/corpus/<target>/ from run to
# run. Every crash, sanitizer report, leak, timeout or out-of-memory input is copied into
# fuzz/regressions/<target>/ (which the tests replay once it is committed) and the script
# exits 1. Each target's log, with its number of executions, is build/fuzz/logs/<target>.log.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-3600}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(onnx weights npy)
export PATH="$PWD/.venv/bin:$PATH"
build=build/fuzz
node_tests=/usr/share/libonnx-testdata/data/node  # installed by scripts/setup.sh

cmake --preset fuzz >/dev/null
echo "[fuzz] building preset fuzz"
cmake --build --preset fuzz
echo "[fuzz] replaying the seeds and the regression corpus"
ctest --preset fuzz -j "$(nproc)"

if [ ! -f "$build/seeds/.complete" ]; then
  [ -d "$node_tests" ] || { echo "[fuzz] $node_tests is missing (libonnx-testdata)" >&2; exit 1; }
  # The zoo models within the 1 MiB input cap; the larger ones hold the same ops and patterns.
  .venv/bin/python scripts/make_models.py "$build/zoo" --models preact_se,convnext_tiny2 --no-verify >/dev/null
  "$build/fuzz/kiln_fuzz_seeds" "$build/seeds" fuzz/seeds/onnx/*.onnx "$build"/zoo/*.onnx \
      "$node_tests"/*/model.onnx
  touch "$build/seeds/.complete"
fi

pids=()
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t" "$build/artifacts/$t" "$build/logs"
  seeds=(fuzz/seeds/"$t" fuzz/regressions/"$t" "$build/seeds/$t")
  existing=()
  for d in "${seeds[@]}"; do [ -d "$d" ] && existing+=("$d"); done
  echo "[fuzz] $t for ${seconds} s (log: $build/logs/$t.log)"
  # The new corpus entries go to the first directory; the others only seed it.
  "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -max_len=1048576 -timeout=30 \
      -rss_limit_mb=3072 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t/" \
      "$build/corpus/$t" "${existing[@]}" >"$build/logs/$t.log" 2>&1 &
  pids+=($!)
done

failed=0
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  rc=0
  wait "${pids[$i]}" || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$build/logs/$t.log" | grep -o '[0-9]*$' || echo "?")
  new=0
  for f in "$build/artifacts/$t"/*; do
    [ -f "$f" ] || continue
    case "$(basename "$f")" in slow-unit-*) continue ;; esac
    mkdir -p "fuzz/regressions/$t"
    cp "$f" "fuzz/regressions/$t/"
    new=$((new + 1))
  done
  rm -f "$build/artifacts/$t"/*
  if [ "$rc" -ne 0 ] || [ "$new" -gt 0 ]; then
    echo "[fuzz] $t FAILED after $execs executions (exit $rc); $new input(s) added to fuzz/regressions/$t/:" >&2
    grep -E -m 5 'ERROR|runtime error|terminate|==[0-9]+==' "$build/logs/$t.log" >&2 || tail -20 "$build/logs/$t.log" >&2
    failed=1
  else
    echo "[fuzz] $t ok: $execs executions in ${seconds} s"
  fi
done
exit "$failed"
