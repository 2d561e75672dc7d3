#!/usr/bin/env bash
# The 007 "coop" candidate beside the expert and the "stream" candidate (H200): warm-L2 CUDA-event medians from
# bench/profile_cuda_solution.py (not d2k eval's cold figures) on the four timed workloads, then per-row phase times.
# Usage (on the GPU machine): bash bench/candidates/007_topk_coop/ablate.sh [WORKLOAD ...]
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/candidates/ablate-lib.sh
task=tasks/007_topk_topp_sampling
cand=bench/candidates/007_topk_coop
workloads=("$@")
((${#workloads[@]})) || workloads=(llama3_b256_v128256 qwen2_b128_v151936 llama3_b16_v128256 llama2_b64_v32000)
for w in "${workloads[@]}"; do
  run expert "$task/expert" "$w"
  run stream bench/candidates/007_topk_stream "$w"
  run coop "$cand" "$w"
done
bash "$cand/row-times.sh" "${workloads[0]}"
