#!/usr/bin/env bash
# Planned H200 calls for the CUDA candidate of 004 (written 2026-12-05; no device was lent that session, so they have
# not run yet). Each part fits one device call (10 minutes):
#   part 1: `d2k eval` (correctness on every workload, cold timing), then warm medians of the solution as it is and
#           with D2K_FUSE_T (the walk builds T itself) on the four timed workloads;
#   part 2: warm medians of the prep alone and the walk alone, the V split forced to 1, 2, 4 on the two workloads
#           with few chains, then the walk under Nsight Compute on the largest workload.
# Run: bash bench/candidates/004_deltanet_cuda/planned-call.sh 1 2>&1 | tee $OUT/call.txt | tail -80   (carry .deps)
set -uo pipefail
part=${1:-1}
cd "$(dirname "$0")/../../.."
source bench/candidates/ablate-lib.sh
task=tasks/004_chunked_gated_deltanet
cand=bench/candidates/004_deltanet_cuda
workloads=(qwen3_next_h32_16seq_64k qwen3_next_h32_4seq_16k qwen3_next_h32_1seq_32k qwen3_next_tp2_h16_64seq_8k)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -shared -cudart shared -Iinclude \
  -Xptxas -v $cand/solution.cu -o /tmp/cand004.so 2>&1 | grep -E "error|registers|spill"
if [[ $part == 1 ]]; then
  echo "== d2k eval (t=${SECONDS}s)"
  GPU_DEADLINE=330 CANDIDATES='004_deltanet_cuda' SUITE_ARGS="--seeds 1 --max-time 1 --no-baselines" \
    SUITE_TASK_TIMEOUT=240 OUT=/tmp/call-eval bash scripts/gpu-check.sh candidates 2>&1 | grep -vE '^\[' | tail -30
  echo "== warm medians (t=${SECONDS}s)"
  for w in "${workloads[@]}"; do
    run "cuda" "$cand" "$w"
    run "cuda, FUSE_T (walk builds T)" "$cand" "$w" D2K_FUSE_T
  done
else
  echo "== prep alone, walk alone (t=${SECONDS}s)"
  for w in qwen3_next_h32_16seq_64k qwen3_next_h32_1seq_32k; do
    run "cuda, prep only" "$cand" "$w" D2K_ONLY_PREP
    run "cuda, walk only" "$cand" "$w" D2K_ONLY_WALK
  done
  echo "== V split over CTAs (t=${SECONDS}s)"
  for w in qwen3_next_h32_1seq_32k qwen3_next_h32_4seq_16k; do
    for sp in 1 2 4; do run "cuda, D2K_SPLIT=$sp" "$cand" "$w" D2K_SPLIT=$sp; done
  done
  echo "== ncu, walk on 16seq_64k (t=${SECONDS}s)"
  GPU_DEADLINE=200 PROFILE="$task $cand qwen3_next_h32_16seq_64k walk" OUT=/tmp/call-prof \
    bash scripts/gpu-check.sh profile 2>&1 | grep -vE '^\[' | tail -45
fi
echo "== done (t=${SECONDS}s)"
