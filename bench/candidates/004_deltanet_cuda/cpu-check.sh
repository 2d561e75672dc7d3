#!/usr/bin/env bash
# Builds cpu_check.cpp (solution.cu under the CPU emulation of bench/cuda_emu) and runs it: the candidate's kernels
# against the float64 token recurrence on small ragged batches. No GPU needed. Usage: cpu-check.sh [--quick]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
out="${TMPDIR:-/tmp}/d2k-004-cpu-check"
g++ -std=c++20 -O2 -pthread -DD2K_CPU_EMU -Wno-unknown-pragmas -I"$root/include" "$here/cpu_check.cpp" -o "$out"
"$out" "$@"
