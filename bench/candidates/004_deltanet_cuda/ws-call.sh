#!/usr/bin/env bash
# Device calls for the warp-specialized walk (D2K_WS, written 2026-12-05; parts 1, 3 and 4 ran on 2026-12-06, see
# NOTES.md). Since 2026-12-06 the solution's default is D2K_WS D2K_WS_PREP D2K_WS_WGMMA=2; "classic" (D2K_CLASSIC) is
# the walk of 2026-12-05, the baseline of every part. Each part fits one device call (10 minutes):
#   part 1 (~7 min): ptxas registers, gpu-check.sh (20 builds: every variant and split, D2K_WS, D2K_WS with
#           D2K_WS_WGMMA=1 (S_0 products by wgmma) and =2 (the state update too)), warm medians of the default walk
#           and the three D2K_WS forms on the four timed workloads (same machine, same call), their phase clocks;
#   part 2 (~4 min): `d2k eval` (every workload's correctness, cold timing) of the default and of a copy with the
#           defines given after the part (default: D2K_WS; e.g. `2 D2K_WS D2K_WS_WGMMA=2`, part 1's fastest form),
#           bench/candidates/004_deltanet_cuda_ws, made here, never committed;
#   part 3 (~8 min): D2K_WS_PREP (T from the prep kernel): gpu-check of its builds, warm medians against the
#           default, phase clocks and the walk alone, then `d2k eval` of a copy with the defines given after the part
#           (e.g. `3 D2K_WS D2K_WS_PREP D2K_WS_WGMMA=2`);
#   part 4 (~3 min): D2K_WS_PREP's producer phases, finer, with P's k-steps in one wgmma batch or two;
#   part 5 (~6 min): D2K_WS_WGMMA=3 (T y and P v_new by wgmma too) and D2K_PREP_PACK (six prep CTAs per SM), e.g.
#           `5 D2K_WS D2K_WS_PREP D2K_WS_WGMMA=3`; the prep's phases (D2K_PREP_PHASES) too;
#   part 6 (~5 min): the prep's Gram by wgmma and the branch-free P epilogue (after ncu-call.sh), e.g. `6 D2K_PREP_PACK`;
#   part 7 (~3 min): the default's record on the machine: warm medians and `d2k eval` of the candidate itself;
#   part 8 (~4 min): the persistent prep (D2K_PREP_PERSIST), e.g. `8 D2K_PREP_PERSIST`;
#   part 9 (~2 min): the persistent prep past 16 items per CTA as default against D2K_PREP_ONE;
#   part 10 (~6 min, nineteenth session): the default's choice of prep, the persistent prep's table entries carried
#           ahead (D2K_PREP_AHEAD_OFF the old form) and T's tensor stores (D2K_PREP_TSTORE): gpu-check, warm medians,
#           the prep's phases, `d2k eval` of the candidate and of a copy with the defines given;
#   part 11 (~8 min, nineteenth session): part 10 with D2K_T_SUBST (the prep stops at the diagonal inverses, the
#           state warps get v_new by block substitution): gpu-check, warm medians of the forms on 16seq_64k (the prep
#           and the walk alone too) and on the other three workloads, phases; `d2k eval` of a copy with the defines
#           given (e.g. `11 D2K_T_SUBST D2K_PREP_TSTORE`) right after the check.
# Since 2026-12-07 D2K_T_SUBST and D2K_PREP_TSTORE are the default (as defines they change nothing), so parts 10 and
# 11 rerun now time the default against itself; the old forms are D2K_T_FULL and D2K_PREP_TSTORE_OFF.
# Run from the repository root (carry .deps): bash bench/candidates/004_deltanet_cuda/ws-call.sh PART [DEFINE ...] 2>&1 |
#   tail -60
set -uo pipefail
part=${1:-1}
shift || true
defines=("$@")
((${#defines[@]})) || defines=(D2K_WS)
cd "$(dirname "$0")/../../.." || exit 1
source bench/candidates/ablate-lib.sh
# STOP_AT=SECONDS: timings that would start after it are skipped (a call short of device time keeps its output)
stop_at=${STOP_AT:-560}
eval "lib_$(declare -f run)"
run() {
  ((SECONDS < stop_at)) || { echo "skipped at t=${SECONDS}s: $1 on $3"; return 0; }
  lib_run "$@"
}
task=tasks/004_chunked_gated_deltanet
cand=bench/candidates/004_deltanet_cuda  # tools and copies
sol=tasks/004_chunked_gated_deltanet/expert  # the solution (the task's expert since 2026-12-07)
workloads=(qwen3_next_h32_16seq_64k qwen3_next_h32_4seq_16k qwen3_next_h32_1seq_32k qwen3_next_tp2_h16_64seq_8k)
check_builds() {  # gpu-check.sh on the builds named (GPU_CHECK_BUILDS's form): its mismatches and summary
  echo "== gpu-check.sh: $1 (t=${SECONDS}s)"
  GPU_CHECK_BUILDS="$1" bash $cand/gpu-check.sh >/tmp/gpu-check.txt 2>&1
  grep -E "MISMATCH|returned|CUDA:|hang" /tmp/gpu-check.txt | head -20
  sed -n '/^== summary/,$p' /tmp/gpu-check.txt
}
eval_copy() {  # d2k eval (every workload, cold timing) of the candidates matching $1, after copying solution.cu with
  # the defines given to ${cand}_ws (made here, never committed)
  echo "== d2k eval: $1, the copy with ${defines[*]} (t=${SECONDS}s)"
  mkdir -p ${cand}_ws
  { for d in "${defines[@]}"; do echo "#define ${d/=/ }"; done; cat $sol/solution.cu; } >${cand}_ws/solution.cu
  sed 's/^name = .*/name = "cuda_ws"/' $sol/solution.toml >${cand}_ws/solution.toml
  GPU_DEADLINE=$((560 - SECONDS)) CANDIDATES="$1" SUITE_ARGS="--seeds 1 --max-time 1 --no-baselines" \
    SUITE_TASK_TIMEOUT=240 OUT=/tmp/call-eval bash scripts/gpu-check.sh candidates 2>&1 | grep -vE '^\[' |
    sed -n '/^== summary/,$p'
}
prep_phases() {  # the prep's phase clocks on 16seq_64k with the defines given
  local args=() d
  for d in "$@"; do args+=(--define "$d"); done
  timeout 60 python3 bench/profile_cuda_solution.py "$task" "$sol" qwen3_next_h32_16seq_64k --calls 3 \
    --define D2K_ONLY_PREP --define D2K_PREP_PHASES "${args[@]}" 2>&1 | grep -E "^prep phases|rror" | tail -1
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
if [[ $part == 1 ]]; then
  echo "== ptxas, D2K_WS (t=${SECONDS}s)"
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -shared -Iinclude -DD2K_WS \
    -Xptxas -v $sol/solution.cu -o /tmp/cand004ws.so 2>&1 | grep -A2 "properties for.*walk_ws" | grep -E "spill|Used"
  echo "== gpu-check.sh (t=${SECONDS}s)"
  bash $cand/gpu-check.sh >/tmp/gpu-check.txt 2>&1
  grep -E "MISMATCH|returned|CUDA:|hang" /tmp/gpu-check.txt | head -20
  sed -n '/^== summary/,$p' /tmp/gpu-check.txt
  [[ -n ${OUT:-} ]] && cp /tmp/gpu-check.txt "$OUT/"
  echo "== warm medians, default against D2K_WS (t=${SECONDS}s)"
  for w in "${workloads[@]}"; do
    run "cuda, classic" "$sol" "$w" D2K_CLASSIC
    run "cuda, WS" "$sol" "$w" D2K_WS
    run "cuda, WS WS_WGMMA=1" "$sol" "$w" D2K_WS D2K_WS_WGMMA=1
    run "cuda, WS WS_WGMMA=2" "$sol" "$w" D2K_WS D2K_WS_WGMMA=2
  done
  echo "== phase clocks, D2K_WS (t=${SECONDS}s)"
  for w in qwen3_next_h32_16seq_64k qwen3_next_h32_1seq_32k; do
    for extra in "" "--define D2K_WS_WGMMA=1" "--define D2K_WS_WGMMA=2"; do
      # shellcheck disable=SC2086  # extra is zero or two words
      timeout 90 python3 bench/profile_cuda_solution.py "$task" "$sol" "$w" --calls 3 --define D2K_PHASES \
        --define D2K_WS $extra 2>&1 | grep -E "^phases|median|rror" | tail -2
    done
  done
elif [[ $part == 3 ]]; then
  # D2K_WS_PREP (2026-12-06): the producer measured as the bottleneck in part 1 (H100: T and P 14.5k cycles a chunk
  # against the state warps' 4.6-6.6k), so T comes from the prep kernel and the producer makes only P and the factors.
  check_builds "WS,WS_PREP:auto WS,WS_PREP:1 WS,WS_PREP,WS_WGMMA=2:auto WS,WS_PREP,WS_WGMMA=1:auto"
  echo "== warm medians, default against D2K_WS_PREP (t=${SECONDS}s)"
  for w in "${workloads[@]}"; do
    run "cuda, classic" "$sol" "$w" D2K_CLASSIC
    run "cuda, WS_PREP" "$sol" "$w" D2K_WS D2K_WS_PREP
    run "cuda, WS_PREP WS_WGMMA=1" "$sol" "$w" D2K_WS D2K_WS_PREP D2K_WS_WGMMA=1
    run "cuda, WS_PREP WS_WGMMA=2" "$sol" "$w" D2K_WS D2K_WS_PREP D2K_WS_WGMMA=2
  done
  echo "== phase clocks, D2K_WS_PREP, walk only (t=${SECONDS}s)"
  for extra in "" "--define D2K_WS_WGMMA=2"; do
    # shellcheck disable=SC2086  # extra is zero or two words
    timeout 90 python3 bench/profile_cuda_solution.py "$task" "$sol" qwen3_next_h32_16seq_64k --calls 3 \
      --define D2K_PHASES --define D2K_WS --define D2K_WS_PREP $extra 2>&1 | grep -E "^phases|median|rror" | tail -2
    # shellcheck disable=SC2086
    timeout 90 python3 bench/profile_cuda_solution.py "$task" "$sol" qwen3_next_h32_16seq_64k --calls 20 \
      --define D2K_ONLY_WALK --define D2K_WS --define D2K_WS_PREP $extra 2>&1 | tail -1
  done
  eval_copy "004_deltanet_cuda_ws"
elif [[ $part == 4 ]]; then
  # (~3 min) D2K_WS_PREP's producer phases split finer (tail and norms, barrier, factors, Q K^T, P's epilogue), with
  # P's eight k-steps in one wgmma batch or two; the default against D2K_WS_PREP D2K_WS_WGMMA=2 on 16seq_64k.
  check_builds "WS,WS_PREP:auto WS,WS_PREP,WS_WGMMA=2:auto WS,WS_PREP,WS_WGMMA=2,P_BATCH=4:auto"
  echo "== phase clocks (t=${SECONDS}s)"
  for extra in "" "--define D2K_P_BATCH=4"; do
    # shellcheck disable=SC2086  # extra is zero or two words
    timeout 90 python3 bench/profile_cuda_solution.py "$task" "$sol" qwen3_next_h32_16seq_64k --calls 3 \
      --define D2K_PHASES --define D2K_WS --define D2K_WS_PREP --define D2K_WS_WGMMA=2 $extra 2>&1 |
      grep -E "^phases|rror" | tail -1
  done
  echo "== warm medians (t=${SECONDS}s)"
  w=qwen3_next_h32_16seq_64k
  run "cuda, classic" "$sol" "$w" D2K_CLASSIC
  run "cuda, WS_PREP WS_WGMMA=2" "$sol" "$w" D2K_WS D2K_WS_PREP D2K_WS_WGMMA=2
  run "cuda, WS_PREP WS_WGMMA=2 P_BATCH=4" "$sol" "$w" D2K_WS D2K_WS_PREP D2K_WS_WGMMA=2 D2K_P_BATCH=4
  run "cuda, WS_PREP WS_WGMMA=2, walk only" "$sol" "$w" D2K_WS D2K_WS_PREP D2K_WS_WGMMA=2 D2K_ONLY_WALK
  run "cuda, prep only" "$sol" "$w" D2K_ONLY_PREP
elif [[ $part == 5 ]]; then
  # (~6 min) D2K_WS_WGMMA=3 (written 2026-12-06, CPU-checked only): T y and P v_new by wgmma in the state warps, fewer
  # instructions there (if the producer starves for issue slots, it gains too); D2K_PREP_PACK (same day, CPU-checked
  # only): the prep in 36 KB, six CTAs per SM. gpu-check, warm medians against the classic walk and the default, the
  # prep alone, phases, then `d2k eval` of a copy with the defines given after the part.
  check_builds "WS,WS_PREP,WS_WGMMA=3:auto WS,WS_PREP,WS_WGMMA=3:1 WS,WS_WGMMA=3:auto default:auto PREP_PACK:auto"
  echo "== warm medians (t=${SECONDS}s)"
  for w in "${workloads[@]}"; do
    run "cuda, classic" "$sol" "$w" D2K_CLASSIC
    run "cuda (WS_PREP WS_WGMMA=2)" "$sol" "$w"
    run "cuda, WS_PREP WS_WGMMA=3" "$sol" "$w" D2K_WS D2K_WS_PREP D2K_WS_WGMMA=3
    run "cuda, PREP_PACK" "$sol" "$w" D2K_PREP_PACK
  done
  w=qwen3_next_h32_16seq_64k
  run "cuda, prep only" "$sol" "$w" D2K_ONLY_PREP
  run "cuda, prep only, PREP_PACK" "$sol" "$w" D2K_ONLY_PREP D2K_PREP_PACK
  echo "== prep phases (t=${SECONDS}s)"
  prep_phases
  prep_phases D2K_PREP_PACK
  echo "== phase clocks (t=${SECONDS}s)"
  for f in 2 3; do
    timeout 90 python3 bench/profile_cuda_solution.py "$task" "$sol" qwen3_next_h32_16seq_64k --calls 3 \
      --define D2K_PHASES --define D2K_WS --define D2K_WS_PREP --define D2K_WS_WGMMA=$f 2>&1 | grep -E "^phases|rror" |
      tail -1
  done
  eval_copy "004_deltanet_cuda_ws"
elif [[ $part == 6 ]]; then
  # (~5 min, eighteenth session) after ncu (H100): the prep's Gram matrix by wgmma with branch-free factors (default;
  # D2K_PREP_MMA the mma.sync form), the producer's P epilogue branch-free with ex2.approx.ftz. gpu-check, warm
  # medians (default, WGMMA=3, PREP_PACK, both, PREP_MMA), the prep alone and its phases, the walk's phases, then
  # `d2k eval` of a copy with the defines given after the part.
  check_builds "default:auto default:1 PREP_PACK:auto PREP_MMA:auto WS,WS_PREP,WS_WGMMA=3:auto PREP_PACK,WS,WS_PREP,WS_WGMMA=3:auto"
  echo "== warm medians (t=${SECONDS}s)"
  for w in "${workloads[@]}"; do
    run "cuda (default)" "$sol" "$w"
    run "cuda, WS_WGMMA=3" "$sol" "$w" D2K_WS D2K_WS_PREP D2K_WS_WGMMA=3
    run "cuda, PREP_PACK" "$sol" "$w" D2K_PREP_PACK
    run "cuda, PREP_PACK WS_WGMMA=3" "$sol" "$w" D2K_PREP_PACK D2K_WS D2K_WS_PREP D2K_WS_WGMMA=3
  done
  w=qwen3_next_h32_16seq_64k
  run "cuda, PREP_MMA (the old prep)" "$sol" "$w" D2K_PREP_MMA
  run "cuda, prep only" "$sol" "$w" D2K_ONLY_PREP
  run "cuda, prep only, PREP_PACK" "$sol" "$w" D2K_ONLY_PREP D2K_PREP_PACK
  run "cuda, prep only, PREP_MMA" "$sol" "$w" D2K_ONLY_PREP D2K_PREP_MMA
  run "cuda, walk only" "$sol" "$w" D2K_ONLY_WALK
  echo "== prep phases (t=${SECONDS}s)"
  prep_phases
  prep_phases D2K_PREP_PACK
  echo "== walk phase clocks (t=${SECONDS}s)"
  timeout 90 python3 bench/profile_cuda_solution.py "$task" "$sol" $w --calls 3 --define D2K_PHASES 2>&1 |
    grep -E "^phases|rror" | tail -1
  eval_copy "004_deltanet_cuda_ws"
elif [[ $part == 7 ]]; then
  # (~3 min) the record of the default on this machine: warm medians (default, WGMMA=3, classic; the prep and the walk
  # alone) on 16seq_64k, then `d2k eval` of the solution itself (the task's expert since 2026-12-07).
  w=qwen3_next_h32_16seq_64k
  echo "== warm medians (t=${SECONDS}s)"
  run "cuda (default)" "$sol" "$w"
  run "cuda, WS_WGMMA=3" "$sol" "$w" D2K_WS D2K_WS_PREP D2K_WS_WGMMA=3
  run "cuda, classic" "$sol" "$w" D2K_CLASSIC
  run "cuda, prep only" "$sol" "$w" D2K_ONLY_PREP
  run "cuda, walk only" "$sol" "$w" D2K_ONLY_WALK
  echo "== d2k eval: the default (t=${SECONDS}s)"
  GPU_DEADLINE=$((560 - SECONDS)) SUITE_TASKS="004" SUITE_ARGS="--seeds 1 --max-time 1 --no-baselines" \
    SUITE_TASK_TIMEOUT=240 OUT=/tmp/call-eval bash scripts/gpu-check.sh experts 2>&1 | grep -vE '^\[' |
    sed -n '/^== summary/,$p'
elif [[ $part == 8 ]]; then
  # (~4 min) D2K_PREP_PERSIST (written 2026-12-06 after part 6, CPU-checked): gpu-check, warm medians against the
  # default on the four workloads, the prep alone and its phases, then `d2k eval` of a copy with the defines given.
  check_builds "PREP_PERSIST:auto PREP_PERSIST:1 PREP_PERSIST,PREP_GRID=7:auto PREP_PERSIST,WS,WS_PREP,WS_WGMMA=3:auto"
  echo "== warm medians (t=${SECONDS}s)"
  for w in "${workloads[@]}"; do
    run "cuda (default)" "$sol" "$w"
    run "cuda, PREP_PERSIST" "$sol" "$w" D2K_PREP_PERSIST
  done
  w=qwen3_next_h32_16seq_64k
  run "cuda, prep only" "$sol" "$w" D2K_ONLY_PREP
  run "cuda, prep only, PREP_PERSIST" "$sol" "$w" D2K_ONLY_PREP D2K_PREP_PERSIST
  echo "== prep phases (t=${SECONDS}s)"
  prep_phases D2K_PREP_PERSIST
  eval_copy "004_deltanet_cuda_ws"
elif [[ $part == 9 ]]; then
  # (~2 min; written 2026-12-06 when no device time was left, not run yet) the persistent prep as default past 16 items
  # per CTA: gpu-check of the default's choice, warm medians against the one-item prep (D2K_PREP_ONE).
  check_builds "default:auto default:1 PREP_PERSIST,PREP_GRID=7:auto"
  echo "== warm medians (t=${SECONDS}s)"
  for w in qwen3_next_h32_16seq_64k qwen3_next_h32_4seq_16k qwen3_next_tp2_h16_64seq_8k; do
    run "cuda (default)" "$sol" "$w"
    run "cuda, PREP_ONE" "$sol" "$w" D2K_PREP_ONE
  done
elif [[ $part == 10 ]]; then
  # (~6 min, nineteenth session) the default's choice of prep (part 9's builds), the table entries carried two items
  # ahead in the persistent prep (default; D2K_PREP_AHEAD_OFF the old form) and T's rows leaving by tensor stores
  # (D2K_PREP_TSTORE): gpu-check, warm medians, the prep's phases, then `d2k eval` of the candidate and of a copy
  # with the defines given after the part (e.g. `10 D2K_PREP_TSTORE`).
  check_builds "default:auto default:1 PREP_PERSIST,PREP_GRID=7:auto PREP_PERSIST,PREP_AHEAD_OFF:auto PREP_TSTORE:auto PREP_PERSIST,PREP_TSTORE,PREP_GRID=7:auto"
  echo "== warm medians (t=${SECONDS}s)"
  w=qwen3_next_h32_16seq_64k
  run "cuda (default)" "$sol" "$w"
  run "cuda, PREP_AHEAD_OFF" "$sol" "$w" D2K_PREP_AHEAD_OFF
  run "cuda, PREP_TSTORE" "$sol" "$w" D2K_PREP_TSTORE
  run "cuda, prep only" "$sol" "$w" D2K_ONLY_PREP
  run "cuda, prep only, AHEAD_OFF" "$sol" "$w" D2K_ONLY_PREP D2K_PREP_AHEAD_OFF
  run "cuda, prep only, TSTORE" "$sol" "$w" D2K_ONLY_PREP D2K_PREP_TSTORE
  run "cuda, walk only" "$sol" "$w" D2K_ONLY_WALK
  for w in qwen3_next_h32_4seq_16k qwen3_next_h32_1seq_32k; do
    run "cuda (default)" "$sol" "$w"
    run "cuda, PREP_TSTORE" "$sol" "$w" D2K_PREP_TSTORE
  done
  run "cuda, PREP_PERSIST" "$sol" qwen3_next_h32_4seq_16k D2K_PREP_PERSIST
  echo "== prep phases (t=${SECONDS}s)"
  prep_phases
  prep_phases D2K_PREP_TSTORE
  eval_copy "004_deltanet_cuda*"
elif [[ $part == 11 ]]; then
  check_builds "default:auto T_SUBST:auto T_SUBST:1 PREP_TSTORE:auto T_SUBST,PREP_TSTORE:auto PREP_PERSIST,PREP_TSTORE,T_SUBST,PREP_GRID=7:auto CLASSIC,T_SUBST:auto"
  eval_copy "004_deltanet_cuda_ws"  # first after the check: the record, should the call be cut short
  echo "== warm medians (t=${SECONDS}s)"
  w=qwen3_next_h32_16seq_64k
  run "cuda (default)" "$sol" "$w"
  run "cuda, PREP_TSTORE" "$sol" "$w" D2K_PREP_TSTORE
  run "cuda, T_SUBST" "$sol" "$w" D2K_T_SUBST
  run "cuda, T_SUBST PREP_TSTORE" "$sol" "$w" D2K_T_SUBST D2K_PREP_TSTORE
  run "cuda, prep only" "$sol" "$w" D2K_ONLY_PREP
  run "cuda, prep only, TSTORE" "$sol" "$w" D2K_ONLY_PREP D2K_PREP_TSTORE
  run "cuda, prep only, T_SUBST TSTORE" "$sol" "$w" D2K_ONLY_PREP D2K_T_SUBST D2K_PREP_TSTORE
  run "cuda, walk only" "$sol" "$w" D2K_ONLY_WALK
  run "cuda, walk only, T_SUBST" "$sol" "$w" D2K_ONLY_WALK D2K_T_SUBST
  for w in qwen3_next_h32_4seq_16k qwen3_next_h32_1seq_32k qwen3_next_tp2_h16_64seq_8k; do
    run "cuda (default)" "$sol" "$w"
    run "cuda, T_SUBST PREP_TSTORE" "$sol" "$w" D2K_T_SUBST D2K_PREP_TSTORE
  done
  echo "== phases (t=${SECONDS}s)"
  prep_phases D2K_T_SUBST D2K_PREP_TSTORE
  timeout 60 python3 bench/profile_cuda_solution.py "$task" "$sol" qwen3_next_h32_16seq_64k --calls 3 \
    --define D2K_PHASES --define D2K_T_SUBST 2>&1 | grep -E "^phases|rror" | tail -1
else
  eval_copy "004_deltanet_cuda_ws"
fi
echo "== done (t=${SECONDS}s)"
