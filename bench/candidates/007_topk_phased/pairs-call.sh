#!/usr/bin/env bash
# `d2k eval --solutions expert,naive` (scripts/gpu-check.sh calibrate pairs targets) of task 007 with this
# candidate in the expert's place, on the device machine's copy of the tree only (the copy is discarded; the
# repository's expert changes only by a commit). Extra tasks for the same call: PAIRS_TASKS="007 004".
# Usage (GPU machine, repository root): bash bench/candidates/007_topk_phased/pairs-call.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
cp bench/candidates/007_topk_phased/solution.cu tasks/007_topk_topp_sampling/expert/solution.cu
export PYTHONUNBUFFERED=1
GPU_DEADLINE=${GPU_DEADLINE:-330} SUITE_TASKS="${PAIRS_TASKS:-007}" \
  SUITE_ARGS="--seeds 1 --max-time 1 --compile-baseline-timeout 60" SUITE_TASK_TIMEOUT=${SUITE_TASK_TIMEOUT:-280} \
  bash scripts/gpu-check.sh calibrate pairs targets 2>&1 | tail -60
