#!/usr/bin/env bash
# The 007 "phased" candidate's time, placed: the D2K_TIMELINE build's kernel spans, routes and list-row phases on
# three workloads, then Nsight Compute's occupancy, warp-state and memory sections for the decide and test kernels
# on llama3_b256_v128256 (ncu output in $OUT/ncu.txt). Usage (GPU machine, repository root):
#   bash bench/candidates/007_topk_phased/profile-call.sh [DEFINE ...]   (defines for every build, e.g. D2K_PROP=4)
set -uo pipefail
cd "$(dirname "$0")/../../.."
cand=bench/candidates/007_topk_phased
task=tasks/007_topk_topp_sampling
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader
extra=()
for d in "$@"; do extra+=(--define "$d"); done
python3 bench/profile_cuda_solution.py "$task" "$cand" llama3_b256_v128256 --build-only --define D2K_TIMELINE "${extra[@]}" >/dev/null &
python3 bench/profile_cuda_solution.py "$task" "$cand" llama3_b256_v128256 --build-only "${extra[@]}" >/dev/null &
wait
source bench/candidates/ablate-lib.sh
for w in llama3_b256_v128256 qwen2_b128_v151936 llama3_b16_v128256; do
  echo "== $w"
  timeout 60 python3 bench/profile_cuda_solution.py "$task" "$cand" "$w" --calls 3 --define D2K_TIMELINE "${extra[@]}" 2>&1 \
    | grep '^timeline' | tail -3
  run phased "$cand" "$w" "$@"
done
echo "== ncu (decide, test) on llama3_b256_v128256"
timeout 200 ncu --clock-control none --kernel-name regex:'decide_kernel|test_kernel' --launch-skip 4 --launch-count 2 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
  python3 bench/profile_cuda_solution.py "$task" "$cand" llama3_b256_v128256 --calls 5 "${extra[@]}" >"$out/ncu.txt" 2>&1
echo "ncu rc $?"
grep -E "decide_kernel|test_kernel|Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|Warp Cycles Per Issued|Issue Slots Busy|Memory Throughput|DRAM Throughput|No Eligible|One or More|Eligible Warps|Active Warps" "$out/ncu.txt" | head -70
