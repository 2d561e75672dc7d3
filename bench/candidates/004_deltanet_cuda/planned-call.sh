#!/usr/bin/env bash
# Planned H200 calls for the CUDA candidate of 004 (written 2026-12-05; no device was lent that session, so they have
# not run yet). Each part is meant to fit one device call (10 minutes):
#   part 1: gpu-check.sh (each variant and split against the float64 recurrence on small ragged cases), `d2k eval` (correctness on every workload, cold timing) of the solution as it is and of a copy built
#           with D2K_FUSE_T and D2K_WGMMA (bench/candidates/004_deltanet_cuda_fw, made here, never committed), then
#           warm medians of the variants on the largest workload;
#   part 2: warm medians of every variant on the other timed workloads, of the prep alone and the walk alone;
#   part 3: the V split forced to 1, 2, 4 on the two workloads with few chains, the walk under Nsight Compute.
#   part 0: the short form of part 1 (gpu-check.sh and the warm medians, no `d2k eval`; ~5 min).
# Run: bash bench/candidates/004_deltanet_cuda/planned-call.sh PART 2>&1 | tee $OUT/call.txt | tail -80   (carry .deps)
set -uo pipefail
part=${1:-1}
cd "$(dirname "$0")/../../.."
source bench/candidates/ablate-lib.sh
task=tasks/004_chunked_gated_deltanet
cand=bench/candidates/004_deltanet_cuda  # tools and copies
sol=tasks/004_chunked_gated_deltanet/expert  # the solution (the task's expert since 2026-12-07)
workloads=(qwen3_next_h32_16seq_64k qwen3_next_h32_4seq_16k qwen3_next_h32_1seq_32k qwen3_next_tp2_h16_64seq_8k)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -shared -cudart shared -Iinclude \
  -Xptxas -v $sol/solution.cu -o /tmp/cand004.so 2>&1 | grep -E "error|registers|spill"
variants() {  # warm medians of the four flag combinations on one workload
  run "cuda" "$sol" "$1"
  run "cuda, FUSE_T" "$sol" "$1" D2K_FUSE_T
  run "cuda, WGMMA" "$sol" "$1" D2K_WGMMA
  run "cuda, FUSE_T WGMMA" "$sol" "$1" D2K_FUSE_T D2K_WGMMA
}
if [[ $part == 0 || $part == 1 ]]; then
  echo "== gpu-check.sh (t=${SECONDS}s)"
  bash $cand/gpu-check.sh >/tmp/gpu-check.txt 2>&1
  grep -E "MISMATCH|returned|CUDA:" /tmp/gpu-check.txt | head -20
  sed -n '/^== summary/,$p' /tmp/gpu-check.txt
  [[ -n ${OUT:-} ]] && cp /tmp/gpu-check.txt "$OUT/"
fi
if [[ $part == 0 ]]; then  # the short form of part 1 (~5 min), for a session with little device time left
  echo "== warm medians (t=${SECONDS}s)"
  variants qwen3_next_h32_16seq_64k
elif [[ $part == 1 ]]; then
  echo "== d2k eval (t=${SECONDS}s)"
  mkdir -p ${cand}_fw
  { echo '#define D2K_FUSE_T'; echo '#define D2K_WGMMA'; cat $sol/solution.cu; } >${cand}_fw/solution.cu
  sed 's/^name = .*/name = "cuda_fuse_t_wgmma"/' $sol/solution.toml >${cand}_fw/solution.toml
  GPU_DEADLINE=420 CANDIDATES='004_deltanet_cuda*' SUITE_ARGS="--seeds 1 --max-time 1 --no-baselines" \
    SUITE_TASK_TIMEOUT=200 OUT=/tmp/call-eval bash scripts/gpu-check.sh candidates 2>&1 | grep -vE '^\[' | tail -40
  echo "== warm medians (t=${SECONDS}s)"
  variants qwen3_next_h32_16seq_64k
elif [[ $part == 2 ]]; then
  echo "== warm medians (t=${SECONDS}s)"
  for w in "${workloads[@]:1}"; do variants "$w"; done
  echo "== prep alone, walk alone (t=${SECONDS}s)"
  run "cuda, prep only" "$sol" qwen3_next_h32_16seq_64k D2K_ONLY_PREP
  run "cuda, walk only" "$sol" qwen3_next_h32_16seq_64k D2K_ONLY_WALK
else
  echo "== V split over CTAs (t=${SECONDS}s)"
  for w in qwen3_next_h32_1seq_32k qwen3_next_h32_4seq_16k; do
    for sp in 1 2 4; do run "cuda, D2K_SPLIT=$sp" "$sol" "$w" D2K_SPLIT=$sp; done
  done
  echo "== ncu, walk on 16seq_64k (t=${SECONDS}s)"
  GPU_DEADLINE=240 PROFILE="$task $sol qwen3_next_h32_16seq_64k walk" OUT=/tmp/call-prof \
    bash scripts/gpu-check.sh profile 2>&1 | grep -vE '^\[' | tail -45
fi
echo "== done (t=${SECONDS}s)"
