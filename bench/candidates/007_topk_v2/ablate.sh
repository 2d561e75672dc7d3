#!/usr/bin/env bash
# Variants of the 007 v2 candidate beside the expert (H200): st.async exchanges vs cluster barriers, TMA chunk
# sizes, and per-row phase times (D2K_TIMELINE). Warm-L2 CUDA-event medians from bench/profile_cuda_solution.py,
# not d2k eval's cold figures.
# Usage (on the GPU machine): bash bench/candidates/007_topk_v2/ablate.sh [WORKLOAD ...]
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/candidates/ablate-lib.sh
task=tasks/007_topk_topp_sampling
cand=bench/candidates/007_topk_v2
workloads=("$@")
((${#workloads[@]})) || workloads=(llama3_b256_v128256 qwen2_b128_v151936 llama3_b16_v128256 llama2_b64_v32000)
for w in "${workloads[@]}"; do
  run expert "$task/expert" "$w"
  run "v2" "$cand" "$w"
  run "v2, cluster barriers" "$cand" "$w" D2K_XCHG_BARRIER
done
w=${workloads[0]}
for c in 1 4 16; do run "v2, CHUNK_ITERS=$c" "$cand" "$w" CHUNK_ITERS=$c; done
for w in "${workloads[@]:0:3}"; do
  timeline "v2 timeline" "$cand" "$w"
  timeline "v2 timeline, barriers" "$cand" "$w" D2K_XCHG_BARRIER
done
