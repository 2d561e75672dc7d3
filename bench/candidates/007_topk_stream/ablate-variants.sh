#!/usr/bin/env bash
# Variants of the 007 "stream" candidate (H200), warm-L2 CUDA-event medians (bench/profile_cuda_solution.py): the
# stream alone with and without the list, the ring depth, the list capacity, the histogram variant.
# Usage (on the GPU machine): bash bench/candidates/007_topk_stream/ablate-variants.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
source bench/candidates/ablate-lib.sh
task=tasks/007_topk_topp_sampling
cand=bench/candidates/007_topk_stream
for w in llama3_b256_v128256 llama3_b16_v128256; do
  run "stream alone, no list" "$cand" "$w" STREAM_ONLY NO_LIST
  run "stream alone" "$cand" "$w" STREAM_ONLY
  run "stream alone, no compaction" "$cand" "$w" STREAM_ONLY NO_COMPACT
  run "stream alone, window 4" "$cand" "$w" STREAM_ONLY WINDOW=4.0f
  run "stream" "$cand" "$w"
done
w=llama3_b256_v128256
run "stream alone, no list, STAGES=4" "$cand" "$w" STREAM_ONLY NO_LIST STAGES=4
run "stream, CAP=4096 STAGES=4" "$cand" "$w" CAP=4096 STAGES=4
run "stream, HIST" "$cand" "$w" HIST
run "stream, WINDOW=12" "$cand" "$w" WINDOW=12.0f
run "stream, EARLY" "$cand" "$w" EARLY
run "stream, BATCH" "$cand" "$w" BATCH
