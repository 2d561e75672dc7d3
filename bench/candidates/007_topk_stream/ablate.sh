#!/usr/bin/env bash
# The 007 "stream" candidate beside the expert (H200): warm-L2 CUDA-event medians from
# bench/profile_cuda_solution.py (not d2k eval's cold figures), and the always-listed window (WINDOW, log2 units).
# Usage (on the GPU machine): bash bench/candidates/007_topk_stream/ablate.sh [WORKLOAD ...]
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/candidates/ablate-lib.sh
task=tasks/007_topk_topp_sampling
cand=bench/candidates/007_topk_stream
workloads=("$@")
((${#workloads[@]})) || workloads=(llama3_b256_v128256 qwen2_b128_v151936 llama3_b16_v128256 llama2_b64_v32000)
for w in "${workloads[@]}"; do
  run expert "$task/expert" "$w"
  run stream "$cand" "$w"
done
bash "$cand/tail-stats.sh" "${workloads[@]:0:2}"
