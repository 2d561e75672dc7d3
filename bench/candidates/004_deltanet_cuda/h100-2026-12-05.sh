#!/usr/bin/env bash
# The two short device calls after `planned-call.sh 0` on 2026-12-05 (an H100 was lent, not the H200): warm medians of
# the prep alone, the walk alone and the other workloads, then the chunk table alone (FUSE_T skips the prep, ONLY_PREP
# the walk) and the V split forced on 1seq_32k. Output: h100-2026-12-05-parts.txt.
# Run from the repository root on the GPU machine (carry .deps): bash bench/candidates/004_deltanet_cuda/h100-2026-12-05.sh
cd "$(dirname "$0")/../../.." || exit 1
source bench/candidates/ablate-lib.sh
task=tasks/004_chunked_gated_deltanet
c=bench/candidates/004_deltanet_cuda  # tools
s=tasks/004_chunked_gated_deltanet/expert  # the solution (the task's expert since 2026-12-07)
run "cuda, prep only" $s qwen3_next_h32_16seq_64k D2K_ONLY_PREP
run "cuda, walk only" $s qwen3_next_h32_16seq_64k D2K_ONLY_WALK
run "cuda, walk only WGMMA" $s qwen3_next_h32_16seq_64k D2K_ONLY_WALK D2K_WGMMA
run "cuda" $s qwen3_next_h32_1seq_32k
run "cuda" $s qwen3_next_h32_4seq_16k
run "cuda" $s qwen3_next_tp2_h16_64seq_8k
run "table only (FUSE_T, ONLY_PREP)" $s qwen3_next_h32_16seq_64k D2K_FUSE_T D2K_ONLY_PREP
run "cuda, SPLIT=1" $s qwen3_next_h32_1seq_32k D2K_SPLIT=1
run "cuda, SPLIT=2" $s qwen3_next_h32_1seq_32k D2K_SPLIT=2
run "table only" $s qwen3_next_h32_1seq_32k D2K_FUSE_T D2K_ONLY_PREP
