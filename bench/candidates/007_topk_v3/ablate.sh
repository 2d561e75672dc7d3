#!/usr/bin/env bash
# Variants of the 007 v3 candidate beside v2 and the expert (H200): draws per round (NDRAW), static vs dynamic
# rows, TMA chunk size, and per-row phase times (D2K_TIMELINE). Warm-L2 CUDA-event medians from
# bench/profile_cuda_solution.py, not d2k eval's cold figures.
# Usage (on the GPU machine): bash bench/candidates/007_topk_v3/ablate.sh [WORKLOAD ...]
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/candidates/ablate-lib.sh
task=tasks/007_topk_topp_sampling
cand=bench/candidates/007_topk_v3
v2=${V2:-bench/candidates/007_topk_v2}
workloads=("$@")
((${#workloads[@]})) || workloads=(llama3_b256_v128256 qwen2_b128_v151936 llama3_b16_v128256 llama2_b64_v32000)
for w in "${workloads[@]}"; do
  run expert "$task/expert" "$w"
  [[ -d $v2 ]] && run "v2, CHUNK_ITERS=16" "$v2" "$w" CHUNK_ITERS=16
  run "v3" "$cand" "$w"
done
w=${workloads[0]}
for d in 1 2 8; do run "v3, NDRAW=$d" "$cand" "$w" NDRAW=$d; done
run "v3, static rows" "$cand" "$w" D2K_STATIC_ROWS
run "v3, NDRAW=1, static rows" "$cand" "$w" NDRAW=1 D2K_STATIC_ROWS
run "v3, CHUNK_ITERS=4" "$cand" "$w" CHUNK_ITERS=4
for w in "${workloads[@]:0:3}"; do timeline "v3 timeline" "$cand" "$w"; done
timeline "v3 timeline, NDRAW=1" "$cand" "${workloads[0]}" NDRAW=1
timeline "v3 timeline, static rows" "$cand" "${workloads[0]}" D2K_STATIC_ROWS
