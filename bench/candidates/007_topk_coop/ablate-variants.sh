#!/usr/bin/env bash
# Variants of the 007 "coop" candidate (H200), warm-L2 CUDA-event medians (bench/profile_cuda_solution.py): lists
# only for small top_k, the list and ring sizes, no early bound, the pass's chunks and draws, the CTA-alone pass,
# warp-private list segments, and the stream alone with and without lists.
# Usage (on the GPU machine): bash bench/candidates/007_topk_coop/ablate-variants.sh [WORKLOAD ...]
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/candidates/ablate-lib.sh
task=tasks/007_topk_topp_sampling
cand=bench/candidates/007_topk_coop
workloads=("$@")
((${#workloads[@]})) || workloads=(llama3_b256_v128256)
for w in "${workloads[@]}"; do
  run "coop" "$cand" "$w"
  run "coop, NO_ALLLIST (lists for top_k <= 128)" "$cand" "$w" NO_ALLLIST
  run "coop, NO_ALLLIST KLIST=1000" "$cand" "$w" NO_ALLLIST KLIST=1000
  run "coop, CAP=8192 STAGES=2" "$cand" "$w" CAP=8192 STAGES=2
  run "coop, NO_EARLY" "$cand" "$w" NO_EARLY
  run "coop, CHUNKS=16" "$cand" "$w" CHUNKS=16
  run "coop, PROP=4" "$cand" "$w" PROP=4
  run "coop, SOLO" "$cand" "$w" SOLO
  run "coop, SEG" "$cand" "$w" SEG
  run "coop, stream alone" "$cand" "$w" STREAM_ONLY
  run "coop, stream alone, no list" "$cand" "$w" STREAM_ONLY NO_LIST
  run "coop, stream alone, no appends" "$cand" "$w" STREAM_ONLY NO_APPEND
  run "coop, stream alone, NO_EARLY" "$cand" "$w" STREAM_ONLY NO_EARLY
  run "coop, stream alone, NO_EARLY NO_APPEND" "$cand" "$w" STREAM_ONLY NO_EARLY NO_APPEND
  run "stream candidate" bench/candidates/007_topk_stream "$w"
done
