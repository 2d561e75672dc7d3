#!/usr/bin/env bash
# Where the 007 cluster kernel's time goes, by variants (H200): the expert, this candidate with 16- and 8-CTA
# clusters, and each with only the loads (ABLATE_LOAD_ONLY) or without the test rounds (ABLATE_NO_TEST).
# Warm-L2 CUDA-event medians from bench/profile_cuda_solution.py, not d2k eval's cold figures.
# Usage (on the GPU machine): bash bench/candidates/007_topk_cluster16/ablate.sh [WORKLOAD ...]
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/candidates/ablate-lib.sh
task=tasks/007_topk_topp_sampling
cand=bench/candidates/007_topk_cluster16
workloads=("$@")
((${#workloads[@]})) || workloads=(llama3_b256_v128256 llama3_b16_v128256 qwen2_b128_v151936)
for w in "${workloads[@]}"; do
  for m in 16 8; do
    echo "$w, MAX_CLUSTER=$m: $(timeout 60 python3 bench/profile_cuda_solution.py "$task" "$cand" "$w" --calls 1 \
      --define PRINT_PLAN --define MAX_CLUSTER=$m 2>&1 | grep -m1 '^plan')"
  done
  run expert "$task/expert" "$w"
  run "candidate (16 max)" "$cand" "$w"
  run "candidate, 8 only" "$cand" "$w" MAX_CLUSTER=8
  run "candidate, loads only" "$cand" "$w" ABLATE_LOAD_ONLY
  run "candidate 8, loads only" "$cand" "$w" MAX_CLUSTER=8 ABLATE_LOAD_ONLY
  run "candidate, no test rounds" "$cand" "$w" ABLATE_NO_TEST
  run "candidate 8, no test rounds" "$cand" "$w" MAX_CLUSTER=8 ABLATE_NO_TEST
done
