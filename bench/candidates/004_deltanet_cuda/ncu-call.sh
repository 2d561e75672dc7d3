#!/usr/bin/env bash
# Nsight Compute on the default form's two heavy kernels (2026-12-06, eighteenth session): the prep (its A phase was
# clocked at 9.8k of 20.9k cycles per CTA, far above its instruction count) and the warp-specialized walk (which warps
# stall on what). Per kernel: the details page (speed-of-light, pipes, warp states, issue) and the SASS source page
# with per-instruction stall samples as CSV, gzipped under $OUT. Extra defines (e.g. D2K_PREP_PACK) go to both
# builds. ~2 min. Run from the repository root (carry .deps):
#   bash bench/candidates/004_deltanet_cuda/ncu-call.sh [DEFINE ...]
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
task=tasks/004_chunked_gated_deltanet
cand=bench/candidates/004_deltanet_cuda  # tools and copies
sol=tasks/004_chunked_gated_deltanet/expert  # the solution (the task's expert since 2026-12-07)
w=qwen3_next_h32_16seq_64k
out=${OUT:-/tmp/ncu-out}
mkdir -p "$out"
defs=()
for d in "$@"; do defs+=(--define "$d"); done
command -v ncu >/dev/null || { echo "ncu: not on the PATH"; exit 3; }
profile() {  # name kernel-regex [extra defines]: one launch of the kernel, all sections, then its pages
  local name=$1 kern=$2
  shift 2
  echo "== ncu $name (t=${SECONDS}s)"
  timeout 240 ncu --clock-control none --kernel-name "regex:$kern" --launch-skip 1 --launch-count 1 --set full \
    --import-source yes -f -o "/tmp/$name" python3 bench/profile_cuda_solution.py "$task" "$sol" "$w" --calls 2 \
    "${defs[@]}" "$@" 2>&1 | grep -vE "^==PROF==" | tail -3
  ncu --import "/tmp/$name.ncu-rep" --page details >"$out/$name-details.txt" 2>&1
  ncu --import "/tmp/$name.ncu-rep" --page source --print-source sass --csv 2>&1 | gzip >"$out/$name-sass.csv.gz"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Executed Ipc|Achieved Occupancy|Theoretical Occupancy|Registers Per|Warp Cycles Per Issued|No Eligible|One or More" \
    "$out/$name-details.txt" | head -20
}
profile prep prep_kernel --define D2K_ONLY_PREP
profile walk walk_ws_kernel --define D2K_ONLY_WALK
ls -la "$out"
echo "== done (t=${SECONDS}s)"
