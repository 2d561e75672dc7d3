#!/usr/bin/env bash
# Builds cpu_check.cpp (solution.cu under the CPU emulation of bench/cuda_emu) and runs it: the candidate's kernels
# against the float64 token recurrence on small ragged batches, once as it is and once with D2K_FUSE_T (the walk
# builds T itself). No GPU needed. Usage: cpu-check.sh [--quick]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
out="${TMPDIR:-/tmp}/d2k-004-cpu-check"
rc=0
for variant in "" -DD2K_FUSE_T; do
  echo "== solution.cu ${variant:-(default)}"
  g++ -std=c++20 -O2 -pthread -DD2K_CPU_EMU $variant -Wno-unknown-pragmas -I"$root/include" "$here/cpu_check.cpp" -o "$out"
  "$out" "$@" || rc=1
done
exit $rc
