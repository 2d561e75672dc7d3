#!/usr/bin/env bash
# Variants of the 007 v2 candidate beside the expert (H200): st.async exchanges vs cluster barriers, TMA chunk
# sizes, and per-row phase times (D2K_TIMELINE). Warm-L2 CUDA-event medians from bench/profile_cuda_solution.py,
# not d2k eval's cold figures.
# Usage (on the GPU machine): bash bench/candidates/007_topk_v2/ablate.sh [WORKLOAD ...]
set -uo pipefail
cd "$(dirname "$0")/../../.."
task=tasks/007_topk_topp_sampling
cand=bench/candidates/007_topk_v2
workloads=("$@")
((${#workloads[@]})) || workloads=(llama3_b256_v128256 qwen2_b128_v151936 llama3_b16_v128256 llama2_b64_v32000)
run() {  # label dir workload defines...
  local label=$1 dir=$2 w=$3 args=() d line
  shift 3
  for d in "$@"; do args+=(--define "$d"); done
  line=$(timeout 60 python3 bench/profile_cuda_solution.py "$task" "$dir" "$w" --calls 20 "${args[@]}" 2>&1 | tail -1)
  printf '%-30s %-22s %s\n' "$label" "$w" "$line"
}
timeline() {  # label workload defines...: the phase line of the last of 3 calls
  local label=$1 w=$2 args=() d
  shift 2
  for d in "$@"; do args+=(--define "$d"); done
  printf '%-30s %-22s %s\n' "$label" "$w" "$(timeout 60 python3 bench/profile_cuda_solution.py "$task" "$cand" "$w" \
    --calls 3 --define D2K_TIMELINE "${args[@]}" 2>&1 | grep '^timeline' | tail -1)"
}
for w in "${workloads[@]}"; do
  run expert "$task/expert" "$w"
  run "v2" "$cand" "$w"
  run "v2, cluster barriers" "$cand" "$w" D2K_XCHG_BARRIER
done
w=${workloads[0]}
for c in 1 4 16; do run "v2, CHUNK_ITERS=$c" "$cand" "$w" CHUNK_ITERS=$c; done
for w in "${workloads[@]:0:3}"; do
  timeline "v2 timeline" "$w"
  timeline "v2 timeline, barriers" "$w" D2K_XCHG_BARRIER
done
