#!/usr/bin/env bash
# The correctness check of cpu_check.cpp on the GPU: the kernels built by nvcc (sm_90a) for each variant (default,
# i.e. D2K_WS D2K_WS_PREP D2K_WS_WGMMA=2 at split 1 and the classic walk's splits; D2K_FUSE_T, D2K_WGMMA, both) and
# each V split (the automatic one, then 1, 2, 4 forced), the classic walk (D2K_CLASSIC) alone, and the other
# warp-specialized forms (D2K_WS, with D2K_WS_WGMMA=1, 2, 3; D2K_WS_PREP without wgmma and with D2K_WS_WGMMA=3),
# and the packed prep (D2K_PREP_PACK), every case against the float64 recurrence. Meant as the first thing a device
# call runs, so that a failure names its case, split and variant. Usage: gpu-check.sh   (prints one summary line per build last; exits 1 on any mismatch)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
out="${TMPDIR:-/tmp}/d2k-004-gpu-check"
mkdir -p "$out"
builds=()
for variant in default FUSE_T WGMMA FUSE_T,WGMMA; do
  for split in auto 1 2 4; do builds+=("$variant:$split"); done
done
builds+=(CLASSIC:auto CLASSIC:1 WS:auto WS:1 WS,WS_WGMMA:auto WS,WS_WGMMA=2:auto WS,WS_PREP:auto WS,WS_PREP:1
  WS,WS_PREP,WS_WGMMA=3:auto WS,WS_PREP,WS_WGMMA=3:1 WS,WS_WGMMA=3:auto PREP_PACK:auto CLASSIC,PREP_PACK:4)
# GPU_CHECK_BUILDS="VARIANT:SPLIT ...": only these builds (e.g. "WS,WS_PREP:auto default:auto")
[[ -n ${GPU_CHECK_BUILDS:-} ]] && read -ra builds <<<"$GPU_CHECK_BUILDS"
build() {
  local variant=${1%%:*} split=${1##*:} flags=()
  [[ $variant == default ]] || for f in ${variant//,/ }; do flags+=("-DD2K_$f"); done
  [[ $split == auto ]] || flags+=("-DD2K_SPLIT=$split")
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -x cu "${flags[@]}" -I"$root/include" \
    "$here/cpu_check.cpp" -o "$out/check_${variant//,/_}_$split" 2>"$out/build_${variant//,/_}_$split.log"
}
export -f build
export here root out
printf '%s\n' "${builds[@]}" | xargs -P 16 -I{} bash -c 'build {} || echo "build {} failed"'
rc=0
summary=()
for b in "${builds[@]}"; do
  variant=${b%%:*} split=${b##*:} exe="$out/check_${variant//,/_}_$split"
  echo "== $variant, split $split"
  if [[ ! -x $exe ]]; then
    tail -5 "$out/build_${variant//,/_}_$split.log"
    summary+=("$variant split $split: BUILD FAILED")
    rc=1
    continue
  fi
  if timeout 120 "$exe"; then summary+=("$variant split $split: ok"); else summary+=("$variant split $split: FAILED"); rc=1; fi
done
echo "== summary"
printf '  %s\n' "${summary[@]}"
exit $rc
