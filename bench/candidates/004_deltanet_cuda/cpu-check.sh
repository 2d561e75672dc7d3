#!/usr/bin/env bash
# Builds cpu_check.cpp (solution.cu under the CPU emulation of bench/cuda_emu) and runs it: the candidate's kernels
# against the float64 token recurrence on small ragged batches, as it is (the warp-specialized walk with T from the
# prep and wgmma) and with its variants' flags (D2K_CLASSIC: the walk of 2026-12-05; D2K_FUSE_T: it builds T
# itself; D2K_WGMMA: its S_0 K^T and S_0 Q^T through wgmma; D2K_WS: the warp-specialized walk building T, with
# D2K_WS_WGMMA=1, 2 or 3 its wgmma forms; D2K_WS_PREP without wgmma, or with D2K_WS_WGMMA=3; D2K_PREP_PACK, the
# prep with T's blocks in A's matrix; D2K_PREP_MMA, the prep's Gram matrix on mma.sync; D2K_PREP_PERSIST, the
# persistent prep, on three CTAs, with D2K_PREP_TSTORE_OFF (T by the threads' stores) or D2K_PREP_AHEAD_OFF;
# D2K_T_FULL, T itself from the prep instead of v_new by block substitution, in several walks). The emulation does not catch a missing barrier between threads' reads and
# writes of the same shared words (it passed with the packed prep's barrier removed): the GPU check does. No GPU needed. Usage: cpu-check.sh [--quick]
# (--quick: fewer cases; the default, CLASSIC, WS, WS with WS_WGMMA=2, and FUSE_T with WGMMA)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
out="${TMPDIR:-/tmp}/d2k-004-cpu-check"
variants=("" -DD2K_CLASSIC -DD2K_WS "-DD2K_WS -DD2K_WS_WGMMA=2" "-DD2K_FUSE_T -DD2K_WGMMA")
[[ ${1:-} == --quick ]] || variants+=("-DD2K_WS -DD2K_WS_WGMMA=1" "-DD2K_WS -DD2K_WS_PREP" "-DD2K_WS -DD2K_WS_WGMMA=3")
[[ ${1:-} == --quick ]] || variants+=("-DD2K_WS -DD2K_WS_PREP -DD2K_WS_WGMMA=3" -DD2K_PREP_PACK)
[[ ${1:-} == --quick ]] || variants+=(-DD2K_FUSE_T -DD2K_WGMMA -DD2K_PREP_MMA "-DD2K_PREP_PERSIST -DD2K_PREP_GRID=3")
[[ ${1:-} == --quick ]] ||
  variants+=("-DD2K_PREP_PERSIST -DD2K_PREP_GRID=3 -DD2K_PREP_TSTORE_OFF" "-DD2K_PREP_PERSIST -DD2K_PREP_GRID=3 -DD2K_PREP_AHEAD_OFF")
[[ ${1:-} == --quick ]] || variants+=(-DD2K_T_FULL "-DD2K_CLASSIC -DD2K_T_FULL" "-DD2K_WS -DD2K_T_FULL"
  "-DD2K_PREP_PERSIST -DD2K_PREP_GRID=3 -DD2K_PREP_TSTORE_OFF -DD2K_T_FULL" "-DD2K_FUSE_T -DD2K_WGMMA -DD2K_T_FULL")
rc=0
for variant in "${variants[@]}"; do
  echo "== solution.cu ${variant:-(default)}"
  # shellcheck disable=SC2086  # the variant's flags are separate words
  g++ -std=c++20 -O2 -pthread -DD2K_CPU_EMU $variant -Wno-unknown-pragmas -I"$root/include" "$here/cpu_check.cpp" \
    -o "$out"
  "$out" "$@" || rc=1
done
exit $rc
