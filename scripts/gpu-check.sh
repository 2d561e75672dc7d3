#!/usr/bin/env bash
# On a GPU machine (the lent H200): builds d2k against .deps (scripts/device-deps.sh), runs the tests (GPU
# tests included), measures the evaluator, evaluates the suite's solutions, and prints a short table last.
# Logs and traces go to $OUT (or out/) for fetching.
#
#   scripts/gpu-check.sh [STEP...]     steps: tests redteam jail io overhead calibrate agreement experts naive pairs wrong
#                                      candidates (bench/candidates/*) profile targets
#                                      (default: tests overhead calibrate agreement experts naive targets)
#   AGREEMENT_SECTIONS=known,dobench,repeat,defenses   which parts of bench/timing_agreement.py run (default all)
#   SUITE_ARGS="--seeds 1 --max-time 2"               extra `d2k eval` arguments for the suite steps (e.g.
#                                                      --no-compile-baseline); SUITE_TASK_TIMEOUT seconds per task
#   REDTEAM_REGEX=gpu_side_stream|cuda_ok             which fixtures the redteam step runs (bench/redteam_fixtures.py)
#   OVERHEAD_PASSES="cold warm"                        the overhead step's passes (default: cold warm warm-no-compile-baseline)
#   SUITE_TASKS="001 002"                              which tasks the suite steps evaluate (default: all of tasks/suite.toml)
#   CANDIDATES="007_topk_stream"                      which bench/candidates/* folders the candidates step runs (a glob)
#   PROFILE="TASK_DIR SOLUTION_DIR WORKLOAD KERNEL_REGEX"  what the profile step runs under ncu (default: 007's expert)
#   WRONG_ONLY="ignores_restarts no_l2_normalization"  the wrong step runs only these known-bad solutions (of any
#                                                      task: SUITE_TASKS does not narrow it)
#   GPU_DEADLINE=540                                   seconds after which no step starts and running ones are cut
#   TESTS_REGEX='^(Fixtures|Eval)' TESTS_TIMEOUT=330   the tests step's ctest selection and bound (the whole selection
#                                                      took ~590 s on the H200 on 2026-12-04: split it over two calls)
#   TESTS_SHARD=1/2                                    run every 2nd selected test from the 1st (then 2/2 in a second
#                                                      call); the timer tests (ctest -L gpu) run in shard 1 only.
#                                                      ctest ignores a stride past the end: a shard of a selection
#                                                      smaller than n runs all of it
#
# Every step is bounded by a timeout and by GPU_DEADLINE, so one call of the device tool (600 s) returns whatever
# was measured. Everything is written under a work folder and packed at the end into $OUT/results.tgz, beside
# $OUT/summary.txt (the device tool brings back at most 8 files).
set -uo pipefail
cd "$(dirname "$0")/.."
FINAL_OUT="${OUT:-$PWD/out}"
OUT=/tmp/d2k-gpu-results
rm -rf "$OUT" && mkdir -p "$OUT" "$FINAL_OUT"
DEADLINE=${GPU_DEADLINE:-540}
left() { echo $((DEADLINE - SECONDS)); }
bounded() { local t=$1 l; l=$(left); ((l < t)) && t=$l; ((t < 1)) && t=1; echo "$t"; }
pack() { tar czf "$FINAL_OUT/results.tgz" -C "$OUT" . 2>/dev/null; cp "$OUT/summary.txt" "$FINAL_OUT/" 2>/dev/null; }
trap pack EXIT
export D2K_CACHE="$PWD/.cache/d2k"
PY="$(command -v python3)"
STEPS=("$@")
((${#STEPS[@]})) || STEPS=(tests overhead calibrate agreement experts naive targets)
want() { [[ " ${STEPS[*]} " == *" $1 "* ]]; }
step() { echo "== $1  (t=${SECONDS}s)"; }
progress_lines='^\[ *[0-9.]+s\] '
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv \
  | tee "$OUT/gpu.txt"

step build
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" \
  -DPython3_EXECUTABLE="$PY" -DD2K_WITH_STORE_AND_HTTP=OFF -DCMAKE_BUILD_RPATH="$PWD/.deps/usr/lib/x86_64-linux-gnu" \
  >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
TARGETS=(--target d2k d2k-worker)
want tests && TARGETS+=(d2k_tests d2k_timing_tests d2k_gpu_tests d2k_sandbox_tests)
want io && TARGETS+=(d2k_bench_compare)
cmake --build build-gpu -j 16 "${TARGETS[@]}" >>"$OUT/build.log" 2>&1 \
  || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
ctest_rc=0

run_tests() {
  step tests
  # The CPU-side tests run in CI; here the end-to-end evaluations run one at a time (tests that time on the GPU
  # never share it), then the timer tests.
  : >"$OUT/ctest.log"
  local shard=() k=1
  if [[ -n ${TESTS_SHARD:-} ]]; then  # "k/n": every n-th test from the k-th (ctest -I k,,n), timer tests in shard 1
    [[ $TESTS_SHARD =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] && ((BASH_REMATCH[1] <= BASH_REMATCH[2])) ||
      { echo "TESTS_SHARD must be k/n with 1 <= k <= n, not '$TESTS_SHARD'" | tee -a "$OUT/summary.txt"; return; }
    k=${BASH_REMATCH[1]}
    shard=(-I "$k,,${BASH_REMATCH[2]}")
  fi
  (cd build-gpu && timeout "$(bounded "${TESTS_TIMEOUT:-330}")" ctest -j 1 -R "${TESTS_REGEX:-^(Fixtures|Eval)}" \
    "${shard[@]}" --output-on-failure --timeout 100 >>"$OUT/ctest.log" 2>&1) || ctest_rc=1
  if ((k == 1)); then
    (cd build-gpu && timeout "$(bounded 60)" ctest -L gpu --output-on-failure --timeout 50 >>"$OUT/ctest.log" 2>&1) ||
      ctest_rc=1
  fi
  grep -E "tests passed|tests failed|\*\*\*Failed|Failed  |Not Run|Timeout" "$OUT/ctest.log" | head -40
}

run_redteam() {
  step "red team: the runtime defenses against the fixtures (d2k eval on each, no test binaries needed)"
  timeout "$(bounded 400)" python3 bench/redteam_fixtures.py build-gpu \
    "${REDTEAM_REGEX:-^(gpu_|jail_|privsep_|cuda_ok|triton_ok|cuda_illegal|cuda_hang)}" "$(left)" 2>&1 \
    | tee "$OUT/redteam.txt" | tee -a "$OUT/summary.txt"
}

run_overhead() {
  step "overhead: the toy task, all workloads, 3 seeds, timing, both baselines (compile cache cold, then warm)"
  rm -rf "$D2K_CACHE/cuda"
  for pass in ${OVERHEAD_PASSES:-cold warm warm-no-compile-baseline}; do
    local extra=()
    [[ $pass == *no-compile* ]] && extra=(--no-compile-baseline)
    t0=$(date +%s.%N)
    timeout "$(bounded 100)" build-gpu/src/d2k eval --tasks tests/fixtures/base 1 tests/fixtures/solutions/cuda_ok \
      "${extra[@]}" --json "/tmp/overhead_$pass.json" >"/tmp/overhead_$pass.log" 2>&1
    t1=$(date +%s.%N)
    printf 'overhead %-24s %6.1f s wall  %s  %s\n' "$pass" "$(python3 -c "print($t1 - $t0)")" \
      "$(grep -oE 'compile cache hit|compiled in [0-9.]+ s' "/tmp/overhead_$pass.log" | head -1)" \
      "$(python3 -c "import json,sys; s=json.load(open(sys.argv[1]))[0].get('seconds',{}); print(' '.join(f'{k}={v:.1f}s' for k,v in s.items()))" "/tmp/overhead_$pass.json" 2>/dev/null)" \
      | tee -a "$OUT/summary.txt"
    cp "/tmp/overhead_$pass.json" "$OUT/" 2>/dev/null
  done
  # A Triton solution evaluated again must compile nothing: its own JIT cache (\$D2K_CACHE/triton-solutions) gains no file.
  local tri=(build-gpu/src/d2k eval --tasks tests/fixtures/base 1 tests/fixtures/solutions/triton_ok --workloads big
             --no-compile-baseline --max-time 1)
  timeout "$(bounded 60)" "${tri[@]}" >/tmp/overhead_triton1.log 2>&1
  local before after
  before=$(find "$D2K_CACHE/triton-solutions" -type f 2>/dev/null | wc -l)
  timeout "$(bounded 60)" "${tri[@]}" >/tmp/overhead_triton2.log 2>&1
  after=$(find "$D2K_CACHE/triton-solutions" -type f 2>/dev/null | wc -l)
  echo "overhead triton re-evaluation: $before cache files before, $after after ($((after - before)) new; 0 = compiled nothing)" \
    | tee -a "$OUT/summary.txt"
  cat /tmp/overhead_cold.log /tmp/overhead_warm.log >"$OUT/overhead.log"
  grep -vE "$progress_lines" /tmp/overhead_warm.log | tail -6
}

run_io() {
  step "the harness's tensor file I/O: one thread vs the I/O threads (512 MiB of float64 from the GPU)"
  # the pinned staging path round-trips device tensors exactly (it skips on a machine without CUDA)
  timeout "$(bounded 120)" python3 -m pytest -q -p no:cacheprovider tests/python/test_harness_tensor_io.py 2>&1 \
    | tail -3 | tee -a "$OUT/summary.txt"
  timeout "$(bounded 120)" python3 bench/harness_io_speed.py 512 2>&1 | tee -a "$OUT/summary.txt"
  # the supervisor's side: reading an output and its float64 expected value (64 Mi elements), then the compare
  [[ -x build-gpu/bench/d2k_bench_compare ]] &&
    timeout "$(bounded 60)" build-gpu/bench/d2k_bench_compare 67108864 /dev/shm 2>&1 | tee -a "$OUT/summary.txt"
}

run_jail() {
  step "the solution worker's bwrap sandbox on this machine (jail_snoops must pass inside it)"
  timeout "$(bounded 90)" build-gpu/src/d2k eval --tasks tests/fixtures/base 1 tests/fixtures/solutions/jail_snoops \
    --workloads ragged,big --no-static-checks --no-compile-baseline --max-time 1 --worker-sandbox bwrap \
    --json "$OUT/jail.json" >"$OUT/jail.log" 2>&1
  local rc=$?
  grep -vE "$progress_lines" "$OUT/jail.log" | tail -8
  if ((rc != 0)); then
    echo "jail: the bwrap sandbox failed here (exit $rc); the suite steps run with --worker-sandbox none" | tee -a "$OUT/summary.txt"
    SUITE_ARGS="${SUITE_ARGS:-} --worker-sandbox none"
  else
    echo "jail: jail_snoops passed inside the bwrap sandbox on the GPU" | tee -a "$OUT/summary.txt"
  fi
}

run_calibrate() {
  step calibrate
  timeout 60 build-gpu/src/d2k calibrate 2>&1 | tee -a "$OUT/summary.txt" | tail -8
}

run_agreement() {
  step "timing agreement, repeatability, cost of the defenses"
  timeout "$(bounded 200)" python3 bench/timing_agreement.py build-gpu ${AGREEMENT_SECTIONS:-} 2>&1 | tee "$OUT/timing_agreement.txt"
}

run_suite() {  # $1: experts, naive, wrong, or pairs (each task's expert then its naive kernel: every target judged)
  local kind=$1 sel=${1%s}
  [[ $kind == pairs ]] && sel="expert,naive"
  local extra=()
  [[ $kind == wrong ]] && extra=(--correctness-only)  # a known-bad solution needs no timing, nor the big references
  # One evaluation per task, each bounded, so one task that hangs costs only its own share.
  for task in $(python3 -c "import tomllib; print(' '.join(tomllib.load(open('tasks/suite.toml','rb'))['tasks']))"); do
    [[ -n "${SUITE_TASKS:-}" && " $SUITE_TASKS " != *" ${task%%_*} "* && ! ($kind == wrong && -n "${WRONG_ONLY:-}") ]] \
      && continue
    if (($(left) < 15)); then echo "deadline: $kind of $task not run" | tee -a "$OUT/summary.txt"; continue; fi
    local pick=$sel
    if [[ $kind == wrong && -n "${WRONG_ONLY:-}" ]]; then  # only the named known-bad solutions of this task
      local names=() n
      for n in $WRONG_ONLY; do [[ -d tasks/$task/wrong/$n ]] && names+=("$n"); done
      ((${#names[@]})) || continue
      pick="wrong:$(IFS=,; echo "${names[*]}")"
    fi
    step "suite: $kind solutions of $task"
    timeout "$(bounded "${SUITE_TASK_TIMEOUT:-300}")" build-gpu/src/d2k eval "$task" --solutions "$pick" "${extra[@]}" ${SUITE_ARGS:-} \
      --json "$OUT/${kind}_${task%%_*}.json" 2>&1 | tee -a "$OUT/$kind.log" | grep -vE "$progress_lines" \
      | tee -a "$OUT/summary.txt"
  done
}

run_profile() {  # one CUDA solution on one workload, plain and under Nsight Compute (bench/profile_cuda_solution.py)
  local spec=(${PROFILE:-tasks/007_topk_topp_sampling tasks/007_topk_topp_sampling/expert llama3_b256_v128256 topk})
  step "profile ${spec[1]} on ${spec[2]}"
  timeout "$(bounded 60)" python3 bench/profile_cuda_solution.py "${spec[@]:0:3}" --calls 20 2>&1 | tee -a "$OUT/summary.txt"
  local ncu_bin
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [[ -n "$ncu_bin" ]] || { echo "ncu not found" | tee -a "$OUT/summary.txt"; return; }
  timeout "$(bounded 150)" "$ncu_bin" --clock-control none --kernel-name "regex:${spec[3]}" --launch-skip 2 \
    --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis \
    python3 bench/profile_cuda_solution.py "${spec[@]:0:3}" --calls 4 >"$OUT/profile_ncu.txt" 2>&1
  grep -E "Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per|Registers Per|Block Limit|Stall|No Eligible|==PROF==|==ERROR==" \
    "$OUT/profile_ncu.txt" | head -40 | tee -a "$OUT/summary.txt"
}

run_candidates() {  # each bench/candidates/NNN_*/ is a solution of task NNN, evaluated with every timed workload
  for dir in bench/candidates/${CANDIDATES:-*}/; do
    [[ -d $dir ]] || { echo "no candidate in bench/candidates/" | tee -a "$OUT/summary.txt"; break; }
    [[ -f $dir/solution.toml ]] || continue  # a folder of tools for a solution kept elsewhere (e.g. a task's expert)
    local name task
    name=$(basename "$dir")
    task=${name%%_*}
    if (($(left) < 15)); then echo "deadline: candidate $name not run" | tee -a "$OUT/summary.txt"; continue; fi
    step "candidate $name (task $task)"
    timeout "$(bounded "${SUITE_TASK_TIMEOUT:-300}")" build-gpu/src/d2k eval "$task" "$dir" ${SUITE_ARGS:-} \
      --json "$OUT/candidate_$name.json" 2>&1 | tee -a "$OUT/candidates.log" | grep -vE "$progress_lines" \
      | tee -a "$OUT/summary.txt"
  done
}

# The steps run in the order given.
for s in "${STEPS[@]}"; do
  case "$s" in
    tests|redteam|overhead|calibrate|agreement|jail|io|candidates|profile) "run_$s" ;;
    experts|naive|wrong|pairs) run_suite "$s" ;;
    targets)
      if compgen -G "$OUT/pairs_*.json" >/dev/null; then
        python3 bench/suite_targets.py --pairs "$OUT"/pairs_*.json | tee "$OUT/targets.txt"
      else
        python3 bench/suite_targets.py "$OUT"/experts_*.json --naive "$OUT"/naive_*.json | tee "$OUT/targets.txt"
      fi ;;
    *) echo "unknown step: $s" ;;
  esac
done

step summary
cat "$OUT/summary.txt" 2>/dev/null
[[ -f "$OUT/timing_agreement.txt" ]] && cat "$OUT/timing_agreement.txt"
echo "== ctest exit code: $ctest_rc"
