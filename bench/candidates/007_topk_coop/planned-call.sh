#!/usr/bin/env bash
# Planned H200 call (written 2026-12-05; no device was lent that session, so it has not run yet): the L2 flush
# probe; the L2HINT variant of the coop candidate (evict_first for rows no pass re-reads), warm medians and per-row
# times; d2k eval of coop and coop + L2HINT (a copy made on the device, bench/candidates/007_topk_coop_l2, never
# committed); the timer test of the flush against evict_last loads; the coop variants (ablate-variants.sh).
# Run: bash bench/candidates/007_topk_coop/planned-call.sh 2>&1 | tee $OUT/call.txt | tail -120   (carry .deps)
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/candidates/ablate-lib.sh
task=tasks/007_topk_topp_sampling
cand=bench/candidates/007_topk_coop
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
echo "== L2 policy probe (bench/timing/l2_policy_probe.cu)"
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a bench/timing/l2_policy_probe.cu -o /tmp/l2probe &&
  timeout 60 /tmp/l2probe
echo "== L2HINT (t=${SECONDS}s)"
for w in llama3_b256_v128256 qwen2_b128_v151936; do
  run "coop" "$cand" "$w"
  run "coop, L2HINT" "$cand" "$w" L2HINT
  run "coop, L2HINT NO_ALLLIST" "$cand" "$w" L2HINT NO_ALLLIST
done
echo "== per-row times (t=${SECONDS}s)"
bash $cand/row-times.sh llama3_b256_v128256
bash $cand/row-times.sh llama3_b256_v128256 -- L2HINT
echo "== d2k eval (t=${SECONDS}s)"
mkdir -p bench/candidates/007_topk_coop_l2
{ echo '#define L2HINT'; cat $cand/solution.cu; } >bench/candidates/007_topk_coop_l2/solution.cu
sed 's/^name = .*/name = "coop_l2"/' $cand/solution.toml >bench/candidates/007_topk_coop_l2/solution.toml
GPU_DEADLINE=260 CANDIDATES='007_topk_coop*' SUITE_ARGS="--seeds 1 --max-time 1 --no-baselines" SUITE_TASK_TIMEOUT=120 \
  OUT=/tmp/call1-eval bash scripts/gpu-check.sh candidates 2>&1 | grep -vE '^\[' | tail -40
echo "== timer tests of the flush (t=${SECONDS}s)"
cmake --build build-gpu -j 16 --target d2k_gpu_tests >/tmp/gpu-tests-build.log 2>&1 || tail -20 /tmp/gpu-tests-build.log
timeout 90 build-gpu/tests/gpu/d2k_gpu_tests --gtest_filter='TimingGpu.L2Flush*' 2>&1 | grep -E '^\[ *(timing|  OK|  FAILED|  PASSED)|Failure|Expected|Which|actual' 
echo "== coop variants (t=${SECONDS}s)"
bash $cand/ablate-variants.sh
echo "== done (t=${SECONDS}s)"
