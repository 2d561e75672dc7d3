#!/usr/bin/env bash
# On a GPU machine (the lent H200): builds d2k against .deps (scripts/device-deps.sh), runs every test
# (GPU tests included), evaluates the toy task's solutions and the suite's expert solutions, and prints
# a short table last. Logs and traces go to $OUT (or out/) for fetching.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
export D2K_CACHE="$PWD/.cache/d2k"
PY="$(command -v python3)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"

QUICK=0
[[ "${1:-}" == "--quick" ]] && QUICK=1  # a short device budget: GPU tests, three toy solutions, the experts

echo "== build"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DPython3_EXECUTABLE="$PY" -DD2K_WITH_STORE_AND_HTTP=OFF -DCMAKE_BUILD_RPATH="$PWD/.deps/usr/lib/x86_64-linux-gnu" >"$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; exit 1; }
TARGETS=(--target d2k d2k-worker d2k_tests d2k_timing_tests d2k_gpu_tests)  # helpers' targets may be mid-edit
((QUICK)) && TARGETS=(--target d2k d2k-worker d2k_gpu_tests)
cmake --build build-gpu -j 16 "${TARGETS[@]}" >>"$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }

echo "== built  (t=${SECONDS}s)"
if ((QUICK)); then
  echo "== GPU timing tests"
  build-gpu/tests/gpu/d2k_gpu_tests 2>&1 | tee "$OUT/ctest.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED) |OK \]|FAILED  \]|measured|TB/s|us" | head -30
  echo "== toy solutions"
  for s in cuda_ok triton_ok cuda_illegal_address; do
    build-gpu/src/d2k eval --tasks tests/fixtures/base 1 tests/fixtures/solutions/$s --workloads ragged,huge \
      --no-compile-baseline --max-time 2 --call-timeout 30 >"/tmp/toy_$s.log" 2>&1 &
  done
  wait
  for s in cuda_ok triton_ok cuda_illegal_address; do grep -v "^reference\|^check\|^timing\|^baseline\|^start" "/tmp/toy_$s.log"; done | tee "$OUT/summary.txt"
  echo "== expert solutions"
  build-gpu/src/d2k eval --solutions expert --no-compile-baseline --max-time 2 --json "$OUT/expert.json" 2>&1 \
    | tee "$OUT/expert.log" | grep -v "^reference\|^check\|^timing\|^baseline\|^start"
  exit 0
fi

step() { echo "== $1  (t=${SECONDS}s)"; }
step tests
# Timing tests (label gpu) run alone, after the rest, so no other work shares the GPU with them.
(cd build-gpu && timeout 180 ctest -j 8 -LE gpu --output-on-failure --timeout 150 >"$OUT/ctest.log" 2>&1)
ctest_rc=$?
(cd build-gpu && timeout 90 ctest -L gpu --output-on-failure --timeout 80 >>"$OUT/ctest.log" 2>&1) || ctest_rc=1
grep -E "tests passed|tests failed|\*\*\*Failed|Failed  |Skipped|Not Run|Timeout" "$OUT/ctest.log" | head -40
grep -E "measured|TB/s| us " "$OUT/ctest.log" | head -20

step "overhead: one task, all workloads, 3 seeds, timing, baselines (compile cache cold, then warm)"
rm -rf "$D2K_CACHE"
for pass in cold warm; do
  t0=$(date +%s.%N)
  timeout 100 build-gpu/src/d2k eval --tasks tests/fixtures/base 1 tests/fixtures/solutions/cuda_ok \
    --json "/tmp/overhead_$pass.json" >"/tmp/overhead_$pass.log" 2>&1
  t1=$(date +%s.%N)
  printf 'overhead %-5s %6.1f s  %s\n' "$pass" "$(python3 -c "print($t1 - $t0)")" \
    "$(grep -oE 'compile cache hit|compiled in [0-9.]+ s' "/tmp/overhead_$pass.log" | head -1)" | tee -a "$OUT/summary.txt"
done
cat /tmp/overhead_cold.log /tmp/overhead_warm.log >"$OUT/overhead.log"
tail -6 /tmp/overhead_warm.log

step calibrate
timeout 60 build-gpu/src/d2k calibrate 2>&1 | tee -a "$OUT/summary.txt" | tail -8

step "timing agreement and repeatability"
timeout 120 python3 bench/timing_agreement.py build-gpu 2>&1 | tee "$OUT/timing_agreement.txt" | tail -8

step "suite: expert solutions"
timeout 150 build-gpu/src/d2k eval --solutions expert --no-compile-baseline --json "$OUT/expert.json" 2>&1 \
  | tee "$OUT/expert.log" | grep -v "^reference\|^check\|^timing\|^baseline"
step summary
cat "$OUT/summary.txt" "$OUT/timing_agreement.txt"
echo "== ctest exit code: $ctest_rc"
