# Sourced by bench/candidates/*/ablate.sh (from the repository root, with `task` set): one variant's warm-L2
# CUDA-event median, and one variant's D2K_TIMELINE phase line, from bench/profile_cuda_solution.py.
# PROFILE_FLAGS (e.g. --queued) is passed to every timing run.
run() {  # label dir workload [define ...]
  local label=$1 dir=$2 w=$3 args=() d line
  shift 3
  for d in "$@"; do args+=(--define "$d"); done
  # shellcheck disable=SC2086  # PROFILE_FLAGS: words
  line=$(timeout 60 python3 bench/profile_cuda_solution.py "$task" "$dir" "$w" --calls 20 ${PROFILE_FLAGS:-} "${args[@]}" 2>&1 | tail -1)
  printf '%-34s %-22s %s\n' "$label" "$w" "$line"
}
timeline() {  # label dir workload [define ...]: the phase line of the last of 3 calls
  local label=$1 dir=$2 w=$3 args=() d
  shift 3
  for d in "$@"; do args+=(--define "$d"); done
  printf '%-34s %-22s %s\n' "$label" "$w" "$(timeout 60 python3 bench/profile_cuda_solution.py "$task" "$dir" "$w" \
    --calls 3 --define D2K_TIMELINE "${args[@]}" 2>&1 | grep '^timeline' | tail -1)"
}
# Splits "WORKLOAD ... [-- DEFINE ...]" into the arrays workloads (default llama3_b256_v128256) and defs (appended as
# --define D, after whatever defs already holds).
split_args() {
  workloads=()
  while (($#)); do
    if [[ $1 == -- ]]; then shift; for d in "$@"; do defs+=(--define "$d"); done; break; fi
    workloads+=("$1"); shift
  done
  ((${#workloads[@]})) || workloads=(llama3_b256_v128256)
}
