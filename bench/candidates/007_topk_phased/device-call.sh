#!/usr/bin/env bash
# The 007 "phased" candidate on the GPU: the correctness check of cpu_check.cpp built by nvcc (full sizes,
# 20,000-row distribution tests), warm-L2 medians beside the expert (bench/profile_cuda_solution.py --queued: GPU
# time alone) with variants, the D2K_TIMELINE spans on every workload, then `d2k eval` of the candidate (every
# workload, cold L2, the measurement of record; SKIP_EVAL=1 stops before it). Usage (on the GPU machine, repository root): bash bench/candidates/007_topk_phased/device-call.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
cand=bench/candidates/007_topk_phased
task=tasks/007_topk_topp_sampling
nvidia-smi --query-gpu=name --format=csv,noheader
echo "== builds (all at once)"
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -x cu -Iinclude "$cand/cpu_check.cpp" -o /tmp/ph_gpu &
for d in "" D2K_STATS_ONLY D2K_CARVEOUT D2K_PSEL_BITS D2K_TIMELINE; do
  args=()
  IFS=, read -ra ds <<<"$d"
  for x in "${ds[@]}"; do args+=(--define "$x"); done
  python3 bench/profile_cuda_solution.py "$task" "$cand" llama3_b256_v128256 --build-only "${args[@]}" >/dev/null &
done
python3 bench/profile_cuda_solution.py "$task" "$task/expert" llama3_b256_v128256 --build-only >/dev/null &
wait
echo "== gpu check"
timeout 120 /tmp/ph_gpu
echo "== warm medians"
source bench/candidates/ablate-lib.sh
export PROFILE_FLAGS=${PROFILE_FLAGS---queued}  # GPU time alone, as d2k eval times it
all=(llama3_b256_v128256 qwen2_b128_v151936 llama3_b16_v128256 llama2_b64_v32000)
for w in "${all[@]}"; do
  run expert "$task/expert" "$w"
  run phased "$cand" "$w"
  run "phased, full carveout" "$cand" "$w" D2K_CARVEOUT
done
run "phased, summary pass only" "$cand" llama3_b256_v128256 D2K_STATS_ONLY
run "phased, top-p by bits" "$cand" llama3_b256_v128256 D2K_PSEL_BITS
for w in "${all[@]}"; do  # the last call's spans and list phases
  echo "== timeline $w"
  timeout 60 python3 bench/profile_cuda_solution.py "$task" "$cand" "$w" --calls 3 --define D2K_TIMELINE 2>&1 \
    | grep '^timeline' | tail -3
done
[[ ${SKIP_EVAL:-0} == 1 ]] && exit 0
echo "== d2k eval"
CANDIDATES=007_topk_phased SUITE_ARGS="--seeds 1 --max-time 1 --no-baselines" GPU_DEADLINE=${GPU_DEADLINE:-300} \
  bash scripts/gpu-check.sh candidates 2>&1 | tail -30
