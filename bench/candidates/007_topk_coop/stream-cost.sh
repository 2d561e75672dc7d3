#!/usr/bin/env bash
# The list's cost on the stream (NOTES.md, "What to try next" 1), warm-L2 medians on llama3_b256_v128256: the whole
# kernel, the stream alone with and without lists, without appends (the threshold test kept), without the early
# bound, and with neither. A short subset of ablate-variants.sh for a call with little device time.
# Usage (on the GPU machine, repository root): bash bench/candidates/007_topk_coop/stream-cost.sh [WORKLOAD]
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
source bench/candidates/ablate-lib.sh
task=tasks/007_topk_topp_sampling
cand=bench/candidates/007_topk_coop
w=${1:-llama3_b256_v128256}
run "coop" "$cand" "$w"
run "coop, stream alone" "$cand" "$w" STREAM_ONLY
run "coop, stream alone, no list" "$cand" "$w" STREAM_ONLY NO_LIST
run "coop, stream alone, no appends" "$cand" "$w" STREAM_ONLY NO_APPEND
run "coop, stream alone, NO_EARLY" "$cand" "$w" STREAM_ONLY NO_EARLY
run "coop, stream alone, NO_EARLY NO_APPEND" "$cand" "$w" STREAM_ONLY NO_EARLY NO_APPEND
run "coop, L2HINT" "$cand" "$w" L2HINT
run "expert" tasks/007_topk_topp_sampling/expert "$w"
